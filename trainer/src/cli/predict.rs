//! `laq predict`: V of every observation of a dataset, through the runtime.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `laq predict`.
#[derive(Args)]
pub struct PredictArgs {
    /// A `value.safetensors` written by `laq train` or `laq export`, or a run directory.
    #[arg(long)]
    pub model: PathBuf,
    /// Dataset, in any format `laq train` reads.
    #[arg(long)]
    pub data: PathBuf,
    #[command(flatten)]
    pub read: super::ReadArgs,
    /// CSV output: one row per observation.
    #[arg(long)]
    pub out: PathBuf,
}

/// Extensions of datasets and models, which a CSV must not be written under.
const DATA_OR_MODEL: [&str; 5] = ["npz", "safetensors", "hdf5", "h5", "hdf"];

/// Writes the CSV.
pub fn run(a: &PredictArgs) -> Result<()> {
    let model = crate::run::record::model_file(&a.model);
    let inputs = [model.as_path(), a.data.as_path()];
    crate::util::io::refuse_overwriting(&a.out, &inputs, &DATA_OR_MODEL, "the CSV")?;
    let n = crate::eval::predict::predict_csv(&model, &a.data, &a.read.options(), &a.out)?;
    log::info!("wrote V of {n} observations to {}", a.out.display());
    Ok(())
}
