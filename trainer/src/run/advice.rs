//! What to try when V is doubtful: what a run knows of its own data and settings that a
//! failed check alone does not say. Each piece names a cause that runs measured here
//! showed, and the setting that removed it (docs/trust.md, "What to try").

use super::config::{Horizon, TrainConfig};
use super::trust::{self, Trust, Verdict};
use crate::data::Dataset;
use crate::stages::qlearn::QKind;

/// The checks that fail when Q-learning has not learned the values yet: V does not
/// follow the data's ways or trajectories, stays below its returns, depends on the seed
/// or the checkpoint, or is high everywhere.
const LEARNING: [&str; 9] = [
    trust::TRAJECTORY_RANKING,
    trust::PATH_RANKING,
    trust::BELOW_DATA_RETURNS,
    trust::SEED_AGREEMENT,
    trust::CONVERGED,
    trust::NOT_SATURATED,
    trust::CHOICE_HOLDS,
    trust::HALVES_AGREE,
    trust::REWARD_ENDS_ALIKE,
];

/// Adds to a doubtful `trust` what to try ([`Trust::advise`]), from the data and the
/// settings `cfg` of the exported V, learned by `q`: where to read rewards from when no
/// row has one; how rows pair when s' does not follow s; the data's own Q-learning
/// schedule when `cfg` ran fewer than half its steps ([`cut_short`]); targets along the
/// trajectories where one-step targets left V below the data's returns ([`one_step`]).
///
/// ```
/// use laq::run::advice::advise;
/// use laq::run::config::TrainConfig;
/// use laq::run::trust::{Check, Trust, Verdict};
/// use laq::stages::qlearn::QKind;
/// let d = laq::data::Dataset {
///     obs_shape: vec![1],
///     observations: vec![0.5; 4].into(),
///     next_observations: vec![1.5; 4].into(),
///     rewards: vec![0.0; 4],
///     terminals: vec![false; 4],
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let failed = Check {
///     name: "rewards".into(),
///     value: 0.0,
///     threshold: 1.0,
///     pass: false,
///     why: String::new(),
/// };
/// let mut t = Trust { verdict: Verdict::Doubtful, checks: vec![failed], advice: vec![] };
/// advise(&d, &TrainConfig::continuous(), QKind::Dqn, &mut t);
/// assert!(t.advice[0].contains("--reward"));
/// ```
pub fn advise(data: &Dataset, cfg: &TrainConfig, q: QKind, trust: &mut Trust) {
    if trust.verdict != Verdict::Doubtful {
        return;
    }
    trust.advise(
        &[trust::REWARDS],
        "no row carries a reward: name the array or feature that holds them (`--reward \
         KEY`), or reward each episode's last transition (`--reward episode-end`) where the \
         episodes end at their goal (docs/dataset-format.md)",
    );
    trust.advise(
        &[trust::TRANSITIONS_MATCH],
        "check that each row's next observation follows its own observation: rows shuffled \
         apart, or next observations taken from other rows or other episodes, give this \
         (s' shuffled: about 0; docs/dataset-format.md)",
    );
    trust.advise(
        &[trust::EXPORT_FITS],
        if data.obs_dim() == 1 {
            "give the states as their parts (a code decoded: gymnasium's \
             `env.unwrapped.decode(s)`), or one-hot (a value a code), so that the network \
             reads states that are alike as alike"
        } else {
            "where a value codes several things, give them as their parts (a code \
             decoded, or one-hot); otherwise a larger network for the table (`[distill]`: \
             `hidden`, `steps`)"
        },
    );
    let deep = !matches!(q, QKind::Tabular | QKind::Auto);
    if !deep {
        return;
    }
    if let Some(advice) = cut_short(data, cfg) {
        trust.advise(&LEARNING, &advice);
    }
    if cfg.dqn.lambda == 0.0 {
        trust.advise(&[trust::BELOW_DATA_RETURNS], &one_step(data, cfg));
    }
}

/// Where `cfg` runs deep Q-learning for fewer than half the steps of the data's own
/// schedule ([`TrainConfig::for_data`]), what to try: that schedule. Values travel back
/// from the rewards a target copy at a time: cut to 300 steps, the runs measured on the
/// MuJoCo and Minari mazes and the two-joint arm were doubtful and their V wrong, where
/// the schedule gave each a V that ranks the states right (a car in a valley, whose
/// data's own returns already rank its states, was right and trusted cut so short).
///
/// ```
/// use laq::run::advice::cut_short;
/// use laq::run::config::TrainConfig;
/// let n = 10_000;
/// let d = laq::data::Dataset {
///     obs_shape: vec![1],
///     observations: (0..n).map(|i| (i % 10) as f32 + 0.5).collect::<Vec<f32>>().into(),
///     next_observations: (0..n).map(|i| (i % 10) as f32 + 1.5).collect::<Vec<f32>>().into(),
///     rewards: (0..n).map(|i| (i % 10 == 9) as u8 as f32).collect(),
///     terminals: (0..n).map(|i| i % 10 == 9).collect(),
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let mut cfg = TrainConfig::for_data(&d);
/// assert!(cut_short(&d, &cfg).is_none());
/// cfg.dqn.steps = 300;
/// assert!(cut_short(&d, &cfg).unwrap().contains("Q-learning ran 300 steps"));
/// ```
pub fn cut_short(data: &Dataset, cfg: &TrainConfig) -> Option<String> {
    let schedule = TrainConfig::for_data(data).dqn.steps;
    if cfg.dqn.steps.saturating_mul(2) > schedule {
        return None;
    }
    let passes = schedule * cfg.dqn.batch_size / data.len().max(1);
    Some(format!(
        "Q-learning ran {} steps where this data's schedule gives {schedule} (about \
         {passes} passes over its {} rows): values travel back from the rewards one target \
         copy at a time; train with the schedule (without `--dqn-steps`, or `dqn.steps = \
         {schedule}`)",
        cfg.dqn.steps,
        data.len()
    ))
}

/// What to try where one-step targets (`dqn.lambda = 0`) left V below the data's
/// returns: value travels one transition per target copy, so states about as many steps
/// from a reward as there are copies get theirs late, if at all; targets along the data's
/// own trajectories carry it the whole way at every copy (ALE Freeway with a mostly-up
/// policy, far states 94 steps from a crossing: 0.843 and doubtful one-step, 0.902 and
/// trusted along its trajectories; `laq train` tries them itself unless
/// `retry_along_trajectories` is off).
///
/// ```
/// use laq::run::advice::one_step;
/// use laq::run::config::TrainConfig;
/// // A walk of four steps to a reward, as frames of one pixel.
/// let d = laq::data::Dataset {
///     obs_shape: vec![1, 1, 1],
///     observations: vec![0.0, 1.0, 2.0, 3.0].into(),
///     next_observations: vec![1.0, 2.0, 3.0, 4.0].into(),
///     rewards: vec![0.0, 0.0, 0.0, 1.0],
///     terminals: vec![false, false, false, true],
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let images = TrainConfig::images(&d.obs_shape);
/// let copies = images.dqn.steps / images.dqn.target_update;
/// let advice = one_step(&d, &images);
/// assert!(advice.contains(&format!("{copies} copies")) && advice.contains("within 3 steps"));
/// assert!(advice.contains("`dqn.lambda = 1`"));
/// ```
pub fn one_step(data: &Dataset, cfg: &TrainConfig) -> String {
    let copies = cfg.dqn.steps / cfg.dqn.target_update.max(1);
    let far = Horizon::of(data)
        .map(|h| {
            format!(
                ", and nine in ten of the data's rewarded states lie within {} steps of a reward",
                h.far
            )
        })
        .unwrap_or_default();
    format!(
        "this run's targets are one step (`dqn.lambda = 0`): value travels one transition \
         per target copy, {copies} copies here{far}; targets along the data's own \
         trajectories carry it the whole way (`dqn.lambda = 1`, `dqn.target_update = {}`: \
         docs/trust.md, \"Long horizons in frames\")",
        cfg.along_trajectories(data).dqn.target_update
    )
}
