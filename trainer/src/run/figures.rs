//! Figures and `report.md` of a run directory: what was learned, visible without code.
//!
//! Loss curves of mining and Q-learning, latent-action usage, and V: a heatmap over the
//! state space for 2-D states (like the paper's figures), otherwise V along the first
//! episodes of the data.

use super::config::TrainConfig;
use super::plot::{Heatmap, LinePlot, Series, SeriesLabelPosition};
use super::record::RunMetrics;
use super::train::Trained;
use super::trust;
use crate::data::Dataset;
use anyhow::Result;
use candle_core::Device;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;

/// Episodes shown in the "V along episodes" figure.
const EPISODES_SHOWN: usize = 3;
/// Cells per side of the value heatmap for continuous 2-D states.
const GRID: usize = 60;

/// Writes the figures into `dir` and returns their file names with a caption each. A
/// figure that cannot be drawn (e.g. a degenerate range) is left out with a warning: the
/// model and metrics matter more than a picture.
pub fn write(dir: &Path, data: &Dataset, tr: &Trained) -> Result<Vec<(String, String)>> {
    match write_all(dir, data, tr) {
        Ok(f) => Ok(f),
        Err(e) => {
            log::warn!("figures left out: {e:#}");
            Ok(vec![])
        }
    }
}

fn write_all(dir: &Path, data: &Dataset, tr: &Trained) -> Result<Vec<(String, String)>> {
    let mut out = vec![];
    if let Some(loss) = tr.labelled.mining_loss.as_ref().filter(|l| !l.is_empty()) {
        let x: Vec<f64> = (1..=loss.len()).map(|i| i as f64).collect();
        let y: Vec<f64> = loss.iter().map(|&v| v as f64).collect();
        let mut p = LinePlot::new(
            "Latent-action mining",
            "tenth of training",
            "mean hard-min loss",
        )
        .series(Series::new("forward model", x, y.clone()));
        p.log_y = y.iter().all(|&v| v > 0.0);
        p.save(&dir.join("loss_mining.png"))?;
        out.push((
            "loss_mining.png".into(),
            "Forward-model loss (min over latent actions), per tenth of training".into(),
        ));
    }
    if !tr.q_loss.is_empty() {
        let x: Vec<f64> = (1..=tr.q_loss.len()).map(|i| i as f64).collect();
        let y: Vec<f64> = tr.q_loss.iter().map(|&v| v as f64).collect();
        let mut p = LinePlot::new("Q-learning", "tenth of training", "mean loss")
            .series(Series::new("TD loss", x, y.clone()));
        p.log_y = y.iter().all(|&v| v > 0.0);
        p.save(&dir.join("loss_q.png"))?;
        out.push((
            "loss_q.png".into(),
            "Q-learning loss, per tenth of training".into(),
        ));
    }
    let k = tr.labelled.num_actions;
    if k > 1 {
        let mut usage = vec![0f64; k];
        for &l in &tr.labelled.labels {
            usage[l as usize] += 1.0;
        }
        let x: Vec<f64> = (0..k).map(|i| i as f64).collect();
        let mut p = LinePlot::new("Label usage", "label", "transitions").series(Series::new(
            "transitions per label",
            x,
            usage,
        ));
        p.y_range = Some((0.0, tr.labelled.labels.len().max(1) as f64));
        p.save(&dir.join("label_usage.png"))?;
        out.push((
            "label_usage.png".into(),
            format!("Transitions per label ({k} labels); a dead label sits at 0"),
        ));
    }
    if data.obs_dim() == 2 {
        value_heatmap(data, tr)?.save(&dir.join("value.png"))?;
        out.push((
            "value.png".into(),
            "V over the state space (cells never observed are blank)".into(),
        ));
    } else if let Some(p) = value_along_episodes(data, tr)? {
        p.save(&dir.join("value.png"))?;
        out.push((
            "value.png".into(),
            format!("V along the first {EPISODES_SHOWN} episodes of the data"),
        ));
    }
    Ok(out)
}

