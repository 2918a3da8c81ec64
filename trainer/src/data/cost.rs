//! A cost per step until the episode ends, learned as the value above paying it for ever.
//!
//! gymnasium's MountainCar pays -1 on every step, the one that reaches the flag too, and
//! marks the flag only by ending the episode there. With cost `c` on most rows and
//! discount `gamma`, paying the cost for ever is worth `b = c / (1 - gamma)`, and every
//! return V lies above it. The value above that floor, as a share of what the last step
//! before an end spares, `V' = (1 - V (1 - gamma) / c) / gamma`, obeys the same Bellman
//! equations as V with the rewards `r' = (r - c) (1 - gamma) / (|c| gamma)`, and 1 more
//! on a terminal row (the cost for ever that ending the episode spares). The two are the
//! same problem, exactly: the same greedy choices, the same order of states, V' an
//! affine map of V. Where every step costs `c`, the rewards are those of a log that pays
//! 1 where an episode ends and 0 elsewhere, and V' is `gamma^(n-1)` for an end `n`
//! steps away: the units Q-learning, the trust checks and the runtime (where 0 is the
//! value of a state outside the data) are made for. Learned on the cost itself, deep
//! Q-learning ranked the car's states at 0.21-0.72 against the fewest steps to the flag
//! (docs/trust.md, "A cost until the end").

use super::Dataset;
use serde::{Deserialize, Serialize};

/// A log whose rewards are a cost per step (the reward of most rows,
/// [`Dataset::reward_baseline`], below 0) and whose episodes end on terminal rows,
/// learned as the value above paying that cost for ever (module docs).
///
/// ```
/// use laq::data::cost::CostToEnd;
/// use laq::data::Dataset;
/// // -1 a step; the third row ends the episode.
/// let d = Dataset {
///     obs_shape: vec![1],
///     observations: vec![0.0, 1.0, 2.0].into(),
///     next_observations: vec![1.0, 2.0, 3.0].into(),
///     rewards: vec![-1.0; 3],
///     terminals: vec![false, false, true],
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let cost = CostToEnd::of(&d, 0.9).unwrap();
/// let learned = cost.apply(&d);
/// // 1 where the episode ends, 0 elsewhere.
/// assert_eq!(learned.rewards, [0.0, 0.0, 1.0]);
/// // One step from the end: the return -1 is V' = 1.
/// assert!((cost.value_in_data_units(1.0) - -1.0).abs() < 1e-9);
/// // Never ending: the cost for ever.
/// assert!((cost.value_in_data_units(0.0) - -10.0).abs() < 1e-9);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostToEnd {
    /// The reward of most rows, below 0.
    pub cost: f32,
    /// The discount the value above the cost for ever is learned at.
    pub gamma: f64,
    /// Terminal rows: the ends that spare the cost.
    pub ends: usize,
}

impl CostToEnd {
    /// Where `data` pays a cost per step and some episode ends on a terminal row; `None`
    /// for every other log (rewards of 0 and above, or a cost that no end spares), which
    /// trains on its rewards as they are.
    pub fn of(data: &Dataset, gamma: f64) -> Option<CostToEnd> {
        let cost = data.reward_baseline();
        let ends = data.terminals.iter().filter(|&&t| t).count();
        (cost < 0.0 && ends > 0).then_some(CostToEnd { cost, gamma, ends })
    }

    /// The reward Q-learning learns from in place of `r`, on a terminal row or not.
    pub fn reward(&self, r: f32, terminal: bool) -> f32 {
        let spared = -(self.cost as f64) * self.gamma / (1.0 - self.gamma);
        ((r as f64 - self.cost as f64) / spared + if terminal { 1.0 } else { 0.0 }) as f32
    }

    /// `data` with the rewards Q-learning learns from ([`CostToEnd::reward`]); the rest
    /// as it is (a copy: observations included).
    pub fn apply(&self, data: &Dataset) -> Dataset {
        let rewards = (data.rewards.iter().zip(&data.terminals))
            .map(|(&r, &t)| self.reward(r, t))
            .collect();
        Dataset {
            rewards,
            ..data.clone()
        }
    }

    /// The return in the data's own units of a V learned so:
    /// `c (1 - gamma V') / (1 - gamma)`.
    pub fn value_in_data_units(&self, v: f64) -> f64 {
        self.cost as f64 * (1.0 - self.gamma * v) / (1.0 - self.gamma)
    }
}

impl std::fmt::Display for CostToEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a cost of {} a step until the episode ends ({} terminal rows): V is learned \
             and exported as the value above paying it for ever, each end rewarded 1 (1 \
             one step from an end, 0 never ending; at gamma {} the return in the data's \
             units is cost x (1 - gamma V) / (1 - gamma))",
            self.cost, self.ends, self.gamma
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact claim of the module: Q-learning on the learned rewards gives, for every
    /// state of a chain with a cost and a cliff, the value on the data's rewards mapped
    /// by `V' = (1 - V (1 - gamma) / c) / gamma`.
    #[test]
    fn the_value_above_the_cost_maps_to_the_value_of_the_cost() {
        // States 0..5 on a chain; from each, a step right (-1; from 4 it ends), or a step
        // off a cliff (-10, back to 0). Values by iteration, both ways.
        let gamma = 0.95;
        let cost = CostToEnd {
            cost: -1.0,
            gamma,
            ends: 1,
        };
        let solve = |rew: &dyn Fn(f32, bool) -> f64| {
            let mut v = [0.0f64; 5];
            for _ in 0..2000 {
                let mut next = v;
                for s in 0..5 {
                    let right = match s {
                        4 => rew(-1.0, true),
                        _ => rew(-1.0, false) + gamma * v[s + 1],
                    };
                    let cliff = rew(-10.0, false) + gamma * v[0];
                    next[s] = right.max(cliff);
                }
                v = next;
            }
            v
        };
        let v = solve(&|r, _| r as f64);
        let learned = solve(&|r, t| cost.reward(r, t) as f64);
        for s in 0..5 {
            // f32 rewards: within a millionth.
            assert!((cost.value_in_data_units(learned[s]) - v[s]).abs() < 1e-5);
            let share = (1.0 - v[s] * (1.0 - gamma) / -1.0) / gamma;
            assert!((share - learned[s]).abs() < 1e-6);
        }
        assert!(learned.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn rewards_of_0_and_above_and_costs_no_end_spares_are_left_alone() {
        let mut d = Dataset {
            obs_shape: vec![1],
            observations: vec![0.0, 1.0, 2.0].into(),
            next_observations: vec![1.0, 2.0, 3.0].into(),
            rewards: vec![0.0, 0.0, 1.0],
            terminals: vec![false, false, true],
            timeouts: None,
            next_missing: None,
            actions: None,
        };
        assert_eq!(CostToEnd::of(&d, 0.99), None);
        d.rewards = vec![-1.0; 3];
        d.terminals = vec![false; 3];
        assert_eq!(CostToEnd::of(&d, 0.99), None);
        d.terminals[2] = true;
        let c = CostToEnd::of(&d, 0.99).unwrap();
        assert_eq!((c.cost, c.ends), (-1.0, 1));
    }
}
