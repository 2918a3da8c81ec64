//! Typed records of the files a run directory holds and the code reads back: `run.json`
//! ([`RunInfo`]) and `metrics.json` ([`RunMetrics`], whose `Display` is `summary.txt`).
//! The JSON and the text come from the same struct.

use crate::export::ValueModel;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// The runtime's model file in a run directory.
pub const VALUE_FILE: &str = "value.safetensors";
/// The model a path names: the file itself, or a run directory's [`VALUE_FILE`].
///
/// ```
/// use laq::run::record::model_file;
///
/// let dir = std::env::temp_dir();
/// assert_eq!(model_file(&dir), dir.join("value.safetensors"));
/// assert_eq!(model_file("m.safetensors".as_ref()), std::path::Path::new("m.safetensors"));
/// ```
pub fn model_file(path: &Path) -> std::path::PathBuf {
    if path.is_dir() {
        path.join(VALUE_FILE)
    } else {
        path.to_path_buf()
    }
}

/// The run record in a run directory.
pub const RUN_FILE: &str = "run.json";
/// The metrics in a run directory.
pub const METRICS_FILE: &str = "metrics.json";
/// The settings in a run directory.
pub const CONFIG_FILE: &str = "config.toml";

/// `run.json`: enough to repeat a run from its directory alone (`laq train --repeat DIR`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The dataset as the command line named it.
    pub data: String,
    /// [`crate::data::Dataset::fingerprint`] of the dataset.
    pub data_fingerprint: String,
    pub transitions: usize,
    pub seed: u64,
    pub laq_version: String,
    /// `laq-value 1` or `laq-value 2`.
    pub model_format: String,
    pub command: String,
}

impl RunInfo {
    /// Reads `DIR/run.json`.
    pub fn read(dir: &Path) -> Result<Self> {
        read_json(&dir.join(RUN_FILE))
    }
}

impl fmt::Display for RunInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "data         {} ({} transitions, fingerprint {})",
            self.data, self.transitions, self.data_fingerprint
        )?;
        writeln!(f, "seed         {}", self.seed)?;
        writeln!(f, "model        {}", self.model_format)?;
        writeln!(f, "laq          {}", self.laq_version)?;
        writeln!(f, "command      {}", self.command)
    }
}

/// The exported model, as the summary describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    pub input_dim: usize,
    pub outputs: usize,
    /// `[C, H, W]` and number of convolutions of an image model.
    pub conv: Option<([usize; 3], usize)>,
    pub layers: usize,
    pub head: String,
}

impl ModelSummary {
    /// The summary of `m`.
    pub fn of(m: &ValueModel) -> Self {
        ModelSummary {
            input_dim: m.input_dim(),
            outputs: m.num_outputs(),
            conv: m.conv.as_ref().map(|c| (c.input_shape, c.layers.len())),
            layers: m.layers.len(),
            head: m.head.name().to_string(),
        }
    }
}

impl fmt::Display for ModelSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {} (", self.input_dim, self.outputs)?;
        if let Some((shape, n)) = self.conv {
            write!(f, "{n} convolutions on {shape:?} images, then ")?;
        }
        write!(f, "{} layers, head {})", self.layers, self.head)
    }
}

/// Rows that change a context, left out of mining and Q-learning
/// ([`crate::data::contexts::carried`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextsLeftOut {
    /// The context dimensions ([`crate::data::contexts::dims`]).
    pub dims: Vec<usize>,
    /// How many rows change one.
    pub rows: usize,
}

impl ContextsLeftOut {
    /// The contexts of `data` and the rows that change one ([`crate::data::contexts`]),
    /// where any row does.
    pub fn of(data: &crate::data::Dataset) -> Option<(Self, Vec<usize>)> {
        let contexts = crate::data::contexts::dims(data);
        let carried = crate::data::contexts::carried(data, &contexts);
        if carried.is_empty() {
            return None;
        }
        let dims = (contexts.iter().enumerate())
            .filter_map(|(j, &c)| c.then_some(j))
            .collect();
        let rows = carried.len();
        Some((ContextsLeftOut { dims, rows }, carried))
    }
}

