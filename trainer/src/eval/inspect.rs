//! `laq inspect`: what a dataset or a model file holds, what is wrong with it, and
//! whether a model fits a microcontroller.

use crate::data::read::ReadOptions;
use crate::data::{Actions, Dataset, ObsStorage};
use crate::run::config::Horizon;
use crate::run::record::ContextsLeftOut;
use crate::run::trust::TRANSITIONS_MATCH_MIN;
use anyhow::{Context, Result};
use laq_runtime::format::{MetaKey, CONV_KERNEL, CONV_PADDING, CONV_STRIDE, NAME};
use laq_runtime::Model;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

/// Flash taken by the runtime's code for loading a fully connected f32 model and
/// evaluating it, on a Cortex-M4F, built without the runtime's `images` and `int8`
/// features: 7 480 B with `new_checked_in_place` (`size_eval` in firmware-examples;
/// docs/runtime.md), plus the 872 B that moving the model out of `Model::new_checked`'s
/// `Result` costs (the compiler's `memcpy`, measured when both were built). The firmware
/// test measures `size_eval` again and fails if it grows past this figure.
pub const RUNTIME_FLASH_BYTES_MLP: usize = 8_352;
/// What the `int8` feature adds for models with int8 layers (the quantising, the
/// integer kernels and the rescale): 9 748 - 7 480 B. Checked by the firmware test like
/// [`RUNTIME_FLASH_BYTES_MLP`].
pub const RUNTIME_FLASH_BYTES_INT8: usize = 2_268;
/// The same as [`RUNTIME_FLASH_BYTES_MLP`] for image models, which need the `images`
/// feature (the convolutions and the version 2 checks): 9 236 B with
/// `new_checked_in_place`, plus 876 B for `Model::new_checked`. Checked by the firmware
/// test like [`RUNTIME_FLASH_BYTES_MLP`].
pub const RUNTIME_FLASH_BYTES_IMAGES: usize = 10_112;
/// Stack used on a Cortex-M4F (painted-stack measurements of `bench_mcu`): 2 144 B for
/// loading the grid model, `select` over 8 moves and shaping, its 520 B of scratch and
/// the report included, with the `images` feature (2 032 B without: a smaller `Model`);
/// loading and evaluating an image model takes 936 B besides its scratch
/// (`bench_image`). The footprint adds it to the scratch as a margin, the larger figure
/// for both kinds of model.
pub const RUNTIME_STACK_BYTES: usize = 2_144;

/// The runtime code a model needs: firmware is built without the image code unless the
/// model has convolutions, and without the int8 kernels unless it has int8 layers.
pub fn runtime_flash_bytes(image_model: bool, int8_model: bool) -> usize {
    let base = if image_model {
        RUNTIME_FLASH_BYTES_IMAGES
    } else {
        RUNTIME_FLASH_BYTES_MLP
    };
    base + if int8_model {
        RUNTIME_FLASH_BYTES_INT8
    } else {
        0
    }
}

/// A microcontroller's memory budget in bytes.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub flash: usize,
    pub ram: usize,
}

/// What `laq inspect` says of a file: the text (`Display`) and the JSON (`Serialize`)
/// come from the same record.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Report {
    Model(ModelReport),
    Dataset(DatasetReport),
    /// A run directory: its metrics (with the trust verdict) and its model.
    Run {
        metrics: Box<crate::run::record::RunMetrics>,
        model: ModelReport,
    },
}

impl Report {
    /// Whether a model fits the budget it was inspected against (`None` without one).
    pub fn fits(&self) -> Option<bool> {
        match self {
            Report::Model(m) | Report::Run { model: m, .. } => m.budget.as_ref().map(|b| b.fits),
            Report::Dataset(_) => None,
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Report::Model(m) => m.fmt(f),
            Report::Dataset(d) => d.fmt(f),
            Report::Run { metrics, model } => write!(f, "{metrics}{model}"),
        }
    }
}

