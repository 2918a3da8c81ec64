//! Zero-shot controller guidance: a value function learned from a point mass's
//! state-only logs steers hand-designed motion primitives of another body, the
//! differential-drive robot of [`crate::envs::unicycle`], with no training for that body.
//!
//! Each decision, the robot asks 8 primitives ("turn to heading k * 45 degrees, then drive
//! straight for [`GuideConfig::drive_length`]") where they would take it, and
//! [`laq_runtime::Model::select`] picks the one whose predicted point has the highest
//! V(x, y, 0, 0): the same call, on the same file, that a microcontroller makes
//! (`firmware-examples/src/bin/maze_guide.rs`). Baselines use the same primitives and the
//! same knowledge of the walls: the primitive that gets closest to the target in a
//! straight line, V of a model trained with a single action label, and (as an upper
//! reference) the primitive whose predicted point is geodesically closest to the target.
//!
//! Success is reaching [`TARGET_RADIUS`] of the target centre within the decision budget;
//! SPL (success weighted by path length) is `success * L / max(L_taken, L)` with `L` the
//! geodesic shortest path of the body to the target disc ([`Geodesic`]).

use crate::envs::maze2d::{Maze, DT, FRAME_SKIP, RADIUS, TARGET_RADIUS};
use crate::envs::unicycle::{self, Pose, MAX_SPEED, MAX_TURN};
use crate::run::config::TrainConfig;
use crate::run::train;
use crate::stages::labels::LabelSource;
use anyhow::{bail, Context, Result};
use candle_core::Device;
use laq_runtime::{Candidate, Controller, Model, Outcome};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::f32::consts::{FRAC_1_SQRT_2, FRAC_PI_2, FRAC_PI_4, PI};
use std::fmt::Write as _;

/// Number of motion primitives: one per multiple of 45 degrees.
pub const NUM_PRIMITIVES: usize = 8;

/// Target heading of primitive k, k * 45 degrees wrapped to (-pi, pi]. Written out (not
/// computed) so that the firmware's table is the same f32 values.
pub const HEADINGS: [f32; NUM_PRIMITIVES] = [
    0.0,
    FRAC_PI_4,
    FRAC_PI_2,
    3.0 * FRAC_PI_4,
    PI,
    -3.0 * FRAC_PI_4,
    -FRAC_PI_2,
    -FRAC_PI_4,
];

/// Unit vector of each heading, exact for the axes (the predictor's direction).
pub const DIRECTIONS: [[f32; 2]; NUM_PRIMITIVES] = [
    [1.0, 0.0],
    [FRAC_1_SQRT_2, FRAC_1_SQRT_2],
    [0.0, 1.0],
    [-FRAC_1_SQRT_2, FRAC_1_SQRT_2],
    [-1.0, 0.0],
    [-FRAC_1_SQRT_2, -FRAC_1_SQRT_2],
    [0.0, -1.0],
    [FRAC_1_SQRT_2, -FRAC_1_SQRT_2],
];

/// Distance driven in one action at full speed.
pub const STEP_LENGTH: f32 = MAX_SPEED * DT * FRAME_SKIP as f32;
/// Heading change in one action at full turn rate.
pub const TURN_PER_ACTION: f32 = MAX_TURN * DT * FRAME_SKIP as f32;
/// Most turning actions of one primitive: a half turn takes 34 at full rate.
pub const MAX_TURN_ACTIONS: usize = 64;

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
}

