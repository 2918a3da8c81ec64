//! `laq train`: the pipeline on a dataset, fresh, resumed or repeated.

use crate::run::config::{TrainConfig, ValueHead};
use crate::run::launch::{launch, Start};
use crate::run::trust::Verdict;
use crate::stages::labels::LabelSource;
use crate::stages::mining::AntiCollapse;
use crate::stages::qlearn::QKind;
use anyhow::{bail, Context, Result};
use candle_core::Device;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `laq train`.
#[derive(Args)]
pub struct TrainArgs {
    /// Dataset: `.npz`, `.safetensors` (docs/dataset-format.md), a D4RL-style HDF5 file, a
    /// Minari or a LeRobot (v3.0) dataset directory.
    #[arg(long, required_unless_present_any = ["resume", "repeat"])]
    pub data: Option<PathBuf>,
    #[command(flatten)]
    pub read: super::ReadArgs,
    /// Run directory for the model, labels, metrics and summary: new, empty, or an
    /// earlier run (a folder of other files is refused).
    #[arg(long, required_unless_present = "resume")]
    pub out: Option<PathBuf>,
    /// Continue the interrupted run in this directory, with its saved settings and data
    /// (other training options are ignored).
    #[arg(long, conflicts_with_all = ["data", "out", "repeat"])]
    pub resume: Option<PathBuf>,
    /// Repeat the finished run in this directory (its `config.toml` and the dataset named
    /// in its `run.json`, checked by fingerprint) into `--out`.
    #[arg(long, conflicts_with_all = ["data", "config"])]
    pub repeat: Option<PathBuf>,
    /// Seconds between checkpoints of a long run (`DIR/checkpoint.safetensors`, removed
    /// when the run completes).
    #[arg(long, default_value_t = 60.0)]
    pub checkpoint_secs: f64,
    /// Settings from a TOML file (`laq config default > laq.toml`); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Exit with status 4 when the verdict on V is doubtful (the run directory is
    /// written all the same).
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub settings: Overrides,
}

/// Flags that override single settings (each names its key in `laq config default`).
#[derive(Args)]
pub struct Overrides {
    /// Label source (default: latent).
    #[arg(long, value_enum)]
    pub labels: Option<LabelSource>,
    /// Q-learning (default: auto).
    #[arg(long, value_enum)]
    pub q: Option<QKind>,
    /// Number of latent actions K (default: 8).
    #[arg(long)]
    pub latent_actions: Option<usize>,
    /// Seed of every random choice (default: 0).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Forward-model training steps (default: 3000).
    #[arg(long)]
    pub mining_steps: Option<usize>,
    #[arg(long, value_enum)]
    pub anti_collapse: Option<AntiCollapse>,
    /// Forward models trained from different seeds; the lowest-loss one is kept (default 2).
    #[arg(long)]
    pub mining_restarts: Option<usize>,
    /// Steps of deep Q-learning (DQN, BCQ, CQL, IQL; default: set by the data: 30 passes
    /// over continuous states, at least 15000 steps; 10000 on images; 20000 otherwise).
    #[arg(long)]
    pub dqn_steps: Option<usize>,
    /// Q-functions from different seeds whose mean is exported as V (deep Q-learning;
    /// default: 4 on continuous states, 1 otherwise).
    #[arg(long)]
    pub ensemble: Option<usize>,
    /// Q-learn only on transitions of the N most used labels (the paper's top 8).
    #[arg(long)]
    pub top_actions: Option<usize>,
    /// Discount (default: 0.95 tabular, 0.99 DQN).
    #[arg(long)]
    pub gamma: Option<f64>,
    /// How the exported model computes V: max-q (default) or one-norm (1 - ||phi(s)||,
    /// low for states unlike the data).
    #[arg(long, value_enum)]
    pub head: Option<ValueHead>,
    /// Write a density gate into the model: a Gaussian mixture over all state dimensions,
    /// or over the ones listed (`--density-gate 0,1`); states below its 1st percentile
    /// count as outside the data (guidance and shaping skip or zero them).
    #[arg(long, num_args = 0.., value_delimiter = ',')]
    pub density_gate: Option<Vec<usize>>,
    /// Values of a vector state that V does not read (`--ignore-values 4,5`: a battery's
    /// voltage, a clock); Q-learning sees them as zero and the model scales them by 0.
    #[arg(long, value_delimiter = ',')]
    pub ignore_values: Option<Vec<usize>>,
}

