//! The paper's behaviour study on the U-maze: SAC from the sparse task reward against SAC
//! with the learned value function as a potential, on the point mass (whose logs trained
//! V) and on a differential-drive robot (V queried at its position, at rest).
//!
//! ```sh
//! cargo run --release -p laq --example shaping -- out/shaping
//! ```
//!
//! Writes `shaping.json` (every curve and setting), `success_<body>.png` (success rate
//! against environment steps, mean and standard error over seeds) and `value_<body>.png`
//! (V over the maze with the final shaped policy's evaluation paths) into the directory.

use anyhow::{Context, Result};
use clap::Parser;
use laq::envs::maze2d::Maze;

use laq::studies::shaping::{self, Body, ShapingConfig};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// Output directory.
    out: PathBuf,
    /// Exported value model of the point mass.
    #[arg(long, default_value = "models/maze2d/value.safetensors")]
    model: PathBuf,
    /// Environment steps per run (default: the study's for each body; evaluations keep
    /// their number).
    #[arg(long)]
    steps: Option<usize>,
    /// Seeds per condition (default: the study's).
    #[arg(long)]
    seeds: Option<usize>,
    /// Run only this body (point_mass or unicycle).
    #[arg(long)]
    body: Option<String>,
    /// JSON file with settings that replace the defaults, e.g.
    /// `{"sac": {"batch_size": 128}, "seeds": 3}`.
    #[arg(long)]
    config: Option<PathBuf>,
}

/// `base` with every key of `over` replaced, recursing into objects.
fn merge(base: &mut serde_json::Value, over: &serde_json::Value) {
    match (base, over) {
        (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

fn fmt_steps(s: Option<usize>) -> String {
    s.map(|s| s.to_string()).unwrap_or_else(|| "never".into())
}

fn main() -> Result<()> {
    laq::default_threads(None);
    let args = Args::parse();
    let bytes = std::fs::read(&args.model)
        .with_context(|| format!("cannot read {}", args.model.display()))?;
    let maze = Maze::named("umaze")?;
    let bodies: Vec<Body> = match args.body.as_deref() {
        None => vec![Body::PointMass, Body::Unicycle],
        Some("point_mass") => vec![Body::PointMass],
        Some("unicycle") => vec![Body::Unicycle],
        Some(other) => anyhow::bail!("unknown body `{other}` (point_mass or unicycle)"),
    };
    let clock = Instant::now();
    let mut results = vec![];
    let overrides: Option<serde_json::Value> = match &args.config {
        Some(p) => Some(
            serde_json::from_str(&std::fs::read_to_string(p)?)
                .with_context(|| format!("{} is not JSON", p.display()))?,
        ),
        None => None,
    };
    for body in bodies {
        let mut cfg = ShapingConfig::for_body(body);
        if let Some(over) = &overrides {
            let mut v = serde_json::to_value(&cfg)?;
            merge(&mut v, over);
            cfg = serde_json::from_value(v).context("invalid settings in --config")?;
        }
        if let Some(s) = args.steps {
            cfg.eval_every = (cfg.eval_every * s / cfg.steps).max(1);
            cfg.steps = s;
        }
        if let Some(s) = args.seeds {
            cfg.seeds = s;
        }
        let bar = laq::util::progress::bar(cfg.total_steps(), body.name());
        let r = shaping::shaping_study(&maze, &bytes, body, &cfg, &bar)?;
        bar.finish_and_clear();
        shaping::write_figures(&args.out, &maze, &bytes, &r)?;
        eprintln!("{}: {:.0} s", body.name(), r.seconds);
        results.push(r);
    }
    let wall = clock.elapsed().as_secs_f64();
    let json = serde_json::json!({ "wall_seconds": wall, "studies": results });
    laq::util::io::write_text(
        &args.out.join("shaping.json"),
        &serde_json::to_string_pretty(&json)?,
    )?;

    println!(
        "{:<11} {:<8} {:>14} {:>6} {:>12} {:>9} {:>8} {:>10}",
        "body",
        "reward",
        "final (± s.e.)",
        "AUC",
        "steps to 0.8",
        "train ok",
        "time s",
        "ms/update"
    );
    for r in &results {
        for c in &r.conditions {
            println!(
                "{:<11} {:<8} {:>7.2} ± {:<4.2} {:>6.3} {:>12} {:>9} {:>8.0} {:>10.2}",
                r.body.name(),
                c.condition.name(),
                c.final_mean,
                c.final_stderr,
                c.auc,
                fmt_steps(c.steps_to_threshold),
                c.train_successes.iter().sum::<usize>(),
                r.seconds,
                r.ms_per_update
            );
        }
    }
    println!("wall time {wall:.0} s; outputs in {}", args.out.display());
    Ok(())
}
