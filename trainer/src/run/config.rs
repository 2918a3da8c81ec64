//! Every setting of a training run: defaults that suit the data, TOML in and out.

use crate::data::contexts;
use crate::data::cost::CostToEnd;
use crate::data::paths;
use crate::data::read::ReadOptions;
use crate::data::Dataset;
use crate::export::density::DensityConfig;
use crate::stages::labels::LabelSource;
use crate::stages::mining::MiningConfig;
use crate::stages::qlearn::{self, DistillConfig, DqnConfig, QKind, TabularConfig};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Every setting of a training run; written to the run directory as `config.toml`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrainConfig {
    pub labels: LabelSource,
    pub q: QKind,
    pub seed: u64,
    pub mining: MiningConfig,
    pub tabular: TabularConfig,
    pub dqn: DqnConfig,
    pub distill: DistillConfig,
    /// Keep only transitions labelled with the N most used labels for Q-learning (the
    /// paper's "top 8 dominant actions"); `None` keeps all.
    #[serde(default)]
    pub top_actions: Option<usize>,
    /// Deep Q-learning: Q-functions trained from different seeds on the same labels. With
    /// 2 or more, the exported V is their mean, fitted by one network, and the trust
    /// checks compare the means of the two halves (docs/trust.md, "Ensembles", has the
    /// evidence).
    #[serde(default = "one")]
    pub ensemble: usize,
    /// With `ensemble = 1`, train a second Q-function from another seed for the trust
    /// checks (its agreement with the first is the strongest of them; it doubles the time
    /// of Q-learning), and export the one the checks prefer. An ensemble's two halves are
    /// compared instead.
    #[serde(default = "yes")]
    pub second_seed: bool,
    /// Deep Q-learning on vector states: the `halves_agree` check trains one Q-function
    /// more on each half of the data's trajectories (every other piece of them) and
    /// compares their V over all the data's states, so that a V that ranks states by what
    /// is particular to each trajectory (a clock, a channel that wanders on its own) is
    /// doubtful ([`crate::run::trust::halves_agree`]; docs/trust.md, "Channels a robot
    /// logs", has the evidence). A run directory written without this key repeats
    /// without it.
    #[serde(default)]
    pub halves_agree: bool,
    /// Q-functions the `halves_agree` check trains on each half (cross-bootstrapped as
    /// an ensemble's halves are), each half's V their mean. [`TrainConfig::for_data`]
    /// sets 2 where values set once an episode differ between episodes (a goal per
    /// episode, [`contexts::goals`]): each half then holds other goals, and one
    /// Q-function's V carries what it learned to them less steadily than the run's own
    /// (docs/trust.md, "Two halves of two"). A run directory written without this key
    /// repeats with one.
    #[serde(default = "one")]
    pub halves_members: usize,
    /// An ensemble trains as two independent halves, and within a half each Q-function
    /// bootstraps from the next one's Q at the label its own Q prefers (Double DQN across
    /// members, [`crate::stages::qlearn::dqn_group`]); off, every Q-function bootstraps
    /// from its own maximum (docs/trust.md, "Across members", has the evidence).
    #[serde(default = "yes")]
    pub cross_bootstrap: bool,
    /// Deep Q-learning with lambda-return targets: each bootstrap is at most what the
    /// ways through the data allow ([`crate::stages::qlearn::path_bound`], where the data
    /// shows ways: [`crate::data::paths::fewest_steps`]). A run directory written without
    /// this key repeats without it (docs/trust.md, "Bounded by the data's ways", has the
    /// evidence).
    #[serde(default)]
    pub path_bound: bool,
    /// The pace at which the ways through the data are measured, for the bound and the
    /// `path_ranking` check, as a percentile of the lengths of the data's transitions:
    /// where states never recur, each step costs its length at that pace, at most one,
    /// each dimension in units of its own step ([`crate::data::paths::fewest_steps`]). A
    /// run directory written without this key counts each transition as a step and
    /// standardises by the spread, as runs did before it (docs/trust.md, "At the data's
    /// pace", has the evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ways_pace: Option<f64>,
    /// Ways through the data (for the bound and the `path_ranking` check) also for frames
    /// and states of more than 64 values, where they recur exactly (the poses of a
    /// rendered lattice, say); such states never jump to near ones
    /// ([`crate::data::paths::fewest_steps`]). A run directory written without this key
    /// finds no ways on such data, as runs did before it.
    #[serde(default)]
    pub frame_ways: bool,
    /// Ways through frames that never recur too, joined where the frames lie near one
    /// another ([`crate::data::paths::fewest_steps`]). A run directory written
    /// without this key finds no ways through such frames, as runs did before it.
    #[serde(default)]
    pub near_frames: bool,
    /// Ways through states joined where near only where they rank the steps of the data's
    /// own rewarded trajectories as `trajectory_ranking` asks of V
    /// ([`crate::run::trust::ways_agreement`] at least
    /// [`paths::MIN_TRAJECTORY_AGREEMENT`]): a body that cannot move from a state to any
    /// near one (a car that must swing back and forth to climb a hill) has ways that
    /// jumps make up, and none then bound the bootstraps or judge V. A run directory
    /// written without this key keeps the ways whatever they rank, as runs did before it.
    #[serde(default)]
    pub ways_agree: bool,
    /// Where `ways_agree` finds no ways through the data (a body that must swing to
    /// climb), `q = "auto"` learns Q by IQL where it would take DQN: with no ways to bound
    /// its bootstraps, DQN's maximum over labels that no state like the one bootstrapped
    /// shows goes unchecked and over-estimates the far states (docs/trust.md, "Where
    /// MountainCar's over-estimation comes from", has the evidence). A run directory
    /// written without this key repeats without it.
    #[serde(default)]
    pub iql_without_ways: bool,
    /// A fitted V (an ensemble's mean, BCQ's V) is fitted to at most the bound of each
    /// state, where `path_bound` bounds Q-learning: a network's V can pass what any
    /// of its targets allows, by its smoothness across a wall (docs/trust.md, "Fitted
    /// within the bound", has the evidence). A run directory written without this key
    /// repeats without it.
    #[serde(default)]
    pub fit_bound: bool,
    /// Where one-step targets (`dqn.lambda = 0`) leave V more than 10% below the data's
    /// own returns (the `below_data_returns` check), Q-learning runs again with targets
    /// along the data's trajectories ([`TrainConfig::along_trajectories`]), and the V the
    /// checks prefer is exported ([`crate::run::trust::preferred`]): value travels one
    /// transition per target copy, and on ALE Freeway played as a trained agent plays,
    /// whose far states lie 60 steps from a crossing, 100 copies left it short
    /// (docs/trust.md, "Again along the trajectories", has the evidence). A run directory
    /// written without this key repeats without it.
    #[serde(default)]
    pub retry_along_trajectories: bool,
    /// Where a log of vector states cuts its episodes at their rewards
    /// ([`TrainConfig::ends_at_reward_cuts`]: Minari's goal-reaching data, each goal
    /// reached a timeout, the next episode going on from there with another goal), those
    /// rewards end the episode for Q-learning as a terminal does, and `q = "auto"` learns
    /// Q by IQL where it would take DQN: bootstrapping past a cut guesses the value of a
    /// state that no row leaves, differently from goal to goal, and DQN's maximum over
    /// the labels crowds V near one reward (docs/trust.md, "Rewards where episodes are
    /// cut", has the evidence). A run directory written without this key repeats without
    /// it.
    #[serde(default)]
    pub reward_cuts_end: bool,
    /// Values of a vector state that V does not read (0-based): Q-learning sees them held
    /// at zero, and the exported model scales them by 0 (`input.scale`), so that V is
    /// the same whatever a state holds there. Mining still sees them.
    #[serde(default)]
    pub ignored_values: Vec<usize>,
    /// Where deep Q-learning on vector states gives a doubtful V and some values are noise
    /// to every label ([`crate::stages::mining::noise_to_labels`]: a channel that wanders
    /// on its own, a clock), Q-learning runs again with those values ignored
    /// (`ignored_values`); that V is exported where it fails fewer checks. Such values
    /// tell the trajectories apart, or the time rather than the place, and V learned each
    /// trajectory's own steps to a reward by them (docs/trust.md, "Values the labels call
    /// noise", has the evidence). A run directory written without this key repeats
    /// without it.
    #[serde(default)]
    pub retry_ignoring_noise: bool,
    /// Values of a vector state that no label moves (a battery that drains, the steps
    /// since an episode began: [`crate::stages::moved::unmoved_by_labels`]; a context,
    /// such as a goal, which no transition changes within an episode, excepted: V must
    /// read it) join those of `retry_ignoring_noise`; and where V is trusted but its halves agree less than two
    /// seeds do (`halves_agree` below `seed_agreement`'s line) beside such values,
    /// Q-learning runs again without them too, that V exported only where it is trusted
    /// and its halves agree as two seeds do (docs/trust.md, "Values no label moves", has
    /// the evidence). A run directory written without this key repeats without it.
    #[serde(default)]
    pub retry_ignoring_unmoved: bool,
    /// Where V is doubtful by the checks that say its training depends on chance alone
    /// (`seed_agreement`, `converged`, `choice_holds`, `halves_agree`:
    /// [`crate::run::trust::Trust::unsteady`]), the whole run (labels, Q-learning, its
    /// retries) goes again from another seed, and its V is exported where it is trusted;
    /// `config.toml` then holds that seed (docs/trust.md, "Another seed", has the
    /// evidence). A run directory written without this key repeats without it.
    #[serde(default)]
    pub retry_with_another_seed: bool,
    /// How the exported model turns its outputs into V.
    #[serde(default)]
    pub head: ValueHead,
    /// A density gate over the data's states, written into the model.
    #[serde(default)]
    pub density: DensityConfig,
    /// How the dataset is read (dict keys, where the rewards come from).
    #[serde(default)]
    pub read: ReadOptions,
}

