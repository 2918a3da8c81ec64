//! Network inputs drawn from a dataset: standardised vectors, or images standardised per
//! channel and turned channels-last as each row is drawn, straight from the (usually u8)
//! store.

use super::conv::{ChannelNorm, ImageShape};
use crate::data::Dataset;

/// Model inputs of a dataset's transitions, by row.
pub enum Inputs<'a> {
    /// Standardised per value up front, as f32 (vector states).
    Dense {
        obs: Vec<f32>,
        next: Vec<f32>,
        d: usize,
    },
    /// Standardised per channel and turned channels-last as each row is drawn, so the
    /// observations stay in the dataset's store (images).
    Image {
        data: &'a Dataset,
        norm: ChannelNorm,
        shape: ImageShape,
    },
}

impl<'a> Inputs<'a> {
    /// Column-standardised f32 copies (the statistics are of the observations).
    pub fn dense(data: &Dataset) -> (Self, Vec<f32>, Vec<f32>) {
        let d = data.obs_dim();
        let obs = data.observations.to_f32();
        let (mean, std) = crate::util::stats::column_stats(&obs, d);
        let o = crate::util::stats::standardise(&obs, &mean, &std);
        drop(obs);
        let next = crate::util::stats::standardise(&data.next_observations.to_f32(), &mean, &std);
        (Inputs::Dense { obs: o, next, d }, mean, std)
    }

    /// Rows drawn from the store, standardised with the observations' channel statistics.
    pub fn image(data: &'a Dataset, shape: ImageShape) -> Self {
        Inputs::Image {
            data,
            norm: ChannelNorm::of(&data.observations, shape),
            shape,
        }
    }

    /// Values per row.
    pub fn dim(&self) -> usize {
        match self {
            Inputs::Dense { d, .. } => *d,
            Inputs::Image { shape, .. } => shape.len(),
        }
    }

    /// Number of transitions.
    pub fn len(&self) -> usize {
        match self {
            Inputs::Dense { obs, d, .. } => obs.len() / (*d).max(1),
            Inputs::Image { data, .. } => data.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Observation (`next == false`) or next observation `i` into `out`.
    pub fn fill(&self, i: usize, next: bool, out: &mut [f32]) {
        match self {
            Inputs::Dense { obs, next: nx, d } => {
                let src = if next { nx } else { obs };
                out.copy_from_slice(&src[i * d..(i + 1) * d]);
            }
            Inputs::Image { data, norm, shape } => {
                let store = if next {
                    &data.next_observations
                } else {
                    &data.observations
                };
                norm.fill(store, i, *shape, out);
            }
        }
    }

    /// Rows `idx` as `[idx.len(), dim]` host vectors `(observations, next observations)`.
    pub fn gather(&self, idx: &[usize], s: &mut Vec<f32>, s2: &mut Vec<f32>) {
        let d = self.dim();
        s.resize(idx.len() * d, 0.0);
        s2.resize(idx.len() * d, 0.0);
        for (j, &i) in idx.iter().enumerate() {
            self.fill(i, false, &mut s[j * d..(j + 1) * d]);
            self.fill(i, true, &mut s2[j * d..(j + 1) * d]);
        }
    }
}
