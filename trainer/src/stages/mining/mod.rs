//! Latent-action mining: a forward model f(s, a) over K discrete latent actions, trained
//! by hard EM on min over a of ||f(s, a) - s'||^2, then every transition is labelled
//! with its arg-min.
//!
//! Vector states use fully connected networks; image observations `[C, H, W]` use a
//! convolutional encoder and a transposed-convolution decoder ([`ConvForwardModel`]).

mod assign;
pub mod model;

pub use assign::{assign, train_step, Usage};
pub use model::{ConvForwardModel, ForwardModel, Predictor};

use crate::data::Dataset;
use crate::nn::conv::{Arch, ConvConfig, ImageShape};
use crate::nn::inputs::Inputs;
use crate::nn::{self, Adam, AdamConfig};
use crate::stages::checkpoint::{Checkpointer, State};
use crate::util::progress;
use crate::util::stats::TenthCurve;
use anyhow::{bail, Result};
use candle_core::{Device, Tensor, D};
use candle_nn::Optimizer;
use candle_nn::VarBuilder;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// How often the anti-collapse assignment is applied (from the authors' release).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum AntiCollapse {
    /// Every step (the authors' grid world).
    Always,
    /// At steps where `step % (step / 5000 + 1) == 0`: ever more rarely.
    Annealed,
    /// Never: plain hard EM.
    Off,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MiningConfig {
    /// Number of latent actions K.
    pub latent_actions: usize,
    /// Hidden sizes of the state encoder.
    pub encoder: Vec<usize>,
    /// Size of each latent action's learned embedding.
    pub embedding: usize,
    /// Hidden sizes of the decoder (input: encoding and embedding concatenated; at least one).
    pub decoder: Vec<usize>,
    pub batch_size: usize,
    pub steps: usize,
    pub lr: f64,
    pub weight_decay: f64,
    /// The learning rate is multiplied by 0.1 after each of these fractions of `steps`.
    pub lr_drops: Vec<f64>,
    /// Samples forced onto each latent action per batch by the anti-collapse assignment.
    pub forced_per_action: usize,
    pub anti_collapse: AntiCollapse,
    /// Models trained from different seeds; the one with the lowest loss is kept.
    pub restarts: usize,
    /// Fraction of `steps` after which the restarts are compared.
    pub screen: f64,
    /// Every this many steps (0: never), the latent action that is cheapest to remove is
    /// re-seeded next to the one with the most residual error, if that should pay.
    pub split_every: usize,
    /// Fraction of `steps` during which splits may happen.
    pub split_until: f64,
    /// Network kind: `auto` is convolutional for image observations `[C, H, W]`.
    #[serde(default)]
    pub arch: Arch,
    /// The convolutional model's layers (used when the network is convolutional; the
    /// latent action's embedding size is `embedding`).
    #[serde(default)]
    pub conv: ConvConfig,
}

impl Default for MiningConfig {
    /// The authors' grid-world network (encoder 64-64-64, embedding 64, decoder 64-64),
    /// Adam 1e-3 with weight decay 1e-5, batch 64, learning rate x0.1 twice.
    fn default() -> Self {
        MiningConfig {
            latent_actions: 8,
            encoder: vec![64, 64, 64],
            embedding: 64,
            decoder: vec![64, 64],
            batch_size: 64,
            steps: 3000,
            lr: 1e-3,
            weight_decay: 1e-5,
            lr_drops: vec![0.33, 0.67],
            forced_per_action: 2,
            anti_collapse: AntiCollapse::Annealed,
            restarts: 2,
            screen: 0.3,
            split_every: 100,
            split_until: 0.5,
            arch: Arch::Auto,
            conv: ConvConfig::default(),
        }
    }
}

/// Which forward model a dataset gets.
#[derive(Clone, Copy, Debug)]
enum Spec {
    Mlp(usize),
    Conv(ImageShape),
}

impl Spec {
    fn of(data: &Dataset, cfg: &MiningConfig) -> Result<Self> {
        if cfg.arch.is_conv(&data.obs_shape)? {
            Ok(Spec::Conv(ImageShape::new(
                &data.obs_shape,
                cfg.conv.channels.len(),
            )?))
        } else {
            Ok(Spec::Mlp(data.obs_dim()))
        }
    }

