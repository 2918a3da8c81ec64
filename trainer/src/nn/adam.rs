//! Adam, the one optimiser of the trainer, behind candle's [`Optimizer`] trait. Its state
//! is ours (candle's keeps the moments private and costs ~10 tensor ops per parameter per
//! step): host vectors, one read of the gradient and one write of the parameter per
//! variable and step, and everything a checkpoint needs to continue exactly.

use anyhow::{bail, Context, Result};
use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use candle_nn::{Optimizer, VarMap};

/// Adam's settings; `Default` is PyTorch's (`lr` 1e-3, no weight decay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamConfig {
    pub lr: f64,
    /// L2 weight decay added to the gradient (PyTorch's `Adam`, not `AdamW`).
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig {
            lr: 1e-3,
            weight_decay: 0.0,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }
}

impl AdamConfig {
    /// The defaults with this learning rate and weight decay.
    pub fn new(lr: f64, weight_decay: f64) -> Self {
        AdamConfig {
            lr,
            weight_decay,
            ..Default::default()
        }
    }
}

/// A borrowed view of an [`Adam`]'s state: `(name, parameters, m, v)` per variable.
pub struct AdamState<'a> {
    pub tensors: Vec<(&'a str, &'a [f32], &'a [f32], &'a [f32])>,
    pub t: i32,
    pub lr: f64,
    pub weight_decay: f64,
}

/// Adam (Kingma & Ba) with L2 weight decay added to the gradient, as PyTorch's `Adam`.
///
/// ```
/// use candle_nn::{Module, Optimizer};
/// use laq::nn::{init_vars, new_varmap, Adam, AdamConfig, Mlp};
/// let dev = candle_core::Device::Cpu;
/// let (vm, vb) = new_varmap(&dev);
/// let mlp = Mlp::new(vb, &[1, 1])?;
/// init_vars(&vm, 0)?;
/// let mut opt = Adam::for_varmap(&vm, AdamConfig::new(0.05, 0.0))?;
/// let x = candle_core::Tensor::new(&[[0f32], [1.], [2.]], &dev)?;
/// let y = candle_core::Tensor::new(&[[1f32], [3.], [5.]], &dev)?;
/// for _ in 0..10 {
///     opt.backward_step(&(mlp.forward(&x)? - &y)?.sqr()?.mean_all()?)?;
/// }
/// # Ok::<(), anyhow::Error>(())
/// ```
pub struct Adam {
    vars: Vec<(String, Var)>,
    /// Host copy of every parameter: the optimiser is the variables' only writer.
    p: Vec<Vec<f32>>,
    m: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    cfg: AdamConfig,
    t: i32,
}

impl Optimizer for Adam {
    type Config = AdamConfig;

    /// Variables named by their position (`"0"`, `"1"`, ...): [`Adam::for_varmap`] names
    /// them as the map does, which checkpoints need.
    fn new(vars: Vec<Var>, cfg: AdamConfig) -> candle_core::Result<Self> {
        let named = vars
            .into_iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect();
        Self::with_names(named, cfg)
    }

    fn step(&mut self, grads: &GradStore) -> candle_core::Result<()> {
        self.t += 1;
        for (i, (_, var)) in self.vars.iter().enumerate() {
            let Some(g) = grads.get(var) else { continue };
            let g: Vec<f32> = g.flatten_all()?.to_vec1()?;
            let (p, m, v) = (&mut self.p[i], &mut self.m[i], &mut self.v[i]);
            update(&self.cfg, self.t, p, m, v, &g);
            var.set(&Tensor::from_slice(p, var.dims(), var.device())?)?;
        }
        Ok(())
    }

    fn learning_rate(&self) -> f64 {
        self.cfg.lr
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.cfg.lr = lr;
    }
}

/// One Adam update at step `t` (1-based) of parameters `p` with moments `m` and `v`, from
/// the gradient `g`: the arithmetic of [`Adam`], for parameters that live on the host
/// only (e.g. SAC's temperature).
pub fn update(cfg: &AdamConfig, t: i32, p: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]) {
    let k = Step::new(cfg, t);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the processor has AVX, checked just above (the detection includes the
        // operating system's support for its registers).
        unsafe { update_avx(k, p, m, v, g) };
        return;
    }
    update_body(k, p, m, v, g);
}

/// The per-step constants of [`update`].
#[derive(Clone, Copy)]
struct Step {
    b1: f32,
    b2: f32,
    eps: f32,
    wd: f32,
    step: f32,
    inv_bc2: f32,
}

impl Step {
    /// The constants at step `t` (1-based): bias corrections in f64, then f32.
    fn new(cfg: &AdamConfig, t: i32) -> Self {
        Step {
            b1: cfg.beta1 as f32,
            b2: cfg.beta2 as f32,
            eps: cfg.eps as f32,
            wd: cfg.weight_decay as f32,
            step: (cfg.lr / (1.0 - cfg.beta1.powi(t))) as f32,
            inv_bc2: (1.0 / (1.0 - cfg.beta2.powi(t))) as f32,
        }
    }
}

