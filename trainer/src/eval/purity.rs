//! The purity of latent-action labels against ground-truth actions (paper, appendix).

use std::collections::HashMap;

/// The paper's state-conditioned purity (appendix): within each state, each label's
/// purity is the share of its most frequent ground-truth action; a state's purity is the
/// label-size-weighted mean; the overall purity weights states by how often they appear.
/// All of which equals sum over (state, label) of the majority count, over N.
pub fn state_purity(states: &[usize], labels: &[u32], actions: &[i64]) -> f64 {
    let mut counts: HashMap<(usize, u32), HashMap<i64, usize>> = HashMap::new();
    for ((&s, &l), &a) in states.iter().zip(labels).zip(actions) {
        *counts.entry((s, l)).or_default().entry(a).or_default() += 1;
    }
    let majority: usize = counts
        .values()
        .map(|c| c.values().copied().max().unwrap_or(0))
        .sum();
    majority as f64 / states.len().max(1) as f64
}

/// The authors' release's global purity (majority action per label, ignoring the state).
pub fn global_purity(labels: &[u32], actions: &[i64]) -> f64 {
    let states = vec![0; labels.len()];
    state_purity(&states, labels, actions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purity_matches_the_papers_example() {
        // One state, actions [0,0,0,1,2] mapped to one latent action: purity 0.6.
        assert!((state_purity(&[0; 5], &[3; 5], &[0, 0, 0, 1, 2]) - 0.6).abs() < 1e-12);
        // The same actions split by state are pure within each state.
        let p = state_purity(&[0, 0, 1, 1], &[0, 0, 0, 0], &[1, 1, 2, 2]);
        assert_eq!(p, 1.0);
        assert_eq!(global_purity(&[0, 0, 0, 0], &[1, 1, 2, 2]), 0.5);
    }
}
