//! How far the labels move each value of a vector state. Over a stretch of a trajectory,
//! the count of each label in it explains part of a value's change beyond what the
//! stretch's first state predicts; that part, as a share of the value's spread over the
//! data, is how far the labels move the value. A label sets a velocity at once and moves
//! a position only over tens of steps, so the stretches run from one step to hundreds.
//! A value that no label moves (a clock, a battery that drains) tells V the time or the
//! trajectory, not what an action does. A goal set from outside is moved by no label
//! either, and V must read it: a run leaves such contexts read
//! ([`crate::data::contexts::dims`]).

use crate::data::Dataset;
use crate::util::stats;

/// The stretches the labels' effect is measured over, in steps.
pub const HORIZONS: [usize; 4] = [1, 4, 16, 64];

/// The stretch the data's trajectories must run on for, at the least, for a measure: a
/// point mass's labels move its position by a tenth of the maze only over tens of steps
/// (docs/trust.md, "Values no label moves").
pub const NEEDED_HORIZON: usize = 64;

/// A value the labels move by less than this share of its spread, over every stretch,
/// is one no label moves ([`unmoved_by_labels`]).
pub const MOVED: f32 = 0.1;

/// Stretches of one length measured at most, evenly spaced over those the data holds.
const MAX_STRETCHES: usize = 50_000;

/// Stretches of one length a measure needs at the least.
const MIN_STRETCHES: usize = 200;

/// Values and labels a measure takes at most (the regression's size).
const MAX_FEATURES: usize = 160;

/// How far `labels` (of `num_actions`) move each value of `data`'s vector states: for
/// each stretch length of [`HORIZONS`], a least-squares fit of each value's change over
/// the stretches of the data's trajectories (rows that run on, [`Dataset::continues`])
/// on the first state alone, and on the first state with the count of each label in
/// the stretch; the root mean square of what the counts add, over the value's standard
/// deviation, is how far the labels move it; the largest over the lengths is the
/// measure. `None` for a value that never varies. `None` in all where the states are
/// images, where the labels do not fit the data, or where the trajectories do not run
/// on for [`NEEDED_HORIZON`] steps often enough to see a position move.
///
/// ```
/// use laq::data::Dataset;
/// use laq::stages::moved::moved_by_labels;
/// // A walk whose step the label sets (+1 or -1), beside a clock that runs on its own.
/// let n = 4000;
/// let labels: Vec<u32> = (0..n as u64).map(|i| ((i * 2654435761) >> 20) as u32 & 1).collect();
/// let (mut obs, mut next) = (vec![], vec![]);
/// let mut x = 0.0f32;
/// for (i, &l) in labels.iter().enumerate() {
///     obs.extend([x, i as f32]);
///     x = 0.98 * x + if l == 1 { 1.0 } else { -1.0 };
///     next.extend([x, i as f32 + 1.0]);
/// }
/// let data = Dataset {
///     obs_shape: vec![2],
///     observations: obs.into(),
///     next_observations: next.into(),
///     rewards: vec![0.0; n],
///     terminals: vec![false; n],
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let moved = moved_by_labels(&data, &labels, 2).unwrap();
/// assert!(moved[0].unwrap() > 0.1 && moved[1].unwrap() < 0.01);
/// ```
pub fn moved_by_labels(
    data: &Dataset,
    labels: &[u32],
    num_actions: usize,
) -> Option<Vec<Option<f32>>> {
    let n = data.len();
    let d = data.obs_dim();
    if data.is_image() || labels.len() != n || num_actions < 2 || n == 0 {
        return None;
    }
    let k = num_actions;
    let features = 1 + d + (k - 1);
    if features > MAX_FEATURES || labels.iter().any(|&l| l as usize >= k) {
        return None;
    }
    // Each row's last row in its trajectory.
    let mut end = vec![0usize; n];
    for i in (0..n).rev() {
        end[i] = if data.continues(i) { end[i + 1] } else { i };
    }
    let (mean, sd) = level_stats(data);
    let z = |x: f32, j: usize| {
        if sd[j] > 0.0 {
            (x as f64 - mean[j]) / sd[j]
        } else {
            0.0
        }
    };
    // A stretch ends on a row with a next observation (a terminal row may have none).
    let missing = |i: usize| data.next_missing.as_ref().is_some_and(|m| m[i]);
    let mut moved = vec![0.0f64; d];
    let mut measured_needed = false;
    for h in HORIZONS {
        let starts: Vec<usize> = (0..n)
            .filter(|&t| t + h - 1 <= end[t] && !missing(t + h - 1))
            .collect();
        if starts.len() < MIN_STRETCHES {
            continue;
        }
        measured_needed |= h >= NEEDED_HORIZON;
        let every = starts.len().div_ceil(MAX_STRETCHES);
        let mut fit = Normal::new(features, d);
        let mut x = vec![0.0f64; features];
        let mut y = vec![0.0f64; d];
        for &t in starts.iter().step_by(every) {
            let first = data.obs_row(t);
            let last = data.next_obs_row(t + h - 1);
            x[0] = 1.0;
            for j in 0..d {
                x[1 + j] = z(first[j], j);
                y[j] = z(last[j], j) - x[1 + j];
            }
            x[1 + d..].iter_mut().for_each(|c| *c = 0.0);
            for &l in &labels[t..t + h] {
                // The last label's count is the stretch's length less the others'.
                if (l as usize) < k - 1 {
                    x[1 + d + l as usize] += 1.0;
                }
            }
            fit.add(&x, &y);
        }
        let state_only = fit.residuals(1 + d);
        let with_labels = fit.residuals(features);
        for j in 0..d {
            let added = (state_only[j] - with_labels[j]).max(0.0) / fit.rows as f64;
            moved[j] = moved[j].max(added.sqrt());
        }
    }
    measured_needed.then(|| {
        (0..d)
            .map(|j| (sd[j] > 0.0).then_some(moved[j] as f32))
            .collect()
    })
}

