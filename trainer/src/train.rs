//! The whole pipeline on one dataset: labels, Q-learning, export, and the run directory.

use crate::checkpoint::{Checkpointer, State};
use crate::data::{Actions, Dataset};
use crate::export::ValueModel;
use crate::labels::{self, LabelSource, Labelled};
use crate::mining::MiningConfig;
use crate::qlearn::{self, DistillConfig, DqnConfig, QKind, QNetwork, Table, TabularConfig};
use anyhow::{Context, Result};
use candle_core::Device;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// Every setting of a training run; written to the run directory as `config.toml`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrainConfig {
    pub labels: LabelSource,
    pub q: QKind,
    pub seed: u64,
    pub mining: MiningConfig,
    pub tabular: TabularConfig,
    pub dqn: DqnConfig,
    pub distill: DistillConfig,
    /// Keep only transitions labelled with the N most used labels for Q-learning (the
    /// paper's "top 8 dominant actions"); `None` keeps all.
    #[serde(default)]
    pub top_actions: Option<usize>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            labels: LabelSource::Latent,
            q: QKind::Auto,
            seed: 0,
            mining: MiningConfig::default(),
            tabular: TabularConfig::default(),
            dqn: DqnConfig::default(),
            distill: DistillConfig::default(),
            top_actions: None,
        }
    }
}

impl TrainConfig {
    /// Defaults that suit `data`: the grid-world settings for small discrete state
    /// spaces, and a smaller forward model with larger batches for continuous states
    /// (the authors' Maze2D model is smaller still, 4-8-16-8).
    pub fn for_data(data: &Dataset) -> Self {
        if data.is_image() {
            TrainConfig::images()
        } else if qlearn::is_tabular(data) {
            TrainConfig::default()
        } else {
            TrainConfig::continuous()
        }
    }

    /// The settings as TOML, every key present (`laq config default`).
    pub fn to_toml(&self) -> Result<String> {
        Ok(toml::to_string(self)?)
    }

    /// These settings with the keys of a TOML document replaced. A partial document
    /// keeps the rest; a key that is not a setting is an error naming it (a typo must not
    /// silently train with the default).
    pub fn overlay_toml(&self, text: &str) -> Result<Self> {
        let user: toml::Table = text.parse().context("not valid TOML")?;
        let mut base = toml::Table::try_from(self)?;
        overlay(&mut base, user, "")?;
        toml::Value::Table(base)
            .try_into()
            .context("a setting has the wrong type")
    }

    /// The settings for continuous states. Q-learning runs longer with a target network
    /// refreshed 5x more often: on U-maze data with 20k steps and a 500-step period, V had
    /// not propagated across the maze (Spearman against the shortest-path oracle at rest,
    /// (x, y, 0, 0), 0.81; greedy guidance of the differential-drive robot 2% success);
    /// 60k steps with a 100-step period gave 0.99 and 97% for seed 0.
    pub fn continuous() -> Self {
        let mut cfg = TrainConfig::default();
        cfg.mining.encoder = vec![64, 64];
        cfg.mining.embedding = 16;
        cfg.mining.decoder = vec![64, 64];
        cfg.mining.batch_size = 256;
        cfg.dqn.steps = 60_000;
        cfg.dqn.target_update = 100;
        cfg
    }

    /// The settings for image observations `[C, H, W]` (convolutional networks, chosen by
    /// `arch = auto`), sized for one CPU core: a mining or Q-learning step costs tens of
    /// milliseconds at 32x32 (see `laq bench`), so batches are smaller and runs shorter
    /// than for vector states. Value spreads one transition per target-network copy, so
    /// the copies are frequent: on the navigation data with ground-truth labels, 4000 steps
    /// copying every 500 left V almost flat (Spearman against V* 0.12).
    pub fn images() -> Self {
        let mut cfg = TrainConfig::default();
        cfg.mining.embedding = 16;
        cfg.mining.batch_size = 32;
        cfg.mining.steps = 2000;
        cfg.mining.restarts = 1;
        cfg.dqn.hidden = vec![128];
        cfg.dqn.batch_size = 32;
        cfg.dqn.steps = 10_000;
        cfg.dqn.target_update = 100;
        cfg
    }
}