impl std::fmt::Display for ContextsLeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dims {} change only on an episode's first row or the row after a reward (the \
             last episode's goal still shown, a gripper settling after its reset): no step \
             of the task; {} such rows left out of mining and Q-learning",
            crate::util::runs(self.dims.iter().map(|&j| j as u64), "-"),
            self.rows
        )
    }
}

/// `metrics.json`: what a run measured without any reference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMetrics {
    /// The dataset as the command line named it.
    pub source: String,
    pub labels: String,
    /// The Q-learning that ran (`auto` resolved).
    pub q: String,
    pub transitions: usize,
    pub obs_shape: Vec<usize>,
    pub num_actions: usize,
    /// Transitions Q-learning used (fewer with `top_actions`).
    pub q_transitions: usize,
    pub top_actions: Option<usize>,
    /// Transitions per label.
    pub label_usage: Vec<usize>,
    /// Mean forward-model loss per tenth of mining (latent labels only).
    pub mining_loss: Option<Vec<f32>>,
    /// Latent labels only: `1 - forward-model loss / loss of K clusters of s' alone`;
    /// near 1 the latent actions are actions, near 0 clusters of s' (informs; not a trust
    /// check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_model_gain: Option<f64>,
    /// Mined labels on vector states: the share of each value's change (s' - s) that the
    /// forward model explains; near 0 for a value that is noise to every latent action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_explained: Option<Vec<f32>>,
    /// Labels on vector states with deep Q-learning: how far the labels move each value
    /// over up to 64 steps, as a share of its spread (`null` for a value that never
    /// varies); below 0.1 no label moves it ([`crate::stages::moved::moved_by_labels`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels_move: Option<Vec<Option<f32>>>,
    /// Those of the values no label moves that are contexts (no transition changes them
    /// within an episode: a goal): V reads them, and no run learns again without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmoved_contexts: Vec<usize>,
    /// Mean Q-learning loss per tenth of training (`null` where it diverged to NaN).
    #[serde(with = "crate::util::json::nan_f32s")]
    pub q_loss: Vec<f32>,
    /// Seconds per stage.
    pub timings_s: BTreeMap<String, f64>,
    /// Largest |fitted - learned| where the exported network was fitted to a table or V.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_max_abs_error: Option<f64>,
    /// States whose V the export fit took at the bound of the data's ways (`fit_bound`),
    /// where the bound applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_bounded: Option<usize>,
    /// Where the settings bound V by the data's ways and the ways do not stitch the data's
    /// trajectories (each episode with its own goal), so none bound it: the share of the
    /// ways that end at another reward than their own trajectory's next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ways_stitched: Option<f64>,
    /// Purity of the labels against discrete ground-truth actions, ignoring the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_purity: Option<f64>,
    /// State-conditioned purity (discrete states and actions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purity: Option<f64>,
    pub model: ModelSummary,
    /// The oracle-free verdict on V and its checks.
    pub trust: crate::run::trust::Trust,
    /// An ensemble's checkpoints, each judged by the checks; the chosen one is exported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub q_checkpoints: Vec<Candidate>,
    /// Where Q-learning ran again along the data's trajectories, and which V was exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retargeted: Option<Retargeted>,
    /// Where Q-learning ran again ignoring the values the labels call noise, and which V
    /// was exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_ignored: Option<NoiseIgnored>,
    /// Where the run went again from another seed, and which seed's V was exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub another_seed: Option<AnotherSeed>,
    /// Rows that change a context, left out of mining and Q-learning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contexts: Option<ContextsLeftOut>,
    /// Rows on which the log cuts an episode at its reward and Q-learning ended it
    /// ([`crate::run::config::TrainConfig::ends_at_reward_cuts`]), where it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward_cuts_ended: Option<usize>,
    /// Whether `q = "auto"` learned by IQL because the data shows no ways a body can
    /// take ([`crate::run::config::TrainConfig::learns_without_ways`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub iql_without_ways: bool,
    /// Where the log pays a cost per step until its episodes end: V is the value above
    /// paying it for ever ([`crate::data::cost::CostToEnd`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_to_end: Option<crate::data::cost::CostToEnd>,
    /// What reading the dataset did: rows left out and why, terminal rows without a next
    /// observation, derived rewards, assumptions (empty for a file read as it is).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reading: Vec<String>,
}

