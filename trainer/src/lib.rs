//! LAQ trainer: learns value functions V(s) from state-only experience `(s, s', r)` by
//! mining latent actions and running offline Q-learning on them, then exports V in the
//! format the `laq-runtime` crate evaluates on microcontrollers.
//!
//! Modules follow the pipeline: [`data`] (dataset format), [`envs`] (built-in
//! environments), [`mining`] (latent actions), [`labels`] (label sources), [`qlearn`]
//! (tabular and DQN), [`conv`] (networks for image observations), [`eval`] (metrics),
//! [`export`] (model format), [`quantize`] (int8),
//! [`train`] (one run), [`guide`] (controller guidance), [`import`] (D4RL and Minari
//! files), [`checkpoint`] (resumable runs), [`inspect`] (file descriptions),
//! [`reproduce`] (the paper's studies), [`navstudy`] (the first-person navigation study),
//! [`bench`] (speed).

// Numeric loops index several parallel arrays at once; iterator chains would hide that.
#![allow(clippy::needless_range_loop, clippy::type_complexity)]

pub mod bench;
pub mod checkpoint;
pub mod conv;
pub mod data;
pub mod envs;
pub mod eval;
pub mod export;
pub mod figures;
pub mod guide;
pub mod import;
pub mod inspect;
pub mod io;
pub mod labels;
pub mod mining;
pub mod navstudy;
pub mod nn;
pub mod plot;
pub mod predict;
pub mod progress;
pub mod qlearn;
pub mod quantize;
pub mod reproduce;
pub mod sac;
pub mod td3bc;
pub mod train;

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
