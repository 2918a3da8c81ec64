use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use laq::data::Dataset;
use laq::envs::gridworld::GridWorld;
use laq::labels::LabelSource;
use laq::mining::AntiCollapse;
use laq::qlearn::QKind;
use laq::reproduce::GridStudy;
use laq::train::{self, TrainConfig};
use std::path::PathBuf;

// Candle allocates a fresh buffer for every intermediate tensor; mimalloc reuses them
// instead of returning memory to the kernel, which halves a small training step.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

#[derive(Parser)]
#[command(
    name = "laq",
    version,
    about = "Latent Action Q-learning: value functions from state-only experience"
)]
struct Cli {
    /// Worker threads for tensor operations (default 1: fastest for LAQ's small networks).
    #[arg(long, global = true)]
    threads: Option<usize>,
    /// More detail in the log (-v debug, -vv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Only warnings and errors; no progress bars.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Where training runs: cpu, cuda or cuda:N (GPU N; needs a build with the `cuda`
    /// feature). Results on a GPU are not bit-identical to the CPU's.
    #[arg(long, global = true, default_value = "cpu")]
    device: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate a dataset from a built-in environment.
    Gen {
        #[command(subcommand)]
        env: GenEnv,
    },
    /// Learn V(s) from a dataset: label transitions, Q-learn, export the model.
    Train(TrainArgs),
    /// Evaluate an exported model on every observation of a dataset (through the runtime).
    Predict {
        /// A `value.safetensors` written by `laq train` or `laq export`.
        #[arg(long)]
        model: PathBuf,
        #[arg(long)]
        data: PathBuf,
        /// CSV output: one row per observation.
        #[arg(long)]
        out: PathBuf,
    },
    /// Re-export a model, e.g. with int8 weights for microcontrollers without an FPU.
    Export {
        #[arg(long)]
        model: PathBuf,
        #[arg(long, value_enum)]
        quantize: Option<Quantize>,
        #[arg(long)]
        out: PathBuf,
        /// Compare the new model against the original on this dataset's observations.
        #[arg(long)]
        data: Option<PathBuf>,
    },
    /// Print settings as TOML: `laq config default > laq.toml`, edit, `laq train --config laq.toml`.
    Config {
        #[command(subcommand)]
        what: ConfigCmd,
    },
    /// Describe a dataset (sizes, rewards, episodes, problems) or a model (layers,
    /// normalisation, footprint on a microcontroller).
    Inspect {
        file: PathBuf,
        /// Flash budget of the target MCU for a model, e.g. `256K` or `1M`.
        #[arg(long, value_parser = parse_bytes)]
        flash: Option<usize>,
        /// RAM budget of the target MCU for a model, e.g. `64K`.
        #[arg(long, value_parser = parse_bytes)]
        ram: Option<usize>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Convert a D4RL HDF5 file or a Minari dataset into a dataset file (see
    /// docs/dataset-format.md, "Importing D4RL and Minari files").
    Convert {
        /// The HDF5 file, or a Minari dataset directory.
        input: PathBuf,
        /// Layout of the input.
        #[arg(long, value_enum, default_value = "auto")]
        from: laq::import::Source,
        /// Output: `.npz` or `.safetensors`.
        #[arg(long)]
        out: PathBuf,
        /// Keys of a dict observation to flatten, in this order (default: every key, sorted).
        #[arg(long, value_delimiter = ',')]
        obs_keys: Option<Vec<String>>,
    },
    /// Reproduce a study of the paper end to end.
    Reproduce {
        #[command(subcommand)]
        study: Study,
    },
    /// Time training steps against baselines measured in the same run.
    Bench {
        /// Fewer repetitions.
        #[arg(long)]
        quick: bool,
        /// Also write the figures as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Frame size of the image steps (RGB, a multiple of 8).
        #[arg(long, default_value_t = 32)]
        image_size: usize,
        /// Batch of the image steps.
        #[arg(long, default_value_t = 32)]
        image_batch: usize,
        /// Only the image steps (with `--device cuda`: CPU and GPU side by side).
        #[arg(long)]
        images_only: bool,
    },
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// Every training setting with its default value.
    Default {
        /// Print the defaults `laq train` picks for this dataset (continuous states get a
        /// smaller forward model with larger batches).
        #[arg(long)]
        data: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Quantize {
    Int8,
}

#[derive(Subcommand)]
enum GenEnv {
    /// A Maze2D-like point mass wandering between random goal cells (D4RL style).
    Maze2d {
        /// `umaze` or `medium`.
        #[arg(long, default_value = "umaze")]
        layout: String,
        #[arg(long, default_value_t = 100000)]
        steps: usize,
        /// Steps per episode (each ends in a timeout).
        #[arg(long, default_value_t = 1000)]
        episode_len: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long)]
        out: PathBuf,
    },
    /// First-person views of the branching maze (two goals), RGB frames stored as u8,
    /// from the paper's data mix: 50% to the far goal, 49.5% to the near goal by a long
    /// detour, 0.5% to it directly, epsilon-greedy (0.2). Poses go in `infos`.
    NavBranching {
        #[arg(long, default_value_t = 1000)]
        episodes: usize,
        /// Frame width and height in pixels.
        #[arg(long, default_value_t = 64)]
        size: usize,
        /// Frames stacked along channels per observation.
        #[arg(long, default_value_t = 1)]
        frames: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// `.npz` or `.safetensors`.
        #[arg(long)]
        out: PathBuf,
    },
    /// The paper's 6x6 grid world with its sub-optimal behaviour policy.
    Gridworld {
        #[arg(long, default_value_t = 20000)]
        episodes: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Probability that the previous action is executed instead (sticky actions).
        #[arg(long, default_value_t = 0.0)]
        sticky: f64,
        /// `.npz` or `.safetensors`.
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum Study {
    /// The Maze2D value study: label sources x DQN/BCQ x seeds, Spearman against V from
    /// ground-truth actions (TD3+BC) and against the shortest-path oracle.
    Maze2d {
        #[arg(long, default_value = "out/maze2d")]
        out: PathBuf,
        #[arg(long, default_value = "umaze")]
        layout: String,
        /// Transitions of data.
        #[arg(long, default_value_t = 200_000)]
        steps: usize,
        #[arg(long, default_value_t = 3)]
        seeds: u64,
        /// Q-learning steps per run.
        #[arg(long, default_value_t = 60000)]
        q_steps: usize,
        /// Steps of the ground-truth-action reference.
        #[arg(long, default_value_t = 20000)]
        reference_steps: usize,
        /// Skip the behaviour studies (controller guidance, shaped SAC).
        #[arg(long)]
        no_behaviour: bool,
        /// Seeds per condition of the shaped-SAC study (default 5).
        #[arg(long)]
        shaping_seeds: Option<usize>,
        /// Environment steps per SAC run, for both bodies (default: 15k point mass, 45k
        /// robot).
        #[arg(long)]
        shaping_steps: Option<usize>,
    },
    /// The first-person navigation study: each label source's V on rendered frames,
    /// purity, Spearman against the optimal value, and SPL of V-guided controllers.
    Nav {
        #[arg(long, default_value = "out/nav")]
        out: PathBuf,
        /// Episodes of data (the paper: 1000).
        #[arg(long, default_value_t = 150)]
        episodes: usize,
        /// Frame width and height in pixels (the paper: 64).
        #[arg(long, default_value_t = 32)]
        size: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Label sources to compare.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "latent,single,cluster,gt"
        )]
        sources: Vec<laq::labels::LabelSource>,
        /// Offline Q-learning: dqn, bcq or cql.
        #[arg(long, default_value = "dqn")]
        q: laq::qlearn::QKind,
        /// Mining steps per label source.
        #[arg(long)]
        mining_steps: Option<usize>,
        /// Q-learning steps per label source.
        #[arg(long)]
        q_steps: Option<usize>,
        /// V-guided evaluation episodes (SPL).
        #[arg(long, default_value_t = 100)]
        spl_episodes: usize,
    },
    /// The grid-world study: every label source, Table 1 / S1 and Figure 1, sticky actions.
    Gridworld {
        #[arg(long, default_value = "out/gridworld")]
        out: PathBuf,
        #[arg(long, default_value_t = 20000)]
        episodes: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Skip the sticky-action study.
        #[arg(long)]
        no_sticky: bool,
    },
}

#[derive(Args)]
struct TrainArgs {
    /// Dataset (`.npz` or `.safetensors`, see docs/dataset-format.md).
    #[arg(long, required_unless_present_any = ["resume", "repeat"])]
    data: Option<PathBuf>,
    /// Run directory for the model, labels, metrics and summary.
    #[arg(long, required_unless_present = "resume")]
    out: Option<PathBuf>,
    /// Continue the interrupted run in this directory, with its saved settings and data
    /// (other training options are ignored).
    #[arg(long, conflicts_with_all = ["data", "out", "repeat"])]
    resume: Option<PathBuf>,
    /// Repeat the finished run in this directory (its `config.toml` and the dataset named
    /// in its `run.json`, checked by fingerprint) into `--out`.
    #[arg(long, conflicts_with_all = ["data", "config"])]
    repeat: Option<PathBuf>,
    /// Seconds between checkpoints of a long run (`DIR/checkpoint.safetensors`, removed
    /// when the run completes).
    #[arg(long, default_value_t = 60.0)]
    checkpoint_secs: f64,
    /// Settings from a TOML file (`laq config default > laq.toml`); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Label source (default: latent).
    #[arg(long, value_enum)]
    labels: Option<LabelSource>,
    /// Q-learning (default: auto).
    #[arg(long, value_enum)]
    q: Option<QKind>,
    /// Number of latent actions K (default: 8).
    #[arg(long)]
    latent_actions: Option<usize>,
    /// Seed of every random choice (default: 0).
    #[arg(long)]
    seed: Option<u64>,
    /// Forward-model training steps (default: 3000).
    #[arg(long)]
    mining_steps: Option<usize>,
    #[arg(long, value_enum)]
    anti_collapse: Option<AntiCollapse>,
    /// Forward models trained from different seeds; the lowest-loss one is kept (default 2).
    #[arg(long)]
    mining_restarts: Option<usize>,
    /// DQN training steps (default: 20000).
    #[arg(long)]
    dqn_steps: Option<usize>,
    /// Q-learn only on transitions of the N most used labels (the paper's top 8).
    #[arg(long)]
    top_actions: Option<usize>,
    /// Discount (default: 0.95 tabular, 0.99 DQN).
    #[arg(long)]
    gamma: Option<f64>,
}

fn main() {
    let cli = Cli::parse();
    laq::default_threads(cli.threads);
    laq::progress::init(if cli.quiet {
        -1
    } else {
        cli.verbose.min(2) as i8
    });
    if let Err(e) = laq::device(&cli.device).and_then(|device| run(cli.cmd, &device)) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cmd: Cmd, device: &candle_core::Device) -> Result<()> {
    match cmd {
        Cmd::Gen {
            env:
                GenEnv::Gridworld {
                    episodes,
                    seed,
                    sticky,
                    out,
                },
        } => {
            if !(0.0..=1.0).contains(&sticky) {
                anyhow::bail!("--sticky must be a probability in [0, 1], got {sticky}");
            }
            let data = GridWorld::default().generate(episodes, seed, sticky);
            data.save(&out)?;
            log::info!(
                "wrote {} transitions from {episodes} episodes to {}",
                data.len(),
                out.display()
            );
        }
        Cmd::Gen {
            env:
                GenEnv::Maze2d {
                    layout,
                    steps,
                    episode_len,
                    seed,
                    out,
                },
        } => {
            if episode_len == 0 || steps == 0 {
                anyhow::bail!("--steps and --episode-len must be positive");
            }
            let maze = laq::envs::maze2d::Maze::named(&layout)?;
            let data = maze.generate(steps, episode_len, seed);
            data.save(&out)?;
            let rewarded = data.rewards.iter().filter(|&&r| r > 0.0).count();
            log::info!(
                "wrote {} transitions ({rewarded} rewarded) of the {layout} maze to {}",
                data.len(),
                out.display()
            );
        }
        Cmd::Gen {
            env:
                GenEnv::NavBranching {
                    episodes,
                    size,
                    frames,
                    seed,
                    out,
                },
        } => {
            let cfg = laq::envs::nav::GenConfig {
                episodes,
                size,
                frames,
                ..Default::default()
            };
            use laq::envs::nav::{Goal, Kind, Nav};
            let data = Nav::branching()?.generate(&cfg, seed)?;
            for kind in Kind::ALL {
                let eps: Vec<_> = data.episodes.iter().filter(|e| e.kind == kind).collect();
                let at = |g: Option<Goal>| eps.iter().filter(|e| e.goal == g).count();
                log::info!(
                    "{kind:?}: {} episodes, mean length {:.1}, ended at G_near {}, G_far {}, \
                     cut at the step limit {}",
                    eps.len(),
                    eps.iter().map(|e| e.len).sum::<usize>() as f64 / eps.len().max(1) as f64,
                    at(Some(Goal::Near)),
                    at(Some(Goal::Far)),
                    at(None)
                );
            }
            let (n, shape) = (data.len(), data.obs_shape.clone());
            laq::data::write_arrays(&out, &data.into_arrays())?;
            log::info!(
                "wrote {n} transitions of {shape:?} u8 frames from {episodes} episodes to {}",
                out.display()
            );
        }
        Cmd::Train(a) => train_cmd(&a, device)?,
        Cmd::Config {
            what: ConfigCmd::Default { data },
        } => {
            let cfg = match data {
                Some(d) => TrainConfig::for_data(&Dataset::load(&d)?),
                None => TrainConfig::default(),
            };
            outln!(
                "# laq training settings; `laq train --config FILE` reads them and flags override."
            );
            out!("{}", cfg.to_toml()?);
        }
        Cmd::Inspect {
            file,
            flash,
            ram,
            json,
        } => {
            let budget = match (flash, ram) {
                (None, None) => None,
                (f, r) => Some(laq::inspect::Budget {
                    flash: f.unwrap_or(usize::MAX),
                    ram: r.unwrap_or(usize::MAX),
                }),
            };
            let (text, j) = laq::inspect::inspect(&file, budget)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&j)?);
            } else {
                out!("{text}");
            }
            if j["budget"]["fits"] == false {
                std::process::exit(3);
            }
        }
        Cmd::Predict { model, data, out } => {
            let n = laq::predict::predict_csv(&model, &data, &out)?;
            log::info!("wrote V of {n} observations to {}", out.display());
        }
        Cmd::Export {
            model,
            quantize,
            out,
            data,
        } => {
            let m = laq::export::ValueModel::load(&model)?;
            let data = data.map(|d| Dataset::load(&d)).transpose()?;
            let int8 = matches!(quantize, Some(Quantize::Int8));
            let m = match (&data, int8) {
                (Some(d), true) => {
                    let states: Vec<f32> = d
                        .observations
                        .iter()
                        .chain(&d.next_observations)
                        .copied()
                        .collect();
                    laq::quantize::calibrate_int8(&m, &states, &Default::default(), device)?
                }
                (None, true) => {
                    log::warn!("without --data the weights are only rounded; calibration states make int8 more faithful");
                    m
                }
                _ => m,
            };
            m.save(&out, int8)?;
            log::info!("wrote {}", out.display());
            if let Some(d) = &data {
                outln!("{}", laq::predict::compare(&model, &out, d)?);
            }
        }
        Cmd::Reproduce {
            study:
                Study::Gridworld {
                    out,
                    episodes,
                    seed,
                    no_sticky,
                },
        } => {
            let mut study = GridStudy {
                episodes,
                seed,
                ..Default::default()
            };
            if no_sticky {
                study.sticky.clear();
            }
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            let (_, report) = laq::reproduce::gridworld(&out, &study, device)?;
            out!("{report}");
            outln!("metrics: {}", out.join("metrics.json").display());
        }
        Cmd::Reproduce {
            study:
                Study::Nav {
                    out,
                    episodes,
                    size,
                    seed,
                    sources,
                    q,
                    mining_steps,
                    q_steps,
                    spl_episodes,
                },
        } => {
            let mut cfg = laq::navstudy::NavStudyConfig {
                episodes,
                size,
                seed,
                sources,
                spl_episodes,
                ..Default::default()
            };
            cfg.train.q = q;
            if let Some(n) = mining_steps {
                cfg.train.mining.steps = n;
            }
            if let Some(n) = q_steps {
                cfg.train.dqn.steps = n;
            }
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            let (_, report) = laq::reproduce::nav(&out, &cfg, device)?;
            out!("{report}");
            outln!("metrics: {}", out.join("metrics.json").display());
        }
        Cmd::Reproduce {
            study:
                Study::Maze2d {
                    out,
                    layout,
                    steps,
                    seeds,
                    q_steps,
                    reference_steps,
                    no_behaviour,
                    shaping_seeds,
                    shaping_steps,
                },
        } => {
            let mut study = laq::reproduce::MazeStudy {
                layout,
                steps,
                seeds: (0..seeds).collect(),
                ..Default::default()
            };
            study.train.dqn.steps = q_steps;
            study.reference.steps = reference_steps;
            if no_behaviour {
                study.guide = None;
                study.shaping.clear();
            }
            for (_, cfg) in &mut study.shaping {
                if let Some(n) = shaping_seeds {
                    cfg.seeds = n;
                }
                if let Some(n) = shaping_steps {
                    // Keep the number of evaluations.
                    cfg.eval_every = (cfg.eval_every * n / cfg.steps.max(1)).max(1);
                    cfg.steps = n;
                }
            }
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            let (_, report) = laq::reproduce::maze2d(&out, &study, device)?;
            out!("{report}");
            outln!("metrics: {}", out.join("metrics.json").display());
        }
        Cmd::Convert {
            input,
            from,
            out,
            obs_keys,
        } => convert_cmd(&input, from, &out, obs_keys)?,
        Cmd::Bench {
            quick,
            json,
            image_size,
            image_batch,
            images_only,
        } => {
            let img = laq::bench::ImageBench {
                size: image_size,
                batch: image_batch,
                ..Default::default()
            };
            let (v, report) = if images_only {
                laq::bench::images(quick, img, device)?
            } else {
                laq::bench::run(quick, img, device)?
            };
            out!("{report}");
            if let Some(p) = json {
                laq::io::write_text(&p, &serde_json::to_string_pretty(&v)?)?;
            }
        }
    }
    Ok(())
}