/// The values no label moves: those measured below [`MOVED`] by [`moved_by_labels`]
/// (a value that never varies is left out: V cannot read it).
///
/// ```
/// use laq::stages::moved::unmoved_by_labels;
/// assert_eq!(unmoved_by_labels(&[Some(0.4), Some(0.002), None, Some(0.09)]), vec![1, 3]);
/// ```
pub fn unmoved_by_labels(moved: &[Option<f32>]) -> Vec<usize> {
    (moved.iter().enumerate())
        .filter(|(_, m)| m.is_some_and(|m| m < MOVED))
        .map(|(j, _)| j)
        .collect()
}

/// Each value's mean and standard deviation over the data's states.
fn level_stats(data: &Dataset) -> (Vec<f64>, Vec<f64>) {
    let (n, d) = (data.len(), data.obs_dim());
    let mut sum = vec![0.0f64; d];
    let mut sq = vec![0.0f64; d];
    for i in 0..n {
        for (j, &x) in data.obs_row(i).iter().enumerate() {
            sum[j] += x as f64;
        }
    }
    let mean: Vec<f64> = sum.iter().map(|s| s / n as f64).collect();
    for i in 0..n {
        for (j, &x) in data.obs_row(i).iter().enumerate() {
            sq[j] += (x as f64 - mean[j]).powi(2);
        }
    }
    let sd = sq.iter().map(|s| (s / n as f64).sqrt()).collect();
    (mean, sd)
}

/// The normal equations of least squares for several targets at once.
struct Normal {
    p: usize,
    targets: usize,
    rows: usize,
    /// X'X, p x p.
    xx: Vec<f64>,
    /// X'Y, p x targets.
    xy: Vec<f64>,
    /// Y'Y per target.
    yy: Vec<f64>,
}

impl Normal {
    fn new(p: usize, targets: usize) -> Normal {
        Normal {
            p,
            targets,
            rows: 0,
            xx: vec![0.0; p * p],
            xy: vec![0.0; p * targets],
            yy: vec![0.0; targets],
        }
    }

    fn add(&mut self, x: &[f64], y: &[f64]) {
        self.rows += 1;
        for a in 0..self.p {
            if x[a] == 0.0 {
                continue;
            }
            for b in 0..self.p {
                self.xx[a * self.p + b] += x[a] * x[b];
            }
            for (t, &yt) in y.iter().enumerate() {
                self.xy[a * self.targets + t] += x[a] * yt;
            }
        }
        for (t, &yt) in y.iter().enumerate() {
            self.yy[t] += yt * yt;
        }
    }

