//! Whether to trust a run's V, judged without any ground truth: checks of the data, the
//! labels and the value function that a run can make on its own, each with its number,
//! its threshold and the reason it matters, and a verdict.
//!
//! The checks and their thresholds were set against runs whose true ranking was known
//! (docs/trust.md has the table of verdicts against Spearman with the ground truth); the
//! verdict is `trusted` only when every check that applies passes.

use crate::data::Dataset;
use crate::util::stats;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The verdict on a run's V.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Trusted,
    Doubtful,
}

/// One check: its value against its threshold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub value: f64,
    pub threshold: f64,
    pub pass: bool,
    /// What the check tells, in plain words.
    pub why: String,
}

/// `metrics.json["trust"]`: the verdict and every check made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trust {
    pub verdict: Verdict,
    pub checks: Vec<Check>,
}

impl Trust {
    /// The failed checks (none for a trusted V).
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.pass)
    }
}

impl fmt::Display for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.verdict {
            Verdict::Trusted => writeln!(
                f,
                "verdict: trusted (all {} checks pass; no ground truth involved)",
                self.checks.len()
            )?,
            Verdict::Doubtful => {
                let failed: Vec<&str> = self.failed().map(|c| c.name.as_str()).collect();
                writeln!(
                    f,
                    "verdict: DOUBTFUL ({} of {} checks fail: {})",
                    failed.len(),
                    self.checks.len(),
                    failed.join(", ")
                )?;
                for c in self.failed().take(2) {
                    writeln!(f, "  {}: {}", c.name, c.why)?;
                }
            }
        }
        for c in &self.checks {
            writeln!(
                f,
                "  {} {:<20} {:>8.3} (threshold {})",
                if c.pass { "pass" } else { "FAIL" },
                c.name,
                c.value,
                c.threshold
            )?;
        }
        Ok(())
    }
}

/// Whether `a` is the better of two runs' V by the checks alone: more checks passed,
/// then the better ranking of the data's rewarded trajectories.
pub fn preferred(a: &Trust, b: &Trust) -> bool {
    let passed = |t: &Trust| t.checks.iter().filter(|c| c.pass).count();
    let ranking = |t: &Trust| {
        t.checks
            .iter()
            .find(|c| c.name == "trajectory_ranking")
            .map_or(f64::NEG_INFINITY, |c| c.value)
    };
    (passed(a), ranking(a)) > (passed(b), ranking(b))
}

/// What a run knows about its own V.
pub struct Evidence<'a> {
    pub data: &'a Dataset,
    pub labels: &'a [u32],
    pub num_actions: usize,
    /// For mined labels: the forward model's final loss per value of the standardised
    /// next states, and the loss of as many clusters of the next states alone.
    pub dynamics: Option<(f64, f64)>,
    /// V of every observation of `data`, as the exported model computes it.
    pub values: &'a [f32],
    /// V of every observation from a second Q-function, trained on the same labels from
    /// another seed.
    pub second: Option<&'a [f32]>,
    /// V of probe states at the last two checkpoints of training.
    pub last_snapshots: Option<(&'a [f32], &'a [f32])>,
    /// The largest possible return.
    pub max_return: f64,
}

fn check(name: &str, value: f64, threshold: f64, pass: bool, why: String) -> Check {
    Check {
        name: name.to_string(),
        value,
        threshold,
        pass: pass && value.is_finite(),
        why,
    }
}

