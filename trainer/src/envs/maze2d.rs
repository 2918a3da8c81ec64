//! A Maze2D-like point mass: state (x, y, vx, vy), action a force in [-1, 1]^2, walls on a
//! grid of unit cells (D4RL's U-maze and medium layouts), sparse reward 1 within 0.5 of a
//! fixed target. Data are undirected in the D4RL way: a noisy waypoint controller wanders
//! between random goal cells, not towards the target.
//!
//! The layouts, walls and target disc are `laq-maze`'s ([`Layout`]), shared with the
//! differential-drive robot ([`super::unicycle`]) and the firmware.

use crate::data::{Actions, Dataset};
use anyhow::{bail, Result};
pub use laq_maze::{
    Layout, DT, FRAME_SKIP, LARGE_MAZE, MEDIUM_MAZE, RADIUS, TARGET_RADIUS, U_MAZE,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

/// Acceleration per unit of action of a unit mass.
const ACCEL: f32 = 100.0;

/// The point mass's physics and the data controller's noise: the defaults are the
/// environment's own; other values make variants of it (`laq gen maze2d --mass 2`), for
/// measuring the pipeline on dynamics it was not developed with.
///
/// ```
/// use laq::envs::maze2d::{Maze, Physics};
/// let heavy = Physics { mass: 2.0, ..Physics::default() };
/// let maze = Maze::named("umaze").unwrap().with_physics(heavy).unwrap();
/// let light = Maze::named("umaze").unwrap();
/// let push = |m: &Maze| m.step([3.5, 1.5, 0.0, 0.0], [0.0, 1.0])[3];
/// assert!(push(&maze) < push(&light));
/// assert!(Maze::named("umaze").unwrap().with_physics(Physics { mass: 0.0, ..heavy }).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Physics {
    /// The acceleration per unit of action is 100 / `mass`.
    pub mass: f32,
    /// Share of the velocity kept at each simulation step (below 1: friction).
    pub damping: f32,
    /// Speed limit along each axis.
    pub max_speed: f32,
    /// Standard deviation of the Gaussian noise the data's waypoint controller adds to
    /// each action component (before clamping to [-1, 1]).
    pub noise: f32,
}

