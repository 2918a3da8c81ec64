//! The first-person navigation study (the paper's 3D navigation experiment, section 5.2,
//! on the branching maze of [`crate::envs::nav`]): for each label source, LAQ's pipeline on
//! rendered frames (convolutional forward model and Q-network), then
//!
//! - **purity**: the paper's state-conditioned purity of the labels against the recorded
//!   actions, with the agent's pose (lattice point and heading) as the state;
//! - **spearman**: rank correlation of V with the value learned from the ground-truth
//!   actions (the `gt` source, same networks and settings), as in the paper and the other
//!   studies; the `gt` model is trained as the reference even when it is not compared;
//! - **spearman_optimal**: rank correlation of V with the exact optimal value V* of the
//!   pose behind each dataset state (and, once per study, **ways_vs_optimal**: that of
//!   the value of the data's own fewest steps to a goal, about the best a V that follows
//!   the data can reach);
//! - **spl**: success weighted by path length of V-guided navigation: from random starts in
//!   the start room, at every junction the sequences of `lookahead` macro-actions (each a
//!   move along a corridor to the next junction) are scored by V of the frame they end at,
//!   discounted by their steps ([`Planner`]), and the first macro of the best is executed;
//!   **spl_greedy** plans one macro ahead, as the paper. Success is reaching G_near, the
//!   optimal goal (ending at G_far is a failure, as in the paper's optimal-goal SPL); the
//!   reference length is the geodesic distance to G_near. Once per study,
//!   **spl_optimal** and **spl_greedy_optimal** are those of V* itself on the same
//!   starts ([`Planner::by_pose`]): what any V can give with these macro-actions.
//!
//! The data's behaviour mostly goes to the far goal or reaches the near one by a long
//! detour, so a value that merely evaluates the behaviour (one action label) prefers the
//! wrong goal.

use crate::data::Dataset;
use crate::envs::nav::{self, GenConfig, Goal, Macro, Nav, Pose, Renderer};
use crate::eval::purity;
use crate::run::config::TrainConfig;
use crate::run::plot::Heatmap;
use crate::run::train::{self, Trained};
use crate::run::trust::Verdict;
use crate::stages::labels::LabelSource;
use crate::stages::qlearn::{QKind, QNetwork};
use crate::util::stats;
use anyhow::{bail, Context, Result};
use candle_core::Device;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

/// Settings of the study.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NavStudyConfig {
    /// Episodes of data (the paper: 1000).
    pub episodes: usize,
    /// Frame width and height in pixels.
    pub size: usize,
    /// Seeds the data and the evaluation starts (`train.seed` seeds the training;
    /// `laq reproduce nav --seed` sets both).
    pub seed: u64,
    pub sources: Vec<LabelSource>,
    /// Mining and Q-learning settings (labels and Q-learning kind are set per source).
    pub train: TrainConfig,
    /// Evaluation episodes of V-guided navigation.
    pub spl_episodes: usize,
    /// Macro-actions an evaluation episode may take before it counts as a failure.
    pub max_decisions: usize,
    /// Macro-actions planned ahead by V-guided navigation (1: the paper's greedy choice;
    /// at most [`laq_runtime::MAX_LOOKAHEAD`]); the greedy SPL is reported beside it.
    #[serde(default = "greedy")]
    pub lookahead: usize,
    /// Dataset states (evenly spaced) over which Spearman is computed; 0: all.
    pub spearman_states: usize,
}

impl Default for NavStudyConfig {
    /// A size that runs in about 20 minutes on one core: 150 episodes of 32x32 frames
    /// (about 13k transitions), the image training settings with 1000 mining steps and
    /// 20000 Q-learning steps per label source (value has to travel 100+ steps back from
    /// the goals, one target-network period at a time), 100 evaluation episodes.
    fn default() -> Self {
        let mut train = TrainConfig::images(&[3, 32, 32]);
        train.q = QKind::Dqn;
        train.mining.steps = 1000;
        train.dqn.steps = 20_000;
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
            spl_episodes: 100,
            max_decisions: 30,
            lookahead: LOOKAHEAD,
            spearman_states: 5000,
        }
    }
}

/// Macro-actions planned ahead by default: as many as the Maze2D guidance plans
/// primitives (`laq_maze::Settings::DEFAULT.lookahead`).
pub const LOOKAHEAD: usize = 3;

/// A study written before the lookahead chose greedily.
fn greedy() -> usize {
    1
}

