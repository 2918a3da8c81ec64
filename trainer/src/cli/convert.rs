//! `laq convert`: a D4RL or Minari file, a LeRobot dataset or a folder of videos, into the
//! dataset format.

use crate::data::import::{self, video, Source};
use crate::data::read::RewardSource;
use anyhow::{bail, Result};
use clap::Args;
use std::path::{Path, PathBuf};

/// Arguments of `laq convert`.
#[derive(Args)]
pub struct ConvertArgs {
    /// The HDF5 file, a Minari or LeRobot dataset directory, or a folder of videos
    /// (`--from video`).
    pub input: PathBuf,
    /// Layout of the input: of an HDF5 file (a LeRobot directory is known by its
    /// `meta/info.json`), or `video` for a folder of MP4 files (AV1 or H.264), one episode
    /// each in name order, whose consecutive frames become the transitions; it needs
    /// `--reward episode-end` or `--reward FILE.csv` (episode: the video's place in name
    /// order from 0; step: the transition from 0).
    #[arg(long, value_enum, default_value = "auto")]
    pub from: Source,
    /// Output: `.npz` or `.safetensors`.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub read: super::ReadArgs,
}

/// Converts, then prints what was kept and dropped.
pub fn run(a: &ConvertArgs) -> Result<()> {
    crate::util::io::refuse_overwriting(&a.out, &[&a.input], &[], "the dataset")?;
    let read = a.read.options();
    if a.from == Source::Video {
        return videos(a, &read);
    }
    if import::lerobot::is_lerobot(&a.input) {
        return lerobot(a, &read);
    }
    let opts = crate::data::read::import_options(&read);
    let imported = import::convert(&a.input, a.from, &opts, &read.reward, &a.out)?;
    out!("{}", imported.summary());
    outln!(
        "wrote {} transitions to {}",
        imported.data.len(),
        a.out.display()
    );
    Ok(())
}

/// Refused before reading, as for HDF5 inputs: a large input should not be read only to
/// find out that the output cannot be written.
fn check_output(out: &Path) -> Result<()> {
    if !matches!(
        out.extension().and_then(|e| e.to_str()),
        Some("npz" | "safetensors")
    ) {
        bail!(
            "{}: unknown output type; use a `.npz` or `.safetensors` file",
            out.display()
        );
    }
    Ok(())
}

fn lerobot(a: &ConvertArgs, read: &crate::data::read::ReadOptions) -> Result<()> {
    check_output(&a.out)?;
    let loaded = crate::data::read::read(&a.input, read)?;
    outln!("read {}", a.input.display());
    for line in loaded.report_lines() {
        outln!("  {line}");
    }
    loaded.data.save(&a.out)?;
    outln!(
        "wrote {} transitions to {}",
        loaded.data.len(),
        a.out.display()
    );
    Ok(())
}

/// A folder of videos, one episode each.
fn videos(a: &ConvertArgs, read: &crate::data::read::ReadOptions) -> Result<()> {
    let dir = a.input.display();
    check_output(&a.out)?;
    if a.read.obs_keys.is_some() {
        bail!("{dir}: --obs-keys does not apply to --from video: the frames are the observations");
    }
    // Videos hold no reward, and a dataset without any gives V = 0 everywhere.
    if !matches!(read.reward, RewardSource::EpisodeEnd | RewardSource::Csv(_))
        || a.read.reward.is_none()
    {
        bail!(
            "{dir}: videos hold no rewards; give --reward episode-end (1 on each video's last \
             transition, which becomes terminal) or --reward FILE.csv of rewarded \
             `episode,step` pairs (episode: the video's place in name order from 0; step: its \
             transition from 0); without rewards every value would be 0"
        );
    }
    let mut v = video::folder::read(&a.input, read.image_size)?;
    let note = crate::data::read::derive_rewards(&mut v.data, &read.reward)?;
    v.data.save(&a.out)?;
    let frames: usize = v.episodes.iter().map(|e| e.frames).sum();
    outln!(
        "read {dir} (videos): {} files, {frames} frames, {} transitions",
        v.episodes.len(),
        v.data.len()
    );
    const LISTED: usize = 20;
    for e in v.episodes.iter().take(LISTED) {
        let name = e.file.file_name().unwrap_or_default().to_string_lossy();
        outln!(
            "  {name}: {}, {}x{}, {} frames ({} to RGB)",
            e.codec,
            e.size.1,
            e.size.0,
            e.frames,
            e.matrix
        );
    }
    if v.episodes.len() > LISTED {
        outln!("  ... and {} more files", v.episodes.len() - LISTED);
    }
    outln!(
        "  observations: RGB frames [3, {}, {}] (u8)",
        v.size.h,
        v.size.w
    );
    outln!(
        "  dropped frames: {} (the last frame of each video: no frame follows it)",
        v.episodes.len()
    );
    if !v.ignored.is_empty() {
        outln!(
            "  not videos, left out: {} (videos end in .{})",
            v.ignored.join(", "),
            video::EXTENSIONS.join(", .")
        );
    }
    if let Some(n) = note {
        outln!("  {n}");
    }
    let bytes = std::fs::metadata(&a.out).map_or(0, |m| m.len());
    outln!(
        "wrote {} transitions to {} ({:.1} MB)",
        v.data.len(),
        a.out.display(),
        bytes as f64 / 1e6
    );
    Ok(())
}