/// Describes a dataset or model file (chosen by its content: a `laq-value` model is a
/// safetensors file whose metadata says so), or a run directory.
pub fn inspect(path: &Path, budget: Option<Budget>) -> Result<Report> {
    inspect_with(path, budget, &ReadOptions::default())
}

/// [`inspect`], reading a dataset as `read` says.
pub fn inspect_with(path: &Path, budget: Option<Budget>, read: &ReadOptions) -> Result<Report> {
    let is_run = path.join(crate::run::record::METRICS_FILE).is_file();
    if crate::data::import::lerobot::is_lerobot(path) && !is_run {
        // Its own `meta/info.json` says what it is: its errors need no guess.
        return Ok(Report::Dataset(dataset(path, read)?));
    }
    if path.is_dir() && !is_run {
        let report = dataset(path, read).with_context(|| {
            format!(
                "{} is not a run directory (no metrics.json), nor a dataset",
                path.display()
            )
        })?;
        return Ok(Report::Dataset(report));
    }
    if path.is_dir() {
        let metrics = crate::run::record::RunMetrics::read(path)?;
        let file = path.join(crate::run::record::VALUE_FILE);
        let bytes =
            std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        return Ok(Report::Run {
            metrics: Box::new(metrics),
            model: model(&file, bytes, budget)?,
        });
    }
    if is_model(path)? {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(Report::Model(model(path, bytes, budget)?))
    } else {
        if budget.is_some() {
            anyhow::bail!(
                "{} is a dataset; --flash/--ram apply to models",
                path.display()
            );
        }
        Ok(Report::Dataset(dataset(path, read)?))
    }
}

/// Whether the file at `path` is a laq model: a safetensors header whose metadata names
/// the format. Only the header is read, so that a dataset of gigabytes is not read twice
/// (once to tell, once to load) nor held twice.
fn is_model(path: &Path) -> Result<bool> {
    /// Far above any model's header; a dataset's first bytes read as a length beyond it.
    const MAX_HEADER: u64 = 100 << 20;
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut len = [0u8; 8];
    if f.read_exact(&mut len).is_err() {
        return Ok(false);
    }
    let n = u64::from_le_bytes(len);
    if n > MAX_HEADER {
        return Ok(false);
    }
    let mut header = vec![];
    if f.take(n).read_to_end(&mut header).is_err() || header.len() as u64 != n {
        return Ok(false);
    }
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(&header) else {
        return Ok(false);
    };
    Ok(json
        .get("__metadata__")
        .and_then(|m| m.get(MetaKey::Format.as_str()))
        .and_then(|f| f.as_str())
        == Some(NAME))
}

/// One convolution of an image model.
#[derive(Clone, Debug, Serialize)]
pub struct ConvReport {
    pub in_channels: usize,
    pub out_channels: usize,
    pub in_height: usize,
    pub in_width: usize,
    pub out_height: usize,
    pub out_width: usize,
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
    pub weights: &'static str,
}

/// One linear layer.
#[derive(Clone, Debug, Serialize)]
pub struct LayerReport {
    pub inputs: usize,
    pub outputs: usize,
    /// `f32` or `i8`.
    pub weights: &'static str,
}

/// Flash and RAM on a Cortex-M4F.
#[derive(Clone, Debug, Serialize)]
pub struct Footprint {
    pub flash_bytes: usize,
    pub model_bytes: usize,
    pub runtime_code_bytes: usize,
    pub runtime_features: Vec<&'static str>,
    pub ram_bytes: usize,
    pub scratch_bytes: usize,
    pub stack_bytes: usize,
}

/// The footprint against a budget.
#[derive(Clone, Debug, Serialize)]
pub struct BudgetReport {
    pub flash: usize,
    pub ram: usize,
    pub fits: bool,
    pub fits_flash: bool,
    pub fits_ram: bool,
}

