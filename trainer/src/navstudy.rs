//! The first-person navigation study (the paper's 3D navigation experiment, section 5.2,
//! on the branching maze of [`crate::envs::nav`]): for each label source, LAQ's pipeline on
//! rendered frames (convolutional forward model and Q-network), then
//!
//! - **purity**: the paper's state-conditioned purity of the labels against the recorded
//!   actions, with the agent's pose (lattice point and heading) as the state;
//! - **spearman**: rank correlation of V with the exact optimal value V* of the pose
//!   behind each dataset state;
//! - **spl**: success weighted by path length of V-guided navigation: from random starts in
//!   the start room, at every junction each macro-action (move along a corridor to the next
//!   junction) is scored by V of the frame it ends at and the best is executed. Success is
//!   reaching G_near, the optimal goal (ending at G_far is a failure, as in the paper's
//!   optimal-goal SPL); the reference length is the geodesic distance to G_near.
//!
//! The data's behaviour mostly goes to the far goal or reaches the near one by a long
//! detour, so a value that merely evaluates the behaviour (one action label) prefers the
//! wrong goal.

use crate::envs::nav::{self, GenConfig, Goal, Nav, Pose, Renderer};
use crate::eval;
use crate::labels::LabelSource;
use crate::qlearn::{QKind, QNetwork};
use crate::train::{self, TrainConfig};
use anyhow::{bail, Context, Result};
use candle_core::Device;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// Settings of the study.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NavStudyConfig {
    /// Episodes of data (the paper: 1000).
    pub episodes: usize,
    /// Frame width and height in pixels.
    pub size: usize,
    pub seed: u64,
    pub sources: Vec<LabelSource>,
    /// Mining and Q-learning settings (labels and Q-learning kind are set per source).
    pub train: TrainConfig,
    /// Evaluation episodes of V-guided navigation.
    pub spl_episodes: usize,
    /// Macro-actions an evaluation episode may take before it counts as a failure.
    pub max_decisions: usize,
    /// Dataset states (evenly spaced) over which Spearman is computed; 0: all.
    pub spearman_states: usize,
}

impl Default for NavStudyConfig {
    /// A size that runs in about five minutes on one core: 150 episodes of 32x32 frames
    /// (about 13k transitions), the image training settings with 1000 mining steps and
    /// 4000 Q-learning steps per label source, 50 evaluation episodes.
    fn default() -> Self {
        let mut train = TrainConfig::images();
        train.q = QKind::Dqn;
        train.mining.steps = 1000;
        train.dqn.steps = 4000;
        NavStudyConfig {
            episodes: 150,
            size: 32,
            seed: 0,
            sources: vec![
                LabelSource::Latent,
                LabelSource::Single,
                LabelSource::Cluster,
                LabelSource::Gt,
            ],
            train,
            spl_episodes: 50,
            max_decisions: 30,
            spearman_states: 5000,
        }
    }
}

/// One label source's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MethodResult {
    pub spearman: f64,
    pub purity: f64,
    pub spl: f64,
    /// Share of evaluation episodes that reached G_near, and G_far.
    pub success: f64,
    pub far: f64,
    /// Purity with the pose's cell and heading as the state (coarser than the pose).
    pub purity_cell: f64,
    pub num_actions: usize,
    pub seconds: f64,
}

/// The study's results: `{"methods": {"<source>": {...}}, ...}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NavStudy {
    pub methods: BTreeMap<String, MethodResult>,
    pub transitions: usize,
    /// Distinct poses among the dataset states (purity's state count).
    pub poses: usize,
    pub obs_shape: Vec<usize>,
    /// Seconds to generate the data.
    pub data_seconds: f64,
    pub config: NavStudyConfig,
}