/// One label source's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MethodResult {
    /// Against V from ground-truth actions.
    pub spearman: f64,
    /// Against the exact optimal value V*.
    pub spearman_optimal: f64,
    pub purity: f64,
    /// SPL of guidance planning `lookahead` macro-actions ahead.
    pub spl: f64,
    /// Share of evaluation episodes that reached G_near, and G_far.
    pub success: f64,
    pub far: f64,
    /// SPL and success of greedy guidance (one macro-action ahead, the paper's protocol).
    #[serde(default)]
    pub spl_greedy: f64,
    #[serde(default)]
    pub success_greedy: f64,
    /// Purity with the pose's cell and heading as the state (coarser than the pose).
    pub purity_cell: f64,
    pub num_actions: usize,
    pub seconds: f64,
    /// The source's run's own verdict on its V, as `laq train` gives it (no ground truth
    /// involved), and the checks that failed.
    #[serde(default)]
    pub verdict: Option<Verdict>,
    #[serde(default)]
    pub failed_checks: Vec<String>,
}

/// The Spearman against V* at and above which a verdict of `trusted` is right (the
/// line that docs/trust.md judges every verdict by).
pub const TRUSTED_AT: f64 = 0.8;

/// The study's results: `{"methods": {"<source>": {...}}, ...}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NavStudy {
    pub methods: BTreeMap<String, MethodResult>,
    /// Spearman of the ground-truth-action V (the reference) against V*.
    pub reference_vs_optimal: f64,
    /// Spearman against V* of the value of the fewest steps to a reward through the
    /// data's own transitions (`gamma^steps`, the ways the trust checks use): about what
    /// a V that follows the data can reach, since V* also counts ways the data never
    /// shows. `None` where the data has no ways (or in a study written before this).
    #[serde(default)]
    pub ways_vs_optimal: Option<f64>,
    /// SPL of guidance by V* itself (the map's exact values, the same starts), planning
    /// `lookahead` macro-actions ahead: the most any V can give with these macro-actions,
    /// whose corridors are longer than the geodesic. `None` in a study written before it.
    #[serde(default)]
    pub spl_optimal: Option<f64>,
    /// The same, greedily (one macro-action ahead).
    #[serde(default)]
    pub spl_greedy_optimal: Option<f64>,
    pub transitions: usize,
    /// Distinct poses among the dataset states (purity's state count).
    pub poses: usize,
    pub obs_shape: Vec<usize>,
    /// Seconds to generate the data.
    pub data_seconds: f64,
    pub config: NavStudyConfig,
}

/// A finished study with what its figures and models are made of.
pub struct NavRun {
    pub study: NavStudy,
    /// The dataset the models were trained on.
    pub data: Dataset,
    /// Per label source, in the order asked for.
    pub sources: Vec<SourceRun>,
}

/// One label source's run: what it trained (its settings among it) and its value map.
pub struct SourceRun {
    pub source: LabelSource,
    pub trained: Trained,
    /// V over the maze with the guided paths.
    pub map: Heatmap,
}

/// Spearman of `gamma^steps`, the fewest steps from rows `idx` to a reward through the
/// data as `train` measures them ([`TrainConfig::ways`]), against `v_star` of those rows;
/// `None` where the data has no ways.
fn ways_against(train: &TrainConfig, data: &Dataset, idx: &[usize], v_star: &[f64]) -> Option<f64> {
    let ways = train.ways(data)?;
    let gamma = train.dqn.gamma;
    let v: Vec<f64> = idx.iter().map(|&i| gamma.powf(ways.state[i])).collect();
    Some(stats::spearman(&v, v_star))
}

