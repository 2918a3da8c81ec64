//! `laq reproduce gridworld`: the paper's grid-world study, computed end to end.

use crate::data::Dataset;
use crate::envs::gridworld::{GridWorld, GAMMA};
use crate::eval;
use crate::export::ValueModel;
use crate::labels::{self, LabelSource};
use crate::qlearn::{self, QKind, Table};
use crate::train::{self, TrainConfig};
use anyhow::{Context, Result};
use candle_core::Device;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

/// Settings of the study.
#[derive(Clone, Debug)]
pub struct GridStudy {
    pub episodes: usize,
    pub seed: u64,
    /// Stickiness levels of the stochastic study beyond 0, which is the main study's data
    /// (empty: skip the study).
    pub sticky: Vec<f64>,
    pub train: TrainConfig,
}

impl Default for GridStudy {
    fn default() -> Self {
        let train = TrainConfig {
            q: QKind::Tabular,
            ..Default::default()
        };
        GridStudy {
            episodes: 20000,
            seed: 0,
            sticky: vec![0.25, 0.5, 0.75, 0.95],
            train,
        }
    }
}

/// The paper's numbers for the grid world: Table 1 (Spearman) and Table S1 (purity).
pub fn paper_numbers(source: LabelSource) -> (Option<f64>, Option<f64>) {
    match source {
        LabelSource::Latent => (Some(0.985), Some(0.998)),
        LabelSource::Single => (Some(0.093), Some(0.827)),
        LabelSource::Gt => (Some(1.000), None),
        LabelSource::Cluster => (Some(0.430), Some(0.851)),
        LabelSource::ClusterDiff => (Some(1.000), Some(1.000)),
        LabelSource::GtRefined4 | LabelSource::Impure => (None, None),
    }
}

/// Figure 1's qualitative result for the sources it shows.
fn paper_behaviour(source: LabelSource) -> &'static str {
    match source {
        LabelSource::Gt | LabelSource::GtRefined4 => "optimal",
        LabelSource::Single | LabelSource::Impure => "sub-optimal",
        _ => "-",
    }
}

fn grid_values(g: &GridWorld, table: &Table) -> Vec<f64> {
    (0..g.num_states())
        .map(|s| {
            let (r, c) = g.cell(s);
            table.value(&[r as f32, c as f32]).unwrap_or(0.0)
        })
        .collect()
}

fn grid_states(g: &GridWorld, data: &Dataset) -> Vec<usize> {
    (0..data.len())
        .map(|i| g.index_of_obs(data.obs(i)).unwrap_or(0))
        .collect()
}

/// One label source's row of the study.
struct Row {
    values: Vec<f64>,
    purity: f64,
}

fn run_source(
    g: &GridWorld,
    data: &Dataset,
    source: LabelSource,
    cfg: &TrainConfig,
    device: &Device,
) -> Result<Row> {
    let l = labels::make(source, data, &cfg.mining, cfg.seed, device)?;
    let table = qlearn::tabular(data, &l.labels, l.num_actions, &cfg.tabular, cfg.seed)?;
    let acts = data.discrete_actions("the grid-world study")?;
    Ok(Row {
        values: grid_values(g, &table),
        purity: eval::state_purity(&grid_states(g, data), &l.labels, acts),
    })
}

