//! `laq export`: a model re-exported, e.g. with int8 weights.

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
    /// A `value.safetensors`, or a run directory.
    #[arg(long)]
    pub model: PathBuf,
    #[arg(long, value_enum)]
    pub quantize: Option<Quantize>,
    #[arg(long)]
    pub out: PathBuf,
    /// Calibrate int8 weights on this dataset's observations, and compare the new model
    /// against the original on them (any format `laq train` reads, read as the model's
    /// data was where the model records it).
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[command(flatten)]
    pub read: super::ReadArgs,
}

/// Writes the new model and, with `--data`, compares it with the original.
pub fn run(a: &ExportArgs, device: &Device) -> Result<()> {
    let model = crate::run::record::model_file(&a.model);
    let mut inputs = vec![model.as_path()];
    inputs.extend(a.data.as_deref());
    let not = ["npz", "csv", "hdf5", "h5", "hdf"];
    crate::util::io::refuse_overwriting(&a.out, &inputs, &not, "the model")?;
    if a.data.is_none() && a.read.options() != Default::default() {
        anyhow::bail!(
            "--obs-keys, --reward and --image-size say how to read --data, which is not given"
        );
    }
    let m = ValueModel::load(&model)?;
    let data = match &a.data {
        Some(path) => {
            let read = crate::eval::predict::read_options(&model, &a.read.options())?;
            Some(crate::data::read::read(path, &read)?.data)
        }
        None => None,
    };
    if let Some(d) = &data {
        // States the model cannot take would calibrate it wrongly: refused before
        // anything is written.
        crate::eval::predict::values(&model, d)?;
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
        outln!("{}", crate::eval::predict::compare(&model, &a.out, d)?);
    }
    Ok(())
}
