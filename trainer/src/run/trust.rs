//! Whether to trust a run's V, judged without any ground truth: checks of the data, the
//! labels and the value function that a run can make on its own, each with its number,
//! its threshold and the reason it matters, and a verdict.
//!
//! The checks and their thresholds were set against runs whose true ranking was known
//! (docs/trust.md has the table of verdicts against Spearman with the ground truth); the
//! verdict is `trusted` only when every check that applies passes.

use crate::data::paths;
use crate::data::Dataset;
use crate::run::config::TrainConfig;
use crate::util::stats;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::fmt;

/// The verdict on a run's V.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Trusted,
    Doubtful,
}

impl Verdict {
    /// The verdict's name, as `metrics.json` spells it.
    ///
    /// ```
    /// use laq::run::trust::Verdict;
    /// assert_eq!(Verdict::Doubtful.name(), "doubtful");
    /// assert_eq!(serde_json::to_value(Verdict::Trusted).unwrap(), Verdict::Trusted.name());
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Trusted => "trusted",
            Verdict::Doubtful => "doubtful",
        }
    }
}

/// One check: its value against its threshold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    /// `null` in `metrics.json` where it is NaN (a number that could not be computed): the
    /// run directory still reads.
    #[serde(with = "crate::util::json::nan_f64")]
    pub value: f64,
    pub threshold: f64,
    pub pass: bool,
    /// What the check tells, in plain words.
    pub why: String,
}

/// `metrics.json["trust"]`: the verdict, every check made, and for a doubtful V what to
/// try ([`crate::run::advice`]; absent where there is nothing to say).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trust {
    pub verdict: Verdict,
    pub checks: Vec<Check>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub advice: Vec<String>,
}

impl Trust {
    /// How many checks pass.
    pub fn passed(&self) -> usize {
        self.checks.iter().filter(|c| c.pass).count()
    }

    /// The failed checks (none for a trusted V).
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.pass)
    }

    /// The names of the failed checks, in order, as the records of a run's retries keep
    /// them.
    pub fn failed_names(&self) -> Vec<String> {
        self.failed().map(|c| c.name.clone()).collect()
    }

    /// This verdict with one more check: doubtful if it fails.
    pub fn with(mut self, check: Check) -> Trust {
        if !check.pass {
            self.verdict = Verdict::Doubtful;
        }
        self.checks.push(check);
        self
    }

    /// This verdict with one more check listed first, where its failure is the cause of
    /// the others' (the verdict names the first failed checks): doubtful if it fails.
    pub fn led_by(mut self, check: Check) -> Trust {
        if !check.pass {
            self.verdict = Verdict::Doubtful;
        }
        self.checks.insert(0, check);
        self
    }
}

/// The check that the checkpoint chosen by the checks is not a lone pass: of the
/// checkpoints from the chosen one to the last (`failed`, the number of checks each fails,
/// in order), at least half pass every check, or the last two do. Choosing among many
/// checkpoints by the checks and then judging the choice by the same checks favours a
/// pass; Q-learning after the chosen checkpoint continues from it, so a V whose checks
/// hold only there passed by the chance of the choice. Where the last two checkpoints,
/// which no choice picked, pass every check, Q-learning ends passing, and a choice
/// before them found no lone pass, whatever the checkpoints between failed.
///
/// ```
/// use laq::run::trust::choice_holds;
/// // Chosen at the seventh of ten checkpoints, the three after it failing a check each.
/// let c = choice_holds(&[2, 4, 2, 2, 1, 2, 0, 1, 1, 1], 6);
/// assert!(!c.pass && c.value == 0.25);
/// // One of the last two passing is enough.
/// assert!(choice_holds(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 8).pass);
/// // Chosen at the first, the middle failing: the last two passing is enough.
/// let c = choice_holds(&[0, 2, 2, 0, 1, 1, 1, 1, 0, 0], 0);
/// assert!(c.pass && c.value == 0.4);
/// assert!(!choice_holds(&[0, 2, 2, 0, 1, 1, 1, 0, 1, 0], 0).pass);
/// ```
pub fn choice_holds(failed: &[usize], chosen: usize) -> Check {
    let after = failed.get(chosen..).unwrap_or_default();
    let passing = after.iter().filter(|&&f| f == 0).count();
    let share = passing as f64 / after.len().max(1) as f64;
    let ends_passing = failed.len() >= 2 && failed[failed.len() - 2..].iter().all(|&f| f == 0);
    check(
        CHOICE_HOLDS,
        share,
        0.5,
        share >= 0.5 || ends_passing,
        format!(
            "the exported checkpoint was chosen by these checks among {}; {passing} of the {} \
             checkpoints from it to the last pass every check{}: a V that passes where the \
             later ones fail passed by the chance of being chosen among many",
            failed.len(),
            after.len(),
            if ends_passing {
                ", the last two among them"
            } else {
                ""
            }
        ),
    )
}

