//! `laq convert`: a D4RL or Minari file, or a LeRobot dataset, into the dataset format.

use crate::data::import::{self, Source};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `laq convert`.
#[derive(Args)]
pub struct ConvertArgs {
    /// The HDF5 file, or a Minari or LeRobot dataset directory.
    pub input: PathBuf,
    /// Layout of an HDF5 input (a LeRobot directory is known by its `meta/info.json`).
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
    let read = a.read.options();
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

fn lerobot(a: &ConvertArgs, read: &crate::data::read::ReadOptions) -> Result<()> {
    // Refused before reading, as for HDF5 inputs.
    if !matches!(
        a.out.extension().and_then(|e| e.to_str()),
        Some("npz" | "safetensors")
    ) {
        anyhow::bail!(
            "{}: unknown output type; use a `.npz` or `.safetensors` file",
            a.out.display()
        );
    }
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