/// How the exported model turns its last layer into V.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ValueHead {
    /// V = max over the outputs (one Q value per latent action).
    #[default]
    MaxQ,
    /// V = 1 - ||phi(s)||_2, fitted to the learned V scaled into [0, 1] (the paper's
    /// appendix): high only where the features are near zero, so states unlike the data
    /// get low values.
    OneNorm,
}

/// The ways through a data set as [`TrainConfig::judged_ways`] finds them.
#[derive(Clone, Debug)]
pub(crate) enum Ways {
    /// Ways that bound the bootstraps and judge V.
    Kept(paths::Steps),
    /// Ways through near states that rank the data's own rewarded trajectories at this
    /// (corrected), below [`paths::MIN_TRAJECTORY_AGREEMENT`]: dropped.
    Dropped(f64),
    /// No ways at all (no rewards, or states that neither recur nor lie near).
    None,
}

impl Ways {
    /// The ways that bound the bootstraps and judge V, where they were kept.
    pub(crate) fn kept(&self) -> Option<&paths::Steps> {
        match self {
            Ways::Kept(steps) => Some(steps),
            Ways::Dropped(_) | Ways::None => None,
        }
    }
}

fn yes() -> bool {
    true
}

fn one() -> usize {
    1
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            labels: LabelSource::Latent,
            q: QKind::Auto,
            seed: 0,
            mining: MiningConfig::default(),
            tabular: TabularConfig::default(),
            dqn: DqnConfig::default(),
            distill: DistillConfig::default(),
            top_actions: None,
            ensemble: 1,
            second_seed: true,
            halves_agree: true,
            halves_members: 1,
            cross_bootstrap: true,
            path_bound: true,
            ways_pace: Some(crate::data::paths::PACE),
            frame_ways: true,
            near_frames: true,
            ways_agree: true,
            iql_without_ways: true,
            fit_bound: true,
            retry_along_trajectories: true,
            reward_cuts_end: true,
            ignored_values: vec![],
            retry_ignoring_noise: true,
            retry_ignoring_unmoved: true,
            retry_with_another_seed: true,
            head: ValueHead::MaxQ,
            density: DensityConfig::default(),
            read: ReadOptions::default(),
        }
    }
}

