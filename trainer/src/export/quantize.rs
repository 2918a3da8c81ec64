//! int8 export for microcontrollers without an FPU (or to shrink flash).
//!
//! Plain rounding to int8 (per output row, symmetric) moves V by up to ~2e-2 on the grid
//! model, enough to reorder states whose values differ by less. With calibration states
//! (the dataset the model will see), the weights are first fine-tuned with the rounding
//! in the loop (straight-through estimator) to reproduce the f32 model's Q values, so the
//! final rounding is the one the network was trained through. Then the last layer (a
//! small share of the weights) is kept in f32 and refitted by least squares on the
//! quantised network's features, which removes most of the remaining error: int8 noise
//! of ~6e-3 reorders grid states whose values differ by ~1e-3.

use crate::export::{Layer, ValueModel};
use crate::nn::{Adam, AdamConfig, Mlp};
use anyhow::{bail, Result};
use candle_core::{Device, Tensor};
use candle_nn::{Module, Optimizer};

#[derive(Clone, Debug)]
pub struct QuantizeConfig {
    pub steps: usize,
    pub lr: f64,
    /// At most this many distinct calibration states are used.
    pub max_states: usize,
    /// Keep the last layer in f32, refitted to the f32 model's outputs.
    pub refit_last: bool,
}

impl Default for QuantizeConfig {
    fn default() -> Self {
        QuantizeConfig {
            steps: 3000,
            lr: 2e-4,
            max_states: 4096,
            refit_last: true,
        }
    }
}

/// Weights rounded to the int8 grid with the gradient passed straight through.
fn fake_quant(w: &Tensor) -> candle_core::Result<Tensor> {
    let scale = (w.abs()?.max_keepdim(1)? / 127.0)?
        .clamp(1e-12f32, f32::MAX)?
        .detach();
    let q = w
        .broadcast_div(&scale)?
        .round()?
        .clamp(-127f32, 127f32)?
        .broadcast_mul(&scale)?;
    w + (q - w)?.detach()
}

/// Returns a copy of `model` whose weights, once rounded by `ValueModel::to_bytes(true)`,
/// best reproduce the f32 model's outputs on `calibration` states (raw, `[n * D]`).
pub fn calibrate_int8(
    model: &ValueModel,
    calibration: &[f32],
    cfg: &QuantizeConfig,
    device: &Device,
) -> Result<ValueModel> {
    let d = model.input_dim();
    if calibration.is_empty() || !calibration.len().is_multiple_of(d) {
        bail!("calibration states must be a non-empty [n, {d}] matrix");
    }
    let mut distinct = crate::data::dedup::RowIndex::new(d);
    for row in calibration.chunks_exact(d) {
        if distinct.len() >= cfg.max_states {
            break;
        }
        distinct.insert(row);
    }
    let states = distinct.rows();
    let n = states.len() / d;
    // The linear layers' inputs; an image model's convolutions stay f32 and fixed.
    let x = match &model.conv {
        Some(_) => model.features(states, device)?,
        None => {
            let x: Vec<f32> = states
                .chunks_exact(d)
                .flat_map(|s| {
                    s.iter()
                        .zip(&model.mean)
                        .zip(&model.scale)
                        .map(|((v, m), k)| (v - m) * k)
                })
                .collect();
            Tensor::from_vec(x, (n, d), device)?
        }
    };
    let mut dims = vec![model.layers.first().map_or(0, |l| l.in_dim)];
    dims.extend(model.layers.iter().map(|l| l.out_dim));
    let (vm, vb) = crate::nn::new_varmap(device);
    let mlp = Mlp::new(vb, &dims)?;
    for (i, l) in model.layers.iter().enumerate() {
        let data = vm
            .data()
            .lock()
            .map_err(|_| anyhow::anyhow!("variable map poisoned"))?;
        let var = |name: String| {
            data.get(&name)
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("no variable `{name}`"))
        };
        var(format!("layers.{i}.weight"))?.set(&Tensor::from_slice(
            &l.weight,
            (l.out_dim, l.in_dim),
            device,
        )?)?;
        var(format!("layers.{i}.bias"))?.set(&Tensor::from_slice(&l.bias, l.out_dim, device)?)?;
    }
    let teacher = mlp.forward(&x)?.detach();
    let mut opt = Adam::for_varmap(&vm, AdamConfig::new(cfg.lr, 0.0))?;
    let bar = crate::util::progress::bar(cfg.steps as u64, "int8 calibration");
    for step in 0..cfg.steps {
        if step * 3 == cfg.steps * 2 {
            opt.set_learning_rate(cfg.lr * 0.1);
        }
        let loss = (mlp.forward_with(&x, fake_quant)? - &teacher)?
            .sqr()?
            .mean_all()?;
        opt.backward_step(&loss)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut out = model.clone();
    out.keep_f32.clear();
    out.layers = mlp
        .to_host()?
        .into_iter()
        .map(|(dims, weight, bias)| Layer {
            out_dim: dims[0],
            in_dim: dims[1],
            weight,
            bias,
        })
        .collect();
    if cfg.refit_last && out.layers.len() > 1 {
        let last = out.layers.len() - 1;
        // Features as the runtime will compute them: every earlier layer rounded to int8.
        let mut rounded = out.clone();
        for l in &mut rounded.layers[..last] {
            let (q, sc) = crate::export::quantize_rows(&l.weight, l.in_dim);
            l.weight = q
                .iter()
                .enumerate()
                .map(|(j, &v)| v as f32 * sc[j / l.in_dim])
                .collect();
        }
        // The features: every earlier layer, and the ReLU after the last of them.
        let hidden = rounded.mlp(device)?;
        let mut h = x.clone();
        for l in &hidden.layers[..last] {
            h = l.forward(&h)?.relu()?;
        }
        let h: Vec<Vec<f32>> = h.to_vec2()?;
        let t: Vec<Vec<f32>> = teacher.to_vec2()?;
        let (weight, bias) = least_squares(&h, &t)?;
        let l = &mut out.layers[last];
        l.weight = weight;
        l.bias = bias;
        out.keep_f32 = vec![last];
    }
    Ok(out)
}

