//! The density gate the runtime evaluates (paper, appendix on extrapolation error): a
//! diagonal Gaussian mixture over raw state values (all dimensions or chosen ones), fitted
//! by EM on the data's observations, and a log-density threshold below which a state
//! counts as outside the data, so that V there is not trusted (`Model::gated_value`,
//! `Model::select`).

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// The gate as the model file holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct DensityGate {
    /// Mixture weights `[M]`, summing to 1.
    pub weights: Vec<f32>,
    /// Component means `[M, G]` over raw state values.
    pub means: Vec<f32>,
    /// Diagonal variances `[M, G]`, all > 0.
    pub variances: Vec<f32>,
    /// The state dimensions the gate reads (`None`: all, G = D).
    pub dims: Option<Vec<i32>>,
    /// log p(s) below which a state is outside the data.
    pub threshold: f32,
}

/// Settings of the density gate (`[density]` in `config.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DensityConfig {
    /// Fit a gate and write it into the model.
    pub enabled: bool,
    /// The state dimensions it reads (empty: all).
    pub dims: Vec<usize>,
    /// Mixture components.
    pub components: usize,
    /// The share of the data's own states (in percent) that falls below the threshold
    /// (the paper: 1%).
    pub percentile: f64,
    /// EM iterations.
    pub iterations: usize,
}

impl Default for DensityConfig {
    fn default() -> Self {
        DensityConfig {
            enabled: false,
            dims: vec![],
            components: 8,
            percentile: 1.0,
            iterations: 50,
        }
    }
}

impl DensityConfig {
    /// An error where `dims` names a dimension that states of `d` values lack.
    pub fn check_dims(&self, d: usize) -> Result<()> {
        if let Some(&bad) = self.dims.iter().find(|&&g| g >= d) {
            bail!("density.dims names dimension {bad}, but states have {d}");
        }
        Ok(())
    }
}

/// Variance floor, relative to each dimension's variance over the data: keeps a component
/// from collapsing onto a few identical states.
const VARIANCE_FLOOR: f64 = 1e-4;

/// k-means runs the mixture may start from.
const KMEANS_RESTARTS: u64 = 4;

impl DensityGate {
    /// Fits the gate to raw states `[n * d]` (at most `max_rows` of them, evenly spaced).
    pub fn fit(states: &[f32], d: usize, cfg: &DensityConfig, seed: u64) -> Result<Self> {
        let n = states.len() / d.max(1);
        if n == 0 || cfg.components == 0 {
            bail!("a density gate needs states and at least one component");
        }
        cfg.check_dims(d)?;
        let dims: Vec<usize> = if cfg.dims.is_empty() {
            (0..d).collect()
        } else {
            cfg.dims.clone()
        };
        let g = dims.len();
        let x: Vec<f64> = states
            .chunks_exact(d)
            .flat_map(|row| dims.iter().map(move |&j| row[j] as f64))
            .collect();
        let m = cfg.components.min(n);
        // Per-dimension variance over the data, for the floor and the initial spread.
        let mut mean = vec![0f64; g];
        for row in x.chunks_exact(g) {
            for (a, v) in mean.iter_mut().zip(row) {
                *a += v / n as f64;
            }
        }
        let mut var = vec![0f64; g];
        for row in x.chunks_exact(g) {
            for ((a, v), mu) in var.iter_mut().zip(row).zip(&mean) {
                *a += (v - mu).powi(2) / n as f64;
            }
        }
        let floor: Vec<f64> = var
            .iter()
            .map(|v| (v * VARIANCE_FLOOR).max(1e-12))
            .collect();
        // EM from random means and the data's spread often settles on every component
        // covering every cluster; it starts instead from the best (least within-cluster
        // spread, standardised) of a few k-means runs, since one run can split along the
        // wrong axis too.
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let mut best: Option<(f64, Vec<f64>, Vec<usize>, Vec<u32>)> = None;
        for restart in 0..KMEANS_RESTARTS {
            let assign = crate::stages::labels::kmeans(&x32, g, m, 10, seed + restart)?;
            let mut mu = vec![0f64; m * g];
            let mut count = vec![0usize; m];
            for (i, &a) in assign.iter().enumerate() {
                count[a as usize] += 1;
                for j in 0..g {
                    mu[a as usize * g + j] += x[i * g + j];
                }
            }
            for k in 0..m {
                for j in 0..g {
                    mu[k * g + j] /= count[k].max(1) as f64;
                }
            }
            let spread: f64 = assign
                .iter()
                .enumerate()
                .map(|(i, &a)| {
                    (0..g)
                        .map(|j| {
                            (x[i * g + j] - mu[a as usize * g + j]).powi(2) / var[j].max(1e-12)
                        })
                        .sum::<f64>()
                })
                .sum();
            if best.as_ref().is_none_or(|b| spread < b.0) {
                best = Some((spread, mu, count, assign));
            }
        }
        let Some((_, mut mu, count, assign)) = best else {
            bail!("no k-means run for the density gate");
        };
        let mut sigma2 = vec![0f64; m * g];
        for (i, &a) in assign.iter().enumerate() {
            let a = a as usize;
            for j in 0..g {
                sigma2[a * g + j] += (x[i * g + j] - mu[a * g + j]).powi(2);
            }
        }
        for k in 0..m {
            for j in 0..g {
                sigma2[k * g + j] = if count[k] > 1 {
                    (sigma2[k * g + j] / count[k] as f64).max(floor[j])
                } else {
                    var[j].max(1e-12)
                };
            }
        }
        let mut w: Vec<f64> = count
            .iter()
            .map(|&c| (c.max(1) as f64) / n as f64)
            .collect();
        let mut resp = vec![0f64; n * m];
        for _ in 0..cfg.iterations {
            // E step: responsibilities from log-likelihoods, normalised per state.
            for i in 0..n {
                let row = &x[i * g..(i + 1) * g];
                let r = &mut resp[i * m..(i + 1) * m];
                for k in 0..m {
                    r[k] = w[k].ln()
                        + log_gauss(row, &mu[k * g..(k + 1) * g], &sigma2[k * g..(k + 1) * g]);
                }
                let top = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = r.iter().map(|v| (v - top).exp()).sum();
                for v in r.iter_mut() {
                    *v = (*v - top).exp() / sum;
                }
            }
            // M step.
            for k in 0..m {
                let nk: f64 = (0..n).map(|i| resp[i * m + k]).sum::<f64>().max(1e-12);
                w[k] = nk / n as f64;
                for j in 0..g {
                    let mk = (0..n).map(|i| resp[i * m + k] * x[i * g + j]).sum::<f64>() / nk;
                    let vk = (0..n)
                        .map(|i| resp[i * m + k] * (x[i * g + j] - mk).powi(2))
                        .sum::<f64>()
                        / nk;
                    mu[k * g + j] = mk;
                    sigma2[k * g + j] = vk.max(floor[j]);
                }
            }
        }
        let total: f64 = w.iter().sum();
        let mut gate = DensityGate {
            weights: w.iter().map(|v| (v / total) as f32).collect(),
            means: mu.iter().map(|&v| v as f32).collect(),
            variances: sigma2.iter().map(|&v| v as f32).collect(),
            dims: (!cfg.dims.is_empty()).then(|| dims.iter().map(|&j| j as i32).collect()),
            threshold: 0.0,
        };
        let logp: Vec<f64> = states
            .chunks_exact(d)
            .map(|s| gate.log_density(s) as f64)
            .collect();
        gate.threshold = crate::util::stats::percentile(&logp, cfg.percentile) as f32;
        Ok(gate)
    }

