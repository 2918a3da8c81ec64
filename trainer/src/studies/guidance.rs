//! Zero-shot controller guidance: a value function learned from a point mass's
//! state-only logs steers hand-designed motion primitives of another body, the
//! differential-drive robot of [`crate::envs::unicycle`], with no training for that body.
//!
//! Each decision, the robot asks 8 primitives ("turn to heading k * 45 degrees, then drive
//! straight for [`GuideConfig::drive_length`]") where they would take it, and
//! [`laq_runtime::Model::select_ahead`] picks the first of the sequence of
//! [`GuideConfig::lookahead`] primitives whose predicted end point has the highest
//! V(x, y, 0, 0); a primitive that starts a sequence predicted to reach the target disc is
//! taken at once ([`GuideConfig::goal_check`]). The same call, on the same file, with the
//! same code (`laq-maze`), runs on a microcontroller
//! (`firmware-examples/src/bin/maze_guide.rs`). Baselines use the
//! same primitives and the same knowledge of the walls: the primitive that gets closest
//! to the target in a straight line, V of a model trained with a single action label,
//! and (as an upper reference) the primitive whose predicted point is geodesically
//! closest to the target.
//!
//! Success is reaching [`TARGET_RADIUS`](crate::envs::maze2d::TARGET_RADIUS) of the
//! target centre within the decision budget; SPL (success weighted by path length) is
//! `success * L / max(L_taken, L)` with `L` the geodesic shortest path of the body to
//! the target disc ([`Geodesic`]).
//!
//! The primitives, their execution, the episode loop, the geodesic and SPL are
//! `laq-maze`'s; this module adds the study: baselines, random starts, summaries.

use crate::envs::maze2d::Maze;
use crate::envs::unicycle::Pose;
use crate::run::config::TrainConfig;
use crate::run::train;
use crate::stages::labels::LabelSource;
use anyhow::{bail, Context, Result};
use candle_core::Device;
use laq_maze::{distance, Settings};
pub use laq_maze::{
    execute, spl, Executed, Primitive, DIRECTIONS, HEADINGS, MAX_TURN_ACTIONS, NUM_PRIMITIVES,
    STEP_LENGTH, TARGET_SAMPLES, TURN_PER_ACTION,
};
use laq_runtime::{Candidate, Model};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::f32::consts::PI;
use std::fmt::Write as _;

/// Room for the free corners of the grown walls in [`Geodesic`]: the U-maze has 24, the
/// medium maze 58.
pub const GEODESIC_NODES: usize = 256;

/// Geodesic distances to the target disc for the robot's body (`laq_maze::Geodesic`):
/// a visibility graph over the convex corners of the grown walls and points of the
/// target circle.
pub type Geodesic = laq_maze::Geodesic<'static, GEODESIC_NODES>;

/// Settings of the guidance study.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuideConfig {
    /// Length of each primitive's straight segment, in maze units (cells are 1 wide).
    ///
    /// 0.5 by default: the body's free corridor is `1 - 2 * RADIUS = 0.8` wide, so from the
    /// middle of a corridor a 0.5 segment fits along it and a diagonal one (0.35 per axis)
    /// across it. Shorter primitives need more decisions (each a `select` over 8
    /// candidates on the microcontroller); longer ones cannot always turn into the U's
    /// bend. `examples/guide.rs --sweep` measures 0.25 to 1.
    pub drive_length: f32,
    /// Primitives per episode before it counts as a failure.
    pub budget: usize,
    /// Random starts of the study.
    pub starts: usize,
    /// Heading error (radians) at which a primitive stops turning and starts driving.
    pub heading_tolerance: f32,
    /// Clearance a primitive's straight segment keeps from the walls (beyond the body's
    /// radius) to count as available, so that rounding in the executed path never grazes
    /// a wall the predictor missed.
    pub wall_margin: f32,
    /// Whether a primitive predicted to end in the target disc is taken without asking
    /// the policy (`laq_maze::Settings::goal_check`).
    #[serde(default = "goal_check_default")]
    pub goal_check: bool,
    /// Primitives planned ahead by the value policies (`laq_maze::Settings::lookahead`;
    /// 1: greedy).
    #[serde(default = "lookahead_default")]
    pub lookahead: usize,
}