    fn build(self, vb: VarBuilder, cfg: &MiningConfig) -> Result<Box<dyn Predictor>> {
        Ok(match self {
            Spec::Mlp(d) => Box::new(ForwardModel::new(vb, d, cfg)?),
            Spec::Conv(shape) => Box::new(ConvForwardModel::new(vb, shape, cfg)?),
        })
    }
}

/// What mining produced.
pub struct Mined {
    pub labels: Vec<u32>,
    /// Mean hard-min loss, averaged over each tenth of training.
    pub loss_curve: Vec<f32>,
    /// How many transitions each latent action labels.
    pub usage: Vec<usize>,
}

/// One forward model in training, with everything that makes its run reproducible.
struct Run {
    model: Box<dyn Predictor>,
    opt: Adam,
    rng: ChaCha8Rng,
    /// Mean loss of each tenth of `steps`.
    curve: TenthCurve,
    usage: Usage,
    /// Loss sum and count over the last tenth of the current range of steps.
    tail: (f64, usize),
}

/// A run's running sums, as a checkpoint keeps them.
#[derive(Serialize, Deserialize)]
struct RunSums {
    curve: TenthCurve,
    tail: (f64, usize),
    residual: Vec<f64>,
    removal: Vec<f64>,
}

/// Where mining stands: restart `restart` (== restarts: the main phase) at `next_step`,
/// and the loss of the best screened run so far.
#[derive(Serialize, Deserialize)]
struct Progress {
    restart: usize,
    next_step: usize,
    best_loss: Option<f64>,
}

/// The model inputs and the batch size.
struct Batches<'a> {
    inputs: &'a Inputs<'a>,
    bs: usize,
    device: &'a Device,
}