/// The check that V follows the states rather than the trajectories they lie on: two
/// Q-functions, each trained on one half of the data's trajectories (`pieces` pieces of
/// them, every other one in each half), rank all the data's states alike at Spearman
/// `rho`. Where a channel is particular to each trajectory (a clock, a battery's
/// voltage, a temperature: it wanders on its own), Q-learning can tell each trajectory's
/// states apart by it and learn each one's own steps to a reward, which the other half's
/// trajectories do not teach; both halves' V then rank the data's own trajectories well
/// and the maze's states by nothing. Two seeds on the same data learn the same
/// trajectories, so `seed_agreement` does not see it. Each half's V learns from half
/// the data, so the two agree less than two seeds do even where V is right: the line
/// lies below `seed_agreement`'s (docs/trust.md, "Channels a robot logs").
///
/// `contexts` are the values that are set once an episode and differ between
/// episodes ([`crate::data::contexts::goals`]: a goal, a task). Each half then holds
/// other goals, and its V must carry what it learned to the other half's goals: with
/// too few episodes the halves disagree although V reads what it should, so the reason
/// says so (docs/trust.md, "Two joints, as their encoders read them").
///
/// ```
/// use laq::run::trust::halves_agree;
/// assert!(halves_agree(0.73, 2564, &[]).pass);
/// let c = halves_agree(0.32, 2564, &[]);
/// assert!(!c.pass && c.why.contains("2564 pieces"));
/// let goals = halves_agree(0.52, 2805, &[4, 5]);
/// assert!(!goals.pass && goals.why.contains("values 4, 5, set once an episode"));
/// ```
pub fn halves_agree(rho: f64, pieces: usize, contexts: &[usize]) -> Check {
    let remedy = match contexts {
        [] => "leave out what does not bear on the task (a battery's voltage, a \
               temperature: `--ignore-values`, `ignored_values`) and train again"
            .to_string(),
        [one] => goals_remedy(&format!(
            "value {one}, set once an episode (a goal, a task)"
        )),
        many => goals_remedy(&format!(
            "values {}, set once an episode (a goal, a task)",
            many.iter()
                .map(|j| j.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    };
    check(
        HALVES_AGREE,
        rho,
        0.6,
        rho >= 0.6,
        format!(
            "Q-learning on each half of the data's trajectories (every other one of their \
             {pieces} pieces) ranks all the data's states alike at Spearman {rho:.2}; a V \
             that one half does not teach for the other's states ranks them by what is \
             particular to each trajectory (a clock, a channel that wanders on its own), \
             not by the state: {remedy}"
        ),
    )
}

/// What [`halves_agree`] advises where the halves hold other goals (`which`).
fn goals_remedy(which: &str) -> String {
    format!(
        "here each half holds other episodes' {which}, so each half's V must carry what \
         it learned to goals it never saw: where V reads them as it should, more episodes \
         make the halves agree; one that does not bear on the task (a calibration) is \
         left out with `--ignore-values`"
    )
}

/// The name of [`export_fits`]'s check.
pub const EXPORT_FITS: &str = "export_fits";

/// The least share of the table's spread that the exported network reproduces
/// (`export_fits`): 0.93-1.00 on the tables measured that fit, below 0 on those of
/// one-number codes (docs/trust.md, "Discrete spaces as gymnasium logs them").
pub const EXPORT_FITS_MIN: f64 = 0.5;

/// The check that the network exported for a table of Q-values (tabular Q-learning
/// ships as a network the runtime evaluates) gives the data's states the table's V:
/// `explained` is the share of the spread of the table's V over the data's states that
/// the network's reproduces (1 - squared errors / squared deviations from the mean).
/// The other checks judge the exported V, so they fail too where the fit fails, but for
/// reasons of their own; this one names the cause. `codes` is the number of distinct
/// values where each state is one whole number (a discrete space's code, such as
/// gymnasium's Taxi gives): a network reads near codes as near states, and a V that
/// jumps from code to code is beyond it.
///
/// ```
/// use laq::run::trust::export_fits;
/// let fits = export_fits(0.99, Some(399));
/// assert!(fits.pass && !fits.why.contains("distinct"));
/// let code = export_fits(-0.9, Some(399));
/// assert!(!code.pass && code.why.contains("399 distinct") && code.why.contains("0%"));
/// ```
pub fn export_fits(explained: f64, codes: Option<usize>) -> Check {
    let pass = explained >= EXPORT_FITS_MIN;
    let cause = match (pass, codes) {
        (true, _) => String::new(),
        (false, Some(n)) => format!(
            ": each state is one whole number, of {n} distinct values (a code of a \
             discrete space?), and a network reads near codes as near states: it cannot \
             follow a V that jumps from code to code"
        ),
        (false, None) => ": the network does not fit the table".to_string(),
    };
    check(
        EXPORT_FITS,
        explained,
        EXPORT_FITS_MIN,
        pass,
        format!(
            "the network exported for the table of Q-values that Q-learning learned \
             reproduces {:.0}% of the spread of the table's V over the data's states; what \
             ships is the network's V{cause}",
            100.0 * explained.max(0.0)
        ),
    )
}

/// The check that the data has rewards at all.
pub const REWARDS: &str = "rewards";

/// The check that the labels use more than one action.
pub const LABELS_USED: &str = "labels_used";

/// The check that each row's s' lies nearer its own s than another row's.
pub const TRANSITIONS_MATCH: &str = "transitions_match";

/// The least [`transitions_match`] of rows that pair: shuffled rows give about 0, the
/// data measured 0.36 and above (docs/trust.md, "Rows that pair").
pub const TRANSITIONS_MATCH_MIN: f64 = 0.1;

/// The check that V is not at the largest return where the data does not put states.
pub const NOT_SATURATED: &str = "not_saturated";

/// The name of [`halves_agree`]'s check.
pub const HALVES_AGREE: &str = "halves_agree";

/// The check that two seeds' V (another run, or the other half of an ensemble) rank the
/// data's states alike.
pub const SEED_AGREEMENT: &str = "seed_agreement";

/// The check that V's ranking has stopped changing over the last checkpoints.
pub const CONVERGED: &str = "converged";

/// The name of [`choice_holds`]'s check.
pub const CHOICE_HOLDS: &str = "choice_holds";

/// The checks whose failure says that what Q-learning gave depends on chance (the seed,
/// the checkpoint, which half of the data it saw) rather than that the data or the
/// settings cannot give a right V: a run doubtful by these alone learns again from
/// another seed ([`Trust::unsteady`], `retry_with_another_seed`).
pub const UNSTEADY: [&str; 4] = [SEED_AGREEMENT, CONVERGED, CHOICE_HOLDS, HALVES_AGREE];

/// How alike two seeds' V rank the data's states at the least (`seed_agreement`). Where
/// V is trusted and its halves agree less than this beside values no label moves, the
/// run learns again without those values (`retry_ignoring_unmoved`).
pub const SEEDS_AGREE: f64 = 0.85;

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
                for a in &self.advice {
                    writeln!(f, "  to try: {a}")?;
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
        if let Some(caveat) = self.caveat() {
            writeln!(f, "  {caveat}")?;
        }
        Ok(())
    }
}

/// The check that ranks V against the fewest steps to a reward through the data.
pub const PATH_RANKING: &str = "path_ranking";

/// The check that ranks V against the steps to the next reward along the data's own
/// trajectories.
pub const TRAJECTORY_RANKING: &str = "trajectory_ranking";

/// The check that V is not below the discounted returns the data itself collected.
pub const BELOW_DATA_RETURNS: &str = "below_data_returns";

/// The check that V ranks alike the states where episodes end on their reward.
pub const REWARD_ENDS_ALIKE: &str = "reward_ends_alike";

/// The check that V ranks alike the states where the log cuts an episode on its reward
/// ([`Dataset::reward_cuts`]: a rewarded row, not terminal, that the next row does not go
/// on from; Minari's goal-reaching data end each episode at its goal and go on from there
/// with another). Each of those states has just collected its reward, so a V that reads
/// how far the reward is gives them about the same value: their spread (interquartile
/// range) against V's over all the data's states is near 0. Bootstrapping past a cut
/// guesses the value of the state after it, which no row leaves, and the guess may differ
/// from goal to goal; where it differs more than V falls on the way to a goal, V ranks
/// states across episodes by their goal (Q-learning ends such episodes at their cuts by
/// default: [`crate::run::config::TrainConfig::ends_at_reward_cuts`]). `None` where the
/// log does not cut its episodes at their rewards as a rule ([`Dataset::cut_at_rewards`]:
/// not in a replay buffer, whose every rewarded row is a cut, nor in a log whose rows
/// break now and then within a region rewarded throughout, where V rightly differs;
/// docs/trust.md, "Rewards where episodes are cut").
///
/// ```
/// use laq::data::Dataset;
/// use laq::run::trust::reward_ends_alike;
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
/// // V rising towards each reward, alike at every cut.
/// let right: Vec<f32> = (0..n).map(|i| 0.9f32.powi(3 - (i % 4) as i32)).collect();
/// assert!(reward_ends_alike(&d, &right).unwrap().pass);
/// // V at the cuts as spread as V anywhere: a level that differs from episode to episode.
/// let level: Vec<f32> = (0..n).map(|i| right[i] + (i / 4) as f32).collect();
/// let c = reward_ends_alike(&d, &level).unwrap();
/// assert!(!c.pass && c.why.contains("25 states"));
/// ```
pub fn reward_ends_alike(data: &Dataset, values: &[f32]) -> Option<Check> {
    let ends = data.cut_at_rewards();
    if ends.is_empty() {
        return None;
    }
    let spread = |v: &[f64]| stats::percentile(v, 75.0) - stats::percentile(v, 25.0);
    let all: Vec<f64> = values.iter().map(|&v| v as f64).collect();
    let at_ends: Vec<f64> = ends.iter().map(|&i| all[i]).collect();
    let ratio = spread(&at_ends) / spread(&all);
    Some(check(
        REWARD_ENDS_ALIKE,
        ratio,
        0.5,
        ratio <= 0.5,
        format!(
            "V at the {} states where an episode ends on its reward without a terminal (a \
             timeout on a rewarded row, or a break after it: the log cuts each episode at \
             its goal) spreads over {:.0}% of its spread over all the data's states \
             (interquartile ranges); each of them has just collected its reward, so a V that \
             reads how far a reward is ranks them alike. Bootstrapping past a cut guesses \
             the value of a state that no row leaves, and where that guess differs from goal \
             to goal more than V falls on the way to a goal, V ranks states across episodes \
             by their goal: where reaching the reward ends the task, end the episodes there \
             (`reward_cuts_end = true`, the default; or `terminals` on those rows)",
            ends.len(),
            100.0 * ratio
        ),
    ))
}

impl Trust {
    /// Adds `what_to_try` to the run's advice where a check named in `names` failed: what
    /// a run knows of its own data and settings that the checks alone do not say. The
    /// same advice is given once.
    ///
    /// ```
    /// use laq::run::trust::{Check, Trust, Verdict};
    /// let failed = Check {
    ///     name: "below_data_returns".into(),
    ///     value: 0.5,
    ///     threshold: 0.1,
    ///     pass: false,
    ///     why: "V is below the data's returns".into(),
    /// };
    /// let mut t = Trust { verdict: Verdict::Doubtful, checks: vec![failed], advice: vec![] };
    /// t.advise(&["converged", "below_data_returns"], "train longer");
    /// t.advise(&["below_data_returns"], "train longer");
    /// assert_eq!(t.advice, ["train longer"]);
    /// t.advise(&["seed_agreement"], "no such failure: nothing added");
    /// assert_eq!(t.advice.len(), 1);
    /// ```
    pub fn advise(&mut self, names: &[&str], what_to_try: &str) {
        let failed = self.failed().any(|c| names.contains(&c.name.as_str()));
        if failed && !self.advice.iter().any(|a| a == what_to_try) {
            self.advice.push(what_to_try.to_string());
        }
    }

    /// Whether V is doubtful by the [`UNSTEADY`] checks alone: every check that failed
    /// says that Q-learning's result depends on chance, none that the data (no rewards,
    /// labels that do not fit the transitions) or V's own figures (below the data's
    /// returns, ranking against the data's ways, saturated) are wrong.
    ///
    /// ```
    /// use laq::run::trust::{Check, Trust, Verdict};
    /// let check = |name: &str, pass: bool| Check {
    ///     name: name.into(),
    ///     value: 0.5,
    ///     threshold: 0.6,
    ///     pass,
    ///     why: String::new(),
    /// };
    /// let t = |checks: Vec<Check>| Trust { verdict: Verdict::Doubtful, checks, advice: vec![] };
    /// assert!(t(vec![check("halves_agree", false), check("choice_holds", false)]).unsteady());
    /// assert!(!t(vec![check("halves_agree", false), check("path_ranking", false)]).unsteady());
    /// let trusted = Trust {
    ///     verdict: Verdict::Trusted,
    ///     checks: vec![check("rewards", true)],
    ///     advice: vec![],
    /// };
    /// assert!(!trusted.unsteady());
    /// ```
    pub fn unsteady(&self) -> bool {
        self.verdict == Verdict::Doubtful
            && self.failed().count() > 0
            && self.failed().all(|c| UNSTEADY.contains(&c.name.as_str()))
    }

    /// The value of the check named `name`, if it applies.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.checks.iter().find(|c| c.name == name).map(|c| c.value)
    }

    /// What a trusted verdict could not check, in plain words: where no ways through the
    /// data were found (no rewarded row to lead to, or nearly every row rewarded, states
    /// that neither recur nor lie near one another, or frames whose nearness does not
    /// follow the data's own trajectories), nothing compared V with the shortest ways to a
    /// reward, and a V that ranks each trajectory well can still order states of different
    /// trajectories wrongly.
    ///
    /// ```
    /// use laq::run::trust::{Trust, Verdict};
    /// let t = Trust { verdict: Verdict::Trusted, checks: vec![], advice: vec![] };
    /// assert!(t.caveat().unwrap().contains("path_ranking"));
    /// ```
    pub fn caveat(&self) -> Option<&'static str> {
        let unchecked = self.verdict == Verdict::Trusted && self.value(PATH_RANKING).is_none();
        unchecked.then_some(
            "not checked: `path_ranking` (no ways through the data were found: no \
             transition is rewarded, or nearly every one is, or its states neither recur \
             nor lie near one another, or near states are not near along the data's own \
             trajectories: frames where more than one body moves, a body that must swing \
             to reach the states beside it); a V \
             that ranks each trajectory well can still order states of different \
             trajectories wrongly (frames of a MuJoCo U-maze without their ways: trusted at \
             0.66 against the truth, docs/trust.md)",
        )
    }

    /// The order in which the checks prefer V: fewer failed checks, then the better
    /// ranking of the data's shortest ways to a reward (`path_ranking`, where it applies).
    /// A check that does not apply neither fails nor counts.
    pub fn merit(&self) -> (Reverse<usize>, f64) {
        let ranking = self.value(PATH_RANKING).unwrap_or(f64::NEG_INFINITY);
        (Reverse(self.failed().count()), ranking)
    }
}