impl Default for Physics {
    fn default() -> Self {
        Physics {
            mass: 1.0,
            damping: 0.99,
            max_speed: 5.0,
            noise: 0.3,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Maze {
    pub rows: usize,
    pub cols: usize,
    /// Cell of the target; its centre is the target point.
    pub target: (usize, usize),
    layout: Layout<'static>,
    physics: Physics,
}

impl Maze {
    /// A maze from D4RL's text (`#` wall, `O` open, `G` the target cell; see
    /// [`Layout::parse`]).
    pub fn parse(layout: &'static str) -> Result<Self> {
        Ok(Self::from_layout(Layout::parse(layout.as_bytes())?))
    }

    fn from_layout(layout: Layout<'static>) -> Self {
        Maze {
            rows: layout.rows(),
            cols: layout.cols(),
            target: layout.target(),
            layout,
            physics: Physics::default(),
        }
    }

    /// The same maze with other physics; an error names a value out of range.
    pub fn with_physics(mut self, p: Physics) -> Result<Self> {
        let Physics {
            mass,
            damping,
            max_speed,
            noise,
        } = p;
        if !(mass.is_finite() && mass > 0.0) {
            bail!("the mass must be positive, got {mass}");
        }
        if !(damping > 0.0 && damping <= 1.0) {
            bail!("the damping must be in (0, 1], got {damping}");
        }
        if !(max_speed.is_finite() && max_speed > 0.0) {
            bail!("the speed limit must be positive, got {max_speed}");
        }
        if !(noise.is_finite() && noise >= 0.0) {
            bail!("the controller noise must be at least 0, got {noise}");
        }
        self.physics = p;
        Ok(self)
    }

    /// The physics [`Maze::step`] and [`Maze::generate`] use.
    pub fn physics(&self) -> Physics {
        self.physics
    }

    /// The walls and the target, for the robot and the guidance.
    pub fn layout(&self) -> &Layout<'static> {
        &self.layout
    }

    pub fn named(name: &str) -> Result<Self> {
        match name {
            "umaze" => Ok(Self::from_layout(U_MAZE)),
            "medium" => Ok(Self::from_layout(MEDIUM_MAZE)),
            "large" => Ok(Self::from_layout(LARGE_MAZE)),
            other => bail!("unknown maze layout `{other}` (use umaze, medium or large)"),
        }
    }

    /// Whether the cell holding point (x, y) is a wall; x runs along rows as in D4RL.
    pub fn wall_at(&self, x: f32, y: f32) -> bool {
        self.layout.wall_at(x, y)
    }

    pub fn is_open(&self, (r, c): (usize, usize)) -> bool {
        !self.layout.is_wall(r, c)
    }

    pub fn open_cells(&self) -> Vec<(usize, usize)> {
        (0..self.rows)
            .flat_map(|r| (0..self.cols).map(move |c| (r, c)))
            .filter(|&c| self.is_open(c))
            .collect()
    }

    pub fn target_point(&self) -> (f32, f32) {
        let [x, y] = self.layout.target_point();
        (x, y)
    }

    /// Whether a disc of `RADIUS` at (x, y) overlaps a wall.
    pub fn blocked(&self, x: f32, y: f32) -> bool {
        self.layout.blocked(x, y)
    }

    /// One action: `FRAME_SKIP` simulation steps. Each axis moves on its own; an axis
    /// whose move would hit a wall keeps its position and loses its velocity.
    pub fn step(&self, s: [f32; 4], a: [f32; 2]) -> [f32; 4] {
        let [mut x, mut y, mut vx, mut vy] = s;
        let (ax, ay) = (a[0].clamp(-1.0, 1.0), a[1].clamp(-1.0, 1.0));
        let Physics {
            mass,
            damping,
            max_speed,
            ..
        } = self.physics;
        let accel = ACCEL / mass;
        for _ in 0..FRAME_SKIP {
            vx = ((vx + accel * ax * DT) * damping).clamp(-max_speed, max_speed);
            vy = ((vy + accel * ay * DT) * damping).clamp(-max_speed, max_speed);
            if self.blocked(x + vx * DT, y) {
                vx = 0.0;
            } else {
                x += vx * DT;
            }
            if self.blocked(x, y + vy * DT) {
                vy = 0.0;
            } else {
                y += vy * DT;
            }
        }
        [x, y, vx, vy]
    }

    pub fn reward(&self, s: [f32; 4]) -> f32 {
        self.layout.in_target([s[0], s[1]]) as u8 as f32
    }

    /// Breadth-first cell distances to `goal` over open cells (4-connected); `None` for
    /// unreachable cells.
    pub fn cell_distances(&self, goal: (usize, usize)) -> Vec<Option<usize>> {
        let mut dist = vec![None; self.rows * self.cols];
        let mut queue = VecDeque::from([goal]);
        dist[goal.0 * self.cols + goal.1] = Some(0);
        while let Some((r, c)) = queue.pop_front() {
            let d = dist[r * self.cols + c].unwrap_or(0);
            for (dr, dc) in [(-1i64, 0i64), (1, 0), (0, -1), (0, 1)] {
                let (nr, nc) = (r as i64 + dr, c as i64 + dc);
                if nr < 0 || nc < 0 {
                    continue;
                }
                let n = (nr as usize, nc as usize);
                if self.is_open(n) && dist[n.0 * self.cols + n.1].is_none() {
                    dist[n.0 * self.cols + n.1] = Some(d + 1);
                    queue.push_back(n);
                }
            }
        }
        dist
    }

    /// The oracle: an estimate of the time to reach the target from (x, y) along the
    /// shortest path, in cells: the cell's BFS distance plus the in-cell offset towards
    /// the next cell on the path. Larger is worse; `-oracle` ranks like a value.
    pub fn oracle_distance(&self, x: f32, y: f32, dist: &[Option<usize>]) -> f32 {
        let (r, c) = (x.floor().max(0.0) as usize, y.floor().max(0.0) as usize);
        let here = |r: usize, c: usize| {
            if self.is_open((r, c)) {
                dist[r * self.cols + c]
            } else {
                None
            }
        };
        let Some(d) = here(r, c) else { return f32::MAX };
        if d == 0 {
            let (tx, ty) = self.target_point();
            return ((x - tx).powi(2) + (y - ty).powi(2)).sqrt();
        }
        // Distance from the point to the border shared with the best neighbour.
        let mut best = f32::MAX;
        for (dr, dc) in [(-1i64, 0i64), (1, 0), (0, -1), (0, 1)] {
            let (nr, nc) = (r as i64 + dr, c as i64 + dc);
            if nr < 0 || nc < 0 {
                continue;
            }
            if here(nr as usize, nc as usize) == Some(d - 1) {
                let to_border = match (dr, dc) {
                    (-1, 0) => x - r as f32,
                    (1, 0) => r as f32 + 1.0 - x,
                    (0, -1) => y - c as f32,
                    _ => c as f32 + 1.0 - y,
                };
                best = best.min(to_border);
            }
        }
        d as f32 - 0.5 + best
    }

    /// A random point in a random open cell, away from walls.
    pub fn random_point(&self, rng: &mut impl Rng) -> [f32; 2] {
        let cells = self.open_cells();
        let (r, c) = cells[rng.random_range(0..cells.len())];
        [
            r as f32 + rng.random_range(0.25..0.75),
            c as f32 + rng.random_range(0.25..0.75),
        ]
    }

    /// Undirected data: a waypoint controller with Gaussian action noise follows the
    /// shortest cell path to a random goal cell, then picks another. Episodes of
    /// `episode_len` steps end in a timeout (no terminals: the reward does not end them).
    pub fn generate(&self, steps: usize, episode_len: usize, seed: u64) -> Dataset {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (mut obs, mut next, mut rew, mut tout, mut act) =
            (vec![], vec![], vec![], vec![], vec![]);
        let cells = self.open_cells();
        let mut t = 0;
        while t < steps {
            let p = self.random_point(&mut rng);
            let mut s = [p[0], p[1], 0.0, 0.0];
            let mut goal = cells[rng.random_range(0..cells.len())];
            let mut dist = self.cell_distances(goal);
            for k in 0..episode_len.min(steps - t) {
                let cell = (s[0].floor() as usize, s[1].floor() as usize);
                if cell == goal {
                    goal = cells[rng.random_range(0..cells.len())];
                    dist = self.cell_distances(goal);
                }
                let way = self.next_waypoint(cell, &dist);
                // PD control towards the waypoint's centre, plus noise.
                let (wx, wy) = (way.0 as f32 + 0.5, way.1 as f32 + 0.5);
                let noise = self.physics.noise;
                let mut a = [
                    (wx - s[0]) * 1.0 - s[2] * 0.15 + noise * crate::nn::normal(&mut rng),
                    (wy - s[1]) * 1.0 - s[3] * 0.15 + noise * crate::nn::normal(&mut rng),
                ];
                a.iter_mut().for_each(|v| *v = v.clamp(-1.0, 1.0));
                let s2 = self.step(s, a);
                obs.extend(s);
                next.extend(s2);
                rew.push(self.reward(s2));
                tout.push(k + 1 == episode_len.min(steps - t));
                act.extend(a);
                s = s2;
            }
            t += episode_len.min(steps - t);
        }
        let n = rew.len();
        Dataset {
            obs_shape: vec![4],
            observations: obs.into(),
            next_observations: next.into(),
            rewards: rew,
            terminals: vec![false; n],
            timeouts: Some(tout),
            next_missing: None,
            actions: Some(Actions::Continuous {
                dim: 2,
                values: act,
            }),
        }
    }

    /// The neighbouring cell one step closer to the goal (the cell itself at the goal).
    fn next_waypoint(&self, (r, c): (usize, usize), dist: &[Option<usize>]) -> (usize, usize) {
        let Some(d) = self
            .is_open((r, c))
            .then(|| dist[r * self.cols + c])
            .flatten()
        else {
            return (r, c);
        };
        if d == 0 {
            return (r, c);
        }
        for (dr, dc) in [(-1i64, 0i64), (1, 0), (0, -1), (0, 1)] {
            let (nr, nc) = (r as i64 + dr, c as i64 + dc);
            if nr >= 0
                && nc >= 0
                && self.is_open((nr as usize, nc as usize))
                && dist[nr as usize * self.cols + nc as usize] == Some(d - 1)
            {
                return (nr as usize, nc as usize);
            }
        }
        (r, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_parse_and_walls_stop_the_mass() {
        let m = Maze::named("umaze").unwrap();
        assert_eq!((m.rows, m.cols, m.target), (5, 5, (1, 1)));
        assert_eq!(m.open_cells().len(), 7);
        assert!(Maze::named("medium").unwrap().open_cells().len() > 20);
        let large = Maze::named("large").unwrap();
        assert_eq!((large.open_cells().len(), large.target), (46, (7, 9)));
        assert!(Maze::named("huge").is_err());
        // Pushing into the wall above (1, 1) for a long time never crosses it.
        let mut s = [1.5, 1.5, 0.0, 0.0];
        for _ in 0..200 {
            s = m.step(s, [-1.0, 0.0]);
            assert!(s[0] >= 1.0 + RADIUS - 1e-4, "{s:?}");
        }
        assert_eq!(s[2], 0.0);
        // Free motion accelerates.
        let s = m.step([3.5, 1.5, 0.0, 0.0], [0.0, 1.0]);
        assert!(s[1] > 1.5 && s[3] > 0.0);
    }

    /// Each variant moves the mass as its physics says; the default is the environment.
    #[test]
    fn physics_variants_change_the_motion() {
        let m = || Maze::named("umaze").unwrap();
        let with = |p: Physics| m().with_physics(p).unwrap();
        let d = Physics::default();
        assert_eq!(m().physics(), d);
        let run = |maze: &Maze| {
            // One action from rest: below the default speed limit.
            maze.step([3.5, 1.5, 0.0, 0.0], [0.0, 1.0])
        };
        let base = run(&m());
        assert!(base[3] < d.max_speed, "{base:?}");
        assert_eq!(run(&with(d)), base);
        let heavy = run(&with(Physics { mass: 2.0, ..d }));
        let rough = run(&with(Physics { damping: 0.9, ..d }));
        let slow = run(&with(Physics {
            max_speed: 1.0,
            ..d
        }));
        assert!(
            heavy[3] < base[3] && heavy[1] < base[1],
            "{heavy:?} {base:?}"
        );
        assert!(rough[3] < base[3], "{rough:?}");
        assert!(slow[3] <= 1.0 && slow[3] < base[3], "{slow:?}");
        // The controller's noise changes the data, not the physics.
        let quiet = with(Physics { noise: 0.0, ..d });
        assert_eq!(run(&quiet), base);
        assert_ne!(quiet.generate(500, 500, 1), m().generate(500, 500, 1));
        for bad in [
            Physics { mass: -1.0, ..d },
            Physics { damping: 1.5, ..d },
            Physics {
                max_speed: 0.0,
                ..d
            },
            Physics {
                noise: f32::NAN,
                ..d
            },
        ] {
            assert!(m().with_physics(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn oracle_follows_the_corridor() {
        let m = Maze::named("umaze").unwrap();
        let d = m.cell_distances(m.target);
        // The U: (1,1) -> (1,3) -> (3,3) -> (3,1). The far end is farthest.
        let o = |x, y| m.oracle_distance(x, y, &d);
        assert!(
            o(1.5, 1.5) < o(1.5, 2.5) && o(1.5, 2.5) < o(2.5, 3.5) && o(2.5, 3.5) < o(3.5, 1.5)
        );
        assert_eq!(d[3 * 5 + 1], Some(6));
    }

    #[test]
    fn data_wander_and_are_deterministic() {
        let m = Maze::named("umaze").unwrap();
        let a = m.generate(3000, 500, 1);
        assert_eq!(a.len(), 3000);
        assert_eq!(a, m.generate(3000, 500, 1));
        assert!(a.rewards.iter().any(|&r| r > 0.0));
        assert!(a
            .observations
            .to_f32()
            .chunks(4)
            .all(|s| !m.wall_at(s[0], s[1])));
        assert_eq!(
            a.timeouts.as_ref().unwrap().iter().filter(|&&t| t).count(),
            6
        );
        // Every cell is visited.
        let mut seen = std::collections::HashSet::new();
        for s in a.observations.to_f32().chunks(4) {
            seen.insert((s[0] as usize, s[1] as usize));
        }
        assert_eq!(seen.len(), m.open_cells().len());
    }
}
