//! First-person navigation in a branching maze, after the "branching" environment of
//! Chang et al. (2020) that the paper's 3D navigation study uses: two goals, a near one
//! (optimal) and a far one, and data that mostly go to the far goal or reach the near goal
//! by a long detour, so that policy evaluation of the data prefers the wrong goal.
//!
//! # Geometry and dynamics
//! Walls fill cells of a 1 m grid; x runs along columns (east), y along rows (south, down
//! the map as printed). The agent is a disc of radius 0.2 m with a heading in 30 degree
//! steps, heading 0 facing east and heading 3 facing south. Actions: [`FORWARD`] 0.25 m (a
//! move that would touch a wall leaves the agent where it is), [`LEFT`] and [`RIGHT`]
//! turns of 30 degrees. Positions live on a 1/32 m lattice: a forward move is the heading's
//! 0.25 m displacement rounded to the lattice (0.252 m at 29.7 degrees for the odd
//! multiples of 30), so the set of poses is finite and the pose graph *is* the
//! environment: shortest paths, the planner and the optimal value below are exact, not
//! approximations of a continuous system.
//!
//! # Goals and rewards
//! Coming within 0.5 m of a goal's centre ends the episode with that goal's reward, 1 at
//! both by default: in the paper's data both goals end episodes. G_near is the optimal goal
//! because it is closer to the start room, and with discounting the same reward sooner is
//! worth more: V*(s) = max over goals g of r_g * gamma^(d_g(s) - 1), where d_g(s) is the
//! fewest actions that reach g (the reward comes with the last of them) and V* = 0 at a
//! goal. From every start pose d_near < d_far, so V* prefers G_near.
//!
//! # Layout ([`BRANCHING`])
//! ```text
//!            col 0         1
//!                01234567890123456
//!        row 0   #################
//!            1   #.......W.#######      ring: row 1, column 9, row 5, column 1
//!            2   #.#######.#######
//!            3   #N#######.#######      N = G_near, on the ring's west side
//!            4   #.#######.#######
//!            5   #...SSS.........#      S = start room (3 x 3, rows 5-7)
//!            6   ####SSS####.###.#
//!            7   ####SSS####.###.#      dead end at column 11
//!            8   ###########.###F#      F = G_far, at the end of the east branch
//!            9   #################
//! ```
//! From the room's centre G_near is 7 cells away going west, or 19 going round the ring
//! east, north and west (the detour, forced through the waypoint W); G_far is 14 cells
//! away going east. Goals are red (near) and blue (far) pillars standing on discs of the
//! same colour.
//!
//! # Data ([`Nav::generate`])
//! Episodes start at a random pose in the start room and follow the shortest path to their
//! target epsilon-greedily (with probability 0.2 a uniformly random action, which may be the
//! planned one), for at most 700 steps. The mix follows the authors' release: 50% far goal, 49.5%
//! near goal by the detour, 0.5% near goal directly (the paper's appendix names the first
//! two shares the other way round; [`GenConfig::mix`] sets them). Counts are allocated
//! exactly (largest remainders) and shuffled. Observations are rendered RGB frames, u8
//! `[3 * frames, H, W]` (frames stacked oldest first along channels; the first frame of an
//! episode repeats to fill the stack). The ground-truth actions are stored for evaluation
//! only. `infos` holds per transition `[x, y, heading, next x, next y, next heading,
//! episode, kind]` (metres, heading index 0..12, kind 0 far, 1 detour, 2 direct): the
//! dataset format ignores it, [`poses_from_infos`] reads it back.

use crate::data::{read_arrays, write_arrays, Actions, Dataset, RawArray};
use anyhow::{bail, Context, Result};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::path::Path;

/// Lattice points per metre.
pub const LATTICE: i32 = 32;
pub const HEADINGS: usize = 12;
pub const FORWARD: usize = 0;
pub const LEFT: usize = 1;
pub const RIGHT: usize = 2;
pub const NUM_ACTIONS: usize = 3;
/// Nominal length of a forward move in metres.
pub const STEP: f32 = 0.25;
pub const RADIUS: f32 = 0.2;
pub const GOAL_RADIUS: f32 = 0.5;
pub const GAMMA: f64 = 0.99;
pub const EPSILON: f64 = 0.2;
pub const MAX_STEPS: usize = 700;
pub const EPISODES: usize = 1000;
/// Default frame width and height in pixels.
pub const SIZE: usize = 64;
/// Shares of far-goal, detour and direct episodes.
pub const MIX: [f64; 3] = [0.5, 0.495, 0.005];
/// A macro-action ends this close to its junction's centre.
pub const ARRIVE_RADIUS: f32 = 0.25;

pub const BRANCHING: &str = "\
#################
#.......W.#######
#.#######.#######
#N#######.#######
#.#######.#######
#...SSS.........#
####SSS####.###.#
####SSS####.###.#
###########.###F#
#################";

const WALL_HEIGHT: f32 = 1.0;
const EYE: f32 = 0.5;
const PILLAR_RADIUS: f32 = 0.2;
const PILLAR_HEIGHT: f32 = 0.8;
const L: usize = LATTICE as usize;
const PER_CELL: usize = L * L * HEADINGS;
const NONE: u32 = u32::MAX;

/// sqrt(3) / 2, written out so that directions are the same bits on every platform.
const S3: f32 = 0.866_025_4;
/// Unit view directions of the 12 headings.
const DIRS: [(f32, f32); HEADINGS] = [
    (1.0, 0.0),
    (S3, 0.5),
    (0.5, S3),
    (0.0, 1.0),
    (-0.5, S3),
    (-S3, 0.5),
    (-1.0, 0.0),
    (-S3, -0.5),
    (-0.5, -S3),
    (0.0, -1.0),
    (0.5, -S3),
    (S3, -0.5),
];
/// Forward moves in lattice units: 8 * DIRS rounded.
const MOVES: [(i32, i32); HEADINGS] = [
    (8, 0),
    (7, 4),
    (4, 7),
    (0, 8),
    (-4, 7),
    (-7, 4),
    (-8, 0),
    (-7, -4),
    (-4, -7),
    (0, -8),
    (4, -7),
    (7, -4),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Goal {
    Near,
    Far,
}

/// An agent pose: a lattice point (units of 1/32 m) and a heading index (30 degrees each,
/// taken modulo 12).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pose {
    pub gx: i32,
    pub gy: i32,
    pub heading: u8,
}

impl Pose {
    /// The lattice pose nearest to (x, y) metres.
    pub fn from_xy(x: f32, y: f32, heading: usize) -> Pose {
        Pose {
            gx: (x * LATTICE as f32).round() as i32,
            gy: (y * LATTICE as f32).round() as i32,
            heading: (heading % HEADINGS) as u8,
        }
    }

    pub fn x(&self) -> f32 {
        self.gx as f32 / LATTICE as f32
    }

    pub fn y(&self) -> f32 {
        self.gy as f32 / LATTICE as f32
    }

    fn h(&self) -> usize {
        self.heading as usize % HEADINGS
    }

    /// Heading in degrees, clockwise on the printed map from east.
    pub fn angle_deg(&self) -> f32 {
        self.h() as f32 * 30.0
    }
}

/// Whether lattice point (gx, gy) lies within `radius` metres of `centre` (lattice units).
fn within(gx: i32, gy: i32, centre: (i32, i32), radius: f32) -> bool {
    let (dx, dy) = ((gx - centre.0) as i64, (gy - centre.1) as i64);
    let r = radius as f64 * LATTICE as f64;
    ((dx * dx + dy * dy) as f64) <= r * r
}

/// The maze: walls, start cells, goal cells and an optional detour waypoint cell.
#[derive(Clone, Debug, PartialEq)]
pub struct Map {
    pub rows: usize,
    pub cols: usize,
    walls: Vec<bool>,
    pub start: Vec<(usize, usize)>,
    pub near: (usize, usize),
    pub far: (usize, usize),
    pub waypoint: Option<(usize, usize)>,
}

impl Map {
    /// Parses a layout: `#` wall, `.` open, `S` start cell, `N` near goal, `F` far goal, `W`
    /// detour waypoint; one `N`, one `F`, at most one `W`, at least one `S`.
    pub fn parse(layout: &str) -> Result<Map> {
        let lines: Vec<&str> = layout
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let rows = lines.len();
        let cols = lines.first().map(|l| l.chars().count()).unwrap_or(0);
        if rows < 3 || cols < 3 || lines.iter().any(|l| l.chars().count() != cols) {
            bail!("a navigation layout needs equal rows of at least 3 cells");
        }
        let mut walls = vec![false; rows * cols];
        let (mut start, mut near, mut far, mut waypoint) = (vec![], vec![], vec![], vec![]);
        for (r, l) in lines.iter().enumerate() {
            for (c, ch) in l.chars().enumerate() {
                match ch {
                    '#' => walls[r * cols + c] = true,
                    '.' => {}
                    'S' => start.push((r, c)),
                    'N' => near.push((r, c)),
                    'F' => far.push((r, c)),
                    'W' => waypoint.push((r, c)),
                    other => bail!("unknown layout cell `{other}` at row {r}, column {c}"),
                }
            }
        }
        if near.len() != 1 || far.len() != 1 || waypoint.len() > 1 || start.is_empty() {
            bail!(
                "a navigation layout needs one `N`, one `F`, at least one `S` and at most one \
                 `W` (found {}, {}, {}, {})",
                near.len(),
                far.len(),
                start.len(),
                waypoint.len()
            );
        }
        Ok(Map {
            rows,
            cols,
            walls,
            start,
            near: near[0],
            far: far[0],
            waypoint: waypoint.first().copied(),
        })
    }

    /// Whether cell (row, col) is a wall; everything outside the map is.
    pub fn is_wall(&self, r: i64, c: i64) -> bool {
        r < 0
            || c < 0
            || r as usize >= self.rows
            || c as usize >= self.cols
            || self.walls[r as usize * self.cols + c as usize]
    }

