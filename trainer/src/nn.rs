//! Small neural-network pieces shared by mining and Q-learning: seeded initialisation
//! (candle's CPU RNG cannot be seeded), a plain MLP, and an Adam whose state we own
//! (candle's keeps its moments private and costs ~10 tensor ops per parameter per step).

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{Linear, Module, VarBuilder, VarMap};
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

/// A standard normal sample (Box-Muller), so results do not depend on `rand_distr`.
pub fn normal(rng: &mut impl Rng) -> f32 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

/// A ReLU multi-layer perceptron: `dims[0] -> dims[1] -> ... -> dims[L]`, no activation
/// after the last layer. Layers are named `layers.{i}` (the export format's names).
#[derive(Clone, Debug)]
pub struct Mlp {
    pub layers: Vec<Linear>,
}

impl Mlp {
    pub fn new(vb: VarBuilder, dims: &[usize]) -> Result<Self> {
        if dims.len() < 2 {
            bail!("an MLP needs at least an input and an output size, got {dims:?}");
        }
        let layers = dims
            .windows(2)
            .enumerate()
            .map(|(i, w)| candle_nn::linear(w[0], w[1], vb.pp(format!("layers.{i}"))))
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Mlp { layers })
    }

    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let mut h = x.clone();
        let last = self.layers.len() - 1;
        for (i, l) in self.layers.iter().enumerate() {
            h = l.forward(&h)?;
            if i < last {
                h = h.relu()?;
            }
        }
        Ok(h)
    }

    /// Weights `[out, in]` and biases `[out]` of every layer, as host vectors.
    pub fn to_host(&self) -> Result<Vec<(Vec<usize>, Vec<f32>, Vec<f32>)>> {
        self.layers
            .iter()
            .map(|l| {
                let w = l.weight();
                let b = l.bias().context("layer without bias")?;
                Ok((w.dims().to_vec(), w.flatten_all()?.to_vec1()?, b.to_vec1()?))
            })
            .collect()
    }
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

/// A borrowed view of an [`Adam`]'s state: `(name, parameters, m, v)` per variable.
pub struct AdamState<'a> {
    pub tensors: Vec<(&'a str, &'a [f32], &'a [f32], &'a [f32])>,
    pub t: i32,
    pub lr: f64,
    pub weight_decay: f64,
}

/// Adam (Kingma & Ba) with L2 weight decay added to the gradient, as PyTorch's `Adam`.
/// The moments live in host vectors: one read of the gradient and one write of the
/// parameter per variable and step.
pub struct Adam {
    vars: Vec<(String, Var)>,
    /// Host copy of every parameter: the optimiser is the variables' only writer.
    p: Vec<Vec<f32>>,
    m: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    pub lr: f64,
    pub weight_decay: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    t: i32,
}

impl Adam {
    pub fn new(varmap: &VarMap, lr: f64, weight_decay: f64) -> Result<Self> {
        let vars = sorted_vars(varmap)?;
        let p = vars
            .iter()
            .map(|(_, v)| v.flatten_all()?.to_vec1())
            .collect::<candle_core::Result<Vec<Vec<f32>>>>()?;
        let m = vars
            .iter()
            .map(|(_, v)| vec![0.0; v.elem_count()])
            .collect();
        let v = vars
            .iter()
            .map(|(_, v)| vec![0.0; v.elem_count()])
            .collect();
        Ok(Adam {
            vars,
            p,
            m,
            v,
            lr,
            weight_decay,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            t: 0,
        })
    }

    /// Overwrites row `row` of the 2-D variable `name` and forgets its moments.
    pub fn overwrite_row(&mut self, name: &str, row: usize, values: &[f32]) -> Result<()> {
        let i = self
            .vars
            .iter()
            .position(|(n, _)| n == name)
            .with_context(|| format!("no variable `{name}`"))?;
        let var = &self.vars[i].1;
        let cols = var.dims().get(1).copied().unwrap_or(1);
        if values.len() != cols || (row + 1) * cols > self.p[i].len() {
            bail!("row {row} of `{name}` does not fit {} values", values.len());
        }
        let r = row * cols..(row + 1) * cols;
        self.p[i][r.clone()].copy_from_slice(values);
        self.m[i][r.clone()].fill(0.0);
        self.v[i][r].fill(0.0);
        var.set(&Tensor::from_slice(&self.p[i], var.dims(), var.device())?)?;
        Ok(())
    }