impl Run {
    fn new(spec: Spec, cfg: &MiningConfig, seed: u64, device: &Device) -> Result<Self> {
        let (vm, vb) = nn::new_varmap(device);
        let model = spec.build(vb, cfg)?;
        nn::init_vars(&vm, seed)?;
        let opt = Adam::for_varmap(&vm, AdamConfig::new(cfg.lr, cfg.weight_decay))?;
        let rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6d69_6e65);
        Ok(Run {
            model,
            opt,
            rng,
            curve: TenthCurve::new(cfg.steps),
            usage: Usage::default(),
            tail: (0.0, 0),
        })
    }

    fn save(&self, prefix: &str, st: &mut State) -> Result<()> {
        st.put_adam(&format!("{prefix}.adam"), &self.opt)?;
        st.put_rng(&format!("{prefix}.rng"), &self.rng)?;
        let sums = RunSums {
            curve: self.curve.clone(),
            tail: self.tail,
            residual: self.usage.residual.clone(),
            removal: self.usage.removal.clone(),
        };
        st.set_record(&format!("{prefix}.sums"), &sums)
    }

    /// A run continued from [`Run::save`]'s state.
    fn load(
        prefix: &str,
        st: &State,
        spec: Spec,
        cfg: &MiningConfig,
        device: &Device,
    ) -> Result<Self> {
        let mut run = Run::new(spec, cfg, 0, device)?;
        st.load_adam(&format!("{prefix}.adam"), &mut run.opt)?;
        run.rng = st.get_rng(&format!("{prefix}.rng"))?;
        let sums: RunSums = st.record(&format!("{prefix}.sums"))?;
        run.curve = sums.curve;
        run.tail = sums.tail;
        run.usage = Usage {
            residual: sums.residual,
            removal: sums.removal,
        };
        Ok(run)
    }

    /// Moves latent action `dup` next to `bad`, so that the next steps split what `bad`
    /// was averaging (split-and-merge EM).
    fn reseed(&mut self, dup: usize, bad: usize) -> Result<()> {
        let emb: Vec<Vec<f32>> = self.model.embeddings().to_vec2()?;
        let row: Vec<f32> = emb[bad]
            .iter()
            .map(|&v| v + 0.01 * nn::normal(&mut self.rng))
            .collect();
        self.opt.overwrite_row("embeddings", dup, &row)
    }

    /// Trains over `steps`; returns the mean loss of the last tenth of them.
    /// `range_start` is where the current range began (earlier than `steps.start` when
    /// resuming inside it); `after_step` runs after every step with the next step's index.
    fn train(
        &mut self,
        range_start: usize,
        steps: std::ops::Range<usize>,
        cfg: &MiningConfig,
        b: &Batches,
        bar: &indicatif::ProgressBar,
        after_step: &mut dyn FnMut(usize, &Run) -> Result<()>,
    ) -> Result<f64> {
        let (d, bs) = (b.inputs.dim(), b.bs);
        let n = b.inputs.len();
        let mut s_host = vec![0f32; bs * d];
        let mut s2_host = vec![0f32; bs * d];
        let tail_from = steps.end - ((steps.end - range_start) / 10).max(1);
        for step in steps {
            let drops = cfg
                .lr_drops
                .iter()
                .filter(|&&f| step as f64 >= f * cfg.steps as f64)
                .count();
            self.opt
                .set_learning_rate(cfg.lr * 0.1f64.powi(drops as i32));
            for j in 0..bs {
                let i = self.rng.random_range(0..n);
                b.inputs.fill(i, false, &mut s_host[j * d..(j + 1) * d]);
                b.inputs.fill(i, true, &mut s2_host[j * d..(j + 1) * d]);
            }
            let s = Tensor::from_slice(&s_host, (bs, d), b.device)?;
            let s2 = Tensor::from_slice(&s2_host, (bs, d), b.device)?;
            let apply = match cfg.anti_collapse {
                AntiCollapse::Always => true,
                AntiCollapse::Annealed => step % (step / 5000 + 1) == 0,
                AntiCollapse::Off => false,
            };
            let forced = if apply { cfg.forced_per_action } else { 0 };
            let splitting =
                (step as f64) < cfg.split_until * cfg.steps as f64 && cfg.split_every > 0;
            let usage = if splitting {
                Some(&mut self.usage)
            } else {
                None
            };
            let loss = train_step(&*self.model, &mut self.opt, &s, &s2, forced, usage)? as f64;
            if splitting && (step + 1) % cfg.split_every == 0 {
                if let Some((dup, bad)) = self.usage.split() {
                    log::trace!("step {step}: latent action {dup} re-seeded next to {bad}");
                    self.reseed(dup, bad)?;
                }
                self.usage = Usage::default();
            }
            if step >= tail_from {
                self.tail.0 += loss;
                self.tail.1 += 1;
            }
            if let Some(mean) = self.curve.push(step, loss) {
                log::debug!("mining step {}: mean loss {mean:.4e}", step + 1);
                bar.set_message(format!("loss {mean:.2e}"));
            }
            bar.inc(1);
            after_step(step + 1, self)?;
        }
        Ok(self.tail.0 / self.tail.1.max(1) as f64)
    }
}