    pub fn is_open(&self, (r, c): (usize, usize)) -> bool {
        !self.is_wall(r as i64, c as i64)
    }

    pub fn goal_cell(&self, g: Goal) -> (usize, usize) {
        match g {
            Goal::Near => self.near,
            Goal::Far => self.far,
        }
    }

    /// A cell's centre in lattice units.
    fn centre_units((r, c): (usize, usize)) -> (i32, i32) {
        (
            c as i32 * LATTICE + LATTICE / 2,
            r as i32 * LATTICE + LATTICE / 2,
        )
    }

    /// A goal's centre in metres.
    pub fn goal_point(&self, g: Goal) -> (f32, f32) {
        let (r, c) = self.goal_cell(g);
        (c as f32 + 0.5, r as f32 + 0.5)
    }

    /// Whether the agent's disc fits at lattice point (gx, gy) without touching a wall.
    pub fn free(&self, gx: i32, gy: i32) -> bool {
        let l = LATTICE as i64;
        let (x, y) = (gx as i64, gy as i64);
        let (c, r) = (x.div_euclid(l), y.div_euclid(l));
        if self.is_wall(r, c) {
            return false;
        }
        let rad = RADIUS as f64 * LATTICE as f64;
        for dr in -1..=1 {
            for dc in -1..=1 {
                if self.is_wall(r + dr, c + dc) {
                    let (x0, y0) = ((c + dc) * l, (r + dr) * l);
                    let (qx, qy) = (x.clamp(x0, x0 + l), y.clamp(y0, y0 + l));
                    let d2 = (x - qx).pow(2) + (y - qy).pow(2);
                    if (d2 as f64) < rad * rad {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// The cell holding a pose.
    pub fn cell_of(&self, p: Pose) -> Option<(usize, usize)> {
        let (c, r) = (p.gx.div_euclid(LATTICE), p.gy.div_euclid(LATTICE));
        (r >= 0 && c >= 0 && self.is_open((r as usize, c as usize)))
            .then_some((r as usize, c as usize))
    }

    /// The open neighbour in direction `d` (0 east, 1 south, 2 west, 3 north).
    pub fn neighbour(&self, (r, c): (usize, usize), d: usize) -> Option<(usize, usize)> {
        let (dr, dc) = [(0i64, 1i64), (1, 0), (0, -1), (-1, 0)].get(d)?;
        let (nr, nc) = (r as i64 + dr, c as i64 + dc);
        (!self.is_wall(nr, nc)).then_some((nr as usize, nc as usize))
    }

    /// Junctions are where a macro-action stops: open cells with other than two open
    /// neighbours (crossings, dead ends, room cells) and goal cells. Corridor bends are not.
    pub fn is_junction(&self, cell: (usize, usize)) -> bool {
        self.is_open(cell)
            && ((0..4)
                .filter(|&d| self.neighbour(cell, d).is_some())
                .count()
                != 2
                || cell == self.near
                || cell == self.far)
    }
}

/// The pose graph: every (lattice point, heading) of every open cell, with forward edges
/// and their reverse (turn edges are implicit).
#[derive(Clone, Debug)]
struct Graph {
    rows: usize,
    cols: usize,
    open_index: Vec<u32>,
    cells: Vec<(usize, usize)>,
    /// Per lattice position: the disc fits there.
    free: Vec<bool>,
    /// Per lattice position: inside a goal's radius (episodes end there).
    terminal: Vec<bool>,
    fwd: Vec<u32>,
    pred_start: Vec<u32>,
    preds: Vec<u32>,
}

impl Graph {
    fn new(map: &Map) -> Graph {
        let mut open_index = vec![NONE; map.rows * map.cols];
        let mut cells = vec![];
        for r in 0..map.rows {
            for c in 0..map.cols {
                if map.is_open((r, c)) {
                    open_index[r * map.cols + c] = cells.len() as u32;
                    cells.push((r, c));
                }
            }
        }
        let mut g = Graph {
            rows: map.rows,
            cols: map.cols,
            open_index,
            cells,
            free: vec![],
            terminal: vec![],
            fwd: vec![],
            pred_start: vec![],
            preds: vec![],
        };
        let positions = g.cells.len() * L * L;
        let near = Map::centre_units(map.near);
        let far = Map::centre_units(map.far);
        g.free = (0..positions)
            .map(|p| {
                let q = g.pose(p * HEADINGS);
                map.free(q.gx, q.gy)
            })
            .collect();
        g.terminal = (0..positions)
            .map(|p| {
                let q = g.pose(p * HEADINGS);
                g.free[p]
                    && (within(q.gx, q.gy, near, GOAL_RADIUS)
                        || within(q.gx, q.gy, far, GOAL_RADIUS))
            })
            .collect();
        g.fwd = (0..g.len())
            .map(|n| {
                if !g.free[n / HEADINGS] {
                    return NONE;
                }
                let p = g.pose(n);
                let (mx, my) = MOVES[p.h()];
                let q = Pose {
                    gx: p.gx + mx,
                    gy: p.gy + my,
                    ..p
                };
                match map.free(q.gx, q.gy).then(|| g.node(q)).flatten() {
                    Some(m) => m as u32,
                    None => NONE,
                }
            })
            .collect();
        let mut count = vec![0u32; g.len() + 1];
        for &m in &g.fwd {
            if m != NONE {
                count[m as usize + 1] += 1;
            }
        }
        for i in 0..g.len() {
            count[i + 1] += count[i];
        }
        let mut fill = count.clone();
        let mut preds = vec![0u32; count[g.len()] as usize];
        for (n, &m) in g.fwd.iter().enumerate() {
            if m != NONE {
                preds[fill[m as usize] as usize] = n as u32;
                fill[m as usize] += 1;
            }
        }
        g.pred_start = count;
        g.preds = preds;
        g
    }

    fn len(&self) -> usize {
        self.cells.len() * PER_CELL
    }

    /// Index of a lattice position (no heading).
    fn position(&self, gx: i32, gy: i32) -> Option<usize> {
        let (c, r) = (gx.div_euclid(LATTICE), gy.div_euclid(LATTICE));
        if c < 0 || r < 0 || c as usize >= self.cols || r as usize >= self.rows {
            return None;
        }
        let o = self.open_index[r as usize * self.cols + c as usize];
        if o == NONE {
            return None;
        }
        let (sx, sy) = (
            gx.rem_euclid(LATTICE) as usize,
            gy.rem_euclid(LATTICE) as usize,
        );
        Some(o as usize * L * L + sy * L + sx)
    }

    fn node(&self, p: Pose) -> Option<usize> {
        Some(self.position(p.gx, p.gy)? * HEADINGS + p.h())
    }

    fn pose(&self, n: usize) -> Pose {
        let (o, rest) = (n / PER_CELL, n % PER_CELL);
        let (pos, h) = (rest / HEADINGS, rest % HEADINGS);
        let (sy, sx) = (pos / L, pos % L);
        let (r, c) = self.cells[o];
        Pose {
            gx: (c * L + sx) as i32,
            gy: (r * L + sy) as i32,
            heading: h as u8,
        }
    }

    fn turned(n: usize, action: usize) -> usize {
        let h = n % HEADINGS;
        let step = if action == LEFT { HEADINGS - 1 } else { 1 };
        n - h + (h + step) % HEADINGS
    }

    /// Fewest actions from every node to a free pose satisfying `target`, moving only
    /// through cells marked in `allowed` (by open-cell index) and never past a goal, where
    /// episodes end. `NONE` where no path exists.
    fn bfs(&self, target: impl Fn(Pose) -> bool, allowed: Option<&[bool]>) -> Vec<u32> {
        let mut cost = vec![NONE; self.len()];
        let mut queue = VecDeque::new();
        let ok = |n: usize| allowed.is_none_or(|a| a[n / PER_CELL]);
        for n in 0..self.len() {
            if self.free[n / HEADINGS] && ok(n) && target(self.pose(n)) {
                cost[n] = 0;
                queue.push_back(n);
            }
        }
        while let Some(n) = queue.pop_front() {
            let next = cost[n] + 1;
            let fwd = &self.preds[self.pred_start[n] as usize..self.pred_start[n + 1] as usize];
            let turns = [Self::turned(n, LEFT), Self::turned(n, RIGHT)];
            for m in turns.into_iter().chain(fwd.iter().map(|&m| m as usize)) {
                if cost[m] == NONE && ok(m) && !self.terminal[m / HEADINGS] {
                    cost[m] = next;
                    queue.push_back(m);
                }
            }
        }
        cost
    }

    /// The first action of a shortest path (forward, then left, then right on ties), or
    /// `None` at the target or where it is unreachable.
    fn greedy(&self, cost: &[u32], n: usize) -> Option<usize> {
        let c = cost[n];
        if c == 0 || c == NONE {
            return None;
        }
        let succ = |a: usize| match a {
            FORWARD => self.fwd[n] as usize,
            _ => Self::turned(n, a),
        };
        [FORWARD, LEFT, RIGHT]
            .into_iter()
            .find(|&a| (a != FORWARD || self.fwd[n] != NONE) && cost[succ(a)] == c - 1)
    }

    /// Geodesic distance in metres from every lattice position to the disc of `radius`
    /// around `centre`, over free positions with 16-neighbour moves (within about 3% of
    /// the Euclidean shortest path).
    fn geodesic(&self, centre: (i32, i32), radius: f32) -> Vec<f32> {
        const OFFS: [(i32, i32); 16] = [
            (1, 0),
            (-1, 0),
            (0, 1),
            (0, -1),
            (1, 1),
            (1, -1),
            (-1, 1),
            (-1, -1),
            (2, 1),
            (2, -1),
            (-2, 1),
            (-2, -1),
            (1, 2),
            (1, -2),
            (-1, 2),
            (-1, -2),
        ];
        let n = self.free.len();
        let mut dist = vec![f32::INFINITY; n];
        let mut heap = BinaryHeap::new();
        for p in 0..n {
            let q = self.pose(p * HEADINGS);
            if self.free[p] && within(q.gx, q.gy, centre, radius) {
                dist[p] = 0.0;
                heap.push(Reverse((0u32, p as u32)));
            }
        }
        // Bits of non-negative floats order like the floats.
        while let Some(Reverse((bits, p))) = heap.pop() {
            let d = f32::from_bits(bits);
            let p = p as usize;
            if d > dist[p] {
                continue;
            }
            let q = self.pose(p * HEADINGS);
            for (ox, oy) in OFFS {
                let Some(m) = self.position(q.gx + ox, q.gy + oy) else {
                    continue;
                };
                if !self.free[m] {
                    continue;
                }
                let nd = d + ((ox * ox + oy * oy) as f32).sqrt() / LATTICE as f32;
                if nd < dist[m] {
                    dist[m] = nd;
                    heap.push(Reverse((nd.to_bits(), m as u32)));
                }
            }
        }
        dist
    }
}

/// The outcome of one action.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transition {
    pub pose: Pose,
    pub reward: f32,
    pub done: bool,
    pub goal: Option<Goal>,
    /// Distance moved in metres (0 for turns and blocked moves).
    pub moved: f64,
}

/// Episode types of the data mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// To G_far by the shortest path.
    Far,
    /// To G_near through the waypoint: the long way round the ring.
    Detour,
    /// To G_near by the shortest path.
    Direct,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Far, Kind::Detour, Kind::Direct];

    pub fn index(self) -> usize {
        match self {
            Kind::Far => 0,
            Kind::Detour => 1,
            Kind::Direct => 2,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct GenConfig {
    pub episodes: usize,
    /// Frame width and height in pixels.
    pub size: usize,
    /// Frames stacked along channels per observation.
    pub frames: usize,
    pub epsilon: f64,
    pub max_steps: usize,
    /// Shares of far, detour and direct episodes (normalised).
    pub mix: [f64; 3],
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            episodes: EPISODES,
            size: SIZE,
            frames: 1,
            epsilon: EPSILON,
            max_steps: MAX_STEPS,
            mix: MIX,
        }
    }
}

/// One generated episode: its type, where its transitions start, how many there are and
/// the goal it ended at (`None`: cut by the step limit).
#[derive(Clone, Debug, PartialEq)]
pub struct Episode {
    pub kind: Kind,
    pub start: usize,
    pub len: usize,
    pub goal: Option<Goal>,
}

/// Generated transitions with u8 frames (a quarter of the f32 dataset's memory) and the
/// poses behind them.
#[derive(Clone, Debug, PartialEq)]
pub struct NavData {
    /// `[3 * frames, size, size]`.
    pub obs_shape: Vec<usize>,
    pub observations: Vec<u8>,
    pub next_observations: Vec<u8>,
    pub rewards: Vec<f32>,
    pub terminals: Vec<bool>,
    pub timeouts: Vec<bool>,
    pub actions: Vec<i64>,
    pub poses: Vec<Pose>,
    pub next_poses: Vec<Pose>,
    pub episodes: Vec<Episode>,
}

impl NavData {
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// The transitions as a dataset; the frames stay u8 (pixel values 0..=255).
    pub fn to_dataset(&self) -> Dataset {
        Dataset {
            obs_shape: self.obs_shape.clone(),
            observations: self.observations.clone().into(),
            next_observations: self.next_observations.clone().into(),
            rewards: self.rewards.clone(),
            terminals: self.terminals.clone(),
            timeouts: Some(self.timeouts.clone()),
            actions: Some(Actions::Discrete(self.actions.clone())),
        }
    }

    fn infos(&self) -> Vec<f32> {
        let mut episode = vec![0usize; self.len()];
        let mut kind = vec![0usize; self.len()];
        for (e, ep) in self.episodes.iter().enumerate() {
            for i in ep.start..ep.start + ep.len {
                episode[i] = e;
                kind[i] = ep.kind.index();
            }
        }
        (0..self.len())
            .flat_map(|i| {
                let (p, q) = (self.poses[i], self.next_poses[i]);
                [
                    p.x(),
                    p.y(),
                    p.h() as f32,
                    q.x(),
                    q.y(),
                    q.h() as f32,
                    episode[i] as f32,
                    kind[i] as f32,
                ]
            })
            .collect()
    }

    /// The dataset's arrays, observations as u8, with poses in `infos`; consumes the data
    /// so the frames are moved, not copied.
    pub fn into_arrays(self) -> BTreeMap<String, RawArray> {
        let n = self.len();
        let mut shape = vec![n];
        shape.extend(&self.obs_shape);
        let mut m = BTreeMap::new();
        m.insert(
            "infos".into(),
            RawArray::from_f32(vec![n, 8], &self.infos()),
        );
        m.insert("rewards".into(), RawArray::from_f32(vec![n], &self.rewards));
        m.insert(
            "terminals".into(),
            RawArray::from_bool(vec![n], &self.terminals),
        );
        m.insert(
            "timeouts".into(),
            RawArray::from_bool(vec![n], &self.timeouts),
        );
        m.insert("actions".into(), RawArray::from_i64(vec![n], &self.actions));
        m.insert(
            "observations".into(),
            RawArray::from_u8(shape.clone(), self.observations),
        );
        m.insert(
            "next_observations".into(),
            RawArray::from_u8(shape, self.next_observations),
        );
        m
    }

    /// Writes `.npz` or `.safetensors` (by extension), observations as u8. This copies the
    /// frames; `into_arrays` with `data::write_arrays` does not.
    pub fn save(&self, path: &Path) -> Result<()> {
        write_arrays(path, &self.clone().into_arrays())
    }

    /// V* of every transition's first pose.
    pub fn optimal_values(&self, nav: &Nav) -> Vec<f64> {
        self.poses.iter().map(|&p| nav.optimal_value(p)).collect()
    }
}

/// Poses `(pose, next pose)` per transition from a dataset's `infos` array.
pub fn poses_from_infos(infos: &RawArray) -> Result<Vec<(Pose, Pose)>> {
    if infos.shape.len() != 2 || infos.shape[1] < 6 {
        bail!(
            "`infos` of shape {:?} holds no poses (expected [N, 8])",
            infos.shape
        );
    }
    let w = infos.shape[1];
    let v = infos.to_f32();
    v.chunks_exact(w)
        .enumerate()
        .map(|(i, r)| {
            let pose = |x: f32, y: f32, h: f32| {
                if !(x.is_finite() && y.is_finite() && h >= 0.0 && h < HEADINGS as f32) {
                    bail!("`infos` row {i} holds no valid pose ({x}, {y}, {h})");
                }
                Ok(Pose::from_xy(x, y, h as usize))
            };
            Ok((pose(r[0], r[1], r[2])?, pose(r[3], r[4], r[5])?))
        })
        .collect()
}

/// Poses of a saved navigation dataset, read from its `infos`.
pub fn load_poses(path: &Path) -> Result<Vec<(Pose, Pose)>> {
    let arrays = read_arrays(path)?;
    let infos = arrays
        .get("infos")
        .with_context(|| format!("{} has no `infos` array", path.display()))?;
    poses_from_infos(infos).with_context(|| format!("in {}", path.display()))
}

/// A macro-action: move to the next junction along one free direction.
#[derive(Clone, Debug, PartialEq)]
pub struct Macro {
    /// Direction of departure as a heading index (0 east, 3 south, 6 west, 9 north).
    pub heading: usize,
    /// Cells along the way, from the current one to the junction.
    pub cells: Vec<(usize, usize)>,
    pub actions: Vec<usize>,
    /// Pose at the end: within `ARRIVE_RADIUS` of the junction's centre, facing the way it
    /// arrived, or inside a goal's radius where the episode ends.
    pub end: Pose,
    pub goal: Option<Goal>,
    /// Metres moved.
    pub length: f64,
    /// The frame seen at `end`: the map is known, so this is the view the controller leads
    /// to.
    pub view: Vec<u8>,
}

/// Open cells and goal positions, for plots.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub rows: usize,
    pub cols: usize,
    /// Row-major, `rows * cols`.
    pub open: Vec<bool>,
    pub start: Vec<(usize, usize)>,
    /// Goal centres in metres (x, y).
    pub goals: Vec<(Goal, (f32, f32))>,
    pub waypoint: Option<(f32, f32)>,
}

/// The environment: a map, its pose graph and the exact distances to its goals.
#[derive(Clone, Debug)]
pub struct Nav {
    pub map: Map,
    pub gamma: f64,
    pub near_reward: f32,
    pub far_reward: f32,
    graph: Graph,
    to_near: Vec<u32>,
    to_far: Vec<u32>,
    to_waypoint: Option<Vec<u32>>,
    geo_near: Vec<f32>,
    geo_far: Vec<f32>,
}

impl Nav {
    /// Builds the pose graph and the distance tables (about 0.1 s for the default map).
    pub fn new(map: Map) -> Nav {
        let graph = Graph::new(&map);
        let near = Map::centre_units(map.near);
        let far = Map::centre_units(map.far);
        let to = |c: (i32, i32)| graph.bfs(|p| within(p.gx, p.gy, c, GOAL_RADIUS), None);
        let to_near = to(near);
        let to_far = to(far);
        let to_waypoint = map.waypoint.map(|w| to(Map::centre_units(w)));
        let geo_near = graph.geodesic(near, GOAL_RADIUS);
        let geo_far = graph.geodesic(far, GOAL_RADIUS);
        Nav {
            map,
            gamma: GAMMA,
            near_reward: 1.0,
            far_reward: 1.0,
            graph,
            to_near,
            to_far,
            to_waypoint,
            geo_near,
            geo_far,
        }
    }

    /// The default branching layout ([`BRANCHING`]).
    pub fn branching() -> Result<Nav> {
        Ok(Nav::new(Map::parse(BRANCHING)?))
    }

    pub fn reward(&self, g: Goal) -> f32 {
        match g {
            Goal::Near => self.near_reward,
            Goal::Far => self.far_reward,
        }
    }

    fn costs(&self, g: Goal) -> &[u32] {
        match g {
            Goal::Near => &self.to_near,
            Goal::Far => &self.to_far,
        }
    }

    /// The goal whose radius holds the pose, if any.
    pub fn goal_at(&self, p: Pose) -> Option<Goal> {
        [Goal::Near, Goal::Far].into_iter().find(|&g| {
            within(
                p.gx,
                p.gy,
                Map::centre_units(self.map.goal_cell(g)),
                GOAL_RADIUS,
            )
        })
    }

    /// Whether an agent can stand at the pose.
    pub fn is_free(&self, p: Pose) -> bool {
        self.map.free(p.gx, p.gy)
    }

    /// One action; `None` for an action index other than 0, 1, 2.
    pub fn step(&self, p: Pose, action: usize) -> Option<Transition> {
        let h = p.h();
        let (pose, moved) = match action {
            FORWARD => {
                let (mx, my) = MOVES[h];
                let q = Pose {
                    gx: p.gx + mx,
                    gy: p.gy + my,
                    heading: h as u8,
                };
                if self.map.free(q.gx, q.gy) {
                    let len = ((mx * mx + my * my) as f64).sqrt() / LATTICE as f64;
                    (q, len)
                } else {
                    (
                        Pose {
                            heading: h as u8,
                            ..p
                        },
                        0.0,
                    )
                }
            }
            LEFT | RIGHT => {
                let turn = if action == LEFT { HEADINGS - 1 } else { 1 };
                let heading = ((h + turn) % HEADINGS) as u8;
                (Pose { heading, ..p }, 0.0)
            }
            _ => return None,
        };
        let goal = self.goal_at(pose);
        Some(Transition {
            pose,
            reward: goal.map_or(0.0, |g| self.reward(g)),
            done: goal.is_some(),
            goal,
            moved,
        })
    }

    /// Fewest actions from the pose to the goal (`None`: the pose is not free or the goal
    /// is out of reach). 0 inside the goal's radius.
    pub fn steps_to(&self, p: Pose, g: Goal) -> Option<u32> {
        let n = self.graph.node(p)?;
        let c = self.costs(g)[n];
        (c != NONE).then_some(c)
    }

    /// The goal with the fewest actions to it (near on ties).
    pub fn nearest_goal(&self, p: Pose) -> Option<Goal> {
        let near = self.steps_to(p, Goal::Near);
        let far = self.steps_to(p, Goal::Far);
        match (near, far) {
            (Some(n), Some(f)) => Some(if f < n { Goal::Far } else { Goal::Near }),
            (Some(_), None) => Some(Goal::Near),
            (None, Some(_)) => Some(Goal::Far),
            (None, None) => None,
        }
    }

    /// V*(p) = max over goals of r_g * gamma^(d_g - 1); 0 at a goal and where no goal can
    /// be reached.
    pub fn optimal_value(&self, p: Pose) -> f64 {
        if self.goal_at(p).is_some() {
            return 0.0;
        }
        [Goal::Near, Goal::Far]
            .into_iter()
            .filter_map(|g| {
                let d = self.steps_to(p, g)?;
                Some(self.reward(g) as f64 * self.gamma.powi(d as i32 - 1))
            })
            .fold(0.0, f64::max)
    }

    fn follow(&self, cost: &[u32], start: Pose) -> Option<(Vec<usize>, Pose)> {
        let mut p = start;
        let mut actions = vec![];
        let budget = cost[self.graph.node(p)?];
        if budget == NONE {
            return None;
        }
        while let Some(a) = self.graph.greedy(cost, self.graph.node(p)?) {
            // The graph is the dynamics, so each action lowers the cost by one; the
            // budget only guards against a broken table.
            if actions.len() as u32 >= budget {
                return None;
            }
            p = self.step(p, a)?.pose;
            actions.push(a);
        }
        Some((actions, p))
    }

    /// A shortest action sequence from the pose to the goal (`None` for the nearest goal).
    pub fn plan(&self, p: Pose, goal: Option<Goal>) -> Option<Vec<usize>> {
        let g = match goal {
            Some(g) => g,
            None => self.nearest_goal(p)?,
        };
        Some(self.follow(self.costs(g), p)?.0)
    }

    /// The shortest way to within `GOAL_RADIUS` of the centre of cell `via`, then the
    /// shortest way from there to the goal.
    pub fn plan_via(&self, p: Pose, via: (usize, usize), goal: Goal) -> Option<Vec<usize>> {
        let computed;
        let to_via = match (&self.to_waypoint, self.map.waypoint) {
            (Some(t), Some(w)) if w == via => t,
            _ => {
                let c = Map::centre_units(via);
                computed = self.graph.bfs(|q| within(q.gx, q.gy, c, GOAL_RADIUS), None);
                &computed
            }
        };
        let (mut first, mid) = self.follow(to_via, p)?;
        first.extend(self.follow(self.costs(goal), mid)?.0);
        Some(first)
    }

    /// Geodesic distance in metres from the pose's position to the goal's radius.
    pub fn geodesic(&self, p: Pose, g: Goal) -> Option<f64> {
        let i = self.graph.position(p.gx, p.gy)?;
        let d = match g {
            Goal::Near => self.geo_near[i],
            Goal::Far => self.geo_far[i],
        };
        d.is_finite().then_some(d as f64)
    }

    /// The geodesic shortest path length to G_near, the reference length of SPL.
    pub fn geodesic_to_near(&self, p: Pose) -> Option<f64> {
        self.geodesic(p, Goal::Near)
    }

    /// A uniformly random free pose in the start cells.
    pub fn random_start(&self, rng: &mut impl Rng) -> Pose {
        loop {
            let (r, c) = self.map.start[rng.random_range(0..self.map.start.len())];
            let p = Pose {
                gx: (c * L) as i32 + rng.random_range(0..LATTICE),
                gy: (r * L) as i32 + rng.random_range(0..LATTICE),
                heading: rng.random_range(0..HEADINGS) as u8,
            };
            // Start cells lie away from goals, and most of a cell is free, so this ends
            // after a few draws.
            if self.is_free(p) && self.goal_at(p).is_none() {
                return p;
            }
        }
    }

    /// Open cells and goal positions, for plots.
    pub fn layout(&self) -> Layout {
        let m = &self.map;
        let centre = |(r, c): (usize, usize)| (c as f32 + 0.5, r as f32 + 0.5);
        Layout {
            rows: m.rows,
            cols: m.cols,
            open: (0..m.rows * m.cols)
                .map(|i| m.is_open((i / m.cols, i % m.cols)))
                .collect(),
            start: m.start.clone(),
            goals: vec![
                (Goal::Near, m.goal_point(Goal::Near)),
                (Goal::Far, m.goal_point(Goal::Far)),
            ],
            waypoint: m.waypoint.map(centre),
        }
    }

    /// The cells from `from` along direction `d` up to the next junction, and the direction
    /// of the last move.
    fn corridor(&self, from: (usize, usize), d: usize) -> Option<(Vec<(usize, usize)>, usize)> {
        let mut cells = vec![from];
        let mut cur = self.map.neighbour(from, d)?;
        let mut last = d;
        loop {
            cells.push(cur);
            if cur == from || self.map.is_junction(cur) || cells.len() > self.graph.cells.len() {
                break;
            }
            let back = (last + 2) % 4;
            let Some((nd, next)) = (0..4)
                .filter(|&k| k != back)
                .find_map(|k| self.map.neighbour(cur, k).map(|c| (k, c)))
            else {
                break;
            };
            last = nd;
            cur = next;
        }
        Some((cells, last))
    }

    /// The macro-actions available at the pose: one per open neighbouring cell, each moving
    /// along the corridor to the next junction (or into a goal). Empty at a goal.
    pub fn controllers(&self, p: Pose, renderer: &Renderer) -> Vec<Macro> {
        let Some(cell) = self.map.cell_of(p) else {
            return vec![];
        };
        if self.goal_at(p).is_some() || !self.is_free(p) {
            return vec![];
        }
        (0..4)
            .filter_map(|d| {
                let (cells, last) = self.corridor(cell, d)?;
                self.run_macro(p, d * 3, cells, last * 3, renderer)
            })
            .collect()
    }

    fn run_macro(
        &self,
        p: Pose,
        heading: usize,
        cells: Vec<(usize, usize)>,
        arrival: usize,
        renderer: &Renderer,
    ) -> Option<Macro> {
        let junction = *cells.last()?;
        let centre = Map::centre_units(junction);
        let mut allowed = vec![false; self.graph.cells.len()];
        for &(r, c) in &cells {
            allowed[self.graph.open_index[r * self.map.cols + c] as usize] = true;
        }
        let cost = self.graph.bfs(
            |q| {
                (q.h() == arrival && within(q.gx, q.gy, centre, ARRIVE_RADIUS))
                    || self.goal_at(q).is_some()
            },
            Some(&allowed),
        );
        let (actions, end) = self.follow(&cost, p)?;
        let mut length = 0.0;
        let mut q = p;
        for &a in &actions {
            let t = self.step(q, a)?;
            length += t.moved;
            q = t.pose;
        }
        Some(Macro {
            heading,
            cells,
            actions,
            end,
            goal: self.goal_at(end),
            length,
            view: renderer.render(&self.map, end),
        })
    }

    /// Rolls out the data-collection policy (see the module documentation).
    pub fn generate(&self, cfg: &GenConfig, seed: u64) -> Result<NavData> {
        validate(cfg)?;
        let waypoint = match (&self.to_waypoint, self.map.waypoint) {
            (Some(t), Some(w)) => Some((t, Map::centre_units(w))),
            _ if cfg.mix[1] > 0.0 => {
                bail!("detour episodes need a waypoint `W` in the layout")
            }
            _ => None,
        };
        let renderer = Renderer::new(cfg.size, cfg.size)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let counts = allocate(cfg.episodes, cfg.mix);
        let mut kinds: Vec<Kind> = Kind::ALL
            .iter()
            .flat_map(|&k| std::iter::repeat_n(k, counts[k.index()]))
            .collect();
        kinds.shuffle(&mut rng);

        let frame = renderer.frame_len();
        let obs_len = frame * cfg.frames;
        let mut d = NavData {
            obs_shape: vec![3 * cfg.frames, cfg.size, cfg.size],
            observations: vec![],
            next_observations: vec![],
            rewards: vec![],
            terminals: vec![],
            timeouts: vec![],
            actions: vec![],
            poses: vec![],
            next_poses: vec![],
            episodes: vec![],
        };
        let mut img = Vec::with_capacity(frame);
        for kind in kinds {
            let start = d.len();
            let mut p = self.random_start(&mut rng);
            let mut via = (kind == Kind::Detour).then_some(waypoint).flatten();
            let target = if kind == Kind::Far {
                &self.to_far
            } else {
                &self.to_near
            };
            renderer.render_into(&self.map, p, &mut img);
            let mut stack: Vec<u8> = img.repeat(cfg.frames);
            let mut goal = None;
            for t in 0..cfg.max_steps {
                if let Some((_, w)) = via {
                    if within(p.gx, p.gy, w, GOAL_RADIUS) {
                        via = None;
                    }
                }
                let cost = via.map_or(target, |(c, _)| c);
                let planned = self.graph.node(p).and_then(|n| self.graph.greedy(cost, n));
                let a = match planned {
                    Some(a) if rng.random::<f64>() >= cfg.epsilon => a,
                    _ => rng.random_range(0..NUM_ACTIONS),
                };
                let Some(tr) = self.step(p, a) else {
                    bail!("internal error: action {a} out of range");
                };
                renderer.render_into(&self.map, tr.pose, &mut img);
                d.observations.extend_from_slice(&stack);
                stack.drain(..frame);
                stack.extend_from_slice(&img);
                debug_assert_eq!(stack.len(), obs_len);
                d.next_observations.extend_from_slice(&stack);
                d.rewards.push(tr.reward);
                d.terminals.push(tr.done);
                d.timeouts.push(!tr.done && t + 1 == cfg.max_steps);
                d.actions.push(a as i64);
                d.poses.push(p);
                d.next_poses.push(tr.pose);
                p = tr.pose;
                if tr.done {
                    goal = tr.goal;
                    break;
                }
            }
            d.episodes.push(Episode {
                kind,
                start,
                len: d.len() - start,
                goal,
            });
        }
        Ok(d)
    }
}

fn validate(cfg: &GenConfig) -> Result<()> {
    if cfg.episodes == 0 {
        bail!("episodes must be at least 1");
    }
    if !(8..=1024).contains(&cfg.size) {
        bail!("frame size {} out of range (8..=1024 pixels)", cfg.size);
    }
    if !(1..=16).contains(&cfg.frames) {
        bail!("frames {} out of range (1..=16)", cfg.frames);
    }
    if !(0.0..=1.0).contains(&cfg.epsilon) {
        bail!("epsilon {} out of range [0, 1]", cfg.epsilon);
    }
    if cfg.max_steps == 0 {
        bail!("max_steps must be at least 1");
    }
    if cfg.mix.iter().any(|m| !m.is_finite() || *m < 0.0) || cfg.mix.iter().sum::<f64>() <= 0.0 {
        bail!(
            "mix {:?}: shares must be non-negative with a positive sum",
            cfg.mix
        );
    }
    Ok(())
}

/// Episodes per kind: the shares of `episodes`, rounded by largest remainders (kind order
/// on ties) so that the counts add up.
fn allocate(episodes: usize, mix: [f64; 3]) -> [usize; 3] {
    let total: f64 = mix.iter().sum();
    let exact = mix.map(|m| m / total * episodes as f64);
    let mut n = exact.map(|e| e.floor() as usize);
    let left = episodes.saturating_sub(n.iter().sum());
    let mut order = [0, 1, 2];
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    for &k in order.iter().take(left) {
        n[k] += 1;
    }
    n
}

/// The default navigation data: `episodes` episodes of the paper's protocol at `size` x
/// `size` pixels, as a dataset (u8 pixel values 0..=255). [`Nav::generate`] also gives
/// the poses.
pub fn generate(episodes: usize, seed: u64, size: usize) -> Result<Dataset> {
    let cfg = GenConfig {
        episodes,
        size,
        ..GenConfig::default()
    };
    Ok(Nav::branching()?.generate(&cfg, seed)?.to_dataset())
}

/// Success weighted by path length (Anderson et al. 2018): the mean over episodes of
/// S_i * l_i / max(p_i, l_i), with l the shortest path length and p the length taken.
pub fn spl(success: &[bool], shortest: &[f64], taken: &[f64]) -> Result<f64> {
    let n = success.len();
    if n == 0 || shortest.len() != n || taken.len() != n {
        bail!(
            "SPL needs equally many successes, shortest and taken lengths, at least one \
             (got {}, {}, {})",
            n,
            shortest.len(),
            taken.len()
        );
    }
    let mut sum = 0.0;
    for i in 0..n {
        let (l, p) = (shortest[i], taken[i]);
        if !(l.is_finite() && p.is_finite() && l >= 0.0 && p >= 0.0) {
            bail!("episode {i}: path lengths must be finite and non-negative ({l}, {p})");
        }
        if success[i] {
            sum += if l.max(p) == 0.0 { 1.0 } else { l / l.max(p) };
        }
    }
    Ok(sum / n as f64)
}

/// A deterministic first-person raycaster: walls one metre high with procedural textures
/// chosen per wall face, a checkered floor tinted per cell, a panelled ceiling, goal pillars
/// and floor discs, and distance fog. Output is RGB, channels first.
#[derive(Clone, Debug, PartialEq)]
pub struct Renderer {
    pub width: usize,
    pub height: usize,
    /// tan(fov / 2): half the width of the image plane at unit distance.
    half_width: f32,
}

/// Colours of wall textures; far enough from the goals' red and blue to keep the goals
/// unmistakable.
const PALETTE: [[f32; 3]; 8] = [
    [0.80, 0.62, 0.30],
    [0.55, 0.62, 0.30],
    [0.30, 0.62, 0.60],
    [0.58, 0.42, 0.68],
    [0.78, 0.70, 0.58],
    [0.35, 0.66, 0.40],
    [0.46, 0.52, 0.64],
    [0.85, 0.52, 0.62],
];
const FLOOR_TINTS: [[f32; 3]; 4] = [
    [1.0, 1.0, 1.0],
    [1.0, 0.92, 0.82],
    [0.86, 0.95, 1.0],
    [0.92, 1.0, 0.88],
];
const PILLAR: [[f32; 3]; 2] = [[0.92, 0.12, 0.10], [0.10, 0.30, 0.95]];
const GOAL_FLOOR: [[f32; 3]; 2] = [[0.95, 0.35, 0.30], [0.30, 0.45, 0.98]];

fn hash3(a: i64, b: i64, c: i64) -> u32 {
    let mut h = (a as u32).wrapping_mul(0x9E37_79B1)
        ^ (b as u32).wrapping_mul(0x85EB_CA77)
        ^ (c as u32).wrapping_mul(0xC2B2_AE3D);
    h ^= h >> 15;
    h = h.wrapping_mul(0x2C1B_3C6D);
    h ^= h >> 12;
    h = h.wrapping_mul(0x297A_2D39);
    h ^ (h >> 15)
}

fn scale(c: [f32; 3], k: f32) -> [f32; 3] {
    c.map(|v| v * k)
}

fn wall_texture(tex: u32, u: f32, v: f32) -> [f32; 3] {
    let base = PALETTE[(tex >> 2) as usize % PALETTE.len()];
    let alt = PALETTE[(tex >> 5) as usize % PALETTE.len()];
    match tex & 3 {
        0 => {
            // Bricks: four courses, every other one shifted by a quarter.
            let course = (v * 4.0).floor() as i64;
            let shift = if course & 1 == 1 { 0.25 } else { 0.0 };
            let (bu, bv) = ((u * 2.0 + shift).fract(), (v * 4.0).fract());
            if bu < 0.05 || bv < 0.1 {
                scale(base, 0.45)
            } else {
                base
            }
        }
        1 => {
            let k = 3 + (tex >> 8) % 3;
            if ((u * k as f32 * 2.0) as i64) & 1 == 0 {
                base
            } else {
                scale(base, 0.6)
            }
        }
        2 => {
            if (0.35..0.6).contains(&v) {
                alt
            } else {
                base
            }
        }
        _ => {
            if !(0.08..=0.92).contains(&u) || !(0.08..=0.92).contains(&v) {
                scale(base, 0.5)
            } else if (u - 0.5).abs() + (v - 0.5).abs() < 0.25 {
                alt
            } else {
                base
            }
        }
    }
}

struct Hit {
    t: f32,
    u: f32,
    tex: u32,
    /// Faces along x are darker, which makes corners readable.
    dark: bool,
}

/// Walks the grid along the ray (DDA) to the first wall. `t` is the distance along the view
/// direction, as the ray's component along it is 1.
fn cast(map: &Map, px: f32, py: f32, rdx: f32, rdy: f32) -> Hit {
    let (mut mx, mut my) = (px.floor() as i64, py.floor() as i64);
    let delta = |r: f32| {
        if r == 0.0 {
            f32::INFINITY
        } else {
            (1.0 / r).abs()
        }
    };
    let (ddx, ddy) = (delta(rdx), delta(rdy));
    let (sx, mut side_x) = if rdx == 0.0 {
        (0, f32::INFINITY)
    } else if rdx < 0.0 {
        (-1, (px - mx as f32) * ddx)
    } else {
        (1, (mx as f32 + 1.0 - px) * ddx)
    };
    let (sy, mut side_y) = if rdy == 0.0 {
        (0, f32::INFINITY)
    } else if rdy < 0.0 {
        (-1, (py - my as f32) * ddy)
    } else {
        (1, (my as f32 + 1.0 - py) * ddy)
    };
    let mut vertical = true;
    for _ in 0..2 * (map.rows + map.cols + 2) {
        if side_x < side_y {
            side_x += ddx;
            mx += sx;
            vertical = true;
        } else {
            side_y += ddy;
            my += sy;
            vertical = false;
        }
        if map.is_wall(my, mx) {
            break;
        }
    }
    let t = if vertical { side_x - ddx } else { side_y - ddy }.max(1e-3);
    let (hx, hy) = (px + t * rdx, py + t * rdy);
    let (u, face) = if vertical {
        let f = hy - hy.floor();
        if sx > 0 {
            (f, 0)
        } else {
            (1.0 - f, 1)
        }
    } else {
        let f = hx - hx.floor();
        if sy > 0 {
            (1.0 - f, 2)
        } else {
            (f, 3)
        }
    };
    Hit {
        t,
        u,
        tex: hash3(mx, my, face),
        dark: !vertical,
    }
}

fn fog(t: f32) -> f32 {
    1.0 / (1.0 + 0.1 * t)
}

fn floor_colour(map: &Map, x: f32, y: f32) -> [f32; 3] {
    for (i, g) in [Goal::Near, Goal::Far].into_iter().enumerate() {
        let (gx, gy) = map.goal_point(g);
        if (x - gx).powi(2) + (y - gy).powi(2) <= GOAL_RADIUS * GOAL_RADIUS {
            return GOAL_FLOOR[i];
        }
    }
    let tint = FLOOR_TINTS[hash3(x.floor() as i64, y.floor() as i64, 7) as usize % 4];
    let checker = ((x * 2.0).floor() as i64 + (y * 2.0).floor() as i64) & 1;
    scale(tint, if checker == 0 { 0.62 } else { 0.48 })
}

fn ceiling_colour(x: f32, y: f32) -> [f32; 3] {
    let (fx, fy) = (x - x.floor(), y - y.floor());
    if fx < 0.04 || fy < 0.04 {
        [0.55, 0.55, 0.52]
    } else {
        [0.85, 0.85, 0.80]
    }
}

struct PillarHit {
    goal: usize,
    t: f32,
    top: f32,
    bottom: f32,
    shade: f32,
}

impl Renderer {
    /// A renderer with a 90 degree horizontal field of view.
    pub fn new(width: usize, height: usize) -> Result<Renderer> {
        Self::with_fov(width, height, 90.0)
    }

    pub fn with_fov(width: usize, height: usize, fov_deg: f64) -> Result<Renderer> {
        if !(1..=4096).contains(&width) || !(1..=4096).contains(&height) {
            bail!("frame size {width}x{height} out of range (1..=4096 pixels a side)");
        }
        if !(fov_deg > 0.0 && fov_deg < 180.0) {
            bail!("field of view {fov_deg} degrees out of range (0, 180)");
        }
        // tan(45 degrees) computed numerically is not exactly 1 everywhere; the default
        // stays exact so that frames are the same bits on every platform.
        let half_width = if fov_deg == 90.0 {
            1.0
        } else {
            (fov_deg.to_radians() / 2.0).tan() as f32
        };
        Ok(Renderer {
            width,
            height,
            half_width,
        })
    }

    /// Bytes in one frame: 3 * height * width.
    pub fn frame_len(&self) -> usize {
        3 * self.width * self.height
    }

    /// The view from a pose, `[3, height, width]` u8.
    pub fn render(&self, map: &Map, pose: Pose) -> Vec<u8> {
        let mut out = Vec::new();
        self.render_into(map, pose, &mut out);
        out
    }

    /// `render` into a reused buffer (resized to `frame_len`).
    pub fn render_into(&self, map: &Map, pose: Pose, out: &mut Vec<u8>) {
        let (w, h) = (self.width, self.height);
        out.clear();
        out.resize(self.frame_len(), 0);
        let (px, py) = (pose.x(), pose.y());
        let (dx, dy) = DIRS[pose.h()];
        let (rx, ry) = DIRS[(pose.h() + 3) % HEADINGS];
        let focal = w as f32 / 2.0 / self.half_width;
        let horizon = h as f32 / 2.0;
        let goals = [map.goal_point(Goal::Near), map.goal_point(Goal::Far)];
        let plane = w * h;
        for i in 0..w {
            let cx = ((2 * i + 1) as f32 / w as f32 - 1.0) * self.half_width;
            let (rdx, rdy) = (dx + rx * cx, dy + ry * cx);
            let hit = cast(map, px, py, rdx, rdy);
            let wall_top = horizon - focal * (WALL_HEIGHT - EYE) / hit.t;
            let wall_bottom = horizon + focal * EYE / hit.t;
            let wall_shade = fog(hit.t) * if hit.dark { 0.8 } else { 1.0 };
            let a = rdx * rdx + rdy * rdy;
            let mut pillar: Option<PillarHit> = None;
            for (k, &(gx, gy)) in goals.iter().enumerate() {
                let (ox, oy) = (px - gx, py - gy);
                let b = rdx * ox + rdy * oy;
                let c = ox * ox + oy * oy - PILLAR_RADIUS * PILLAR_RADIUS;
                let disc = b * b - a * c;
                if c <= 0.0 || disc < 0.0 {
                    continue;
                }
                let t = (-b - disc.sqrt()) / a;
                if t <= 0.0 || t >= hit.t || pillar.as_ref().is_some_and(|p| p.t <= t) {
                    continue;
                }
                let (nx, ny) = (
                    (ox + t * rdx) / PILLAR_RADIUS,
                    (oy + t * rdy) / PILLAR_RADIUS,
                );
                let lambert = (-(nx * rdx + ny * rdy) / a.sqrt()).max(0.0);
                pillar = Some(PillarHit {
                    goal: k,
                    t,
                    top: horizon - focal * (PILLAR_HEIGHT - EYE) / t,
                    bottom: horizon + focal * EYE / t,
                    shade: fog(t) * (0.45 + 0.55 * lambert),
                });
            }
            for j in 0..h {
                let yc = j as f32 + 0.5;
                let colour = match &pillar {
                    Some(p) if yc >= p.top && yc < p.bottom => {
                        let v = (yc - p.top) / (p.bottom - p.top);
                        let base = if (0.1..0.2).contains(&v) {
                            [0.95, 0.95, 0.95]
                        } else {
                            PILLAR[p.goal]
                        };
                        scale(base, p.shade)
                    }
                    _ if yc >= wall_top && yc < wall_bottom => {
                        let v = (yc - wall_top) / (wall_bottom - wall_top);
                        scale(wall_texture(hit.tex, hit.u, v), wall_shade)
                    }
                    _ if yc > horizon => {
                        let t = focal * EYE / (yc - horizon);
                        scale(floor_colour(map, px + t * rdx, py + t * rdy), fog(t))
                    }
                    _ => {
                        let t = focal * (WALL_HEIGHT - EYE) / (horizon - yc).max(1e-3);
                        scale(ceiling_colour(px + t * rdx, py + t * rdy), fog(t))
                    }
                };
                for (ch, v) in colour.iter().enumerate() {
                    out[ch * plane + j * w + i] = (v * 255.0).round().clamp(0.0, 255.0) as u8;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A ring round one block: S top left, N top right, F bottom middle.
    const SMALL: &str = "\
#######
#S...N#
#.###.#
#..F..#
#######";

    fn random_free(nav: &Nav, rng: &mut impl Rng) -> Pose {
        let lay = nav.layout();
        let open: Vec<usize> = (0..lay.open.len()).filter(|&i| lay.open[i]).collect();
        loop {
            let i = open[rng.random_range(0..open.len())];
            let (r, c) = (i / lay.cols, i % lay.cols);
            let p = Pose {
                gx: (c * L) as i32 + rng.random_range(0..LATTICE),
                gy: (r * L) as i32 + rng.random_range(0..LATTICE),
                heading: rng.random_range(0..HEADINGS) as u8,
            };
            if nav.is_free(p) && nav.goal_at(p).is_none() {
                return p;
            }
        }
    }

    fn forward_bfs(nav: &Nav, start: Pose, goal: Goal) -> Option<usize> {
        let mut seen = HashSet::from([start]);
        let mut frontier = vec![start];
        let mut d = 0;
        while !frontier.is_empty() {
            d += 1;
            let mut next = vec![];
            for p in frontier {
                for a in 0..NUM_ACTIONS {
                    let t = nav.step(p, a).unwrap();
                    if t.done {
                        if t.goal == Some(goal) {
                            return Some(d);
                        }
                    } else if seen.insert(t.pose) {
                        next.push(t.pose);
                    }
                }
            }
            frontier = next;
        }
        None
    }

    fn count(img: &[u8], n: usize, pred: impl Fn(f32, f32, f32) -> bool) -> usize {
        (0..n)
            .filter(|&i| pred(img[i] as f32, img[n + i] as f32, img[2 * n + i] as f32))
            .count()
    }

    fn red(r: f32, g: f32, b: f32) -> bool {
        r > 60.0 && r > 2.0 * g && r > 2.0 * b
    }

    #[test]
    fn nav_layout_parses_and_moves_follow_the_headings() {
        let nav = Nav::branching().unwrap();
        let m = &nav.map;
        assert_eq!((m.rows, m.cols), (10, 17));
        assert_eq!((m.near, m.far, m.waypoint), ((3, 1), (8, 15), Some((1, 8))));
        assert_eq!(m.start.len(), 9);
        let lay = nav.layout();
        assert_eq!(
            lay.open.iter().filter(|&&o| o).count(),
            nav.graph.cells.len()
        );
        assert_eq!(lay.goals[0], (Goal::Near, (1.5, 3.5)));
        assert!(Map::parse("#####\n#S.N#\n#####").is_err());
        assert!(Map::parse("#####\n#SxNF#\n#####").is_err());
        assert!(Map::parse(SMALL).is_ok());
        for h in 0..HEADINGS {
            let (dx, dy) = DIRS[h];
            assert_eq!(
                MOVES[h],
                ((8.0 * dx).round() as i32, (8.0 * dy).round() as i32)
            );
            let len = ((MOVES[h].0.pow(2) + MOVES[h].1.pow(2)) as f32).sqrt() / 32.0;
            assert!((len - STEP).abs() < 0.01, "{h}: {len}");
        }
    }

    #[test]
    fn nav_turns_cycle_and_walls_block() {
        let nav = Nav::branching().unwrap();
        let p = Pose::from_xy(2.5, 5.5, 0);
        for a in [LEFT, RIGHT] {
            let mut q = p;
            let mut seen = HashSet::new();
            for _ in 0..HEADINGS {
                q = nav.step(q, a).unwrap().pose;
                seen.insert(q.heading);
            }
            assert_eq!((q, seen.len()), (p, HEADINGS));
        }
        let q = nav
            .step(nav.step(p, LEFT).unwrap().pose, RIGHT)
            .unwrap()
            .pose;
        assert_eq!(q, p);
        assert!(nav.step(p, 3).is_none());
        // Facing north into the wall above row 5: the first move fits (0.5 m to the wall,
        // radius 0.2), then the wall stops the agent.
        let mut q = Pose::from_xy(2.5, 5.5, 9);
        let mut moved = vec![];
        for _ in 0..6 {
            let t = nav.step(q, FORWARD).unwrap();
            moved.push(t.moved);
            q = t.pose;
            assert!(q.y() - RADIUS >= 5.0 && nav.is_free(q), "{q:?}");
        }
        assert_eq!(moved[0], 0.25);
        assert!(moved[1..].iter().all(|&m| m == 0.0), "{moved:?}");
        // Moving east along the corridor is not blocked.
        let t = nav.step(Pose::from_xy(2.5, 5.5, 0), FORWARD).unwrap();
        assert_eq!((t.moved, t.pose.x()), (0.25, 2.75));
    }

    #[test]
    fn nav_rendering_is_deterministic_and_depends_on_the_pose() {
        let nav = Nav::branching().unwrap();
        let r = Renderer::new(32, 32).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let poses: Vec<Pose> = (0..40).map(|_| random_free(&nav, &mut rng)).collect();
        let imgs: Vec<Vec<u8>> = poses.iter().map(|&p| r.render(&nav.map, p)).collect();
        for (p, img) in poses.iter().zip(&imgs) {
            assert_eq!(img.len(), 3 * 32 * 32);
            assert_eq!(&r.render(&nav.map, *p), img);
        }
        for i in 0..imgs.len() {
            for j in 0..i {
                if poses[i] != poses[j] {
                    let diff: f64 = imgs[i]
                        .iter()
                        .zip(&imgs[j])
                        .map(|(&a, &b)| (a as f64 - b as f64).abs())
                        .sum::<f64>()
                        / imgs[i].len() as f64;
                    assert!(diff > 1.0, "{:?} vs {:?}: {diff}", poses[i], poses[j]);
                }
            }
        }
        // One step changes the view; so does one turn.
        let p = Pose::from_xy(5.5, 6.5, 0);
        let a = r.render(&nav.map, p);
        for act in [FORWARD, LEFT] {
            let q = nav.step(p, act).unwrap().pose;
            assert_ne!(r.render(&nav.map, q), a);
        }
        assert!(Renderer::new(0, 8).is_err());
        assert!(Renderer::with_fov(8, 8, 180.0).is_err());
        let wide = Renderer::with_fov(32, 32, 120.0).unwrap();
        assert_ne!(wide.render(&nav.map, p), r.render(&nav.map, p));
    }

    #[test]
    fn nav_goals_are_visible() {
        let nav = Nav::branching().unwrap();
        let r = Renderer::new(32, 32).unwrap();
        let n = 32 * 32;
        // Looking down column 1 at G_near, 2 m away, then away from it.
        let toward = r.render(&nav.map, Pose::from_xy(1.5, 1.5, 3));
        let away = r.render(&nav.map, Pose::from_xy(1.5, 1.5, 9));
        assert!(count(&toward, n, red) > 10, "{}", count(&toward, n, red));
        assert_eq!(count(&away, n, red), 0);
        let blue = |r: f32, g: f32, b: f32| b > 60.0 && b > 2.0 * r && b > 1.5 * g;
        let far = r.render(&nav.map, Pose::from_xy(15.5, 5.5, 3));
        assert!(count(&far, n, blue) > 10);
        assert_eq!(count(&far, n, red), 0);
        assert_eq!(count(&toward, n, blue), 0);
    }

    #[test]
    fn nav_planner_is_optimal_on_a_small_map() {
        let nav = Nav::new(Map::parse(SMALL).unwrap());
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for _ in 0..6 {
            let p = random_free(&nav, &mut rng);
            for g in [Goal::Near, Goal::Far] {
                let plan = nav.plan(p, Some(g)).unwrap();
                let bfs = forward_bfs(&nav, p, g).unwrap();
                assert_eq!(plan.len(), bfs, "{p:?} to {g:?}");
                assert_eq!(nav.steps_to(p, g), Some(bfs as u32));
                let mut q = p;
                for (k, &a) in plan.iter().enumerate() {
                    let t = nav.step(q, a).unwrap();
                    assert_eq!(t.done, k + 1 == plan.len());
                    q = t.pose;
                }
                assert_eq!(nav.goal_at(q), Some(g));
            }
            let nearest = nav.plan(p, None).unwrap();
            let best = nav
                .steps_to(p, Goal::Near)
                .min(nav.steps_to(p, Goal::Far))
                .unwrap();
            assert_eq!(nearest.len() as u32, best);
        }
        // A straight corridor: 2 m to the goal's centre, facing it.
        let big = Nav::branching().unwrap();
        let p = Pose::from_xy(1.5, 1.5, 3);
        let want = ((2.0 - GOAL_RADIUS) / STEP).ceil() as usize;
        assert_eq!(big.plan(p, Some(Goal::Near)).unwrap(), vec![FORWARD; want]);
        assert!(nav.plan(Pose::from_xy(0.5, 0.5, 0), None).is_none());
    }

    #[test]
    fn nav_detour_plan_goes_round_the_ring() {
        let nav = Nav::branching().unwrap();
        let p = Pose::from_xy(5.5, 6.5, 0);
        let w = nav.map.waypoint.unwrap();
        let direct = nav.plan(p, Some(Goal::Near)).unwrap();
        let detour = nav.plan_via(p, w, Goal::Near).unwrap();
        assert!(
            detour.len() > 2 * direct.len(),
            "{} {}",
            detour.len(),
            direct.len()
        );
        let mut q = p;
        let mut passed = false;
        let mut east = false;
        for &a in &detour {
            q = nav.step(q, a).unwrap().pose;
            passed |= within(q.gx, q.gy, Map::centre_units(w), GOAL_RADIUS);
            east |= q.x() > 9.0;
        }
        assert!(passed && east && nav.goal_at(q) == Some(Goal::Near));
        // The same waypoint given by a cell the cache does not hold: same plan length.
        let other = Nav::new(Map::parse(&BRANCHING.replace('W', ".")).unwrap());
        assert_eq!(
            other.plan_via(p, w, Goal::Near).unwrap().len(),
            detour.len()
        );
    }

    #[test]
    fn nav_optimal_value_prefers_the_near_goal() {
        let nav = Nav::branching().unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for _ in 0..50 {
            let p = nav.random_start(&mut rng);
            let (dn, df) = (
                nav.steps_to(p, Goal::Near).unwrap(),
                nav.steps_to(p, Goal::Far).unwrap(),
            );
            assert!(dn < df, "{p:?}: {dn} {df}");
            assert_eq!(nav.optimal_value(p), GAMMA.powi(dn as i32 - 1));
        }
        // Along the shortest path to G_near the value rises at every step.
        let mut p = nav.random_start(&mut rng);
        let mut v = nav.optimal_value(p);
        for a in nav.plan(p, Some(Goal::Near)).unwrap() {
            let t = nav.step(p, a).unwrap();
            if t.done {
                break;
            }
            p = t.pose;
            let nv = nav.optimal_value(p);
            assert!(nv > v, "{p:?}");
            v = nv;
        }
        // Bellman optimality everywhere.
        for _ in 0..300 {
            let p = random_free(&nav, &mut rng);
            let best = (0..NUM_ACTIONS)
                .map(|a| {
                    let t = nav.step(p, a).unwrap();
                    let next = if t.done {
                        0.0
                    } else {
                        nav.optimal_value(t.pose)
                    };
                    t.reward as f64 + GAMMA * next
                })
                .fold(f64::MIN, f64::max);
            assert!((best - nav.optimal_value(p)).abs() < 1e-12, "{p:?}");
        }
        // Near the far goal, the far goal is the nearer one.
        let p = Pose::from_xy(15.5, 6.5, 3);
        assert_eq!(nav.nearest_goal(p), Some(Goal::Far));
        assert_eq!(nav.optimal_value(Pose::from_xy(1.5, 3.5, 0)), 0.0);
    }

    #[test]
    fn nav_data_follow_the_mix_and_end_at_goals() {
        let nav = Nav::branching().unwrap();
        let cfg = GenConfig {
            episodes: 200,
            size: 16,
            ..GenConfig::default()
        };
        let d = nav.generate(&cfg, 11).unwrap();
        assert_eq!(d.episodes.len(), 200);
        let kinds = |k: Kind| d.episodes.iter().filter(|e| e.kind == k).count();
        assert_eq!(
            (kinds(Kind::Far), kinds(Kind::Detour), kinds(Kind::Direct)),
            (100, 99, 1)
        );
        let ended = |k: Kind, g: Goal| {
            d.episodes
                .iter()
                .filter(|e| e.kind == k && e.goal == Some(g))
                .count()
        };
        assert!(
            ended(Kind::Far, Goal::Far) >= 95,
            "{}",
            ended(Kind::Far, Goal::Far)
        );
        assert!(ended(Kind::Detour, Goal::Near) >= 94);
        assert_eq!(ended(Kind::Direct, Goal::Near), 1);
        let frame = 3 * 16 * 16;
        assert_eq!(d.obs_shape, vec![3, 16, 16]);
        assert_eq!(d.observations.len(), d.len() * frame);
        let r = Renderer::new(16, 16).unwrap();
        let w = Map::centre_units(nav.map.waypoint.unwrap());
        let mut start = 0;
        for e in &d.episodes {
            assert_eq!(e.start, start);
            start += e.len;
            let last = e.start + e.len - 1;
            for i in e.start..=last {
                let t = nav.step(d.poses[i], d.actions[i] as usize).unwrap();
                assert_eq!(t.pose, d.next_poses[i]);
                assert_eq!((t.reward, t.done), (d.rewards[i], d.terminals[i]));
                assert_eq!(d.terminals[i], i == last && e.goal.is_some());
                assert_eq!(d.timeouts[i], i == last && e.goal.is_none());
                if i > e.start {
                    assert_eq!(d.poses[i], d.next_poses[i - 1]);
                }
            }
            assert!(e.len <= MAX_STEPS);
            assert_eq!(e.goal.is_none(), e.len == MAX_STEPS);
            assert_eq!(nav.goal_at(d.next_poses[last]), e.goal);
            assert!(nav
                .map
                .start
                .contains(&nav.map.cell_of(d.poses[e.start]).unwrap()));
            if e.kind == Kind::Detour && e.goal == Some(Goal::Near) {
                let passed =
                    (e.start..=last).any(|i| within(d.poses[i].gx, d.poses[i].gy, w, GOAL_RADIUS));
                assert!(passed);
            }
            // Frames are the views of the poses.
            for i in [e.start, last] {
                assert_eq!(
                    &d.observations[i * frame..(i + 1) * frame],
                    &r.render(&nav.map, d.poses[i])[..]
                );
                assert_eq!(
                    &d.next_observations[i * frame..(i + 1) * frame],
                    &r.render(&nav.map, d.next_poses[i])[..]
                );
            }
        }
        assert_eq!(start, d.len());
        // Mostly east: the data rarely show the short way west.
        let west = d.poses.iter().filter(|p| p.x() < 4.0).count();
        let east = d.poses.iter().filter(|p| p.x() > 7.0).count();
        assert!(east > 5 * west, "{east} {west}");
    }

    #[test]
    fn nav_data_roundtrip_stack_and_determinism() {
        let nav = Nav::branching().unwrap();
        let cfg = GenConfig {
            episodes: 4,
            size: 8,
            frames: 2,
            ..GenConfig::default()
        };
        let d = nav.generate(&cfg, 2).unwrap();
        assert_eq!(d, nav.generate(&cfg, 2).unwrap());
        assert_ne!(d, nav.generate(&cfg, 3).unwrap());
        assert_eq!(d.obs_shape, vec![6, 8, 8]);
        let frame = 3 * 8 * 8;
        for e in &d.episodes {
            let s = e.start * 2 * frame;
            // The first observation repeats the first frame.
            assert_eq!(
                d.observations[s..s + frame],
                d.observations[s + frame..s + 2 * frame]
            );
            for i in e.start..e.start + e.len {
                let (o, n) = (i * 2 * frame, i * 2 * frame);
                assert_eq!(
                    d.next_observations[n..n + frame],
                    d.observations[o + frame..o + 2 * frame]
                );
            }
        }
        let ds = d.to_dataset();
        assert_eq!(ds.obs_dim(), 2 * frame);
        assert_eq!(ds.observations[5], d.observations[5] as f32);
        let dir = tempfile::tempdir().unwrap();
        for name in ["n.npz", "n.safetensors"] {
            let p = dir.path().join(name);
            d.save(&p).unwrap();
            let arrays = read_arrays(&p).unwrap();
            assert_eq!(arrays["observations"].dtype, crate::data::DType::U8);
            assert_eq!(Dataset::load(&p).unwrap(), ds);
            let poses = load_poses(&p).unwrap();
            assert_eq!(poses.len(), d.len());
            assert!(poses
                .iter()
                .zip(d.poses.iter().zip(&d.next_poses))
                .all(|(a, (p, q))| a == &(*p, *q)));
        }
        let bad = RawArray::from_f32(vec![1, 6], &[1.0, 1.0, 12.0, 1.0, 1.0, 0.0]);
        assert!(poses_from_infos(&bad).is_err());
        let small = generate(2, 1, 8).unwrap();
        assert_eq!(small.obs_shape, vec![3, 8, 8]);
        assert!(generate(2, 1, 4).is_err());
        for bad in [
            GenConfig {
                episodes: 0,
                ..cfg.clone()
            },
            GenConfig {
                frames: 0,
                ..cfg.clone()
            },
            GenConfig {
                epsilon: 1.5,
                ..cfg.clone()
            },
            GenConfig {
                mix: [0.0, 0.0, 0.0],
                ..cfg.clone()
            },
            GenConfig {
                mix: [0.5, f64::NAN, 0.5],
                ..cfg.clone()
            },
        ] {
            assert!(nav.generate(&bad, 0).is_err(), "{bad:?}");
        }
        let no_w = Nav::new(Map::parse(&BRANCHING.replace('W', ".")).unwrap());
        assert!(no_w.generate(&cfg, 0).is_err());
        let far_only = GenConfig {
            mix: [1.0, 0.0, 0.0],
            ..cfg
        };
        assert!(no_w.generate(&far_only, 0).is_ok());
        assert_eq!(allocate(1000, MIX), [500, 495, 5]);
        assert_eq!(allocate(7, [1.0, 1.0, 1.0]), [3, 2, 2]);
    }

    #[test]
    fn nav_controllers_end_at_junctions() {
        let nav = Nav::branching().unwrap();
        let r = Renderer::new(16, 16).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut seen_goal = false;
        for _ in 0..60 {
            let p = random_free(&nav, &mut rng);
            let cell = nav.map.cell_of(p).unwrap();
            let ms = nav.controllers(p, &r);
            let exits = (0..4)
                .filter(|&d| nav.map.neighbour(cell, d).is_some())
                .count();
            assert_eq!(ms.len(), exits, "{p:?}");
            for m in &ms {
                match m.goal {
                    Some(g) => {
                        seen_goal = true;
                        assert_eq!(nav.goal_at(m.end), Some(g));
                        assert_eq!(*m.cells.last().unwrap(), nav.map.goal_cell(g));
                    }
                    None => {
                        assert_eq!(nav.map.cell_of(m.end), m.cells.last().copied());
                        let j = *m.cells.last().unwrap();
                        assert!(nav.map.is_junction(j), "{j:?}");
                        assert!(within(
                            m.end.gx,
                            m.end.gy,
                            Map::centre_units(j),
                            ARRIVE_RADIUS
                        ));
                        let dir = m.cells[m.cells.len() - 1];
                        let prev = m.cells[m.cells.len() - 2];
                        let arrive = (0..4).find(|&d| nav.map.neighbour(prev, d) == Some(dir));
                        assert_eq!(Some(m.end.h()), arrive.map(|d| d * 3));
                    }
                }
                // Intermediate cells are corridor cells.
                for c in &m.cells[1..m.cells.len() - 1] {
                    assert!(!nav.map.is_junction(*c));
                }
                let mut q = p;
                let mut length = 0.0;
                for &a in &m.actions {
                    let t = nav.step(q, a).unwrap();
                    length += t.moved;
                    q = t.pose;
                }
                assert_eq!((q, length), (m.end, m.length));
                assert_eq!(m.view, r.render(&nav.map, m.end));
            }
        }
        assert!(seen_goal);
        // In a corridor cell two ways lead on; at the T junction (5, 9) three.
        let corridor = Pose::from_xy(9.5, 3.5, 0);
        assert_eq!(nav.controllers(corridor, &r).len(), 2);
        let ends: HashSet<_> = nav
            .controllers(corridor, &r)
            .iter()
            .map(|m| *m.cells.last().unwrap())
            .collect();
        // North, the ring bends twice and ends in G_near's cell.
        assert_eq!(ends, HashSet::from([(5, 9), (3, 1)]));
        assert_eq!(nav.controllers(Pose::from_xy(9.5, 5.5, 0), &r).len(), 3);
        assert!(nav.controllers(Pose::from_xy(1.5, 3.5, 0), &r).is_empty());
    }

    #[test]
    fn nav_spl_and_geodesic() {
        assert_eq!(spl(&[true, false], &[2.0, 2.0], &[4.0, 2.0]).unwrap(), 0.25);
        assert_eq!(spl(&[true], &[2.0], &[1.0]).unwrap(), 1.0);
        assert_eq!(spl(&[true], &[0.0], &[0.0]).unwrap(), 1.0);
        assert!(spl(&[], &[], &[]).is_err());
        assert!(spl(&[true], &[1.0, 2.0], &[1.0]).is_err());
        assert!(spl(&[true], &[f64::NAN], &[1.0]).is_err());
        let nav = Nav::branching().unwrap();
        // Straight down column 1: 2 m to the centre, 1.5 m to the goal's radius.
        let g = nav.geodesic_to_near(Pose::from_xy(1.5, 1.5, 0)).unwrap();
        assert!((g - 1.5).abs() < 1e-5, "{g}");
        assert_eq!(nav.geodesic_to_near(Pose::from_xy(1.5, 3.5, 0)), Some(0.0));
        assert!(nav.geodesic_to_near(Pose::from_xy(0.5, 0.5, 0)).is_none());
        // The geodesic is no longer than any executed path, and close to the planned one.
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        for _ in 0..20 {
            let p = nav.random_start(&mut rng);
            let geo = nav.geodesic_to_near(p).unwrap();
            let mut q = p;
            let mut walked = 0.0;
            for a in nav.plan(p, Some(Goal::Near)).unwrap() {
                let t = nav.step(q, a).unwrap();
                walked += t.moved;
                q = t.pose;
            }
            assert!(
                geo <= walked + 1e-6 && walked < geo * 1.3 + 0.3,
                "{geo} {walked}"
            );
            let far = nav.geodesic(p, Goal::Far).unwrap();
            assert!(far > geo + 4.0);
        }
    }
}