/// The discount Q-learning on continuous states starts from: the paper's 0.99, or
/// 1 - 1/H where the data's rewarded trajectories are longer, H the median number of
/// steps from their states to the reward, at most 0.995 (written to `config.toml` like
/// every setting). With 0.99, a state 500 steps from the reward is worth 0.007 of one
/// next to it, and far states are ranked by noise; 0.998 on a large maze, whose median
/// is 226 steps, ranked states far worse than 0.995 (docs/trust.md).
///
/// ```
/// use laq::data::Dataset;
/// // A reward 300 steps down one trajectory: H = 150.
/// let n = 301;
/// let obs: Vec<f32> = (0..n).map(|i| i as f32).collect();
/// let next: Vec<f32> = (1..=n).map(|i| i as f32).collect();
/// let mut rewards = vec![0.0; n];
/// rewards[n - 1] = 1.0;
/// let d = Dataset {
///     obs_shape: vec![1],
///     observations: obs.into(),
///     next_observations: next.into(),
///     rewards,
///     terminals: vec![false; n],
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let g = laq::run::config::horizon_gamma(&d);
/// assert!((g - (1.0 - 1.0 / 150.0)).abs() < 1e-12);
/// ```
pub fn horizon_gamma(data: &Dataset) -> f64 {
    let Some(horizon) = Horizon::of(data) else {
        return 0.99;
    };
    let h = horizon.median.max(1) as f64;
    (1.0 - 1.0 / h).clamp(0.99, 0.995)
}

/// How far the data's rewards lie along its trajectories, over the rows whose trajectory
/// reaches a reward: the discount ([`horizon_gamma`]) and, for images, the kind of
/// Q-learning targets ([`TrainConfig::for_data`]) come from it; `laq inspect` shows it.
///
/// ```
/// use laq::data::Dataset;
/// use laq::run::config::Horizon;
/// // A reward 300 steps down one trajectory.
/// let n = 301;
/// let d = Dataset {
///     obs_shape: vec![1],
///     observations: (0..n).map(|i| i as f32).collect::<Vec<_>>().into(),
///     next_observations: (1..=n).map(|i| i as f32).collect::<Vec<_>>().into(),
///     rewards: (0..n).map(|i| if i + 1 == n { 1.0 } else { 0.0 }).collect(),
///     terminals: vec![false; n],
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let h = Horizon::of(&d).unwrap();
/// assert_eq!((h.rows, h.median, h.far), (301, 150, 270));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Horizon {
    /// Rows whose trajectory reaches a reward.
    pub rows: usize,
    /// Median steps from those rows to the reward.
    pub median: usize,
    /// The 90th percentile: the data's far states. One-step targets carry value one
    /// transition per target-network copy, so a run with fewer copies leaves these states
    /// without value.
    pub far: usize,
}

impl Horizon {
    /// `None` when no trajectory reaches a reward.
    pub fn of(data: &Dataset) -> Option<Horizon> {
        let mut k: Vec<usize> = data.steps_to_reward().into_iter().map(|(_, k)| k).collect();
        k.sort_unstable();
        Some(Horizon {
            rows: k.len(),
            median: *k.get(k.len() / 2)?,
            far: k[k.len() * 9 / 10],
        })
    }
}

/// Target-network copies of image Q-learning on data whose far states lie beyond the
/// one-step copies' reach ([`Horizon::far`]): targets then follow the data's
/// trajectories (`dqn.lambda` 1), which carry value the whole length of each trajectory
/// at every copy, and each copy recomputes them over every frame, so the copies are few.
/// On frames of a large point-mass maze (median 227 steps to the reward) this took V
/// against the geodesic distance from 0.57 to 0.98 in the same time (docs/trust.md, "Long
/// horizons in frames").
pub const IMAGE_TRAJECTORY_COPIES: usize = 10;

/// The most latent actions a run may mine (the paper uses 8 to 16): each one is a
/// forward-model output and a Q-value of every state.
pub const MAX_LATENT_ACTIONS: usize = 1024;

/// The largest return a run trains on: squared errors of larger ones overflow f32.
pub const MAX_RETURN: f32 = 1e12;

/// Target-network copies in a deep Q-learning run on continuous states (see
/// [`q_schedule`]).
pub const TARGET_COPIES: usize = 30;

/// Q-functions averaged into V on continuous states (`ensemble`): members from different
/// seeds differ most where V is hardest to learn, far from the reward, and their mean
/// cancels much of it; 4 train in twice the time of the two that the trust checks need
/// anyway, on two cores.
pub const CONTINUOUS_ENSEMBLE: usize = 4;

/// The fewest Q-learning steps between two target-network copies (see [`q_schedule`]).
pub const MIN_TARGET_PERIOD: usize = 500;

/// `(target_update, steps)` of deep Q-learning on `transitions` continuous-state rows at
/// `batch_size`: one pass over the data between target-network copies (at least
/// [`MIN_TARGET_PERIOD`] steps), and [`TARGET_COPIES`] copies.
///
/// With targets that follow the data's trajectories (`dqn.lambda`), each copy carries
/// value the whole length of every trajectory, so what the run needs is a few dozen
/// copies, each fitted over the whole data, rather than a number of steps: every copy
/// also takes a maximum over bootstraps, which drifts upwards, and 60 copies ranked a
/// large maze worse than 30 whatever the steps between them (docs/trust.md has the
/// sweep).
///
/// ```
/// use laq::run::config::q_schedule;
/// // 200k transitions at batch 64: a copy every 3125 steps, 93 750 steps in all.
/// assert_eq!(q_schedule(200_000, 64), (3125, 93_750));
/// // Small data: at least 500 steps between copies.
/// assert_eq!(q_schedule(10_000, 64), (500, 15_000));
/// ```
pub fn q_schedule(transitions: usize, batch_size: usize) -> (usize, usize) {
    let period = transitions
        .div_ceil(batch_size.max(1))
        .max(MIN_TARGET_PERIOD);
    (period, period * TARGET_COPIES)
}

