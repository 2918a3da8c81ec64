//! Statistics shared by every stage and study: ranks and correlations, errors,
//! percentiles, means with their spread, and column standardisation.

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

/// Mean squared error.
pub fn mse(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>() / a.len().max(1) as f64
}

/// The `p`-th percentile (0..=100) with linear interpolation, as numpy's default.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let pos = p / 100.0 * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// The arithmetic mean; NaN for no values.
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Mean and sample standard deviation (n - 1); the deviation is 0 for one value.
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    let m = mean(v);
    if v.len() < 2 {
        return (m, 0.0);
    }
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    (m, var.sqrt())
}

/// Mean and standard error over seeds at every evaluation (`per_seed[seed][eval]`).
pub fn mean_stderr(per_seed: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>) {
    let n = per_seed.len();
    let len = per_seed.first().map(Vec::len).unwrap_or(0);
    let mut mean = vec![0.0; len];
    let mut se = vec![0.0; len];
    for j in 0..len {
        let m = per_seed.iter().map(|c| c[j]).sum::<f64>() / n as f64;
        mean[j] = m;
        if n > 1 {
            let var = per_seed.iter().map(|c| (c[j] - m).powi(2)).sum::<f64>() / (n - 1) as f64;
            se[j] = (var / n as f64).sqrt();
        }
    }
    (mean, se)
}

/// The lower Cholesky factor `L` (`a = L L^T`) of the symmetric `n x n` matrix `a`,
/// row-major; `None` where `a` is not positive definite.
///
/// ```
/// use laq::util::stats::{cholesky, forward_substitute};
/// let l = cholesky(&[4.0, 2.0, 2.0, 5.0], 2).unwrap();
/// assert_eq!(l, [2.0, 0.0, 1.0, 2.0]);
/// assert_eq!(forward_substitute(&l, 2, &[2.0, 5.0]), [1.0, 2.0]);
/// assert!(cholesky(&[1.0, 2.0, 2.0, 1.0], 2).is_none());
/// ```
pub fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0f64; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut sum = a[i * n + j];
            for c in 0..j {
                sum -= l[i * n + c] * l[j * n + c];
            }
            if i == j {
                if sum <= 0.0 || !sum.is_finite() {
                    return None;
                }
                l[i * n + i] = sum.sqrt();
            } else {
                l[i * n + j] = sum / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// `L^-1 b` for the lower triangular `n x n` matrix `l` (row-major).
pub fn forward_substitute(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut z = vec![0f64; n];
    for i in 0..n {
        let mut sum = b[i];
        for c in 0..i {
            sum -= l[i * n + c] * z[c];
        }
        z[i] = sum / l[i * n + i];
    }
    z
}

/// Mean and standard deviation of each column of a row-major `[n, d]` matrix; a column
/// with no spread gets std 1 so that standardising it is the identity shift.
pub fn column_stats(x: &[f32], d: usize) -> (Vec<f32>, Vec<f32>) {
    let n = (x.len() / d.max(1)).max(1) as f64;
    let mut mean = vec![0f64; d];
    for row in x.chunks_exact(d) {
        for (m, v) in mean.iter_mut().zip(row) {
            *m += *v as f64;
        }
    }
    mean.iter_mut().for_each(|m| *m /= n);
    let mut var = vec![0f64; d];
    for row in x.chunks_exact(d) {
        for ((s, v), m) in var.iter_mut().zip(row).zip(&mean) {
            *s += (*v as f64 - m).powi(2);
        }
    }
    let std = var
        .iter()
        .map(|s| {
            let sd = (s / n).sqrt();
            if sd > 1e-6 {
                sd as f32
            } else {
                1.0
            }
        })
        .collect();
    (mean.into_iter().map(|m| m as f32).collect(), std)
}

/// `(x - mean) / std` row by row.
pub fn standardise(x: &[f32], mean: &[f32], std: &[f32]) -> Vec<f32> {
    let d = mean.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        for j in 0..d {
            out.push((row[j] - mean[j]) / std[j]);
        }
    }
    out
}

/// The mean loss over each tenth of a run of `steps` steps: the training curve every stage
/// reports (`metrics.json`, the loss figures).
///
/// ```
/// let mut c = laq::util::stats::TenthCurve::new(20);
/// for step in 0..20 {
///     c.push(step, step as f64);
/// }
/// assert_eq!(c.means, [0.5, 2.5, 4.5, 6.5, 8.5, 10.5, 12.5, 14.5, 16.5, 18.5]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TenthCurve {
    steps: usize,
    /// Loss sum and count since the last tenth ended.
    acc: (f64, usize),
    /// The mean of every finished tenth.
    pub means: Vec<f32>,
}

impl TenthCurve {
    /// A curve for a run of `steps` steps.
    pub fn new(steps: usize) -> Self {
        TenthCurve {
            steps,
            ..Default::default()
        }
    }

    /// Adds the loss of step `step` (0-based); returns the mean of the tenth it ended, if
    /// it ended one (the last step always ends one).
    pub fn push(&mut self, step: usize, loss: f64) -> Option<f64> {
        self.acc.0 += loss;
        self.acc.1 += 1;
        if !((step + 1).is_multiple_of((self.steps / 10).max(1)) || step + 1 == self.steps) {
            return None;
        }
        let mean = self.acc.0 / self.acc.1 as f64;
        self.means.push(mean as f32);
        self.acc = (0.0, 0);
        Some(mean)
    }
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
    fn percentile_interpolates_like_numpy() {
        // numpy.percentile([1, 2, 3, 4], 95) = 3.85
        assert!((percentile(&[4.0, 1.0, 3.0, 2.0], 95.0) - 3.85).abs() < 1e-12);
        assert_eq!(percentile(&[7.0], 95.0), 7.0);
        assert!(percentile(&[], 95.0).is_nan());
    }

    #[test]
    fn spreads() {
        let (m, s) = mean_std(&[1.0, 2.0, 3.0]);
        assert_eq!((m, s), (2.0, 1.0));
        let (m, se) = mean_stderr(&[vec![1.0, 0.0], vec![3.0, 0.0]]);
        assert_eq!(m, vec![2.0, 0.0]);
        assert!((se[0] - 1.0).abs() < 1e-12 && se[1] == 0.0);
    }
}
