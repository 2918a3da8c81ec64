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

mod env;
mod generate;
mod graph;
mod map;
mod render;

pub use env::{Layout, Macro, Nav};
pub use generate::{generate, load_poses, poses_from_infos, Episode, GenConfig, Kind, NavData};
pub use map::Map;
pub use render::Renderer;

use generate::{allocate, validate};
use graph::Graph;

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
/// Success weighted by path length (Anderson et al. 2018): the mean over episodes of
/// [`laq_maze::spl`], S_i * l_i / max(p_i, l_i) with l the shortest path length and p the
/// length taken.
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
        sum += laq_maze::spl(success[i], l as f32, p as f32) as f64;
    }
    Ok(sum / n as f64)
}
#[cfg(test)]
mod tests;
