//! Neural-network pieces shared by mining, Q-learning and the RL baselines: seeded
//! initialisation (candle's CPU RNG cannot be seeded), variable maps, the [`Mlp`], the
//! [`Adam`] optimiser and the convolutional networks of image observations ([`conv`]).

pub mod adam;
pub mod conv;
pub mod inputs;
pub mod mlp;
pub mod ops;

pub use adam::{Adam, AdamConfig};
pub use mlp::Mlp;

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Overwrites every variable, in sorted-name order, from a seeded RNG: weights and biases
/// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as PyTorch's `nn.Linear`, embeddings N(0, 1).
pub fn init_vars(varmap: &VarMap, seed: u64) -> Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let data = varmap
        .data()
        .lock()
        .map_err(|_| anyhow::anyhow!("variable map poisoned"))?;
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    for name in names {
        let var = &data[name];
        let dims = var.dims().to_vec();
        let n: usize = dims.iter().product();
        let values: Vec<f32> = if name.ends_with(".weight") {
            let bound = 1.0 / (dims.get(1).copied().unwrap_or(1) as f32).sqrt();
            (0..n).map(|_| rng.random_range(-bound..bound)).collect()
        } else if name.ends_with(".bias") {
            let wname = format!("{}.weight", name.trim_end_matches(".bias"));
            let fan_in = data
                .get(&wname)
                .and_then(|w| w.dims().get(1).copied())
                .with_context(|| format!("bias `{name}` has no matching weight"))?;
            let bound = 1.0 / (fan_in as f32).sqrt();
            (0..n).map(|_| rng.random_range(-bound..bound)).collect()
        } else {
            (0..n).map(|_| normal(&mut rng)).collect()
        };
        var.set(&Tensor::from_vec(values, dims.as_slice(), var.device())?)?;
    }
    Ok(())
}

/// A fresh variable map and builder on `device`.
pub fn new_varmap(device: &Device) -> (VarMap, VarBuilder<'static>) {
    let vm = VarMap::new();
    let vb = VarBuilder::from_varmap(&vm, DType::F32, device);
    (vm, vb)
}

/// Every variable of a map, sorted by name (the map itself iterates in hash order).
pub fn sorted_vars(varmap: &VarMap) -> Result<Vec<(String, Var)>> {
    let data = varmap
        .data()
        .lock()
        .map_err(|_| anyhow::anyhow!("variable map poisoned"))?;
    let mut v: Vec<(String, Var)> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(v)
}

/// Copies into every variable of `dst` the same-named variable of `src` (which may hold
/// more, e.g. BCQ's imitation network beside the Q-network).
pub fn copy_vars(src: &VarMap, dst: &VarMap) -> Result<()> {
    let s = src
        .data()
        .lock()
        .map_err(|_| anyhow::anyhow!("variable map poisoned"))?;
    for (name, var) in sorted_vars(dst)? {
        let from = s
            .get(&name)
            .with_context(|| format!("no variable `{name}` to copy from"))?;
        var.set(from.as_tensor())?;
    }
    Ok(())
}

/// A standard normal sample (Box-Muller), so results do not depend on `rand_distr`.
pub fn normal(rng: &mut impl Rng) -> f32 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_is_seeded() {
        let dev = Device::Cpu;
        let make = |seed| {
            let (vm, vb) = new_varmap(&dev);
            let mlp = Mlp::new(vb, &[3, 5, 2]).unwrap();
            init_vars(&vm, seed).unwrap();
            mlp.to_host().unwrap()
        };
        assert_eq!(make(1), make(1));
        assert_ne!(make(1), make(2));
    }
}