impl TrainConfig {
    /// The rows on which Q-learning ends an episode that the log only cuts there: with
    /// `reward_cuts_end`, where a log of vector states cuts its episodes at their rewards
    /// ([`Dataset::cut_at_rewards`]); none otherwise, and none for frames, where it was
    /// not measured.
    ///
    /// ```
    /// use laq::data::Dataset;
    /// use laq::run::config::TrainConfig;
    /// // Episodes of four steps, each cut on its reward at the fourth.
    /// let n = 100;
    /// let d = Dataset {
    ///     obs_shape: vec![1],
    ///     observations: (0..n).map(|i| (i % 4) as f32).collect::<Vec<f32>>().into(),
    ///     next_observations: (0..n).map(|i| (i % 4 + 1) as f32).collect::<Vec<f32>>().into(),
    ///     rewards: (0..n).map(|i| (i % 4 == 3) as u8 as f32).collect(),
    ///     terminals: vec![false; n],
    ///     timeouts: Some((0..n).map(|i| i % 4 == 3).collect()),
    ///     next_missing: None,
    ///     actions: None,
    /// };
    /// let cfg = TrainConfig::default();
    /// assert_eq!(cfg.ends_at_reward_cuts(&d).len(), 25);
    /// let recorded = TrainConfig { reward_cuts_end: false, ..cfg };
    /// assert!(recorded.ends_at_reward_cuts(&d).is_empty());
    /// ```
    pub fn ends_at_reward_cuts(&self, data: &Dataset) -> Vec<usize> {
        if !self.reward_cuts_end || data.is_image() {
            return vec![];
        }
        data.cut_at_rewards()
    }

    /// Defaults that suit `data`: the grid-world settings for small discrete state
    /// spaces; for continuous states a smaller forward model with larger batches (the
    /// authors' Maze2D model is smaller still, 4-8-16-8), the discount of the data's
    /// horizon ([`horizon_gamma`]), the Q-learning schedule of its size ([`q_schedule`]),
    /// an ensemble of [`CONTINUOUS_ENSEMBLE`] Q-functions, and two on each half for the
    /// halves' check where the data has a goal per episode (`halves_members`); the image
    /// settings for images, whose Q-learning follows the data's trajectories, at the
    /// discount of its horizon, where its far states lie beyond the one-step copies'
    /// reach ([`IMAGE_TRAJECTORY_COPIES`]).
    ///
    /// A log that pays a cost per step until its episodes end is judged as Q-learning
    /// learns it, its ends rewarded ([`CostToEnd`]; the discount does not move where
    /// the rewards lie).
    pub fn for_data(data: &Dataset) -> Self {
        let learned = CostToEnd::of(data, 0.99).map(|c| c.apply(data));
        let data = learned.as_ref().unwrap_or(data);
        if data.is_image() {
            let mut cfg = TrainConfig::images(&data.obs_shape);
            let copies = cfg.dqn.steps / cfg.dqn.target_update;
            if Horizon::of(data).is_some_and(|h| h.far > copies) {
                cfg = cfg.along_trajectories(data);
                cfg.dqn.gamma = horizon_gamma(data);
            }
            cfg
        } else if qlearn::is_tabular(data) {
            let mut cfg = TrainConfig::default();
            cfg.tabular.unshown_at_value = learned.is_some() || data.reward_baseline() < 0.0;
            cfg
        } else {
            let mut cfg = TrainConfig::continuous();
            cfg.dqn.gamma = horizon_gamma(data);
            (cfg.dqn.target_update, cfg.dqn.steps) = q_schedule(data.len(), cfg.dqn.batch_size);
            cfg.ensemble = CONTINUOUS_ENSEMBLE;
            if !contexts::goals(data).is_empty() {
                cfg.halves_members = 2;
            }
            cfg
        }
    }

    /// These settings with deep Q-learning's targets along the data's own trajectories
    /// (`dqn.lambda` 1), which carry value the whole length of each trajectory at every
    /// target copy: [`IMAGE_TRAJECTORY_COPIES`] copies for images, [`TARGET_COPIES`]
    /// otherwise, in the same number of steps at the same discount.
    ///
    /// ```
    /// use laq::run::config::{TrainConfig, IMAGE_TRAJECTORY_COPIES};
    /// let d = laq::data::Dataset {
    ///     obs_shape: vec![1, 2, 2],
    ///     observations: vec![0.0; 4].into(),
    ///     next_observations: vec![1.0; 4].into(),
    ///     rewards: vec![1.0],
    ///     terminals: vec![true],
    ///     timeouts: None,
    ///     next_missing: None,
    ///     actions: None,
    /// };
    /// let one_step = TrainConfig::images(&d.obs_shape);
    /// let along = one_step.along_trajectories(&d);
    /// assert_eq!(along.dqn.lambda, 1.0);
    /// assert_eq!(along.dqn.target_update * IMAGE_TRAJECTORY_COPIES, along.dqn.steps);
    /// assert_eq!(along.dqn.gamma, one_step.dqn.gamma);
    /// ```
    pub fn along_trajectories(&self, data: &Dataset) -> TrainConfig {
        let copies = match data.is_image() {
            true => IMAGE_TRAJECTORY_COPIES,
            false => TARGET_COPIES,
        };
        let mut cfg = self.clone();
        cfg.dqn.lambda = 1.0;
        cfg.dqn.target_update = (cfg.dqn.steps / copies).max(1);
        cfg
    }

    /// The fewest steps to a reward through `data` as this run measures them, for the
    /// bound and the `path_ranking` check: at `ways_pace`, and through frames and other
    /// states of more than [`paths::MAX_STATE_LEN`] values only with `frame_ways`
    /// ([`paths::fewest_steps`]); through frames that never recur, joined where near, with
    /// `near_frames`; with `ways_agree`, none where the ways join near states and rank the
    /// data's own rewarded trajectories badly ([`crate::run::trust::ways_agreement`]).
    ///
    /// ```
    /// use laq::run::config::TrainConfig;
    /// // Frames of one pixel on a corridor 0 -> 1 -> 2, rewarded at 2, walked three times.
    /// let d = laq::data::Dataset {
    ///     obs_shape: vec![1, 1, 1],
    ///     observations: [0.0, 1.0].repeat(3).into(),
    ///     next_observations: [1.0, 2.0].repeat(3).into(),
    ///     rewards: [0.0, 1.0].repeat(3),
    ///     terminals: [false, true].repeat(3),
    ///     timeouts: None,
    ///     next_missing: None,
    ///     actions: None,
    /// };
    /// let ways = TrainConfig::default().ways(&d).unwrap();
    /// assert_eq!(ways.state, [1.0, 0.0].repeat(3));
    /// // A run directory written before `frame_ways` finds none through frames.
    /// let old = TrainConfig { frame_ways: false, ..TrainConfig::default() };
    /// assert!(old.ways(&d).is_none());
    /// ```
    pub fn ways(&self, data: &Dataset) -> Option<paths::Steps> {
        match self.judged_ways(data) {
            Ways::Kept(steps) => Some(steps),
            Ways::Dropped(_) | Ways::None => None,
        }
    }

