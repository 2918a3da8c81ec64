//! The one de-duplication of states: distinct rows of f32 values, keyed by their exact bit
//! patterns (so -0.0 and 0.0, or two NaN payloads, are different rows), indexed in order of
//! first appearance.

use std::collections::HashMap;

/// Distinct rows of `width` values.
///
/// ```
/// let mut idx = laq::data::dedup::RowIndex::new(2);
/// assert_eq!(idx.insert(&[1.0, 2.0]), 0);
/// assert_eq!(idx.insert(&[3.0, 4.0]), 1);
/// assert_eq!(idx.insert(&[1.0, 2.0]), 0);
/// assert_eq!(idx.get(&[3.0, 4.0]), Some(1));
/// assert_eq!(idx.rows(), &[1.0, 2.0, 3.0, 4.0]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct RowIndex {
    map: HashMap<Vec<u32>, usize>,
    width: usize,
    rows: Vec<f32>,
}

impl RowIndex {
    /// An empty index of rows of `width` values.
    pub fn new(width: usize) -> Self {
        RowIndex {
            width,
            ..Default::default()
        }
    }

    /// Every observation of `data`, then every next observation.
    pub fn of_states(data: &super::Dataset) -> Self {
        let mut idx = RowIndex::new(data.obs_dim());
        for i in 0..data.len() {
            idx.insert(&data.obs_row(i));
        }
        for i in 0..data.len() {
            idx.insert(&data.next_obs_row(i));
        }
        idx
    }

    /// The id of `row`, added if new.
    pub fn insert(&mut self, row: &[f32]) -> usize {
        let n = self.len();
        let rows = &mut self.rows;
        *self.map.entry(key(row)).or_insert_with(|| {
            rows.extend_from_slice(row);
            n
        })
    }

    /// The id of `row`, if present.
    pub fn get(&self, row: &[f32]) -> Option<usize> {
        self.map.get(&key(row)).copied()
    }

    /// Number of distinct rows.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Values per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.rows[i * self.width..(i + 1) * self.width]
    }

    /// Every distinct row, row-major `[len, width]`.
    pub fn rows(&self) -> &[f32] {
        &self.rows
    }
}

fn key(row: &[f32]) -> Vec<u32> {
    row.iter().map(|v| v.to_bits()).collect()
}