/// The body of [`update`], compiled a second time with AVX: eight lanes where the default
/// x86-64 target has four, for a loop bound by division and square root. Each element's
/// arithmetic is the same (no fused multiply-add: that is another feature), so both
/// builds give the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn update_avx(k: Step, p: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]) {
    update_body(k, p, m, v, g);
}

#[inline(always)]
fn update_body(k: Step, p: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]) {
    // Zipped slices have no bounds checks, so the loop vectorises.
    let moments = m.iter_mut().zip(v.iter_mut());
    for ((pj, gj), (mj, vj)) in p.iter_mut().zip(g).zip(moments) {
        let gj = gj + k.wd * *pj;
        *mj = k.b1 * *mj + (1.0 - k.b1) * gj;
        *vj = k.b2 * *vj + (1.0 - k.b2) * gj * gj;
        *pj -= k.step * *mj / ((*vj * k.inv_bc2).sqrt() + k.eps);
    }
}

impl Adam {
    /// Every variable of `varmap`, named and ordered as the map's sorted names.
    pub fn for_varmap(varmap: &VarMap, cfg: AdamConfig) -> Result<Self> {
        Ok(Self::with_names(super::sorted_vars(varmap)?, cfg)?)
    }

    fn with_names(vars: Vec<(String, Var)>, cfg: AdamConfig) -> candle_core::Result<Self> {
        let p = vars
            .iter()
            .map(|(_, v)| v.flatten_all()?.to_vec1())
            .collect::<candle_core::Result<Vec<Vec<f32>>>>()?;
        let zeros = || {
            vars.iter()
                .map(|(_, v)| vec![0.0; v.elem_count()])
                .collect::<Vec<_>>()
        };
        let (m, v) = (zeros(), zeros());
        Ok(Adam {
            vars,
            p,
            m,
            v,
            cfg,
            t: 0,
        })
    }

    /// The settings (with the current learning rate).
    pub fn config(&self) -> &AdamConfig {
        &self.cfg
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
            lr: self.cfg.lr,
            weight_decay: self.cfg.weight_decay,
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
        self.cfg.lr = lr;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{init_vars, new_varmap, Mlp};
    use candle_core::Device;
    use candle_nn::Module;

    /// Both builds of the update give the bits of the plain per-element arithmetic.
    #[test]
    fn update_is_the_per_element_arithmetic() {
        let cfg = AdamConfig::new(3e-3, 1e-5);
        let n = 1003; // not a multiple of the lanes
        let wave = |a: f32| (0..n).map(|i| (i as f32 * a).sin()).collect::<Vec<f32>>();
        let (g, p0) = (wave(0.37), wave(0.11));
        let (m0, v0): (Vec<f32>, Vec<f32>) =
            (wave(0.05), wave(0.21).iter().map(|x| x * x).collect());
        let expect = {
            let (mut p, mut m, mut v) = (p0.clone(), m0.clone(), v0.clone());
            let (b1, b2) = (cfg.beta1 as f32, cfg.beta2 as f32);
            let step = (cfg.lr / (1.0 - cfg.beta1.powi(7))) as f32;
            let inv = (1.0 / (1.0 - cfg.beta2.powi(7))) as f32;
            for j in 0..n {
                let gj = g[j] + cfg.weight_decay as f32 * p[j];
                m[j] = b1 * m[j] + (1.0 - b1) * gj;
                v[j] = b2 * v[j] + (1.0 - b2) * gj * gj;
                p[j] -= step * m[j] / ((v[j] * inv).sqrt() + cfg.eps as f32);
            }
            (p, m, v)
        };
        let (mut p, mut m, mut v) = (p0.clone(), m0.clone(), v0.clone());
        update(&cfg, 7, &mut p, &mut m, &mut v, &g);
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&p), bits(&expect.0));
        assert_eq!(bits(&m), bits(&expect.1));
        assert_eq!(bits(&v), bits(&expect.2));
        let (mut p, mut m, mut v) = (p0, m0, v0);
        update_body(Step::new(&cfg, 7), &mut p, &mut m, &mut v, &g);
        assert_eq!(bits(&p), bits(&expect.0), "without AVX");
    }

    #[test]
    fn adam_fits_a_line() {
        let dev = Device::Cpu;
        let (vm, vb) = new_varmap(&dev);
        let mlp = Mlp::new(vb, &[1, 1]).unwrap();
        init_vars(&vm, 0).unwrap();
        let mut opt = Adam::for_varmap(&vm, AdamConfig::new(0.05, 0.0)).unwrap();
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
