//! Hard-EM assignment: each transition's latent action is the arg-min of the forward
//! model's error, with the anti-collapse rule that keeps every latent action in use.

use super::*;

/// Hard-EM assignment of a batch: each sample to its lowest-error latent action, except
/// that, when `forced > 0`, every action i first takes the `forced` lowest-error samples
/// not yet taken, so no latent action goes dead.
pub fn assign(errors: &[f32], k: usize, forced: usize) -> Vec<u32> {
    let b = errors.len() / k;
    let mut out: Vec<u32> = errors
        .chunks_exact(k)
        .map(|row| crate::util::stats::argmin_f32(row) as u32)
        .collect();
    if forced > 0 {
        let mut taken = vec![false; b];
        let mut order: Vec<usize> = (0..b).collect();
        for i in 0..k {
            order.sort_by(|&x, &y| {
                errors[x * k + i]
                    .total_cmp(&errors[y * k + i])
                    .then(x.cmp(&y))
            });
            let mut n = 0;
            for &j in &order {
                if n == forced {
                    break;
                }
                if !taken[j] {
                    taken[j] = true;
                    out[j] = i as u32;
                    n += 1;
                }
            }
        }
    }
    out
}

/// Per latent action, over recent batches: the error left on the samples it wins
/// (`residual`, high when it averages two real actions) and how much the loss would grow
/// if it were removed (`removal`: second-best minus best error; near 0 for a duplicate).
#[derive(Clone, Debug, Default)]
pub struct Usage {
    pub residual: Vec<f64>,
    pub removal: Vec<f64>,
}

impl Usage {
    fn add(&mut self, errors: &[f32], k: usize) {
        self.residual.resize(k, 0.0);
        self.removal.resize(k, 0.0);
        for row in errors.chunks_exact(k) {
            let best = crate::util::stats::argmin_f32(row);
            let second = row
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != best)
                .fold(f32::INFINITY, |m, (_, &e)| m.min(e));
            self.residual[best] += row[best] as f64;
            if second.is_finite() {
                self.removal[best] += (second - row[best]) as f64;
            }
        }
    }

    /// `(duplicate, overloaded)` when re-seeding the cheapest-to-remove latent action at
    /// the one with the most residual error is expected to lower the loss.
    pub(super) fn split(&self) -> Option<(usize, usize)> {
        let dup =
            (0..self.removal.len()).min_by(|&a, &b| self.removal[a].total_cmp(&self.removal[b]))?;
        let bad = (0..self.residual.len())
            .max_by(|&a, &b| self.residual[a].total_cmp(&self.residual[b]))?;
        // Half the overloaded action's residual is what a split can recover at best.
        (dup != bad && 0.5 * self.residual[bad] > self.removal[dup]).then_some((dup, bad))
    }
}

/// One hard-EM step on a batch, each value's squared error weighted by `w` `[D]` where
/// given; returns the batch's hard-min loss (as trained) and the picked rows' squared
/// errors `[B, D]`, unweighted.
pub fn train_step(
    model: &dyn Predictor,
    opt: &mut Adam,
    s: &Tensor,
    s2: &Tensor,
    w: Option<&Tensor>,
    forced: usize,
    mut usage: Option<&mut Usage>,
) -> Result<(f32, Tensor)> {
    let k = model.num_actions();
    let picked = model.assigned_loss(s, s2, w, &mut |errors| {
        if let Some(u) = usage.as_deref_mut() {
            u.add(errors, k);
        }
        assign(errors, k, forced)
    })?;
    let value = picked.loss.to_scalar::<f32>()?;
    opt.backward_step(&picked.loss)?;
    Ok((value, picked.squared))
}