    /// log p(s) of a raw state, as the runtime computes it (f32, log-sum-exp).
    pub fn log_density(&self, state: &[f32]) -> f32 {
        let m = self.weights.len();
        let g = self.means.len() / m.max(1);
        let value = |j: usize| match &self.dims {
            Some(d) => state[d[j] as usize],
            None => state[j],
        };
        let terms: Vec<f32> = (0..m)
            .map(|k| {
                let mut q = 0f32;
                for j in 0..g {
                    let v = self.variances[k * g + j];
                    let diff = value(j) - self.means[k * g + j];
                    q += diff * diff / v + (2.0 * std::f32::consts::PI * v).ln();
                }
                self.weights[k].ln() - 0.5 * q
            })
            .collect();
        let top = terms.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        top + terms.iter().map(|t| (t - top).exp()).sum::<f32>().ln()
    }
}

fn log_gauss(x: &[f64], mu: &[f64], var: &[f64]) -> f64 {
    x.iter()
        .zip(mu)
        .zip(var)
        .map(|((x, m), v)| -0.5 * ((x - m).powi(2) / v + (2.0 * std::f64::consts::PI * v).ln()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn two_blobs_gate_the_space_between_them() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut states = vec![];
        for i in 0..2000 {
            let c = if i % 2 == 0 { -5.0 } else { 5.0 };
            states.push(c + crate::nn::normal(&mut rng) * 0.3);
            states.push(crate::nn::normal(&mut rng) * 0.3);
            states.push(7.0); // a dimension the gate ignores
        }
        let cfg = DensityConfig {
            enabled: true,
            dims: vec![0, 1],
            components: 2,
            ..Default::default()
        };
        let gate = DensityGate::fit(&states, 3, &cfg, 0).unwrap();
        assert_eq!(gate.dims, Some(vec![0, 1]));
        assert!(gate.log_density(&[5.0, 0.0, -100.0]) > gate.threshold);
        assert!(gate.log_density(&[-5.0, 0.1, 0.0]) > gate.threshold);
        assert!(gate.log_density(&[0.0, 0.0, 7.0]) < gate.threshold);
        let below = states
            .chunks_exact(3)
            .filter(|s| gate.log_density(s) < gate.threshold)
            .count();
        assert!(
            (10..=40).contains(&below),
            "{below} of 2000 below the 1% threshold"
        );
        assert!(DensityGate::fit(
            &states,
            3,
            &DensityConfig {
                dims: vec![3],
                ..cfg
            },
            0
        )
        .is_err());
    }
}