/// Runs the study.
pub fn run(cfg: &NavStudyConfig, device: &Device) -> Result<NavStudy> {
    if cfg.sources.is_empty() {
        bail!("the navigation study needs at least one label source");
    }
    let env = Nav::branching()?;
    let t = Instant::now();
    let gen = GenConfig {
        episodes: cfg.episodes,
        size: cfg.size,
        frames: 1,
        ..GenConfig::default()
    };
    let nav_data = env.generate(&gen, cfg.seed)?;
    let data = nav_data.to_dataset();
    let data_seconds = t.elapsed().as_secs_f64();
    log::info!(
        "navigation data: {} transitions of {:?} in {data_seconds:.1} s ({:.0} MB of u8 observations)",
        data.len(),
        data.obs_shape,
        data.obs_memory_bytes() as f64 / 1e6
    );
    let actions = data.discrete_actions("the navigation study")?.to_vec();
    let pose_ids = ids(nav_data.poses.iter().copied());
    let cell_ids = ids(nav_data.poses.iter().map(|p| {
        let cell = env.map.cell_of(*p);
        (cell, p.heading as usize % nav::HEADINGS)
    }));
    let poses = pose_ids.iter().max().map_or(0, |m| m + 1);
    let n = data.len();
    let idx: Vec<usize> = if cfg.spearman_states == 0 || cfg.spearman_states >= n {
        (0..n).collect()
    } else {
        (0..cfg.spearman_states)
            .map(|j| j * n / cfg.spearman_states)
            .collect()
    };
    let v_star: Vec<f64> = idx
        .iter()
        .map(|&i| env.optimal_value(nav_data.poses[i]))
        .collect();
    let renderer = Renderer::new(cfg.size, cfg.size)?;
    let mut methods = BTreeMap::new();
    for &source in &cfg.sources {
        let t = Instant::now();
        let mut tc = cfg.train.clone();
        tc.labels = source;
        if matches!(tc.q, QKind::Auto | QKind::Tabular) {
            tc.q = QKind::Dqn;
        }
        let trained = train::train(&data, &tc, device)
            .with_context(|| format!("label source `{}`", source.key()))?;
        let q = trained
            .qnet
            .as_ref()
            .context("the study needs a deep Q-network")?;
        let labels = &trained.labelled.labels;
        let purity = eval::state_purity(&pose_ids, labels, &actions);
        let purity_cell = eval::state_purity(&cell_ids, labels, &actions);
        let v: Vec<f64> = q
            .values_of(&data, &idx, device)?
            .into_iter()
            .map(f64::from)
            .collect();
        let spearman = eval::spearman(&v, &v_star);
        let g = guided(&env, q, &renderer, cfg, device)?;
        let r = MethodResult {
            spearman,
            purity,
            spl: g.spl,
            success: g.success,
            far: g.far,
            purity_cell,
            num_actions: trained.labelled.num_actions,
            seconds: t.elapsed().as_secs_f64(),
        };
        log::info!(
            "{}: spearman {:.3}, purity {:.3}, SPL {:.3} ({:.0} s)",
            source.key(),
            r.spearman,
            r.purity,
            r.spl,
            r.seconds
        );
        methods.insert(source.key().to_string(), r);
    }
    Ok(NavStudy {
        methods,
        transitions: n,
        poses,
        obs_shape: data.obs_shape.clone(),
        data_seconds,
        config: cfg.clone(),
    })
}

/// Dense ids of values in order of first appearance.
fn ids<T: std::hash::Hash + Eq>(values: impl Iterator<Item = T>) -> Vec<usize> {
    let mut seen = HashMap::new();
    values
        .map(|v| {
            let next = seen.len();
            *seen.entry(v).or_insert(next)
        })
        .collect()
}

/// Outcome of V-guided navigation.
pub struct Guided {
    pub spl: f64,
    pub success: f64,
    pub far: f64,
}

/// V-guided navigation with the macro-action controllers from seeded random starts.
pub fn guided(
    env: &Nav,
    q: &QNetwork,
    renderer: &Renderer,
    cfg: &NavStudyConfig,
    device: &Device,
) -> Result<Guided> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x6e61_7673);
    let (mut success, mut shortest, mut taken) = (vec![], vec![], vec![]);
    let mut far = 0usize;
    for _ in 0..cfg.spl_episodes {
        let start = env.random_start(&mut rng);
        let (outcome, length) = navigate(env, q, renderer, start, cfg.max_decisions, device)?;
        success.push(outcome == Some(Goal::Near));
        far += (outcome == Some(Goal::Far)) as usize;
        shortest.push(
            env.geodesic_to_near(start)
                .context("a start pose cannot reach G_near")?,
        );
        taken.push(length);
    }
    let n = cfg.spl_episodes.max(1) as f64;
    Ok(Guided {
        spl: if success.is_empty() {
            0.0
        } else {
            nav::spl(&success, &shortest, &taken)?
        },
        success: success.iter().filter(|&&s| s).count() as f64 / n,
        far: far as f64 / n,
    })
}