/// V over the bounding box of the observed 2-D states: the integer lattice when states
/// are integers (a grid world), else a `GRID` x `GRID` grid; cells with no observation
/// nearby are left blank rather than extrapolated.
fn value_heatmap(data: &Dataset, tr: &Trained) -> Result<Heatmap> {
    let (mut lo, mut hi) = ([f32::INFINITY; 2], [f32::NEG_INFINITY; 2]);
    for i in 0..data.len() {
        let s = data.obs_row(i);
        for j in 0..2 {
            lo[j] = lo[j].min(s[j]);
            hi[j] = hi[j].max(s[j]);
        }
    }
    for j in 0..2 {
        // A dimension that never changes still gets a visible, valid range.
        if hi[j] <= lo[j] {
            lo[j] -= 0.5;
            hi[j] += 0.5;
        }
    }
    let integer = data.observations.iter().all(|v| v.fract() == 0.0);
    let cells = |j: usize| {
        if integer && hi[j] - lo[j] < 200.0 {
            (hi[j] - lo[j]) as usize + 1
        } else {
            GRID
        }
    };
    let (rows, cols) = (cells(0), cells(1));
    let step = |j: usize, n: usize| ((hi[j] - lo[j]) / n.max(1) as f32).max(f32::MIN_POSITIVE);
    let centre = |j: usize, n: usize, i: usize| {
        if integer && n == (hi[j] - lo[j]) as usize + 1 {
            lo[j] + i as f32
        } else {
            lo[j] + (i as f32 + 0.5) * step(j, n)
        }
    };
    let mut seen = vec![false; rows * cols];
    for i in 0..data.len() {
        let s = data.obs_row(i);
        let idx = |j: usize, n: usize| {
            let f = if integer && n == (hi[j] - lo[j]) as usize + 1 {
                s[j] - lo[j]
            } else {
                (s[j] - lo[j]) / step(j, n)
            };
            (f as usize).min(n - 1)
        };
        seen[idx(0, rows) * cols + idx(1, cols)] = true;
    }
    let mut states = Vec::with_capacity(rows * cols * 2);
    for r in 0..rows {
        for c in 0..cols {
            states.extend([centre(0, rows, r), centre(1, cols, c)]);
        }
    }
    let v = tr.model.values_candle(&states, &Device::Cpu)?;
    let values = v
        .iter()
        .zip(&seen)
        .map(|(&v, &s)| s.then_some(v as f64))
        .collect();
    let mut map = Heatmap::new(rows, cols, values);
    map.x_range = (lo[1] as f64, hi[1] as f64);
    map.y_range = (lo[0] as f64, hi[0] as f64);
    map.y_down = true;
    map.title = "V(s)".into();
    map.x_label = "state[1]".into();
    map.y_label = "state[0]".into();
    map.colorbar_label = "V".into();
    Ok(map)
}

fn value_along_episodes(data: &Dataset, tr: &Trained) -> Result<Option<LinePlot>> {
    let mut episodes: Vec<std::ops::Range<usize>> = vec![];
    let mut start = 0;
    for i in 0..data.len() {
        let end = data.terminals[i] || data.timeouts.as_ref().is_some_and(|t| t[i]);
        if end || i + 1 == data.len() {
            episodes.push(start..i + 1);
            start = i + 1;
            if episodes.len() == EPISODES_SHOWN {
                break;
            }
        }
    }
    if episodes.is_empty() {
        return Ok(None);
    }
    let mut p = LinePlot::new("V along episodes", "step", "V(s)");
    for (e, range) in episodes.iter().enumerate() {
        let idx: Vec<usize> = range.clone().collect();
        let states: Vec<f32> = idx.iter().flat_map(|&i| data.obs_row(i).to_vec()).collect();
        let v = tr.model.values_candle(&states, &Device::Cpu)?;
        let x: Vec<f64> = (0..v.len()).map(|i| i as f64).collect();
        p = p.series(Series::new(
            format!("episode {e}"),
            x,
            v.into_iter().map(f64::from).collect(),
        ));
    }
    p.legend = SeriesLabelPosition::UpperLeft;
    Ok(Some(p))
}

