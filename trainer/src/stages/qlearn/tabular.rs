//! Tabular Q-learning, for observations with few distinct values.

use super::*;
use crate::data::dedup::RowIndex;

/// Whether `auto` should use the tabular learner on this data. Never for images: each
/// frame would be its own table row.
pub fn is_tabular(data: &Dataset) -> bool {
    if data.is_image() {
        return false;
    }
    let integer = data
        .observations
        .iter()
        .chain(&data.next_observations)
        .all(|v| v.fract() == 0.0);
    integer && RowIndex::of_states(data).len() <= MAX_TABLE_STATES
}

/// The most passes over the data where the rewards are a cost per step ([`tabular`]).
const MAX_COST_PASSES: usize = 500;

/// A learned Q table.
#[derive(Debug)]
pub struct Table {
    pub index: RowIndex,
    pub num_actions: usize,
    /// Row-major `[states, actions]`.
    pub q: Vec<f64>,
}

impl Table {
    pub fn q_row(&self, s: usize) -> &[f64] {
        &self.q[s * self.num_actions..(s + 1) * self.num_actions]
    }

    pub fn value_of(&self, s: usize) -> f64 {
        self.q_row(s)
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// V of an observation; `None` for an observation the data never contained.
    pub fn value(&self, obs: &[f32]) -> Option<f64> {
        self.index.get(obs).map(|s| self.value_of(s))
    }
}

/// The values of a row of the table (`row`: its entries) that the data shows.
fn shown<'a>(
    q: &'a [f64],
    seen: &'a [bool],
    row: std::ops::Range<usize>,
) -> impl Iterator<Item = f64> + 'a {
    (q[row.clone()].iter().zip(&seen[row]))
        .filter(|(_, &shown)| shown)
        .map(|(&v, _)| v)
}

/// Tabular Q-learning. No bootstrapping past terminals.
pub fn tabular(
    data: &Dataset,
    labels: &[u32],
    num_actions: usize,
    cfg: &TabularConfig,
    seed: u64,
) -> Result<Table> {
    check_labels(labels, num_actions, data.len())?;
    let index = RowIndex::of_states(data);
    let k = num_actions;
    // Where the rewards are a cost per step, every entry starts at that cost for ever:
    // from below, as 0 is where rewards are 0 and above, so that values not yet carried
    // back from the goal rank below those that were (from 0, above them all).
    let floor = match data.reward_baseline() {
        0.0 => 0.0,
        cost => cost as f64 / (1.0 - cfg.gamma),
    };
    let mut q = vec![floor; index.len() * k];
    let s: Vec<usize> = (0..data.len())
        .map(|i| index.get(&data.obs_row(i)).unwrap_or(0))
        .collect();
    let s2: Vec<usize> = (0..data.len())
        .map(|i| index.get(&data.next_obs_row(i)).unwrap_or(0))
        .collect();
    // The labels each state shows: V is the maximum over those alone (an in-support
    // maximum). An entry no transition updates keeps its initial value, which would
    // otherwise count as much as a shown one.
    let mut seen = vec![false; q.len()];
    for i in 0..data.len() {
        seen[s[i] * k + labels[i] as usize] = true;
    }
    let best = |q: &[f64], state: usize| {
        shown(q, &seen, state * k..(state + 1) * k)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
            .unwrap_or(floor)
    };
    let mut order: Vec<usize> = (0..data.len()).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7461_626c);
    // From the floor of a cost per step, values rise the whole way the cost adds up
    // (`cost / (1 - gamma)`), which the passes set for rewards of 0 and 1 do not carry
    // them: there passes go on until a pass moves no entry by more than a millionth of
    // that way (at most `MAX_COST_PASSES`).
    let mut pass = 0;
    loop {
        order.shuffle(&mut rng);
        let mut moved = 0f64;
        for &i in &order {
            let next_v = if data.terminals[i] {
                0.0
            } else {
                best(&q, s2[i])
            };
            let target = data.rewards[i] as f64 + cfg.gamma * next_v;
            let cell = &mut q[s[i] * k + labels[i] as usize];
            let step = cfg.lr * (target - *cell);
            *cell += step;
            moved = moved.max(step.abs());
        }
        pass += 1;
        let settled = floor == 0.0 || moved <= 1e-6 * floor.abs();
        if pass >= cfg.passes && (settled || pass >= MAX_COST_PASSES) {
            break;
        }
    }
    // Entries no transition showed are set so that the maximum over a row (the exported
    // network's too) is the in-support one: to their state's V where the rewards are a
    // cost per step (`unshown_at_value`; a network fits such a row more easily than one
    // holding its least value: docs/trust.md, "A cost until the end"); otherwise to the
    // least of the shown values where that is below 0, so that with rewards of 0 and
    // above nothing changes (every value is 0 or more, the unshown ones 0).
    for state in 0..index.len() {
        let row = state * k..(state + 1) * k;
        let fill = match cfg.unshown_at_value || floor != 0.0 {
            true => best(&q, state),
            false => shown(&q, &seen, row.clone()).fold(0.0, f64::min),
        };
        for (v, &is_shown) in q[row.clone()].iter_mut().zip(&seen[row]) {
            if !is_shown {
                *v = fill;
            }
        }
    }
    Ok(Table {
        index,
        num_actions: k,
        q,
    })
}