fn overlay(base: &mut toml::Table, user: toml::Table, at: &str) -> Result<()> {
    for (k, v) in user {
        let path = if at.is_empty() {
            k.clone()
        } else {
            format!("{at}.{k}")
        };
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(u)) => overlay(b, u, &path)?,
            (Some(slot), v) => *slot = v,
            // Optional settings (e.g. `top_actions`) are absent when unset.
            (None, v) if OPTIONAL.contains(&path.as_str()) => {
                base.insert(k, v);
            }
            (None, _) => anyhow::bail!("unknown setting `{path}`"),
        }
    }
    Ok(())
}

/// Settings that may be absent from `laq config default` because they are unset.
const OPTIONAL: [&str; 1] = ["top_actions"];

/// Everything a run produced.
pub struct Trained {
    pub labelled: Labelled,
    /// `Tabular` or `Dqn`: what `auto` resolved to.
    pub q_used: QKind,
    pub table: Option<Table>,
    /// The runtime's model (`value.safetensors`).
    pub model: ValueModel,
    /// The deep Q-network (DQN, BCQ, CQL), as trained.
    pub qnet: Option<QNetwork>,
    pub distill_max_abs_error: Option<f64>,
    pub q_loss: Vec<f32>,
    /// Transitions Q-learning used (fewer than the data with `top_actions`).
    pub q_transitions: usize,
    /// Seconds spent in each stage, in order.
    pub timings: Vec<(String, f64)>,
}

/// Labels the data, learns Q, and builds the exportable value model.
pub fn train(data: &Dataset, cfg: &TrainConfig, device: &Device) -> Result<Trained> {
    train_resumable(data, cfg, device, None)
}

/// [`train`], checkpointed through `ckpt`; a resumed run skips finished stages and ends
/// with the same model as an uninterrupted one.
pub fn train_resumable(
    data: &Dataset,
    cfg: &TrainConfig,
    device: &Device,
    mut ckpt: Option<&mut Checkpointer>,
) -> Result<Trained> {
    let mut timings = vec![];
    let t = Instant::now();
    let labelled = match ckpt.as_deref().map(|c| restore_labels(c.done())) {
        Some(Some(l)) => l?,
        _ => {
            let l = labels::make_resumable(
                cfg.labels,
                data,
                &cfg.mining,
                cfg.seed,
                device,
                ckpt.as_deref_mut(),
            )?;
            if let Some(c) = ckpt.as_deref_mut() {
                let mut st = State::default();
                st.put_u32("labels", l.labels.clone());
                if let Some(loss) = &l.mining_loss {
                    st.put_f32("mining_loss", loss.clone());
                }
                st.set("num_actions", json!(l.num_actions));
                c.finish_stage(LABELS, st)?;
            }
            l
        }
    };
    timings.push((
        format!("labels ({})", cfg.labels.key()),
        t.elapsed().as_secs_f64(),
    ));
    log::info!(
        "labelled {} transitions with {} `{}` labels in {:.1} s",
        labelled.labels.len(),
        labelled.num_actions,
        cfg.labels.key(),
        t.elapsed().as_secs_f64()
    );
    // Q-learning may see a subset: the transitions of the most used labels, relabelled.
    let kept = match cfg.top_actions {
        Some(0) => anyhow::bail!("--top-actions must be at least 1"),
        Some(n) if n < labelled.num_actions => {
            Some(top_labels(&labelled.labels, labelled.num_actions, n))
        }
        _ => None,
    };
    let subset = kept.as_ref().map(|(idx, _)| data.select(idx));
    let (qdata, qlabels, qk) = match (&subset, &kept) {
        (Some(d), Some((_, l))) => (d, l.clone(), cfg.top_actions.unwrap_or(0)),
        _ => (data, labelled.labels.clone(), labelled.num_actions),
    };
    if qdata.is_empty() {
        anyhow::bail!("no transitions left for Q-learning");
    }
    let q_used = match cfg.q {
        QKind::Auto if qlearn::is_tabular(data) => QKind::Tabular,
        QKind::Auto => QKind::Dqn,
        q => q,
    };
    let mut info = model_info(cfg);
    let t = Instant::now();
    let out = match q_used {
        QKind::Tabular => {
            if !data.observations.iter().all(|v| v.fract() == 0.0) {
                anyhow::bail!("`--q tabular` needs integer-valued observations; use `--q dqn`");
            }
            let table = qlearn::tabular(qdata, &qlabels, qk, &cfg.tabular, cfg.seed)?;
            timings.push(("Q-learning (tabular)".into(), t.elapsed().as_secs_f64()));
            let t = Instant::now();
            let (net, err) = qlearn::distill(&table, &cfg.distill, cfg.seed, device)?;
            timings.push((
                "export (fit MLP to table)".into(),
                t.elapsed().as_secs_f64(),
            ));
            info.insert("q".to_string(), "tabular".to_string());
            let model = ValueModel::from_qnetwork(&net, cfg.tabular.gamma, info)?;
            Trained {
                labelled,
                q_used,
                table: Some(table),
                model,
                qnet: None,
                distill_max_abs_error: Some(err),
                q_loss: net.loss_curve,
                q_transitions: qdata.len(),
                timings,
            }
        }
        variant => {
            let name = match variant {
                QKind::Bcq => "bcq",
                QKind::Cql => "cql",
                _ => "dqn",
            };
            let net = qlearn::dqn_resumable(
                qdata, &qlabels, qk, &cfg.dqn, variant, None, cfg.seed, device, ckpt,
            )?;
            timings.push((format!("Q-learning ({name})"), t.elapsed().as_secs_f64()));
            info.insert("q".to_string(), name.to_string());
            let (model, err) = if net.imitation.is_some() {
                // BCQ's V is a max over the actions its imitation network allows, which
                // the format's max-Q head cannot express: export V itself (one output),
                // fitted on the data's states by a network of the same kind.
                let t = Instant::now();
                let step = (qdata.len() / 20000).max(1);
                let (fitted, err, what) = if net.net.is_conv() {
                    let idx: Vec<usize> = (0..qdata.len()).step_by(step).collect();
                    let channels = &cfg.dqn.conv.channels;
                    let (f, e) = qlearn::fit_image(
                        &net,
                        qdata,
                        &idx,
                        channels,
                        &cfg.distill,
                        cfg.seed,
                        device,
                    )?;
                    (f, e, "export (fit conv net to V)")
                } else {
                    let d = qdata.obs_dim();
                    let states: Vec<f32> = (0..qdata.len())
                        .step_by(step)
                        .flat_map(|i| qdata.obs_row(i).into_owned())
                        .collect();
                    let v = net.values(&states, device)?;
                    let (f, e) = qlearn::fit(&states, d, &v, 1, &cfg.distill, cfg.seed, device)?;
                    (f, e, "export (fit MLP to V)")
                };
                timings.push((what.into(), t.elapsed().as_secs_f64()));
                (
                    ValueModel::from_qnetwork(&fitted, cfg.dqn.gamma, info)?,
                    Some(err),
                )
            } else {
                (ValueModel::from_qnetwork(&net, cfg.dqn.gamma, info)?, None)
            };
            Trained {
                labelled,
                q_used: variant,
                table: None,
                model,
                q_loss: net.loss_curve.clone(),
                qnet: Some(net),
                distill_max_abs_error: err,
                q_transitions: qdata.len(),
                timings,
            }
        }
    };
    Ok(out)
}