/// Runs the study, writes `metrics.json`, `grid.npz` and the exported latent model into
/// `out`, and returns the metrics and a printable report.
pub fn gridworld(out: &Path, study: &GridStudy, device: &Device) -> Result<(Value, String)> {
    let total = Instant::now();
    let g = GridWorld::default();
    let mut timings: Vec<(String, f64)> = vec![];
    let mut time = |k: &str, t: Instant| timings.push((k.to_string(), t.elapsed().as_secs_f64()));
    let t = Instant::now();
    let data = g.generate(study.episodes, study.seed, 0.0);
    data.save(&out.join("grid.npz"))?;
    time("generate data", t);

    let cfg = TrainConfig {
        seed: study.seed,
        ..study.train.clone()
    };
    let optimal = g.optimal_values(GAMMA);
    let t = Instant::now();
    let gt = run_source(&g, &data, LabelSource::Gt, &cfg, device)?;
    time("gt reference", t);
    // LAQ itself: the same run that is exported as the deliverable.
    let t = Instant::now();
    let trained = train::train(&data, &cfg, device)?;
    let run_metrics = train::write_run(
        &out.join("model"),
        &data,
        &cfg,
        &trained,
        "the built-in grid world",
    )?;
    time("latent: mine, Q-learn, export", t);
    let latent = Row {
        values: grid_values(
            &g,
            trained
                .table
                .as_ref()
                .context("the study runs tabular Q-learning")?,
        ),
        purity: eval::state_purity(
            &grid_states(&g, &data),
            &trained.labelled.labels,
            data.discrete_actions("the grid-world study")?,
        ),
    };
    let mut methods = serde_json::Map::new();
    let mut report = String::new();
    report += &format!(
        "Grid world {n}x{n}, {} episodes, {} transitions, seed {}\n\n",
        study.episodes,
        data.len(),
        study.seed,
        n = g.size
    );
    report +=
        "source         spearman  paper  | purity  paper  | value_mse  behaviour  paper (Fig. 1)\n";
    report +=
        "-------------  --------  -----  | ------  -----  | ---------  ---------  --------------\n";
    for source in LabelSource::ALL {
        let t = Instant::now();
        let row = match source {
            LabelSource::Gt => Row {
                values: gt.values.clone(),
                purity: gt.purity,
            },
            LabelSource::Latent => Row {
                values: latent.values.clone(),
                purity: latent.purity,
            },
            _ => {
                let row = run_source(&g, &data, source, &cfg, device)?;
                time(source.key(), t);
                row
            }
        };
        let spearman = eval::spearman(&row.values, &gt.values);
        let mse = eval::mse(&row.values, &optimal);
        let behaviour = g.behaviour_accuracy(&row.values, GAMMA);
        methods.insert(
            source.key().to_string(),
            json!({"spearman": spearman, "purity": row.purity, "value_mse": mse, "behavior_accuracy": behaviour}),
        );
        let (ps, pp) = paper_numbers(source);
        let f = |v: Option<f64>| {
            v.map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| "  -  ".into())
        };
        report += &format!(
            "{:<13}  {:>8.3}  {}  | {:>6.3}  {}  | {:>9.5}  {:>9.3}  {}\n",
            source.key(),
            spearman,
            f(ps),
            row.purity,
            f(pp),
            mse,
            behaviour,
            paper_behaviour(source)
        );
    }
    report += "\nspearman: against V learned with ground-truth actions (36 states); purity: state-conditioned;\n";
    report += "value_mse: against exact optimal V (value iteration); behaviour: share of states whose greedy move is optimal.\n";

    let mut sticky_rows = vec![];
    if !study.sticky.is_empty() {
        report += "\nSticky actions (appendix A.4): LAQ as stickiness grows\n";
        report += "stickiness  purity  spearman  behaviour  mean V (LAQ)  mean V (GT actions)\n";
        for &p in std::iter::once(&0.0).chain(&study.sticky) {
            let t = Instant::now();
            let (gt_p, laq) = if p == 0.0 {
                (
                    Row {
                        values: gt.values.clone(),
                        purity: gt.purity,
                    },
                    Row {
                        values: latent.values.clone(),
                        purity: latent.purity,
                    },
                )
            } else {
                let d = g.generate(study.episodes, study.seed + 1, p);
                let gt_p = run_source(&g, &d, LabelSource::Gt, &cfg, device)?;
                (gt_p, run_source(&g, &d, LabelSource::Latent, &cfg, device)?)
            };
            if p > 0.0 {
                time(&format!("sticky {p}"), t);
            }
            let spearman = eval::spearman(&laq.values, &gt_p.values);
            let behaviour = g.behaviour_accuracy(&laq.values, GAMMA);
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            report += &format!(
                "{:>10.2}  {:>6.3}  {:>8.3}  {:>9.3}  {:>12.4}  {:>19.4}\n",
                p,
                laq.purity,
                spearman,
                behaviour,
                mean(&laq.values),
                mean(&gt_p.values)
            );
            sticky_rows.push(json!({
                "stickiness": p, "purity": laq.purity, "spearman": spearman,
                "behavior_accuracy": behaviour, "mean_value": mean(&laq.values),
                "mean_value_gt": mean(&gt_p.values),
            }));
        }
        report += "paper (Fig. S3): purity falls with stickiness, Spearman stays high, behaviour stays correct.\n";
    }

    timings.push(("total".into(), total.elapsed().as_secs_f64()));
    report += "\nTimes (s): ";
    report += &timings
        .iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect::<Vec<_>>()
        .join(", ");
    report += &format!(
        "\nExported model: {}\n",
        out.join("model").join("value.safetensors").display()
    );

    let metrics = json!({
        "methods": methods,
        "sticky": sticky_rows,
        "paper": {
            "spearman": LabelSource::ALL.iter().filter_map(|s| paper_numbers(*s).0.map(|v| (s.key(), v))).collect::<std::collections::BTreeMap<_, _>>(),
            "purity": LabelSource::ALL.iter().filter_map(|s| paper_numbers(*s).1.map(|v| (s.key(), v))).collect::<std::collections::BTreeMap<_, _>>(),
        },
        "model": run_metrics,
        "episodes": study.episodes,
        "transitions": data.len(),
        "seed": study.seed,
        "timings_s": timings_json(&timings),
    });
    write_study(out, metrics, report)
}