    /// Each target's residual sum of squares, fitted on the first `q` features. A small
    /// ridge keeps the fit defined where a feature never varies (a label no stretch
    /// holds).
    fn residuals(&self, q: usize) -> Vec<f64> {
        let mut a: Vec<f64> = (0..q * q)
            .map(|i| self.xx[(i / q) * self.p + i % q])
            .collect();
        let scale = (0..q).map(|i| a[i * q + i]).fold(0.0, f64::max).max(1.0);
        for i in 0..q {
            a[i * q + i] += 1e-9 * scale;
        }
        let Some(l) = stats::cholesky(&a, q) else {
            return self.yy.clone();
        };
        (0..self.targets)
            .map(|t| {
                let b: Vec<f64> = (0..q).map(|i| self.xy[i * self.targets + t]).collect();
                // RSS = y'y - b' (X'X)^-1 b = y'y - |L^-1 b|^2.
                let w = stats::forward_substitute(&l, q, &b);
                (self.yy[t] - w.iter().map(|v| v * v).sum::<f64>()).max(0.0)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trajectory of `n` rows: `f(state, label)` gives the next state.
    fn rolled(
        n: usize,
        start: Vec<f32>,
        labels: &[u32],
        f: impl Fn(&[f32], u32, usize) -> Vec<f32>,
    ) -> Dataset {
        let d = start.len();
        let (mut obs, mut next) = (vec![], vec![]);
        let mut s = start;
        for (i, &l) in labels.iter().enumerate().take(n) {
            let s2 = f(&s, l, i);
            obs.extend_from_slice(&s);
            next.extend_from_slice(&s2);
            s = s2;
        }
        Dataset {
            obs_shape: vec![d],
            observations: obs.into(),
            next_observations: next.into(),
            rewards: vec![0.0; n],
            terminals: vec![false; n],
            timeouts: None,
            next_missing: None,
            actions: None,
        }
    }

    fn labels(n: usize, k: u32) -> Vec<u32> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        (0..n).map(|_| rng.random_range(0..k)).collect()
    }

    /// A point mass: the label pushes the velocity, the velocity moves the position, a
    /// battery drains on its own with noise. The position moves only over many steps;
    /// the battery never, whatever its noise.
    #[test]
    fn a_position_moves_over_many_steps_and_a_battery_never() {
        use rand::{Rng, SeedableRng};
        let n = 20_000;
        let l = labels(n, 4);
        let noise: Vec<f32> = {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
            (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
        };
        let data = rolled(n, vec![0.0, 0.0, 1.0, 3.0], &l, |s, a, i| {
            let push = [-0.1, 0.1, -0.05, 0.05][a as usize];
            let v = 0.9 * s[1] + push;
            let x = 0.995 * s[0] + v;
            vec![x, v, s[2] - 1e-5 + 1e-4 * noise[i], s[3]]
        });
        let moved = moved_by_labels(&data, &l, 4).unwrap();
        let m: Vec<f32> = moved[..3].iter().map(|m| m.unwrap()).collect();
        assert!(m[0] > MOVED && m[1] > MOVED, "{moved:?}");
        assert!(m[2] < 0.01, "{moved:?}");
        assert_eq!(moved[3], None, "a value that never varies: {moved:?}");
        assert_eq!(unmoved_by_labels(&moved), vec![2]);
    }

    /// Trajectories too short to see a position move give no measure; so do images,
    /// and labels that do not fit the data.
    #[test]
    fn no_measure_without_long_trajectories() {
        let n = 5_000;
        let l = labels(n, 2);
        let mut data = rolled(n, vec![0.0], &l, |s, a, _| vec![s[0] + a as f32]);
        assert!(moved_by_labels(&data, &l, 2).is_some());
        assert!(moved_by_labels(&data, &l[1..], 2).is_none());
        assert!(moved_by_labels(&data, &l, 1).is_none());
        data.terminals = (0..n).map(|i| i % 50 == 49).collect();
        assert!(moved_by_labels(&data, &l, 2).is_none());
    }

    #[test]
    fn least_squares_residuals_are_those_of_the_fit() {
        // y = 2 + 3 x exactly: no residual with x, the spread of y without it.
        let mut fit = Normal::new(2, 1);
        let xs = [0.0, 1.0, 2.0, 3.0];
        for &x in &xs {
            fit.add(&[1.0, x], &[2.0 + 3.0 * x]);
        }
        assert!(fit.residuals(2)[0] < 1e-6);
        let ys: Vec<f64> = xs.iter().map(|x| 2.0 + 3.0 * x).collect();
        let mean = ys.iter().sum::<f64>() / 4.0;
        let ss: f64 = ys.iter().map(|y| (y - mean).powi(2)).sum();
        assert!((fit.residuals(1)[0] - ss).abs() < 1e-6);
    }
}