/// Runs the study.
pub fn run(cfg: &NavStudyConfig, device: &Device) -> Result<NavRun> {
    if cfg.sources.is_empty() {
        bail!("the navigation study needs at least one label source");
    }
    if !(1..=laq_runtime::MAX_LOOKAHEAD).contains(&cfg.lookahead) {
        bail!(
            "the navigation study's lookahead must be 1 to {} macro-actions, not {}",
            laq_runtime::MAX_LOOKAHEAD,
            cfg.lookahead
        );
    }
    if !matches!(
        cfg.train.q,
        QKind::Dqn | QKind::Bcq | QKind::Cql | QKind::Iql
    ) {
        bail!(
            "the navigation study's Q-learning must be dqn, bcq, cql or iql: the states are images"
        );
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
    let ways_vs_optimal = ways_against(&cfg.train, &data, &idx, &v_star);
    let renderer = Renderer::new(cfg.size, cfg.size)?;
    let (spl_optimal, spl_greedy_optimal) = {
        let value = |p: Pose| env.optimal_value(p) as f32;
        let mut planner = Planner::by_pose(&env, value, &renderer, env.gamma);
        let ahead = guided(&mut planner, cfg, cfg.lookahead)?.spl;
        let greedy = guided(&mut planner, cfg, 1)?.spl;
        log::info!(
            "V*'s own guidance: SPL {ahead:.3} ({} ahead; greedy {greedy:.3})",
            cfg.lookahead
        );
        (ahead, greedy)
    };
    let mut methods = BTreeMap::new();
    let mut sources = vec![];
    // The ground-truth-action V is the reference of every source's Spearman: train it
    // first, and only as a reference when it is not among the sources.
    let mut order: Vec<(LabelSource, bool)> =
        vec![(LabelSource::Gt, cfg.sources.contains(&LabelSource::Gt))];
    order.extend(
        cfg.sources
            .iter()
            .filter(|&&s| s != LabelSource::Gt)
            .map(|&s| (s, true)),
    );
    let mut reference: Vec<f64> = vec![];
    let mut reference_vs_optimal = f64::NAN;
    // The sources train side by side (as many as the cores allow); what follows needs
    // the reference first, so it goes in order.
    let train_source = |&(source, _): &(LabelSource, bool)| -> Result<(Trained, f64)> {
        let t = Instant::now();
        let mut tc = cfg.train.clone();
        tc.labels = source;
        let trained = crate::util::progress::labelled(source.key(), || {
            train::train(&data, &tc, device, None)
        })
        .with_context(|| format!("label source `{}`", source.key()))?;
        Ok((trained, t.elapsed().as_secs_f64()))
    };
    let all =
        crate::util::parallel::map(&order, crate::util::parallel::jobs(device), train_source)?;
    for ((source, compared), (trained, train_seconds)) in order.into_iter().zip(all) {
        let t = Instant::now();
        let q = trained
            .qnet
            .as_ref()
            .context("the study needs a deep Q-network")?;
        let labels = &trained.labelled.labels;
        let purity = purity::state_purity(&pose_ids, labels, &actions);
        let purity_cell = purity::state_purity(&cell_ids, labels, &actions);
        let v: Vec<f64> = q
            .values_of(&data, &idx, device)?
            .into_iter()
            .map(f64::from)
            .collect();
        if source == LabelSource::Gt {
            reference_vs_optimal = stats::spearman(&v, &v_star);
            reference = v.clone();
            log::info!("reference (gt) V against V*: spearman {reference_vs_optimal:.3}");
            if !compared {
                continue;
            }
        }
        let spearman = stats::spearman(&v, &reference);
        let spearman_optimal = stats::spearman(&v, &v_star);
        let (g, greedy) = {
            let value = |frames: &[f32]| q.values(frames, device);
            let mut planner = Planner::new(&env, value, &renderer, cfg.train.dqn.gamma);
            (
                guided(&mut planner, cfg, cfg.lookahead)?,
                guided(&mut planner, cfg, 1)?,
            )
        };
        let map = value_map(
            &env,
            q,
            &renderer,
            &g.paths,
            &format!("V with `{}` labels, and guided paths", source.key()),
            device,
        )?;
        let r = MethodResult {
            spearman,
            spearman_optimal,
            purity,
            spl: g.spl,
            success: g.success,
            far: g.far,
            spl_greedy: greedy.spl,
            success_greedy: greedy.success,
            purity_cell,
            num_actions: trained.labelled.num_actions,
            seconds: train_seconds + t.elapsed().as_secs_f64(),
            verdict: Some(trained.trust.verdict),
            failed_checks: trained.trust.failed_names(),
        };
        log::info!(
            "{}: spearman {:.3} (against V* {:.3}), purity {:.3}, SPL {:.3} ({} ahead; \
             greedy {:.3}) ({:.0} s)",
            source.key(),
            r.spearman,
            r.spearman_optimal,
            r.purity,
            r.spl,
            cfg.lookahead,
            r.spl_greedy,
            r.seconds
        );
        methods.insert(source.key().to_string(), r);
        sources.push(SourceRun {
            source,
            trained,
            map,
        });
    }
    // Sources in the order asked for.
    sources.sort_by_key(|r| cfg.sources.iter().position(|&s| s == r.source));
    let study = NavStudy {
        methods,
        reference_vs_optimal,
        ways_vs_optimal,
        spl_optimal: Some(spl_optimal),
        spl_greedy_optimal: Some(spl_greedy_optimal),
        transitions: n,
        poses,
        obs_shape: data.obs_shape.clone(),
        data_seconds,
        config: cfg.clone(),
    };
    Ok(NavRun {
        study,
        data,
        sources,
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
    /// The first episodes' paths (see [`TRIPS_SHOWN`]).
    pub paths: Vec<Vec<Pose>>,
}

/// Evaluation episodes whose paths the value maps show.
pub const TRIPS_SHOWN: usize = 8;

/// V-guided navigation with the macro-action controllers from seeded random starts
/// (the same starts at every `lookahead`), planning `lookahead` macros ahead.
pub fn guided(planner: &mut Planner, cfg: &NavStudyConfig, lookahead: usize) -> Result<Guided> {
    let env = planner.env;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x6e61_7673);
    let (mut success, mut shortest, mut taken) = (vec![], vec![], vec![]);
    let mut far = 0usize;
    let mut paths = vec![];
    for _ in 0..cfg.spl_episodes {
        let start = env.random_start(&mut rng);
        let trip = planner.navigate(start, cfg.max_decisions, lookahead)?;
        let (outcome, length) = (trip.goal, trip.length);
        if paths.len() < TRIPS_SHOWN {
            paths.push(trip.path);
        }
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
        paths,
    })
}

/// Positions per metre of the value map.
const MAP_RESOLUTION: usize = 4;

/// V over the maze seen from above, like the paper's figure: at each free position (a
/// `1/MAP_RESOLUTION` m grid) the highest V over the 12 headings of the rendered view,
/// walls blank, with the guided paths and both goals drawn on top.
pub fn value_map(
    env: &Nav,
    q: &QNetwork,
    renderer: &Renderer,
    paths: &[Vec<Pose>],
    title: &str,
    device: &Device,
) -> Result<Heatmap> {
    let (rows, cols) = (env.map.rows * MAP_RESOLUTION, env.map.cols * MAP_RESOLUTION);
    let mut values = vec![None; rows * cols];
    let mut at = vec![];
    for r in 0..rows {
        for c in 0..cols {
            let (x, y) = (
                (c as f32 + 0.5) / MAP_RESOLUTION as f32,
                (r as f32 + 0.5) / MAP_RESOLUTION as f32,
            );
            if env.is_free(Pose::from_xy(x, y, 0)) {
                at.push((r * cols + c, x, y));
            }
        }
    }
    // A few hundred frames per call keeps memory small whatever the frame size.
    for chunk in at.chunks(64) {
        let mut frames = vec![];
        for &(_, x, y) in chunk {
            for h in 0..nav::HEADINGS {
                frames.extend(
                    renderer
                        .render(&env.map, Pose::from_xy(x, y, h))
                        .into_iter()
                        .map(f32::from),
                );
            }
        }
        let v = q.values(&frames, device)?;
        for (j, &(cell, _, _)) in chunk.iter().enumerate() {
            let best = v[j * nav::HEADINGS..(j + 1) * nav::HEADINGS]
                .iter()
                .copied()
                .fold(f32::NEG_INFINITY, f32::max);
            values[cell] = Some(best as f64);
        }
    }
    let mut map = Heatmap::new(rows, cols, values);
    map.x_range = (0.0, env.map.cols as f64);
    map.y_range = (0.0, env.map.rows as f64);
    map.y_down = true;
    map.title = title.to_string();
    map.x_label = "x (m)".into();
    map.y_label = "y (m)".into();
    map.colorbar_label = "max over headings of V(view)".into();
    map.size = (900, 560);
    map.paths = paths
        .iter()
        .map(|p| p.iter().map(|q| (q.x() as f64, q.y() as f64)).collect())
        .collect();
    for (g, name) in [(Goal::Near, "G_near"), (Goal::Far, "G_far")] {
        let (x, y) = env.map.goal_point(g);
        map.markers.push(((x as f64, y as f64), name.into()));
    }
    Ok(map)
}

/// One V-guided navigation episode.
pub struct Trip {
    /// The goal reached, if any.
    pub goal: Option<Goal>,
    /// Metres moved.
    pub length: f64,
    /// Every pose on the way, the start first.
    pub path: Vec<Pose>,
}

/// Chooses macro-actions by V: each macro's controllers and the V of the view at its
/// end are computed once per pose and kept, so planning ahead over the same junctions
/// again, or navigating again at another lookahead, costs nothing.
pub struct Planner<'a> {
    env: &'a Nav,
    /// V of views: their poses, and their frames row-major ([`QNetwork::values`]).
    value: Box<dyn Fn(&[Pose], &[f32]) -> Result<Vec<f32>> + 'a>,
    renderer: &'a Renderer,
    gamma: f64,
    options: HashMap<Pose, Rc<[Macro]>>,
    values: HashMap<Pose, f32>,
}