fn timings_json(timings: &[(String, f64)]) -> Value {
    Value::Object(timings.iter().map(|(k, v)| (k.clone(), json!(v))).collect())
}

/// Writes a study's `metrics.json` and `report.txt` and hands them back.
fn write_study(out: &Path, metrics: Value, report: String) -> Result<(Value, String)> {
    crate::io::write_text(
        &out.join("metrics.json"),
        &serde_json::to_string_pretty(&metrics)?,
    )?;
    crate::io::write_text(&out.join("report.txt"), &report)?;
    Ok((metrics, report))
}

/// Settings of the Maze2D study (issue: continuous control).
#[derive(Clone, Debug)]
pub struct MazeStudy {
    pub layout: String,
    pub steps: usize,
    pub episode_len: usize,
    pub seeds: Vec<u64>,
    pub sources: Vec<LabelSource>,
    pub qs: Vec<QKind>,
    pub train: TrainConfig,
    pub reference: crate::td3bc::Td3BcConfig,
    /// At most this many dataset states are scored at each checkpoint.
    pub probes: usize,
    /// Zero-shot controller guidance of the differential-drive robot with the first
    /// seed's LAQ and single-action DQN models (`None`: skipped).
    pub guide: Option<crate::guide::GuideConfig>,
    /// Online SAC from the sparse reward against SAC with the first seed's LAQ V as a
    /// potential, per body (empty: skipped).
    pub shaping: Vec<(crate::sac::Body, crate::sac::ShapingConfig)>,
}