impl Default for GuideConfig {
    fn default() -> Self {
        GuideConfig {
            drive_length: 0.5,
            budget: 60,
            starts: 100,
            heading_tolerance: 1e-3,
            wall_margin: 0.01,
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
        Ok(())
    }
}

/// Whether the segment p -> q keeps a body of half-width `inflate` out of every wall
/// cell of `maze` and inside the grid.
///
/// The simulator tests the four corners of the body's bounding square
/// ([`Maze::blocked`]), so the body is a square of half-width [`RADIUS`] and the walls it
/// cannot enter are the wall cells grown by that much in each axis. A segment is clear if
/// it does not cross the interior of any grown cell (touching an edge is allowed).
pub fn segment_clear(maze: &Maze, p: [f32; 2], q: [f32; 2], inflate: f32) -> bool {
    let inside = |v: f32, n: usize| v >= inflate && v <= n as f32 - inflate;
    if !(inside(p[0], maze.rows)
        && inside(q[0], maze.rows)
        && inside(p[1], maze.cols)
        && inside(q[1], maze.cols))
    {
        return false;
    }
    for r in 0..maze.rows {
        for c in 0..maze.cols {
            if !maze.is_open((r, c)) {
                let lo = [r as f32 - inflate, c as f32 - inflate];
                let hi = [r as f32 + 1.0 + inflate, c as f32 + 1.0 + inflate];
                if segment_crosses_box(p, q, lo, hi) {
                    return false;
                }
            }
        }
    }
    true
}

/// Whether the segment p -> q passes through the open box (lo, hi) (Liang-Barsky
/// clipping): a positive length of it lies strictly inside.
fn segment_crosses_box(p: [f32; 2], q: [f32; 2], lo: [f32; 2], hi: [f32; 2]) -> bool {
    let (mut t0, mut t1) = (0.0f32, 1.0f32);
    for a in 0..2 {
        let d = q[a] - p[a];
        if d == 0.0 {
            if p[a] <= lo[a] || p[a] >= hi[a] {
                return false;
            }
        } else {
            let (ta, tb) = ((lo[a] - p[a]) / d, (hi[a] - p[a]) / d);
            t0 = t0.max(ta.min(tb));
            t1 = t1.min(ta.max(tb));
            if t0 >= t1 {
                return false;
            }
        }
    }
    // Only touching (a single point or an edge) is not a crossing.
    t1 - t0 > 1e-7
}

fn dist(a: [f32; 2], b: [f32; 2]) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
}

fn in_target(maze: &Maze, p: [f32; 2]) -> bool {
    let (tx, ty) = maze.target_point();
    dist(p, [tx, ty]) <= TARGET_RADIUS
}

/// A motion primitive as the runtime sees it: "turn to heading `k * 45` degrees, then
/// drive straight for `length`". Turning happens in place, so it predicts the point
/// `length` along the heading from the current (x, y), at rest: (x', y', 0, 0).
///
/// A primitive whose straight segment would run into a wall of the known map reports
/// itself unavailable: `predict` fails and [`Model::select`] marks it
/// [`laq_runtime::Status::Failed`]. The robot would slide along the wall to a point the
/// predictor does not know, and V at the nominal point (inside or behind a wall, where
/// there are no data) means nothing; behind the U's middle wall it would even be high.
#[derive(Clone, Debug)]
pub struct Primitive<'m> {
    maze: &'m Maze,
    /// k: the heading is `HEADINGS[k]`.
    pub index: usize,
    length: f32,
    margin: f32,
}

impl Primitive<'_> {
    /// The point the primitive ends at from (x, y), if its segment is clear of walls.
    pub fn predicted(&self, x: f32, y: f32) -> Option<[f32; 2]> {
        let d = DIRECTIONS.get(self.index)?;
        let q = [x + self.length * d[0], y + self.length * d[1]];
        segment_clear(self.maze, [x, y], q, RADIUS + self.margin).then_some(q)
    }
}

impl Controller for Primitive<'_> {
    fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, laq_runtime::Error> {
        if state.len() < 2 || next.len() != state.len() {
            return Err(laq_runtime::Error::StateLength);
        }
        let q = self
            .predicted(state[0], state[1])
            .ok_or(laq_runtime::Error::Controller)?;
        next.fill(0.0);
        next[..2].copy_from_slice(&q);
        Ok(Outcome::default())
    }
}

/// The 8 primitives for `maze` with the configured length and wall margin.
pub fn primitives<'m>(maze: &'m Maze, cfg: &GuideConfig) -> Vec<Primitive<'m>> {
    (0..NUM_PRIMITIVES)
        .map(|index| Primitive {
            maze,
            index,
            length: cfg.drive_length,
            margin: cfg.wall_margin,
        })
        .collect()
}

/// What executing one primitive did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Executed {
    pub pose: Pose,
    /// Distance actually travelled (sum of the per-action displacements).
    pub travelled: f32,
    /// Unicycle actions used (turning and driving).
    pub actions: usize,
    /// Whether the robot entered the target disc (execution stops there).
    pub reached: bool,
}

