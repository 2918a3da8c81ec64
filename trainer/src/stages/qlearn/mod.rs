//! Offline Q-learning on labelled transitions `(s, a, s', r)`: tabular Q-learning for
//! discrete observations and Double DQN for anything else (a convolutional Q-network for
//! image observations). V(s) = max_a Q(s, a).

mod dqn;
mod fit;
mod network;
mod tabular;

pub use dqn::{dqn, dqn_group, dqn_step, Batch, DqnInputs, Losses};

use dqn::bcq_allowed;
pub use fit::{distill, fit, fit_image, fit_one_norm, DistillConfig};
pub use network::{is_qnet_file, ConvQ, QModel, QNetwork, QNET_FORMAT, QNET_VERSION};
pub use tabular::{is_tabular, tabular, Table};

use crate::data::Dataset;
use crate::nn::conv::{Arch, ChannelNorm, ConvConfig, Encoder, ImageShape};
use crate::nn::inputs::Inputs;
use crate::nn::{self, Adam, AdamConfig, Mlp};
use crate::stages::checkpoint::{Checkpointer, State};
use crate::util::progress;
use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use candle_nn::{Module, Optimizer, VarBuilder, VarMap};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Which Q-learning to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum QKind {
    /// Tabular when every observation is integer-valued and there are at most
    /// `MAX_TABLE_STATES` distinct ones; IQL on vector states whose episodes the log cuts
    /// at their rewards (`reward_cuts_end`) or whose near states are no ways a body can
    /// take (`iql_without_ways`); DQN otherwise.
    Auto,
    Tabular,
    /// Double DQN.
    Dqn,
    /// Discrete BCQ: the bootstrap action is restricted to labels the data makes likely.
    Bcq,
    /// Discrete CQL: Q of actions the data does not take is pushed down.
    Cql,
    /// Expectile value learning (IQL-style): V(s) is an upper expectile of Q(s, a) over
    /// the labels the data shows in s, and Q(s, a) = r + gamma V(s'); no maximum is taken
    /// over labels a state never had. The exported model is V itself.
    Iql,
}

impl QKind {
    /// The name settings, files and reports use (`auto` stays `auto`: resolve it first).
    pub fn name(self) -> &'static str {
        match self {
            QKind::Auto => "auto",
            QKind::Tabular => "tabular",
            QKind::Dqn => "dqn",
            QKind::Bcq => "bcq",
            QKind::Cql => "cql",
            QKind::Iql => "iql",
        }
    }
}

/// Largest number of distinct observations `auto` sends to the tabular learner.
pub const MAX_TABLE_STATES: usize = 65536;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TabularConfig {
    pub gamma: f64,
    pub lr: f64,
    /// Passes over the data, each in a fresh seeded random order.
    pub passes: usize,
    /// Entries no transition showed are exported at their state's V (an in-support
    /// maximum a fitted network follows more closely), rather than at the least shown
    /// value below 0, or 0. [`crate::run::config::TrainConfig::for_data`] sets it where
    /// the rewards are a cost per step (docs/trust.md, "A cost until the end").
    #[serde(default)]
    pub unshown_at_value: bool,
}