/// Follows the macro-action whose end view V rates highest until a goal, a dead end or
/// `max_decisions`; returns the goal reached and the metres moved.
pub fn navigate(
    env: &Nav,
    q: &QNetwork,
    renderer: &Renderer,
    start: Pose,
    max_decisions: usize,
    device: &Device,
) -> Result<(Option<Goal>, f64)> {
    let mut p = start;
    let mut length = 0.0;
    for _ in 0..max_decisions {
        let options = env.controllers(p, renderer);
        if options.is_empty() {
            break;
        }
        let views: Vec<f32> = options
            .iter()
            .flat_map(|m| m.view.iter().map(|&x| x as f32))
            .collect();
        let v = q.values(&views, device)?;
        let best = (0..options.len())
            .max_by(|&a, &b| v[a].total_cmp(&v[b]).then(b.cmp(&a)))
            .unwrap_or(0);
        let m = &options[best];
        length += m.length;
        p = m.end;
        if m.goal.is_some() {
            return Ok((m.goal, length));
        }
    }
    Ok((None, length))
}

impl NavStudy {
    /// A table of the results beside the paper's.
    pub fn report(&self) -> String {
        let paper = |k: &str| -> (&str, &str, &str) {
            match k {
                "latent" => ("0.927", "0.928", "0.82"),
                "single" => ("0.641", "-", "0.53"),
                "cluster" => ("0.722", "-", "0.57"),
                "cluster_diff" => ("0.827", "-", "-"),
                "gt" => ("0.991", "-", "-"),
                _ => ("-", "-", "-"),
            }
        };
        let q = match self.config.train.q {
            QKind::Bcq => "BCQ",
            QKind::Cql => "CQL",
            _ => "DQN",
        };
        let mut s = format!(
            "navigation study: {} transitions of {:?} ({} episodes, {} distinct poses), \
             {q}, seed {}\n\n",
            self.transitions, self.obs_shape, self.config.episodes, self.poses, self.config.seed
        );
        s += "source     spearman (paper) | purity (paper) cell   | SPL (paper) success far | seconds\n";
        for (k, r) in &self.methods {
            let (ps, pp, pl) = paper(k);
            s += &format!(
                "{k:<10} {:>8.3} {ps:>7} | {:>6.3} {pp:>7} {:>5.3} | {:>4.3} {pl:>6} {:>6.2} {:>4.2} | {:>6.0}\n",
                r.spearman, r.purity, r.purity_cell, r.spl, r.success, r.far, r.seconds
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny study runs end to end and its result has the documented shape.
    #[test]
    fn tiny_study_runs() {
        let mut cfg = NavStudyConfig {
            episodes: 6,
            size: 16,
            sources: vec![LabelSource::Latent, LabelSource::Gt],
            spl_episodes: 3,
            max_decisions: 5,
            spearman_states: 100,
            ..Default::default()
        };
        cfg.train.mining.steps = 20;
        cfg.train.mining.conv.channels = vec![8, 8];
        cfg.train.dqn.conv.channels = vec![8, 8];
        cfg.train.dqn.steps = 20;
        let r = run(&cfg, &Device::Cpu).unwrap();
        let v = serde_json::to_value(&r).unwrap();
        for k in ["latent", "gt"] {
            for m in ["spearman", "purity", "spl"] {
                let x = v["methods"][k][m].as_f64().unwrap();
                assert!(x.is_finite(), "{k} {m} {x}");
            }
        }
        assert_eq!(r.methods["gt"].purity, 1.0);
        assert!(r.report().contains("latent"));
    }
}