/// The checks that apply to this run, and the verdict.
pub fn assess(e: &Evidence) -> Trust {
    let data = e.data;
    let n = data.len();
    let mut checks = vec![];
    let rewarded = data.rewards.iter().filter(|&&r| r != 0.0).count();
    checks.push(check(
        "rewards",
        rewarded as f64,
        1.0,
        rewarded >= 1,
        format!("{rewarded} of {n} transitions carry a reward; without any, every V is 0"),
    ));
    let mut usage = vec![0usize; e.num_actions];
    for &l in e.labels {
        usage[l as usize] += 1;
    }
    let used = usage.iter().filter(|&&u| u * 100 >= e.labels.len()).count();
    let top = usage.iter().copied().max().unwrap_or(0) as f64 / e.labels.len().max(1) as f64;
    checks.push(check(
        "labels_used",
        used as f64,
        2.0,
        used >= 2 && top <= 0.9,
        format!(
            "{used} of {} labels label at least 1% of the transitions, the largest {:.0}%; \
             with one label V is the value of the data's behaviour, not of the best \
             controller",
            e.num_actions,
            100.0 * top
        ),
    ));
    if let Some((model, clusters)) = e.dynamics {
        let gain = if clusters > 0.0 {
            1.0 - model / clusters
        } else {
            0.0
        };
        checks.push(check(
            "dynamics_explained",
            gain,
            0.5,
            gain >= 0.5,
            format!(
                "knowing s, the forward model leaves {:.0}% of the error of {} clusters of \
                 s' alone; when s does not predict s' (shuffled or mismatched rows) the \
                 latent actions are clusters of s', not actions",
                100.0 * (1.0 - gain),
                e.num_actions
            ),
        ));
    }
    let traces = data.steps_to_reward();
    if traces.len() >= 20 {
        let v: Vec<f64> = traces.iter().map(|&(i, _)| e.values[i] as f64).collect();
        let k: Vec<f64> = traces.iter().map(|&(_, k)| -(k as f64)).collect();
        let rho = stats::spearman(&v, &k);
        checks.push(check(
            "trajectory_ranking",
            rho,
            0.3,
            rho >= 0.3,
            format!(
                "along the data's own {} rewarded trajectory steps, V ranks states closer to \
                 the reward higher at Spearman {rho:.2}; a V that does not, ranks states \
                 by something else",
                traces.len()
            ),
        ));
    }
    if let Some(second) = e.second {
        let a: Vec<f64> = e.values.iter().map(|&x| x as f64).collect();
        let b: Vec<f64> = second.iter().map(|&x| x as f64).collect();
        let rho = stats::spearman(&a, &b);
        checks.push(check(
            "seed_agreement",
            rho,
            0.85,
            rho >= 0.85,
            format!(
                "a second Q-function from another seed ranks the data's states like this one \
                 at Spearman {rho:.2}; values that depend on the seed are noise"
            ),
        ));
    }
    if let Some((before, last)) = e.last_snapshots {
        let a: Vec<f64> = before.iter().map(|&x| x as f64).collect();
        let b: Vec<f64> = last.iter().map(|&x| x as f64).collect();
        let rho = stats::spearman(&a, &b);
        checks.push(check(
            "converged",
            rho,
            0.9,
            rho >= 0.9,
            format!(
                "V's ranking of probe states at the last two checkpoints agrees at Spearman \
                 {rho:.2}; a ranking still changing has not converged (train longer)"
            ),
        ));
    }
    let top = e.max_return * 0.95;
    let saturated = e.values.iter().filter(|&&v| v as f64 >= top).count() as f64 / n.max(1) as f64;
    checks.push(check(
        "not_saturated",
        saturated,
        0.25,
        saturated <= 0.25,
        format!(
            "{:.0}% of the data's states have V within 5% of the largest possible return \
             ({:.3}); an over-estimated V is high everywhere and ranks nothing",
            100.0 * saturated,
            e.max_return
        ),
    ));
    let verdict = if checks.iter().all(|c| c.pass) {
        Verdict::Trusted
    } else {
        Verdict::Doubtful
    };
    Trust { verdict, checks }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Dataset;

    /// A chain 0 -> 1 -> ... -> 9 rewarded at the end, twice.
    fn chain() -> Dataset {
        let (mut o, mut nx, mut r, mut t) = (vec![], vec![], vec![], vec![]);
        for _ in 0..3 {
            for s in 0..10 {
                o.push(s as f32);
                nx.push(s as f32 + 1.0);
                r.push(if s == 9 { 1.0 } else { 0.0 });
                t.push(s == 9);
            }
        }
        Dataset {
            obs_shape: vec![1],
            observations: o.into(),
            next_observations: nx.into(),
            rewards: r,
            terminals: t,
            timeouts: None,
            next_missing: None,
            actions: None,
        }
    }

    #[test]
    fn steps_to_reward_follow_trajectories() {
        let d = chain();
        let k = d.steps_to_reward();
        assert_eq!(k.len(), 30);
        assert!(k.contains(&(0, 9)) && k.contains(&(9, 0)) && k.contains(&(20, 9)));
    }

    #[test]
    fn a_good_v_is_trusted_and_a_flat_one_is_not() {
        let d = chain();
        let labels: Vec<u32> = (0..30).map(|i| (i % 2) as u32).collect();
        let good: Vec<f32> = (0..30).map(|i| 0.9f32.powi(9 - (i % 10))).collect();
        let e = Evidence {
            data: &d,
            labels: &labels,
            num_actions: 2,
            dynamics: Some((1e-3, 0.3)),
            values: &good,
            second: Some(&good),
            last_snapshots: Some((&good, &good)),
            max_return: 1.0,
        };
        let t = assess(&e);
        assert_eq!(t.verdict, Verdict::Trusted, "{t}");
        let flat = vec![1.0f32; 30];
        let reversed: Vec<f32> = good.iter().map(|v| 1.0 - v).collect();
        let bad = assess(&Evidence {
            values: &flat,
            second: Some(&reversed),
            ..e
        });
        assert_eq!(bad.verdict, Verdict::Doubtful);
        let failed: Vec<&str> = bad.failed().map(|c| c.name.as_str()).collect();
        assert!(failed.contains(&"not_saturated"), "{bad}");
        assert!(failed.contains(&"seed_agreement"), "{bad}");
        assert!(bad.to_string().contains("DOUBTFUL"));
    }
}