impl Default for TabularConfig {
    /// The authors' grid-world settings: gamma 0.95, learning rate 0.3, 3 passes.
    fn default() -> Self {
        TabularConfig {
            gamma: 0.95,
            lr: 0.3,
            passes: 3,
            unshown_at_value: false,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DqnConfig {
    pub hidden: Vec<usize>,
    pub gamma: f64,
    pub lr: f64,
    pub batch_size: usize,
    pub steps: usize,
    /// Steps between copies of the online network into the target network.
    pub target_update: usize,
    /// BCQ: an action may bootstrap when its imitation probability is at least this
    /// share of the most likely action's. Undirected data with action noise show most
    /// latent actions in most states, so the filter need only drop the truly unseen:
    /// on U-maze data (3 seeds), 0.3 (discrete BCQ's usual value) gave Spearman 0.91
    /// against the ground-truth-action V at the 95th-percentile checkpoint and 0.75 at
    /// the last; 0.1 gave 0.97 / 0.92; 0.03 gave 0.98 / 0.92.
    pub bcq_threshold: f64,
    /// CQL: weight of the conservative term logsumexp_a Q(s, a) - Q(s, a_data). Its
    /// gradient does not grow with the scale of Q while the TD term's does, so with
    /// returns up to 1/(1-gamma) a small weight suffices: on U-maze data, 1.0 turned the
    /// ranking upside down (Spearman -0.24 against the oracle) and 0.05 gave 0.90. In
    /// units where returns reach `return_scale`, the weight is that many times this.
    pub cql_alpha: f64,
    /// Number of evenly spaced checkpoints at which `probe` states are evaluated.
    pub checkpoints: usize,
    /// Weight of the data's own trajectories in the targets: the target of a transition
    /// mixes the bootstrap at the next state B (weight 1 - lambda) with max(B, the return
    /// of the transition that follows it in the data) (weight lambda). 0 is one-step
    /// Q-learning. With lambda > 0 the targets of every transition are recomputed from the
    /// target networks at each target update, so value travels along whole trajectories
    /// per update instead of one step; the maximum keeps a behaviour that wanders off a
    /// reward from dragging V below the best action's value (plain lambda-returns did:
    /// guidance on our U-maze fell from 97% to 6%).
    #[serde(default)]
    pub lambda: f64,
    /// IQL: the expectile of Q(s, a) over the data's labels that V(s) fits (0.5 is the
    /// mean, towards 1 the maximum over the labels seen).
    #[serde(default = "default_expectile")]
    pub expectile: f64,
    /// Network kind: `auto` is convolutional for image observations `[C, H, W]` (a
    /// convolutional trunk, then `hidden` fully connected layers).
    #[serde(default)]
    pub arch: Arch,
    /// The convolutional trunk (used when the network is convolutional).
    #[serde(default)]
    pub conv: ConvConfig,
    /// The largest return in the units Q-learning learns in: the rewards are multiplied by
    /// this over the largest return the data allows ([`return_bounds`]), and every value
    /// is divided back before it leaves Q-learning. Adam moves each weight by about its
    /// learning rate whatever the targets' size, so in units of 1 the network's noise is
    /// as large as the differences between far states. With it set, a log's rewards in any
    /// units train alike. 0 (the default) learns in the data's own units: no unit was best
    /// on every data set measured (docs/trust.md, "The units of Q-learning").
    #[serde(default)]
    pub return_scale: f64,
}

fn default_expectile() -> f64 {
    0.9
}

impl Default for DqnConfig {
    /// The authors' network (in-128-128-K) and discount; batch, steps and target period
    /// are sized for datasets of a few hundred thousand transitions.
    fn default() -> Self {
        DqnConfig {
            hidden: vec![128, 128],
            gamma: 0.99,
            lr: 5e-4,
            batch_size: 64,
            steps: 20000,
            target_update: 500,
            bcq_threshold: 0.03,
            cql_alpha: 0.05,
            checkpoints: 10,
            lambda: 0.0,
            expectile: default_expectile(),
            arch: Arch::Auto,
            conv: ConvConfig::default(),
            return_scale: 0.0,
        }
    }
}

impl DqnConfig {
    /// What Q-learning multiplies the rewards by, for returns within `(lo, hi)`
    /// ([`DqnConfig::return_scale`]); 1 where the setting or the largest return is 0.
    ///
    /// ```
    /// use laq::stages::qlearn::DqnConfig;
    /// let cfg = DqnConfig { return_scale: 100.0, ..DqnConfig::default() };
    /// assert_eq!(cfg.reward_factor((0.0, 1.0)), 100.0);
    /// assert_eq!(cfg.reward_factor((-400.0, 0.0)), 0.25);
    /// assert_eq!(cfg.reward_factor((0.0, 0.0)), 1.0);
    /// let old = DqnConfig { return_scale: 0.0, ..cfg };
    /// assert_eq!(old.reward_factor((0.0, 1.0)), 1.0);
    /// ```
    pub fn reward_factor(&self, (lo, hi): (f32, f32)) -> f32 {
        let largest = f64::from(lo.abs().max(hi.abs()));
        match self.return_scale > 0.0 && largest > 0.0 {
            true => (self.return_scale / largest) as f32,
            false => 1.0,
        }
    }
}

fn check_labels(labels: &[u32], k: usize, n: usize) -> Result<()> {
    if labels.len() != n {
        bail!("{} labels for {n} transitions", labels.len());
    }
    if let Some(i) = labels.iter().position(|&l| l as usize >= k) {
        bail!(
            "label {} of transition {i} is out of range for {k} actions",
            labels[i]
        );
    }
    Ok(())
}

/// The range that discounted returns can take given the data's rewards. When every
/// rewarded transition ends its episode, a return is at most one reward.
pub fn return_bounds(data: &Dataset, gamma: f64) -> (f32, f32) {
    let rmin = data.rewards.iter().copied().fold(0f32, f32::min) as f64;
    let rmax = data.rewards.iter().copied().fold(0f32, f32::max) as f64;
    let rewarded_end = data
        .rewards
        .iter()
        .zip(&data.terminals)
        .all(|(&r, &t)| r == 0.0 || t);
    if rewarded_end {
        (rmin as f32, rmax as f32)
    } else {
        ((rmin / (1.0 - gamma)) as f32, (rmax / (1.0 - gamma)) as f32)
    }
}

/// The most each transition's next state can be worth by the ways the data shows
/// ([`DqnInputs::bound`]): the largest return (`max_return`) discounted by the fewest
/// steps from the next state to a reward through the data (`steps.next` of
/// [`crate::data::paths::fewest_steps`]), after as many steps of the data's `baseline`
/// reward ([`Dataset::reward_baseline`]: 0, or a cost per step); where the data shows no
/// way, the baseline for ever (0 without a cost). Offline Q-learning can only chain what
/// the data shows, so a bootstrap above it is value that leaked in through the network's
/// smoothness (through a wall, say), which the maximum over labels would keep and pass
/// on, target copy after copy (docs/trust.md, "Bounded by the data's ways").
///
/// ```
/// use laq::stages::qlearn::path_bound;
///
/// let steps = [0.0, 10.0, f64::INFINITY];
/// let b = path_bound(&steps, 0.9, 1.0, 0.0);
/// assert_eq!(b[0], 1.0);
/// assert!((b[1] - 0.9f32.powi(10)).abs() < 1e-6);
/// assert_eq!(b[2], 0.0);
/// // -1 a step up to 0 at the goal: ten steps of cost at best.
/// let b = path_bound(&steps, 0.9, 0.0, -1.0);
/// assert_eq!(b[0], 0.0);
/// assert!((b[1] + (1.0 - 0.9f32.powi(10)) / 0.1).abs() < 1e-5);
/// assert!((b[2] + 10.0).abs() < 1e-5);
/// ```
pub fn path_bound(next_steps: &[f64], gamma: f64, max_return: f32, baseline: f32) -> Vec<f32> {
    let cost = |k: f64| match baseline {
        0.0 => 0.0,
        b if k.is_finite() => b as f64 * (1.0 - gamma.powf(k)) / (1.0 - gamma),
        b => b as f64 / (1.0 - gamma),
    };
    next_steps
        .iter()
        .map(|&k| match k.is_finite() {
            true => (max_return as f64 * gamma.powf(k) + cost(k)) as f32,
            false => cost(k) as f32,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`dqn`] from the inputs' parts.
    #[allow(clippy::too_many_arguments)]
    fn dqn_of(
        data: &Dataset,
        labels: &[u32],
        num_actions: usize,
        cfg: &DqnConfig,
        variant: QKind,
        probe: Option<&[f32]>,
        seed: u64,
        device: &Device,
    ) -> Result<QNetwork> {
        let inputs = DqnInputs {
            data,
            labels,
            num_actions,
            variant,
            probe,
            bound: None,
        };
        dqn(&inputs, cfg, seed, device, None)
    }
    use crate::envs::gridworld::{GridWorld, GAMMA};

    fn gt_labels(data: &Dataset) -> Vec<u32> {
        let a = data.discrete_actions("test").unwrap();
        a.iter().map(|&a| a as u32).collect()
    }

    #[test]
    fn tabular_with_true_actions_recovers_optimal_values() {
        let g = GridWorld::default();
        let data = g.generate(3000, 0, 0.0);
        let labels = gt_labels(&data);
        let cfg = TabularConfig {
            passes: 20,
            ..Default::default()
        };
        let t = tabular(&data, &labels, 8, &cfg, 0).unwrap();
        let opt = g.optimal_values(GAMMA);
        for s in 0..36 {
            let (r, c) = g.cell(s);
            let v = t.value(&[r as f32, c as f32]).unwrap();
            assert!((v - opt[s]).abs() < 0.05, "state {s}: {v} vs {}", opt[s]);
        }
        // One action evaluates the behaviour policy: far below optimal at the start.
        let one = tabular(&data, &vec![0; data.len()], 1, &cfg, 0).unwrap();
        assert!(one.value(&[0.0, 0.0]).unwrap() < opt[0] - 0.1);
    }

    /// A cost per step, the goal marked only by ending the episode there (gymnasium's
    /// CliffWalking and MountainCar): the table learns the cost to the goal. Before, an
    /// entry no transition showed kept its initial 0, the largest of any, and every V
    /// was 0.
    #[test]
    fn tabular_learns_a_cost_to_the_goal() {
        // Walks along 10 cells from anywhere to a goal at the last, -1 on every step
        // (the last too), with two labels of three: on (step right) and back (step
        // left); the third labels nothing, as a label may label nothing a state shows.
        let mut rows = vec![];
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        while rows.len() < 4000 {
            let mut p = rng.random_range(0..10usize);
            for _ in 0..60 {
                let on = rng.random_bool(0.7);
                let q = if on { p + 1 } else { p.saturating_sub(1) };
                rows.push((p, q, on));
                if q == 10 {
                    break;
                }
                p = q;
            }
        }
        let n = rows.len();
        let data = Dataset {
            obs_shape: vec![1],
            observations: rows.iter().map(|r| r.0 as f32).collect::<Vec<_>>().into(),
            next_observations: rows.iter().map(|r| r.1 as f32).collect::<Vec<_>>().into(),
            rewards: vec![-1.0; n],
            terminals: rows.iter().map(|r| r.1 == 10).collect(),
            timeouts: None,
            next_missing: None,
            actions: None,
        };
        let labels: Vec<u32> = rows.iter().map(|r| u32::from(r.2)).collect();
        let cfg = TabularConfig::default();
        let t = tabular(&data, &labels, 3, &cfg, 0).unwrap();
        for p in 0..10 {
            let k = 10 - p;
            let want = -(1.0 - cfg.gamma.powi(k)) / (1.0 - cfg.gamma);
            let v = t.value(&[p as f32]).unwrap();
            assert!((v - want).abs() < 1e-3, "cell {p}: {v} against {want}");
        }
    }

    #[test]
    fn deep_variants_learn_the_grid() {
        let g = GridWorld::default();
        let data = g.generate(1000, 0, 0.0);
        let labels = gt_labels(&data);
        let cfg = DqnConfig {
            steps: 3000,
            checkpoints: 3,
            gamma: 0.95,
            ..Default::default()
        };
        let probe = [0.0f32, 0.0, 4.0, 4.0, 2.0, 2.0];
        let lambda = DqnConfig {
            lambda: 0.8,
            target_update: 300,
            ..cfg.clone()
        };
        let runs = [
            (QKind::Dqn, &cfg),
            (QKind::Bcq, &cfg),
            (QKind::Cql, &cfg),
            (QKind::Iql, &cfg),
            (QKind::Dqn, &lambda),
            (QKind::Iql, &lambda),
        ];
        for (variant, cfg) in runs {
            let net = dqn_of(
                &data,
                &labels,
                8,
                cfg,
                variant,
                Some(&probe),
                0,
                &Device::Cpu,
            )
            .unwrap();
            let v = net.values(&probe, &Device::Cpu).unwrap();
            assert!(v.iter().all(|x| x.is_finite()), "{variant:?} {v:?}");
            assert!(v[1] > v[0], "{variant:?}: V(4,4) > V(0,0) fails: {v:?}");
            // BCQ and IQL only bootstrap through actions the data makes likely (IQL: an
            // upper expectile over them), and lambda-returns follow the data's own
            // trajectories: in the interior this behaviour leads away from the goal, so
            // their V(2,2) may stay low.
            if !matches!(variant, QKind::Bcq | QKind::Iql) && cfg.lambda == 0.0 {
                assert!(
                    v[1] > v[2] && v[2] > v[0],
                    "{variant:?}: V(4,4) > V(2,2) > V(0,0) fails: {v:?}"
                );
            }
            assert_eq!(net.checkpoints.len(), 3);
            assert_eq!(net.imitation.is_some(), variant == QKind::Bcq);
            assert_eq!(net.value.is_some(), variant == QKind::Iql);
        }
        assert!(dqn_of(
            &data,
            &labels,
            8,
            &cfg,
            QKind::Tabular,
            None,
            0,
            &Device::Cpu
        )
        .is_err());
    }

    /// Q-learning learns in its own units: a log whose rewards are ten times as large
    /// trains the same networks, its values ten times as large, with every variant and
    /// along the trajectories; in the data's own units (`return_scale` 0) it does not.
    #[test]
    fn rewards_in_other_units_train_the_same_v() {
        let g = GridWorld::default();
        let data = g.generate(300, 0, 0.0);
        let tenfold = Dataset {
            rewards: data.rewards.iter().map(|r| r * 10.0).collect(),
            ..data.clone()
        };
        let labels = gt_labels(&data);
        let dev = Device::Cpu;
        let probe: Vec<f32> = (0..36)
            .flat_map(|s| [(s / 6) as f32, (s % 6) as f32])
            .collect();
        let cfg = DqnConfig {
            hidden: vec![16],
            steps: 300,
            target_update: 100,
            checkpoints: 2,
            gamma: 0.95,
            lr: 5e-3,
            return_scale: 100.0,
            ..Default::default()
        };
        let lambda = DqnConfig {
            lambda: 1.0,
            ..cfg.clone()
        };
        let v = |d: &Dataset, cfg: &DqnConfig, variant| {
            let net = dqn_of(d, &labels, 8, cfg, variant, Some(&probe), 3, &dev).unwrap();
            (net.values(&probe, &dev).unwrap(), net.checkpoints)
        };
        for (cfg, variant) in [
            (&cfg, QKind::Dqn),
            (&lambda, QKind::Dqn),
            (&cfg, QKind::Cql),
            (&lambda, QKind::Bcq),
            (&lambda, QKind::Iql),
        ] {
            let ((one, at_one), (ten, at_ten)) =
                (v(&data, cfg, variant), v(&tenfold, cfg, variant));
            let alike = |a: &[f32], b: &[f32]| {
                a.iter()
                    .zip(b)
                    .all(|(a, b)| (10.0 * a - b).abs() <= 1e-4 * b.abs().max(1.0))
            };
            assert!(alike(&one, &ten), "{variant:?}: {one:?} against {ten:?}");
            assert!(
                one.iter().any(|&x| x > 0.1),
                "{variant:?} learned nothing: {one:?}"
            );
            for ((s, a), (t, b)) in at_one.iter().zip(&at_ten) {
                assert!(s == t && alike(a, b), "{variant:?}, checkpoint at {s}");
            }
        }
        let own = DqnConfig {
            return_scale: 0.0,
            ..cfg.clone()
        };
        let (one, ten) = (
            v(&data, &own, QKind::Dqn).0,
            v(&tenfold, &own, QKind::Dqn).0,
        );
        assert!(one
            .iter()
            .zip(&ten)
            .any(|(a, b)| (10.0 * a - b).abs() > 1e-3));
    }

    /// Within a group, a member's lambda-return targets value the label its own target
    /// network prefers by the next member's Q; one-step targets stay its own, so with
    /// lambda 0 each member is the network its seed trains alone.
    #[test]
    fn grouped_members_bootstrap_from_each_other() {
        let g = GridWorld::default();
        let data = g.generate(300, 0, 0.0);
        let labels = gt_labels(&data);
        let dev = Device::Cpu;
        let cfg = DqnConfig {
            hidden: vec![16],
            steps: 400,
            target_update: 100,
            checkpoints: 2,
            gamma: 0.95,
            lambda: 1.0,
            ..Default::default()
        };
        let inputs = DqnInputs {
            data: &data,
            labels: &labels,
            num_actions: 8,
            variant: QKind::Dqn,
            probe: None,
            bound: None,
        };
        let probe: Vec<f32> = (0..36)
            .flat_map(|s| [(s / 6) as f32, (s % 6) as f32])
            .collect();
        let v = |n: &QNetwork| n.values(&probe, &dev).unwrap();
        // Valued by itself, a network's V is its maximum; by another, that one's Q at
        // this one's choice.
        let (a, b) = (
            dqn(&inputs, &cfg, 1, &dev, None).unwrap(),
            dqn(&inputs, &cfg, 2, &dev, None).unwrap(),
        );
        let x = crate::util::stats::standardise(&probe, &a.mean, &a.std);
        assert_eq!(a.values_judged_by(&a, x.clone(), &dev).unwrap(), v(&a));
        let judged = a.values_judged_by(&b, x, &dev).unwrap();
        let (qa, qb) = (
            a.q_values(&probe, &dev).unwrap(),
            b.q_values(&probe, &dev).unwrap(),
        );
        for (j, (ra, rb)) in qa.iter().zip(&qb).enumerate() {
            let best = (0..ra.len()).fold(0, |m, k| if ra[k] > ra[m] { k } else { m });
            assert_eq!(judged[j], rb[best], "state {j}");
        }
        assert!(judged.iter().zip(v(&a)).any(|(x, y)| *x != y));
        // A group of two: deterministic, and coupled.
        let group = dqn_group(&inputs, &cfg, &[1, 2], &dev, None).unwrap();
        let again = dqn_group(&inputs, &cfg, &[1, 2], &dev, None).unwrap();
        assert_eq!(group.len(), 2);
        assert_eq!(v(&group[1]), v(&again[1]));
        assert_ne!(v(&group[0]), v(&a));
        assert_ne!(v(&group[1]), v(&b));
        // One-step targets: each member is its seed's network alone.
        let one = DqnConfig {
            lambda: 0.0,
            ..cfg.clone()
        };
        let group = dqn_group(&inputs, &one, &[1, 2], &dev, None).unwrap();
        assert_eq!(v(&group[0]), v(&dqn(&inputs, &one, 1, &dev, None).unwrap()));
        assert_eq!(v(&group[1]), v(&dqn(&inputs, &one, 2, &dev, None).unwrap()));
    }

    /// A chain of frames (a square on one row, left or right, reward at column 7): the
    /// convolutional DQN ranks the columns by their distance to the reward, and the same
    /// seed gives the same network.
    #[test]
    fn conv_dqn_learns_a_chain_of_frames() {
        let data = crate::envs::squares::moving_squares(1500, 32, true, 0);
        let labels = gt_labels(&data);
        let cfg = DqnConfig {
            hidden: vec![32],
            gamma: 0.9,
            lr: 1e-3,
            batch_size: 32,
            steps: 1500,
            target_update: 100,
            checkpoints: 2,
            conv: ConvConfig {
                channels: vec![8, 8],
            },
            ..Default::default()
        };
        // One frame per column: the first transition starting there.
        let d = data.obs_dim();
        let probe: Vec<f32> = (0..7)
            .flat_map(|col| {
                let i = (0..data.len())
                    .find(|&i| {
                        let row = data.obs_row(i);
                        row[..d / 3].iter().position(|&v| v > 200.0) == Some(14 * 32 + 2 + 3 * col)
                    })
                    .unwrap();
                data.obs_row(i).into_owned()
            })
            .collect();
        let dev = Device::Cpu;
        let net = dqn_of(&data, &labels, 2, &cfg, QKind::Dqn, Some(&probe), 0, &dev).unwrap();
        assert!(net.net.is_conv());
        assert_eq!(net.mean.len(), 3);
        let v = net.values(&probe, &dev).unwrap();
        let cols: Vec<f64> = (0..7).map(|c| c as f64).collect();
        let rho =
            crate::util::stats::spearman(&cols, &v.iter().map(|&x| x as f64).collect::<Vec<_>>());
        assert!(rho > 0.9, "V by column {v:?}");
        assert!(v[6] > 0.6 && v[0] < v[6], "{v:?}");
        let again = dqn_of(&data, &labels, 2, &cfg, QKind::Dqn, Some(&probe), 0, &dev).unwrap();
        assert_eq!(again.values(&probe, &dev).unwrap(), v);
        let all: Vec<usize> = (0..data.len()).collect();
        let from_store = net.values_of(&data, &all[..50], &dev).unwrap();
        let raw: Vec<f32> = (0..50).flat_map(|i| data.obs_row(i).into_owned()).collect();
        assert_eq!(from_store, net.values(&raw, &dev).unwrap());
        assert_eq!(net.checkpoints.len(), 2);
    }

    /// `laq-qnet` files read back to the same values (BCQ's imitation network included),
    /// and are told apart from other files.
    #[test]
    fn qnet_files_round_trip() {
        let data = crate::envs::squares::moving_squares(200, 32, true, 1);
        let labels = gt_labels(&data);
        let cfg = DqnConfig {
            hidden: vec![16],
            steps: 30,
            conv: ConvConfig {
                channels: vec![4, 8],
            },
            ..Default::default()
        };
        let dev = Device::Cpu;
        let raw: Vec<f32> = (0..20).flat_map(|i| data.obs_row(i).into_owned()).collect();
        for variant in [QKind::Dqn, QKind::Bcq] {
            let net = dqn_of(&data, &labels, 2, &cfg, variant, None, 0, &dev).unwrap();
            let mut info = BTreeMap::new();
            info.insert("labels".to_string(), "gt".to_string());
            let bytes = net.to_bytes(0.9, &info).unwrap();
            assert!(is_qnet_file(&bytes));
            let (back, gamma) = QNetwork::from_bytes(&bytes, &dev).unwrap();
            assert!((gamma - 0.9).abs() < 1e-6);
            assert_eq!(back.obs_shape, vec![3, 32, 32]);
            assert_eq!(back.imitation.is_some(), variant == QKind::Bcq);
            assert_eq!(
                back.values(&raw, &dev).unwrap(),
                net.values(&raw, &dev).unwrap()
            );
        }
        assert!(!is_qnet_file(b"not a file"));
        let e = QNetwork::from_bytes(b"garbage", &dev).unwrap_err();
        assert!(format!("{e:#}").contains("safetensors"), "{e:#}");
    }

    #[test]
    fn out_of_range_labels_are_errors() {
        let data = GridWorld::default().generate(5, 0, 0.0);
        let e = tabular(&data, &vec![9; data.len()], 8, &TabularConfig::default(), 0).unwrap_err();
        assert!(e.to_string().contains("out of range"));
    }
}
