//! Latent-action mining: a forward model f(s, a) over K discrete latent actions, trained
//! by hard EM on min over a of ||f(s, a) - s'||^2, then every transition is labelled
//! with its arg-min.
//!
//! Vector states use fully connected networks; image observations `[C, H, W]` use a
//! convolutional encoder and a transposed-convolution decoder ([`ConvForwardModel`]).

mod assign;
pub mod model;

pub use assign::{assign, train_step, Usage};
pub use model::{Assigned, ConvForwardModel, ForwardModel, Predictor};

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
    /// Vector states: weigh each value's error by the inverse of its own noise, as a
    /// Gaussian likelihood with one variance per value does ([`Noise`]), so that values
    /// no latent action predicts (sensor noise) do not decide the labels. Off in run
    /// directories written before it (they repeat without it).
    #[serde(default)]
    pub per_value_noise: bool,
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
            per_value_noise: true,
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

/// Each value's noise, as hard EM weighs it when [`MiningConfig::per_value_noise`] is on.
///
/// With one variance per value, the likelihood of s' weighs each value's squared error by
/// the inverse of its variance: a value that the picked latent action predicts well counts
/// for much, one that none predicts (a noisy sensor, a channel that wanders on its own)
/// for little. Unweighted, the labels go where the most squared change is, and on a
/// maze with six channels of unit noise beside the state, they split the noise (it held
/// 0.17-0.21 of the noise channels' change and none of the maze's).
///
/// Each variance is the running mean square of its value's error on the picked latent
/// actions, starting at the mean square of its change (the error of predicting no
/// change). It is never below a tenth of that start (no value counts as explained beyond
/// 90% of its change), so that values the state predicts all but exactly (a position
/// that the velocity moves) do not outweigh those the actions move; nor below a
/// thousandth of the mean start of all values, for a value that never changes. Without
/// the first floor, on Minari's U-maze (five seeds) V ranked at 0.872 ± 0.069 against
/// the truth, 0.914 ± 0.016 unweighted; with it, 0.914 ± 0.016 (`docs/trust.md`,
/// "Channels a robot logs").
///
/// ```
/// use candle_core::Device;
/// use laq::stages::mining::Noise;
///
/// // Two rows of three values: the first moves by 1, the second by 2 then 0, the third
/// // never.
/// let obs = [0.0, 0.0, 5.0, 0.0, 0.0, 5.0];
/// let next = [1.0, 2.0, 5.0, -1.0, 0.0, 5.0];
/// let w: Vec<f32> = Noise::of(&obs, &next, 3).weights(&Device::Cpu)?.to_vec1()?;
/// // The more a value moves unexplained, the less it weighs; one that never moves
/// // weighs the most the floor allows.
/// assert!(w[0] > w[1] && w[2] > w[0]);
/// # Ok::<(), anyhow::Error>(())
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Noise {
    /// Running mean square of each value's error.
    mean_square: Vec<f64>,
    /// Each value's mean square change (the error before training).
    change: Vec<f64>,
}

impl Noise {
    /// Steps over which the running means forget (about 1 / rate).
    const RATE: f64 = 0.01;
    /// The least share of its change that a value's variance keeps.
    const UNEXPLAINED: f64 = 0.1;

    /// The noise before training: each value's mean square change from `obs` to `next`
    /// (rows of `d` values).
    pub fn of(obs: &[f32], next: &[f32], d: usize) -> Noise {
        let n = obs.len() / d.max(1);
        let mut ms = vec![0f64; d];
        for (a, b) in obs.chunks_exact(d).zip(next.chunks_exact(d)) {
            for ((m, x), y) in ms.iter_mut().zip(a).zip(b) {
                *m += ((y - x) as f64).powi(2);
            }
        }
        for m in &mut ms {
            *m /= n.max(1) as f64;
        }
        Noise {
            change: ms.clone(),
            mean_square: ms,
        }
    }

    /// The least variance any value is given: a thousandth of the mean change.
    fn floor(&self) -> f64 {
        let mean = self.change.iter().sum::<f64>() / self.change.len().max(1) as f64;
        (1e-3 * mean).max(1e-12)
    }

