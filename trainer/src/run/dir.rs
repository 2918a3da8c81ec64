//! The run directory: the model, labels, metrics, settings, run record, figures and
//! report, each written whole or not at all.

use super::record::{
    ModelSummary, RunInfo, RunMetrics, CONFIG_FILE, METRICS_FILE, RUN_FILE, VALUE_FILE,
};
use super::train::Trained;
use crate::data::{Actions, DType, Dataset, RawArray};
use crate::eval::purity;
use crate::util::io::{write_atomic, write_text};
use anyhow::{Context, Result};
use std::path::Path;

/// Metrics that need no reference: label usage and, when the data carries discrete
/// ground-truth actions and discrete states, purity.
pub fn metrics(data: &Dataset, tr: &Trained, source: &str) -> RunMetrics {
    let cfg = &tr.config;
    let mut usage = vec![0usize; tr.labelled.num_actions];
    for &l in &tr.labelled.labels {
        usage[l as usize] += 1;
    }
    let (mut global_purity, mut state_purity) = (None, None);
    if let Some(Actions::Discrete(a)) = &data.actions {
        global_purity = Some(purity::global_purity(&tr.labelled.labels, a));
        if let Some(table) = &tr.table {
            let states: Vec<usize> = (0..data.len())
                .map(|i| table.index.get(&data.obs_row(i)).unwrap_or(0))
                .collect();
            state_purity = Some(purity::state_purity(&states, &tr.labelled.labels, a));
        }
    }
    RunMetrics {
        source: source.to_string(),
        labels: cfg.labels.key().to_string(),
        q: tr.q_used.name().to_string(),
        transitions: data.len(),
        obs_shape: data.obs_shape.clone(),
        num_actions: tr.labelled.num_actions,
        q_transitions: tr.q_transitions,
        top_actions: cfg.top_actions,
        label_usage: usage,
        mining_loss: tr.labelled.mining_loss.clone(),
        forward_model_gain: tr.forward_model_gain,
        change_explained: (tr.labelled.explained.as_ref())
            .map(|e| e.iter().map(|x| (x * 1000.0).round() / 1000.0).collect()),
        labels_move: (tr.labels_move.as_ref()).map(|m| {
            m.iter()
                .map(|x| x.map(|x| (x * 1000.0).round() / 1000.0))
                .collect()
        }),
        unmoved_contexts: tr.unmoved_contexts.clone(),
        q_loss: tr.q_loss.clone(),
        timings_s: tr.timings.iter().cloned().collect(),
        export_max_abs_error: tr.distill_max_abs_error,
        fit_bounded: tr.fit_bounded,
        ways_stitched: tr.ways_stitched.map(|x| (x * 1000.0).round() / 1000.0),
        global_purity,
        purity: state_purity,
        model: ModelSummary::of(&tr.model),
        trust: tr.trust.clone(),
        q_checkpoints: tr.q_checkpoints.clone(),
        retargeted: tr.retargeted.clone(),
        noise_ignored: tr.noise_ignored.clone(),
        another_seed: tr.another_seed.clone(),
        contexts: tr.contexts.clone(),
        reward_cuts_ended: tr.reward_cuts_ended,
        iql_without_ways: tr.iql_without_ways,
        cost_to_end: tr.cost_to_end,
        reading: vec![],
    }
}

/// Writes the run directory: `value.safetensors`, `labels.npy`, `metrics.json`,
/// `config.toml`, `run.json` (data, fingerprint, versions), `summary.txt`, the figures
/// (PNG) and `report.md`. Every file is written atomically. An image model is a
/// version 2 `value.safetensors` (convolutions before the linear layers).
pub fn write_run(
    dir: &Path,
    data: &Dataset,
    tr: &Trained,
    source: &str,
    fingerprint: &str,
    reading: &[String],
) -> Result<RunMetrics> {
    let cfg = &tr.config;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    tr.model.save(&dir.join(VALUE_FILE), false)?;
    let labels: Vec<u8> = tr
        .labelled
        .labels
        .iter()
        .flat_map(|l| l.to_le_bytes())
        .collect();
    let arr = RawArray {
        dtype: DType::U32,
        shape: vec![labels.len() / 4],
        bytes: labels,
    };
    write_atomic(
        &dir.join("labels.npy"),
        &crate::data::files::npy_bytes(&arr),
    )?;
    let m = RunMetrics {
        reading: reading.to_vec(),
        ..metrics(data, tr, source)
    };
    write_text(&dir.join(METRICS_FILE), &serde_json::to_string_pretty(&m)?)?;
    write_text(&dir.join(CONFIG_FILE), &cfg.to_toml()?)?;
    let run = RunInfo {
        data: source.to_string(),
        data_fingerprint: fingerprint.to_string(),
        transitions: data.len(),
        seed: cfg.seed,
        laq_version: env!("CARGO_PKG_VERSION").to_string(),
        model_format: tr.model.format_name(),
        command: format!("laq train --config {CONFIG_FILE} --data {source} --out DIR"),
    };
    write_text(&dir.join(RUN_FILE), &serde_json::to_string_pretty(&run)?)?;
    let figures = super::figures::write(dir, data, tr)?;
    write_text(
        &dir.join("report.md"),
        &super::figures::report(data, cfg, tr, &m, &figures)?,
    )?;
    write_text(&dir.join("summary.txt"), &m.to_string())?;
    Ok(m)
}