fn goal_check_default() -> bool {
    Settings::DEFAULT.goal_check
}

fn lookahead_default() -> usize {
    Settings::DEFAULT.lookahead
}

impl Default for GuideConfig {
    /// `laq_maze::Settings::DEFAULT` (the firmware's) and 100 starts.
    fn default() -> Self {
        let s = Settings::DEFAULT;
        GuideConfig {
            drive_length: s.drive_length,
            budget: s.budget,
            starts: 100,
            heading_tolerance: s.heading_tolerance,
            wall_margin: s.wall_margin,
            goal_check: s.goal_check,
            lookahead: s.lookahead,
        }
    }
}

impl GuideConfig {
    fn check(&self) -> Result<()> {
        if !(self.drive_length.is_finite() && self.drive_length > 0.0) {
            bail!("drive_length must be positive, got {}", self.drive_length);
        }
        if self.budget == 0 {
            bail!("the decision budget must be at least 1");
        }
        if !(self.heading_tolerance.is_finite() && self.heading_tolerance > 0.0) {
            bail!("heading_tolerance must be positive");
        }
        if !(self.wall_margin.is_finite() && self.wall_margin >= 0.0) {
            bail!("wall_margin must be non-negative");
        }
        if !(1..=laq_runtime::MAX_LOOKAHEAD).contains(&self.lookahead) {
            bail!(
                "lookahead must be 1 to {} primitives, got {}",
                laq_runtime::MAX_LOOKAHEAD,
                self.lookahead
            );
        }
        Ok(())
    }

    /// The primitives' and the episode's settings.
    pub fn settings(&self) -> Settings {
        Settings {
            drive_length: self.drive_length,
            budget: self.budget,
            heading_tolerance: self.heading_tolerance,
            wall_margin: self.wall_margin,
            goal_check: self.goal_check,
            lookahead: self.lookahead,
        }
    }
}

/// The policies of the study.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// V of the LAQ model at the predicted points, through `Model::select_ahead`.
    LaqValue,
    /// The available primitive whose predicted point is closest to the target centre.
    StraightToGoal,
    /// V of a model trained with one action label (TD(0)), through `Model::select_ahead`.
    SingleValue,
    /// The available primitive whose predicted point has the shortest geodesic to the
    /// target: what the primitives can do with perfect knowledge of the task.
    Geodesic,
}

impl Policy {
    pub fn key(self) -> &'static str {
        match self {
            Policy::LaqValue => "laq_value",
            Policy::StraightToGoal => "straight_to_goal",
            Policy::SingleValue => "single_value",
            Policy::Geodesic => "geodesic",
        }
    }
}

/// How a policy picks among the primitives.
// A handful exist per study; boxing the `Model` would gain nothing.
#[allow(clippy::large_enum_variant)]
pub enum Selector<'a> {
    /// By `reward + gamma * V(next)` with `laq_runtime`, looking ahead (reward 0: by V).
    Value(Model<'a>),
    StraightToGoal,
    Geodesic(&'a Geodesic),
}

impl Selector<'_> {
    /// The chosen primitive, or `None` if none is available; a value policy plans
    /// `lookahead` primitives ahead.
    pub fn choose(
        &self,
        maze: &Maze,
        pose: Pose,
        prims: &[Primitive],
        lookahead: usize,
    ) -> Result<Option<usize>> {
        match self {
            Selector::Value(model) => {
                let mut scratch = vec![0.0; model.lookahead_scratch_len(lookahead)];
                let mut report = vec![Candidate::default(); prims.len()];
                laq_maze::choose_by_value(model, pose, prims, lookahead, &mut scratch, &mut report)
                    .context("selecting a primitive")
            }
            Selector::StraightToGoal => {
                let target = maze.layout().target_point();
                Ok(best_by(prims, pose, |q| Some(-distance(q, target))))
            }
            Selector::Geodesic(g) => Ok(best_by(prims, pose, |q| {
                g.to_target(q[0], q[1]).map(|d| -d)
            })),
        }
    }
}

