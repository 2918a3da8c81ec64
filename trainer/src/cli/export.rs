//! `laq export`: a model re-exported, e.g. with int8 weights.

use crate::data::Dataset;
use crate::export::{quantize, ValueModel};
use anyhow::Result;
use candle_core::Device;
use clap::Args;
use std::path::PathBuf;

/// Weight formats `laq export` writes.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Quantize {
    Int8,
}

/// Arguments of `laq export`.
#[derive(Args)]
pub struct ExportArgs {
    #[arg(long)]
    pub model: PathBuf,
    #[arg(long, value_enum)]
    pub quantize: Option<Quantize>,
    #[arg(long)]
    pub out: PathBuf,
    /// Compare the new model against the original on this dataset's observations.
    #[arg(long)]
    pub data: Option<PathBuf>,
}

/// Writes the new model and, with `--data`, compares it with the original.
pub fn run(a: &ExportArgs, device: &Device) -> Result<()> {
    let mut inputs = vec![a.model.as_path()];
    inputs.extend(a.data.as_deref());
    let not = ["npz", "csv", "hdf5", "h5", "hdf"];
    crate::util::io::refuse_overwriting(&a.out, &inputs, &not, "the model")?;
    let m = ValueModel::load(&a.model)?;
    let data = a.data.as_deref().map(Dataset::load).transpose()?;
    if let Some(d) = &data {
        // States the model cannot take would calibrate it wrongly: refused before
        // anything is written.
        crate::eval::predict::values(&a.model, d)?;
    }
    let int8 = matches!(a.quantize, Some(Quantize::Int8));
    let m = match (&data, int8) {
        (Some(d), true) => {
            let states: Vec<f32> = d
                .observations
                .iter()
                .chain(&d.next_observations)
                .copied()
                .collect();
            quantize::calibrate_int8(&m, &states, &Default::default(), device)?
        }
        (None, true) => {
            log::warn!("without --data the weights are only rounded; calibration states make int8 more faithful");
            m
        }
        _ => m,
    };
    m.save(&a.out, int8)?;
    log::info!("wrote {}", a.out.display());
    if let Some(d) = &data {
        outln!("{}", crate::eval::predict::compare(&a.model, &a.out, d)?);
    }
    Ok(())
}