impl<'a> Planner<'a> {
    /// Guidance by `value`, V of a batch of frames; `gamma` is the discount V was trained
    /// with.
    pub fn new(
        env: &'a Nav,
        value: impl Fn(&[f32]) -> Result<Vec<f32>> + 'a,
        renderer: &'a Renderer,
        gamma: f64,
    ) -> Self {
        let value = move |_: &[Pose], frames: &[f32]| value(frames);
        Planner::with(env, Box::new(value), renderer, gamma)
    }

    /// Guidance by `value`, V of a view's pose: what a value function that sees the map
    /// rather than the frames would do (V* itself, say).
    pub fn by_pose(
        env: &'a Nav,
        value: impl Fn(Pose) -> f32 + 'a,
        renderer: &'a Renderer,
        gamma: f64,
    ) -> Self {
        let value = move |poses: &[Pose], _: &[f32]| Ok(poses.iter().map(|&p| value(p)).collect());
        Planner::with(env, Box::new(value), renderer, gamma)
    }

    fn with(
        env: &'a Nav,
        value: Box<dyn Fn(&[Pose], &[f32]) -> Result<Vec<f32>> + 'a>,
        renderer: &'a Renderer,
        gamma: f64,
    ) -> Self {
        Planner {
            env,
            value,
            renderer,
            gamma,
            options: HashMap::new(),
            values: HashMap::new(),
        }
    }