/// The available primitive with the highest score (ties: lowest index), as `select`
/// ranks candidates.
fn best_by(
    prims: &[Primitive],
    pose: Pose,
    score: impl Fn([f32; 2]) -> Option<f32>,
) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (i, p) in prims.iter().enumerate() {
        let Some(s) = p.predicted(pose.x, pose.y).and_then(&score) else {
            continue;
        };
        if best.is_none_or(|(_, b)| s > b) {
            best = Some((i, s));
        }
    }
    best.map(|(i, _)| i)
}

/// One policy's episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub policy: Policy,
    pub success: bool,
    /// Primitives executed.
    pub decisions: usize,
    /// Distance travelled, L_taken.
    pub travelled: f32,
    /// `success * shortest / max(travelled, shortest)`.
    pub spl: f32,
    /// Whether the episode ended because no primitive was available.
    pub stuck: bool,
    /// (x, y) at the start and after each primitive (straight segments between them,
    /// except where the robot slid along a wall).
    pub path: Vec<[f32; 2]>,
    /// The primitive chosen at each decision.
    pub choices: Vec<u8>,
}

/// Runs one episode (`laq_maze::run_episode`): decide, execute, until the target is
/// reached, the budget is spent or no primitive is available. `shortest` is the
/// geodesic L of the start, for SPL.
pub fn run_episode(
    maze: &Maze,
    policy: Policy,
    selector: &Selector,
    start: Pose,
    shortest: f32,
    cfg: &GuideConfig,
) -> Result<Run> {
    cfg.check()?;
    let (mut path, mut choices) = (vec![[start.x, start.y]], vec![]);
    let ep = laq_maze::run_episode(
        maze.layout(),
        &cfg.settings(),
        start,
        |pose, prims| selector.choose(maze, pose, prims, cfg.lookahead),
        |k, e| {
            path.push([e.pose.x, e.pose.y]);
            choices.push(k as u8);
        },
    )?;
    Ok(Run {
        policy,
        success: ep.success,
        decisions: ep.decisions,
        travelled: ep.travelled,
        spl: spl(ep.success, shortest, ep.travelled),
        stuck: ep.stuck,
        path,
        choices,
    })
}

/// `n` random starts: a random point in a random open cell ([`Maze::random_point`]),
/// drawn again while it lies in the target disc (a start there has nothing to do), and
/// a uniform heading.
pub fn random_starts(maze: &Maze, n: usize, seed: u64) -> Vec<Pose> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let [x, y] = maze.random_point(&mut rng);
        let heading = rng.random_range(-PI..PI);
        if !maze.layout().in_target([x, y]) {
            out.push(Pose { x, y, heading });
        }
    }
    out
}

/// Summary of one policy over all starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicySummary {
    pub policy: Policy,
    /// Fraction of starts from which the target was reached.
    pub success: f64,
    /// Mean SPL.
    pub spl: f64,
    /// Mean primitives per episode (failures count the budget or until stuck).
    pub mean_decisions: f64,
    /// Mean primitives of the successful episodes (`None` without any).
    pub mean_decisions_success: Option<f64>,
    /// Episodes that ended with no available primitive.
    pub stuck: usize,
}

/// One start and every policy's run from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    /// (x, y, heading).
    pub start: [f32; 3],
    /// Geodesic shortest path length to the target disc.
    pub shortest: f32,
    pub runs: Vec<Run>,
}

/// The guidance study's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuidanceResult {
    pub config: GuideConfig,
    pub seed: u64,
    pub policies: Vec<PolicySummary>,
    pub episodes: Vec<Episode>,
}

