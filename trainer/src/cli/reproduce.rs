//! `laq reproduce`: the paper's studies end to end.

use crate::stages::labels::LabelSource;
use crate::stages::qlearn::QKind;
use crate::studies::{grid, maze, nav};
use anyhow::{Context, Result};
use candle_core::Device;
use clap::Subcommand;
use std::path::{Path, PathBuf};

/// The studies.
#[derive(Subcommand)]
pub enum Study {
    /// The Maze2D value study: label sources x DQN/BCQ x seeds, Spearman against V from
    /// ground-truth actions (TD3+BC) and against the shortest-path oracle.
    Maze2d {
        #[arg(long, default_value = "out/maze2d")]
        out: PathBuf,
        /// `umaze`, `medium` or `large` (D4RL's layouts).
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
        /// Seeds the data, every label source's training and the evaluation starts.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Label sources to compare.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "latent,single,cluster,gt"
        )]
        sources: Vec<LabelSource>,
        /// Offline Q-learning: dqn, bcq, cql or iql.
        #[arg(long, default_value = "dqn")]
        q: QKind,
        /// Mining steps per label source.
        #[arg(long)]
        mining_steps: Option<usize>,
        /// Q-learning steps per label source.
        #[arg(long)]
        q_steps: Option<usize>,
        /// Q-functions from different seeds whose mean is each source's V (1: one, and a
        /// second for the trust checks).
        #[arg(long)]
        ensemble: Option<usize>,
        /// V-guided evaluation episodes (SPL).
        #[arg(long, default_value_t = 100)]
        spl_episodes: usize,
        /// Macro-actions V-guided navigation plans ahead (1: greedy, the paper's protocol,
        /// which is reported beside it; at most 4).
        #[arg(long, default_value_t = nav::LOOKAHEAD)]
        lookahead: usize,
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

/// Runs the study into its directory and prints its report.
pub fn run(study: Study, device: &Device) -> Result<()> {
    let (out, report) = match study {
        Study::Gridworld {
            out,
            episodes,
            seed,
            no_sticky,
        } => {
            let mut study = grid::GridStudy {
                episodes,
                seed,
                ..Default::default()
            };
            if no_sticky {
                study.sticky.clear();
            }
            create(&out, "gridworld")?;
            (out.clone(), grid::gridworld(&out, &study, device)?.1)
        }
        Study::Nav {
            out,
            episodes,
            size,
            seed,
            sources,
            q,
            mining_steps,
            q_steps,
            ensemble,
            spl_episodes,
            lookahead,
        } => {
            let mut cfg = nav::NavStudyConfig {
                episodes,
                size,
                seed,
                sources,
                spl_episodes,
                lookahead,
                ..Default::default()
            };
            cfg.train.q = q;
            cfg.train.seed = seed;
            if let Some(n) = mining_steps {
                cfg.train.mining.steps = n;
            }
            if let Some(n) = q_steps {
                cfg.train.dqn.steps = n;
            }
            if let Some(n) = ensemble {
                cfg.train.ensemble = n;
            }
            create(&out, "nav")?;
            (out.clone(), nav::nav(&out, &cfg, device)?.1)
        }
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
        } => {
            let mut study = maze::MazeStudy {
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
            create(&out, "maze2d")?;
            (out.clone(), maze::maze2d(&out, &study, device)?.1)
        }
    };
    out!("{report}");
    outln!("metrics: {}", out.join("metrics.json").display());
    Ok(())
}

/// Marks a directory as a study's from its start, so that a study cut short can run there
/// again.
const STUDY_FILE: &str = "study.json";

/// The study's directory: new, empty, or an earlier study's (a study writes its figures,
/// models and data there, and would replace a user's own files). `metrics.json` marks
/// the studies finished before `study.json` was written.
fn create(dir: &Path, study: &str) -> Result<()> {
    crate::run::launch::refuse_unless_holds(dir, &[STUDY_FILE, "metrics.json"], "study")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let marker = serde_json::json!({ "study": study });
    crate::util::io::write_atomic(&dir.join(STUDY_FILE), marker.to_string().as_bytes())
}