/// The settings of a fresh run: defaults that suit the data, then the flags.
fn train_config(a: &TrainArgs, data: &Dataset) -> Result<TrainConfig> {
    let base = TrainConfig::for_data(data);
    let mut cfg = match &a.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            base.overlay_toml(&text)
                .with_context(|| format!("invalid settings in {}", path.display()))?
        }
        None => base,
    };
    if let Some(l) = a.labels {
        cfg.labels = l;
    }
    if let Some(q) = a.q {
        cfg.q = q;
    }
    if let Some(seed) = a.seed {
        cfg.seed = seed;
    }
    if let Some(k) = a.latent_actions {
        cfg.mining.latent_actions = k;
    }
    if let Some(s) = a.mining_steps {
        cfg.mining.steps = s;
    }
    if a.top_actions.is_some() {
        cfg.top_actions = a.top_actions;
    }
    if let Some(r) = a.mining_restarts {
        cfg.mining.restarts = r;
    }
    if let Some(ac) = a.anti_collapse {
        cfg.mining.anti_collapse = ac;
    }
    if let Some(s) = a.dqn_steps {
        cfg.dqn.steps = s;
    }
    if let Some(g) = a.gamma {
        if !(0.0..1.0).contains(&g) {
            anyhow::bail!("--gamma must be in [0, 1), got {g}");
        }
        cfg.tabular.gamma = g;
        cfg.dqn.gamma = g;
    }
    Ok(cfg)
}

