//! `laq reproduce maze2d`: the Maze2D value study (label sources x Q-learning x seeds),
//! then controller guidance and reward shaping with the LAQ model.

use crate::export::ValueModel;
use crate::run::config::TrainConfig;
use crate::stages::labels::{self, LabelSource};
use crate::stages::qlearn::{self, QKind};
use crate::util::stats;
use anyhow::{Context, Result};
use candle_core::Device;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct MazeStudy {
    pub layout: String,
    pub steps: usize,
    pub episode_len: usize,
    pub seeds: Vec<u64>,
    pub sources: Vec<LabelSource>,
    pub qs: Vec<QKind>,
    pub train: TrainConfig,
    pub reference: crate::rl::td3bc::Td3BcConfig,
    /// At most this many dataset states are scored at each checkpoint.
    pub probes: usize,
    /// Zero-shot controller guidance of the differential-drive robot with the first
    /// seed's LAQ and single-action DQN models (`None`: skipped).
    pub guide: Option<crate::studies::guidance::GuideConfig>,
    /// Online SAC from the sparse reward against SAC with the first seed's LAQ V as a
    /// potential, per body (empty: skipped).
    pub shaping: Vec<(
        crate::studies::shaping::Body,
        crate::studies::shaping::ShapingConfig,
    )>,
}

impl Default for MazeStudy {
    fn default() -> Self {
        // The continuous-state settings with a fixed schedule (60k steps, a target copy
        // every 1000) for every run of the value study, so that sources and Q-learning
        // variants compare at equal cost; the per-seed guidance models get `laq train`'s
        // settings for the data, its schedule included.
        let train = TrainConfig::continuous();
        MazeStudy {
            layout: "umaze".into(),
            steps: 200_000,
            episode_len: 1000,
            seeds: vec![0, 1, 2],
            sources: vec![
                LabelSource::Latent,
                LabelSource::Single,
                LabelSource::Cluster,
                LabelSource::ClusterDiff,
            ],
            qs: vec![QKind::Dqn, QKind::Bcq],
            train,
            reference: Default::default(),
            probes: 5000,
            guide: Some(Default::default()),
            shaping: [
                crate::studies::shaping::Body::PointMass,
                crate::studies::shaping::Body::Unicycle,
            ]
            .into_iter()
            .map(|b| (b, crate::studies::shaping::ShapingConfig::for_body(b)))
            .collect(),
        }
    }
}

/// The paper's Maze2D Spearman correlations (Tables 1 and 2) for DQN and BCQ.
fn paper_maze(source: LabelSource, q: QKind) -> Option<f64> {
    let (dqn, bcq) = match source {
        LabelSource::Latent => (0.844, 0.927),
        LabelSource::Single => (0.673, 0.710),
        LabelSource::Cluster => (0.613, 0.876),
        LabelSource::ClusterDiff => (0.490, 0.719),
        _ => return None,
    };
    match q {
        QKind::Dqn => Some(dqn),
        QKind::Bcq => Some(bcq),
        _ => None,
    }
}