impl GuidanceResult {
    pub fn summary(&self, policy: Policy) -> Option<&PolicySummary> {
        self.policies.iter().find(|s| s.policy == policy)
    }
}

fn load<'a>(bytes: &'a [u8], what: &str) -> Result<Model<'a>> {
    let model = Model::new_checked(bytes).with_context(|| format!("the {what} model"))?;
    if model.input_dim() != 4 {
        bail!(
            "the {what} model takes {} inputs; guidance queries V(x, y, vx, vy)",
            model.input_dim()
        );
    }
    Ok(model)
}

/// Runs the study: `cfg.starts` random starts (seeded), each policy from each start.
/// `value_model` is the LAQ model (laq-value bytes, input (x, y, vx, vy)); with
/// `single_model`, the single-action baseline runs too.
pub fn guidance_study(
    maze: &Maze,
    value_model: &[u8],
    single_model: Option<&[u8]>,
    cfg: &GuideConfig,
    seed: u64,
) -> Result<GuidanceResult> {
    cfg.check()?;
    let geodesic = Geodesic::new(maze.layout())?;
    let mut selectors = vec![
        (Policy::LaqValue, Selector::Value(load(value_model, "LAQ")?)),
        (Policy::StraightToGoal, Selector::StraightToGoal),
    ];
    if let Some(bytes) = single_model {
        selectors.push((
            Policy::SingleValue,
            Selector::Value(load(bytes, "single-action")?),
        ));
    }
    selectors.push((Policy::Geodesic, Selector::Geodesic(&geodesic)));
    let mut episodes = vec![];
    for start in random_starts(maze, cfg.starts, seed) {
        let shortest = geodesic
            .to_target(start.x, start.y)
            .with_context(|| format!("start {start:?} cannot reach the target"))?;
        let runs = selectors
            .iter()
            .map(|(p, s)| run_episode(maze, *p, s, start, shortest, cfg))
            .collect::<Result<Vec<_>>>()?;
        episodes.push(Episode {
            start: [start.x, start.y, start.heading],
            shortest,
            runs,
        });
    }
    let policies = selectors
        .iter()
        .enumerate()
        .map(|(i, (policy, _))| summarise(*policy, episodes.iter().map(|e| &e.runs[i])))
        .collect();
    Ok(GuidanceResult {
        config: cfg.clone(),
        seed,
        policies,
        episodes,
    })
}

fn summarise<'a>(policy: Policy, runs: impl Iterator<Item = &'a Run>) -> PolicySummary {
    let runs: Vec<&Run> = runs.collect();
    let n = runs.len().max(1) as f64;
    let wins: Vec<&&Run> = runs.iter().filter(|r| r.success).collect();
    PolicySummary {
        policy,
        success: wins.len() as f64 / n,
        spl: runs.iter().map(|r| r.spl as f64).sum::<f64>() / n,
        mean_decisions: runs.iter().map(|r| r.decisions as f64).sum::<f64>() / n,
        mean_decisions_success: (!wins.is_empty())
            .then(|| wins.iter().map(|r| r.decisions as f64).sum::<f64>() / wins.len() as f64),
        stuck: runs.iter().filter(|r| r.stuck).count(),
    }
}

