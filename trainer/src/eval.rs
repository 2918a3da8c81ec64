//! Honest evaluation: rank correlation, state-conditioned purity, errors.

use std::collections::HashMap;

/// Index of the smallest value; the first on ties. NaN never wins.
pub fn argmin_f32(v: &[f32]) -> usize {
    let mut best = (0, f32::INFINITY);
    for (i, &x) in v.iter().enumerate() {
        if x < best.1 {
            best = (i, x);
        }
    }
    best.0
}

/// Ranks with ties given their average rank (1-based).
pub fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = avg;
        }
        i = j + 1;
    }
    r
}

/// Pearson correlation; 0 when either side has no spread.
pub fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let ma = a.iter().sum::<f64>() / n;
    let mb = b.iter().sum::<f64>() / n;
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma).powi(2);
        sbb += (y - mb).powi(2);
    }
    if saa <= 0.0 || sbb <= 0.0 {
        return 0.0;
    }
    sab / (saa * sbb).sqrt()
}

/// Spearman's rank correlation (Pearson on average ranks, so ties are handled).
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    pearson(&ranks(a), &ranks(b))
}

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

pub fn mse(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>() / a.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_basics() {
        let a = [1.0, 2.0, 3.0, 4.0];
        assert!((spearman(&a, &[10.0, 20.0, 30.0, 40.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&a, &[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert_eq!(ranks(&[5.0, 1.0, 5.0]), vec![2.5, 1.0, 2.5]);
        // scipy.stats.spearmanr([1,2,3,4,5],[5,6,7,8,7]) = 0.8207826816681233
        let r = spearman(&[1., 2., 3., 4., 5.], &[5., 6., 7., 8., 7.]);
        assert!((r - 0.8207826816681233).abs() < 1e-12, "{r}");
        assert_eq!(spearman(&a, &[1.0; 4]), 0.0);
    }

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
