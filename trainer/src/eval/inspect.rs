//! `laq inspect`: what a dataset or a model file holds, what is wrong with it, and
//! whether a model fits a microcontroller.

use crate::data::{Actions, Dataset};
use anyhow::{Context, Result};
use laq_runtime::{Head, Model};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

/// Flash taken by the runtime's code for loading a fully connected model and evaluating
/// it, on a Cortex-M4F, built without the runtime's `images` feature: 8 584 B when
/// loading with `Model::new_checked` (7 744 B with `new_checked_in_place`, as `size_eval`
/// in firmware-examples; docs/runtime.md). The firmware test measures `size_eval` again
/// and fails if it grows past this figure.
pub const RUNTIME_FLASH_BYTES_MLP: usize = 8_584;
/// The same for image models, which need the `images` feature (the convolutions and the
/// version 2 checks): 10 400 B with `Model::new_checked`, 9 480 B with
/// `new_checked_in_place`. Checked by the firmware test like
/// [`RUNTIME_FLASH_BYTES_MLP`].
pub const RUNTIME_FLASH_BYTES_IMAGES: usize = 10_400;
/// Stack used on a Cortex-M4F (painted-stack measurements of `bench_mcu`): 2 096 B for
/// loading the grid model, `select` over 8 moves and shaping, its 520 B of scratch and
/// the report included, with the `images` feature (1 992 B without: a smaller `Model`);
/// loading and evaluating an image model takes 904 B besides its scratch
/// (`bench_image`). The footprint adds it to the scratch as a margin, the larger figure
/// for both kinds of model.
pub const RUNTIME_STACK_BYTES: usize = 2_096;

/// The runtime code a model needs: firmware for fully connected models is built
/// without the image code.
pub fn runtime_flash_bytes(image_model: bool) -> usize {
    if image_model {
        RUNTIME_FLASH_BYTES_IMAGES
    } else {
        RUNTIME_FLASH_BYTES_MLP
    }
}

/// A microcontroller's memory budget in bytes.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub flash: usize,
    pub ram: usize,
}

/// Describes a dataset or model file (chosen by its content: a `laq-value` model is a
/// safetensors file whose metadata says so). Returns the text report and the same
/// facts as JSON.
pub fn inspect(path: &Path, budget: Option<Budget>) -> Result<(String, Value)> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    if is_model(&bytes) {
        model(path, bytes, budget)
    } else {
        if budget.is_some() {
            anyhow::bail!(
                "{} is a dataset; --flash/--ram apply to models",
                path.display()
            );
        }
        dataset(path)
    }
}

fn is_model(bytes: &[u8]) -> bool {
    safetensors::SafeTensors::read_metadata(bytes)
        .ok()
        .and_then(|(_, m)| m.metadata().as_ref()?.get("format").cloned())
        .is_some_and(|f| f == "laq-value")
}

