//! `laq bench`: training-step and inference times against baselines of the same run.

use crate::eval::bench::{self, ImageBench};
use anyhow::Result;
use candle_core::Device;
use clap::Args;

/// Arguments of `laq bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// Fewer repetitions.
    #[arg(long)]
    pub quick: bool,
    /// Print the figures as JSON instead of the table: `{"steps": {"mining": {"laq_ms",
    /// "pytorch_ms", ...}, "dqn": {...}}, "inference": {"select8_mlp128": {"runtime_us",
    /// "candle_us", ...}, ...}, "images": {...}}`.
    #[arg(long)]
    pub json: bool,
    /// Frame size of the image steps (RGB, at least 8).
    #[arg(long, default_value_t = 32)]
    pub image_size: usize,
    /// Batch of the image steps.
    #[arg(long, default_value_t = 32)]
    pub image_batch: usize,
    /// Only the image steps (with `--device cuda`: CPU and GPU side by side).
    #[arg(long)]
    pub images_only: bool,
}

/// Runs the benchmarks and prints the table.
pub fn run(a: &BenchArgs, device: &Device) -> Result<()> {
    let img = ImageBench {
        size: a.image_size,
        batch: a.image_batch,
        ..Default::default()
    };
    let (v, report) = if a.images_only {
        bench::images(a.quick, img, device)?
    } else {
        bench::run(a.quick, img, device)?
    };
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        out!("{report}");
    }
    Ok(())
}
