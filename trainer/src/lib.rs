//! LAQ trainer: learns value functions V(s) from state-only experience `(s, s', r)` by
//! mining latent actions and running offline Q-learning on them, then exports V in the
//! format the `laq-runtime` crate evaluates on microcontrollers.
//!
//! The modules are the pipeline, each depending only on those before it:
//!
//! | module | what it holds |
//! |---|---|
//! | [`util`] | atomic writes, the safetensors writer, logging, statistics |
//! | [`data`] | the dataset format, array files, D4RL, Minari and LeRobot import, videos |
//! | [`envs`] | built-in environments that generate data and know their ground truth |
//! | [`nn`] | MLP, convolutional networks, Adam, seeded initialisation |
//! | [`stages`] | label sources and latent-action mining, offline Q-learning, checkpoints |
//! | [`export`] | the runtime's model format, int8 quantisation |
//! | [`run`] | one training run: settings, pipeline, run directory, figures |
//! | [`eval`] | purity, V through the runtime, file descriptions, benchmarks |
//! | [`rl`] | SAC and TD3+BC, for references and behaviour studies |
//! | [`studies`] | the paper's studies: grid world, Maze2D, guidance, shaping, navigation |
//! | [`cli`] | the `laq` command line |
//!
//! Cargo features:
//! - `av1` (default): AV1 camera videos, decoded by rav1d (dav1d's Rust port, without its
//!   assembly: nothing beyond cargo is needed).
//! - `h264` (default): H.264 camera videos, decoded by openh264 (its bundled C++ sources,
//!   compiled with `cc`).
//! - `cuda`: training on an NVIDIA GPU (`--device cuda`; see `docs/gpu.md`).
//!
//! A build without `av1` or `h264` refuses videos of that codec by name
//! (`docs/dataset-format.md`, "Cameras").

// Numeric loops index several parallel arrays at once; iterator chains would hide that.
#![allow(clippy::needless_range_loop, clippy::type_complexity)]

pub mod cli;
pub mod data;
pub mod envs;
pub mod eval;
pub mod export;
pub mod nn;
pub mod rl;
pub mod run;
pub mod stages;
pub mod studies;
pub mod util;

/// The compute device named on the command line: `cpu` (the default), `cuda` or `cuda:N`
/// (GPU N, with the `cuda` feature).
///
/// ```
/// assert!(laq::device("cpu").unwrap().is_cpu());
/// assert!(laq::device("tpu").is_err());
/// ```
pub fn device(name: &str) -> anyhow::Result<candle_core::Device> {
    let ordinal = match name {
        "cpu" => return Ok(candle_core::Device::Cpu),
        "cuda" => 0,
        other => match other.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(n)) => n,
            _ => anyhow::bail!("unknown device `{name}`: expected cpu, cuda or cuda:N"),
        },
    };
    if !cfg!(feature = "cuda") {
        anyhow::bail!(
            "device `{name}` needs a laq built with the `cuda` feature \
             (cargo build --release -p laq --features cuda; see the README's GPU section)"
        );
    }
    candle_core::Device::new_cuda(ordinal)
        .map_err(|e| anyhow::anyhow!("cannot open CUDA device {ordinal}: {e}"))
}

/// A device as `--device` names it: `cpu` or `cuda:N`.
pub fn device_name(device: &candle_core::Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

/// Uses one worker thread for candle and rayon unless the caller chose otherwise: for the
/// small networks of LAQ, one thread beats two on a 2-core machine by 10x or more
/// (see `docs/performance.md`).
pub fn default_threads(threads: Option<usize>) {
    let n = threads.map(|n| n.to_string());
    match n {
        Some(n) => set_env("RAYON_NUM_THREADS", &n),
        None if std::env::var_os("RAYON_NUM_THREADS").is_none() => {
            set_env("RAYON_NUM_THREADS", "1")
        }
        None => {}
    }
}

fn set_env(k: &str, v: &str) {
    // Called at start-up, before any thread exists.
    std::env::set_var(k, v);
}
