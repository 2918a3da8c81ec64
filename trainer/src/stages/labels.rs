//! Where the action label of each transition comes from: mined latent actions, the
//! baselines of the paper (one action, clustering), or ground truth and its variants.

use crate::data::Dataset;
use crate::stages::checkpoint::Checkpointer;
use crate::stages::mining::{self, MiningConfig};
use anyhow::{bail, Result};
use candle_core::Device;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LabelSource {
    /// Latent actions mined by the forward model (LAQ).
    Latent,
    /// One action for every transition: Q-learning becomes TD(0) policy evaluation.
    Single,
    /// Ground-truth actions (needs `actions`).
    Gt,
    /// Each ground-truth action mapped at random to one of 4 labels: a 4x refinement.
    #[value(name = "gt-refined4")]
    GtRefined4,
    /// Ground truth with probability 0.5, a random action otherwise.
    Impure,
    /// k-means on the concatenation [s, s'].
    Cluster,
    /// k-means on the difference s' - s.
    #[value(name = "cluster-diff")]
    ClusterDiff,
}

impl LabelSource {
    pub const ALL: [LabelSource; 7] = [
        LabelSource::Latent,
        LabelSource::Single,
        LabelSource::Gt,
        LabelSource::GtRefined4,
        LabelSource::Impure,
        LabelSource::Cluster,
        LabelSource::ClusterDiff,
    ];

    /// The name used in `metrics.json` (snake case).
    pub fn key(self) -> &'static str {
        match self {
            LabelSource::Latent => "latent",
            LabelSource::Single => "single",
            LabelSource::Gt => "gt",
            LabelSource::GtRefined4 => "gt_refined4",
            LabelSource::Impure => "impure",
            LabelSource::Cluster => "cluster",
            LabelSource::ClusterDiff => "cluster_diff",
        }
    }
}

/// Labels and what produced them.
pub struct Labelled {
    pub labels: Vec<u32>,
    /// Number of distinct labels the Q-function needs.
    pub num_actions: usize,
    pub mining_loss: Option<Vec<f32>>,
    /// Mined labels on vector states: the share of each value's change that the forward
    /// model explains ([`mining::Mined::explained`]).
    pub explained: Option<Vec<f32>>,
}

/// Labels every transition of `data` with `source`; mining saves its state through
/// `ckpt` and continues from a resumed one (the other sources take seconds).
///
/// Rows without a next observation ([`Dataset::next_missing`]) are terminal: their value
/// is their reward whatever the label, so they take the most used label of the others,
/// and the labels are made (the forward model trained) on the rows that have one.
pub fn make(
    source: LabelSource,
    data: &Dataset,
    mining: &MiningConfig,
    seed: u64,
    device: &Device,
    ckpt: Option<&mut Checkpointer>,
) -> Result<Labelled> {
    if data.missing_next_count() == 0 {
        return make_all(source, data, mining, seed, device, ckpt);
    }
    let rows = data.rows_with_next();
    if rows.is_empty() {
        bail!("no transition has a next observation, so there is nothing to label");
    }
    let part = make_all(source, &data.select(&rows), mining, seed, device, ckpt)?;
    let common = most_used(&part.labels, part.num_actions);
    let mut labels = vec![common; data.len()];
    for (&i, &l) in rows.iter().zip(&part.labels) {
        labels[i] = l;
    }
    Ok(Labelled { labels, ..part })
}

/// The label most of `labels` carry (the lowest of equals), of `num_actions`.
pub fn most_used(labels: &[u32], num_actions: usize) -> u32 {
    let mut usage = vec![0usize; num_actions.max(1)];
    for &l in labels {
        usage[l as usize] += 1;
    }
    (0..usage.len())
        .max_by_key(|&a| (usage[a], usize::MAX - a))
        .unwrap_or(0) as u32
}