/// The free-text metadata a trained model carries (the Q-learning variant is added once
/// known), so that the same settings give the same file wherever the model is built.
pub fn model_info(cfg: &TrainConfig) -> BTreeMap<String, String> {
    let mut info = BTreeMap::new();
    info.insert("labels".to_string(), cfg.labels.key().to_string());
    info.insert(
        "trainer".to_string(),
        format!("laq {}", env!("CARGO_PKG_VERSION")),
    );
    info.insert("seed".to_string(), cfg.seed.to_string());
    info
}

/// The runtime's model file in a run directory.
pub const VALUE_FILE: &str = "value.safetensors";

fn q_name(q: QKind) -> &'static str {
    match q {
        QKind::Tabular => "tabular",
        QKind::Bcq => "bcq",
        QKind::Cql => "cql",
        _ => "dqn",
    }
}

/// The checkpoint stage name of labelling.
const LABELS: &str = "labels";

/// The labels a finished labelling stage left in a checkpoint, if it finished.
fn restore_labels(done: &State) -> Option<Result<Labelled>> {
    done.meta.get("done")?.get(LABELS)?;
    Some((|| {
        let d: &Value = done.get("done")?;
        let num_actions = d[LABELS]["num_actions"]
            .as_u64()
            .context("checkpoint: number of labels missing")? as usize;
        Ok(Labelled {
            labels: done.u32("done.labels")?.to_vec(),
            num_actions,
            mining_loss: done.f32("done.mining_loss").ok().map(<[f32]>::to_vec),
        })
    })())
}