/// Whether `a` is the better of two runs' V by the checks alone: [`Trust::merit`], then
/// the better ranking of the data's rewarded trajectories.
pub fn preferred(a: &Trust, b: &Trust) -> bool {
    let ranking = |t: &Trust| t.value(TRAJECTORY_RANKING).unwrap_or(f64::NEG_INFINITY);
    let key = |t: &Trust| {
        let (failed, path) = t.merit();
        (failed, path, ranking(t))
    };
    key(a) > key(b)
}

/// What a run knows about its own V.
pub struct Evidence<'a> {
    pub data: &'a Dataset,
    pub labels: &'a [u32],
    pub num_actions: usize,
    /// V of every observation of `data`, as the exported model computes it.
    pub values: &'a [f32],
    /// V of every observation from two independent Q-learning runs on the same labels:
    /// the exported one and another seed's, or the means of an ensemble's two halves.
    pub pair: Option<(&'a [f32], &'a [f32])>,
    /// V of probe states at the last two checkpoints of training.
    pub last_snapshots: Option<(&'a [f32], &'a [f32])>,
    /// The largest possible return.
    pub max_return: f64,
    /// Share of the data's states that the data's own returns or its ways put within 5%
    /// of the largest possible return ([`shown_near_max`]).
    pub shown_near_max: f64,
    /// The data's own discounted return from each row ([`data_returns`]), where V is a
    /// return (the max-Q head; not the one-norm head's `1 - |phi(s)|`).
    pub returns: Option<&'a [f64]>,
    /// The data's own ways to a reward ([`Traced::of`]).
    pub traced: &'a Traced,
}

/// Rows [`transitions_match`] compares.
const MATCH_SAMPLE: usize = 4000;