    /// Whether `q = "auto"` learns Q by IQL because `ways_agree` drops the ways through
    /// `data` (`iql_without_ways`).
    ///
    /// ```
    /// use laq::run::config::TrainConfig;
    /// // A corridor 0 -> 1 -> 2 rewarded at 2: its ways are a step apart.
    /// let d = laq::data::Dataset {
    ///     obs_shape: vec![1],
    ///     observations: [0.0, 1.0].repeat(30).into(),
    ///     next_observations: [1.0, 2.0].repeat(30).into(),
    ///     rewards: [0.0, 1.0].repeat(30),
    ///     terminals: [false, true].repeat(30),
    ///     timeouts: None,
    ///     next_missing: None,
    ///     actions: None,
    /// };
    /// assert!(!TrainConfig::continuous().learns_without_ways(&d));
    /// ```
    pub fn learns_without_ways(&self, data: &Dataset) -> bool {
        self.learns_without(&self.judged_ways(data))
    }

    /// Whether `q = "auto"` learns Q by IQL with `ways` judged so
    /// ([`TrainConfig::learns_without_ways`]).
    pub(crate) fn learns_without(&self, ways: &Ways) -> bool {
        self.iql_without_ways && matches!(ways, Ways::Dropped(_))
    }

    /// The ways through `data` as [`TrainConfig::ways`] finds them, and whether
    /// `ways_agree` dropped them.
    pub(crate) fn judged_ways(&self, data: &Dataset) -> Ways {
        if !self.frame_ways && paths::never_jump(data) {
            return Ways::None;
        }
        let Some(steps) = paths::fewest_steps(data, self.ways_pace, self.near_frames) else {
            return Ways::None;
        };
        // Frames joined where near were held to the same bar by `fewest_steps` itself.
        if !(self.ways_agree && steps.joined && !data.is_image()) {
            return Ways::Kept(steps);
        }
        match crate::run::trust::ways_agreement(data, &steps) {
            Some(a) if a < paths::MIN_TRAJECTORY_AGREEMENT => Ways::Dropped(a),
            _ => Ways::Kept(steps),
        }
    }

    /// An error naming the first setting out of its range: a Q-learning discount of 1.5
    /// or a layer of 0 units would otherwise fail deep inside training, or train a
    /// model that cannot be read.
    ///
    /// ```
    /// use laq::run::config::TrainConfig;
    /// assert!(TrainConfig::default().check().is_ok());
    /// let mut cfg = TrainConfig::default();
    /// cfg.dqn.gamma = 1.5;
    /// let e = cfg.check().unwrap_err().to_string();
    /// assert!(e.contains("dqn.gamma"), "{e}");
    /// ```
    pub fn check(&self) -> Result<()> {
        let m = &self.mining;
        let (t, q, f, d) = (&self.tabular, &self.dqn, &self.distill, &self.density);
        let counts = [
            ("mining.latent_actions", m.latent_actions),
            ("mining.embedding", m.embedding),
            ("mining.batch_size", m.batch_size),
            ("mining.steps", m.steps),
            ("mining.restarts", m.restarts),
            ("tabular.passes", t.passes),
            ("dqn.batch_size", q.batch_size),
            ("dqn.steps", q.steps),
            ("dqn.target_update", q.target_update),
            ("dqn.checkpoints", q.checkpoints),
            ("distill.steps", f.steps),
            ("density.components", d.components),
            ("density.iterations", d.iterations),
            ("ensemble", self.ensemble),
        ];
        for (key, n) in counts {
            anyhow::ensure!(n >= 1, "setting `{key}` must be at least 1, not {n}");
        }
        anyhow::ensure!(
            m.latent_actions <= MAX_LATENT_ACTIONS,
            "setting `mining.latent_actions` must be at most {MAX_LATENT_ACTIONS}, not {}",
            m.latent_actions
        );
        if let Some(0) = self.top_actions {
            anyhow::bail!("setting `top_actions` must be at least 1 (or absent: all labels)");
        }
        let layers = [
            ("mining.encoder", &m.encoder),
            ("mining.decoder", &m.decoder),
            ("mining.conv.channels", &m.conv.channels),
            ("dqn.hidden", &q.hidden),
            ("dqn.conv.channels", &q.conv.channels),
            ("distill.hidden", &f.hidden),
        ];
        for (key, sizes) in layers {
            if let Some(z) = sizes.iter().position(|&n| n == 0) {
                anyhow::bail!("setting `{key}` has a layer of 0 units (entry {z} of {sizes:?})");
            }
        }
        let ranges = [
            ("tabular.gamma", t.gamma, 0.0, 1.0, false),
            ("dqn.gamma", q.gamma, 0.0, 1.0, false),
            ("dqn.lambda", q.lambda, 0.0, 1.0, true),
            ("dqn.bcq_threshold", q.bcq_threshold, 0.0, 1.0, true),
            ("mining.screen", m.screen, 0.0, 1.0, true),
            ("mining.split_until", m.split_until, 0.0, 1.0, true),
        ];
        for (key, x, lo, hi, closed) in ranges {
            let ok = x >= lo && (x < hi || (closed && x == hi));
            let end = if closed { ']' } else { ')' };
            anyhow::ensure!(ok, "setting `{key}` must be in [{lo}, {hi}{end}, not {x}");
        }
        for (i, &x) in m.lr_drops.iter().enumerate() {
            anyhow::ensure!(
                (0.0..=1.0).contains(&x),
                "setting `mining.lr_drops` holds {x} (entry {i}): each is a fraction of the \
                 steps, in [0, 1]"
            );
        }
        let open = [
            ("dqn.expectile", q.expectile, 0.0, 1.0),
            ("density.percentile", d.percentile, 0.0, 100.0),
        ];
        for (key, x, lo, hi) in open {
            anyhow::ensure!(
                x > lo && x < hi,
                "setting `{key}` must lie strictly between {lo} and {hi}, not {x}"
            );
        }
        let rates = [
            ("mining.lr", m.lr),
            ("tabular.lr", t.lr),
            ("dqn.lr", q.lr),
            ("distill.lr", f.lr),
        ];
        for (key, x) in rates {
            anyhow::ensure!(
                x > 0.0 && x.is_finite(),
                "setting `{key}` must be a finite number above 0, not {x}"
            );
        }
        let weights = [
            ("mining.weight_decay", m.weight_decay),
            ("dqn.cql_alpha", q.cql_alpha),
        ];
        for (key, x) in weights {
            anyhow::ensure!(
                x >= 0.0 && x.is_finite(),
                "setting `{key}` must be a finite number of at least 0, not {x}"
            );
        }
        if let Some(p) = self.ways_pace.filter(|p| !(*p > 0.0 && *p <= 100.0)) {
            anyhow::bail!(
                "setting `ways_pace` must be a percentile above 0 and at most 100, not {p}"
            );
        }
        Ok(())
    }