    /// Follows the first macro of the best sequence of `lookahead` macros until a goal, a
    /// dead end or `max_decisions`. A sequence is worth what an agent following it
    /// collects, discounted by V's own `gamma` per primitive step: the reward of a macro
    /// that reaches a goal (the sequence ends there) or `gamma^k V(end view)` after its
    /// last macro of k steps in all, as the runtime's `Model::select_ahead` scores
    /// controllers (which it cannot do here: it discounts each controller by one
    /// `gamma`, while a macro takes k steps, and its controllers predict state vectors,
    /// not poses whose views the map renders). Scored by V(end view) alone, a long way round to a slightly higher
    /// view beats a short one; one macro ahead, V's error between neighbouring views
    /// (a few percent) outweighs the discount of one junction, and the agent circles
    /// in a room (README, "First-person navigation", has the figures). `lookahead` 1 is
    /// the paper's greedy choice.
    pub fn navigate(
        &mut self,
        start: Pose,
        max_decisions: usize,
        lookahead: usize,
    ) -> Result<Trip> {
        let mut p = start;
        let mut length = 0.0;
        let mut path = vec![start];
        for _ in 0..max_decisions {
            self.evaluate(p, lookahead)?;
            let options = self.options(p);
            if options.is_empty() {
                break;
            }
            let worth: Vec<f64> = options.iter().map(|m| self.worth(m, lookahead)).collect();
            // Ties go to the first.
            let best = (0..options.len())
                .max_by(|&a, &b| worth[a].total_cmp(&worth[b]).then(b.cmp(&a)))
                .unwrap_or(0);
            let m = &options[best];
            let mut at = p;
            for &a in &m.actions {
                if let Some(t) = self.env.step(at, a) {
                    at = t.pose;
                    path.push(at);
                }
            }
            length += m.length;
            p = m.end;
            if m.goal.is_some() {
                return Ok(Trip {
                    goal: m.goal,
                    length,
                    path,
                });
            }
        }
        Ok(Trip {
            goal: None,
            length,
            path,
        })
    }

    /// The macros from `p` (none at a goal), computed once; shared, as the planner
    /// walks on while it holds them.
    fn options(&mut self, p: Pose) -> Rc<[Macro]> {
        let (env, renderer) = (self.env, self.renderer);
        self.options
            .entry(p)
            .or_insert_with(|| env.controllers(p, renderer).into())
            .clone()
    }

    /// V of every view that sequences of `depth` macros from `p` end at and that is not
    /// known yet, as one batch.
    fn evaluate(&mut self, p: Pose, depth: usize) -> Result<()> {
        let mut ends = vec![];
        self.ends(p, depth, &mut ends);
        let mut views = vec![];
        let mut poses = vec![];
        for (options, i) in &ends {
            let m = &options[*i];
            if !self.values.contains_key(&m.end) && !poses.contains(&m.end) {
                poses.push(m.end);
                views.extend(m.view.iter().map(|&x| f32::from(x)));
            }
        }
        if !poses.is_empty() {
            let v = (self.value)(&poses, &views)?;
            self.values.extend(poses.into_iter().zip(v));
        }
        Ok(())
    }

    /// The last macros (a pose's macros and which of them) of the sequences of `depth`
    /// macros from `p` (shorter where a goal or a dead end ends them) whose end V scores.
    fn ends(&mut self, p: Pose, depth: usize, out: &mut Vec<(Rc<[Macro]>, usize)>) {
        let options = self.options(p);
        for (i, m) in options.iter().enumerate() {
            if m.goal.is_some() {
                continue;
            }
            if depth > 1 && !self.options(m.end).is_empty() {
                self.ends(m.end, depth - 1, out);
            } else {
                out.push((options.clone(), i));
            }
        }
    }