/// One checkpoint of Q-learning as the checks judge it (its members' mean V).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Candidate {
    /// The Q-learning step of the checkpoint.
    pub step: usize,
    pub checks_passed: usize,
    #[serde(default)]
    pub checks_failed: usize,
    /// The `path_ranking` check's value, by which checkpoints failing as few checks are
    /// compared.
    #[serde(default)]
    pub path_ranking: Option<f64>,
    pub trajectory_ranking: Option<f64>,
    /// Whether this checkpoint's V is the one exported.
    pub chosen: bool,
}

/// A run whose one-step targets (`dqn.lambda = 0`) left V below the data's own returns
/// (`below_data_returns` failed), and whose Q-learning ran again along the data's
/// trajectories (`retry_along_trajectories`): the V the checks prefer is exported.
///
/// ```
/// use laq::run::record::Retargeted;
/// use laq::run::trust::Verdict;
/// let r = Retargeted {
///     one_step: Verdict::Doubtful,
///     one_step_failed: vec!["below_data_returns".into()],
///     along: Verdict::Trusted,
///     along_failed: vec![],
///     target_update: 1000,
///     exported_along: true,
/// };
/// assert!(r.to_string().contains("exported: the V along the trajectories"));
/// ```
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Retargeted {
    /// The verdict on V with one-step targets.
    pub one_step: crate::run::trust::Verdict,
    /// The checks that V failed.
    pub one_step_failed: Vec<String>,
    /// The verdict on V with targets along the trajectories (`dqn.lambda = 1`).
    pub along: crate::run::trust::Verdict,
    /// The checks that V failed.
    pub along_failed: Vec<String>,
    /// `dqn.target_update` of Q-learning along the trajectories.
    pub target_update: usize,
    /// Whether the V along the trajectories is the one exported; otherwise the one-step V
    /// is, and `config.toml` keeps its settings.
    pub exported_along: bool,
}

/// A run whose V was doubtful while some values were noise to every label or moved by
/// none (`retry_ignoring_noise`, `retry_ignoring_unmoved`), or trusted with halves that
/// agree less than two seeds do beside values no label moves: Q-learning ran again with
/// those values ignored. Beside a doubtful V, that V is exported where it fails fewer
/// checks; beside a trusted one, where it is trusted and its halves agree as two seeds do.
///
/// ```
/// use laq::run::record::NoiseIgnored;
/// use laq::run::trust::Verdict;
/// let r = NoiseIgnored {
///     values: vec![4, 5],
///     unmoved: vec![5],
///     reading: Verdict::Doubtful,
///     reading_failed: vec!["halves_agree".into()],
///     reading_halves: Some(0.3),
///     ignoring: Verdict::Trusted,
///     ignoring_failed: vec![],
///     ignoring_halves: Some(0.97),
///     exported_ignoring: true,
/// };
/// let line = r.to_string();
/// assert!(line.contains("values 4, 5 (4 noise to every label, 5 moved by no label)"));
/// assert!(line.contains("exported: the V that ignores them"));
/// ```
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct NoiseIgnored {
    /// The values ignored (0-based): noise to every label, or moved by none.
    pub values: Vec<usize>,
    /// Those of them that no label moves ([`crate::stages::moved::unmoved_by_labels`]);
    /// the others are noise to every label.
    #[serde(default)]
    pub unmoved: Vec<usize>,
    /// The verdict on the V that reads them.
    pub reading: crate::run::trust::Verdict,
    /// The checks that V failed.
    pub reading_failed: Vec<String>,
    /// That V's `halves_agree`, where the check ran.
    #[serde(default)]
    pub reading_halves: Option<f64>,
    /// The verdict on the V that ignores them.
    pub ignoring: crate::run::trust::Verdict,
    /// The checks that V failed.
    pub ignoring_failed: Vec<String>,
    /// That V's `halves_agree`, where the check ran.
    #[serde(default)]
    pub ignoring_halves: Option<f64>,
    /// Whether the V that ignores them is the one exported (`config.toml` then names them
    /// in `ignored_values`).
    pub exported_ignoring: bool,
}