    /// [`TrainConfig::check`], and an error where the settings do not fit `data`: a
    /// density gate over dimensions its states lack, a head or gate for images (both read
    /// vector states), or rewards whose returns exceed [`MAX_RETURN`]. Found before any
    /// file is written rather than at export or in NaN losses.
    pub fn check_for(&self, data: &Dataset) -> Result<()> {
        self.check()?;
        let gate = self.density.enabled;
        if data.is_image() && (gate || self.head != ValueHead::MaxQ) {
            anyhow::bail!(
                "the one-norm head and the density gate apply to vector states; this data has \
                 images {:?}",
                data.obs_shape
            );
        }
        if gate {
            self.density.check_dims(data.obs_dim())?;
        }
        self.check_ignored(data)?;
        // Squared errors of larger returns overflow f32 and training ends in NaN.
        for gamma in [self.dqn.gamma, self.tabular.gamma] {
            let (lo, hi) = qlearn::return_bounds(data, gamma);
            let largest = lo.abs().max(hi.abs());
            if largest.is_nan() || largest > MAX_RETURN {
                let (min, max) = data
                    .rewards
                    .iter()
                    .fold((0f32, 0f32), |(a, b), &r| (a.min(r), b.max(r)));
                anyhow::bail!(
                    "rewards from {min:e} to {max:e} allow returns of {largest:e} at gamma \
                     {gamma}, too large for f32 training (at most {MAX_RETURN:e}): scale the \
                     rewards down"
                );
            }
        }
        Ok(())
    }

    /// An error naming `ignored_values` where they do not fit the data: images, tabular
    /// Q-learning, a value past the state's length or named twice, every value of the
    /// state, or one the density gate reads.
    fn check_ignored(&self, data: &Dataset) -> Result<()> {
        let ignored = &self.ignored_values;
        if ignored.is_empty() {
            return Ok(());
        }
        let d = data.obs_dim();
        if data.is_image() {
            anyhow::bail!(
                "`ignored_values` applies to vector states; this data has images {:?}",
                data.obs_shape
            );
        }
        if self.q == QKind::Tabular || (self.q == QKind::Auto && qlearn::is_tabular(data)) {
            anyhow::bail!(
                "`ignored_values` applies to deep Q-learning; this run's is tabular (`--q dqn` \
                 learns with it)"
            );
        }
        let mut seen = vec![false; d];
        for &j in ignored {
            match seen.get_mut(j) {
                None => anyhow::bail!(
                    "`ignored_values` names value {j}, but a state has {d} values (0 to {})",
                    d.saturating_sub(1)
                ),
                Some(true) => anyhow::bail!("`ignored_values` names value {j} twice"),
                Some(s) => *s = true,
            }
        }
        if ignored.len() >= d {
            anyhow::bail!("`ignored_values` leaves none of the state's {d} values for V to read");
        }
        if self.density.enabled {
            if let Some(j) = ignored.iter().find(|j| self.density.dims.contains(j)) {
                anyhow::bail!(
                    "`density.dims` names value {j}, which `ignored_values` leaves out of V"
                );
            }
        }
        Ok(())
    }

    /// These settings with the values `values` ignored by V as well ([`Self::ignored_values`]).
    pub fn ignoring(&self, values: &[usize]) -> TrainConfig {
        let mut cfg = self.clone();
        for &j in values {
            if !cfg.ignored_values.contains(&j) {
                cfg.ignored_values.push(j);
            }
        }
        cfg.ignored_values.sort_unstable();
        cfg
    }

    /// The settings as TOML, every key present (`laq config default`).
    pub fn to_toml(&self) -> Result<String> {
        Ok(toml::to_string(self)?)
    }

    /// These settings with the keys of a TOML document replaced. A partial document
    /// keeps the rest; a key that is not a setting is an error naming it (a typo must not
    /// silently train with the default).
    pub fn overlay_toml(&self, text: &str) -> Result<Self> {
        self.overlay(text.parse().context("not valid TOML")?)
    }

    fn overlay(&self, user: toml::Table) -> Result<Self> {
        let mut base = toml::Table::try_from(self)?;
        merge(&mut base, user, "")?;
        toml::Value::Table(base)
            .try_into()
            .context("a setting has the wrong type")
    }

    /// These settings with single keys replaced: `("dqn.steps", 5000.into())`. A key that
    /// is not a setting is an error naming it.
    pub fn with_settings(&self, settings: &[(&str, toml::Value)]) -> Result<Self> {
        let mut user = toml::Table::new();
        for (path, value) in settings {
            let mut table = &mut user;
            let mut keys = path.split('.').peekable();
            while let Some(k) = keys.next() {
                if keys.peek().is_none() {
                    table.insert(k.to_string(), value.clone());
                } else {
                    let slot = table
                        .entry(k.to_string())
                        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                    let toml::Value::Table(t) = slot else {
                        anyhow::bail!("setting `{path}` is inside a value");
                    };
                    table = t;
                }
            }
        }
        self.overlay(user)
    }

