//! Controller guidance in the U-maze, without heap or panics: the walls, the
//! differential-drive robot's kinematics, the 8 motion primitives as [`Controller`]s, the
//! geodesic shortest path (for SPL) and one guided episode.
//!
//! This is a port of the host study (`laq::guide`, `laq::envs::{maze2d, unicycle}`) with
//! the same constants and the same order of floating-point operations; sin, cos, floor,
//! fmod and sqrt come from `libm`. The build script compiles this file for the host as
//! well and runs the same starts with the same model, so the firmware can check that
//! its decisions are the host's bit for bit; `tests/tests/firmware.rs` also compares the
//! outcomes with `laq::guide` itself.

use core::f32::consts::{FRAC_1_SQRT_2, FRAC_PI_2, FRAC_PI_4, PI};

use laq_runtime::{Candidate, Controller, Error, Model, Outcome, Status};

/// D4RL's U-maze (`laq::envs::maze2d::U_MAZE`): `#` wall, `O` open, `G` the target cell.
/// Rows are x, columns y, cells are 1 unit wide.
pub const LAYOUT: [&[u8; 5]; 5] = [b"#####", b"#GOO#", b"###O#", b"#OOO#", b"#####"];
pub const ROWS: usize = 5;
pub const COLS: usize = 5;
/// Centre of the `G` cell (1, 1).
pub const TARGET: [f32; 2] = [1.5, 1.5];
/// Success: within this distance of the target centre.
pub const TARGET_RADIUS: f32 = 0.5;
/// Half-width of the body (the simulator tests its bounding square's corners).
pub const RADIUS: f32 = 0.1;
/// Simulation step and steps per action.
pub const DT: f32 = 0.01;
pub const FRAME_SKIP: usize = 3;
/// Top forward speed and turn rate of the robot.
pub const MAX_SPEED: f32 = 2.0;
pub const MAX_TURN: f32 = PI;

/// The primitives' settings (`laq::guide::GuideConfig::default()`).
pub const DRIVE_LENGTH: f32 = 0.5;
pub const BUDGET: usize = 60;
pub const HEADING_TOLERANCE: f32 = 1e-3;
pub const WALL_MARGIN: f32 = 0.01;
pub const MAX_TURN_ACTIONS: usize = 64;
pub const STEP_LENGTH: f32 = MAX_SPEED * DT * FRAME_SKIP as f32;
pub const TURN_PER_ACTION: f32 = MAX_TURN * DT * FRAME_SKIP as f32;

pub const NUM_PRIMITIVES: usize = 8;
/// Target heading of primitive k: k * 45 degrees in (-pi, pi].
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
/// Unit vector of each heading.
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

/// The robot's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose {
    pub x: f32,
    pub y: f32,
    /// Radians; 0 points along +x.
    pub heading: f32,
}

/// Whether cell (r, c) is a wall (outside the layout counts as wall).
pub fn is_wall(r: usize, c: usize) -> bool {
    LAYOUT
        .get(r)
        .and_then(|row| row.get(c))
        .is_none_or(|&b| b == b'#')
}

fn wall_at(x: f32, y: f32) -> bool {
    if x < 0.0 || y < 0.0 {
        return true;
    }
    is_wall(libm::floorf(x) as usize, libm::floorf(y) as usize)
}

/// Whether the body at (x, y) overlaps a wall.
pub fn blocked(x: f32, y: f32) -> bool {
    [
        (-RADIUS, -RADIUS),
        (-RADIUS, RADIUS),
        (RADIUS, -RADIUS),
        (RADIUS, RADIUS),
    ]
    .iter()
    .any(|(dx, dy)| wall_at(x + dx, y + dy))
}

/// An angle in (-pi, pi].
pub fn wrap(a: f32) -> f32 {
    // `rem_euclid` as std computes it (fmod is exact).
    let m = 2.0 * PI;
    let f = libm::fmodf(a + PI, m);
    let r = if f < 0.0 { f + m } else { f } - PI;
    if r <= -PI {
        r + 2.0 * PI
    } else {
        r
    }
}