/// `laq train`: a fresh run, or the continuation of an interrupted one (`--resume`).
fn train_cmd(a: &TrainArgs, device: &candle_core::Device) -> Result<()> {
    use laq::checkpoint::{self, Checkpointer};
    if !(a.checkpoint_secs >= 0.0 && a.checkpoint_secs.is_finite()) {
        anyhow::bail!(
            "--checkpoint-secs must be a number of seconds >= 0, got {}",
            a.checkpoint_secs
        );
    }
    let every = std::time::Duration::from_secs_f64(a.checkpoint_secs);
    let (data_path, out, saved) = match (&a.resume, &a.data, &a.out) {
        (Some(dir), _, _) => {
            let id = Checkpointer::identity_of(dir)?;
            let cfg: TrainConfig = serde_json::from_value(id["config"].clone())
                .context("the checkpoint's settings are unreadable")?;
            let data = id["data"]
                .as_str()
                .context("the checkpoint does not name its dataset")?;
            (PathBuf::from(data), dir.clone(), Some(cfg))
        }
        (None, data, Some(out)) if data.is_some() || a.repeat.is_some() => {
            if out.join(checkpoint::FILE).exists() {
                anyhow::bail!(
                    "{} holds an unfinished run ({}): continue it with `laq train --resume {}`, \
                     or delete that file to start over",
                    out.display(),
                    checkpoint::FILE,
                    out.display()
                );
            }
            match (&a.repeat, data) {
                (Some(dir), _) => {
                    let (data, cfg) = repeat_of(dir)?;
                    (data, out.clone(), Some(cfg))
                }
                (None, Some(data)) => (data.clone(), out.clone(), None),
                (None, None) => anyhow::bail!("`laq train` needs --data"),
            }
        }
        _ => anyhow::bail!("`laq train` needs --data and --out, or --resume DIR"),
    };
    let data = Dataset::load(&data_path)?;
    if let Some(dir) = &a.repeat {
        let run = read_json(&dir.join("run.json"))?;
        if run["data_fingerprint"].as_str() != Some(&checkpoint::fingerprint(&data)) {
            anyhow::bail!(
                "{} is not the dataset {} was trained on (fingerprint differs)",
                data_path.display(),
                dir.display()
            );
        }
    }
    let cfg = match saved {
        Some(cfg) => cfg,
        None => train_config(a, &data)?,
    };
    log::info!(
        "{} transitions, observation shape {:?}",
        data.len(),
        data.obs_shape
    );
    // What a resumed run must share with the interrupted one.
    let mut identity = serde_json::Map::new();
    identity.insert("config".into(), serde_json::to_value(&cfg)?);
    let abs = std::fs::canonicalize(&data_path)
        .with_context(|| format!("cannot resolve {}", data_path.display()))?;
    identity.insert("data".into(), abs.display().to_string().into());
    identity.insert(
        "data_fingerprint".into(),
        checkpoint::fingerprint(&data).into(),
    );
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut ckpt = if a.resume.is_some() {
        log::info!("resuming the run in {}", out.display());
        Checkpointer::resume(&out, every, identity)?
    } else {
        Checkpointer::new(&out, every, identity)
    };
    let trained = train::train_resumable(&data, &cfg, device, Some(&mut ckpt))?;
    train::write_run(
        &out,
        &data,
        &cfg,
        &trained,
        &data_path.display().to_string(),
    )?;
    ckpt.finish()?;
    out!("{}", std::fs::read_to_string(out.join("summary.txt"))?);
    outln!("wrote {}", out.display());
    Ok(())
}