    /// The settings for continuous states, before the discount and the Q-learning
    /// schedule are fitted to the data ([`TrainConfig::for_data`]). Q-learning learns
    /// targets that follow the data's own trajectories where they beat the bootstrap
    /// (`dqn.lambda` 1, recomputed at every target-network copy): one-step targets did not
    /// carry value across a large maze (docs/trust.md has the sweep). The fixed 60k steps
    /// with a copy every 1000 are what the Maze2D study runs.
    pub fn continuous() -> Self {
        let mut cfg = TrainConfig::default();
        cfg.mining.encoder = vec![64, 64];
        cfg.mining.embedding = 16;
        cfg.mining.decoder = vec![64, 64];
        cfg.mining.batch_size = 256;
        cfg.dqn.steps = 60_000;
        cfg.dqn.target_update = 1000;
        cfg.dqn.lambda = 1.0;
        cfg
    }

    /// The settings for image observations `[C, H, W]` (convolutional networks, chosen by
    /// `arch = auto`), sized for one CPU core: a mining or Q-learning step costs tens of
    /// milliseconds at 32x32 (see `laq bench`), so batches are smaller and runs shorter
    /// than for vector states. Value spreads one transition per target-network copy, so
    /// the copies are frequent: on the navigation data with ground-truth labels, 4000 steps
    /// copying every 500 left V almost flat (Spearman against V* 0.12). Data whose
    /// rewards lie further than 100 copies away gets trajectory targets instead
    /// ([`TrainConfig::for_data`]).
    ///
    /// Any image size trains: each convolution halves the side, rounding down. Frames
    /// larger than 96 pixels on a side get a fourth convolution (210x160 Atari frames end
    /// at 13x10 instead of 26x20), so the fully connected head stays small; frames under 8
    /// pixels get fewer than three.
    ///
    /// ```
    /// use laq::run::config::TrainConfig;
    /// assert_eq!(TrainConfig::images(&[3, 210, 160]).dqn.conv.channels.len(), 4);
    /// assert_eq!(TrainConfig::images(&[3, 7, 7]).mining.conv.channels.len(), 2);
    /// assert_eq!(TrainConfig::images(&[1, 2, 9]).dqn.conv.channels.len(), 1);
    /// ```
    pub fn images(shape: &[usize]) -> Self {
        let mut cfg = TrainConfig::default();
        if shape.iter().skip(1).any(|&side| side > 96) {
            cfg.mining.conv.channels.push(32);
            cfg.dqn.conv.channels.push(32);
        }
        // Frames under 8 pixels on a side take fewer layers: one pixel must be left.
        let short = shape.iter().skip(1).copied().min().unwrap_or(0);
        while cfg.dqn.conv.channels.len() > 1 && short >> cfg.dqn.conv.channels.len() == 0 {
            cfg.mining.conv.channels.pop();
            cfg.dqn.conv.channels.pop();
        }
        cfg.mining.embedding = 16;
        cfg.mining.batch_size = 32;
        cfg.mining.steps = 2000;
        cfg.mining.restarts = 1;
        cfg.dqn.hidden = vec![128];
        cfg.dqn.batch_size = 32;
        cfg.dqn.steps = 10_000;
        cfg.dqn.target_update = 100;
        cfg
    }
}

fn merge(base: &mut toml::Table, user: toml::Table, at: &str) -> Result<()> {
    for (k, v) in user {
        let path = if at.is_empty() {
            k.clone()
        } else {
            format!("{at}.{k}")
        };
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(u)) => merge(b, u, &path)?,
            (Some(slot), v) => *slot = v,
            // Optional settings (e.g. `top_actions`) are absent when unset.
            (None, v) if OPTIONAL.contains(&path.as_str()) => {
                base.insert(k, v);
            }
            (None, _) => anyhow::bail!("unknown setting `{path}`"),
        }
    }
    Ok(())
}

/// Settings that may be absent from `laq config default` because they are unset.
const OPTIONAL: [&str; 1] = ["top_actions"];

#[cfg(test)]
mod tests {
    use super::*;

    /// The default config read back without `line`, as a run directory written before
    /// that setting existed has it.
    fn written_before(line: &str) -> TrainConfig {
        let text = toml::to_string(&TrainConfig::default()).unwrap();
        assert!(text.contains(line), "{text}");
        toml::from_str(&text.replace(line, "")).unwrap()
    }

    /// One frame of one pixel per state on a corridor of `n` steps to a reward.
    fn corridor_of_frames(n: usize) -> Dataset {
        Dataset {
            obs_shape: vec![1, 1, 1],
            observations: (0..n).map(|i| i as f32).collect::<Vec<_>>().into(),
            next_observations: (1..=n).map(|i| i as f32).collect::<Vec<_>>().into(),
            rewards: (0..n).map(|i| f32::from(u8::from(i + 1 == n))).collect(),
            terminals: (0..n).map(|i| i + 1 == n).collect(),
            timeouts: None,
            next_missing: None,
            actions: None,
        }
    }

    /// Frames 60 steps from the reward keep one-step targets (the navigation data's far
    /// states are 86 steps away); frames 500 away follow the trajectories, at the
    /// discount of their horizon.
    #[test]
    fn far_rewards_in_frames_get_trajectory_targets() {
        let near = TrainConfig::for_data(&corridor_of_frames(67));
        let images = TrainConfig::images(&[1, 1, 1]);
        assert_eq!(near.to_toml().unwrap(), images.to_toml().unwrap());
        let far = TrainConfig::for_data(&corridor_of_frames(556));
        assert_eq!(far.dqn.lambda, 1.0);
        assert_eq!(
            far.dqn.target_update,
            far.dqn.steps / IMAGE_TRAJECTORY_COPIES
        );
        assert_eq!(far.dqn.gamma, 0.995);
        assert_eq!(far.dqn.steps, images.dqn.steps);
    }

    /// A run directory's `config.toml` from before `path_bound` existed repeats without
    /// the bound; new runs have it.
    #[test]
    fn a_config_without_the_bound_repeats_without_it() {
        assert!(!written_before("path_bound = true\n").path_bound);
    }

    /// A run directory's `config.toml` from before `frame_ways` existed finds no ways
    /// through frames; new runs do where frames recur.
    #[test]
    fn a_config_without_frame_ways_finds_none_through_frames() {
        assert!(!written_before("frame_ways = true\n").frame_ways);
    }