/// The heading command of the P controller: the turn rate (in [-1, 1]) that would
/// remove the heading error in one action, saturated.
fn turn_command(target: f32, heading: f32) -> f32 {
    (unicycle::wrap(target - heading) / TURN_PER_ACTION).clamp(-1.0, 1.0)
}

/// Runs primitive `k` closed-loop on the unicycle: turn in place with the P controller
/// until the heading error is below the tolerance (at most [`MAX_TURN_ACTIONS`]), then
/// drive forward for `drive_length` (whole actions at full speed and one shorter one),
/// still correcting the heading. Stops as soon as the robot is within the target disc.
pub fn execute(maze: &Maze, start: Pose, k: usize, cfg: &GuideConfig) -> Result<Executed> {
    let Some(&target) = HEADINGS.get(k) else {
        bail!("no primitive {k} (there are {NUM_PRIMITIVES})");
    };
    let mut e = Executed {
        pose: start,
        travelled: 0.0,
        actions: 0,
        reached: in_target(maze, [start.x, start.y]),
    };
    if e.reached {
        return Ok(e);
    }
    for _ in 0..MAX_TURN_ACTIONS {
        if unicycle::wrap(target - e.pose.heading).abs() <= cfg.heading_tolerance {
            break;
        }
        let turn = turn_command(target, e.pose.heading);
        e.pose = unicycle::step(maze, e.pose, [0.0, turn]);
        e.actions += 1;
    }
    let full = (cfg.drive_length / STEP_LENGTH).floor() as usize;
    let rest = cfg.drive_length - full as f32 * STEP_LENGTH;
    let speeds = std::iter::repeat_n(1.0, full).chain((rest > 1e-6).then_some(rest / STEP_LENGTH));
    for speed in speeds {
        let turn = turn_command(target, e.pose.heading);
        let next = unicycle::step(maze, e.pose, [speed, turn]);
        e.travelled += dist([e.pose.x, e.pose.y], [next.x, next.y]);
        e.pose = next;
        e.actions += 1;
        if in_target(maze, [next.x, next.y]) {
            e.reached = true;
            break;
        }
    }
    Ok(e)
}

/// Geodesic distances to the target disc for the robot's body, exact up to the sampling
/// of the target circle: a visibility graph over the convex corners of the grown walls
/// (see [`segment_clear`]) and 64 points of the target circle.
///
/// Shortest paths among polygons bend only at convex obstacle corners, so the graph's
/// nodes are the corners of the grown wall cells (nudged 1e-3 outwards) that are free.
/// Each node's distance to the target is computed once (Dijkstra); a query connects the
/// point to every node and target point it sees.
#[derive(Clone, Debug)]
pub struct Geodesic {
    maze: Maze,
    nodes: Vec<[f32; 2]>,
    to_target: Vec<f32>,
    targets: Vec<[f32; 2]>,
}

/// Points sampled on the target circle.
pub const TARGET_SAMPLES: usize = 64;
/// How far graph nodes sit outside the grown walls' corners, and target points inside
/// the target circle.
const NUDGE: f32 = 1e-3;