    /// The best worth of the sequences of `depth` macros that start with `m`, discounted
    /// to `m`'s start ([`Planner::evaluate`] first).
    fn worth(&mut self, m: &Macro, depth: usize) -> f64 {
        let k = m.actions.len() as i32;
        if let Some(g) = m.goal {
            // The reward comes with the last primitive step.
            return self.gamma.powi(k - 1) * f64::from(self.env.reward(g));
        }
        let next = if depth > 1 {
            Some(self.options(m.end)).filter(|next| !next.is_empty())
        } else {
            None
        };
        let ahead = match next {
            Some(next) => next
                .iter()
                .map(|n| self.worth(n, depth - 1))
                .fold(f64::NEG_INFINITY, f64::max),
            None => self.values.get(&m.end).map_or(f64::NAN, |&v| f64::from(v)),
        };
        self.gamma.powi(k) * ahead
    }
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
        let q = self.config.train.q.name().to_uppercase();
        let mut s = format!(
            "navigation study: {} transitions of {:?} ({} episodes, {} distinct poses), \
             {q}, seed {}\n\n",
            self.transitions, self.obs_shape, self.config.episodes, self.poses, self.config.seed
        );
        s += "spearman: against V from ground-truth actions (paper's reference); V*: against the exact optimal value\n";
        s += &format!(
            "SPL: V-guided navigation planning {} macro-actions ahead; greedy: one ahead, the paper's protocol\n\n",
            self.config.lookahead
        );
        s += "source     spearman (paper)    V* | purity (paper) cell   | SPL success far | greedy (paper) success | seconds\n";
        for (k, r) in &self.methods {
            let (ps, pp, pl) = paper(k);
            s += &format!(
                "{k:<10} {:>8.3} {ps:>7} {:>5.3} | {:>6.3} {pp:>7} {:>5.3} | {:>3.3} {:>7.2} {:>4.2} | {:>6.3} {pl:>7} {:>7.2} | {:>6.0}\n",
                r.spearman,
                r.spearman_optimal,
                r.purity,
                r.purity_cell,
                r.spl,
                r.success,
                r.far,
                r.spl_greedy,
                r.success_greedy,
                r.seconds
            );
        }
        s += &format!(
            "\nreference (ground-truth-action V) against V*: spearman {:.3}\n",
            self.reference_vs_optimal
        );
        if let Some(w) = self.ways_vs_optimal {
            s += &format!(
                "the data's own fewest steps to a reward against V*: spearman {w:.3} (about \
                 the best a V that follows the data can do: V* also counts ways the data \
                 never shows)\n"
            );
        }
        if let (Some(ahead), Some(greedy)) = (self.spl_optimal, self.spl_greedy_optimal) {
            s += &format!(
                "V*'s own guidance (the map's exact values, the same starts): SPL {ahead:.3} \
                 ({} ahead; greedy {greedy:.3}), the most any V can give with these \
                 macro-actions\n",
                self.config.lookahead
            );
        }
        s += &format!(
            "\nverdicts (each source's run's own, no ground truth; right when trusted iff V* >= {TRUSTED_AT}):\n"
        );
        for (k, r) in &self.methods {
            let Some(v) = r.verdict else { continue };
            let why = if r.failed_checks.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.failed_checks.join(", "))
            };
            let right = (v == Verdict::Trusted) == (r.spearman_optimal >= TRUSTED_AT);
            // What V is for: how it guides beside V* itself.
            let use_ = self.spl_optimal.map_or(String::new(), |o| {
                format!(
                    "; guides {} ahead at SPL {:.3}, V*'s own {o:.3}",
                    self.config.lookahead, r.spl
                )
            });
            s += &format!(
                "{k:<10} {}{why}: {} (V* {:.3}){use_}\n",
                v.name(),
                if right { "right" } else { "wrong" },
                r.spearman_optimal
            );
        }
        s
    }
}