/// Whether each row's next observation is its own, over an evenly spaced sample of the
/// rows with one: the share of them whose s' lies nearer their own s than another row's
/// s' does (`j` half the sample away), less the share whose s' lies farther. Near 0 when s'
/// is no closer to its own s than to any other (shuffled or mismatched rows), well above
/// it for the data of a system whose next state follows from its state. A share of rows
/// rather than a ratio of distances: where every step changes about as much as any two
/// states differ (a symbolic grid whose states differ only where the agent stands), the
/// distances' medians are alike, yet most rows still lie nearer their own s' (docs/trust.md
/// has its values on the data measured).
///
/// ```
/// use laq::data::Dataset;
/// let n = 100;
/// let obs: Vec<f32> = (0..n).map(|i| i as f32).collect();
/// let next: Vec<f32> = (0..n).map(|i| i as f32 + 1.0).collect();
/// let mut d = Dataset {
///     obs_shape: vec![1],
///     observations: obs.into(),
///     next_observations: next.into(),
///     rewards: vec![0.0; n],
///     terminals: vec![false; n],
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// assert!(laq::run::trust::transitions_match(&d) > 0.9);
/// // The next observations shuffled: each as near its own state as another row's.
/// d.next_observations = (0..n).map(|i| ((37 * i + 11) % n) as f32).collect::<Vec<f32>>().into();
/// assert!(laq::run::trust::transitions_match(&d).abs() < 0.1);
/// ```
pub fn transitions_match(data: &Dataset) -> f64 {
    let rows = data.rows_with_next();
    let m = rows.len().min(MATCH_SAMPLE);
    if m < 2 {
        return f64::NAN;
    }
    let sample: Vec<usize> = (0..m).map(|j| rows[j * rows.len() / m]).collect();
    let dist = |a: &[f32], b: &[f32]| -> f64 {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
            .sum::<f64>()
    };
    let mut balance = 0i64;
    for (j, &i) in sample.iter().enumerate() {
        let s = data.obs_row(i);
        let own = dist(&s, &data.next_obs_row(i));
        // Half the sample away: far apart in the data, so rarely the same trajectory.
        let other = dist(&s, &data.next_obs_row(sample[(j + m / 2) % m]));
        balance += match own.partial_cmp(&other) {
            Some(std::cmp::Ordering::Less) => 1,
            Some(std::cmp::Ordering::Greater) => -1,
            _ => 0,
        };
    }
    balance as f64 / m as f64
}

/// The data's own discounted return from each row: the rewards along the data's
/// trajectory from it (at discount `gamma`), up to the trajectory's end; where that end
/// is no terminal (a timeout, or a cut) and the data's rewards are a cost per step
/// ([`Dataset::reward_baseline`]), that cost goes on for ever after it, as whatever comes
/// next costs at least as much (0 without a cost, as for a terminal).
///
/// ```
/// use laq::data::Dataset;
/// // One trajectory of 4 steps, rewarded (1) on its last.
/// let d = Dataset {
///     obs_shape: vec![1],
///     observations: vec![0.0, 1.0, 2.0, 3.0].into(),
///     next_observations: vec![1.0, 2.0, 3.0, 4.0].into(),
///     rewards: vec![0.0, 0.0, 0.0, 1.0],
///     terminals: vec![false, false, false, true],
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let g = laq::run::trust::data_returns(&d, 0.9);
/// assert!(g.iter().zip([0.729, 0.81, 0.9, 1.0]).all(|(a, b)| (a - b).abs() < 1e-12));
/// // -1 a step up to 0 at the goal, cut there by a timeout: the cost goes on after it.
/// let cost = Dataset {
///     rewards: vec![-1.0, -1.0, -1.0, 0.0],
///     terminals: vec![false; 4],
///     timeouts: Some(vec![false, false, false, true]),
///     ..d
/// };
/// let g = laq::run::trust::data_returns(&cost, 0.9);
/// assert!((g[3] + 9.0).abs() < 1e-9 && (g[2] + 9.1).abs() < 1e-9);
/// ```
pub fn data_returns(data: &Dataset, gamma: f64) -> Vec<f64> {
    let mut out = vec![0.0; data.len()];
    let mut g = 0.0f64;
    let cost = data.reward_baseline() as f64;
    for i in (0..data.len()).rev() {
        let tail = match data.continues(i) {
            true => gamma * g,
            false if cost != 0.0 && !data.terminals[i] => gamma * cost / (1.0 - gamma),
            false => 0.0,
        };
        g = data.rewards[i] as f64 + tail;
        out[i] = g;
    }
    out
}

/// Share of the data's states that the data itself shows to be worth within 5% of
/// `max_return`: by their own discounted return ([`data_returns`]), or by the value of
/// the fewest steps of their way to a reward (`ways`, [`qlearn::path_bound`] of
/// [`Traced::paths`], where the data has ways). A noisy controller takes longer than its
/// data's fastest way: where every state is a few steps from the goal (an arm reaching
/// for a point within its span), its returns put few states that high where a right V
/// puts nearly all.
///
/// ```
/// use laq::data::Dataset;
/// // One trajectory of 4 steps, rewarded (1) on its last: returns 0.729, 0.81, 0.9, 1.
/// let d = Dataset {
///     obs_shape: vec![1],
///     observations: vec![0.0, 1.0, 2.0, 3.0].into(),
///     next_observations: vec![1.0, 2.0, 3.0, 4.0].into(),
///     rewards: vec![0.0, 0.0, 0.0, 1.0],
///     terminals: vec![false, false, false, true],
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// use laq::run::trust::{data_returns, shown_near_max};
/// assert_eq!(shown_near_max(&data_returns(&d, 0.9), None, 1.0), 0.25);
/// assert_eq!(shown_near_max(&data_returns(&d, 0.99), None, 1.0), 1.0);
/// // Ways through the data that reach the reward from the second state in one step.
/// let ways = [0.729, 0.96, 0.9, 1.0];
/// assert_eq!(shown_near_max(&data_returns(&d, 0.9), Some(&ways), 1.0), 0.5);
/// ```
///
/// [`qlearn::path_bound`]: crate::stages::qlearn::path_bound
pub fn shown_near_max(returns: &[f64], ways: Option<&[f32]>, max_return: f64) -> f64 {
    let level = 0.95 * max_return;
    let by_way = |i: usize| {
        ways.and_then(|w| w.get(i))
            .is_some_and(|&b| b as f64 >= level)
    };
    let above = (0..returns.len())
        .filter(|&i| returns[i] >= level || by_way(i))
        .count();
    above as f64 / returns.len().max(1) as f64
}

/// Share of the rows with a non-zero return of their own ([`data_returns`]) where V is
/// below that return by more than 10% of it (`None` without such rows: no reward, and
/// the check does not apply). The data's own
/// trajectory is one way to act from a state, so the value of the best controller is at
/// least its return (in expectation; the margin absorbs a fitted network's error and
/// the luck of a single trajectory).
///
/// ```
/// let returns = [0.5, 1.0, 0.0, 2.0];
/// use laq::run::trust::below_data_returns;
/// assert_eq!(below_data_returns(&[0.6, 0.95, 0.0, 3.0], &returns), Some(0.0));
/// // Half of the V of the data's best: too low where the data did better.
/// assert_eq!(below_data_returns(&[0.25, 0.5, 0.0, 3.0], &returns), Some(2.0 / 3.0));
/// // No row collected a return.
/// assert_eq!(below_data_returns(&[0.25, 0.5], &[0.0, 0.0]), None);
/// ```
pub fn below_data_returns(values: &[f32], returns: &[f64]) -> Option<f64> {
    let (mut below, mut rows) = (0usize, 0usize);
    for (&v, &g) in values.iter().zip(returns) {
        if g != 0.0 {
            rows += 1;
            below += usize::from((v as f64) < g - 0.1 * g.abs());
        }
    }
    (rows > 0).then(|| below as f64 / rows as f64)
}

/// Queries and candidates (times the state's length) [`steps_reliability`] compares at
/// most: about a second of arithmetic.
const NEAR_QUERIES: usize = 2000;
const NEAR_WORK: usize = 400_000_000;