impl Geodesic {
    pub fn new(maze: &Maze) -> Self {
        let clear = |p: [f32; 2]| segment_clear(maze, p, p, RADIUS);
        let mut nodes = vec![];
        for r in 0..maze.rows {
            for c in 0..maze.cols {
                if maze.is_open((r, c)) {
                    continue;
                }
                for (dr, dc) in [(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)] {
                    let (sr, sc) = (2.0 * dr - 1.0, 2.0 * dc - 1.0);
                    let p = [
                        r as f32 + dr + sr * (RADIUS + NUDGE),
                        c as f32 + dc + sc * (RADIUS + NUDGE),
                    ];
                    if clear(p) {
                        nodes.push(p);
                    }
                }
            }
        }
        let (tx, ty) = maze.target_point();
        let targets: Vec<[f32; 2]> = (0..TARGET_SAMPLES)
            .map(|i| {
                let a = 2.0 * PI * i as f32 / TARGET_SAMPLES as f32;
                let r = TARGET_RADIUS - NUDGE;
                [tx + r * a.cos(), ty + r * a.sin()]
            })
            .filter(|&p| clear(p))
            .collect();
        let direct = |p: [f32; 2]| {
            targets
                .iter()
                .filter(|&&b| segment_clear(maze, p, b, RADIUS))
                .map(|&b| dist(p, b))
                .fold(f32::INFINITY, f32::min)
        };
        // Dijkstra from the target over the nodes (dense graph, O(n^2)).
        let n = nodes.len();
        let mut d: Vec<f32> = nodes.iter().map(|&p| direct(p)).collect();
        let mut done = vec![false; n];
        for _ in 0..n {
            let Some(u) = (0..n)
                .filter(|&i| !done[i] && d[i].is_finite())
                .min_by(|&a, &b| d[a].total_cmp(&d[b]))
            else {
                break;
            };
            done[u] = true;
            for v in 0..n {
                if !done[v] && segment_clear(maze, nodes[u], nodes[v], RADIUS) {
                    d[v] = d[v].min(d[u] + dist(nodes[u], nodes[v]));
                }
            }
        }
        Geodesic {
            maze: maze.clone(),
            nodes,
            to_target: d,
            targets,
        }
    }

    /// The shortest path length for the body from (x, y) to the target disc: 0 inside
    /// it, `None` if (x, y) is not a free position or cannot reach the target.
    pub fn to_target(&self, x: f32, y: f32) -> Option<f32> {
        let p = [x, y];
        if !segment_clear(&self.maze, p, p, RADIUS) {
            return None;
        }
        if in_target(&self.maze, p) {
            return Some(0.0);
        }
        let sees = |q: [f32; 2]| segment_clear(&self.maze, p, q, RADIUS);
        let direct = self
            .targets
            .iter()
            .filter(|&&b| sees(b))
            .map(|&b| dist(p, b))
            .fold(f32::INFINITY, f32::min);
        let via = self
            .nodes
            .iter()
            .zip(&self.to_target)
            .filter(|&(&v, g)| g.is_finite() && sees(v))
            .map(|(&v, g)| dist(p, v) + g)
            .fold(f32::INFINITY, f32::min);
        let best = direct.min(via);
        best.is_finite().then_some(best)
    }
}

