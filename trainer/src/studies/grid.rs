//! `laq reproduce gridworld`: the paper's grid-world study, computed end to end.

use crate::data::Dataset;
use crate::envs::gridworld::{GridWorld, GAMMA};
use crate::eval::purity;
use crate::run::config::TrainConfig;
use crate::run::train;
use crate::stages::labels::{self, LabelSource};
use crate::stages::qlearn::{self, QKind, Table};
use crate::util::stats;
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
    let l = labels::make(source, data, &cfg.mining, cfg.seed, device, None)?;
    let table = qlearn::tabular(data, &l.labels, l.num_actions, &cfg.tabular, cfg.seed)?;
    let acts = data.discrete_actions("the grid-world study")?;
    Ok(Row {
        values: grid_values(g, &table),
        purity: purity::state_purity(&grid_states(g, data), &l.labels, acts),
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
    let trained = train::train(&data, &cfg, device, None)?;
    let run_metrics = crate::run::dir::write_run(
        &out.join("model"),
        &data,
        &trained,
        "the built-in grid world",
        &data.fingerprint(),
        &[],
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
        purity: purity::state_purity(
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
        let spearman = stats::spearman(&row.values, &gt.values);
        let mse = stats::mse(&row.values, &optimal);
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
            let spearman = stats::spearman(&laq.values, &gt_p.values);
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
        "timings_s": super::timings_json(&timings),
    });
    super::write_study(out, metrics, report)
}
