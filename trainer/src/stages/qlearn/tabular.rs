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
    let mut q = vec![0f64; index.len() * k];
    let s: Vec<usize> = (0..data.len())
        .map(|i| index.get(&data.obs_row(i)).unwrap_or(0))
        .collect();
    let s2: Vec<usize> = (0..data.len())
        .map(|i| index.get(&data.next_obs_row(i)).unwrap_or(0))
        .collect();
    let mut order: Vec<usize> = (0..data.len()).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7461_626c);
    for _ in 0..cfg.passes {
        order.shuffle(&mut rng);
        for &i in &order {
            let next_v = if data.terminals[i] {
                0.0
            } else {
                q[s2[i] * k..(s2[i] + 1) * k]
                    .iter()
                    .copied()
                    .fold(f64::NEG_INFINITY, f64::max)
            };
            let target = data.rewards[i] as f64 + cfg.gamma * next_v;
            let cell = &mut q[s[i] * k + labels[i] as usize];
            *cell += cfg.lr * (target - *cell);
        }
    }
    Ok(Table {
        index,
        num_actions: k,
        q,
    })
}