    fn variances(&self) -> impl Iterator<Item = f64> + '_ {
        let floor = self.floor();
        (self.mean_square.iter().zip(&self.change))
            .map(move |(&m, &c)| m.max(Self::UNEXPLAINED * c).max(floor))
    }

    /// The weights `[D]`: each value's inverse variance times the mean variance, so that
    /// the weighted error is on the scale of the unweighted one.
    pub fn weights(&self, device: &Device) -> Result<Tensor> {
        let d = self.mean_square.len().max(1) as f64;
        let mean = self.variances().sum::<f64>() / d;
        let w: Vec<f32> = self.variances().map(|v| (mean / v) as f32).collect();
        Ok(Tensor::from_vec(w, self.mean_square.len(), device)?)
    }

    /// Takes in a batch's squared errors `[B, D]` on the picked latent actions; returns
    /// their unweighted loss (the mean over rows of the sum over values).
    fn update(&mut self, squared: &Tensor) -> Result<f64> {
        let batch: Vec<f32> = squared.mean(0)?.to_vec1()?;
        for (m, &x) in self.mean_square.iter_mut().zip(&batch) {
            *m += Self::RATE * (x as f64 - *m);
        }
        Ok(batch.iter().map(|&x| x as f64).sum())
    }

    /// The share of each value's change that the model explains: 1 - its error / its
    /// mean square change, at least 0 (1 where it never changes: nothing is left to
    /// explain).
    fn explained(&self) -> Vec<f32> {
        (self.mean_square.iter().zip(&self.change))
            .map(|(&m, &c)| {
                if c > 0.0 {
                    (1.0 - m / c).max(0.0) as f32
                } else {
                    1.0
                }
            })
            .collect()
    }

    /// The negative log-likelihood of the data per row, up to a constant: lower is a
    /// better model, whichever values it predicts.
    fn nll(&self) -> f64 {
        self.variances().map(f64::ln).sum()
    }
}

/// What mining produced.
pub struct Mined {
    pub labels: Vec<u32>,
    /// Mean hard-min loss, averaged over each tenth of training.
    pub loss_curve: Vec<f32>,
    /// How many transitions each latent action labels.
    pub usage: Vec<usize>,
    /// Where errors were weighed by each value's noise: the share of each value's change
    /// (standardised s' - s) that the forward model explains, on the last batches of
    /// training. Near 0 for a value no latent action predicts (noise); 1 for one that
    /// never changes.
    pub explained: Option<Vec<f32>>,
}

/// A value is noise to every label when the forward model explains less than this share
/// of its change ([`Mined::explained`]) ...
pub const NOISE_EXPLAINED: f32 = 0.1;
/// ... while it explains at least this share of another value's: where no value is
/// explained, nothing stands out as noise.
pub const WELL_EXPLAINED: f32 = 0.5;

/// The values that are noise to every label, by the share of each value's change the
/// forward model explains ([`Mined::explained`]): those below [`NOISE_EXPLAINED`], where
/// another value is at [`WELL_EXPLAINED`] or more. A channel that wanders on its own (a
/// battery's voltage) or a clock: no latent action predicts its change.
///
/// ```
/// use laq::stages::mining::noise_to_labels;
/// assert_eq!(noise_to_labels(&[0.99, 0.97, 0.02, 0.0]), vec![2, 3]);
/// assert!(noise_to_labels(&[0.05, 0.02]).is_empty());
/// ```
pub fn noise_to_labels(explained: &[f32]) -> Vec<usize> {
    if !explained.iter().any(|&x| x >= WELL_EXPLAINED) {
        return vec![];
    }
    (explained.iter().enumerate())
        .filter(|&(_, &x)| x < NOISE_EXPLAINED)
        .map(|(i, _)| i)
        .collect()
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
    /// Each value's noise, where errors are weighted by it.
    noise: Option<Noise>,
}

/// A run's running sums, as a checkpoint keeps them.
#[derive(Serialize, Deserialize)]
struct RunSums {
    curve: TenthCurve,
    tail: (f64, usize),
    residual: Vec<f64>,
    removal: Vec<f64>,
    #[serde(default)]
    noise: Option<Noise>,
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
    /// Each value's noise before training, where errors are weighted by it.
    noise: Option<&'a Noise>,
}

