//! int8 export for microcontrollers without an FPU (or to shrink flash).
//!
//! Plain rounding to int8 (per output row, symmetric) moves V by up to ~2e-2 on the grid
//! model, enough to reorder states whose values differ by less. With calibration states
//! (the dataset the model will see), the weights are first fine-tuned with the rounding
//! in the loop (straight-through estimator) to reproduce the f32 model's Q values, so the
//! final rounding is the one the network was trained through.

use crate::export::{Layer, ValueModel};
use anyhow::{bail, Result};
use candle_core::{Device, Tensor, Var};

#[derive(Clone, Debug)]
pub struct QuantizeConfig {
    pub steps: usize,
    pub lr: f64,
    /// At most this many distinct calibration states are used.
    pub max_states: usize,
}

impl Default for QuantizeConfig {
    fn default() -> Self {
        QuantizeConfig {
            steps: 3000,
            lr: 2e-4,
            max_states: 4096,
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

fn outputs(layers: &[(Var, Var)], x: &Tensor, quant: bool) -> candle_core::Result<Tensor> {
    let mut h = x.clone();
    for (i, (w, b)) in layers.iter().enumerate() {
        let w = if quant {
            fake_quant(w.as_tensor())?
        } else {
            w.as_tensor().clone()
        };
        h = h.matmul(&w.t()?)?.broadcast_add(b.as_tensor())?;
        if i + 1 < layers.len() {
            h = h.relu()?;
        }
    }
    Ok(h)
}

/// Distinct rows of a row-major `[n, d]` matrix, in order of first appearance, at most `max`.
fn distinct_rows(x: &[f32], d: usize, max: usize) -> Vec<f32> {
    let mut seen = std::collections::HashSet::new();
    let mut out = vec![];
    for row in x.chunks_exact(d) {
        if out.len() / d >= max {
            break;
        }
        if seen.insert(row.iter().map(|v| v.to_bits()).collect::<Vec<_>>()) {
            out.extend_from_slice(row);
        }
    }
    out
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
    let states = distinct_rows(calibration, d, cfg.max_states);
    let n = states.len() / d;
    let x: Vec<f32> = states
        .chunks_exact(d)
        .flat_map(|s| {
            s.iter()
                .zip(&model.mean)
                .zip(&model.scale)
                .map(|((v, m), k)| (v - m) * k)
        })
        .collect();
    let x = Tensor::from_vec(x, (n, d), device)?;
    let layers = model
        .layers
        .iter()
        .map(|l| {
            let w = Var::from_tensor(&Tensor::from_slice(
                &l.weight,
                (l.out_dim, l.in_dim),
                device,
            )?)?;
            let b = Var::from_tensor(&Tensor::from_slice(&l.bias, (1, l.out_dim), device)?)?;
            Ok((w, b))
        })
        .collect::<Result<Vec<_>>>()?;
    let teacher = outputs(&layers, &x, false)?.detach();
    let vars: Vec<Var> = layers
        .iter()
        .flat_map(|(w, b)| [w.clone(), b.clone()])
        .collect();
    use candle_nn::Optimizer;
    let mut opt = candle_nn::AdamW::new(
        vars,
        candle_nn::ParamsAdamW {
            lr: cfg.lr,
            weight_decay: 0.0,
            ..Default::default()
        },
    )?;
    let bar = crate::progress::bar(cfg.steps as u64, "int8 calibration");
    for step in 0..cfg.steps {
        if step * 3 == cfg.steps * 2 {
            opt.set_learning_rate(cfg.lr * 0.1);
        }
        let loss = (outputs(&layers, &x, true)? - &teacher)?
            .sqr()?
            .mean_all()?;
        opt.backward_step(&loss)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut out = model.clone();
    out.layers = layers
        .iter()
        .zip(&model.layers)
        .map(|((w, b), l)| {
            Ok(Layer {
                out_dim: l.out_dim,
                in_dim: l.in_dim,
                weight: w.as_tensor().flatten_all()?.to_vec1()?,
                bias: b.as_tensor().flatten_all()?.to_vec1()?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(out)
}