impl fmt::Display for NoiseIgnored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &mut dyn Iterator<Item = &usize>| -> String {
            v.map(usize::to_string).collect::<Vec<_>>().join(", ")
        };
        let noise = list(&mut self.values.iter().filter(|j| !self.unmoved.contains(j)));
        let unmoved = list(&mut self.unmoved.iter());
        let why = match (noise.is_empty(), unmoved.is_empty()) {
            (false, true) => "noise to every label".to_string(),
            (true, false) => "moved by no label".to_string(),
            _ => format!("{noise} noise to every label, {unmoved} moved by no label"),
        };
        let halves = |h: Option<f64>| match h {
            Some(h) => format!(", halves agree at {h:.2}"),
            None => String::new(),
        };
        let trusted = self.reading == crate::run::trust::Verdict::Trusted;
        let them = if self.values.len() > 1 { "them" } else { "it" };
        write!(
            f,
            "V reading value{} {} ({why}): {}{}; ignoring {them} (`ignored_values`): {}{}; \
             exported: the V {}",
            if self.values.len() > 1 { "s" } else { "" },
            list(&mut self.values.iter()),
            verdict_line(self.reading, &self.reading_failed),
            halves(self.reading_halves),
            verdict_line(self.ignoring, &self.ignoring_failed),
            halves(self.ignoring_halves),
            match (self.exported_ignoring, trusted) {
                (true, _) => format!("that ignores {them}"),
                (false, false) => {
                    format!("that reads {them} (the other fails as many checks or more)")
                }
                (false, true) => format!(
                    "that reads {them} (the other is doubtful, or its halves agree less \
                     than two seeds do)"
                ),
            }
        )
    }
}

/// A run whose V was doubtful by the checks that say its training depends on chance
/// alone ([`crate::run::trust::Trust::unsteady`]), and which went again from another seed
/// (`retry_with_another_seed`): labels, Q-learning and their retries. That seed's V is
/// exported where it is trusted.
///
/// ```
/// use laq::run::record::AnotherSeed;
/// use laq::run::trust::Verdict;
/// let r = AnotherSeed {
///     first_seed: 1,
///     first: Verdict::Doubtful,
///     first_failed: vec!["halves_agree".into()],
///     seed: 7,
///     again: Verdict::Trusted,
///     again_failed: vec![],
///     exported_again: true,
/// };
/// let line = r.to_string();
/// assert!(line.starts_with("seed 1: doubtful (failed halves_agree); seed 7: trusted"));
/// assert!(line.ends_with("exported: seed 7's V"));
/// ```
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AnotherSeed {
    /// The seed the run was asked for.
    pub first_seed: u64,
    /// The verdict on that seed's V.
    pub first: crate::run::trust::Verdict,
    /// The checks that V failed.
    pub first_failed: Vec<String>,
    /// The seed the run went again from.
    pub seed: u64,
    /// The verdict on that seed's V.
    pub again: crate::run::trust::Verdict,
    /// The checks that V failed.
    pub again_failed: Vec<String>,
    /// Whether the other seed's V is the one exported (`config.toml` then holds its seed).
    pub exported_again: bool,
}

impl fmt::Display for AnotherSeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {}: {}; seed {}: {}; exported: seed {}'s V",
            self.first_seed,
            verdict_line(self.first, &self.first_failed),
            self.seed,
            verdict_line(self.again, &self.again_failed),
            match self.exported_again {
                true => self.seed,
                false => self.first_seed,
            }
        )
    }
}

/// A verdict and the checks that failed, as a record's line shows them.
fn verdict_line(v: crate::run::trust::Verdict, failed: &[String]) -> String {
    match failed {
        [] => format!("{v:?}").to_lowercase(),
        _ => format!("{v:?} (failed {})", failed.join(", ")).to_lowercase(),
    }
}

impl fmt::Display for Retargeted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = verdict_line;
        write!(
            f,
            "one-step targets: {}; again along the data's trajectories (`dqn.lambda = 1`, \
             `dqn.target_update = {}`): {}; exported: the V {}",
            verdict(self.one_step, &self.one_step_failed),
            self.target_update,
            verdict(self.along, &self.along_failed),
            match self.exported_along {
                true => "along the trajectories",
                false => "of one-step targets (the checks prefer it)",
            }
        )
    }
}

