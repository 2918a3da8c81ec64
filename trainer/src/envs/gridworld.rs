//! The paper's grid world: an n x n grid (6 in the paper), 8 moves, start in the top-left
//! corner, reward 1 and termination in the bottom-right corner, and the sub-optimal
//! behaviour policy of the paper's appendix.

use crate::data::{Actions, Dataset};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Moves as (d_row, d_col), in action-index order: up, down, left, right, up-left,
/// up-right, down-left, down-right. The runtime's firmware examples use the same order.
pub const MOVES: [(i64, i64); 8] = [
    (-1, 0),
    (1, 0),
    (0, -1),
    (0, 1),
    (-1, -1),
    (-1, 1),
    (1, -1),
    (1, 1),
];
const UP: usize = 0;
const DOWN: usize = 1;
const LEFT: usize = 2;
const RIGHT: usize = 3;
const UP_LEFT: usize = 4;
const UP_RIGHT: usize = 5;
const DOWN_LEFT: usize = 6;
const DOWN_RIGHT: usize = 7;

/// Discount of the paper's tabular grid-world experiments.
pub const GAMMA: f64 = 0.95;

#[derive(Clone, Copy, Debug)]
pub struct GridWorld {
    pub size: usize,
    /// Episodes longer than this are cut (recorded as `timeouts`).
    pub max_steps: usize,
}

impl Default for GridWorld {
    fn default() -> Self {
        GridWorld {
            size: 6,
            max_steps: 200,
        }
    }
}

impl GridWorld {
    pub fn num_states(&self) -> usize {
        self.size * self.size
    }

    pub fn goal(&self) -> (usize, usize) {
        (self.size - 1, self.size - 1)
    }

    pub fn index(&self, (r, c): (usize, usize)) -> usize {
        r * self.size + c
    }

    pub fn cell(&self, i: usize) -> (usize, usize) {
        (i / self.size, i % self.size)
    }

    /// The state index of an observation (row, col), if it lies on the grid.
    pub fn index_of_obs(&self, obs: &[f32]) -> Option<usize> {
        let r = obs.first()?.round();
        let c = obs.get(1)?.round();
        let n = self.size as f32;
        (r >= 0.0 && c >= 0.0 && r < n && c < n).then(|| self.index((r as usize, c as usize)))
    }

    /// The move's target, clamped to the grid (a move into a wall slides along it).
    pub fn step(&self, (r, c): (usize, usize), a: usize) -> (usize, usize) {
        let (dr, dc) = MOVES[a];
        let hi = self.size as i64 - 1;
        (
            (r as i64 + dr).clamp(0, hi) as usize,
            (c as i64 + dc).clamp(0, hi) as usize,
        )
    }

    /// Whether the move stays on the grid without clamping.
    pub fn is_valid(&self, (r, c): (usize, usize), a: usize) -> bool {
        let (dr, dc) = MOVES[a];
        let hi = self.size as i64 - 1;
        let (nr, nc) = (r as i64 + dr, c as i64 + dc);
        (0..=hi).contains(&nr) && (0..=hi).contains(&nc)
    }

    /// The appendix's behaviour policy. Random choices are drawn among the moves that stay
    /// on the grid, so every recorded action changes the state (as in the paper, where
    /// clustering on s' - s reaches purity 1.000). Corners follow the right-edge rule
    /// first, so the top-right corner moves down.
    pub fn behaviour_action(&self, pos: (usize, usize), rng: &mut impl Rng) -> usize {
        let last = self.size - 1;
        let (r, c) = pos;
        let random_valid = |rng: &mut dyn rand::RngCore| {
            let valid: Vec<usize> = (0..8).filter(|&a| self.is_valid(pos, a)).collect();
            valid[rng.random_range(0..valid.len())]
        };
        if pos == (0, 0) {
            return if rng.random::<f64>() < 0.5 {
                RIGHT
            } else {
                DOWN
            };
        }
        let edge_move = if c == last {
            Some(DOWN)
        } else if r == 0 || r == last {
            Some(RIGHT)
        } else if c == 0 {
            Some(DOWN)
        } else {
            None
        };
        match edge_move {
            Some(a) => {
                if rng.random::<f64>() < 0.9 {
                    a
                } else {
                    random_valid(rng)
                }
            }
            None => {
                let away = [UP, LEFT, UP_LEFT];
                let rest = [DOWN, RIGHT, DOWN_RIGHT, UP_RIGHT, DOWN_LEFT];
                if rng.random::<f64>() < 0.9 {
                    away[rng.random_range(0..away.len())]
                } else {
                    rest[rng.random_range(0..rest.len())]
                }
            }
        }
    }

    /// Rolls out the behaviour policy. With `sticky > 0`, the environment executes the
    /// previously executed action instead of the chosen one with that probability
    /// (appendix A.4); the recorded action is the chosen one.
    pub fn generate(&self, episodes: usize, seed: u64, sticky: f64) -> Dataset {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (mut obs, mut next, mut rew, mut term, mut tout, mut act) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let goal = self.goal();
        for _ in 0..episodes {
            let mut pos = (0, 0);
            let mut prev: Option<usize> = None;
            for t in 0..self.max_steps {
                let chosen = self.behaviour_action(pos, &mut rng);
                let executed = match prev {
                    Some(p) if sticky > 0.0 && rng.random::<f64>() < sticky => p,
                    _ => chosen,
                };
                prev = Some(executed);
                let np = self.step(pos, executed);
                let done = np == goal;
                obs.extend([pos.0 as f32, pos.1 as f32]);
                next.extend([np.0 as f32, np.1 as f32]);
                rew.push(if done { 1.0 } else { 0.0 });
                term.push(done);
                tout.push(!done && t + 1 == self.max_steps);
                act.push(chosen as i64);
                pos = np;
                if done {
                    break;
                }
            }
        }
        Dataset {
            obs_shape: vec![2],
            observations: obs.into(),
            next_observations: next.into(),
            rewards: rew,
            terminals: term,
            timeouts: Some(tout),
            next_missing: None,
            actions: Some(Actions::Discrete(act)),
        }
    }