    /// A run directory's `config.toml` from before `ways_agree` existed keeps the ways
    /// whatever they rank; new runs hold them to the data's own trajectories.
    #[test]
    fn a_config_without_ways_agree_keeps_the_ways_whatever_they_rank() {
        assert!(!written_before("ways_agree = true\n").ways_agree);
        assert!(!written_before("iql_without_ways = true\n").iql_without_ways);
        assert!(TrainConfig::default().ways_agree);
    }

    /// A run directory's `config.toml` from before `near_frames` existed finds no ways
    /// through frames that never recur; new runs join near ones.
    #[test]
    fn a_config_without_near_frames_finds_none_through_them() {
        assert!(!written_before("near_frames = true\n").near_frames);
        assert!(TrainConfig::default().near_frames);
    }

    /// A run directory's `config.toml` from before `fit_bound` existed fits V as it was
    /// learned; new runs fit it within the bound.
    #[test]
    fn a_config_without_fit_bound_fits_v_unbounded() {
        assert!(!written_before("fit_bound = true\n").fit_bound);
        assert!(TrainConfig::default().fit_bound);
    }

    /// A run directory's `config.toml` from before `retry_along_trajectories` existed
    /// keeps its one-step V whatever its checks say; new runs try the trajectories.
    #[test]
    fn a_config_without_the_retry_keeps_one_step_targets() {
        let before = written_before("retry_along_trajectories = true\n");
        assert!(!before.retry_along_trajectories);
        assert!(TrainConfig::images(&[1, 8, 8]).retry_along_trajectories);
    }

    /// Data with a goal per episode train two Q-functions on each half for the halves'
    /// check; data without, and a `config.toml` written before the key, one.
    #[test]
    fn a_goal_per_episode_gives_each_half_two_q_functions() {
        // Episodes of 10 rows along value 0 (between integers: no table), each with its
        // own goal (value 1).
        let episodes = |goals: bool| {
            let (mut obs, mut next) = (vec![], vec![]);
            for i in 0..200 {
                let goal = if goals { (i / 10) as f32 + 0.5 } else { 0.5 };
                obs.extend([(i % 10) as f32 + 0.5, goal]);
                next.extend([(i % 10) as f32 + 1.5, goal]);
            }
            Dataset {
                obs_shape: vec![2],
                observations: obs.into(),
                next_observations: next.into(),
                rewards: (0..200).map(|i| f32::from(u8::from(i % 10 == 9))).collect(),
                terminals: (0..200).map(|i| i % 10 == 9).collect(),
                timeouts: None,
                next_missing: None,
                actions: None,
            }
        };
        assert_eq!(TrainConfig::for_data(&episodes(true)).halves_members, 2);
        assert_eq!(TrainConfig::for_data(&episodes(false)).halves_members, 1);
        let before = written_before("halves_members = 1\n");
        assert_eq!(before.halves_members, 1);
    }

    /// A run directory's `config.toml` from before `reward_cuts_end` existed learns its
    /// episodes as they were recorded; new runs end those that the log cuts at a reward.
    #[test]
    fn a_config_without_reward_cuts_end_keeps_the_cuts() {
        let before = written_before("reward_cuts_end = true\n");
        assert!(!before.reward_cuts_end);
        assert!(TrainConfig::continuous().reward_cuts_end);
    }

    /// A run directory's `config.toml` from before `retry_ignoring_noise` existed keeps
    /// the V that reads every value; new runs try without the values the labels call noise.
    #[test]
    fn a_config_without_the_noise_retry_reads_every_value() {
        let before = written_before("retry_ignoring_noise = true\n");
        assert!(!before.retry_ignoring_noise && before.ignored_values.is_empty());
        assert!(TrainConfig::continuous().retry_ignoring_noise);
        let before = written_before("retry_ignoring_unmoved = true\n");
        assert!(!before.retry_ignoring_unmoved);
        assert!(TrainConfig::continuous().retry_ignoring_unmoved);
    }

    /// A run directory's `config.toml` from before `retry_with_another_seed` existed keeps
    /// its seed's V whatever its checks say; new runs try another seed.
    #[test]
    fn a_config_without_the_seed_retry_keeps_its_seed() {
        let before = written_before("retry_with_another_seed = true\n");
        assert!(!before.retry_with_another_seed);
        assert!(TrainConfig::images(&[1, 8, 8]).retry_with_another_seed);
        assert!(TrainConfig::continuous().retry_with_another_seed);
    }

    #[test]
    fn ignored_values_must_fit_the_state() {
        let d = Dataset {
            obs_shape: vec![3],
            observations: vec![0.0; 6].into(),
            next_observations: vec![1.0; 6].into(),
            rewards: vec![0.0, 1.0],
            terminals: vec![false, true],
            timeouts: None,
            next_missing: None,
            actions: None,
        };
        let deep = TrainConfig {
            q: QKind::Dqn,
            ..TrainConfig::default()
        };
        let with = |values: &[usize]| deep.ignoring(values);
        assert!(with(&[2, 0]).check_for(&d).is_ok());
        assert_eq!(with(&[2, 0, 2]).ignored_values, vec![0, 2]);
        let error = |cfg: TrainConfig| cfg.check_for(&d).unwrap_err().to_string();
        assert!(error(with(&[3])).contains("value 3, but a state has 3 values"));
        let twice = TrainConfig {
            ignored_values: vec![1, 1],
            ..deep.clone()
        };
        assert!(error(twice).contains("value 1 twice"));
        // Integer states of a small table: `--q auto` learns a table, which reads them all.
        let table = TrainConfig::default().ignoring(&[0]);
        assert!(error(table).contains("tabular"));
        assert!(error(with(&[0, 1, 2])).contains("none of the state's 3 values"));
        let mut gated = with(&[1]);
        gated.density.enabled = true;
        gated.density.dims = vec![0, 1];
        assert!(error(gated).contains("`density.dims` names value 1"));
        let frames = Dataset {
            obs_shape: vec![1, 1, 3],
            ..d
        };
        assert!(with(&[0])
            .check_for(&frames)
            .unwrap_err()
            .to_string()
            .contains("images"));
    }

    /// A run directory's `config.toml` from before `ways_pace` existed counts the ways'
    /// steps as it did; new runs measure them at the data's pace.
    #[test]
    fn a_config_without_the_pace_counts_steps() {
        assert_eq!(written_before("ways_pace = 95.0\n").ways_pace, None);
    }
}