impl RunMetrics {
    /// Reads `DIR/metrics.json`.
    pub fn read(dir: &Path) -> Result<Self> {
        read_json(&dir.join(METRICS_FILE))
    }
}

/// `summary.txt`.
impl fmt::Display for RunMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "LAQ run on {}", self.source)?;
        writeln!(f, "  transitions        {}", self.transitions)?;
        for line in &self.reading {
            writeln!(f, "  reading            {line}")?;
        }
        writeln!(f, "  observation shape  {:?}", self.obs_shape)?;
        if let Some(c) = &self.contexts {
            writeln!(f, "  contexts           {c}")?;
        }
        writeln!(
            f,
            "  labels             {} ({} actions)",
            self.labels, self.num_actions
        )?;
        writeln!(f, "  label usage        {:?}", self.label_usage)?;
        writeln!(f, "  Q-learning         {}", self.q)?;
        if let Some(c) = &self.cost_to_end {
            writeln!(f, "  rewards            {c}")?;
        }
        if let Some(n) = self.reward_cuts_ended {
            writeln!(
                f,
                "  reward cuts        {n} episodes that the log cuts on their reward (a \
                 timeout, or the next row starting elsewhere) end there for Q-learning, as \
                 at a terminal (`reward_cuts_end`)"
            )?;
        }
        if self.iql_without_ways {
            writeln!(
                f,
                "  no ways            near states are no ways a body can take, so nothing \
                 bounds DQN's maximum over labels: Q learned by IQL (`iql_without_ways`)"
            )?;
        }
        if let Some(p) = self.purity {
            writeln!(f, "  purity (state)     {p:.4}")?;
        }
        if let Some(g) = self.forward_model_gain {
            writeln!(
                f,
                "  forward model      {g:.3} of the error of clustering s' alone explained"
            )?;
        }
        if let Some(e) = &self.change_explained {
            writeln!(f, "  change explained   {}", explained_line(e))?;
        }
        if let Some(m) = &self.labels_move {
            writeln!(
                f,
                "  labels move        {}",
                moved_line(m, &self.unmoved_contexts)
            )?;
        }
        if let Some(e) = self.export_max_abs_error {
            writeln!(
                f,
                "  export error       {e:.2e} (largest |fitted - learned| on the fitted states)"
            )?;
        }
        match self.fit_bounded {
            Some(0) => writeln!(
                f,
                "  fit bound          V within the bound of the data's ways at every state"
            )?,
            Some(n) => writeln!(
                f,
                "  fit bound          V above the data's ways at {n} of {} states: fitted at the bound",
                self.transitions - self.contexts.as_ref().map_or(0, |c| c.rows)
            )?,
            None => {}
        }
        if let Some(x) = self.ways_stitched {
            writeln!(
                f,
                "  bound              none: {:.0}% of the data's ways end at another reward than \
                 their own trajectory's next, so each is its own trajectory's (each episode with \
                 its own goal) and bounds only what its controller did",
                100.0 * x
            )?;
        }
        if let Some(c) = self.q_checkpoints.iter().find(|c| c.chosen) {
            writeln!(
                f,
                "  Q-learning step    {} of {} chosen by the checks ({} passed, {} failed{})",
                c.step,
                self.q_checkpoints.last().map_or(0, |l| l.step),
                c.checks_passed,
                c.checks_failed,
                c.path_ranking
                    .map_or(String::new(), |r| format!(", path_ranking {r:.3}"))
            )?;
        }
        if let Some(r) = &self.retargeted {
            writeln!(f, "  targets            {r}")?;
        }
        if let Some(r) = &self.noise_ignored {
            writeln!(f, "  ignoring values    {r}")?;
        }
        if let Some(r) = &self.another_seed {
            writeln!(f, "  another seed       {r}")?;
        }
        writeln!(f, "  model              {VALUE_FILE}: {}", self.model)?;
        for (k, v) in &self.timings_s {
            writeln!(f, "  time {k:<28} {v:.2} s")?;
        }
        write!(f, "{}", self.trust)
    }
}

/// A JSON file as `T`, with errors that name the file.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is malformed", path.display()))
}

