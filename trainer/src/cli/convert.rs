//! `laq convert`: a D4RL or Minari file into the dataset format.

use crate::data::import::{self, Source};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `laq convert`.
#[derive(Args)]
pub struct ConvertArgs {
    /// The HDF5 file, or a Minari dataset directory.
    pub input: PathBuf,
    /// Layout of the input.
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