/// Indices of the transitions whose label is among the `n` most used (ties: lower label
/// first), and their labels renumbered 0..n by decreasing use.
pub fn top_labels(labels: &[u32], k: usize, n: usize) -> (Vec<usize>, Vec<u32>) {
    let mut usage = vec![0usize; k];
    for &l in labels {
        usage[l as usize] += 1;
    }
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| usage[b].cmp(&usage[a]).then(a.cmp(&b)));
    let mut new = vec![u32::MAX; k];
    for (rank, &l) in order.iter().take(n).enumerate() {
        new[l] = rank as u32;
    }
    labels
        .iter()
        .enumerate()
        .filter(|(_, &l)| new[l as usize] != u32::MAX)
        .map(|(i, &l)| (i, new[l as usize]))
        .unzip()
}

/// Metrics that need no reference: label usage and, when the data carries discrete
/// ground-truth actions and discrete states, purity.
pub fn metrics(data: &Dataset, cfg: &TrainConfig, tr: &Trained) -> Value {
    let mut usage = vec![0usize; tr.labelled.num_actions];
    for &l in &tr.labelled.labels {
        usage[l as usize] += 1;
    }
    let mut m = json!({
        "labels": cfg.labels.key(),
        "q": q_name(tr.q_used),
        "transitions": data.len(),
        "obs_shape": data.obs_shape,
        "num_actions": tr.labelled.num_actions,
        "q_transitions": tr.q_transitions,
        "top_actions": cfg.top_actions,
        "label_usage": usage,
        "mining_loss": tr.labelled.mining_loss,
        "q_loss": tr.q_loss,
        "timings_s": tr.timings.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
    });
    if let Some(e) = tr.distill_max_abs_error {
        m["export_max_abs_error"] = json!(e);
    }
    if let Some(Actions::Discrete(a)) = &data.actions {
        m["global_purity"] = json!(crate::eval::global_purity(&tr.labelled.labels, a));
        if let Some(table) = &tr.table {
            let states: Vec<usize> = (0..data.len())
                .map(|i| table.index.get(&data.obs_row(i)).unwrap_or(0))
                .collect();
            m["purity"] = json!(crate::eval::state_purity(&states, &tr.labelled.labels, a));
        }
    }
    m
}

/// Writes the run directory: `value.safetensors`, `labels.npy`, `metrics.json`,
/// `config.toml`, `run.json` (data, fingerprint, versions), `summary.txt`, the figures
/// (PNG) and `report.md`. Every file is written atomically. An image model is a
/// version 2 `value.safetensors` (convolutions before the linear layers).
pub fn write_run(
    dir: &Path,
    data: &Dataset,
    cfg: &TrainConfig,
    tr: &Trained,
    source: &str,
) -> Result<Value> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    tr.model.save(&dir.join(VALUE_FILE), false)?;
    let format = if tr.model.conv.is_some() {
        "laq-value 2"
    } else {
        "laq-value 1"
    };
    let labels: Vec<u8> = tr
        .labelled
        .labels
        .iter()
        .flat_map(|l| l.to_le_bytes())
        .collect();
    let arr = crate::data::RawArray {
        dtype: crate::data::DType::U32,
        shape: vec![labels.len() / 4],
        bytes: labels,
    };
    crate::io::write_atomic(&dir.join("labels.npy"), &crate::data::npy_bytes(&arr))?;
    let m = metrics(data, cfg, tr);
    crate::io::write_text(
        &dir.join("metrics.json"),
        &serde_json::to_string_pretty(&m)?,
    )?;
    crate::io::write_text(&dir.join("config.toml"), &cfg.to_toml()?)?;
    // Enough to repeat the run from this directory alone (`laq train --repeat DIR`).
    let run = json!({
        "data": source,
        "data_fingerprint": crate::checkpoint::fingerprint(data),
        "transitions": data.len(),
        "seed": cfg.seed,
        "laq_version": env!("CARGO_PKG_VERSION"),
        "model_format": format,
        "command": format!("laq train --config config.toml --data {source} --out DIR"),
    });
    crate::io::write_text(&dir.join("run.json"), &serde_json::to_string_pretty(&run)?)?;
    let figures = crate::figures::write(dir, data, tr)?;
    crate::io::write_text(
        &dir.join("report.md"),
        &crate::figures::report(data, cfg, tr, &m, &figures, source)?,
    )?;
    crate::io::write_text(
        &dir.join("summary.txt"),
        &summary(data, cfg, tr, &m, source),
    )?;
    Ok(m)
}

