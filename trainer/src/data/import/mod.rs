//! Importing robotics datasets: D4RL-style HDF5 files, Minari datasets, robomimic files,
//! LeRobot dataset directories and folders of videos become transition files in the
//! [dataset format](crate::data) (`laq convert`).
//!
//! HDF5 is read by `hdf5-reader`, a decoder of the file format written in Rust, so that
//! `laq` binds no system library. D4RL and Minari files are written by h5py, with chunked
//! and gzip-compressed datasets, version-0 superblocks and symbol-table groups (h5py's
//! default) or the newest formats (`libver='latest'`: dense link storage, the chunk
//! indexes of HDF5 1.10 and later), booleans stored as FALSE/TRUE enums, and whatever
//! layout a user's own export chose. The decoder reads all of these, with the standard
//! filters (gzip, shuffle, checksums, szip, n-bit, scale-offset), and answers a damaged
//! file with an error. The tests build their inputs with its companion, `hdf5-writer`.

use crate::data::Dataset;
use anyhow::{bail, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Layout of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Source {
    /// Minari for a directory or a file of `episode_N` groups; D4RL for a file with
    /// `observations` at its root; robomimic for a file whose `data` group holds `demo_N`
    /// groups.
    Auto,
    /// One HDF5 file with `observations`, `actions`, `rewards`, `terminals` and `timeouts`
    /// at its root.
    D4rl,
    /// A Minari dataset directory (or its `data/main_data.hdf5`) of `episode_N` groups.
    Minari,
    /// A robomimic file (robosuite, MimicGen, LIBERO and other robot-learning suites write
    /// it): a `data` group of `demo_N` groups, each with `obs`, `next_obs`, `actions`,
    /// `rewards` and `dones`.
    Robomimic,
    /// A folder of videos (MP4: AV1 or H.264), one episode each, in name order.
    Video,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Auto => "auto",
            Source::D4rl => "D4RL",
            Source::Minari => "Minari",
            Source::Robomimic => "robomimic",
            Source::Video => "videos",
        }
    }
}

/// Choices of an import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Keys of a dict observation space to flatten into each observation, in this order;
    /// `None` takes every key in sorted order.
    pub obs_keys: Option<Vec<String>>,
    /// The array that holds the rewards, when not `rewards`.
    pub rewards: Option<String>,
}

/// A dataset read from a D4RL, Minari or robomimic file, with what the conversion did to
/// it.
#[derive(Clone, Debug)]
pub struct Imported {
    pub data: Dataset,
    /// `D4rl`, `Minari` or `Robomimic`, never `Auto`.
    pub source: Source,
    /// The HDF5 file that was read.
    pub file: PathBuf,
    /// Episodes in the file.
    pub episodes: usize,
    /// Rows left out because the file holds no next observation for them and they are not
    /// terminal: the last row of an episode cut by a timeout or by the end of a D4RL file
    /// without `next_observations`.
    pub dropped: usize,
    /// Keys of a dict observation flattened into each observation, in order; empty when
    /// observations are one array.
    pub obs_keys: Vec<String>,
    /// Assumptions made and parts of the file left out.
    pub notes: Vec<String>,
}

impl Imported {
    /// A few lines for people: what was read, what was kept and what was dropped.
    pub fn summary(&self) -> String {
        let d = &self.data;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "read {} ({}): {} transitions from {} episodes",
            self.file.display(),
            self.source.name(),
            d.len(),
            self.episodes
        );
        let _ = write!(s, "  observations: shape {:?}", d.obs_shape);
        if !self.obs_keys.is_empty() {
            let _ = write!(s, " from keys {}", self.obs_keys.join(", "));
        }
        s.push('\n');
        let acts = match &d.actions {
            Some(crate::data::Actions::Discrete(_)) => "discrete".to_string(),
            Some(crate::data::Actions::Continuous { dim, .. }) => {
                format!("continuous, {dim} per step")
            }
            None => "none".to_string(),
        };
        let _ = writeln!(s, "  actions: {acts}");
        let terminals = d.terminals.iter().filter(|&&t| t).count();
        let timeouts = d
            .timeouts
            .as_ref()
            .map_or(0, |t| t.iter().filter(|&&t| t).count());
        let _ = writeln!(s, "  terminals: {terminals}, timeouts: {timeouts}");
        if self.dropped == 0 {
            let _ = writeln!(s, "  dropped rows: none");
        } else {
            let _ = writeln!(
                s,
                "  dropped rows: {} (the last row of an episode cut without a terminal: the \
                 file holds no next observation for it)",
                self.dropped
            );
        }
        let missing = d.missing_next_count();
        if missing > 0 {
            let _ = writeln!(
                s,
                "  terminal rows without a next observation: {missing} (kept: their value is \
                 their reward; mining leaves them out)"
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "  note: {n}");
        }
        s
    }
}

/// Reads a D4RL-style HDF5 file or a Minari dataset into transitions.
///
/// Errors name the file, the key and the problem: a missing key, a wrong rank, lengths
/// that differ between arrays, NaN or infinite values (with the row), empty episodes,
/// unsupported element types.
pub fn import(path: &Path, source: Source, opts: &ImportOptions) -> Result<Imported> {
    if source == Source::Video {
        bail!(
            "{}: a folder of videos is read by `laq convert --from video`",
            path.display()
        );
    }
    h5::import(path, source, opts)
}

/// [`import`], then the rewards `reward` derives, then writes the dataset to `out` (`.npz`
/// or `.safetensors`) whole or not at all.
pub fn convert(
    input: &Path,
    source: Source,
    opts: &ImportOptions,
    reward: &crate::data::read::RewardSource,
    out: &Path,
) -> Result<Imported> {
    // Refused before reading: a large input should not be read only to find out that the
    // output cannot be written.
    if !matches!(
        out.extension().and_then(|e| e.to_str()),
        Some("npz" | "safetensors")
    ) {
        bail!(
            "{}: unknown output type; use a `.npz` or `.safetensors` file",
            out.display()
        );
    }
    let mut imported = import(input, source, opts)?;
    if let Some(note) = crate::data::read::derive_rewards(&mut imported.data, reward)? {
        imported.notes.push(note);
    }
    imported.data.save(out)?;
    Ok(imported)
}

mod guard;
mod h5;
pub mod lerobot;
pub mod video;