    /// Everything a checkpoint needs to continue exactly: per variable (sorted by name)
    /// its parameters and moments, plus the step count and learning rate.
    pub fn state(&self) -> AdamState<'_> {
        AdamState {
            tensors: self
                .vars
                .iter()
                .enumerate()
                .map(|(i, (n, _))| {
                    (
                        n.as_str(),
                        self.p[i].as_slice(),
                        self.m[i].as_slice(),
                        self.v[i].as_slice(),
                    )
                })
                .collect(),
            t: self.t,
            lr: self.lr,
            weight_decay: self.weight_decay,
        }
    }

    /// Names of the variables this optimiser updates, sorted.
    pub fn var_names(&self) -> Vec<String> {
        self.vars.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Restores a saved [`Adam::state`]: `(parameters, m, v)` per variable in
    /// [`Adam::var_names`] order. The variables take the saved parameters.
    pub fn restore(
        &mut self,
        t: i32,
        lr: f64,
        arrays: Vec<(Vec<f32>, Vec<f32>, Vec<f32>)>,
    ) -> Result<()> {
        if arrays.len() != self.vars.len() {
            bail!(
                "checkpoint holds {} optimiser arrays, the network has {}",
                arrays.len(),
                self.vars.len()
            );
        }
        for (i, (p, m, v)) in arrays.into_iter().enumerate() {
            let var = &self.vars[i].1;
            let n = var.elem_count();
            if p.len() != n || m.len() != n || v.len() != n {
                bail!(
                    "checkpoint arrays of `{}` do not match its size {n}",
                    self.vars[i].0
                );
            }
            var.set(&Tensor::from_slice(&p, var.dims(), var.device())?)?;
            self.p[i] = p;
            self.m[i] = m;
            self.v[i] = v;
        }
        self.t = t;
        self.lr = lr;
        Ok(())
    }

    pub fn backward_step(&mut self, loss: &Tensor) -> Result<()> {
        let grads = loss.backward()?;
        self.t += 1;
        let bc1 = 1.0 - self.beta1.powi(self.t);
        let bc2 = 1.0 - self.beta2.powi(self.t);
        let step = (self.lr / bc1) as f32;
        let (b1, b2, eps, wd) = (
            self.beta1 as f32,
            self.beta2 as f32,
            self.eps as f32,
            self.weight_decay as f32,
        );
        let inv_bc2 = (1.0 / bc2) as f32;
        for (i, (_, var)) in self.vars.iter().enumerate() {
            let Some(g) = grads.get(var) else { continue };
            let g: Vec<f32> = g.flatten_all()?.to_vec1()?;
            let (p, m, v) = (&mut self.p[i], &mut self.m[i], &mut self.v[i]);
            for j in 0..p.len() {
                let gj = g[j] + wd * p[j];
                m[j] = b1 * m[j] + (1.0 - b1) * gj;
                v[j] = b2 * v[j] + (1.0 - b2) * gj * gj;
                p[j] -= step * m[j] / ((v[j] * inv_bc2).sqrt() + eps);
            }
            var.set(&Tensor::from_slice(p, var.dims(), var.device())?)?;
        }
        Ok(())
    }
}

/// Mean and standard deviation of each column of a row-major `[n, d]` matrix; a column
/// with no spread gets std 1 so that standardising it is the identity shift.
pub fn column_stats(x: &[f32], d: usize) -> (Vec<f32>, Vec<f32>) {
    let n = (x.len() / d.max(1)).max(1) as f64;
    let mut mean = vec![0f64; d];
    for row in x.chunks_exact(d) {
        for (m, v) in mean.iter_mut().zip(row) {
            *m += *v as f64;
        }
    }
    mean.iter_mut().for_each(|m| *m /= n);
    let mut var = vec![0f64; d];
    for row in x.chunks_exact(d) {
        for ((s, v), m) in var.iter_mut().zip(row).zip(&mean) {
            *s += (*v as f64 - m).powi(2);
        }
    }
    let std = var
        .iter()
        .map(|s| {
            let sd = (s / n).sqrt();
            if sd > 1e-6 {
                sd as f32
            } else {
                1.0
            }
        })
        .collect();
    (mean.into_iter().map(|m| m as f32).collect(), std)
}

/// `(x - mean) / std` row by row.
pub fn standardise(x: &[f32], mean: &[f32], std: &[f32]) -> Vec<f32> {
    let d = mean.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        for j in 0..d {
            out.push((row[j] - mean[j]) / std[j]);
        }
    }
    out
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

    #[test]
    fn adam_fits_a_line() {
        let dev = Device::Cpu;
        let (vm, vb) = new_varmap(&dev);
        let mlp = Mlp::new(vb, &[1, 1]).unwrap();
        init_vars(&vm, 0).unwrap();
        let mut opt = Adam::new(&vm, 0.05, 0.0).unwrap();
        let x = Tensor::new(&[[0f32], [1.], [2.], [3.]], &dev).unwrap();
        let y = Tensor::new(&[[1f32], [3.], [5.], [7.]], &dev).unwrap();
        for _ in 0..2000 {
            let loss = (mlp.forward(&x).unwrap() - &y)
                .unwrap()
                .sqr()
                .unwrap()
                .mean_all()
                .unwrap();
            opt.backward_step(&loss).unwrap();
        }
        let (_, w, b) = &mlp.to_host().unwrap()[0];
        assert!(
            (w[0] - 2.0).abs() < 1e-2 && (b[0] - 1.0).abs() < 1e-2,
            "{w:?} {b:?}"
        );
    }
}
