//! The studies that reproduce the paper end to end, each writing `metrics.json` and
//! `report.txt` into its directory: [`grid`] (the grid world), [`maze`] (Maze2D values,
//! [`guidance`] of a robot by V, [`shaping`] of an online agent's reward), [`nav`]
//! (first-person navigation on rendered frames).

pub mod grid;
pub mod guidance;
pub mod maze;
pub mod nav;
pub mod shaping;

use anyhow::Result;
use serde_json::{json, Value};
use std::path::Path;

pub(crate) fn timings_json(timings: &[(String, f64)]) -> Value {
    Value::Object(timings.iter().map(|(k, v)| (k.clone(), json!(v))).collect())
}

/// Writes a study's `metrics.json` and `report.txt` and hands them back.
pub(crate) fn write_study(out: &Path, metrics: Value, report: String) -> Result<(Value, String)> {
    crate::util::io::write_text(
        &out.join("metrics.json"),
        &serde_json::to_string_pretty(&metrics)?,
    )?;
    crate::util::io::write_text(&out.join("report.txt"), &report)?;
    Ok((metrics, report))
}