fn model(path: &Path, bytes: Vec<u8>, budget: Option<Budget>) -> Result<(String, Value)> {
    let size = bytes.len();
    let m = Model::new_checked(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: invalid laq-value model: {e}", path.display()))?;
    let vm = crate::export::ValueModel::from_bytes(&bytes)
        .with_context(|| format!("{}: invalid laq-value model", path.display()))?;
    let convs: Vec<laq_runtime::ConvInfo> =
        (0..m.num_conv()).filter_map(|i| m.conv_layer(i)).collect();
    let conv_json: Vec<Value> = convs
        .iter()
        .map(|c| {
            json!({"in_channels": c.in_channels, "out_channels": c.out_channels,
                   "in_height": c.in_height, "in_width": c.in_width,
                   "out_height": c.in_height / 2, "out_width": c.in_width / 2,
                   "kernel": 4, "stride": 2, "padding": 1, "weights": "f32"})
        })
        .collect();
    let version = if m.input_shape().is_some() { 2 } else { 1 };
    let layers: Vec<Value> = (0..m.num_layers())
        .filter_map(|i| m.layer(i))
        .map(|l| json!({"inputs": l.inputs, "outputs": l.outputs, "weights": if l.int8 {"i8"} else {"f32"}}))
        .collect();
    let scratch_bytes = m.scratch_len() * 4;
    let ram = scratch_bytes + RUNTIME_STACK_BYTES;
    let runtime_code = runtime_flash_bytes(m.num_conv() > 0);
    let flash = size + runtime_code;
    let mut j = json!({
        "kind": "model",
        "file": path.display().to_string(),
        "format": "laq-value", "version": version,
        "bytes": size,
        "input_dim": m.input_dim(),
        "input_shape": m.input_shape(),
        "conv_layers": conv_json,
        "outputs": m.output_dim(),
        "head": match m.head() { Head::MaxQ => "max_q", Head::OneNorm => "one_norm" },
        "gamma": m.gamma(),
        "layers": layers,
        "macs": m.macs(),
        "input_mean": vm.mean,
        "input_scale": vm.scale,
        "density_gate": m.has_density_gate(),
        "info": vm.info,
        "footprint": {
            "flash_bytes": flash, "model_bytes": size, "runtime_code_bytes": runtime_code,
            "runtime_features": if m.num_conv() > 0 { json!(["images"]) } else { json!([]) },
            "ram_bytes": ram, "scratch_bytes": scratch_bytes, "stack_bytes": RUNTIME_STACK_BYTES,
        },
    });
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: laq-value model, version {version}, {size} bytes",
        path.display()
    );
    let head = j["head"].as_str().unwrap_or("?");
    match m.input_shape() {
        Some([c, h, w]) => {
            let _ = writeln!(
                s,
                "  V(s) of {c}x{h}x{w} images (C x H x W, {} raw values, channel planes in order), \
                 head {head}, gamma {}",
                m.input_dim(),
                m.gamma()
            );
        }
        None => {
            let _ = writeln!(
                s,
                "  V(s) over {} inputs, head {head}, gamma {}",
                m.input_dim(),
                m.gamma()
            );
        }
    }
    for (i, c) in convs.iter().enumerate() {
        let _ = writeln!(
            s,
            "  conv {i}: {}x{}x{} -> {}x{}x{} (4x4, stride 2, padding 1, f32 weights), relu",
            c.in_height,
            c.in_width,
            c.in_channels,
            c.in_height / 2,
            c.in_width / 2,
            c.out_channels
        );
    }
    for (i, l) in (0..m.num_layers()).filter_map(|i| m.layer(i)).enumerate() {
        let _ = writeln!(
            s,
            "  layer {i}: {} -> {} ({} weights){}",
            l.inputs,
            l.outputs,
            if l.int8 { "i8" } else { "f32" },
            if i + 1 < m.num_layers() { ", relu" } else { "" }
        );
    }
    let _ = writeln!(s, "  {} multiply-accumulates per evaluation", m.macs());
    let _ = writeln!(
        s,
        "  input normalisation{}: x = (s - mean) * scale, mean {}, scale {}",
        if m.num_conv() > 0 { " per channel" } else { "" },
        short(&vm.mean),
        short(&vm.scale)
    );
    let _ = writeln!(
        s,
        "  density gate: {}",
        match m.density_threshold() {
            Some(t) => format!("yes (threshold {t})"),
            None => "no".into(),
        }
    );
    if !vm.info.is_empty() {
        let info: Vec<String> = vm.info.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(s, "  info: {}", info.join(", "));
    }
    let runtime_build = if m.num_conv() > 0 {
        "with the runtime's `images` feature"
    } else {
        "without the runtime's `images` feature"
    };
    let _ = writeln!(
        s,
        "  footprint on a Cortex-M4F: flash {flash} B (model {size} + runtime code {runtime_code}, \
         {runtime_build}), RAM {ram} B (scratch {scratch_bytes} + stack {RUNTIME_STACK_BYTES})"
    );
    if let Some(b) = budget {
        let fits_flash = flash <= b.flash;
        let fits_ram = ram <= b.ram;
        let _ = writeln!(
            s,
            "  budget flash {} B: {}; RAM {} B: {}",
            b.flash,
            if fits_flash { "fits" } else { "does NOT fit" },
            b.ram,
            if fits_ram { "fits" } else { "does NOT fit" }
        );
        j["budget"] = json!({"flash": b.flash, "ram": b.ram, "fits": fits_flash && fits_ram,
                             "fits_flash": fits_flash, "fits_ram": fits_ram});
    }
    Ok((s, j))
}