/// `report.md`: the figures, the metrics and the settings of the run in one page.
pub fn report(
    data: &Dataset,
    cfg: &TrainConfig,
    tr: &Trained,
    metrics: &RunMetrics,
    figures: &[(String, String)],
) -> Result<String> {
    let source = &metrics.source;
    let mut s = String::new();
    let _ = writeln!(s, "# LAQ run on `{source}`\n");
    let trust = &metrics.trust;
    match trust.verdict {
        crate::run::trust::Verdict::Trusted => {
            let _ = writeln!(
                s,
                "**Verdict: trusted.** Every check this run could make without ground truth \
                 passes ({} checks, table below).\n",
                trust.checks.len()
            );
            if let Some(caveat) = trust.caveat() {
                let _ = writeln!(s, "But {caveat}.\n");
            }
        }
        crate::run::trust::Verdict::Doubtful => {
            let _ = writeln!(
                s,
                "**Verdict: doubtful.** Do not rely on this V as it is:\n"
            );
            for c in trust.failed().take(2) {
                let _ = writeln!(
                    s,
                    "- `{}` ({:.3}, threshold {}): {}",
                    c.name, c.value, c.threshold, c.why
                );
            }
            let _ = writeln!(s);
            for a in &trust.advice {
                let _ = writeln!(s, "To try: {a}.\n");
            }
        }
    }
    let _ = writeln!(
        s,
        "{} transitions, observation shape {:?}; labels `{}` ({} labels), Q-learning `{}`, seed {}.\n",
        data.len(),
        data.obs_shape,
        cfg.labels.key(),
        tr.labelled.num_actions,
        metrics.q,
        cfg.seed
    );
    if let Some(c) = &metrics.cost_to_end {
        let _ = writeln!(
            s,
            "The log pays {} a step until its episodes end ({} terminal rows), so V was \
             learned, judged and exported as the value above paying that cost for ever, \
             each end rewarded 1: 1 one step from an end, 0 for a state that never ends \
             (the return in the data's units: cost x (1 - gamma V) / (1 - gamma), gamma \
             {}). It orders the states as the return does.\n",
            c.cost, c.ends, c.gamma
        );
    }
    if let Some(n) = metrics.reward_cuts_ended {
        let _ = writeln!(
            s,
            "The log cuts {n} episodes on their reward (a timeout on the rewarded row, as \
             Minari's goal-reaching data record each goal reached, or the next row starting \
             elsewhere), so Q-learning ended them there, as at a terminal, rather than guess \
             the value of a state that no row leaves (`reward_cuts_end`; with `q = \"auto\"` \
             it learns by IQL where it would take DQN).\n"
        );
    }
    if metrics.iql_without_ways {
        let _ = writeln!(
            s,
            "States that lie near one another here are no ways a body can take (joined \
             where near, they rank the data's own rewarded trajectories badly: a car that \
             must swing to climb), so no ways bound the bootstraps, and DQN's maximum over \
             labels that no state like the one bootstrapped shows would go unchecked: Q was \
             learned by IQL, which takes no such maximum (`iql_without_ways`; \
             docs/trust.md, \"Where MountainCar's over-estimation comes from\").\n"
        );
    }
    if let Some(r) = &metrics.retargeted {
        let _ = writeln!(
            s,
            "One-step targets left V more than 10% below the returns the data itself \
             collected, so Q-learning ran again with targets along the data's trajectories \
             ({r}). `config.toml` holds the settings of the exported V.\n"
        );
    }
    if let Some(r) = &metrics.noise_ignored {
        let (why, rule) = match r.reading {
            trust::Verdict::Doubtful => (
                "V was doubtful, and no label explains or moves some values (noise to every \
                 label: a channel that wanders on its own, a clock; moved by no label: a \
                 battery that drains, the steps since an episode began)",
                "only where it fails fewer checks",
            ),
            trust::Verdict::Trusted => (
                "V was trusted, but its halves agreed less than two seeds do beside values \
                 no label moves (a battery that drains, the steps since an episode began)",
                "only where it is trusted and its halves agree as two seeds do",
            ),
        };
        let _ = writeln!(
            s,
            "{why}, so Q-learning ran again with those values ignored ({r}). A V that \
             ignores values is exported {rule}, and then reads them as zero (`laq inspect` \
             names them); `config.toml` holds the settings of the exported V.\n"
        );
    }
    if let Some(r) = &metrics.another_seed {
        let _ = writeln!(
            s,
            "V was doubtful by checks that say its training depends on chance alone (two \
             seeds, the checkpoints or the data's halves disagreeing), so the run went \
             again from another seed: labels, Q-learning and their retries ({r}). The \
             other seed's V is exported only where it is trusted; `config.toml` holds the \
             settings of the exported V, its seed included.\n"
        );
    }
    let checkpoints = &metrics.q_checkpoints;
    if let Some(c) = checkpoints.iter().find(|c| c.chosen) {
        let per: Vec<String> = checkpoints
            .iter()
            .map(|c| match c.path_ranking {
                Some(r) => format!("{} / {r:.2}", c.checks_failed),
                None => c.checks_failed.to_string(),
            })
            .collect();
        let _ = writeln!(
            s,
            "V is the ensemble's at Q-learning step {} of {}: of its {} checkpoints, the one \
             that fails the fewest checks{}, the later on ties (failed checks{} per \
             checkpoint: {}).\n",
            c.step,
            checkpoints.last().map_or(0, |l| l.step),
            checkpoints.len(),
            if c.path_ranking.is_some() {
                " and, of those, ranks states most like the fewest steps to a reward through the data"
            } else {
                ""
            },
            if c.path_ranking.is_some() {
                " / path_ranking"
            } else {
                ""
            },
            per.join(", ")
        );
    }
    let m = &tr.model;
    let conv = match &m.conv {
        Some(c) => format!(
            ", {} convolutions on {:?} images",
            c.layers.len(),
            c.input_shape
        ),
        None => String::new(),
    };
    let _ = writeln!(
        s,
        "The model is `value.safetensors` ({} -> {}{conv}, head `{}`); evaluate it with `laq predict` or the runtime crate, describe it with `laq inspect`.\n",
        m.input_dim(),
        m.num_outputs(),
        m.head.name()
    );
    let _ = writeln!(
        s,
        "## Trust checks\n\n| check | value | threshold | pass | why |\n|---|---|---|---|---|"
    );
    for c in &trust.checks {
        let _ = writeln!(
            s,
            "| {} | {:.3} | {} | {} | {} |",
            c.name,
            c.value,
            c.threshold,
            if c.pass { "yes" } else { "**no**" },
            c.why
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "## Figures\n");
    for (file, caption) in figures {
        let _ = writeln!(s, "{caption}:\n\n![{caption}]({file})\n");
    }
    let _ = writeln!(s, "## Metrics\n\n| metric | value |\n|---|---|");
    if let Value::Object(m) = serde_json::to_value(metrics)? {
        for (k, v) in &m {
            let shown = match v {
                Value::Array(a) if a.len() > 12 => format!("{} values", a.len()),
                // Records (the verdict, the checkpoints) have their own lines above.
                Value::Object(_) => continue,
                Value::Array(a) if a.iter().any(Value::is_object) => continue,
                other => other.to_string(),
            };
            let _ = writeln!(s, "| {k} | {shown} |");
        }
    }
    for (k, v) in &tr.timings {
        let _ = writeln!(s, "| time: {k} | {v:.2} s |");
    }
    let _ = writeln!(
        s,
        "\n## Settings\n\nRepeat with `laq train --repeat DIR --out NEW` or `laq train --config config.toml --data {source} --out NEW`.\n\n```toml\n{}```",
        cfg.to_toml()?
    );
    Ok(s)
}