/// What the checks use of the data's own ways to a reward, computed once per run (the
/// checkpoint choice judges ten V against it).
pub struct Traced {
    /// `(row, steps to the next reward)` of every row on a rewarded trajectory
    /// ([`Dataset::steps_to_reward`]).
    pub traces: Vec<(usize, usize)>,
    /// How far the steps to the next reward are a function of the state at all: Spearman
    /// between a traced row's steps and those of its nearest traced state on another
    /// trajectory (`None` for images, whose frames have no distance that says which are
    /// near, and where too few rows are traced).
    pub reliability: Option<f64>,
    /// The fewest steps from each row to a reward through the data
    /// ([`paths::fewest_steps`]).
    pub paths: Option<paths::Steps>,
    /// The data's cost per step, or 0 ([`Dataset::reward_baseline`]).
    pub baseline: f32,
}

impl Traced {
    /// The traced rows of `data` and the measures made of them; the ways through the
    /// data as `cfg` measures them ([`TrainConfig::ways`]).
    ///
    /// ```
    /// use laq::data::Dataset;
    /// // One trajectory of 4 steps, rewarded on its last.
    /// let d = Dataset {
    ///     obs_shape: vec![1],
    ///     observations: vec![0.0, 1.0, 2.0, 3.0].into(),
    ///     next_observations: vec![1.0, 2.0, 3.0, 4.0].into(),
    ///     rewards: vec![0.0, 0.0, 0.0, 1.0],
    ///     terminals: vec![false, false, false, true],
    ///     timeouts: None,
    ///     next_missing: None,
    ///     actions: None,
    /// };
    /// let cfg = laq::run::config::TrainConfig::default();
    /// let t = laq::run::trust::Traced::of(&d, &cfg);
    /// assert_eq!(t.traces, [(3, 0), (2, 1), (1, 2), (0, 3)]);
    /// // Too few traced rows for the reliability of their steps.
    /// assert!(t.reliability.is_none());
    /// // The fewest steps through the data: the same, along the one trajectory (jumps
    /// // between near states cost their length at the data's pace, here as much as a step).
    /// let paths: Vec<f64> = t.paths.unwrap().state.iter().map(|s| (s * 1e4).round() / 1e4).collect();
    /// assert_eq!(paths, [3.0, 2.0, 1.0, 0.0]);
    /// ```
    pub fn of(data: &Dataset, cfg: &TrainConfig) -> Self {
        Self::with_ways(data, cfg.ways(data))
    }

    /// [`Traced::of`] with the ways through `data` already found.
    pub(crate) fn with_ways(data: &Dataset, paths: Option<paths::Steps>) -> Self {
        let traces = data.steps_to_reward();
        let near = Near::new(data, &traces);
        Traced {
            reliability: near.as_ref().and_then(|n| steps_reliability(n)),
            paths,
            traces,
            baseline: data.reward_baseline(),
        }
    }
}

impl Traced {
    /// The most each row's state can be worth by the fewest steps of its way to a reward
    /// ([`crate::stages::qlearn::path_bound`] of [`Traced::paths`] at `gamma`, with the
    /// data's cost per step); `None` where the data shows no ways.
    pub fn bound(&self, gamma: f64, max_return: f64) -> Option<Vec<f32>> {
        let steps = self.paths.as_ref()?;
        Some(crate::stages::qlearn::path_bound(
            &steps.state,
            gamma,
            max_return as f32,
            self.baseline,
        ))
    }
}

/// Evenly spaced traced rows as queries, and as many as [`NEAR_WORK`] allows as
/// candidates, standardised by the candidates' spread (Euclidean distance then weighs
/// every state dimension alike). `None` for images (no distance between frames means
/// nearness) or fewer than 20 traced rows.
struct Near<'a> {
    data: &'a Dataset,
    queries: Vec<(usize, usize)>,
    candidates: Vec<(usize, usize)>,
    /// The candidates' standardised states, row-major.
    points: Vec<f32>,
    mean: Vec<f32>,
    std: Vec<f32>,
}

impl<'a> Near<'a> {
    fn new(data: &'a Dataset, traces: &[(usize, usize)]) -> Option<Self> {
        let d = data.obs_dim();
        if data.is_image() || traces.len() < 20 || d == 0 {
            return None;
        }
        let queries = traces.len().min(NEAR_QUERIES);
        let candidates = traces.len().min((NEAR_WORK / (queries * d)).max(queries));
        let pick = |m: usize| -> Vec<(usize, usize)> {
            (0..m).map(|j| traces[j * traces.len() / m]).collect()
        };
        let (queries, candidates) = (pick(queries), pick(candidates));
        let raw: Vec<f32> = candidates
            .iter()
            .flat_map(|&(i, _)| data.obs_row(i).into_owned())
            .collect();
        // `column_stats` gives 1 for a constant column's spread.
        let (mean, std) = stats::column_stats(&raw, d);
        let mut near = Near {
            data,
            queries,
            candidates,
            points: vec![],
            mean,
            std,
        };
        near.points = raw
            .chunks(d)
            .flat_map(|r| near.standard(r))
            .collect::<Vec<_>>();
        Some(near)
    }

    fn standard(&self, x: &[f32]) -> Vec<f32> {
        x.iter()
            .zip(&self.mean)
            .zip(&self.std)
            .map(|((v, m), s)| (v - m) / s)
            .collect()
    }

    /// Squared distances from traced row `row` to every candidate, in their order.
    fn distances(&self, row: usize) -> Vec<f32> {
        let x = self.standard(&self.data.obs_row(row));
        self.points
            .chunks(x.len())
            .map(|p| p.iter().zip(&x).map(|(a, b)| (a - b) * (a - b)).sum())
            .collect()
    }
}

/// A Spearman `rho` against the steps to the next reward along the data, corrected for
/// attenuation by those steps' `reliability` ([`Traced::reliability`]): a measure that
/// agrees with itself at `r` (two states alike) correlates with anything at most at
/// sqrt(r). Below 0.1 the correction stops growing (at most 3.2x), so noise is not blown
/// up; without a reliability, `rho` itself.
fn corrected_for(rho: f64, reliability: Option<f64>) -> f64 {
    match reliability {
        Some(r) if r.is_finite() && r > 0.0 => (rho / r.max(0.1).sqrt()).min(1.0),
        _ => rho,
    }
}

/// How far the ways through `data` ([`paths::fewest_steps`]) rank the steps of its own
/// rewarded trajectories ([`paths::trajectory_agreement`]), corrected for the data as
/// `trajectory_ranking` corrects V's ([`Traced::reliability`]). Where ways jump between
/// near states, they are the body's ways only if a state reaches the states near it as a
/// step does: a car that must swing back and forth to climb a hill is near, in position
/// and speed, to states it reaches only after a whole swing, and the ways made up of
/// such jumps rank its data's own trajectories at 0.22, where the point-mass mazes'
/// rank theirs at 0.52-1.00 (docs/trust.md, "A car in a valley"). `None` with fewer than
/// 20 traced rows with a way.
///
/// ```
/// use laq::data::{paths, Dataset};
/// use laq::run::trust::ways_agreement;
/// // Two walks down a line to the reward at 0; their ways agree with their own steps.
/// let line: Vec<f32> = (1..=30).rev().map(|x| x as f32).collect();
/// let obs = [line.clone(), line.iter().map(|x| x + 0.5).collect()].concat();
/// let d = Dataset {
///     obs_shape: vec![1],
///     next_observations: obs.iter().map(|x| (x - 1.0).max(0.0)).collect::<Vec<_>>().into(),
///     observations: obs.clone().into(),
///     rewards: obs.iter().map(|&x| f32::from(u8::from(x <= 1.5))).collect(),
///     terminals: obs.iter().map(|&x| x <= 1.5).collect(),
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let ways = paths::fewest_steps(&d, Some(paths::PACE), false).unwrap();
/// assert!(ways_agreement(&d, &ways).unwrap() > 0.9);
/// ```
pub fn ways_agreement(data: &Dataset, steps: &paths::Steps) -> Option<f64> {
    let rho = paths::trajectory_agreement(data, steps)?;
    let traces = data.steps_to_reward();
    let reliability = Near::new(data, &traces).and_then(|n| steps_reliability(&n));
    Some(corrected_for(rho, reliability))
}

