//! `laq gen`: datasets from the built-in environments.

use crate::envs::gridworld::GridWorld;
use crate::envs::maze2d::{Maze, Physics};
use crate::envs::nav::{GenConfig, Goal, Kind, Nav};
use anyhow::{bail, Result};
use clap::Subcommand;
use std::path::PathBuf;

/// The environments `laq gen` knows.
#[derive(Subcommand)]
pub enum GenEnv {
    /// A Maze2D-like point mass wandering between random goal cells (D4RL style).
    Maze2d {
        /// `umaze`, `medium` or `large` (D4RL's layouts).
        #[arg(long, default_value = "umaze")]
        layout: String,
        #[arg(long, default_value_t = 100000)]
        steps: usize,
        /// Steps per episode (each ends in a timeout).
        #[arg(long, default_value_t = 1000)]
        episode_len: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Mass of the point (the acceleration per unit of action is 100 / mass).
        #[arg(long, default_value_t = 1.0)]
        mass: f32,
        /// Share of the velocity kept at each simulation step (lower: more friction).
        #[arg(long, default_value_t = 0.99)]
        damping: f32,
        /// Speed limit along each axis.
        #[arg(long, default_value_t = 5.0)]
        max_speed: f32,
        /// Standard deviation of the data controller's action noise.
        #[arg(long, default_value_t = 0.3)]
        noise: f32,
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
        /// Also write V* of every transition's first pose (the better goal's reward,
        /// discounted by the fewest actions to it) to `OUT_truth.npy` beside the data, to
        /// score a V learned from it (`python3 scripts/pointmaze.py score OUT_truth.npy
        /// v.csv`).
        #[arg(long)]
        truth: bool,
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

/// Generates and writes the dataset.
pub fn run(env: GenEnv) -> Result<()> {
    match env {
        GenEnv::Gridworld {
            episodes,
            seed,
            sticky,
            out,
        } => {
            if !(0.0..=1.0).contains(&sticky) {
                bail!("--sticky must be a probability in [0, 1], got {sticky}");
            }
            let data = GridWorld::default().generate(episodes, seed, sticky);
            data.save(&out)?;
            log::info!(
                "wrote {} transitions from {episodes} episodes to {}",
                data.len(),
                out.display()
            );
        }
        GenEnv::Maze2d {
            layout,
            steps,
            episode_len,
            seed,
            mass,
            damping,
            max_speed,
            noise,
            out,
        } => {
            if episode_len == 0 || steps == 0 {
                bail!("--steps and --episode-len must be positive");
            }
            let physics = Physics {
                mass,
                damping,
                max_speed,
                noise,
            };
            let maze = Maze::named(&layout)?.with_physics(physics)?;
            let data = maze.generate(steps, episode_len, seed);
            data.save(&out)?;
            let rewarded = data.rewards.iter().filter(|&&r| r > 0.0).count();
            log::info!(
                "wrote {} transitions ({rewarded} rewarded) of the {layout} maze to {}",
                data.len(),
                out.display()
            );
        }
        GenEnv::NavBranching {
            episodes,
            size,
            frames,
            seed,
            out,
            truth,
        } => {
            let cfg = GenConfig {
                episodes,
                size,
                frames,
                ..Default::default()
            };
            let env = Nav::branching()?;
            let data = env.generate(&cfg, seed)?;
            let optimal: Option<Vec<f32>> = truth.then(|| {
                data.optimal_values(&env)
                    .iter()
                    .map(|&v| v as f32)
                    .collect()
            });
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
            crate::data::write_arrays(&out, &data.into_arrays())?;
            log::info!(
                "wrote {n} transitions of {shape:?} u8 frames from {episodes} episodes to {}",
                out.display()
            );
            if let Some(v) = optimal {
                let stem = out.file_stem().unwrap_or_default().to_string_lossy();
                let path = out.with_file_name(format!("{stem}_truth.npy"));
                let array = crate::data::RawArray::from_f32(vec![n], &v);
                crate::util::io::write_atomic(&path, &crate::data::files::npy_bytes(&array))?;
                log::info!("wrote V* of every transition to {}", path.display());
            }
        }
    }
    Ok(())
}
