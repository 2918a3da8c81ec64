//! The `laq` command line: one module per subcommand, each an `Args` struct and a `run`
//! function; `main.rs` parses and dispatches.

/// Writes to standard output; a reader that went away (`laq inspect FILE | head`) ends
/// the program quietly instead of with a panic, like other command-line tools.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = write!(std::io::stdout(), $($t)*) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
            return Err(e.into());
        }
    }};
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($t:tt)*) => {{
        out!($($t)*);
        out!("\n");
    }};
}

pub mod bench;
pub mod config;
pub mod convert;
pub mod export;
pub mod gen;
pub mod inspect;
pub mod predict;
pub mod reproduce;
pub mod train;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

/// How a command reads its dataset (`--obs-keys`, `--reward`), shared by every command
/// that takes one.
#[derive(Args, Clone, Debug, Default)]
pub struct ReadArgs {
    /// Keys of a dict observation to flatten, in this order (HDF5 sources; default: every
    /// key, sorted; one key alone keeps its shape, so a camera's frames stay frames), or
    /// features of a LeRobot dataset side by side (default: `observation.state`).
    #[arg(long, value_delimiter = ',')]
    pub obs_keys: Option<Vec<String>>,
    /// Where the rewards come from: an array of the file (default `rewards`; a LeRobot
    /// dataset's `next.reward`) or a LeRobot feature, `episode-end` (1 on each episode's
    /// last transition, which becomes terminal), or a `.csv` file of rewarded
    /// `episode,step` pairs (for LeRobot, `episode_index,frame_index`).
    #[arg(long)]
    pub reward: Option<crate::data::read::RewardSource>,
    /// Height x width camera frames are stored at, such as `72x96` (a LeRobot camera named
    /// with --obs-keys, `convert --from video`): averaged over areas when shrinking,
    /// bilinear when enlarging. Default: the video's size, shrunk to 96 pixels on its
    /// longer side when larger (640x480 becomes 96x72).
    #[arg(long, value_name = "HxW")]
    pub image_size: Option<crate::data::import::video::ImageSize>,
}

impl ReadArgs {
    /// The options these flags set.
    pub fn options(&self) -> crate::data::read::ReadOptions {
        crate::data::read::ReadOptions {
            obs_keys: self.obs_keys.clone(),
            reward: self.reward.clone().unwrap_or_default(),
            image_size: self.image_size,
        }
    }
}

/// The whole command line.
#[derive(Parser)]
#[command(
    name = "laq",
    version,
    about = "Latent Action Q-learning: value functions from state-only experience"
)]
pub struct Cli {
    /// Worker threads for tensor operations (default 1: fastest for LAQ's small networks).
    #[arg(long, global = true)]
    pub threads: Option<usize>,
    /// More detail in the log (-v debug, -vv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only warnings and errors; no progress bars.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Where training runs: cpu, cuda or cuda:N (GPU N; needs a build with the `cuda`
    /// feature). Results on a GPU are not bit-identical to the CPU's.
    #[arg(long, global = true, default_value = "cpu")]
    pub device: String,
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Cmd {
    /// Generate a dataset from a built-in environment.
    Gen {
        #[command(subcommand)]
        env: gen::GenEnv,
    },
    /// Learn V(s) from a dataset: label transitions, Q-learn, export the model.
    Train(Box<train::TrainArgs>),
    /// Evaluate an exported model on every observation of a dataset (through the runtime).
    Predict(predict::PredictArgs),
    /// Re-export a model, e.g. with int8 weights for microcontrollers without an FPU.
    Export(export::ExportArgs),
    /// Print settings as TOML: `laq config default > laq.toml`, edit, `laq train --config laq.toml`.
    Config {
        #[command(subcommand)]
        what: config::ConfigCmd,
    },
    /// Describe a dataset in any format laq reads (sizes, rewards, episodes, rows left out,
    /// problems), a model (layers, normalisation, footprint on a microcontroller) or a run
    /// directory (its verdict on V).
    Inspect(inspect::InspectArgs),
    /// Convert a D4RL HDF5 file, a Minari or a LeRobot dataset into a dataset file (see
    /// docs/dataset-format.md, "Importing D4RL and Minari files", "LeRobot datasets").
    Convert(convert::ConvertArgs),
    /// Reproduce a study of the paper end to end.
    Reproduce {
        #[command(subcommand)]
        study: reproduce::Study,
    },
    /// Time training steps against baselines measured in the same run.
    Bench(bench::BenchArgs),
}

impl Cli {
    /// Sets up threads and logging, then runs the subcommand on the chosen device.
    pub fn run(self) -> Result<()> {
        crate::default_threads(self.threads);
        crate::util::progress::init(if self.quiet {
            -1
        } else {
            self.verbose.min(2) as i8
        });
        let device = crate::device(&self.device)?;
        match self.cmd {
            Cmd::Gen { env } => gen::run(env),
            Cmd::Train(a) => train::run(&a, &device),
            Cmd::Predict(a) => predict::run(&a),
            Cmd::Export(a) => export::run(&a, &device),
            Cmd::Config { what } => config::run(what),
            Cmd::Inspect(a) => inspect::run(&a),
            Cmd::Convert(a) => convert::run(&a),
            Cmd::Reproduce { study } => reproduce::run(study, &device),
            Cmd::Bench(a) => bench::run(&a, &device),
        }
    }
}