/// Trains the forward model on the dataset and labels every transition.
///
/// Hard EM has local optima in which one latent action averages two real ones. With
/// `restarts > 1`, that many models train for the first `screen` fraction of the steps
/// and only the one with the lowest loss (no ground truth involved) trains on.
///
/// With `ckpt`, the stage saves its state through it and continues from a resumed one.
pub fn mine(
    data: &Dataset,
    cfg: &MiningConfig,
    seed: u64,
    device: &Device,
    mut ckpt: Option<&mut Checkpointer>,
) -> Result<Mined> {
    let n = data.len();
    if cfg.batch_size == 0 || cfg.steps == 0 {
        bail!("mining needs batch_size > 0 and steps > 0");
    }
    let spec = Spec::of(data, cfg)?;
    let inputs = match spec {
        Spec::Mlp(_) => {
            if data.is_image() {
                log::warn!(
                    "fully connected mining on images converts every observation to f32 \
                     (4x the memory of u8 storage)"
                );
            }
            Inputs::dense(data).0
        }
        Spec::Conv(shape) => Inputs::image(data, shape),
    };
    let batches = Batches {
        inputs: &inputs,
        bs: cfg.batch_size.min(n),
        device,
    };

    let restarts = cfg.restarts.max(1);
    let screen = if restarts > 1 {
        ((cfg.steps as f64 * cfg.screen).round() as usize).clamp(1, cfg.steps)
    } else {
        0
    };
    let total = restarts * screen + cfg.steps - screen;
    let bar = progress::bar(total as u64, "mining latent actions");

    // Where to start: restart `r` (== restarts: the main phase) at `step`, with the best
    // screened run so far and the run in progress.
    let (mut r, mut step, mut best, mut current) = (0, 0, None::<(f64, Run)>, None::<Run>);
    if let Some(st) = ckpt.as_deref_mut().and_then(|c| c.resumed(STAGE)) {
        let p: Progress = st.record("progress")?;
        (r, step) = (p.restart, p.next_step);
        if let Some(loss) = p.best_loss {
            best = Some((loss, Run::load("best", &st, spec, cfg, device)?));
        }
        current = Some(Run::load("current", &st, spec, cfg, device)?);
        bar.set_position(
            (r.min(restarts) * screen + step - if r == restarts { screen } else { 0 }) as u64,
        );
    }
    let mut save =
        |r: usize, next_step: usize, run: &Run, best: &Option<(f64, Run)>| -> Result<()> {
            let Some(c) = ckpt.as_deref_mut() else {
                return Ok(());
            };
            let done = (r.min(restarts) * screen + next_step
                - if r == restarts { screen } else { 0 }) as u64;
            if !c.due(STAGE, done) {
                return Ok(());
            }
            let mut st = State::default();
            let progress = Progress {
                restart: r,
                next_step,
                best_loss: best.as_ref().map(|(loss, _)| *loss),
            };
            st.set_record("progress", &progress)?;
            run.save("current", &mut st)?;
            if let Some((_, b)) = best {
                b.save("best", &mut st)?;
            }
            c.save(STAGE, done, st)
        };
    while r < restarts && screen > 0 {
        let mut run = match current.take() {
            Some(run) => run,
            None => Run::new(spec, cfg, seed.wrapping_add(r as u64 * 0x9e37_79b9), device)?,
        };
        let loss = run.train(0, step..screen, cfg, &batches, &bar, &mut |next, run| {
            save(r, next, run, &best)
        })?;
        log::debug!("mining restart {r}: loss {loss:.4e} after {screen} screening steps");
        if best.as_ref().is_none_or(|(l, _)| loss < *l) {
            best = Some((loss, run));
        }
        r += 1;
        step = 0;
    }
    let mut run = match (current.take(), best.take()) {
        (Some(run), _) => run,
        (None, Some((_, run))) => run,
        (None, None) => Run::new(spec, cfg, seed, device)?,
    };
    if step == 0 {
        step = screen;
        run.tail = (0.0, 0);
    }
    run.train(
        screen,
        step..cfg.steps,
        cfg,
        &batches,
        &bar,
        &mut |next, run| save(restarts, next, run, &None),
    )?;
    bar.finish_and_clear();

    let labels = match &inputs {
        Inputs::Dense { obs, next, d } => label(&*run.model, obs, next, *d, device)?,
        Inputs::Image { .. } => label_rows(&*run.model, &inputs, device)?,
    };
    let mut usage = vec![0; cfg.latent_actions];
    for &l in &labels {
        usage[l as usize] += 1;
    }
    Ok(Mined {
        labels,
        loss_curve: run.curve.means,
        usage,
    })
}

/// The checkpoint stage name of mining.
const STAGE: &str = "mining";

/// The arg-min latent action of every transition (standardised inputs). Identical
/// transitions get the same label, so each distinct (s, s') is evaluated once.
fn label(
    model: &dyn Predictor,
    obs: &[f32],
    next: &[f32],
    d: usize,
    device: &Device,
) -> Result<Vec<u32>> {
    let n = obs.len() / d;
    let mut pairs = crate::data::dedup::RowIndex::new(2 * d);
    let mut which = Vec::with_capacity(n);
    let (mut uo, mut un) = (vec![], vec![]);
    let mut pair = vec![0f32; 2 * d];
    for i in 0..n {
        let (s, s2) = (&obs[i * d..(i + 1) * d], &next[i * d..(i + 1) * d]);
        pair[..d].copy_from_slice(s);
        pair[d..].copy_from_slice(s2);
        let u = pairs.len();
        let id = pairs.insert(&pair);
        if id == u {
            uo.extend_from_slice(s);
            un.extend_from_slice(s2);
        }
        which.push(id);
    }
    let u = uo.len() / d;
    let chunk = 8192;
    let mut unique = Vec::with_capacity(u);
    for start in (0..u).step_by(chunk) {
        let end = (start + chunk).min(u);
        let s = Tensor::from_slice(&uo[start * d..end * d], (end - start, d), device)?;
        let s2 = Tensor::from_slice(&un[start * d..end * d], (end - start, d), device)?;
        unique.extend(model.errors(&s, &s2)?.argmin(D::Minus1)?.to_vec1::<u32>()?);
    }
    Ok(which.into_iter().map(|id| unique[id]).collect())
}