/// How far the labels move each value, as `summary.txt` shows it: every value up to 12,
/// else the range; which values no label moves
/// ([`crate::stages::moved::unmoved_by_labels`]), and which of those are `contexts`,
/// left read.
fn moved_line(m: &[Option<f32>], contexts: &[usize]) -> String {
    let mut line = per_value(m, "each value, over up to 64 steps", "");
    let unmoved = crate::stages::moved::unmoved_by_labels(m);
    if !unmoved.is_empty() {
        line += &format!(
            "; moved by no label: value {} (below {})",
            value_list(&unmoved),
            crate::stages::moved::MOVED
        );
    }
    if !contexts.is_empty() {
        line += &format!(
            "; contexts among them (no transition changes them within an episode: a \
             goal), read by V: value {}",
            value_list(contexts)
        );
    }
    line
}

/// A figure per value as a summary line shows it: each (`-` where there is none) up to
/// 12 values, `(each)` after them; else their range, `over` after it.
fn per_value(xs: &[Option<f32>], each: &str, over: &str) -> String {
    if xs.len() <= 12 {
        let shown: Vec<String> = (xs.iter())
            .map(|x| x.map_or("-".to_string(), |x| format!("{x:.2}")))
            .collect();
        return format!("{} ({each})", shown.join(" "));
    }
    let known = || xs.iter().flatten().copied();
    let lo = known().fold(f32::INFINITY, f32::min);
    let hi = known().fold(f32::NEG_INFINITY, f32::max);
    format!("{lo:.2} to {hi:.2} over the {} values{over}", xs.len())
}

/// Values (0-based) as a summary line names them: the first 12, and how many more.
fn value_list(values: &[usize]) -> String {
    let some: Vec<String> = values.iter().take(12).map(usize::to_string).collect();
    match values.len() {
        n if n > 12 => format!("{} and {} more", some.join(", "), n - 12),
        _ => some.join(", "),
    }
}

/// The share of each value's change explained, as `summary.txt` shows it: every value up
/// to 12, else the range; and which values are noise to every label
/// ([`crate::stages::mining::noise_to_labels`]).
fn explained_line(e: &[f32]) -> String {
    let known: Vec<Option<f32>> = e.iter().copied().map(Some).collect();
    let mut line = per_value(&known, "each value of s' - s", " of s' - s");
    let noise = crate::stages::mining::noise_to_labels(e);
    if !noise.is_empty() {
        line += &format!(
            "; noise to every label: value {} (below {}, weighed little)",
            value_list(&noise),
            crate::stages::mining::NOISE_EXPLAINED
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::{explained_line, moved_line};

    #[test]
    fn the_summary_names_the_values_no_label_moves_and_the_contexts_among_them() {
        let m = [
            Some(0.3),
            Some(0.6),
            Some(0.0),
            Some(0.02),
            None,
            Some(0.01),
        ];
        let line = moved_line(&m, &[2, 3]);
        assert!(line.starts_with("0.30 0.60 0.00 0.02 - 0.01"), "{line}");
        assert!(line.contains("moved by no label: value 2, 3, 5"), "{line}");
        assert!(line.ends_with("read by V: value 2, 3"), "{line}");
        assert!(!moved_line(&m, &[]).contains("context"));
        assert!(!moved_line(&[Some(0.4)], &[]).contains("moved by no label"));
    }

    #[test]
    fn the_summary_names_the_values_that_are_noise_to_the_labels() {
        let line = explained_line(&[0.99, 0.97, 0.02, 0.0]);
        assert!(line.starts_with("0.99 0.97 0.02 0.00"), "{line}");
        assert!(line.contains("noise to every label: value 2, 3"), "{line}");
        // With nothing explained well, nothing stands out as noise.
        assert!(!explained_line(&[0.05, 0.02]).contains("noise"));
        let many: Vec<f32> = (0..20).map(|i| if i < 4 { 0.9 } else { 0.01 }).collect();
        let line = explained_line(&many);
        assert!(line.contains("0.01 to 0.90 over the 20 values"), "{line}");
        assert!(
            line.contains("value 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 and 4 more"),
            "{line}"
        );
    }
}