impl Run {
    fn new(
        spec: Spec,
        cfg: &MiningConfig,
        seed: u64,
        noise: Option<&Noise>,
        device: &Device,
    ) -> Result<Self> {
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
            noise: noise.cloned(),
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
            noise: self.noise.clone(),
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
        let mut run = Run::new(spec, cfg, 0, None, device)?;
        st.load_adam(&format!("{prefix}.adam"), &mut run.opt)?;
        run.rng = st.get_rng(&format!("{prefix}.rng"))?;
        let sums: RunSums = st.record(&format!("{prefix}.sums"))?;
        run.curve = sums.curve;
        run.tail = sums.tail;
        run.noise = sums.noise;
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

    /// How well the run models the data, lower better: the negative log-likelihood where
    /// errors are weighted by each value's noise (the weighted loss is about the same
    /// whatever the model), else the mean loss of the last tenth of the steps trained.
    fn merit(&self) -> f64 {
        match &self.noise {
            Some(noise) => noise.nll(),
            None => self.tail.0 / self.tail.1.max(1) as f64,
        }
    }

    /// Trains over `steps`; returns [`Run::merit`] after them.
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
            let w = match &self.noise {
                Some(noise) => Some(noise.weights(b.device)?),
                None => None,
            };
            let (loss, squared) = train_step(
                &*self.model,
                &mut self.opt,
                &s,
                &s2,
                w.as_ref(),
                forced,
                usage,
            )?;
            // Weighted, the loss stays near the same value whatever the model: the curve
            // shows the unweighted one.
            let loss = match &mut self.noise {
                Some(noise) => noise.update(&squared)?,
                None => loss as f64,
            };
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
        Ok(self.merit())
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
    let noise = match &inputs {
        // Frames, even through a fully connected model, keep the unweighted error.
        Inputs::Dense { obs, next, d } if cfg.per_value_noise && !data.is_image() => {
            Some(Noise::of(obs, next, *d))
        }
        _ => None,
    };
    let batches = Batches {
        inputs: &inputs,
        bs: cfg.batch_size.min(n),
        device,
        noise: noise.as_ref(),
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
            None => Run::new(
                spec,
                cfg,
                seed.wrapping_add(r as u64 * 0x9e37_79b9),
                batches.noise,
                device,
            )?,
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
        (None, None) => Run::new(spec, cfg, seed, batches.noise, device)?,
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

    let w = match &run.noise {
        Some(noise) => {
            let each: Vec<String> = noise.variances().map(|v| format!("{v:.2e}")).collect();
            log::debug!("mining: each value's noise {}", each.join(", "));
            Some(noise.weights(device)?)
        }
        None => None,
    };
    let labels = match &inputs {
        Inputs::Dense { obs, next, d } => label(&*run.model, obs, next, *d, w.as_ref(), device)?,
        Inputs::Image { .. } => label_rows(&*run.model, &inputs, w.as_ref(), device)?,
    };
    let mut usage = vec![0; cfg.latent_actions];
    for &l in &labels {
        usage[l as usize] += 1;
    }
    Ok(Mined {
        labels,
        loss_curve: run.curve.means,
        usage,
        explained: run.noise.as_ref().map(Noise::explained),
    })
}

/// The checkpoint stage name of mining.
const STAGE: &str = "mining";

/// The arg-min latent action of every transition (standardised inputs), errors weighted
/// by `w`. Identical transitions get the same label, so each distinct (s, s') is
/// evaluated once.
fn label(
    model: &dyn Predictor,
    obs: &[f32],
    next: &[f32],
    d: usize,
    w: Option<&Tensor>,
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
        unique.extend(
            model
                .errors(&s, &s2, w)?
                .argmin(D::Minus1)?
                .to_vec1::<u32>()?,
        );
    }
    Ok(which.into_iter().map(|id| unique[id]).collect())
}

/// The arg-min latent action of every transition, drawn from `inputs` in chunks (images:
/// each chunk is converted from the store on its own, and no copy of the data is made).
fn label_rows(
    model: &dyn Predictor,
    inputs: &Inputs,
    w: Option<&Tensor>,
    device: &Device,
) -> Result<Vec<u32>> {
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
                .errors(&st, &s2t, w)?
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
        let err = m.errors(&s, &s2, None).unwrap();
        assert_eq!(err.dims(), &[5, 8]);
        let rows = Tensor::new(&[0u32, 4, 4], &dev).unwrap();
        let acts = Tensor::new(&[3u32, 0, 2], &dev).unwrap();
        assert_eq!(m.deltas(&s, &rows, &acts).unwrap().dims(), &[3, 768]);
        assigned_loss_is_the_gathered_loss(&m, &vm, &s, &s2, None, &[2, 0, 7, 3, 1]);
        let w = Tensor::randn(0f32, 1.0, 768, &dev).unwrap().abs().unwrap();
        assigned_loss_is_the_gathered_loss(&m, &vm, &s, &s2, Some(&w), &[2, 0, 7, 3, 1]);
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
        assigned_loss_is_the_gathered_loss(&m, &vm, &s, &s2, None, &[2, 0, 7, 3, 1, 1]);
        let w = Tensor::new(&[0.5f32, 2.0, 0.01], &dev).unwrap();
        assigned_loss_is_the_gathered_loss(&m, &vm, &s, &s2, Some(&w), &[2, 0, 7, 3, 1, 1]);
    }