fn make_all(
    source: LabelSource,
    data: &Dataset,
    mining: &MiningConfig,
    seed: u64,
    device: &Device,
    ckpt: Option<&mut Checkpointer>,
) -> Result<Labelled> {
    let k = mining.latent_actions;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6c61_6265);
    let gt = || -> Result<(Vec<u32>, usize)> {
        let a = data.discrete_actions(&format!("labels `{}`", source.key()))?;
        let n = a.iter().copied().max().unwrap_or(0) as usize + 1;
        if n > 4096 {
            bail!(
                "ground-truth actions go up to {}, more than the 4096 supported",
                n - 1
            );
        }
        Ok((a.iter().map(|&x| x as u32).collect(), n))
    };
    let out = match source {
        LabelSource::Latent => {
            let m = mining::mine(data, mining, seed, device, ckpt)?;
            Labelled {
                labels: m.labels,
                num_actions: k,
                mining_loss: Some(m.loss_curve),
                explained: m.explained,
            }
        }
        LabelSource::Single => Labelled {
            labels: vec![0; data.len()],
            num_actions: 1,
            mining_loss: None,
            explained: None,
        },
        LabelSource::Gt => {
            let (labels, n) = gt()?;
            Labelled {
                labels,
                num_actions: n,
                mining_loss: None,
                explained: None,
            }
        }
        LabelSource::GtRefined4 => {
            let (labels, n) = gt()?;
            let labels = labels
                .iter()
                .map(|&a| a * 4 + rng.random_range(0..4))
                .collect();
            Labelled {
                labels,
                num_actions: n * 4,
                mining_loss: None,
                explained: None,
            }
        }
        LabelSource::Impure => {
            let (labels, n) = gt()?;
            let labels = labels
                .iter()
                .map(|&a| {
                    if rng.random::<f64>() < 0.5 {
                        a
                    } else {
                        rng.random_range(0..n as u32)
                    }
                })
                .collect();
            Labelled {
                labels,
                num_actions: n,
                mining_loss: None,
                explained: None,
            }
        }
        LabelSource::Cluster | LabelSource::ClusterDiff => {
            let (feats, d) = if data.is_image() {
                pooled(data)
            } else {
                (
                    (0..data.len())
                        .flat_map(|i| {
                            data.obs_row(i)
                                .iter()
                                .chain(data.next_obs_row(i).iter())
                                .copied()
                                .collect::<Vec<_>>()
                        })
                        .collect::<Vec<f32>>(),
                    data.obs_dim(),
                )
            };
            // `feats` holds [s, s'] per transition; the difference variant keeps s' - s.
            let feats: Vec<f32> = if source == LabelSource::Cluster {
                feats
            } else {
                feats
                    .chunks_exact(2 * d)
                    .flat_map(|r| r[d..].iter().zip(&r[..d]).map(|(b, a)| b - a))
                    .collect()
            };
            let dim = if source == LabelSource::Cluster {
                2 * d
            } else {
                d
            };
            let labels = kmeans(&feats, dim, k, 50, seed)?;
            Labelled {
                labels,
                num_actions: k,
                mining_loss: None,
                explained: None,
            }
        }
    };
    Ok(out)
}

/// Side of the grid that image observations are averaged down to before clustering.
pub const CLUSTER_GRID: usize = 8;

/// `[s, s']` of every transition of an image dataset with each channel averaged over
/// blocks down to at most [`CLUSTER_GRID`] x [`CLUSTER_GRID`], and the size of one pooled
/// observation. k-means on full frames would need the whole dataset as f32 features (and
/// its distances mostly measure texture); block averages keep where things are.
pub fn pooled(data: &Dataset) -> (Vec<f32>, usize) {
    let (c, h, w) = (data.obs_shape[0], data.obs_shape[1], data.obs_shape[2]);
    let (gh, gw) = (h.clamp(1, CLUSTER_GRID), w.clamp(1, CLUSTER_GRID));
    let d = c * gh * gw;
    let mut out = Vec::with_capacity(data.len() * 2 * d);
    let mut pool = |row: &[f32]| {
        for ch in 0..c {
            let plane = &row[ch * h * w..(ch + 1) * h * w];
            for gy in 0..gh {
                let (y0, y1) = (gy * h / gh, (gy + 1) * h / gh);
                for gx in 0..gw {
                    let (x0, x1) = (gx * w / gw, (gx + 1) * w / gw);
                    let mut sum = 0f64;
                    for y in y0..y1 {
                        sum += plane[y * w + x0..y * w + x1]
                            .iter()
                            .map(|&v| v as f64)
                            .sum::<f64>();
                    }
                    out.push((sum / ((y1 - y0) * (x1 - x0)).max(1) as f64) as f32);
                }
            }
        }
    };
    for i in 0..data.len() {
        pool(&data.obs_row(i));
        pool(&data.next_obs_row(i));
    }
    (out, d)
}

