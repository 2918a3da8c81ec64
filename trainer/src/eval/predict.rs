//! `laq predict`: V of every observation of a dataset, computed by the runtime crate
//! from the exported file, so what is measured is what ships.

use crate::data::read::ReadOptions;
use crate::data::Dataset;
use anyhow::{Context, Result};
use std::path::Path;

/// V of every observation, through the runtime. Image observations (`[C, H, W]`) go to
/// the runtime as stored: raw values, channel planes one after the other, which is the
/// state layout of image models.
pub fn values(model_path: &Path, data: &Dataset) -> Result<Vec<f32>> {
    values_of(&load(model_path)?.model(), model_path, data)
}

/// [`values`] of a model already loaded from `model_path` (named in errors).
fn values_of(model: &laq_runtime::Model, model_path: &Path, data: &Dataset) -> Result<Vec<f32>> {
    let d = data.obs_dim();
    if let Some([c, h, w]) = model.input_shape() {
        if data.obs_shape != [c, h, w] {
            anyhow::bail!(
                "{} takes images of shape [{c}, {h}, {w}] (C, H, W), but the dataset's \
                 observations have shape {:?}",
                model_path.display(),
                data.obs_shape
            );
        }
    } else if model.input_dim() != d {
        anyhow::bail!(
            "{} expects states of {} values, but the dataset's observations have {d} (shape {:?})",
            model_path.display(),
            model.input_dim(),
            data.obs_shape
        );
    }
    // Groups of BATCH observations read each weight once (fully connected models); the
    // values are those of one observation at a time, bit for bit.
    let mut scratch = vec![0f32; model.batch_scratch_len()];
    let batch = laq_runtime::BATCH;
    let mut out = vec![0f32; data.len()];
    let mut states = Vec::with_capacity(batch * d);
    for (g, values) in out.chunks_mut(batch).enumerate() {
        states.clear();
        for i in g * batch..g * batch + values.len() {
            states.extend_from_slice(&data.obs_row(i));
        }
        if model.values(&states, values, &mut scratch).is_err() {
            // Name the observation that fails.
            for (k, v) in values.iter_mut().enumerate() {
                let i = g * batch + k;
                *v = model
                    .value(&data.obs_row(i), &mut scratch)
                    .map_err(|e| anyhow::anyhow!("observation {i}: {e}"))?;
            }
        }
    }
    Ok(out)
}

/// The model file, checked by the runtime.
fn load(model_path: &Path) -> Result<laq_runtime::OwnedModel> {
    let bytes = std::fs::read(model_path)
        .with_context(|| format!("cannot read {}", model_path.display()))?;
    if crate::stages::qlearn::is_qnet_file(&bytes) {
        anyhow::bail!("{} is {}", model_path.display(), QNET);
    }
    laq_runtime::OwnedModel::from_vec(bytes)
        .map_err(|e| anyhow::anyhow!("{}: not a valid model: {e}", model_path.display()))
}

const QNET: &str = "a trainer-only Q-network file (`laq-qnet`, from `QNetwork::save`), which \
    the runtime does not read; `laq predict` scores a run's `value.safetensors`";

/// The reading of a dataset for `model`: the command line's options, with the reading
/// the model records (`obs_keys`, `image_size`) where those leave it to the defaults. A
/// file that is no model is left to [`values`] to refuse.
pub fn read_options(model: &Path, given: &ReadOptions) -> Result<ReadOptions> {
    let bytes = std::fs::read(model).with_context(|| format!("cannot read {}", model.display()))?;
    let recorded = recorded_read(&bytes).with_context(|| model.display().to_string())?;
    Ok(given.or_recorded(&recorded, model))
}

/// The reading of observations a model's bytes record ([`ReadOptions::record`]); the
/// defaults for bytes that hold no safetensors header.
pub fn recorded_read(bytes: &[u8]) -> Result<ReadOptions> {
    match safetensors::SafeTensors::read_metadata(bytes) {
        Ok((_, header)) => {
            let info = header.metadata().clone().unwrap_or_default();
            ReadOptions::recorded(&info.into_iter().collect())
        }
        Err(_) => Ok(ReadOptions::default()),
    }
}

/// Writes `index,obs_0..obs_{D-1},value` rows; returns the number of rows. `index` counts
/// the rows as read: where reading left rows of the source out, it says so, since the
/// index then differs from the source's row. The dataset is read as the model's data
/// was, where the model records it and `read` does not say otherwise ([`read_options`]).
/// A V learned above a cost per step gets a last column, `value_in_data_units`: the
/// return in the log's units ([`laq_runtime::Model::value_in_data_units`]).
pub fn predict_csv(model: &Path, path: &Path, read: &ReadOptions, out: &Path) -> Result<usize> {
    let read = read_options(model, read)?;
    let loaded = crate::data::read::read(path, &read)?;
    if loaded.dropped > 0 {
        log::warn!(
            "{}: the CSV's `index` counts the {} rows read, not the source's {} rows",
            path.display(),
            loaded.data.len(),
            loaded.data.len() + loaded.dropped
        );
    }
    let data = loaded.data;
    let owned = load(model)?;
    let runtime = owned.model();
    let v = values_of(&runtime, model, &data)?;
    let cost = runtime.cost_per_step();
    if let Some(c) = cost {
        log::info!(
            "{}: V was learned above a cost of {c} a step: `value` is 1 one step from an \
             end and 0 never ending, `value_in_data_units` the return in the log's units",
            model.display()
        );
    }
    let d = data.obs_dim();
    let mut s = String::from("index");
    if d <= 16 {
        for j in 0..d {
            s += &format!(",obs_{j}");
        }
    }
    s += ",value";
    s += if cost.is_some() {
        ",value_in_data_units\n"
    } else {
        "\n"
    };
    for (i, &val) in v.iter().enumerate() {
        s += &i.to_string();
        if d <= 16 {
            for x in data.obs_row(i).iter() {
                s += &format!(",{x}");
            }
        }
        s += &format!(",{val}");
        if cost.is_some() {
            s += &format!(",{}", runtime.value_in_data_units(val));
        }
        s += "\n";
    }
    crate::util::io::write_text(out, &s)?;
    Ok(v.len())
}

/// Compares two models on a dataset's observations: Spearman of V and agreement of the
/// greedy choice between consecutive observations.
pub fn compare(a: &Path, b: &Path, data: &Dataset) -> Result<String> {
    let va: Vec<f64> = values(a, data)?.into_iter().map(f64::from).collect();
    let vb: Vec<f64> = values(b, data)?.into_iter().map(f64::from).collect();
    let rho = crate::util::stats::spearman(&va, &vb);
    let max_abs = va
        .iter()
        .zip(&vb)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    Ok(format!(
        "Spearman {rho:.5}, largest |dV| {max_abs:.3e} over {} observations",
        va.len()
    ))
}