/// One action (speed, turn) in [-1, 1]^2: `FRAME_SKIP` steps of unicycle kinematics;
/// each axis of a move that would hit a wall is dropped (the robot slides).
pub fn step(p: Pose, a: [f32; 2]) -> Pose {
    let (v, w) = (
        a[0].clamp(-1.0, 1.0) * MAX_SPEED,
        a[1].clamp(-1.0, 1.0) * MAX_TURN,
    );
    let Pose {
        mut x,
        mut y,
        mut heading,
    } = p;
    for _ in 0..FRAME_SKIP {
        heading = wrap(heading + w * DT);
        let (dx, dy) = (v * libm::cosf(heading) * DT, v * libm::sinf(heading) * DT);
        if !blocked(x + dx, y) {
            x += dx;
        }
        if !blocked(x, y + dy) {
            y += dy;
        }
    }
    Pose { x, y, heading }
}

fn dist(a: [f32; 2], b: [f32; 2]) -> f32 {
    let (dx, dy) = (a[0] - b[0], a[1] - b[1]);
    libm::sqrtf(dx * dx + dy * dy)
}

/// Whether (x, y) is within the target disc.
pub fn in_target(p: [f32; 2]) -> bool {
    dist(p, TARGET) <= TARGET_RADIUS
}

/// Whether the segment p -> q keeps a body of half-width `inflate` out of every wall
/// cell and inside the grid (touching a grown wall's edge is allowed).
pub fn segment_clear(p: [f32; 2], q: [f32; 2], inflate: f32) -> bool {
    let inside = |v: f32, n: usize| v >= inflate && v <= n as f32 - inflate;
    if !(inside(p[0], ROWS) && inside(q[0], ROWS) && inside(p[1], COLS) && inside(q[1], COLS)) {
        return false;
    }
    for r in 0..ROWS {
        for c in 0..COLS {
            if is_wall(r, c) {
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

/// Whether a positive length of p -> q lies strictly inside the box (lo, hi).
fn segment_crosses_box(p: [f32; 2], q: [f32; 2], lo: [f32; 2], hi: [f32; 2]) -> bool {
    let (mut t0, mut t1) = (0.0f32, 1.0f32);
    for (((&pa, &qa), &la), &ha) in p.iter().zip(&q).zip(&lo).zip(&hi) {
        let d = qa - pa;
        if d == 0.0 {
            if pa <= la || pa >= ha {
                return false;
            }
        } else {
            let (ta, tb) = ((la - pa) / d, (ha - pa) / d);
            t0 = t0.max(ta.min(tb));
            t1 = t1.min(ta.max(tb));
            if t0 >= t1 {
                return false;
            }
        }
    }
    t1 - t0 > 1e-7
}

/// Motion primitive k: turn in place to `HEADINGS[k]`, drive `DRIVE_LENGTH` straight.
/// It predicts (x', y', 0, 0); if its segment would run into a wall it is unavailable
/// (`predict` fails; `Model::select` reports it as `Status::Failed`).
#[derive(Clone, Copy, Debug)]
pub struct Primitive(pub usize);

/// All 8 primitives, in heading order.
pub const PRIMITIVES: [Primitive; NUM_PRIMITIVES] = [
    Primitive(0),
    Primitive(1),
    Primitive(2),
    Primitive(3),
    Primitive(4),
    Primitive(5),
    Primitive(6),
    Primitive(7),
];

impl Primitive {
    /// The end of the straight segment from (x, y), if it is clear of walls.
    pub fn predicted(&self, x: f32, y: f32) -> Option<[f32; 2]> {
        let d = DIRECTIONS.get(self.0)?;
        let q = [x + DRIVE_LENGTH * d[0], y + DRIVE_LENGTH * d[1]];
        segment_clear([x, y], q, RADIUS + WALL_MARGIN).then_some(q)
    }
}

impl Controller for Primitive {
    fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, Error> {
        let (&[x, y, ..], [nx, ny, rest @ ..]) = (state, next) else {
            return Err(Error::StateLength);
        };
        let q = self.predicted(x, y).ok_or(Error::Controller)?;
        *nx = q[0];
        *ny = q[1];
        rest.fill(0.0);
        Ok(Outcome::default())
    }
}

/// What executing one primitive did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Executed {
    pub pose: Pose,
    pub travelled: f32,
    pub reached: bool,
}

fn turn_command(target: f32, heading: f32) -> f32 {
    (wrap(target - heading) / TURN_PER_ACTION).clamp(-1.0, 1.0)
}

/// Runs primitive `k` closed-loop: P control of the heading in place, then
/// `DRIVE_LENGTH` forward; stops inside the target disc.
pub fn execute(start: Pose, k: usize) -> Result<Executed, Error> {
    let &target = HEADINGS.get(k).ok_or(Error::InvalidArgument)?;
    let mut e = Executed {
        pose: start,
        travelled: 0.0,
        reached: in_target([start.x, start.y]),
    };
    if e.reached {
        return Ok(e);
    }
    for _ in 0..MAX_TURN_ACTIONS {
        if libm::fabsf(wrap(target - e.pose.heading)) <= HEADING_TOLERANCE {
            break;
        }
        let turn = turn_command(target, e.pose.heading);
        e.pose = step(e.pose, [0.0, turn]);
    }
    let full = libm::floorf(DRIVE_LENGTH / STEP_LENGTH) as usize;
    let rest = DRIVE_LENGTH - full as f32 * STEP_LENGTH;
    let last = (rest > 1e-6).then_some(rest / STEP_LENGTH);
    for speed in core::iter::repeat_n(1.0, full).chain(last) {
        let turn = turn_command(target, e.pose.heading);
        let next = step(e.pose, [speed, turn]);
        e.travelled += dist([e.pose.x, e.pose.y], [next.x, next.y]);
        e.pose = next;
        if in_target([next.x, next.y]) {
            e.reached = true;
            break;
        }
    }
    Ok(e)
}

/// One guided episode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Episode {
    pub success: bool,
    pub decisions: usize,
    pub travelled: f32,
    /// Ended because no primitive was available.
    pub stuck: bool,
    /// Candidates scored over all decisions (available primitives, whose V was
    /// evaluated); the others were unavailable.
    pub evaluations: usize,
}

/// Guides the robot from `start`: each decision, `model.select` picks the primitive
/// whose predicted (x', y', 0, 0) has the highest V, and it is executed; until the
/// target is reached, `BUDGET` decisions are spent or none is available. `choices[i]`
/// receives decision i (as far as it has room); `timer(true)` and `timer(false)` are
/// called just before and after each `select` (e.g. to time it).
pub fn run_episode(
    model: &Model<'_>,
    start: Pose,
    scratch: &mut [f32],
    report: &mut [Candidate],
    choices: &mut [u8],
    mut timer: impl FnMut(bool),
) -> Result<Episode, Error> {
    let mut pose = start;
    let mut ep = Episode {
        success: in_target([start.x, start.y]),
        decisions: 0,
        travelled: 0.0,
        stuck: false,
        evaluations: 0,
    };
    while !ep.success && ep.decisions < BUDGET {
        timer(true);
        let chosen = model.select(&[pose.x, pose.y, 0.0, 0.0], &PRIMITIVES, scratch, report);
        timer(false);
        ep.evaluations += report
            .iter()
            .take(NUM_PRIMITIVES)
            .filter(|c| c.status != Status::Failed)
            .count();
        let k = match chosen {
            Ok(k) => k,
            Err(Error::NoValidCandidate) => {
                ep.stuck = true;
                break;
            }
            Err(e) => return Err(e),
        };
        let e = execute(pose, k)?;
        if let Some(slot) = choices.get_mut(ep.decisions) {
            *slot = k as u8;
        }
        pose = e.pose;
        ep.decisions += 1;
        ep.travelled += e.travelled;
        ep.success = e.reached;
    }
    Ok(ep)
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

/// Most visibility-graph nodes (free corners of the grown walls).
pub const MAX_NODES: usize = 32;
/// Points sampled on the target circle.
pub const TARGET_SAMPLES: usize = 64;
const NUDGE: f32 = 1e-3;

/// Geodesic shortest paths of the body to the target disc (as `laq::guide::Geodesic`):
/// a visibility graph over the free corners of the grown walls and points of the
/// target circle, in fixed-size arrays.
#[derive(Clone, Debug)]
pub struct Geodesic {
    nodes: [[f32; 2]; MAX_NODES],
    to_target: [f32; MAX_NODES],
    n: usize,
}

fn target_sample(i: usize) -> Option<[f32; 2]> {
    let a = 2.0 * PI * i as f32 / TARGET_SAMPLES as f32;
    let r = TARGET_RADIUS - NUDGE;
    let p = [TARGET[0] + r * libm::cosf(a), TARGET[1] + r * libm::sinf(a)];
    segment_clear(p, p, RADIUS).then_some(p)
}

/// The straight-line distance from `p` to the nearest target point it sees.
fn direct(p: [f32; 2]) -> f32 {
    (0..TARGET_SAMPLES)
        .filter_map(target_sample)
        .filter(|&b| segment_clear(p, b, RADIUS))
        .map(|b| dist(p, b))
        .fold(f32::INFINITY, f32::min)
}

impl Geodesic {
    /// Builds the graph; `Error::BufferTooSmall` if the maze has more than `MAX_NODES`
    /// free corners.
    pub fn new() -> Result<Self, Error> {
        let mut g = Geodesic {
            nodes: [[0.0; 2]; MAX_NODES],
            to_target: [f32::INFINITY; MAX_NODES],
            n: 0,
        };
        for r in 0..ROWS {
            for c in 0..COLS {
                if !is_wall(r, c) {
                    continue;
                }
                for (dr, dc) in [(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)] {
                    let (sr, sc): (f32, f32) = (2.0 * dr - 1.0, 2.0 * dc - 1.0);
                    let p = [
                        r as f32 + dr + sr * (RADIUS + NUDGE),
                        c as f32 + dc + sc * (RADIUS + NUDGE),
                    ];
                    if segment_clear(p, p, RADIUS) {
                        *g.nodes.get_mut(g.n).ok_or(Error::BufferTooSmall)? = p;
                        g.n += 1;
                    }
                }
            }
        }
        let (nodes, n) = (g.nodes, g.n);
        for (t, p) in g.to_target.iter_mut().zip(&nodes).take(n) {
            *t = direct(*p);
        }
        // Dijkstra from the target over the nodes (iterators rather than indexing: no
        // bounds checks that could panic).
        let mut done = [false; MAX_NODES];
        for _ in 0..n {
            let mut closest: Option<(usize, f32)> = None;
            for (i, (&d, &fin)) in g.to_target.iter().zip(&done).enumerate().take(n) {
                if !fin && d.is_finite() && closest.is_none_or(|(_, b)| d < b) {
                    closest = Some((i, d));
                }
            }
            let Some((u, du)) = closest else { break };
            let (Some(&pu), Some(fin)) = (nodes.get(u), done.get_mut(u)) else {
                break;
            };
            *fin = true;
            for ((t, &fin), pv) in g.to_target.iter_mut().zip(&done).zip(&nodes).take(n) {
                if !fin && segment_clear(pu, *pv, RADIUS) {
                    *t = t.min(du + dist(pu, *pv));
                }
            }
        }
        Ok(g)
    }

    /// Shortest path length for the body from (x, y) to the target disc (0 inside it);
    /// `None` for a blocked or unreachable position.
    pub fn to_target(&self, x: f32, y: f32) -> Option<f32> {
        let p = [x, y];
        if !segment_clear(p, p, RADIUS) {
            return None;
        }
        if in_target(p) {
            return Some(0.0);
        }
        let mut best = direct(p);
        for (v, g) in self.nodes.iter().zip(&self.to_target).take(self.n) {
            if g.is_finite() && segment_clear(p, *v, RADIUS) {
                best = best.min(dist(p, *v) + g);
            }
        }
        best.is_finite().then_some(best)
    }
}

/// Number of fixed starts.
pub const NUM_STARTS: usize = 10;

/// Deterministic starts: a pseudo-random point in the middle half of a pseudo-random
/// open cell (as `Maze::random_point`), outside the target disc, with a pseudo-random
/// heading in [-pi, pi). Uses a 64-bit LCG with 24-bit outputs, so the values are
/// exact on every target.
pub fn starts() -> [Pose; NUM_STARTS] {
    let mut state: u64 = 0x6d61_7a65;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 40) as f32 / (1u32 << 24) as f32
    };
    let mut out = [Pose {
        x: 0.0,
        y: 0.0,
        heading: 0.0,
    }; NUM_STARTS];
    let mut i = 0;
    // Bounded: about 6 in 9 draws of an interior cell are open and away from the target.
    for _ in 0..100 * NUM_STARTS {
        if i == NUM_STARTS {
            break;
        }
        let (r, c) = (1 + (next() * 3.0) as usize, 1 + (next() * 3.0) as usize);
        let (x, y) = (
            r as f32 + 0.25 + 0.5 * next(),
            c as f32 + 0.25 + 0.5 * next(),
        );
        let heading = -PI + 2.0 * PI * next();
        if is_wall(r, c) || in_target([x, y]) {
            continue;
        }
        if let Some(slot) = out.get_mut(i) {
            *slot = Pose { x, y, heading };
        }
        i += 1;
    }
    out
}

/// A 32-bit FNV-1a hash of a choice sequence, to compare runs compactly.
pub fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |h, &b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}