/// Runs the Maze2D value study: every label source and Q variant over several seeds,
/// Spearman against V learned with ground-truth actions (TD3+BC) and against the
/// shortest-path oracle, at the last checkpoint (no oracle involved) and at the 95th
/// percentile over checkpoints (the paper's oracle model selection).
pub fn maze2d(out: &Path, study: &MazeStudy, device: &Device) -> Result<(Value, String)> {
    let total = Instant::now();
    let maze = crate::envs::maze2d::Maze::named(&study.layout)?;
    let data = maze.generate(study.steps, study.episode_len, 0);
    data.save(&out.join("maze.npz"))?;
    let stride = (data.len() / study.probes.max(1)).max(1);
    let probe_idx: Vec<usize> = (0..data.len()).step_by(stride).collect();
    let probe: Vec<f32> = probe_idx
        .iter()
        .flat_map(|&i| data.obs(i).to_vec())
        .collect();
    let dist = maze.cell_distances(maze.target);
    let oracle: Vec<f64> = probe_idx
        .iter()
        .map(|&i| -(maze.oracle_distance(data.obs(i)[0], data.obs(i)[1], &dist) as f64))
        .collect();
    // The value study's runs, side by side as many at once as the cores allow: the TD3+BC
    // reference and one run per (Q variant, seed, label source). Each label source is
    // labelled once per seed, by the first run that needs it; the Q variants come one
    // after the other in the job list, so the second finds its labels made. Figures are
    // gathered in a fixed order, so they do not depend on how many ran at once.
    enum Job {
        Reference,
        /// Indices into the study's seeds and sources.
        Run {
            q: QKind,
            seed: usize,
            source: usize,
        },
    }
    enum Done {
        Reference(Vec<f64>, f64),
        Run {
            /// V at every checkpoint.
            checkpoints: Vec<Vec<f64>>,
            /// The DQN value model, exported as `laq train` would write it.
            exported: Option<Vec<u8>>,
            secs: f64,
        },
    }
    let mut job_list = vec![Job::Reference];
    for &q in &study.qs {
        for seed in 0..study.seeds.len() {
            for source in 0..study.sources.len() {
                job_list.push(Job::Run { q, seed, source });
            }
        }
    }
    let made: Vec<std::sync::Mutex<Option<std::sync::Arc<labels::Labelled>>>> = study
        .seeds
        .iter()
        .flat_map(|_| study.sources.iter().map(|_| Default::default()))
        .collect();
    let labels_of = |seed_i: usize, source_i: usize| -> Result<std::sync::Arc<labels::Labelled>> {
        let slot = &made[seed_i * study.sources.len() + source_i];
        let mut slot = slot
            .lock()
            .map_err(|_| anyhow::anyhow!("a run making labels failed"))?;
        if let Some(l) = slot.as_ref() {
            return Ok(l.clone());
        }
        let l = std::sync::Arc::new(labels::make(
            study.sources[source_i],
            &data,
            &study.train.mining,
            study.seeds[seed_i],
            device,
            None,
        )?);
        *slot = Some(l.clone());
        Ok(l)
    };
    let run_job = |job: &Job| -> Result<Done> {
        let t = Instant::now();
        let (q, seed, source) = match *job {
            Job::Reference => {
                let reference = crate::rl::td3bc::train(&data, &study.reference, 0, device)?;
                let gt = reference
                    .values(&probe, device)?
                    .into_iter()
                    .map(f64::from)
                    .collect();
                return Ok(Done::Reference(gt, t.elapsed().as_secs_f64()));
            }
            Job::Run { q, seed, source } => (q, seed, source),
        };
        // The job's bars (its labels' mining, where it is the first to need them, and its
        // Q-learning) name it.
        let label = format!(
            "{}/{} seed {}",
            study.sources[source].key(),
            q.name(),
            study.seeds[seed]
        );
        let l = crate::util::progress::labelled(&label, || labels_of(seed, source))?;
        let (seed, source) = (study.seeds[seed], study.sources[source]);
        let cfg = TrainConfig {
            seed,
            ..study.train.clone()
        };
        let inputs = qlearn::DqnInputs {
            data: &data,
            labels: &l.labels,
            num_actions: l.num_actions,
            variant: q,
            probe: Some(&probe),
            bound: None,
        };
        let net = crate::util::progress::labelled(&label, || {
            qlearn::dqn(&inputs, &cfg.dqn, seed, device, None)
        })?;
        let checkpoints = net
            .checkpoints
            .iter()
            .map(|(_, v)| v.iter().map(|&x| x as f64).collect())
            .collect();
        let wanted = match source {
            LabelSource::Latent => true,
            LabelSource::Single => seed == study.seeds[0],
            _ => false,
        };
        let exported = if q == QKind::Dqn && wanted {
            let mut info = crate::run::train::model_info(&TrainConfig {
                labels: source,
                ..cfg.clone()
            });
            info.insert("q".into(), QKind::Dqn.name().into());
            let model = ValueModel::from_qnetwork(&net, cfg.dqn.gamma, info)?;
            Some(model.to_bytes(false)?)
        } else {
            None
        };
        Ok(Done::Run {
            checkpoints,
            exported,
            secs: t.elapsed().as_secs_f64(),
        })
    };
    let jobs = crate::util::parallel::jobs(device);
    let t = Instant::now();
    let mut done = crate::util::parallel::map(&job_list, jobs, run_job)?.into_iter();
    let Some(Done::Reference(gt, secs)) = done.next() else {
        anyhow::bail!("the value study's first run is its reference");
    };
    let mut timings = vec![("reference (TD3+BC)".to_string(), secs)];
    let gt_vs_oracle = stats::spearman(&gt, &oracle);
    // (source, q) -> per seed: (gt last, oracle last, gt p95, oracle p95)
    let mut rows: std::collections::BTreeMap<String, Vec<[f64; 4]>> = Default::default();
    // The first seed's DQN value models.
    let mut exported: std::collections::BTreeMap<&str, Vec<u8>> = Default::default();
    // The LAQ (latent/dqn) model of every seed, for guidance per seed.
    let mut laq_by_seed: Vec<(u64, Vec<u8>)> = vec![];
    for (job, d) in job_list.iter().skip(1).zip(done) {
        let (
            Job::Run { q, seed, source },
            Done::Run {
                checkpoints,
                exported: bytes,
                secs,
            },
        ) = (job, d)
        else {
            continue;
        };
        let (seed, source) = (study.seeds[*seed], study.sources[*source]);
        let (mut sg, mut so) = (vec![], vec![]);
        for v in &checkpoints {
            sg.push(stats::spearman(v, &gt));
            so.push(stats::spearman(v, &oracle));
        }
        let last = |s: &[f64]| s.last().copied().unwrap_or(f64::NAN);
        rows.entry(format!("{}/{}", source.key(), q.name()))
            .or_default()
            .push([
                last(&sg),
                last(&so),
                stats::percentile(&sg, 95.0),
                stats::percentile(&so, 95.0),
            ]);
        if let Some(bytes) = bytes {
            if source == LabelSource::Latent {
                laq_by_seed.push((seed, bytes.clone()));
            }
            if seed == study.seeds[0] {
                exported.insert(source.key(), bytes);
            }
        }
        timings.push((format!("seed {seed} {}/{}", source.key(), q.name()), secs));
    }
    timings.push((
        format!("value study ({jobs} runs at a time)"),
        t.elapsed().as_secs_f64(),
    ));
    for (key, bytes) in &exported {
        let dir = out.join(format!("model_{key}"));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        crate::util::io::write_atomic(&dir.join("value.safetensors"), bytes)?;
    }
    let guidance = match (&study.guide, exported.get("latent")) {
        (Some(g), Some(laq)) => {
            let t = Instant::now();
            let r = crate::studies::guidance::guidance_study(
                &maze,
                laq,
                exported.get("single").map(Vec::as_slice),
                g,
                0,
            )?;
            // Per seed: the model `laq train` exports (on these continuous states, the
            // fitted mean of an ensemble of Q-functions), and the study's own first
            // Q-function beside it.
            let guide_seed = |(seed, bytes): &(u64, Vec<u8>)| -> Result<Value> {
                let laq_of = |bytes: &[u8]| -> Result<(f64, f64)> {
                    let r = crate::studies::guidance::guidance_study(&maze, bytes, None, g, 0)?;
                    let s = r.summary(crate::studies::guidance::Policy::LaqValue);
                    Ok((
                        s.map_or(f64::NAN, |p| p.success),
                        s.map_or(f64::NAN, |p| p.spl),
                    ))
                };
                // `laq train`'s own settings for these data (its discount and Q-learning
                // schedule), not the value study's fixed ones.
                let cfg = TrainConfig {
                    seed: *seed,
                    labels: LabelSource::Latent,
                    q: QKind::Dqn,
                    ..TrainConfig::for_data(&data)
                };
                let trained = crate::run::train::train(&data, &cfg, device, None)?;
                let (success, spl) = laq_of(&trained.model.to_bytes(false)?)?;
                // The exported V against the references, beside the study's last and
                // 95th-percentile (oracle-selected) checkpoints of its first Q-function.
                let v: Vec<f64> = trained
                    .model
                    .values_candle(&probe, device)?
                    .iter()
                    .map(|&x| x as f64)
                    .collect();
                let (raw_success, raw_spl) = laq_of(bytes)?;
                Ok(json!({
                    "seed": seed,
                    "success": success,
                    "spl": spl,
                    "verdict": trained.trust.verdict,
                    "first_q_success": raw_success,
                    "first_q_spl": raw_spl,
                    "selected_spearman_gt": stats::spearman(&v, &gt),
                    "selected_spearman_oracle": stats::spearman(&v, &oracle),
                }))
            };
            let per_seed = crate::util::parallel::map(&laq_by_seed, jobs, guide_seed)?;
            timings.push(("guidance".into(), t.elapsed().as_secs_f64()));
            Some((r, per_seed))
        }
        _ => None,
    };
    let mut shaping = vec![];
    if let Some(laq) = exported.get("latent") {
        if !study.shaping.is_empty() && study.layout != "umaze" {
            log::warn!("the shaping study is set up for the U-maze only; skipped");
        } else {
            for (body, cfg) in &study.shaping {
                let t = Instant::now();
                let bar =
                    crate::util::progress::bar(cfg.total_steps(), &format!("SAC, {}", body.name()));
                let r = crate::studies::shaping::shaping_study(&maze, laq, *body, cfg, &bar)?;
                bar.finish_and_clear();
                crate::studies::shaping::write_figures(out, &maze, laq, &r)?;
                timings.push((
                    format!("shaping ({})", body.name()),
                    t.elapsed().as_secs_f64(),
                ));
                shaping.push(r);
            }
        }
    }
    timings.push(("total".into(), total.elapsed().as_secs_f64()));

    let mean = |v: &[[f64; 4]], j: usize| v.iter().map(|r| r[j]).sum::<f64>() / v.len() as f64;
    let mut methods = serde_json::Map::new();
    let mut report = format!(
        "Maze2D {} ({} transitions), {} seed(s); Spearman over {} dataset states\n\
         TD3+BC reference (ground-truth actions) vs oracle: {gt_vs_oracle:.3}\n\n",
        study.layout,
        data.len(),
        study.seeds.len(),
        probe.len() / 4
    );
    report += "method                 vs GT V: last   p95   paper  | vs oracle: last   p95\n";
    for &source in &study.sources {
        for &q in &study.qs {
            let key = format!("{}/{}", source.key(), q.name());
            let Some(r) = rows.get(&key) else { continue };
            let paper = paper_maze(source, q)
                .map(|v| format!("{v:.3}"))
                .unwrap_or_else(|| "  -  ".into());
            report += &format!(
                "{key:<22} {:>13.3} {:>6.3}  {paper}  | {:>15.3} {:>6.3}\n",
                mean(r, 0),
                mean(r, 2),
                mean(r, 1),
                mean(r, 3)
            );
            methods.insert(
                key,
                json!({
                    "spearman_gt": mean(r, 0), "spearman_oracle": mean(r, 1),
                    "spearman_gt_p95": mean(r, 2), "spearman_oracle_p95": mean(r, 3),
                    "per_seed": r,
                }),
            );
        }
    }
    report += "\nlast: the final checkpoint (no oracle involved); p95: 95th percentile over checkpoints,\n";
    report += "the paper's model selection, which peeks at the reference. Paper column: vs GT-action V.\n";
    let mut guidance_json = Value::Null;
    if let Some((r, per_seed)) = &guidance {
        use crate::studies::guidance::Policy;
        report += &format!(
            "\nZero-shot guidance of a differential-drive robot ({} random starts, primitives of {} \
             units, V queried at (x, y, 0, 0); paper: no counterpart in Maze2D)\n",
            r.config.starts, r.config.drive_length
        );
        report += "policy               success    SPL   decisions\n";
        let mut per = serde_json::Map::new();
        for p in &r.policies {
            report += &format!(
                "{:<20} {:>7.2} {:>6.3} {:>10.1}\n",
                p.policy.key(),
                p.success,
                p.spl,
                p.mean_decisions
            );
            per.insert(p.policy.key().into(), serde_json::to_value(p)?);
        }
        let laq = r.summary(Policy::LaqValue);
        report +=
            "laq_value per seed, the model `laq train` exports (the study's first Q-function); \
                   its V against GT V, chosen without an oracle (the oracle's p95 choice of the \
                   first Q-function):\n";
        let p95 = rows.get("latent/dqn");
        for (i, p) in per_seed.iter().enumerate() {
            let oracle_choice = p95.and_then(|r| r.get(i)).map_or(f64::NAN, |r| r[2]);
            report += &format!(
                "  seed {}: success {:.2}, SPL {:.3}, verdict {} ({:.2}, {:.3}); V vs GT V {:.3} \
                 ({oracle_choice:.3})\n",
                p["seed"],
                p["success"].as_f64().unwrap_or(f64::NAN),
                p["spl"].as_f64().unwrap_or(f64::NAN),
                p["verdict"].as_str().unwrap_or("?"),
                p["first_q_success"].as_f64().unwrap_or(f64::NAN),
                p["first_q_spl"].as_f64().unwrap_or(f64::NAN),
                p["selected_spearman_gt"].as_f64().unwrap_or(f64::NAN),
            );
        }
        guidance_json = json!({
            "success": laq.map(|p| p.success),
            "spl": laq.map(|p| p.spl),
            "per_seed": per_seed,
            "policies": per,
            "starts": r.config.starts,
            "drive_length": r.config.drive_length,
        });
        crate::util::io::write_text(&out.join("guidance.json"), &serde_json::to_string(r)?)?;
    }
    let mut shaping_json = serde_json::Map::new();
    if !shaping.is_empty() {
        report += "\nDensified RL: SAC with 5 x sparse reward, alone (sparse) or plus gamma V(s') - V(s) \
                   of the LAQ model (shaped); success of the deterministic policy from fixed starts,\n\
                   mean (s.e.) over seeds. The robot is another body: V is queried at (x, y, 0, 0).\n";
        report += "body        reward   final        AUC  steps to 0.8  (of)   seeds\n";
        for r in &shaping {
            let mut per = serde_json::Map::new();
            for c in &r.conditions {
                report += &format!(
                    "{:<11} {:<8} {:.2} ({:.2})  {:.3}  {:>12}  {:>6} {:>5}\n",
                    r.body.name(),
                    c.condition.name(),
                    c.final_mean,
                    c.final_stderr,
                    c.auc,
                    c.steps_to_threshold
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "never".into()),
                    r.config.steps,
                    r.config.seeds
                );
                per.insert(
                    c.condition.name().into(),
                    json!({
                        "final_success": c.final_mean, "final_stderr": c.final_stderr,
                        "auc": c.auc, "steps_to_0.8": c.steps_to_threshold,
                        "mean": c.mean, "stderr": c.stderr,
                    }),
                );
            }
            per.insert("eval_steps".into(), json!(r.eval_steps));
            per.insert("seeds".into(), json!(r.config.seeds));
            per.insert("ms_per_update".into(), json!(r.ms_per_update));
            shaping_json.insert(r.body.name().into(), Value::Object(per));
        }
        report += "AUC: mean success over all evaluations. Figures: success_<body>.png, value_<body>.png.\n";
        crate::util::io::write_text(&out.join("shaping.json"), &serde_json::to_string(&shaping)?)?;
    }
    report += "\nTimes (s): ";
    report += &timings
        .iter()
        .map(|(k, v)| format!("{k} {v:.1}"))
        .collect::<Vec<_>>()
        .join(", ");
    report += "\n";
    let metrics = json!({
        "methods": methods,
        "reference_vs_oracle": gt_vs_oracle,
        "layout": study.layout, "transitions": data.len(), "seeds": study.seeds,
        "probe_states": probe.len() / 4,
        "guidance": guidance_json,
        "shaping": shaping_json,
        "timings_s": super::timings_json(&timings),
    });
    super::write_study(out, metrics, report)
}
