//! The one de-duplication of states: distinct rows of f32 values, keyed by their exact bit
//! patterns (so -0.0 and 0.0, or two NaN payloads, are different rows), indexed in order of
//! first appearance; collected into a [`RowIndex`], or, for a dataset's own states, named
//! by [`StateIds`] without copying them (frames would not fit twice).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use super::observations::Observations;
use super::Dataset;

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

/// The distinct states of a dataset, its observations first, then its next observations,
/// numbered in order of first appearance as [`RowIndex`] numbers them; two are the same
/// only when every stored value is (a frame's bytes, a vector's bit patterns). Only a hash
/// of each is kept, so a dataset of frames is de-duplicated without a second copy.
///
/// ```
/// use laq::data::{dedup::StateIds, Dataset};
/// let d = Dataset {
///     obs_shape: vec![1],
///     observations: vec![0u8, 1, 0].into(),
///     next_observations: vec![1u8, 2, 1].into(),
///     rewards: vec![0.0; 3],
///     terminals: vec![false; 3],
///     timeouts: None,
///     next_missing: Some(vec![false, true, false]),
///     actions: None,
/// };
/// let ids = StateIds::of(&d);
/// assert_eq!(ids.state, [0, 1, 0]);
/// // Row 1's next observation is missing; 2 appears nowhere else.
/// assert_eq!(ids.next, [Some(1), None, Some(1)]);
/// assert_eq!(ids.len(), 2);
/// assert_eq!(ids.rows(&d), [0.0, 1.0]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct StateIds {
    /// The id of row `i`'s observation.
    pub state: Vec<usize>,
    /// The id of row `i`'s next observation; `None` where it is missing.
    pub next: Vec<Option<usize>>,
    /// Where each id first appears: `(next observation?, row)`.
    first: Vec<(bool, usize)>,
}

impl StateIds {
    /// The ids of `data`'s states.
    pub fn of(data: &Dataset) -> Self {
        let d = data.obs_dim();
        let store = |next: bool| match next {
            false => &data.observations,
            true => &data.next_observations,
        };
        let as_f32 = data.observations.storage() != data.next_observations.storage();
        let mut by_hash: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut first: Vec<(bool, usize)> = vec![];
        let mut id = |next: bool, i: usize| -> usize {
            let (o, k) = (store(next), first.len());
            let same = by_hash.entry(row_hash(o, i, d, as_f32)).or_default();
            if let Some(&j) = same.iter().find(|&&j| {
                let (other, r) = first[j];
                same_row((o, i), (store(other), r), d)
            }) {
                return j;
            }
            same.push(k);
            first.push((next, i));
            k
        };
        let n = data.len();
        let state: Vec<usize> = (0..n).map(|i| id(false, i)).collect();
        let missing = |i: usize| data.next_missing.as_ref().is_some_and(|m| m[i]);
        let next = (0..n).map(|i| (!missing(i)).then(|| id(true, i))).collect();
        StateIds { state, next, first }
    }

    /// Number of distinct states.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// Every distinct state as f32, row-major `[len, obs_dim]` (a copy: for vector states).
    pub fn rows(&self, data: &Dataset) -> Vec<f32> {
        self.first
            .iter()
            .flat_map(|&(next, i)| match next {
                false => data.obs_row(i).into_owned(),
                true => data.next_obs_row(i).into_owned(),
            })
            .collect()
    }
}

/// A hash of row `i`: of its bytes, or (`as_f32`: where the other store keeps f32) of the
/// bit patterns of its values as f32, as equal rows must hash alike.
fn row_hash(o: &Observations, i: usize, d: usize, as_f32: bool) -> u64 {
    let mut h = DefaultHasher::new();
    match o {
        Observations::U8(v) if !as_f32 => v[i * d..(i + 1) * d].hash(&mut h),
        o => key(&o.row(i, d)).hash(&mut h),
    }
    h.finish()
}

fn same_row((a, i): (&Observations, usize), (b, j): (&Observations, usize), d: usize) -> bool {
    match (a, b) {
        (Observations::U8(a), Observations::U8(b)) => {
            a[i * d..(i + 1) * d] == b[j * d..(j + 1) * d]
        }
        _ => key(&a.row(i, d)) == key(&b.row(j, d)),
    }
}