/// The arg-min latent action of every transition, drawn from `inputs` in chunks (images:
/// each chunk is converted from the store on its own, and no copy of the data is made).
fn label_rows(model: &dyn Predictor, inputs: &Inputs, device: &Device) -> Result<Vec<u32>> {
    let (n, d) = (inputs.len(), inputs.dim());
    // About 4M predicted values per pass (16 MB for the output, a few times that for the
    // decoder's activations), whatever the image size.
    let chunk = (16384 / (model.num_actions() * d.max(1) / 256).max(1)).clamp(1, 1024);
    let (mut s, mut s2) = (vec![], vec![]);
    let mut out = Vec::with_capacity(n);
    for start in (0..n).step_by(chunk) {
        let idx: Vec<usize> = (start..(start + chunk).min(n)).collect();
        inputs.gather(&idx, &mut s, &mut s2);
        let st = Tensor::from_slice(&s, (idx.len(), d), device)?;
        let s2t = Tensor::from_slice(&s2, (idx.len(), d), device)?;
        out.extend(
            model
                .errors(&st, &s2t)?
                .argmin(D::Minus1)?
                .to_vec1::<u32>()?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envs::squares::moving_squares;

    /// Eight latent actions for four motions, as LAQ is used (K at least the number of
    /// actions). With K = 4, hard EM often merged two motions (global purity 0.66-1.0 over
    /// four seeds); with K = 8 and this learning rate it ranged 0.91-1.0.
    fn square_config() -> MiningConfig {
        MiningConfig {
            latent_actions: 8,
            embedding: 8,
            batch_size: 32,
            steps: 400,
            lr: 3e-3,
            restarts: 1,
            split_every: 50,
            conv: ConvConfig {
                channels: vec![8, 16],
            },
            ..Default::default()
        }
    }

    /// The forward model's outputs have the documented shapes, and the loss trained on (a
    /// second pass over the assigned rows) equals the assigned entries of the error matrix
    /// and has the same gradient as gathering them.
    #[test]
    fn conv_model_shapes_and_assigned_loss() {
        let dev = Device::Cpu;
        let cfg = square_config();
        let shape = ImageShape::new(&[3, 16, 16], 2).unwrap();
        let (vm, vb) = nn::new_varmap(&dev);
        let m = ConvForwardModel::new(vb, shape, &cfg).unwrap();
        nn::init_vars(&vm, 1).unwrap();
        let s = Tensor::randn(0f32, 1.0, (5, 768), &dev).unwrap();
        let s2 = Tensor::randn(0f32, 1.0, (5, 768), &dev).unwrap();
        let err = m.errors(&s, &s2).unwrap();
        assert_eq!(err.dims(), &[5, 8]);
        let rows = Tensor::new(&[0u32, 4, 4], &dev).unwrap();
        let acts = Tensor::new(&[3u32, 0, 2], &dev).unwrap();
        assert_eq!(m.deltas(&s, &rows, &acts).unwrap().dims(), &[3, 768]);
        assigned_loss_is_the_gathered_loss(&m, &vm, &s, &s2, &[2, 0, 7, 3, 1]);
    }

    /// The fully connected model too trains on a second pass over the assigned rows.
    #[test]
    fn mlp_model_assigned_loss() {
        let dev = Device::Cpu;
        let cfg = MiningConfig::default();
        let (vm, vb) = nn::new_varmap(&dev);
        let m = ForwardModel::new(vb, 3, &cfg).unwrap();
        nn::init_vars(&vm, 2).unwrap();
        let s = Tensor::randn(0f32, 1.0, (6, 3), &dev).unwrap();
        let s2 = Tensor::randn(0f32, 1.0, (6, 3), &dev).unwrap();
        assigned_loss_is_the_gathered_loss(&m, &vm, &s, &s2, &[2, 0, 7, 3, 1, 1]);
    }

    /// `assigned_loss` equals the assigned entries of the error matrix, and its gradient
    /// is the gradient of gathering them.
    fn assigned_loss_is_the_gathered_loss(
        m: &dyn Predictor,
        vm: &candle_nn::VarMap,
        s: &Tensor,
        s2: &Tensor,
        assigned: &[u32],
    ) {
        let err = m.errors(s, s2).unwrap();
        let mut seen = vec![];
        let ours = m
            .assigned_loss(s, s2, &mut |e| {
                seen = e.to_vec();
                assigned.to_vec()
            })
            .unwrap();
        let host: Vec<f32> = err.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(seen, host, "assign sees the errors");
        let idx = Tensor::new(assigned, s.device())
            .unwrap()
            .unsqueeze(1)
            .unwrap();
        let gathered = err.gather(&idx, 1).unwrap().mean_all().unwrap();
        let (a, b) = (
            ours.to_scalar::<f32>().unwrap(),
            gathered.to_scalar::<f32>().unwrap(),
        );
        assert!((a - b).abs() <= 1e-4 * b.abs(), "{a} vs {b}");
        let (ga, gb) = (ours.backward().unwrap(), gathered.backward().unwrap());
        for (name, var) in nn::sorted_vars(vm).unwrap() {
            let x: Vec<f32> = ga
                .get(&var)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let y: Vec<f32> = gb
                .get(&var)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let scale = y.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
            let diff = x
                .iter()
                .zip(&y)
                .fold(0f32, |m, (p, q)| m.max((p - q).abs()));
            assert!(diff <= 1e-3 * scale, "{name}: {diff} (scale {scale})");
        }
    }

    /// Four known motions of a square: mining on u8 images finds them (purity near 1),
    /// and the same seed gives the same labels.
    #[test]
    fn conv_mining_finds_the_motions_of_a_square() {
        let data = moving_squares(600, 16, false, 0);
        assert_eq!(data.observations.storage(), crate::data::ObsStorage::U8);
        let cfg = square_config();
        let m = mine(&data, &cfg, 0, &Device::Cpu, None).unwrap();
        let actions = data.discrete_actions("test").unwrap();
        let purity = crate::eval::purity::global_purity(&m.labels, actions);
        assert!(purity > 0.9, "purity {purity}, usage {:?}", m.usage);
        // Per square position (the state), the labels are purer still.
        let d = data.obs_dim();
        let states: Vec<usize> = (0..data.len())
            .map(|i| {
                data.obs_row(i)[..d / 3]
                    .iter()
                    .position(|&v| v > 200.0)
                    .unwrap()
            })
            .collect();
        assert!(crate::eval::purity::state_purity(&states, &m.labels, actions) >= purity);
        assert_eq!(
            m.labels,
            mine(&data, &cfg, 0, &Device::Cpu, None).unwrap().labels
        );
        let mut fc = cfg.clone();
        fc.arch = Arch::Mlp;
        fc.encoder = vec![32];
        fc.decoder = vec![32];
        fc.steps = 20;
        assert_eq!(
            mine(&data, &fc, 0, &Device::Cpu, None)
                .unwrap()
                .labels
                .len(),
            600
        );
        let mut bad = cfg.clone();
        bad.conv.channels = vec![8, 8, 8, 8, 8];
        let e = mine(&data, &bad, 0, &Device::Cpu, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("at most 4"), "{e}");
    }

    #[test]
    fn assignment_forces_every_action() {
        // Every sample prefers action 0.
        let k = 3;
        let errors: Vec<f32> = (0..12)
            .flat_map(|j| [0.0, 1.0 + j as f32, 2.0 + j as f32])
            .collect();
        assert!(assign(&errors, k, 0).iter().all(|&a| a == 0));
        let a = assign(&errors, k, 2);
        for i in 0..k as u32 {
            assert!(a.iter().filter(|&&x| x == i).count() >= 2, "{a:?}");
        }
        // Action 1 takes the two samples where it is cheapest (rows 2 and 3, after 0, 1).
        assert_eq!(&a[..6], &[0, 0, 1, 1, 2, 2]);
    }
}