/// `laq reproduce nav`: the first-person navigation study ([`crate::studies::nav`]). Writes
/// `metrics.json` (`{"methods": {"<source>": {"spearman", "purity", "spl", ...}}, ...}`),
/// `report.txt`, `value_map_<source>.png` (V over the maze with guided paths) and, for
/// the `latent` source, the run directory `model_latent/` as `laq train` writes it.
pub fn nav(
    out: &Path,
    cfg: &crate::studies::nav::NavStudyConfig,
    device: &Device,
) -> Result<(Value, String)> {
    let total = Instant::now();
    let run = crate::studies::nav::run(cfg, device)?;
    let mut figures = vec![];
    for r in &run.sources {
        let file = format!("value_map_{}.png", r.source.key());
        // A figure that cannot be drawn must not cost the study's numbers.
        match r.map.save(&out.join(&file)) {
            Ok(()) => figures.push(file),
            Err(e) => log::warn!("{file} left out: {e:#}"),
        }
        if r.source == LabelSource::Latent {
            crate::run::dir::write_run(
                &out.join("model_latent"),
                &run.data,
                &r.trained,
                "laq gen nav-branching (regenerated by laq reproduce nav)",
                &run.data.fingerprint(),
                &[],
            )?;
        }
    }
    let mut metrics = serde_json::to_value(&run.study)?;
    metrics["figures"] = json!(figures);
    metrics["seconds"] = json!(total.elapsed().as_secs_f64());
    metrics["device"] = json!(crate::device_name(device));
    let mut report = run.study.report();
    report += &format!(
        "\nfigures: {}\ntotal {:.0} s on {}\n",
        figures.join(", "),
        total.elapsed().as_secs_f64(),
        crate::device_name(device)
    );
    super::write_study(out, metrics, report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With V zero everywhere only the goals' rewards count: planning four macro-actions
    /// ahead reaches G_near from every start by a short way (no detour round the ring),
    /// one ahead sees no goal from the start room.
    #[test]
    fn planning_ahead_sees_rewards_that_one_step_does_not() {
        let env = Nav::branching().unwrap();
        let renderer = Renderer::new(8, 8).unwrap();
        let zero = |frames: &[f32]| Ok(vec![0.0; frames.len() / (3 * 8 * 8)]);
        let mut planner = Planner::new(&env, zero, &renderer, 0.99);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut greedy_near = 0;
        for _ in 0..20 {
            let start = env.random_start(&mut rng);
            let ahead = planner.navigate(start, 30, 4).unwrap();
            assert_eq!(ahead.goal, Some(Goal::Near), "{start:?}");
            let shortest = env.geodesic_to_near(start).unwrap();
            assert!(
                ahead.length < 1.5 * shortest,
                "{} vs {shortest}",
                ahead.length
            );
            let greedy = planner.navigate(start, 30, 1).unwrap();
            greedy_near += usize::from(greedy.goal == Some(Goal::Near));
        }
        // Blind beyond one macro, greedy guidance takes the first option wherever no goal
        // is one macro away: half the starts lead it to G_near.
        assert!(greedy_near < 20, "{greedy_near} of 20");
    }

    /// V* itself guides to G_near from every start, greedily and three ahead, at an SPL
    /// short of 1 by the macro-actions' corridors alone: the ceiling the study reports.
    #[test]
    fn v_star_guides_from_every_start_short_of_spl_one() {
        let env = Nav::branching().unwrap();
        let renderer = Renderer::new(8, 8).unwrap();
        let cfg = NavStudyConfig {
            spl_episodes: 30,
            ..Default::default()
        };
        let value = |p: Pose| env.optimal_value(p) as f32;
        let mut planner = Planner::by_pose(&env, value, &renderer, env.gamma);
        for lookahead in [1, LOOKAHEAD] {
            let g = guided(&mut planner, &cfg, lookahead).unwrap();
            assert_eq!(g.success, 1.0, "{lookahead} ahead");
            assert!(g.spl > 0.8 && g.spl < 0.97, "{lookahead} ahead: {}", g.spl);
        }
    }

    /// The poses lie on a lattice, so with enough episodes the frames recur and the data
    /// has ways to the goals, whose value ranks the states like V* without reaching it:
    /// the data rarely shows the shortcut to the near goal.
    #[test]
    fn the_data_ways_rank_like_v_star_short_of_it() {
        let env = Nav::branching().unwrap();
        let gen = GenConfig {
            episodes: 150,
            size: 8,
            frames: 1,
            ..GenConfig::default()
        };
        let nav_data = env.generate(&gen, 0).unwrap();
        let data = nav_data.to_dataset();
        let idx: Vec<usize> = (0..data.len()).collect();
        let v_star: Vec<f64> = nav_data
            .poses
            .iter()
            .map(|&p| env.optimal_value(p))
            .collect();
        let w = ways_against(&NavStudyConfig::default().train, &data, &idx, &v_star).unwrap();
        assert!(w > 0.5 && w < 0.95, "{w}");
    }

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
        let run = run(&cfg, &Device::Cpu).unwrap();
        let r = run.study;
        let v = serde_json::to_value(&r).unwrap();
        for k in ["latent", "gt"] {
            for m in ["spearman", "purity", "spl"] {
                let x = v["methods"][k][m].as_f64().unwrap();
                assert!(x.is_finite(), "{k} {m} {x}");
            }
        }
        assert_eq!(r.methods["gt"].purity, 1.0);
        // Six episodes' frames recur too rarely for ways through them.
        assert_eq!(r.ways_vs_optimal, None);
        assert!(!r.report().contains("fewest steps to a reward against V*"));
        // V*'s own guidance is measured whatever the data.
        let optimal = r.spl_optimal.zip(r.spl_greedy_optimal).unwrap();
        assert!((0.0..=1.0).contains(&optimal.0) && (0.0..=1.0).contains(&optimal.1));
        assert!(r.report().contains("V*'s own guidance"));
        // Twenty steps of Q-learning are not a V to trust, and the run says which checks
        // tell.
        assert_eq!(v["methods"]["latent"]["verdict"], "doubtful");
        let failed = &r.methods["latent"].failed_checks;
        assert!(!failed.is_empty());
        let report = r.report();
        let line = format!("latent     doubtful ({})", failed.join(", "));
        assert!(report.contains(&line), "{report}");
        // Each verdict stands beside how its V guides, and how V* itself does.
        let verdict = report.lines().find(|l| l.starts_with(&line)).unwrap();
        let own = format!("V*'s own {:.3}", optimal.0);
        assert!(
            verdict.contains("guides 3 ahead at SPL") && verdict.ends_with(&own),
            "{verdict}"
        );
        assert_eq!(run.sources.len(), 2);
        let map = &run.sources[0].map;
        assert!(map.values.iter().any(|v| v.is_some()) && map.values.iter().any(|v| v.is_none()));
        assert!(map.paths.iter().all(|p| !p.is_empty()));
        assert!(!map.to_png().unwrap().is_empty());
    }

    /// A study of the `gt` source alone on four episodes, with twenty Q-learning steps.
    fn tiny_gt_study() -> NavStudyConfig {
        let mut cfg = NavStudyConfig {
            episodes: 4,
            size: 16,
            sources: vec![LabelSource::Gt],
            spl_episodes: 2,
            max_decisions: 3,
            spearman_states: 50,
            ..Default::default()
        };
        cfg.train.dqn.conv.channels = vec![8, 8];
        cfg.train.dqn.steps = 20;
        cfg
    }

    /// IQL's V (its value network, which is what it exports) guides and is named in the
    /// report; tabular Q-learning cannot take frames.
    #[test]
    fn iql_runs_and_tabular_is_refused() {
        let mut cfg = tiny_gt_study();
        cfg.train.q = QKind::Iql;
        let done = run(&cfg, &Device::Cpu).unwrap();
        assert!(done.sources[0]
            .trained
            .qnet
            .as_ref()
            .unwrap()
            .value
            .is_some());
        assert!(done.study.methods["gt"].spl.is_finite());
        let report = done.study.report();
        assert!(report.contains(", IQL, seed 0"), "{report}");
        cfg.train.q = QKind::Tabular;
        let err = run(&cfg, &Device::Cpu).err().unwrap().to_string();
        assert!(err.contains("must be dqn, bcq, cql or iql"), "{err}");
    }

    /// With an ensemble, the study measures the V that is exported (the fitted mean of
    /// the members), not its first member's.
    #[test]
    fn an_ensemble_is_measured_by_its_exported_v() {
        let mut cfg = tiny_gt_study();
        cfg.train.ensemble = 2;
        let run = run(&cfg, &Device::Cpu).unwrap();
        let source = &run.sources[0];
        let map = &source.map;
        let cell = map.values.iter().position(|v| v.is_some()).unwrap();
        let env = Nav::branching().unwrap();
        let cols = env.map.cols * MAP_RESOLUTION;
        let (x, y) = (
            ((cell % cols) as f32 + 0.5) / MAP_RESOLUTION as f32,
            ((cell / cols) as f32 + 0.5) / MAP_RESOLUTION as f32,
        );
        let renderer = Renderer::new(cfg.size, cfg.size).unwrap();
        let frames: Vec<f32> = (0..nav::HEADINGS)
            .flat_map(|h| renderer.render(&env.map, Pose::from_xy(x, y, h)))
            .map(f32::from)
            .collect();
        let best = |v: Vec<f32>| v.into_iter().fold(f32::NEG_INFINITY, f32::max) as f64;
        let exported = best(
            source
                .trained
                .model
                .values_candle(&frames, &Device::Cpu)
                .unwrap(),
        );
        let shown = map.values[cell].unwrap();
        assert!(
            (shown - exported).abs() < 1e-5,
            "{shown} against {exported}"
        );
    }
}