impl Overrides {
    /// `(setting, value)` of every flag given.
    fn settings(&self) -> Result<Vec<(&'static str, toml::Value)>> {
        if let Some(g) = self.gamma {
            if !(0.0..1.0).contains(&g) {
                bail!("--gamma must be in [0, 1), got {g}");
            }
        }
        let int = |n: Option<usize>| n.map(|n| toml::Value::Integer(n as i64));
        let name = |v: Option<String>| v.map(toml::Value::String);
        let ints = |v: &Vec<usize>| {
            toml::Value::Array(v.iter().map(|&d| toml::Value::Integer(d as i64)).collect())
        };
        let all = [
            ("labels", name(self.labels.map(|l| l.key().to_string()))),
            ("q", name(self.q.map(|q| q.name().to_string()))),
            ("seed", self.seed.map(|s| toml::Value::Integer(s as i64))),
            ("mining.latent_actions", int(self.latent_actions)),
            ("mining.steps", int(self.mining_steps)),
            ("mining.restarts", int(self.mining_restarts)),
            (
                "mining.anti_collapse",
                self.anti_collapse.map(toml::Value::try_from).transpose()?,
            ),
            ("dqn.steps", int(self.dqn_steps)),
            ("ensemble", int(self.ensemble)),
            ("top_actions", int(self.top_actions)),
            ("tabular.gamma", self.gamma.map(toml::Value::Float)),
            ("dqn.gamma", self.gamma.map(toml::Value::Float)),
            ("head", self.head.map(toml::Value::try_from).transpose()?),
            (
                "density.enabled",
                self.density_gate.as_ref().map(|_| true.into()),
            ),
            ("density.dims", self.density_gate.as_ref().map(ints)),
            ("ignored_values", self.ignore_values.as_ref().map(ints)),
        ];
        Ok(all
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect())
    }
}

/// Trains, writes the run directory and prints its summary.
pub fn run(a: &TrainArgs, device: &Device) -> Result<()> {
    if !(a.checkpoint_secs >= 0.0 && a.checkpoint_secs.is_finite()) {
        bail!(
            "--checkpoint-secs must be a number of seconds >= 0, got {}",
            a.checkpoint_secs
        );
    }
    let start = match (&a.resume, &a.repeat, &a.data, &a.out) {
        (Some(dir), ..) => Start::Resume { dir: dir.clone() },
        (None, Some(dir), _, Some(out)) => Start::Repeat {
            dir: dir.clone(),
            out: out.clone(),
        },
        (None, None, Some(data), Some(out)) => Start::Fresh {
            data: data.clone(),
            read: a.read.options(),
            out: out.clone(),
        },
        _ => bail!("`laq train` needs --data and --out, or --resume DIR"),
    };
    let settings = |base: TrainConfig| -> Result<TrainConfig> {
        let base = match &a.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                base.overlay_toml(&text)
                    .with_context(|| format!("invalid settings in {}", path.display()))?
            }
            None => base,
        };
        base.with_settings(&a.settings.settings()?)
    };
    let every = std::time::Duration::from_secs_f64(a.checkpoint_secs);
    let (dir, metrics) = launch(&start, settings, every, device)?;
    outln!("wrote {}", dir.display());
    out!("{metrics}");
    if a.strict && metrics.trust.verdict == Verdict::Doubtful {
        std::process::exit(4);
    }
    Ok(())
}
