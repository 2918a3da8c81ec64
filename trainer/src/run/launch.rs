//! Starting a run as `laq train` does: fresh, resumed from its checkpoint, or repeated
//! from a finished run directory, with the checks that keep each honest (same settings,
//! same data by fingerprint, no silent overwrite of an unfinished run).

use super::config::TrainConfig;
use super::record::{RunInfo, RunMetrics, CONFIG_FILE, RUN_FILE};
use crate::data::read::ReadOptions;
use crate::stages::checkpoint::{self, Checkpointer};
use anyhow::{bail, Context, Result};
use candle_core::Device;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How a run starts.
#[derive(Clone, Debug)]
pub enum Start {
    /// A new run on `data`, read as `read` says, into `out`, with settings made by
    /// `settings` from the data's defaults.
    Fresh {
        data: PathBuf,
        read: ReadOptions,
        out: PathBuf,
    },
    /// The interrupted run in this directory, with its saved settings and data.
    Resume { dir: PathBuf },
    /// The finished run in `dir` again, into `out` (its `config.toml`, and the dataset
    /// its `run.json` names, checked by fingerprint).
    Repeat { dir: PathBuf, out: PathBuf },
}

/// What a resumed run must share with the interrupted one; saved in every checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Identity {
    pub config: TrainConfig,
    /// The dataset's absolute path.
    pub data: String,
    pub data_fingerprint: String,
}

/// Runs the pipeline as `start` says, checkpointing every `every`, and writes the run
/// directory. `settings` makes a fresh run's settings from the data's defaults (a config
/// file, then flags); resumed and repeated runs keep their own.
pub fn launch(
    start: &Start,
    settings: impl FnOnce(TrainConfig) -> Result<TrainConfig>,
    every: Duration,
    device: &Device,
) -> Result<(PathBuf, RunMetrics)> {
    let (data_path, out, saved) = match start {
        Start::Resume { dir } => {
            let id: Identity = Checkpointer::identity_of(dir)?;
            (PathBuf::from(&id.data), dir.clone(), Some(id.config))
        }
        Start::Fresh { data, out, .. } => {
            refuse_unfinished(out)?;
            refuse_foreign(out)?;
            (data.clone(), out.clone(), None)
        }
        Start::Repeat { dir, out } => {
            refuse_unfinished(out)?;
            refuse_foreign(out)?;
            let run = RunInfo::read(dir)?;
            let path = dir.join(CONFIG_FILE);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let cfg: TrainConfig = toml::from_str(&text)
                .with_context(|| format!("invalid settings in {}", path.display()))?;
            (PathBuf::from(run.data), out.clone(), Some(cfg))
        }
    };
    let read = match (&saved, start) {
        (Some(cfg), _) => cfg.read.clone(),
        (None, Start::Fresh { read, .. }) => read.clone(),
        (None, _) => ReadOptions::default(),
    };
    let loaded = crate::data::read::read(&data_path, &read)?;
    let reading = loaded.report_lines();
    // Rows left out were already logged, as a warning, by `read`.
    let dropped = loaded.dropped_line();
    for line in reading.iter().filter(|l| Some(*l) != dropped.as_ref()) {
        log::info!("{}: {line}", data_path.display());
    }
    let data = loaded.data;
    crate::export::fits_runtime(&data.obs_shape)
        .with_context(|| format!("{}", data_path.display()))?;
    if let Start::Repeat { dir, .. } = start {
        if RunInfo::read(dir)?.data_fingerprint != data.fingerprint() {
            bail!(
                "{} is not the dataset {} was trained on (fingerprint differs)",
                data_path.display(),
                dir.display()
            );
        }
    }
    let cfg = match saved {
        Some(cfg) => cfg,
        None => {
            let cfg = settings(TrainConfig::for_data(&data))?;
            // The data was read as the command line says; a `[read]` of other settings
            // would be recorded without having been applied.
            if cfg.read != ReadOptions::default() && cfg.read != read {
                bail!(
                    "the settings' `[read]` ({:?}) differs from how {} was read ({:?}): \
                     give --reward and --obs-keys on the command line",
                    cfg.read,
                    data_path.display(),
                    read
                );
            }
            TrainConfig { read, ..cfg }
        }
    };
    cfg.check_for(&data)
        .with_context(|| format!("settings of the run in {}", out.display()))?;
    log::info!(
        "{} transitions, observation shape {:?}",
        data.len(),
        data.obs_shape
    );
    let abs = std::fs::canonicalize(&data_path)
        .with_context(|| format!("cannot resolve {}", data_path.display()))?;
    let identity = Identity {
        config: cfg.clone(),
        data: abs.display().to_string(),
        data_fingerprint: data.fingerprint(),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut ckpt = if let Start::Resume { .. } = start {
        log::info!("resuming the run in {}", out.display());
        Checkpointer::resume(&out, every, &identity)?
    } else {
        Checkpointer::new(&out, every, &identity)?
    };
    let trained = super::train::train(&data, &cfg, device, Some(&mut ckpt))?;
    let metrics = super::dir::write_run(
        &out,
        &data,
        &trained,
        &data_path.display().to_string(),
        &identity.data_fingerprint,
        &reading,
    )?;
    ckpt.finish()?;
    Ok((out, metrics))
}

/// A run writes `config.toml`, `report.md` and more: among a user's own files it would
/// replace theirs, so `out` must be new, empty, or a finished run.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// assert!(laq::run::launch::refuse_foreign(&dir.path().join("new")).is_ok());
/// std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
/// assert!(laq::run::launch::refuse_foreign(dir.path()).is_err());
/// ```
pub fn refuse_foreign(out: &Path) -> Result<()> {
    refuse_unless_holds(out, &[RUN_FILE], "run")
}

/// `out` must be new, empty, or hold one of `markers`, the files that a `what` (a run, a
/// study) leaves there.
///
/// ```
/// use laq::run::launch::refuse_unless_holds;
///
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
/// assert!(refuse_unless_holds(dir.path(), &["study.json"], "study").is_err());
/// std::fs::write(dir.path().join("study.json"), "{}").unwrap();
/// assert!(refuse_unless_holds(dir.path(), &["study.json"], "study").is_ok());
/// ```
pub fn refuse_unless_holds(out: &Path, markers: &[&str], what: &str) -> Result<()> {
    if out.exists() && !out.is_dir() {
        bail!("{} is a file, not a {what} directory", out.display());
    }
    let mut entries = match std::fs::read_dir(out) {
        Ok(entries) => entries,
        Err(_) => return Ok(()),
    };
    if entries.next().is_some() && !markers.iter().any(|m| out.join(m).exists()) {
        bail!(
            "{} holds files and no {what} ({} is missing): give a new or empty directory \
             to --out",
            out.display(),
            markers.join(" or ")
        );
    }
    Ok(())
}

/// A fresh run must not overwrite one that a kill interrupted.
fn refuse_unfinished(out: &Path) -> Result<()> {
    if out.join(checkpoint::FILE).exists() {
        bail!(
            "{} holds an unfinished run ({}): continue it with `laq train --resume {}`, \
             or delete that file to start over",
            out.display(),
            checkpoint::FILE,
            out.display()
        );
    }
    Ok(())
}