/// A plain-text table of the study.
pub fn report(result: &GuidanceResult) -> String {
    let mut s = String::new();
    let n = result.episodes.len();
    let _ = writeln!(
        s,
        "controller guidance: {n} starts (seed {}), primitives of {} units, budget {}",
        result.seed, result.config.drive_length, result.config.budget
    );
    let _ = writeln!(
        s,
        "{:<18} {:>8} {:>6} {:>10} {:>14} {:>6}",
        "policy", "success", "SPL", "decisions", "dec. (success)", "stuck"
    );
    for p in &result.policies {
        let _ = writeln!(
            s,
            "{:<18} {:>8.2} {:>6.3} {:>10.1} {:>14.1} {:>6}",
            p.policy.key(),
            p.success,
            p.spl,
            p.mean_decisions,
            p.mean_decisions_success.unwrap_or(f64::NAN),
            p.stuck
        );
    }
    // Successes by start cell: where each policy works.
    let mut cells: Vec<(usize, usize)> = result
        .episodes
        .iter()
        .map(|e| (e.start[0] as usize, e.start[1] as usize))
        .collect();
    cells.sort_unstable();
    cells.dedup();
    let _ = write!(s, "successes by start cell:\n{:<18}", "");
    for (r, c) in &cells {
        let _ = write!(s, " {:>7}", format!("({r},{c})"));
    }
    for (i, p) in result.policies.iter().enumerate() {
        let _ = write!(s, "\n{:<18}", p.policy.key());
        for &cell in &cells {
            let (mut won, mut all) = (0, 0);
            for e in &result.episodes {
                if (e.start[0] as usize, e.start[1] as usize) == cell {
                    all += 1;
                    won += usize::from(e.runs.get(i).is_some_and(|r| r.success));
                }
            }
            let _ = write!(s, " {:>7}", format!("{won}/{all}"));
        }
    }
    s.push('\n');
    s
}

/// A point of [`corridor_profile`]: where, its geodesic distance to the target, and V of
/// each model there (at rest).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfilePoint {
    pub x: f32,
    pub y: f32,
    pub shortest: f32,
    pub values: Vec<f32>,
}

/// V of each model along the corridor's centre line, from the open cell farthest from
/// the target (fewest-cell path, cell centres joined by straight lines) to the target
/// centre, every `spacing` units. A value function that guides greedily decreases
/// monotonically along it; a local maximum on the way traps a greedy policy.
pub fn corridor_profile(maze: &Maze, models: &[&[u8]], spacing: f32) -> Result<Vec<ProfilePoint>> {
    if !(spacing.is_finite() && spacing > 0.0) {
        bail!("spacing must be positive");
    }
    let models = models
        .iter()
        .map(|b| load(b, "profiled"))
        .collect::<Result<Vec<_>>>()?;
    let d = maze.cell_distances(maze.target);
    let at = |(r, c): (usize, usize)| d[r * maze.cols + c];
    let Some(mut cell) = maze.open_cells().into_iter().max_by_key(|&c| at(c)) else {
        bail!("the maze has no open cell");
    };
    let mut corners = vec![cell];
    while let Some(k) = at(cell).filter(|&k| k > 0) {
        let next = [(-1i64, 0i64), (1, 0), (0, -1), (0, 1)]
            .iter()
            .map(|(dr, dc)| ((cell.0 as i64 + dr) as usize, (cell.1 as i64 + dc) as usize))
            .find(|&n| maze.is_open(n) && at(n) == Some(k - 1));
        let Some(next) = next else {
            bail!("cell {cell:?} has no neighbour closer to the target");
        };
        corners.push(next);
        cell = next;
    }
    let geodesic = Geodesic::new(maze.layout())?;
    let mut scratch = vec![0.0; models.iter().map(|m| m.scratch_len()).max().unwrap_or(0)];
    let mut out = vec![];
    let centre = |(r, c): (usize, usize)| [r as f32 + 0.5, c as f32 + 0.5];
    for w in corners.windows(2) {
        let (a, b) = (centre(w[0]), centre(w[1]));
        let n = (distance(a, b) / spacing).round().max(1.0) as usize;
        let last = w[1] == maze.target;
        for i in 0..n + usize::from(last) {
            let t = i as f32 / n as f32;
            let (x, y) = (a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]));
            let values = models
                .iter()
                .map(|m| m.value(&[x, y, 0.0, 0.0], &mut scratch))
                .collect::<Result<Vec<_>, _>>()?;
            out.push(ProfilePoint {
                x,
                y,
                shortest: geodesic.to_target(x, y).unwrap_or(f32::NAN),
                values,
            });
        }
    }
    Ok(out)
}