/// A model file.
#[derive(Clone, Debug, Serialize)]
pub struct ModelReport {
    pub file: String,
    pub format: &'static str,
    pub version: u32,
    pub bytes: usize,
    pub input_dim: usize,
    pub input_shape: Option<[usize; 3]>,
    pub conv_layers: Vec<ConvReport>,
    pub outputs: usize,
    pub head: &'static str,
    pub gamma: f32,
    pub layers: Vec<LayerReport>,
    pub macs: usize,
    pub input_mean: Vec<f32>,
    pub input_scale: Vec<f32>,
    pub density_gate: bool,
    pub density_threshold: Option<f32>,
    /// The cost a step V was learned above (`None`: V in the log's own units).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_step: Option<f32>,
    pub info: BTreeMap<String, String>,
    pub footprint: Footprint,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReport>,
}

fn model(path: &Path, bytes: Vec<u8>, budget: Option<Budget>) -> Result<ModelReport> {
    let size = bytes.len();
    let m = Model::new_checked(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: invalid {NAME} model: {e}", path.display()))?;
    let vm = crate::export::ValueModel::from_bytes(&bytes)
        .with_context(|| format!("{}: invalid {NAME} model", path.display()))?;
    let conv_layers = (0..m.num_conv())
        .filter_map(|i| m.conv_layer(i))
        .map(|c| ConvReport {
            in_channels: c.in_channels,
            out_channels: c.out_channels,
            in_height: c.in_height,
            in_width: c.in_width,
            out_height: c.in_height / CONV_STRIDE,
            out_width: c.in_width / CONV_STRIDE,
            kernel: CONV_KERNEL,
            stride: CONV_STRIDE,
            padding: CONV_PADDING,
            weights: "f32",
        })
        .collect();
    let layers = (0..m.num_layers())
        .filter_map(|i| m.layer(i))
        .map(|l| LayerReport {
            inputs: l.inputs,
            outputs: l.outputs,
            weights: if l.int8 { "i8" } else { "f32" },
        })
        .collect();
    let images = m.num_conv() > 0;
    let int8 = (0..m.num_layers()).any(|i| m.layer(i).is_some_and(|l| l.int8));
    let scratch_bytes = m.scratch_len() * 4;
    let ram = scratch_bytes + RUNTIME_STACK_BYTES;
    let runtime_code = runtime_flash_bytes(images, int8);
    let flash = size + runtime_code;
    let budget = budget.map(|b| BudgetReport {
        flash: b.flash,
        ram: b.ram,
        fits: flash <= b.flash && ram <= b.ram,
        fits_flash: flash <= b.flash,
        fits_ram: ram <= b.ram,
    });
    Ok(ModelReport {
        file: path.display().to_string(),
        format: NAME,
        version: vm.version().number(),
        bytes: size,
        input_dim: m.input_dim(),
        input_shape: m.input_shape(),
        conv_layers,
        outputs: m.output_dim(),
        head: m.head().name(),
        gamma: m.gamma(),
        layers,
        macs: m.macs(),
        input_mean: vm.mean.clone(),
        input_scale: vm.scale.clone(),
        density_gate: m.has_density_gate(),
        density_threshold: m.density_threshold(),
        cost_per_step: m.cost_per_step(),
        info: vm.info,
        footprint: Footprint {
            flash_bytes: flash,
            model_bytes: size,
            runtime_code_bytes: runtime_code,
            runtime_features: [(images, "images"), (int8, "int8")]
                .into_iter()
                .filter_map(|(on, name)| on.then_some(name))
                .collect(),
            ram_bytes: ram,
            scratch_bytes,
            stack_bytes: RUNTIME_STACK_BYTES,
        },
        budget,
    })
}

impl fmt::Display for ModelReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} model, version {}, {} bytes",
            self.file, self.format, self.version, self.bytes
        )?;
        match self.input_shape {
            Some([c, h, w]) => writeln!(
                f,
                "  V(s) of {c}x{h}x{w} images (C x H x W, {} raw values, channel planes in order), \
                 head {}, gamma {}",
                self.input_dim, self.head, self.gamma
            )?,
            None => writeln!(
                f,
                "  V(s) over {} inputs, head {}, gamma {}",
                self.input_dim, self.head, self.gamma
            )?,
        }
        for (i, c) in self.conv_layers.iter().enumerate() {
            writeln!(
                f,
                "  conv {i}: {}x{}x{} -> {}x{}x{} ({k}x{k}, stride {}, padding {}, {} weights), relu",
                c.in_height,
                c.in_width,
                c.in_channels,
                c.out_height,
                c.out_width,
                c.out_channels,
                c.stride,
                c.padding,
                c.weights,
                k = c.kernel,
            )?;
        }
        for (i, l) in self.layers.iter().enumerate() {
            writeln!(
                f,
                "  layer {i}: {} -> {} ({} weights){}",
                l.inputs,
                l.outputs,
                l.weights,
                if i + 1 < self.layers.len() {
                    ", relu"
                } else {
                    ""
                }
            )?;
        }
        writeln!(f, "  {} multiply-accumulates per evaluation", self.macs)?;
        writeln!(
            f,
            "  input normalisation{}: x = (s - mean) * scale, mean {}, scale {}",
            if self.conv_layers.is_empty() {
                ""
            } else {
                " per channel"
            },
            short(&self.input_mean),
            short(&self.input_scale)
        )?;
        let unread: Vec<String> = (self.input_scale.iter().enumerate())
            .filter(|&(_, &k)| k == 0.0)
            .map(|(j, _)| j.to_string())
            .collect();
        if self.conv_layers.is_empty() && !unread.is_empty() {
            writeln!(
                f,
                "  values V does not read (scale 0; the run's `ignored_values`): {}",
                unread.join(", ")
            )?;
        }
        match self.density_threshold {
            Some(t) => writeln!(f, "  density gate: yes (threshold {t})")?,
            None => writeln!(f, "  density gate: no")?,
        }
        if let Some(c) = self.cost_per_step {
            writeln!(
                f,
                "  cost_per_step {c}: V is the value above paying {c} a step for ever (1 one \
                 step from an end, 0 never ending); the return in the log's units is \
                 {c} * (1 - gamma * V) / (1 - gamma)"
            )?;
        }
        if !self.info.is_empty() {
            let info: Vec<String> = self.info.iter().map(|(k, v)| format!("{k}={v}")).collect();
            writeln!(f, "  info: {}", info.join(", "))?;
        }
        let p = &self.footprint;
        let build = if p.runtime_features.is_empty() {
            "without the runtime's `images` and `int8` features".to_string()
        } else {
            let names: Vec<String> = p
                .runtime_features
                .iter()
                .map(|f| format!("`{f}`"))
                .collect();
            let plural = if names.len() > 1 { "s" } else { "" };
            format!("with the runtime's {} feature{plural}", names.join(" and "))
        };
        writeln!(
            f,
            "  footprint on a Cortex-M4F: flash {} B (model {} + runtime code {}, {build}), \
             RAM {} B (scratch {} + stack {})",
            p.flash_bytes,
            p.model_bytes,
            p.runtime_code_bytes,
            p.ram_bytes,
            p.scratch_bytes,
            p.stack_bytes
        )?;
        if let Some(b) = &self.budget {
            let word = |fits: bool| if fits { "fits" } else { "does NOT fit" };
            writeln!(
                f,
                "  budget flash {} B: {}; RAM {} B: {}",
                b.flash,
                word(b.fits_flash),
                b.ram,
                word(b.fits_ram)
            )?;
        }
        Ok(())
    }
}