fn short(v: &[f32]) -> String {
    let shown: Vec<String> = v.iter().take(6).map(|x| format!("{x:.4}")).collect();
    if v.len() > 6 {
        format!("[{}, ... {} values]", shown.join(", "), v.len())
    } else {
        format!("[{}]", shown.join(", "))
    }
}

/// Episode boundaries: after a terminal or a timeout.
fn episode_lengths(d: &Dataset) -> Vec<usize> {
    let mut out = vec![];
    let mut len = 0;
    for i in 0..d.len() {
        len += 1;
        let end = d.terminals[i] || d.timeouts.as_ref().is_some_and(|t| t[i]);
        if end || i + 1 == d.len() {
            out.push(len);
            len = 0;
        }
    }
    out
}

fn dataset(path: &Path) -> Result<(String, Value)> {
    let d = Dataset::load(path)?;
    let n = d.len();
    let dim = d.obs_dim();
    let storage = match d.observations.storage() {
        crate::data::ObsStorage::F32 => "f32",
        crate::data::ObsStorage::U8 => "u8",
    };
    let mut problems: Vec<String> = vec![];
    // Within an episode, the next observation should be the following row's observation;
    // a mismatch means the rows are not in time order or episodes are not marked.
    let mut breaks = 0usize;
    for i in 0..n.saturating_sub(1) {
        let end = d.terminals[i] || d.timeouts.as_ref().is_some_and(|t| t[i]);
        if !end && d.next_obs_row(i) != d.obs_row(i + 1) {
            breaks += 1;
        }
    }
    if breaks > 0 {
        problems.push(format!(
            "{breaks} transitions whose next observation is not the following row's observation \
             without an episode end between them (rows out of order, or missing terminals/timeouts)"
        ));
    }
    let mut lo = vec![f32::INFINITY; dim];
    let mut hi = vec![f32::NEG_INFINITY; dim];
    for (j, &v) in d.observations.iter().enumerate() {
        let j = j % dim.max(1);
        lo[j] = lo[j].min(v);
        hi[j] = hi[j].max(v);
    }
    let constant = (0..dim).filter(|&j| lo[j] == hi[j]).count();
    if constant > 0 && dim <= 64 {
        problems.push(format!(
            "{constant} observation dimension(s) never change: {:?}",
            (0..dim).filter(|&j| lo[j] == hi[j]).collect::<Vec<_>>()
        ));
    }
    let unchanged = (0..n)
        .filter(|&i| d.obs_row(i) == d.next_obs_row(i))
        .count();
    if unchanged * 2 > n {
        problems.push(format!(
            "{unchanged} of {n} transitions do not change the observation"
        ));
    }
    let rewarded = d.rewards.iter().filter(|&&r| r != 0.0).count();
    if rewarded == 0 {
        problems.push("no transition has a reward: every value will be 0".into());
    }
    let (rmin, rmax) = d
        .rewards
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &r| {
            (a.min(r), b.max(r))
        });
    let rmean = d.rewards.iter().map(|&r| r as f64).sum::<f64>() / n.max(1) as f64;
    let eps = episode_lengths(&d);
    let terminals = d.terminals.iter().filter(|&&t| t).count();
    let timeouts = d
        .timeouts
        .as_ref()
        .map(|t| t.iter().filter(|&&x| x).count());
    let actions = match &d.actions {
        None => json!(null),
        Some(Actions::Discrete(a)) => {
            let mut distinct: Vec<i64> = a.clone();
            distinct.sort_unstable();
            distinct.dedup();
            json!({"kind": "discrete", "distinct": distinct.len(),
                   "min": distinct.first(), "max": distinct.last()})
        }
        Some(Actions::Continuous { dim, .. }) => json!({"kind": "continuous", "dim": dim}),
    };
    let j = json!({
        "kind": "dataset",
        "file": path.display().to_string(),
        "transitions": n,
        "obs_shape": d.obs_shape,
        "obs_dtype": storage,
        "obs_min": if dim <= 64 { json!(lo) } else { json!(null) },
        "obs_max": if dim <= 64 { json!(hi) } else { json!(null) },
        "rewards": {"min": rmin, "max": rmax, "mean": rmean, "nonzero": rewarded},
        "episodes": {"count": eps.len(), "min_len": eps.iter().min(), "max_len": eps.iter().max(),
                     "mean_len": n as f64 / eps.len().max(1) as f64},
        "terminals": terminals,
        "timeouts": timeouts,
        "actions": actions,
        "problems": problems,
    });
    let mut s = String::new();
    let _ = writeln!(s, "{}: dataset, {n} transitions", path.display());
    let _ = writeln!(
        s,
        "  observation shape {:?} ({dim} values, {}; {:.1} MB in memory)",
        d.obs_shape,
        storage,
        d.obs_memory_bytes() as f64 / 1e6
    );
    if dim <= 16 {
        for j in 0..dim {
            let _ = writeln!(s, "    dim {j}: {:.4} .. {:.4}", lo[j], hi[j]);
        }
    }
    let _ = writeln!(
        s,
        "  rewards: min {rmin}, max {rmax}, mean {rmean:.4}, {rewarded} non-zero ({:.2}%)",
        100.0 * rewarded as f64 / n.max(1) as f64
    );
    let _ = writeln!(
        s,
        "  episodes: {} (length {}..{}, mean {:.1}); {terminals} terminals, {}",
        eps.len(),
        eps.iter().min().copied().unwrap_or(0),
        eps.iter().max().copied().unwrap_or(0),
        n as f64 / eps.len().max(1) as f64,
        match timeouts {
            Some(t) => format!("{t} timeouts"),
            None => "no timeouts array".into(),
        }
    );
    let _ = writeln!(
        s,
        "  actions: {}",
        match &d.actions {
            None => "none (state-only: what LAQ needs)".to_string(),
            Some(Actions::Discrete(_)) => format!(
                "discrete, {} distinct (kept for evaluation only)",
                j["actions"]["distinct"]
            ),
            Some(Actions::Continuous { dim, .. }) =>
                format!("continuous, {dim} per step (kept for evaluation only)"),
        }
    );
    if problems.is_empty() {
        let _ = writeln!(s, "  problems: none found");
    } else {
        for p in &problems {
            let _ = writeln!(s, "  problem: {p}");
        }
    }
    Ok((s, j))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datasets_report_episodes_and_problems() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.npz");
        let m = crate::envs::maze2d::Maze::named("umaze").unwrap();
        m.generate(2000, 500, 1).save(&p).unwrap();
        let (text, j) = inspect(&p, None).unwrap();
        assert_eq!(j["transitions"], 2000);
        assert_eq!(j["episodes"]["count"], 4);
        assert_eq!(j["problems"].as_array().unwrap().len(), 0, "{text}");
        assert!(text.contains("continuous, 2 per step"), "{text}");

        // Shuffled rows break the time order inside episodes.
        let d = m.generate(2000, 500, 1);
        let idx: Vec<usize> = (0..2000).rev().collect();
        d.select(&idx).save(&p).unwrap();
        let (_, j) = inspect(&p, None).unwrap();
        assert!(j["problems"][0]
            .as_str()
            .unwrap()
            .contains("not the following row"));
        assert!(inspect(&p, Some(Budget { flash: 1, ram: 1 })).is_err());
    }

    #[test]
    fn models_report_layers_and_budget() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/gridworld");
        let p = root.join("value.safetensors");
        let (text, j) = inspect(
            &p,
            Some(Budget {
                flash: 1 << 20,
                ram: 1 << 16,
            }),
        )
        .unwrap();
        assert_eq!(j["kind"], "model");
        assert_eq!(j["input_dim"], 2);
        assert_eq!(j["budget"]["fits"], true, "{text}");
        assert_eq!(j["version"], 1);
        assert_eq!(j["input_shape"], Value::Null);
        assert!(!text.contains("conv 0"), "{text}");
        // A fully connected model needs the smaller runtime, without the image code.
        let size = std::fs::metadata(&p).unwrap().len() as usize;
        assert_eq!(
            j["footprint"]["runtime_code_bytes"],
            RUNTIME_FLASH_BYTES_MLP
        );
        assert_eq!(
            j["footprint"]["flash_bytes"],
            size + RUNTIME_FLASH_BYTES_MLP
        );
        assert_eq!(j["footprint"]["runtime_features"], json!([]));
        assert!(
            text.contains("without the runtime's `images` feature"),
            "{text}"
        );
        let (_, j) = inspect(
            &p,
            Some(Budget {
                flash: 4096,
                ram: 1 << 16,
            }),
        )
        .unwrap();
        assert_eq!(j["budget"]["fits_flash"], false);
        // A truncated model is a model that fails validation, not a dataset.
        let bytes = std::fs::read(&p).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.safetensors");
        std::fs::write(&bad, &bytes[..bytes.len() - 8]).unwrap();
        assert!(inspect(&bad, None).is_err());
    }

    /// The default image network (3x32x32, convolutions to 16, 32 and 32 channels, then
    /// 512 -> 128 -> 8): its layers and its footprint.
    #[test]
    fn image_models_report_convolutions_and_footprint() {
        use crate::export::{ConvLayers, Head, Layer, ValueModel};
        let layer = |out_dim: usize, in_dim: usize| Layer {
            out_dim,
            in_dim,
            weight: (0..out_dim * in_dim)
                .map(|k| ((k % 7) as f32 - 3.0) * 0.01)
                .collect(),
            bias: vec![0.01; out_dim],
        };
        let model = ValueModel {
            mean: vec![100.0, 110.0, 120.0],
            scale: vec![0.02; 3],
            conv: Some(ConvLayers {
                input_shape: [3, 32, 32],
                layers: vec![layer(16, 48), layer(32, 256), layer(32, 512)],
            }),
            layers: vec![layer(128, 512), layer(8, 128)],
            head: Head::MaxQ,
            gamma: 0.99,
            keep_f32: vec![],
            info: Default::default(),
        };
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("image.safetensors");
        model.save(&p, false).unwrap();
        let size = std::fs::metadata(&p).unwrap().len() as usize;
        let (text, j) = inspect(&p, None).unwrap();
        assert_eq!(j["version"], 2);
        assert_eq!(j["input_shape"], json!([3, 32, 32]));
        assert_eq!(j["input_dim"], 3072);
        assert_eq!(j["conv_layers"].as_array().unwrap().len(), 3);
        assert_eq!(j["conv_layers"][2]["out_height"], 4);
        assert_eq!(j["layers"][0]["inputs"], 512);
        let macs = 16 * 16 * 16 * 48 + 8 * 8 * 32 * 256 + 4 * 4 * 32 * 512 + 512 * 128 + 128 * 8;
        assert_eq!(j["macs"], macs);
        // Scratch: the image, the largest patch (16 x 32), and the 16x16x16 and 8x8x32
        // maps side by side.
        let scratch = 4 * (3072 + 512 + 4096 + 2048);
        assert_eq!(j["footprint"]["scratch_bytes"], scratch);
        assert_eq!(j["footprint"]["ram_bytes"], scratch + RUNTIME_STACK_BYTES);
        assert_eq!(
            j["footprint"]["flash_bytes"],
            size + RUNTIME_FLASH_BYTES_IMAGES
        );
        assert_eq!(j["footprint"]["runtime_features"], json!(["images"]));
        assert!(
            text.contains(&format!(
                "runtime code {RUNTIME_FLASH_BYTES_IMAGES}, with the runtime's `images` feature"
            )),
            "{text}"
        );
        for line in [
            "version 2",
            "3x32x32 images",
            "conv 0: 32x32x3 -> 16x16x16",
            "conv 2: 8x8x32 -> 4x4x32",
            "layer 0: 512 -> 128",
            "normalisation per channel",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
    }
}