/// The policies of the study.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// V of the LAQ model at the predicted point, through `Model::select`.
    LaqValue,
    /// The available primitive whose predicted point is closest to the target centre.
    StraightToGoal,
    /// V of a model trained with one action label (TD(0)), through `Model::select`.
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
    /// By `reward + gamma * V(next)` with `laq_runtime` (reward 0: by V).
    Value(Model<'a>),
    StraightToGoal,
    Geodesic(&'a Geodesic),
}

impl Selector<'_> {
    /// The chosen primitive, or `None` if none is available.
    pub fn choose(&self, maze: &Maze, pose: Pose, prims: &[Primitive]) -> Result<Option<usize>> {
        match self {
            Selector::Value(model) => {
                let mut scratch = vec![0.0; model.scratch_len()];
                let mut report = vec![Candidate::default(); prims.len()];
                match model.select(&pose.as_point_mass(), prims, &mut scratch, &mut report) {
                    Ok(i) => Ok(Some(i)),
                    Err(laq_runtime::Error::NoValidCandidate) => Ok(None),
                    Err(e) => Err(e).context("selecting a primitive"),
                }
            }
            Selector::StraightToGoal => {
                let (tx, ty) = maze.target_point();
                Ok(best_by(prims, pose, |q| Some(-dist(q, [tx, ty]))))
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

/// Runs one episode: decide, execute, until the target is reached, the budget is spent
/// or no primitive is available. `shortest` is the geodesic L of the start, for SPL.
pub fn run_episode(
    maze: &Maze,
    policy: Policy,
    selector: &Selector,
    start: Pose,
    shortest: f32,
    cfg: &GuideConfig,
) -> Result<Run> {
    cfg.check()?;
    let prims = primitives(maze, cfg);
    let mut pose = start;
    let mut run = Run {
        policy,
        success: in_target(maze, [start.x, start.y]),
        decisions: 0,
        travelled: 0.0,
        spl: 0.0,
        stuck: false,
        path: vec![[start.x, start.y]],
        choices: vec![],
    };
    while !run.success && run.decisions < cfg.budget {
        let Some(k) = selector.choose(maze, pose, &prims)? else {
            run.stuck = true;
            break;
        };
        let e = execute(maze, pose, k, cfg)?;
        pose = e.pose;
        run.decisions += 1;
        run.travelled += e.travelled;
        run.success = e.reached;
        run.path.push([pose.x, pose.y]);
        run.choices.push(k as u8);
    }
    run.spl = spl(run.success, shortest, run.travelled);
    Ok(run)
}

/// Success weighted by path length; 1 for a success that needed no travel.
pub fn spl(success: bool, shortest: f32, travelled: f32) -> f32 {
    let longest = travelled.max(shortest);
    match (success, longest > 0.0) {
        (false, _) => 0.0,
        (true, false) => 1.0,
        (true, true) => shortest / longest,
    }
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
        if !in_target(maze, [x, y]) {
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
    let geodesic = Geodesic::new(maze);
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
    let geodesic = Geodesic::new(maze);
    let mut scratch = vec![0.0; models.iter().map(|m| m.scratch_len()).max().unwrap_or(0)];
    let mut out = vec![];
    let centre = |(r, c): (usize, usize)| [r as f32 + 0.5, c as f32 + 0.5];
    for w in corners.windows(2) {
        let (a, b) = (centre(w[0]), centre(w[1]));
        let n = (dist(a, b) / spacing).round().max(1.0) as usize;
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

    #[test]
    fn geodesic_along_a_straight_corridor() {
        let m = Maze::parse("#######\n#GOOOO#\n#######").unwrap();
        let g = Geodesic::new(&m);
        // Straight along the corridor to the disc's edge: 4 - 0.5.
        let d = g.to_target(1.5, 5.5).unwrap();
        assert!((d - 3.5).abs() < 2e-3, "{d}");
        // Off the corridor's axis: still a straight line to the circle.
        let d = g.to_target(1.2, 4.0).unwrap();
        let euclid = ((1.5f32 - 1.2).powi(2) + 2.5f32.powi(2)).sqrt() - 0.5;
        assert!((d - euclid).abs() < 2e-3, "{d} vs {euclid}");
        assert_eq!(g.to_target(1.5, 1.7), Some(0.0));
        // Inside a wall, or too close to one for the body.
        assert_eq!(g.to_target(0.5, 3.0), None);
        assert_eq!(g.to_target(1.05, 3.0), None);
    }

    #[test]
    fn geodesic_around_the_u() {
        let m = umaze();
        let g = Geodesic::new(&m);
        // From the far arm's end: around the middle wall's grown corners (3.1, 3.1) and
        // (1.9, 3.1), then straight to the disc.
        let leg = (0.4f32.powi(2) + 1.6f32.powi(2)).sqrt();
        let expected = leg + 1.2 + (leg - 0.5);
        let d = g.to_target(3.5, 1.5).unwrap();
        assert!((d - expected).abs() < 1e-2, "{d} vs {expected}");
        // Far longer than the straight line through the wall.
        assert!(d > 2.0 * (2.0 - 0.5));
        // In the top corridor the target is in sight.
        let d = g.to_target(1.5, 3.5).unwrap();
        assert!((d - 1.5).abs() < 2e-3, "{d}");
        // Monotone along the corridor.
        let along = [
            (1.5, 2.5),
            (1.5, 3.5),
            (2.5, 3.5),
            (3.5, 3.5),
            (3.5, 2.5),
            (3.5, 1.5),
        ];
        let ds: Vec<f32> = along
            .iter()
            .map(|&(x, y)| g.to_target(x, y).unwrap())
            .collect();
        assert!(ds.windows(2).all(|w| w[0] < w[1]), "{ds:?}");
    }

    #[test]
    fn segments_respect_the_grown_walls() {
        let m = umaze();
        // Along the top corridor's axis: clear; across the middle wall: not.
        assert!(segment_clear(&m, [1.5, 1.5], [1.5, 3.5], RADIUS));
        assert!(!segment_clear(&m, [1.5, 1.5], [3.5, 1.5], RADIUS));
        // 0.05 from the wall: the body's half-width 0.1 does not fit.
        assert!(!segment_clear(&m, [1.05, 1.5], [1.05, 2.5], RADIUS));
        assert!(segment_clear(&m, [1.15, 1.5], [1.15, 2.5], RADIUS));
        // Cutting the inner corner of the bend.
        assert!(!segment_clear(&m, [1.5, 2.5], [2.5, 3.5], RADIUS));
    }

    #[test]
    fn a_primitive_moves_the_robot_as_predicted_in_open_space() {
        let m = umaze();
        let cfg = GuideConfig::default();
        let prims = primitives(&m, &cfg);
        // Along the top corridor (+-y) and the right column (+-x), from any heading.
        for (x, y, ks) in [(1.5, 3.0, [2usize, 6]), (2.5, 3.5, [0, 4])] {
            for k in ks {
                for heading in [0.0, 2.0, -2.5, PI] {
                    let start = Pose { x, y, heading };
                    let q = prims[k].predicted(x, y).expect("available");
                    let e = execute(&m, start, k, &cfg).unwrap();
                    assert!(
                        dist([e.pose.x, e.pose.y], q) < 1e-3,
                        "k {k} from {start:?}: {e:?} vs {q:?}"
                    );
                    assert!((e.travelled - cfg.drive_length).abs() < 1e-3, "{e:?}");
                    assert!(unicycle::wrap(e.pose.heading - HEADINGS[k]).abs() < 1e-3);
                    assert!(!e.reached);
                }
            }
        }
        // A diagonal in the right column.
        let q = prims[3].predicted(2.75, 3.25).expect("up-right fits");
        let e = execute(
            &m,
            Pose {
                x: 2.75,
                y: 3.25,
                heading: 0.0,
            },
            3,
            &cfg,
        )
        .unwrap();
        assert!(dist([e.pose.x, e.pose.y], q) < 1e-3, "{e:?} vs {q:?}");
    }

    #[test]
    fn blocked_primitives_are_unavailable_to_select() {
        let m = umaze();
        let model_bytes = laq_model();
        let model = Model::new_checked(&model_bytes).unwrap();
        let prims = primitives(&m, &GuideConfig::default());
        let mut scratch = vec![0.0; model.scratch_len()];
        let mut report = [Candidate::default(); NUM_PRIMITIVES];
        // At the far arm's end, facing the middle wall: "up" (-x) would hit it.
        let best = model
            .select(&[3.5, 1.5, 0.0, 0.0], &prims, &mut scratch, &mut report)
            .unwrap();
        assert_eq!(report[4].status, laq_runtime::Status::Failed);
        assert!(report[best].status.is_valid());
        assert!(report[2].status.is_valid());
    }

    #[test]
    fn spl_weights_success_by_path_length() {
        assert_eq!(spl(false, 2.0, 2.0), 0.0);
        assert_eq!(spl(true, 2.0, 4.0), 0.5);
        assert_eq!(spl(true, 2.0, 1.9), 1.0);
        assert_eq!(spl(true, 0.0, 0.0), 1.0);
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
        }
        .to_bytes(false)
        .unwrap()
    }

    #[test]
    fn value_guidance_reaches_the_target_when_v_decreases_towards_it() {
        // In a straight corridor minus the L1 distance has no local maximum but the
        // target: guidance through `Model::select` must succeed from every start.
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
                    let d = dist(w[0], w[1]);
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

    /// The behaviour the study is meant to show, with the shipped model. (A model whose
    /// Q-learning had not converged, 20k steps with a 500-step target period, failed
    /// here: its V at rest had local maxima at the corridors' far ends.)
    #[test]
    fn laq_value_guides_most_starts_and_beats_straight_to_goal() {
        let r = guidance_study(&umaze(), &laq_model(), None, &GuideConfig::default(), 0).unwrap();
        print!("{}", report(&r));
        let laq = r.summary(Policy::LaqValue).unwrap();
        let straight = r.summary(Policy::StraightToGoal).unwrap();
        assert!(laq.success >= 0.8, "{laq:?}");
        assert!(laq.spl > straight.spl, "{laq:?} {straight:?}");
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