fn short(v: &[f32]) -> String {
    let shown: Vec<String> = v.iter().take(6).map(|x| format!("{x:.4}")).collect();
    if v.len() > 6 {
        format!("[{}, ... {} values]", shown.join(", "), v.len())
    } else {
        format!("[{}]", shown.join(", "))
    }
}

/// Rewards of a dataset.
#[derive(Clone, Debug, Serialize)]
pub struct RewardReport {
    pub min: f32,
    pub max: f32,
    pub mean: f64,
    pub nonzero: usize,
    /// The reward most rows carry where it is a cost per step
    /// ([`Dataset::reward_baseline`]); a reward is what lies above it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_step: Option<f32>,
}

/// Episodes of a dataset: rows up to a terminal or a timeout.
#[derive(Clone, Debug, Serialize)]
pub struct EpisodeReport {
    pub count: usize,
    pub min_len: Option<usize>,
    pub max_len: Option<usize>,
    pub mean_len: f64,
}

/// Ground-truth actions of a dataset.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionReport {
    Discrete {
        distinct: usize,
        min: Option<i64>,
        max: Option<i64>,
    },
    Continuous {
        dim: usize,
    },
}

/// A dataset file.
#[derive(Clone, Debug, Serialize)]
pub struct DatasetReport {
    pub file: String,
    pub transitions: usize,
    pub obs_shape: Vec<usize>,
    /// `f32` or `u8`.
    pub obs_dtype: &'static str,
    pub obs_memory_bytes: usize,
    /// Per observation value, when there are at most 64.
    pub obs_min: Option<Vec<f32>>,
    pub obs_max: Option<Vec<f32>>,
    pub rewards: RewardReport,
    pub episodes: EpisodeReport,
    /// Absent when no trajectory reaches a reward.
    pub steps_to_reward: Option<Horizon>,
    pub terminals: usize,
    pub timeouts: Option<usize>,
    /// `laq train`'s `transitions_match` on this data ([`crate::run::trust::transitions_match`]):
    /// whether each row's next observation is its own. Absent with fewer than two rows.
    pub transitions_match: Option<f64>,
    pub actions: Option<ActionReport>,
    /// What reading did: the source format, rows left out and why, rows without a next
    /// observation, assumptions.
    pub reading: Vec<String>,
    /// Dimensions that change only where an episode begins, and the rows that change them
    /// (`laq train` leaves those out of mining and Q-learning).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contexts: Option<ContextsLeftOut>,
    pub problems: Vec<String>,
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

fn dataset(path: &Path, read: &ReadOptions) -> Result<DatasetReport> {
    let loaded = crate::data::read::read(path, read)?;
    let reading = loaded.report_lines();
    let d = loaded.data;
    let n = d.len();
    let dim = d.obs_dim();
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
    let constant: Vec<usize> = (0..dim).filter(|&j| lo[j] == hi[j]).collect();
    if !constant.is_empty() && dim <= 64 {
        problems.push(format!(
            "{} observation dimension(s) never change: {constant:?}",
            constant.len()
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
    let matched = Some(crate::run::trust::transitions_match(&d)).filter(|m| m.is_finite());
    if let Some(m) = matched.filter(|&m| m < TRANSITIONS_MATCH_MIN) {
        problems.push(format!(
            "next observations lie no nearer their own observations than other rows' do \
             (transitions_match {m:.2}, below {TRANSITIONS_MATCH_MIN}): rows shuffled apart or \
             mismatched; `laq train` will call its V doubtful"
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
    let eps = episode_lengths(&d);
    let actions = match &d.actions {
        None => None,
        Some(Actions::Discrete(a)) => {
            let mut distinct: Vec<i64> = a.clone();
            distinct.sort_unstable();
            distinct.dedup();
            Some(ActionReport::Discrete {
                distinct: distinct.len(),
                min: distinct.first().copied(),
                max: distinct.last().copied(),
            })
        }
        Some(Actions::Continuous { dim, .. }) => Some(ActionReport::Continuous { dim: *dim }),
    };
    let small = dim <= 64;
    Ok(DatasetReport {
        file: path.display().to_string(),
        transitions: n,
        obs_shape: d.obs_shape.clone(),
        obs_dtype: match d.observations.storage() {
            ObsStorage::F32 => "f32",
            ObsStorage::U8 => "u8",
        },
        obs_memory_bytes: d.obs_memory_bytes(),
        obs_min: small.then_some(lo),
        obs_max: small.then_some(hi),
        rewards: RewardReport {
            min: rmin,
            max: rmax,
            mean: d.rewards.iter().map(|&r| r as f64).sum::<f64>() / n.max(1) as f64,
            nonzero: rewarded,
            cost_per_step: Some(d.reward_baseline()).filter(|&b| b != 0.0),
        },
        episodes: EpisodeReport {
            count: eps.len(),
            min_len: eps.iter().min().copied(),
            max_len: eps.iter().max().copied(),
            mean_len: n as f64 / eps.len().max(1) as f64,
        },
        // Where the rewards are a cost per step until the episodes end, the ends are what
        // `laq train` learns to reach.
        steps_to_reward: match crate::data::cost::CostToEnd::of(&d, 0.99) {
            Some(cost) => Horizon::of(&cost.apply(&d)),
            None => Horizon::of(&d),
        },
        terminals: d.terminals.iter().filter(|&&t| t).count(),
        timeouts: d
            .timeouts
            .as_ref()
            .map(|t| t.iter().filter(|&&x| x).count()),
        transitions_match: matched,
        actions,
        reading,
        contexts: ContextsLeftOut::of(&d).map(|(c, _)| c),
        problems,
    })
}

impl fmt::Display for DatasetReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.transitions;
        let dim: usize = self.obs_shape.iter().product();
        writeln!(f, "{}: dataset, {n} transitions", self.file)?;
        writeln!(
            f,
            "  observation shape {:?} ({dim} values, {}; {:.1} MB in memory)",
            self.obs_shape,
            self.obs_dtype,
            self.obs_memory_bytes as f64 / 1e6
        )?;
        if let (Some(lo), Some(hi)) = (&self.obs_min, &self.obs_max) {
            if dim <= 16 {
                for j in 0..dim {
                    writeln!(f, "    dim {j}: {:.4} .. {:.4}", lo[j], hi[j])?;
                }
            }
        }
        let r = &self.rewards;
        writeln!(
            f,
            "  rewards: min {}, max {}, mean {:.4}, {} non-zero ({:.2}%)",
            r.min,
            r.max,
            r.mean,
            r.nonzero,
            100.0 * r.nonzero as f64 / n.max(1) as f64
        )?;
        match r.cost_per_step {
            Some(b) if self.terminals > 0 => writeln!(
                f,
                "  rewards: {b} on most rows is a cost per step until an episode ends on a \
                 terminal row; `laq train` learns the value above paying it for ever, each \
                 end as a reward (docs/trust.md, \"A cost until the end\")"
            )?,
            Some(b) => writeln!(
                f,
                "  rewards: {b} on most rows is a cost per step; the rewarded rows are those \
                 above it"
            )?,
            None => {}
        }
        let e = &self.episodes;
        writeln!(
            f,
            "  episodes: {} (length {}..{}, mean {:.1}); {} terminals, {}",
            e.count,
            e.min_len.unwrap_or(0),
            e.max_len.unwrap_or(0),
            e.mean_len,
            self.terminals,
            match self.timeouts {
                Some(t) => format!("{t} timeouts"),
                None => "no timeouts array".into(),
            }
        )?;
        if let Some(h) = &self.steps_to_reward {
            writeln!(
                f,
                "  steps to a reward along the trajectories: median {}, 90th percentile {} \
                 ({} rows, {:.1}%, reach one)",
                h.median,
                h.far,
                h.rows,
                100.0 * h.rows as f64 / n.max(1) as f64
            )?;
        }
        if let Some(m) = self.transitions_match {
            writeln!(
                f,
                "  rows that pair: transitions_match {m:.2} (the share of rows whose next \
                 observation lies nearer their own observation than another row's does, less \
                 the share farther; about 0 when shuffled)"
            )?;
        }
        let actions = match &self.actions {
            None => "none (state-only: what LAQ needs)".to_string(),
            Some(ActionReport::Discrete { distinct, .. }) => {
                format!("discrete, {distinct} distinct (kept for evaluation only)")
            }
            Some(ActionReport::Continuous { dim }) => {
                format!("continuous, {dim} per step (kept for evaluation only)")
            }
        };
        writeln!(f, "  actions: {actions}")?;
        for line in &self.reading {
            writeln!(f, "  reading: {line}")?;
        }
        if let Some(c) = &self.contexts {
            writeln!(f, "  contexts: {c} by `laq train`")?;
        }
        if self.problems.is_empty() {
            writeln!(f, "  problems: none found")?;
        }
        for p in &self.problems {
            writeln!(f, "  problem: {p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A model is told from its header alone; anything else (a dataset, a safetensors
    /// file of other metadata, a file too short to hold a header) is not one.
    #[test]
    fn models_are_told_by_their_header() {
        let shipped =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/maze2d/value.safetensors");
        assert!(is_model(&shipped).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        let header = |json: &str| {
            let mut b = (json.len() as u64).to_le_bytes().to_vec();
            b.extend(json.as_bytes());
            b
        };
        let other = header(r#"{"__metadata__":{"format":"pt"}}"#);
        assert!(!is_model(&at("other.safetensors", &other)).unwrap());
        let named = header(&format!(r#"{{"__metadata__":{{"format":"{NAME}"}}}}"#));
        assert!(is_model(&at("named.safetensors", &named)).unwrap());
        assert!(!is_model(&at("cut.safetensors", &named[..named.len() - 1])).unwrap());
        assert!(!is_model(&at("short", b"PK")).unwrap());
        assert!(!is_model(&at("zip.npz", b"PK\x03\x04\x14\x00\x00\x00rest")).unwrap());
        assert!(is_model(&dir.path().join("missing")).is_err());
    }

    /// The report as text and JSON.
    fn inspect(path: &Path, budget: Option<Budget>) -> Result<(String, Value)> {
        let r = super::inspect(path, budget)?;
        Ok((r.to_string(), serde_json::to_value(&r)?))
    }

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
        let h = &j["steps_to_reward"];
        assert!(
            h["median"].as_u64().unwrap() <= h["far"].as_u64().unwrap(),
            "{h}"
        );
        assert!(
            text.contains("steps to a reward along the trajectories"),
            "{text}"
        );
        assert!(text.contains("continuous, 2 per step"), "{text}");
        assert!(j["transitions_match"].as_f64().unwrap() > 0.5, "{text}");

        // Next observations moved to other rows: no nearer their own observations.
        let mut d = m.generate(2000, 500, 1);
        let idx: Vec<usize> = (0..2000).map(|i| (i * 7919 + 13) % 2000).collect();
        d.next_observations = d.select(&idx).next_observations;
        d.save(&p).unwrap();
        let (text, j) = inspect(&p, None).unwrap();
        assert!(
            j["transitions_match"].as_f64().unwrap().abs() < 0.1,
            "{text}"
        );
        assert!(
            text.contains("problem: next observations lie no nearer their own observations"),
            "{text}"
        );

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
            text.contains("without the runtime's `images` and `int8` features"),
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
        // The same model with int8 weights needs the runtime's `int8` kernels too.
        let dir8 = tempfile::tempdir().unwrap();
        let p8 = dir8.path().join("int8.safetensors");
        crate::export::ValueModel::load(&p)
            .unwrap()
            .save(&p8, true)
            .unwrap();
        let (text, j) = inspect(&p8, None).unwrap();
        let size8 = std::fs::metadata(&p8).unwrap().len() as usize;
        assert_eq!(j["footprint"]["runtime_features"], json!(["int8"]));
        assert_eq!(
            j["footprint"]["flash_bytes"],
            size8 + RUNTIME_FLASH_BYTES_MLP + RUNTIME_FLASH_BYTES_INT8
        );
        assert!(
            text.contains("with the runtime's `int8` feature)"),
            "{text}"
        );
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
            density: None,
            cost_per_step: None,
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