/// Ridge-regularised least squares for `y ≈ W h + b`, every output at once. Returns
/// `W` row-major `[outputs, features]` and `b`.
fn least_squares(h: &[Vec<f32>], y: &[Vec<f32>]) -> Result<(Vec<f32>, Vec<f32>)> {
    let n = h.len();
    let f = h.first().map(|r| r.len()).unwrap_or(0) + 1;
    let k = y.first().map(|r| r.len()).unwrap_or(0);
    let row = |i: usize, j: usize| if j + 1 == f { 1.0 } else { h[i][j] as f64 };
    let mut g = vec![0f64; f * f];
    let mut r = vec![0f64; f * k];
    for i in 0..n {
        for a in 0..f {
            let ha = row(i, a);
            for b in 0..f {
                g[a * f + b] += ha * row(i, b);
            }
            for o in 0..k {
                r[a * k + o] += ha * y[i][o] as f64;
            }
        }
    }
    let trace: f64 = (0..f).map(|a| g[a * f + a]).sum();
    for a in 0..f {
        g[a * f + a] += 1e-9 * trace.max(1e-12) + 1e-12;
    }
    let Some(l) = crate::util::stats::cholesky(&g, f) else {
        bail!("least-squares refit is ill-conditioned");
    };
    let mut w = vec![0f32; k * (f - 1)];
    let mut bias = vec![0f32; k];
    for o in 0..k {
        let rhs: Vec<f64> = (0..f).map(|a| r[a * k + o]).collect();
        let z = crate::util::stats::forward_substitute(&l, f, &rhs);
        let mut sol = vec![0f64; f];
        for a in (0..f).rev() {
            let mut sum = z[a];
            for c in a + 1..f {
                sum -= l[c * f + a] * sol[c];
            }
            sol[a] = sum / l[a * f + a];
        }
        for j in 0..f - 1 {
            w[o * (f - 1) + j] = sol[j] as f32;
        }
        bias[o] = sol[f - 1] as f32;
    }
    Ok((w, bias))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_squares_recovers_a_linear_map() {
        let h: Vec<Vec<f32>> = (0..20)
            .map(|i| vec![i as f32, (i * i % 7) as f32])
            .collect();
        let y: Vec<Vec<f32>> = h.iter().map(|r| vec![2.0 * r[0] - r[1] + 0.5]).collect();
        let (w, b) = least_squares(&h, &y).unwrap();
        assert!(
            (w[0] - 2.0).abs() < 1e-4 && (w[1] + 1.0).abs() < 1e-4 && (b[0] - 0.5).abs() < 1e-3,
            "{w:?} {b:?}"
        );
    }
}
