//! A Maze2D-like point mass: state (x, y, vx, vy), action a force in [-1, 1]^2, walls on a
//! grid of unit cells (D4RL's U-maze and medium layouts), sparse reward 1 within 0.5 of a
//! fixed target. Data are undirected in the D4RL way: a noisy waypoint controller wanders
//! between random goal cells, not towards the target.

use crate::data::{Actions, Dataset};
use anyhow::{bail, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

/// D4RL's layouts: `#` wall, `O` open, `G` the target cell.
pub const U_MAZE: &str = "#####\n#GOO#\n###O#\n#OOO#\n#####";
pub const MEDIUM_MAZE: &str =
    "########\n#OO##OO#\n#OO#OOO#\n##OOO###\n#OO#OOO#\n#O#OO#O#\n#OOO#OG#\n########";

/// Simulation step and the number of steps per action (frame skip).
pub const DT: f32 = 0.01;
pub const FRAME_SKIP: usize = 3;
/// Acceleration per unit of action, and velocity damping per simulation step.
const ACCEL: f32 = 100.0;
const DAMPING: f32 = 0.99;
const MAX_SPEED: f32 = 5.0;
/// The mass is a disc of this radius; it stops at walls.
pub const RADIUS: f32 = 0.1;
pub const TARGET_RADIUS: f32 = 0.5;

#[derive(Clone, Debug)]
pub struct Maze {
    pub rows: usize,
    pub cols: usize,
    walls: Vec<bool>,
    /// Cell of the target; its centre is the target point.
    pub target: (usize, usize),
}

impl Maze {
    pub fn parse(layout: &str) -> Result<Self> {
        let lines: Vec<&str> = layout
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let rows = lines.len();
        let cols = lines.first().map(|l| l.len()).unwrap_or(0);
        if rows < 3 || cols < 3 || lines.iter().any(|l| l.len() != cols) {
            bail!("a maze layout needs equal rows of at least 3 cells");
        }
        let mut walls = vec![false; rows * cols];
        let mut target = None;
        for (r, l) in lines.iter().enumerate() {
            for (c, ch) in l.chars().enumerate() {
                match ch {
                    '#' => walls[r * cols + c] = true,
                    'O' => {}
                    'G' => target = Some((r, c)),
                    other => bail!("unknown maze cell `{other}`"),
                }
            }
        }
        let Some(target) = target else {
            bail!("the layout has no target cell `G`")
        };
        Ok(Maze {
            rows,
            cols,
            walls,
            target,
        })
    }

    pub fn named(name: &str) -> Result<Self> {
        match name {
            "umaze" => Self::parse(U_MAZE),
            "medium" => Self::parse(MEDIUM_MAZE),
            other => bail!("unknown maze layout `{other}` (use umaze or medium)"),
        }
    }

    /// Whether the cell holding point (x, y) is a wall; x runs along rows as in D4RL.
    pub fn wall_at(&self, x: f32, y: f32) -> bool {
        if x < 0.0 || y < 0.0 {
            return true;
        }
        let (r, c) = (x.floor() as usize, y.floor() as usize);
        r >= self.rows || c >= self.cols || self.walls[r * self.cols + c]
    }

    pub fn is_open(&self, (r, c): (usize, usize)) -> bool {
        r < self.rows && c < self.cols && !self.walls[r * self.cols + c]
    }

    pub fn open_cells(&self) -> Vec<(usize, usize)> {
        (0..self.rows)
            .flat_map(|r| (0..self.cols).map(move |c| (r, c)))
            .filter(|&c| self.is_open(c))
            .collect()
    }

    pub fn target_point(&self) -> (f32, f32) {
        (self.target.0 as f32 + 0.5, self.target.1 as f32 + 0.5)
    }

    /// Whether a disc of `RADIUS` at (x, y) overlaps a wall.
    pub fn blocked(&self, x: f32, y: f32) -> bool {
        [
            (-RADIUS, -RADIUS),
            (-RADIUS, RADIUS),
            (RADIUS, -RADIUS),
            (RADIUS, RADIUS),
        ]
        .iter()
        .any(|(dx, dy)| self.wall_at(x + dx, y + dy))
    }

    /// One action: `FRAME_SKIP` simulation steps. Each axis moves on its own; an axis
    /// whose move would hit a wall keeps its position and loses its velocity.
    pub fn step(&self, s: [f32; 4], a: [f32; 2]) -> [f32; 4] {
        let [mut x, mut y, mut vx, mut vy] = s;
        let (ax, ay) = (a[0].clamp(-1.0, 1.0), a[1].clamp(-1.0, 1.0));
        for _ in 0..FRAME_SKIP {
            vx = ((vx + ACCEL * ax * DT) * DAMPING).clamp(-MAX_SPEED, MAX_SPEED);
            vy = ((vy + ACCEL * ay * DT) * DAMPING).clamp(-MAX_SPEED, MAX_SPEED);
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
        let (tx, ty) = self.target_point();
        (((s[0] - tx).powi(2) + (s[1] - ty).powi(2)).sqrt() <= TARGET_RADIUS) as u8 as f32
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
                let mut a = [
                    (wx - s[0]) * 1.0 - s[2] * 0.15 + 0.3 * crate::nn::normal(&mut rng),
                    (wy - s[1]) * 1.0 - s[3] * 0.15 + 0.3 * crate::nn::normal(&mut rng),
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
        assert!(Maze::named("large").is_err());
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