/// How far the steps to the next reward along the data are a function of the state at
/// all: Spearman between the steps of a traced row and of its nearest traced state
/// (standardised Euclidean distance) on another trajectory to another reward. Data whose
/// behaviour wanders pass near a reward's place without reaching it, and the same place
/// is then 5 steps from a reward on one trajectory and 500 on another; no V, not even
/// the true one, then ranks those steps well.
fn steps_reliability(near: &Near) -> Option<f64> {
    let (mut own, mut other) = (vec![], vec![]);
    for &(i, k) in &near.queries {
        let dist = near.distances(i);
        let best = near
            .candidates
            .iter()
            .zip(&dist)
            // The reward a row reaches is row `row + steps`: not the query's own.
            .filter(|((j, kj), _)| j + kj != i + k)
            .min_by(|a, b| a.1.total_cmp(b.1));
        if let Some(((_, kj), _)) = best {
            own.push(k as f64);
            other.push(*kj as f64);
        }
    }
    (own.len() >= 20).then(|| stats::spearman(&own, &other))
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
/// Whether a reward `r` is one, where most steps carry `cost` ([`Dataset::reward_baseline`],
/// 0 where there is none): above it, as the ways to a reward that the checks follow
/// ([`Dataset::steps_to_reward`]) count them. A penalty below it marks no goal.
pub(crate) fn rewarded(r: f32, cost: f32) -> bool {
    r > cost
}

pub fn assess(e: &Evidence) -> Trust {
    let data = e.data;
    let n = data.len();
    let mut checks = vec![];
    // Where the rewards are a cost per step, a reward is what lies above it.
    let cost = e.traced.baseline;
    let rewarded = (data.rewards.iter())
        .filter(|&&r| rewarded(r, cost))
        .count();
    // Under a cost per step, or with penalties alone, V still differs from state to
    // state, but nothing marks a goal for the checks to judge it by.
    let penalties = data.rewards.iter().filter(|&&r| r < cost).count();
    let goal = "nothing marks a goal for the checks to judge V by";
    let (above, without) = match cost {
        0.0 if penalties == 0 => (String::new(), "every V is the same".to_string()),
        0.0 => (
            " above 0".to_string(),
            format!("{goal} (the {penalties} below 0 are penalties, which mark none)"),
        ),
        c => (format!(" above the cost of {c} a step"), goal.to_string()),
    };
    checks.push(check(
        REWARDS,
        rewarded as f64,
        1.0,
        rewarded >= 1,
        format!("{rewarded} of {n} transitions carry a reward{above}; without any, {without}"),
    ));
    let mut usage = vec![0usize; e.num_actions];
    for &l in e.labels {
        usage[l as usize] += 1;
    }
    let used = usage.iter().filter(|&&u| u * 100 >= e.labels.len()).count();
    let top = usage.iter().copied().max().unwrap_or(0) as f64 / e.labels.len().max(1) as f64;
    checks.push(check(
        LABELS_USED,
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
    let matched = transitions_match(data);
    checks.push(check(
        TRANSITIONS_MATCH,
        matched,
        TRANSITIONS_MATCH_MIN,
        matched >= TRANSITIONS_MATCH_MIN,
        format!(
            "of the rows compared, {:.0}% more have s' nearer their own s than another \
             row's s' than farther from it; when rows are shuffled or mismatched, s does not \
             predict s' and no label is an action",
            100.0 * matched
        ),
    ));
    let traces = &e.traced.traces;
    // Where (nearly) every row is rewarded (a dense reward), the steps to one do not vary:
    // nothing to rank V by, which is no evidence against it.
    let leading = traces.iter().filter(|&&(_, k)| k > 0).count();
    if traces.len() >= 20 && leading >= 20 {
        let v: Vec<f64> = traces.iter().map(|&(i, _)| e.values[i] as f64).collect();
        let k: Vec<f64> = traces.iter().map(|&(_, k)| -(k as f64)).collect();
        let rho = stats::spearman(&v, &k);
        let (corrected, how) = match e.traced.reliability {
            Some(r) if r.is_finite() && r > 0.0 => {
                let corrected = corrected_for(rho, Some(r));
                let how = format!(
                    "at Spearman {rho:.2}, {corrected:.2} corrected for the data (the steps of \
                     two alike states on other trajectories agree at {r:.2}, so even the \
                     true V ranks the steps at about {:.2} at most)",
                    r.sqrt().min(1.0)
                );
                (corrected, how)
            }
            _ => (rho, format!("at Spearman {rho:.2}")),
        };
        let min = paths::MIN_TRAJECTORY_AGREEMENT;
        checks.push(check(
            TRAJECTORY_RANKING,
            corrected,
            min,
            corrected >= min,
            format!(
                "along the data's own {} rewarded trajectory steps, V ranks states closer to \
                 the reward higher {how}; a V that does not, ranks states by something else",
                traces.len()
            ),
        ));
    }
    if let Some(steps) = &e.traced.paths {
        let ranking = |ways: &[f64]| -> (usize, f64) {
            let (v, k): (Vec<f64>, Vec<f64>) = (ways.iter().zip(e.values))
                .filter(|(s, _)| s.is_finite())
                .map(|(s, &v)| (v as f64, -s))
                .unzip();
            (v.len(), stats::spearman(&v, &k))
        };
        let (ways, rho) = ranking(&steps.state);
        let stepped = steps.stepped.as_deref().map(|s| ranking(s).1);
        // Fewer states than that rank nothing reliably.
        if ways >= 20 {
            // Jumps that chain are a body's ways where it moves to any state beside it;
            // where it cannot, the ways that step after each jump are. The value stays
            // the first ranking: the ways that bound the bootstraps, by which the
            // checkpoints are chosen (`Trust::merit`).
            let pass = rho >= 0.7 || stepped.is_some_and(|s| s >= 0.7);
            let how = match stepped {
                Some(s) => format!(
                    ", and like the ways where a step of the data follows each jump at \
                     {s:.2} (a body that cannot move to any state beside it, as a pendulum \
                     that must swing to rise, goes on only as the data does from a state \
                     near it; either at 0.7 passes)"
                ),
                None => String::new(),
            };
            checks.push(check(
                PATH_RANKING,
                rho,
                0.7,
                pass,
                format!(
                    "V ranks the {ways} of the data's {n} states with a way to a reward like \
                     the fewest steps of that way at Spearman {rho:.2}{how}: the data's \
                     transitions, joined where states recur or lie within {} median steps of \
                     each other, show the shortest way from each state; a V that does not \
                     follow it ranks states by something else (value leaking through a wall, \
                     say)",
                    paths::REACH
                ),
            ));
        }
    }
    if let Some(below) = e.returns.and_then(|g| below_data_returns(e.values, g)) {
        checks.push(check(
            BELOW_DATA_RETURNS,
            below,
            0.1,
            below <= 0.1,
            format!(
                "V is more than 10% below the discounted return the data itself collected \
                 from {:.0}% of the states with a return; the best controller's value is at \
                 least the data's own, so a V below it has not learned the values (too \
                 little training, values that did not travel back from the rewards)",
                100.0 * below
            ),
        ));
    }
    if let Some((first, second)) = e.pair {
        let a: Vec<f64> = first.iter().map(|&x| x as f64).collect();
        let b: Vec<f64> = second.iter().map(|&x| x as f64).collect();
        let rho = stats::spearman(&a, &b);
        checks.push(check(
            SEED_AGREEMENT,
            rho,
            SEEDS_AGREE,
            rho >= SEEDS_AGREE,
            format!(
                "Q-learning from other seeds (another run, or the other half of the \
                 ensemble) ranks the data's states alike at Spearman {rho:.2}; values that \
                 depend on the seed are noise"
            ),
        ));
    }
    if let Some((before, last)) = e.last_snapshots {
        let a: Vec<f64> = before.iter().map(|&x| x as f64).collect();
        let b: Vec<f64> = last.iter().map(|&x| x as f64).collect();
        let rho = stats::spearman(&a, &b);
        checks.push(check(
            CONVERGED,
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
    // States the data shows that close to a reward may be that high: only the excess
    // counts (a small maze whose data reach the reward every few steps has many; an arm
    // whose goals all lie a few fast steps away has nearly all). Where the bootstraps are
    // bounded by the same ways, V can pass them little, so the check is then less of a
    // witness, as `path_ranking` is.
    let excess = saturated - e.shown_near_max;
    checks.push(check(
        NOT_SATURATED,
        excess,
        0.25,
        excess <= 0.25,
        format!(
            "{:.0}% of the data's states have V within 5% of the largest possible return \
             ({:.3}), {:.0}% more than the data's own returns or its fastest ways put \
             there; an over-estimated V is high everywhere and ranks nothing",
            100.0 * saturated,
            e.max_return,
            100.0 * excess
        ),
    ));
    checks.extend(reward_ends_alike(data, e.values));
    let verdict = if checks.iter().all(|c| c.pass) {
        Verdict::Trusted
    } else {
        Verdict::Doubtful
    };
    Trust {
        verdict,
        checks,
        advice: vec![],
    }
}

#[cfg(test)]
#[path = "../../tests/common/car.rs"]
mod car;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::data::Dataset;

    /// gymnasium's MountainCar as `scripts/mountaincar.py` logs it
    /// ([`car::mountain_car_rows`]), from seed 0.
    pub(crate) fn mountain_car(rows: usize) -> Dataset {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let (o, nx, r, t, cut) = car::mountain_car_rows(rows, |lo, hi| rng.random_range(lo..hi));
        Dataset {
            obs_shape: vec![2],
            observations: o.into(),
            next_observations: nx.into(),
            rewards: r,
            terminals: t,
            timeouts: Some(cut),
            next_missing: None,
            actions: None,
        }
    }

    /// Near states of a car that must swing to climb are not a step apart: the ways that
    /// jumps make up rank its own trajectories badly and are dropped; a run written
    /// before `ways_agree` keeps them.
    #[test]
    fn ways_a_body_cannot_take_are_dropped() {
        let d = mountain_car(20_000);
        let cfg = TrainConfig::default();
        let kept = TrainConfig {
            ways_agree: false,
            ..cfg.clone()
        };
        let ways = kept.ways(&d).expect("ways through the car's states");
        assert!(ways.joined);
        let agreement = ways_agreement(&d, &ways).unwrap();
        assert!(agreement < paths::MIN_TRAJECTORY_AGREEMENT, "{agreement}");
        assert!(cfg.ways(&d).is_none());
        // With no ways to bound DQN's bootstraps, `auto` learns by IQL.
        assert!(cfg.learns_without_ways(&d));
        assert!(!kept.learns_without_ways(&d));
        let dqn_regardless = TrainConfig {
            iql_without_ways: false,
            ..cfg
        };
        assert!(!dqn_regardless.learns_without_ways(&d));
    }

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
        line(o, nx, r, t, None)
    }

    /// One-dimensional data from its columns.
    fn line(
        o: Vec<f32>,
        nx: Vec<f32>,
        r: Vec<f32>,
        t: Vec<bool>,
        to: Option<Vec<bool>>,
    ) -> Dataset {
        Dataset {
            obs_shape: vec![1],
            observations: o.into(),
            next_observations: nx.into(),
            rewards: r,
            terminals: t,
            timeouts: to,
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

    /// A walker on the line 0..=40 heading for one random waypoint after another (one
    /// unit a step), 400 steps from each start, rewarded at each pass through 20 and
    /// walking on: beside 20, the next reward is one step away or a whole excursion, so
    /// the steps to it are a noisy function of the place.
    fn wandering() -> Dataset {
        let (mut o, mut nx, mut r, mut to) = (vec![], vec![], vec![], vec![]);
        let mut seed = 12345u64;
        let mut draw = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % 41) as f32
        };
        for start in 0..=40 {
            let mut s = start as f32;
            let mut goal = draw();
            for step in 0..400 {
                while goal == s {
                    goal = draw();
                }
                let next = s + (goal - s).signum();
                o.push(s);
                nx.push(next);
                r.push(if next == 20.0 { 1.0 } else { 0.0 });
                to.push(step == 399);
                s = next;
            }
        }
        let n = r.len();
        line(o, nx, r, vec![false; n], Some(to))
    }

    /// What a run knows about `values` on the walker's line: no labels, pair, snapshots
    /// or returns.
    fn walker_evidence<'a>(
        d: &'a Dataset,
        labels: &'a [u32],
        values: &'a [f32],
        traced: &'a Traced,
    ) -> Evidence<'a> {
        Evidence {
            data: d,
            labels,
            num_actions: 1,
            values,
            pair: None,
            last_snapshots: None,
            max_return: 1.0,
            shown_near_max: 0.0,
            returns: None,
            traced,
        }
    }

    /// The check of that name, if it applied.
    fn named(t: &Trust, name: &str) -> Option<Check> {
        t.checks.iter().find(|c| c.name == name).cloned()
    }

    #[test]
    fn trajectory_ranking_is_judged_against_what_the_data_allows() {
        let d = wandering();
        let traces = d.steps_to_reward();
        let truth: Vec<f64> = traces
            .iter()
            .map(|&(i, _)| -(d.obs_row(i)[0] as f64 - 20.0).abs())
            .collect();
        let k: Vec<f64> = traces.iter().map(|&(_, k)| -(k as f64)).collect();
        let raw = stats::spearman(&truth, &k);
        let traced = Traced::of(&d, &TrainConfig::default());
        let r = traced.reliability.unwrap();
        assert!(r > 0.0 && r < 0.5, "reliability {r}");
        // The true V (closer to 20 is better) fails the raw ranking, passes once
        // corrected; a V unrelated to the place does not.
        let labels = vec![0u32; d.len()];
        let values: Vec<f32> = (0..d.len())
            .map(|i| -(d.obs_row(i)[0] - 20.0).abs())
            .collect();
        let noise: Vec<f32> = (0..d.len()).map(|i| ((i * 7919) % 101) as f32).collect();
        let e = walker_evidence(&d, &labels, &values, &traced);
        let ranking = |t: &Trust| named(t, TRAJECTORY_RANKING).unwrap();
        let good = ranking(&assess(&e));
        assert!(
            raw < 0.3 && good.pass,
            "raw {raw}, corrected {}",
            good.value
        );
        let bad = ranking(&assess(&Evidence {
            values: &noise,
            ..e
        }));
        assert!(!bad.pass, "{}", bad.value);
        // Alike states reach the reward in the same steps on the chain: no correction.
        assert_eq!(
            Traced::of(&chain(), &TrainConfig::default()).reliability,
            Some(1.0)
        );
    }

    /// A reward on every row (a dense reward): no steps to a reward to rank V by, so
    /// `trajectory_ranking` does not apply, rather than failing any V.
    #[test]
    fn a_reward_on_every_row_leaves_nothing_to_rank_by() {
        let mut d = wandering();
        let labels = vec![0u32; d.len()];
        let values: Vec<f32> = (0..d.len())
            .map(|i| -(d.obs_row(i)[0] - 20.0).abs())
            .collect();
        let traced = Traced::of(&d, &TrainConfig::default());
        assert!(named(
            &assess(&walker_evidence(&d, &labels, &values, &traced)),
            TRAJECTORY_RANKING
        )
        .is_some());
        for (i, r) in d.rewards.iter_mut().enumerate() {
            *r = 0.01 + (d.observations.row(i, 1)[0] - 20.0).abs().recip().min(1.0);
        }
        let traced = Traced::of(&d, &TrainConfig::default());
        let t = assess(&walker_evidence(&d, &labels, &values, &traced));
        assert!(named(&t, TRAJECTORY_RANKING).is_none());
    }

    /// On the wandering walker's line, the fewest steps through the data from a place are
    /// its distance to 20, though its trajectories wander: the true V follows them, a V
    /// with a second peak far from the reward (value leaked there) does not.
    #[test]
    fn path_ranking_sees_value_where_the_data_never_went_fast() {
        let d = wandering();
        let traced = Traced::of(&d, &TrainConfig::default());
        let steps = &traced.paths.as_ref().unwrap().state;
        for (i, &k) in steps.iter().enumerate() {
            // The reward comes with the step onto 20: from 19 or 21 it is 0 steps away,
            // from 20 itself 1 (a step off and the rewarded one back).
            let far = ((d.obs_row(i)[0] - 20.0).abs() - 1.0).abs() as f64;
            assert_eq!(k, far, "row {i}");
        }
        let labels = vec![0u32; d.len()];
        let place = |f: &dyn Fn(f32) -> f32| -> Vec<f32> {
            (0..d.len()).map(|i| f(d.obs_row(i)[0])).collect()
        };
        let truth = place(&|x| -(x - 20.0).abs());
        let leak = place(&|x| -(x - 20.0).abs().min((x - 3.0).abs()));
        let e = walker_evidence(&d, &labels, &truth, &traced);
        let good = assess(&e);
        let bad = assess(&Evidence { values: &leak, ..e });
        let (g, b) = (
            named(&good, PATH_RANKING).unwrap(),
            named(&bad, PATH_RANKING).unwrap(),
        );
        assert!(g.pass && g.value > 0.9, "{good}");
        assert!(!b.pass, "{bad}");
        // The checks prefer the true V, and say why.
        assert!(preferred(&good, &bad) && !preferred(&bad, &good));
        // Too few states with a way to a reward: no check.
        let chain = chain().select(&(0..10).collect::<Vec<_>>());
        let traced = Traced::of(&chain, &TrainConfig::default());
        let values = vec![0.0; chain.len()];
        let e = walker_evidence(&chain, &[0; 10], &values, &traced);
        assert!(named(&assess(&e), PATH_RANKING).is_none());
    }

    /// A body that turns one way round a ring: its V is the steps the way it turns, which
    /// jumps that chain do not follow (they go back against its turning) and ways that
    /// step after each jump do; a V that follows neither fails.
    #[test]
    fn path_ranking_follows_the_way_a_body_turns() {
        let d = crate::data::paths::tests::one_way_ring();
        let traced = Traced::of(&d, &TrainConfig::default());
        let ways = traced.paths.as_ref().unwrap();
        let turning: Vec<f32> = ways
            .stepped
            .as_ref()
            .unwrap()
            .iter()
            .map(|&s| -s as f32)
            .collect();
        let chained: Vec<f32> = ways.state.iter().map(|&s| -s as f32).collect();
        let labels = vec![0u32; d.len()];
        let rank = |values: &[f32]| {
            named(
                &assess(&walker_evidence(&d, &labels, values, &traced)),
                PATH_RANKING,
            )
            .unwrap()
        };
        let rho = |a: &[f32], b: &[f32]| {
            let f = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
            stats::spearman(&f(a), &f(b))
        };
        // The two ways disagree: alone, the chained ones would fail the turning V; the
        // check passes it, its value still that ranking, the way it turns named.
        assert!(rho(&turning, &chained) < 0.7, "{}", rho(&turning, &chained));
        let c = rank(&turning);
        assert!(
            c.pass && c.value < 0.7 && c.why.contains("each jump at 1.00"),
            "{c:?}"
        );
        let c = rank(&chained);
        assert!(c.pass && c.value > 0.99, "{c:?}");
        // Each state's angle from the reward, the wrong way round: neither way.
        let away: Vec<f32> = turning.iter().map(|&t| -t).collect();
        assert!(!rank(&away).pass);
    }

    #[test]
    fn a_good_v_is_trusted_a_flat_or_low_one_is_not() {
        let d = chain();
        let labels: Vec<u32> = (0..30).map(|i| (i % 2) as u32).collect();
        let good: Vec<f32> = (0..30).map(|i| 0.9f32.powi(9 - (i % 10))).collect();
        let returns = data_returns(&d, 0.9);
        let e = Evidence {
            data: &d,
            labels: &labels,
            num_actions: 2,
            values: &good,
            pair: Some((&good, &good)),
            last_snapshots: Some((&good, &good)),
            max_return: 1.0,
            shown_near_max: shown_near_max(&returns, None, 1.0),
            returns: Some(&returns),
            traced: &Traced::of(&d, &TrainConfig::default()),
        };
        let t = assess(&e);
        assert_eq!(t.verdict, Verdict::Trusted, "{t}");
        let flat = vec![1.0f32; 30];
        let reversed: Vec<f32> = good.iter().map(|v| 1.0 - v).collect();
        let bad = assess(&Evidence {
            values: &flat,
            pair: Some((&flat, &reversed)),
            ..e
        });
        assert_eq!(bad.verdict, Verdict::Doubtful);
        let failed: Vec<&str> = bad.failed().map(|c| c.name.as_str()).collect();
        assert!(failed.contains(&"not_saturated"), "{bad}");
        assert!(failed.contains(&"seed_agreement"), "{bad}");
        assert!(bad.to_string().contains("DOUBTFUL"));
        // The same ranking at half the values: as if they had not travelled back far.
        let half: Vec<f32> = good.iter().map(|v| v / 2.0).collect();
        let low = assess(&Evidence {
            values: &half,
            pair: Some((&half, &half)),
            last_snapshots: Some((&half, &half)),
            ..e
        });
        let failed: Vec<&str> = low.failed().map(|c| c.name.as_str()).collect();
        assert_eq!(failed, ["below_data_returns"], "{low}");
    }
}