/// Trains the single-action baseline the way `laq train --labels single` does on the
/// data of `laq gen maze2d`: `steps` transitions of `maze` in episodes of `episode_len`,
/// generated from seed 0, then the continuous-state defaults with one action label and
/// training seed `seed`. Returns the model file's bytes.
pub fn train_single_action_model(
    maze: &Maze,
    steps: usize,
    episode_len: usize,
    seed: u64,
    device: &Device,
) -> Result<Vec<u8>> {
    if steps == 0 || episode_len == 0 {
        bail!("steps and episode_len must be positive");
    }
    let data = maze.generate(steps, episode_len, 0);
    let cfg = TrainConfig {
        labels: LabelSource::Single,
        seed,
        ..TrainConfig::continuous()
    };
    let trained = train::train(&data, &cfg, device, None)?;
    trained.model.to_bytes(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn umaze() -> Maze {
        Maze::named("umaze").unwrap()
    }

    fn laq_model() -> Vec<u8> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../models/maze2d/value.safetensors"
        );
        std::fs::read(path).expect("the shipped models/maze2d/value.safetensors")
    }

    /// A laq-value file whose V is minus the L1 distance to (1.5, 1.5):
    /// 4 -> 4 (ReLU of +-(x - 1.5), +-(y - 1.5)) -> 1.
    fn l1_model() -> Vec<u8> {
        use crate::export::{Head, Layer, ValueModel};
        #[rustfmt::skip]
        let weight = vec![
            1.0, 0.0, 0.0, 0.0,
            -1.0, 0.0, 0.0, 0.0,
            0.0, 1.0, 0.0, 0.0,
            0.0, -1.0, 0.0, 0.0,
        ];
        ValueModel {
            mean: vec![1.5, 1.5, 0.0, 0.0],
            scale: vec![1.0; 4],
            conv: None,
            layers: vec![
                Layer {
                    out_dim: 4,
                    in_dim: 4,
                    weight,
                    bias: vec![0.0; 4],
                },
                Layer {
                    out_dim: 1,
                    in_dim: 4,
                    weight: vec![-1.0; 4],
                    bias: vec![0.0],
                },
            ],
            head: Head::MaxQ,
            gamma: 0.99,
            keep_f32: vec![],
            info: Default::default(),
            density: None,
            cost_per_step: None,
        }
        .to_bytes(false)
        .unwrap()
    }

    #[test]
    fn value_guidance_reaches_the_target_when_v_decreases_towards_it() {
        // In a straight corridor minus the L1 distance has no local maximum but the
        // target: guidance through `Model::select_ahead` must succeed from every start.
        let m = Maze::parse("#########\n#GOOOOOO#\n#########").unwrap();
        let bytes = l1_model();
        let cfg = GuideConfig {
            starts: 20,
            ..GuideConfig::default()
        };
        let r = guidance_study(&m, &bytes, Some(&bytes), &cfg, 3).unwrap();
        let v = r.summary(Policy::LaqValue).unwrap();
        assert_eq!(v.success, 1.0, "{v:?}");
        assert!(v.spl > 0.8, "{v:?}");
        assert_eq!(
            r.summary(Policy::SingleValue),
            Some(&PolicySummary {
                policy: Policy::SingleValue,
                ..v.clone()
            })
        );
        for e in &r.episodes {
            let run = &e.runs[0];
            assert!(run.travelled >= e.shortest - 1e-3, "{e:?}");
            assert!(
                run.decisions as f32 <= (e.shortest / cfg.drive_length).ceil() + 2.0,
                "{e:?}"
            );
        }
    }

    #[test]
    fn the_shipped_value_against_the_baselines() {
        let m = umaze();
        let bytes = laq_model();
        let cfg = GuideConfig::default();
        let t = std::time::Instant::now();
        let r = guidance_study(&m, &bytes, None, &cfg, 0).unwrap();
        println!("{}({:.2} s)", report(&r), t.elapsed().as_secs_f64());
        assert_eq!(r.episodes.len(), 100);
        let oracle = r.summary(Policy::Geodesic).unwrap();
        // The primitives can reach the target from every start.
        assert_eq!(oracle.success, 1.0, "{oracle:?}");
        for e in &r.episodes {
            assert!(e.shortest > 0.0);
            for run in &e.runs {
                assert!(
                    (0.0..=1.0).contains(&run.spl) && run.decisions <= cfg.budget,
                    "{run:?}"
                );
                assert_eq!(run.path.len(), run.decisions + 1);
                // Only available primitives run, so each one drives its full length
                // without touching a wall (the last may stop inside the target disc).
                let n = run.path.len() - 1;
                for (i, w) in run.path.windows(2).enumerate() {
                    let d = distance(w[0], w[1]);
                    let last = run.success && i + 1 == n;
                    assert!(
                        (d - cfg.drive_length).abs() < 2e-3 || (last && d <= cfg.drive_length),
                        "{:?} step {i}: {d}",
                        run.policy
                    );
                }
            }
        }
        // Straight-to-goal never passes the U's middle wall from behind it (cells (3, 1) and
        // (3, 2)), and reaches the target from the top corridor.
        let straight = |e: &&Episode| e.runs[1].success;
        let behind: Vec<&Episode> = r
            .episodes
            .iter()
            .filter(|e| e.start[0] > 3.0 && e.start[1] < 3.0)
            .collect();
        assert!(behind.len() > 10 && !behind.iter().any(straight));
        assert!(r
            .episodes
            .iter()
            .filter(|e| e.start[0] < 2.0)
            .all(|e| straight(&e)));
        // Deterministic.
        assert_eq!(r, guidance_study(&m, &bytes, None, &cfg, 0).unwrap());
    }

    /// The behaviour the study is meant to show, with the shipped model, and what the
    /// lookahead and the goal check add to greedy selection. (A model whose
    /// Q-learning had not converged, 20k steps with a 500-step target period, failed
    /// here: its V at rest had local maxima at the corridors' far ends.)
    #[test]
    fn laq_value_guides_most_starts_and_beats_straight_to_goal() {
        let r = guidance_study(&umaze(), &laq_model(), None, &GuideConfig::default(), 0).unwrap();
        print!("{}", report(&r));
        let laq = r.summary(Policy::LaqValue).unwrap();
        let straight = r.summary(Policy::StraightToGoal).unwrap();
        assert!(laq.success >= 0.95, "{laq:?}");
        assert!(laq.spl > straight.spl, "{laq:?} {straight:?}");
        // Greedy selection (no lookahead, no goal check) stops at a local maximum of this
        // V in the far arm's dead end from some starts (docs/runtime.md).
        let greedy = GuideConfig {
            lookahead: 1,
            goal_check: false,
            ..GuideConfig::default()
        };
        let r = guidance_study(&umaze(), &laq_model(), None, &greedy, 0).unwrap();
        let greedy = r.summary(Policy::LaqValue).unwrap();
        assert!(greedy.success < laq.success, "{greedy:?} {laq:?}");
    }

    #[test]
    fn corridor_profile_runs_from_the_far_end_to_the_target() {
        let m = umaze();
        let bytes = laq_model();
        let p = corridor_profile(&m, &[&bytes, &bytes], 0.5).unwrap();
        let (first, last) = (p.first().unwrap(), p.last().unwrap());
        assert_eq!((first.x, first.y), (3.5, 1.5));
        assert_eq!((last.x, last.y), (1.5, 1.5));
        // 2 + 2 + 2 units at 0.5, plus the target centre.
        assert_eq!(p.len(), 13);
        // The centre line is not a geodesic (it rounds the bend through the corner cell's
        // centre), but it starts farthest from the target and ends inside the disc.
        assert!(p.iter().all(|q| q.shortest <= first.shortest));
        assert_eq!(last.shortest, 0.0);
        assert!(p
            .iter()
            .all(|q| q.values.len() == 2 && q.values[0] == q.values[1]));
    }
}