fn summary(data: &Dataset, cfg: &TrainConfig, tr: &Trained, m: &Value, source: &str) -> String {
    let mut s = String::new();
    s += &format!("LAQ run on {source}\n");
    s += &format!("  transitions        {}\n", data.len());
    s += &format!("  observation shape  {:?}\n", data.obs_shape);
    s += &format!(
        "  labels             {} ({} actions)\n",
        cfg.labels.key(),
        tr.labelled.num_actions
    );
    s += &format!("  label usage        {}\n", m["label_usage"]);
    s += &format!("  Q-learning         {}\n", m["q"].as_str().unwrap_or("?"));
    if let Some(p) = m.get("purity") {
        s += &format!(
            "  purity (state)     {:.4}\n",
            p.as_f64().unwrap_or(f64::NAN)
        );
    }
    if let Some(e) = tr.distill_max_abs_error {
        s += &format!(
            "  export error       {e:.2e} (largest |fitted - learned| on the fitted states)\n"
        );
    }
    let model = &tr.model;
    let conv = match &model.conv {
        Some(c) => format!(
            "{} convolutions on {:?} images, then ",
            c.layers.len(),
            c.input_shape
        ),
        None => String::new(),
    };
    s += &format!(
        "  model              {VALUE_FILE}: {} -> {} ({conv}{} layers, head {})\n",
        model.input_dim(),
        model.num_outputs(),
        model.layers.len(),
        model.head.name()
    );
    for (k, v) in &tr.timings {
        s += &format!("  time {k:<28} {v:.2} s\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kill right after any checkpoint (mid-screening, mid-mining, mid-Q-learning, BCQ
    /// included) and a resume give the same model bytes as an uninterrupted run.
    #[test]
    fn resumed_runs_end_with_the_uninterrupted_model() {
        use crate::checkpoint::{Checkpointer, Interrupted};
        let device = Device::Cpu;
        let data = crate::envs::maze2d::Maze::named("umaze")
            .unwrap()
            .generate(3000, 500, 3);
        let mut cfg = TrainConfig::continuous();
        cfg.q = QKind::Bcq;
        cfg.mining.steps = 200;
        cfg.mining.batch_size = 64;
        cfg.dqn.steps = 300;
        cfg.dqn.target_update = 50;
        cfg.distill.steps = 50;
        let bytes = |t: &Trained| t.model.to_bytes(false).unwrap();
        let reference = bytes(&train(&data, &cfg, &device).unwrap());
        let id = |cfg: &TrainConfig| {
            let mut m = serde_json::Map::new();
            m.insert("config".into(), serde_json::to_value(cfg).unwrap());
            m
        };
        // Screening is 60 steps per restart (0.3 of 200), so progress 70 lies in the second
        // restart and 150 in the main phase.
        for (stage, step) in [("mining", 70), ("mining", 150), ("q-learning", 120)] {
            let dir = tempfile::tempdir().unwrap();
            let every = std::time::Duration::from_secs(3600);
            let mut c = Checkpointer::new(dir.path(), every, id(&cfg));
            c.interrupt_at = Some((stage.to_string(), step));
            let e = train_resumable(&data, &cfg, &device, Some(&mut c))
                .err()
                .expect("interrupted");
            assert!(e.downcast_ref::<Interrupted>().is_some(), "{e:#}");
            let mut c = Checkpointer::resume(dir.path(), every, id(&cfg)).unwrap();
            let resumed = train_resumable(&data, &cfg, &device, Some(&mut c)).unwrap();
            assert!(bytes(&resumed) == reference, "{stage} {step}");
            // Another run's checkpoint is refused.
            let mut other = cfg.clone();
            other.seed = 9;
            assert!(Checkpointer::resume(dir.path(), every, id(&other)).is_err());
        }
    }

    /// The convolutional path (image mining with screening restarts, then a convolutional
    /// DQN) resumes exactly too, and its run directory holds the runtime's image model,
    /// which `laq predict` scores like the trained Q-network.
    #[test]
    fn image_runs_resume_exactly_and_write_a_runtime_model() {
        use crate::checkpoint::{Checkpointer, Interrupted};
        let device = Device::Cpu;
        let data = crate::conv::moving_squares(300, 32, true, 2);
        let mut cfg = TrainConfig::for_data(&data);
        assert_eq!(cfg.q, QKind::Auto);
        cfg.mining.latent_actions = 3;
        cfg.mining.steps = 40;
        cfg.mining.restarts = 2;
        cfg.mining.conv.channels = vec![4, 8];
        cfg.dqn.conv.channels = vec![4, 8];
        cfg.dqn.hidden = vec![16];
        cfg.dqn.steps = 40;
        cfg.dqn.target_update = 10;
        let info = BTreeMap::new();
        let bytes = |t: &Trained| {
            let mut b = t.qnet.as_ref().unwrap().to_bytes(0.99, &info).unwrap();
            b.extend(t.model.to_bytes(false).unwrap());
            b
        };
        let whole = train(&data, &cfg, &device).unwrap();
        assert_eq!(whole.q_used, QKind::Dqn);
        let reference = bytes(&whole);
        let id = |cfg: &TrainConfig| {
            let mut m = serde_json::Map::new();
            m.insert("config".into(), serde_json::to_value(cfg).unwrap());
            m
        };
        // Screening is 12 steps per restart, so 18 lies in the second restart.
        for (stage, step) in [("mining", 18), ("mining", 30), ("q-learning", 25)] {
            let dir = tempfile::tempdir().unwrap();
            let every = std::time::Duration::from_secs(3600);
            let mut c = Checkpointer::new(dir.path(), every, id(&cfg));
            c.interrupt_at = Some((stage.to_string(), step));
            let e = train_resumable(&data, &cfg, &device, Some(&mut c))
                .err()
                .expect("interrupted");
            assert!(e.downcast_ref::<Interrupted>().is_some(), "{e:#}");
            let mut c = Checkpointer::resume(dir.path(), every, id(&cfg)).unwrap();
            let resumed = train_resumable(&data, &cfg, &device, Some(&mut c)).unwrap();
            assert_eq!(
                resumed.labelled.labels, whole.labelled.labels,
                "{stage} {step}"
            );
            assert!(bytes(&resumed) == reference, "{stage} {step}");
        }
        let dir = tempfile::tempdir().unwrap();
        let m = write_run(dir.path(), &data, &cfg, &whole, "squares.npz").unwrap();
        assert_eq!(m["obs_shape"], json!([3, 32, 32]));
        let run: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("run.json")).unwrap())
                .unwrap();
        assert_eq!(run["model_format"], "laq-value 2");
        let summary = std::fs::read_to_string(dir.path().join("summary.txt")).unwrap();
        assert!(
            summary.contains("2 convolutions on [3, 32, 32] images"),
            "{summary}"
        );
        let from_runtime = crate::predict::values(&dir.path().join(VALUE_FILE), &data).unwrap();
        let all: Vec<usize> = (0..data.len()).collect();
        let trained = whole
            .qnet
            .as_ref()
            .unwrap()
            .values_of(&data, &all, &device)
            .unwrap();
        for (i, (a, b)) in from_runtime.iter().zip(&trained).enumerate() {
            assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{i}: {a} vs {b}");
        }
        // A trainer-only Q-network file is refused with a pointer to the runtime's file.
        let qnet = dir.path().join("qnet.safetensors");
        whole
            .qnet
            .as_ref()
            .unwrap()
            .save(&qnet, 0.99, &info)
            .unwrap();
        let e = crate::predict::values(&qnet, &data)
            .unwrap_err()
            .to_string();
        assert!(e.contains("value.safetensors"), "{e}");
    }

    #[test]
    fn settings_round_trip_through_toml_and_reject_typos() {
        let cfg = TrainConfig::continuous();
        let text = cfg.to_toml().unwrap();
        let back = TrainConfig::default().overlay_toml(&text).unwrap();
        assert_eq!(back.to_toml().unwrap(), text);
        let part = TrainConfig::default()
            .overlay_toml("seed = 7\ntop_actions = 4\n[dqn]\nsteps = 10\n")
            .unwrap();
        assert_eq!(
            (part.seed, part.top_actions, part.dqn.steps),
            (7, Some(4), 10)
        );
        assert_eq!(part.mining.steps, TrainConfig::default().mining.steps);
        let e = TrainConfig::default()
            .overlay_toml("[dqn]\nstep = 10\n")
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("unknown setting `dqn.step`"),
            "{e:#}"
        );
        let e = TrainConfig::default()
            .overlay_toml("seed = \"x\"")
            .unwrap_err();
        assert!(format!("{e:#}").contains("wrong type"), "{e:#}");
    }

    #[test]
    fn top_labels_keep_the_most_used() {
        let labels = [2, 0, 2, 1, 2, 0, 3];
        let (idx, new) = top_labels(&labels, 4, 2);
        assert_eq!(idx, vec![0, 1, 2, 4, 5]);
        assert_eq!(new, vec![0, 1, 0, 0, 1]);
    }
}