/// Lloyd's k-means with k-means++ seeding on standardised features. Returns each row's
/// cluster. Deterministic for a given seed.
pub fn kmeans(x: &[f32], dim: usize, k: usize, iters: usize, seed: u64) -> Result<Vec<u32>> {
    let n = x.len() / dim;
    if n == 0 || k == 0 {
        bail!("k-means needs data and k > 0");
    }
    let (mean, std) = crate::util::stats::column_stats(x, dim);
    let x = crate::util::stats::standardise(x, &mean, &std);
    let row = |i: usize| &x[i * dim..(i + 1) * dim];
    let dist = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum::<f32>();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6b6d_6561);
    // k-means++ on a subsample keeps seeding cheap on large datasets.
    let sample: Vec<usize> = if n > 20000 {
        (0..20000).map(|_| rng.random_range(0..n)).collect()
    } else {
        (0..n).collect()
    };
    let mut centres: Vec<f32> = row(sample[rng.random_range(0..sample.len())]).to_vec();
    let mut d2: Vec<f32> = sample
        .iter()
        .map(|&i| dist(row(i), &centres[..dim]))
        .collect();
    while centres.len() / dim < k {
        let total: f64 = d2.iter().map(|&v| v as f64).sum();
        let pick = if total <= 0.0 {
            sample[rng.random_range(0..sample.len())]
        } else {
            let mut t = rng.random::<f64>() * total;
            let mut chosen = sample[sample.len() - 1];
            for (j, &v) in d2.iter().enumerate() {
                t -= v as f64;
                if t <= 0.0 {
                    chosen = sample[j];
                    break;
                }
            }
            chosen
        };
        let c = row(pick).to_vec();
        for (j, &i) in sample.iter().enumerate() {
            d2[j] = d2[j].min(dist(row(i), &c));
        }
        centres.extend(c);
    }
    let mut assign = vec![0u32; n];
    for _ in 0..iters {
        let mut changed = false;
        for i in 0..n {
            let r = row(i);
            let best = (0..k)
                .map(|c| dist(r, &centres[c * dim..(c + 1) * dim]))
                .enumerate()
                .fold(
                    (0, f32::INFINITY),
                    |b, (c, v)| if v < b.1 { (c, v) } else { b },
                )
                .0 as u32;
            if best != assign[i] {
                assign[i] = best;
                changed = true;
            }
        }
        let mut sums = vec![0f64; k * dim];
        let mut counts = vec![0usize; k];
        for i in 0..n {
            let c = assign[i] as usize;
            counts[c] += 1;
            for (s, v) in sums[c * dim..(c + 1) * dim].iter_mut().zip(row(i)) {
                *s += *v as f64;
            }
        }
        for c in 0..k {
            if counts[c] > 0 {
                for j in 0..dim {
                    centres[c * dim + j] = (sums[c * dim + j] / counts[c] as f64) as f32;
                }
            }
        }
        if !changed {
            break;
        }
    }
    Ok(assign)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kmeans_separates_blobs() {
        let mut x = vec![];
        for i in 0..300 {
            let c = (i % 3) as f32 * 10.0;
            x.extend([c + (i as f32 * 0.37).sin(), c + (i as f32 * 0.91).cos()]);
        }
        let a = kmeans(&x, 2, 3, 50, 0).unwrap();
        for i in 0..300 {
            assert_eq!(a[i], a[i % 3], "row {i}");
        }
        assert_ne!(a[0], a[1]);
        assert_ne!(a[1], a[2]);
        assert_eq!(a, kmeans(&x, 2, 3, 50, 0).unwrap());
    }
}