/// `laq convert`: a D4RL or Minari file into the dataset format, with a summary of what
/// was kept and dropped.
fn convert_cmd(
    input: &std::path::Path,
    from: laq::import::Source,
    out: &std::path::Path,
    obs_keys: Option<Vec<String>>,
) -> Result<()> {
    let opts = laq::import::ImportOptions { obs_keys };
    let imported = laq::import::convert(input, from, &opts, out)?;
    out!("{}", imported.summary());
    outln!(
        "wrote {} transitions to {}",
        imported.data.len(),
        out.display()
    );
    Ok(())
}

/// A byte count with an optional binary suffix: `4096`, `256K`, `1M`.
fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1024),
        Some('M' | 'm') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("`{s}` is not a size in bytes (e.g. 4096, 256K, 1M)"))
}

fn read_json(path: &std::path::Path) -> Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))
}

/// The dataset and settings of a finished run directory.
fn repeat_of(dir: &std::path::Path) -> Result<(PathBuf, TrainConfig)> {
    let run = read_json(&dir.join("run.json"))?;
    let data = run["data"]
        .as_str()
        .with_context(|| format!("{} names no dataset", dir.join("run.json").display()))?;
    let path = dir.join("config.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let cfg: TrainConfig =
        toml::from_str(&text).with_context(|| format!("invalid settings in {}", path.display()))?;
    Ok((PathBuf::from(data), cfg))
}