    /// Reward and termination of moving from `pos` with `a`.
    pub fn outcome(&self, pos: (usize, usize), a: usize) -> ((usize, usize), f64, bool) {
        let np = self.step(pos, a);
        let done = np == self.goal();
        (np, if done { 1.0 } else { 0.0 }, done)
    }

    /// The exact optimal value function by value iteration (V = 0 at the terminal goal).
    pub fn optimal_values(&self, gamma: f64) -> Vec<f64> {
        let mut v = vec![0.0; self.num_states()];
        loop {
            let mut delta: f64 = 0.0;
            for s in 0..self.num_states() {
                let cell = self.cell(s);
                if cell == self.goal() {
                    continue;
                }
                let best = (0..8)
                    .map(|a| self.backup(cell, a, &v, gamma))
                    .fold(f64::NEG_INFINITY, f64::max);
                delta = delta.max((best - v[s]).abs());
                v[s] = best;
            }
            if delta < 1e-12 {
                return v;
            }
        }
    }

    /// One-step lookahead r + gamma V(s') of a move.
    pub fn backup(&self, pos: (usize, usize), a: usize, v: &[f64], gamma: f64) -> f64 {
        let (np, r, done) = self.outcome(pos, a);
        r + if done { 0.0 } else { gamma * v[self.index(np)] }
    }

    /// Share of non-goal states where the move that is greedy under `v` (one-step lookahead,
    /// lowest index on ties) is optimal under the exact optimal values.
    pub fn behaviour_accuracy(&self, v: &[f64], gamma: f64) -> f64 {
        let opt = self.optimal_values(gamma);
        let mut correct = 0;
        let mut total = 0;
        for s in 0..self.num_states() {
            let cell = self.cell(s);
            if cell == self.goal() {
                continue;
            }
            total += 1;
            let greedy = argmax((0..8).map(|a| self.backup(cell, a, v, gamma)));
            let best = (0..8)
                .map(|a| self.backup(cell, a, &opt, gamma))
                .fold(f64::NEG_INFINITY, f64::max);
            if (self.backup(cell, greedy, &opt, gamma) - best).abs() < 1e-9 {
                correct += 1;
            }
        }
        correct as f64 / total as f64
    }
}

/// Index of the largest value; the first one on ties.
pub fn argmax(values: impl Iterator<Item = f64>) -> usize {
    let mut best = (0, f64::NEG_INFINITY);
    for (i, v) in values.enumerate() {
        if v > best.1 {
            best = (i, v);
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optimal_values_follow_chebyshev_distance() {
        let g = GridWorld::default();
        let v = g.optimal_values(GAMMA);
        for s in 0..36 {
            let (r, c) = g.cell(s);
            let d = (5 - r).max(5 - c) as i32;
            let want = if d == 0 { 0.0 } else { GAMMA.powi(d - 1) };
            assert!((v[s] - want).abs() < 1e-9, "state {s}: {} vs {want}", v[s]);
        }
        assert_eq!(g.behaviour_accuracy(&v, GAMMA), 1.0);
        let zeros = vec![0.0; 36];
        assert!(g.behaviour_accuracy(&zeros, GAMMA) < 0.5);
    }

    #[test]
    fn data_is_deterministic_and_follows_the_policy() {
        let g = GridWorld::default();
        let a = g.generate(200, 7, 0.0);
        assert_eq!(a, g.generate(200, 7, 0.0));
        assert_ne!(a, g.generate(200, 8, 0.0));
        assert_eq!(a.terminals.iter().filter(|&&t| t).count(), 200);
        let acts = a.discrete_actions("test").unwrap();
        for i in 0..a.len() {
            let s = a.obs(i);
            let n = a.next_obs(i);
            let pos = (s[0] as usize, s[1] as usize);
            assert!(g.is_valid(pos, acts[i] as usize));
            let np = g.step(pos, acts[i] as usize);
            assert_eq!((np.0 as f32, np.1 as f32), (n[0], n[1]));
        }
        // Edges: mostly right along the top row.
        let top: Vec<_> = (0..a.len())
            .filter(|&i| a.obs(i)[0] == 0.0 && a.obs(i)[1] > 0.0 && a.obs(i)[1] < 5.0)
            .collect();
        let right = top.iter().filter(|&&i| acts[i] == RIGHT as i64).count();
        let share = right as f64 / top.len() as f64;
        assert!(share > 0.85 && share < 0.97, "{share}");
    }

    #[test]
    fn sticky_actions_change_transitions() {
        let g = GridWorld::default();
        let d = g.generate(300, 1, 0.5);
        let acts = d.discrete_actions("test").unwrap();
        let mismatched = (0..d.len())
            .filter(|&i| {
                let s = d.obs(i);
                let np = g.step((s[0] as usize, s[1] as usize), acts[i] as usize);
                (np.0 as f32, np.1 as f32) != (d.next_obs(i)[0], d.next_obs(i)[1])
            })
            .count();
        assert!(mismatched > d.len() / 10);
    }
}