impl Default for MazeStudy {
    fn default() -> Self {
        // Any continuous dataset gets these settings from `laq train` as well.
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
            shaping: [crate::sac::Body::PointMass, crate::sac::Body::Unicycle]
                .into_iter()
                .map(|b| (b, crate::sac::ShapingConfig::for_body(b)))
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

/// The `p`-th percentile (0..=100) with linear interpolation, as numpy's default.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let pos = p / 100.0 * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

fn q_key(q: QKind) -> &'static str {
    match q {
        QKind::Bcq => "bcq",
        QKind::Cql => "cql",
        QKind::Tabular => "tabular",
        _ => "dqn",
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
    let t = Instant::now();
    let reference = crate::td3bc::train(&data, &study.reference, 0, device)?;
    let gt: Vec<f64> = reference
        .values(&probe, device)?
        .into_iter()
        .map(f64::from)
        .collect();
    let mut timings = vec![("reference (TD3+BC)".to_string(), t.elapsed().as_secs_f64())];
    let gt_vs_oracle = eval::spearman(&gt, &oracle);

    // (source, q) -> per seed: (gt last, oracle last, gt p95, oracle p95)
    let mut rows: std::collections::BTreeMap<String, Vec<[f64; 4]>> = Default::default();
    // The first seed's DQN value models, exported as `laq train` would write them.
    let mut exported: std::collections::BTreeMap<&str, Vec<u8>> = Default::default();
    for &seed in &study.seeds {
        for &source in &study.sources {
            let t = Instant::now();
            let cfg = TrainConfig {
                seed,
                ..study.train.clone()
            };
            let l = labels::make(source, &data, &cfg.mining, seed, device)?;
            for &q in &study.qs {
                let net = qlearn::dqn(
                    &data,
                    &l.labels,
                    l.num_actions,
                    &cfg.dqn,
                    q,
                    Some(&probe),
                    seed,
                    device,
                )?;
                let (mut sg, mut so) = (vec![], vec![]);
                for (_, v) in &net.checkpoints {
                    let v: Vec<f64> = v.iter().map(|&x| x as f64).collect();
                    sg.push(eval::spearman(&v, &gt));
                    so.push(eval::spearman(&v, &oracle));
                }
                if seed == study.seeds[0]
                    && q == QKind::Dqn
                    && matches!(source, LabelSource::Latent | LabelSource::Single)
                {
                    let mut info = crate::train::model_info(&TrainConfig {
                        labels: source,
                        ..cfg.clone()
                    });
                    info.insert("q".into(), "dqn".into());
                    let model = ValueModel::from_qnetwork(&net, cfg.dqn.gamma, info)?;
                    exported.insert(source.key(), model.to_bytes(false)?);
                }
                let last = |s: &[f64]| s.last().copied().unwrap_or(f64::NAN);
                rows.entry(format!("{}/{}", source.key(), q_key(q)))
                    .or_default()
                    .push([
                        last(&sg),
                        last(&so),
                        percentile(&sg, 95.0),
                        percentile(&so, 95.0),
                    ]);
            }
            timings.push((
                format!("seed {seed} {}", source.key()),
                t.elapsed().as_secs_f64(),
            ));
        }
    }
    for (key, bytes) in &exported {
        let dir = out.join(format!("model_{key}"));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        crate::io::write_atomic(&dir.join("value.safetensors"), bytes)?;
    }
    let guidance = match (&study.guide, exported.get("latent")) {
        (Some(g), Some(laq)) => {
            let t = Instant::now();
            let r = crate::guide::guidance_study(
                &maze,
                laq,
                exported.get("single").map(Vec::as_slice),
                g,
                0,
            )?;
            timings.push(("guidance".into(), t.elapsed().as_secs_f64()));
            Some(r)
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
                let bar = crate::progress::bar(cfg.total_steps(), &format!("SAC, {}", body.name()));
                let r = crate::sac::shaping_study(&maze, laq, *body, cfg, &bar)?;
                bar.finish_and_clear();
                crate::sac::write_figures(out, &maze, laq, &r)?;
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
            let key = format!("{}/{}", source.key(), q_key(q));
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
    if let Some(r) = &guidance {
        use crate::guide::Policy;
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
        guidance_json = json!({
            "success": laq.map(|p| p.success),
            "spl": laq.map(|p| p.spl),
            "policies": per,
            "starts": r.config.starts,
            "drive_length": r.config.drive_length,
        });
        crate::io::write_text(&out.join("guidance.json"), &serde_json::to_string(r)?)?;
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
        crate::io::write_text(&out.join("shaping.json"), &serde_json::to_string(&shaping)?)?;
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
        "timings_s": timings_json(&timings),
    });
    write_study(out, metrics, report)
}

/// `laq reproduce nav`: the first-person navigation study ([`crate::navstudy`]). Writes
/// `metrics.json` (`{"methods": {"<source>": {"spearman", "purity", "spl", ...}}, ...}`),
/// `report.txt`, `value_map_<source>.png` (V over the maze with guided paths) and, for
/// the `latent` source, the run directory `model_latent/` as `laq train` writes it.
pub fn nav(
    out: &Path,
    cfg: &crate::navstudy::NavStudyConfig,
    device: &Device,
) -> Result<(Value, String)> {
    let total = Instant::now();
    let run = crate::navstudy::run(cfg, device)?;
    let mut figures = vec![];
    for r in &run.sources {
        let file = format!("value_map_{}.png", r.source.key());
        // A figure that cannot be drawn must not cost the study's numbers.
        match r.map.save(&out.join(&file)) {
            Ok(()) => figures.push(file),
            Err(e) => log::warn!("{file} left out: {e:#}"),
        }
        if r.source == LabelSource::Latent {
            train::write_run(
                &out.join("model_latent"),
                &run.data,
                &r.config,
                &r.trained,
                "laq gen nav-branching (regenerated by laq reproduce nav)",
            )?;
        }
    }
    let mut metrics = serde_json::to_value(&run.study)?;
    metrics["figures"] = json!(figures);
    metrics["seconds"] = json!(total.elapsed().as_secs_f64());
    metrics["device"] = json!(crate::device_name(device));
    let mut report = run.study.report();
    report += &format!(
        "\nfigures: {}\ntotal {:.0} s on {}\n",
        figures.join(", "),
        total.elapsed().as_secs_f64(),
        crate::device_name(device)
    );
    write_study(out, metrics, report)
}

#[cfg(test)]
mod tests {
    #[test]
    fn percentile_interpolates_like_numpy() {
        // numpy.percentile([1, 2, 3, 4], 95) = 3.85
        assert!((super::percentile(&[4.0, 1.0, 3.0, 2.0], 95.0) - 3.85).abs() < 1e-12);
        assert_eq!(super::percentile(&[7.0], 95.0), 7.0);
        assert!(super::percentile(&[], 95.0).is_nan());
    }
}