    /// `assigned_loss` equals the assigned entries of the (weighted) error matrix, and its
    /// gradient is the gradient of gathering them; its squared errors, weighted and
    /// summed, are the same entries.
    fn assigned_loss_is_the_gathered_loss(
        m: &dyn Predictor,
        vm: &candle_nn::VarMap,
        s: &Tensor,
        s2: &Tensor,
        w: Option<&Tensor>,
        assigned: &[u32],
    ) {
        let err = m.errors(s, s2, w).unwrap();
        let mut seen = vec![];
        let picked = m
            .assigned_loss(s, s2, w, &mut |e| {
                seen = e.to_vec();
                assigned.to_vec()
            })
            .unwrap();
        let ours = picked.loss;
        let squared = match w {
            Some(w) => picked.squared.broadcast_mul(w).unwrap(),
            None => picked.squared,
        };
        let rows: Vec<f32> = squared.sum(D::Minus1).unwrap().to_vec1().unwrap();
        let host: Vec<f32> = err.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(seen, host, "assign sees the errors");
        let idx = Tensor::new(assigned, s.device())
            .unwrap()
            .unsqueeze(1)
            .unwrap();
        let gathered = err.gather(&idx, 1).unwrap();
        let each: Vec<f32> = gathered.flatten_all().unwrap().to_vec1().unwrap();
        for (a, b) in rows.iter().zip(&each) {
            assert!((a - b).abs() <= 1e-4 * b.abs().max(1e-3), "{a} vs {b}");
        }
        let gathered = gathered.mean_all().unwrap();
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

    /// A point moved by four actions, logged beside four channels of unit noise: weighed
    /// by each value's noise, the labels follow the actions; unweighted, they split the
    /// noise, which holds nearly all of the squared change.
    #[test]
    fn labels_follow_the_actions_not_the_noise_beside_them() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let (n, d) = (2000, 6);
        let (mut obs, mut next, mut actions) = (vec![], vec![], vec![]);
        for _ in 0..n {
            let a = rng.random_range(0..4usize);
            let (x, y) = (rng.random::<f32>(), rng.random::<f32>());
            let (dx, dy) = [(0.05, 0.0), (-0.05, 0.0), (0.0, 0.05), (0.0, -0.05)][a];
            obs.extend([x, y]);
            next.extend([x + dx, y + dy]);
            for _ in 0..4 {
                obs.push(nn::normal(&mut rng));
                next.push(nn::normal(&mut rng));
            }
            actions.push(a as i64);
        }
        let data = Dataset {
            obs_shape: vec![d],
            observations: obs.into(),
            next_observations: next.into(),
            rewards: vec![0.0; n],
            terminals: vec![false; n],
            timeouts: None,
            next_missing: None,
            actions: Some(crate::data::Actions::Discrete(actions)),
        };
        let purity = |per_value_noise| {
            let cfg = MiningConfig {
                steps: 1500,
                restarts: 1,
                per_value_noise,
                ..Default::default()
            };
            let m = mine(&data, &cfg, 0, &Device::Cpu, None).unwrap();
            crate::eval::purity::global_purity(&m.labels, data.discrete_actions("test").unwrap())
        };
        let (weighed, plain) = (purity(true), purity(false));
        assert!(weighed > 0.95, "weighed by noise: purity {weighed}");
        assert!(plain < 0.6, "unweighted: purity {plain}");
    }

    /// The noise starts at each value's mean square change, floored at a tenth of that
    /// and a thousandth of their mean, and the weights keep the weighted error on the
    /// unweighted one's scale.
    #[test]
    fn noise_weights_are_inverse_variances() {
        let obs = [0.0f32, 0.0, 5.0, 0.0, 0.0, 5.0];
        let next = [1.0f32, 2.0, 5.0, -1.0, 0.0, 5.0];
        let noise = Noise::of(&obs, &next, 3);
        assert_eq!(noise.mean_square, vec![1.0, 2.0, 0.0]);
        assert_eq!(noise.floor(), 1e-3);
        let w: Vec<f32> = noise.weights(&Device::Cpu).unwrap().to_vec1().unwrap();
        let mean = (1.0 + 2.0 + 1e-3) / 3.0;
        for (w, v) in w.iter().zip([1.0, 2.0, 1e-3]) {
            assert!((*w as f64 - mean / v).abs() < 1e-3 * mean / v, "{w}");
        }
        assert!((noise.nll() - (2f64.ln() + 1e-3f64.ln())).abs() < 1e-9);
        // Explained all but exactly, a value keeps a tenth of its change.
        let mut fitted = noise.clone();
        fitted.mean_square = vec![0.0; 3];
        let v: Vec<f64> = fitted.variances().collect();
        assert_eq!(v, vec![0.1, 0.2, 1e-3]);
        assert_eq!(fitted.explained(), vec![1.0, 1.0, 1.0]);
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
