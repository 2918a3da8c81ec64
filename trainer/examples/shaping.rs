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
use laq::plot::{Heatmap, LinePlot, Series, SeriesLabelPosition};

use laq::sac::{self, Body, Condition, Potential, ShapingConfig, ShapingResult};
use std::path::{Path, PathBuf};
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

fn success_plot(r: &ShapingResult) -> Result<LinePlot> {
    let x: Vec<f64> = r.eval_steps.iter().map(|&s| s as f64).collect();
    let mut plot = LinePlot::new(
        format!(
            "U-maze, {}: success over {} seeds",
            r.body.name().replace('_', " "),
            r.config.seeds
        ),
        "environment steps",
        "success rate (mean ± s.e.)",
    );
    for c in &r.conditions {
        plot = plot.series(
            Series::new(c.condition.name(), x.clone(), c.mean.clone()).with_err(c.stderr.clone()),
        );
    }
    plot.y_range = Some((-0.02, 1.02));
    // Success curves rise from the left: the upper left corner stays clear longest.
    plot.legend = SeriesLabelPosition::UpperLeft;
    Ok(plot)
}

/// V over the maze at rest, walls masked, with the final shaped policy's paths.
fn value_map(maze: &Maze, potential: &mut Potential, r: &ShapingResult) -> Result<Heatmap> {
    let h = 0.05f32;
    let (rows, cols) = (
        (maze.rows as f32 / h).round() as usize,
        (maze.cols as f32 / h).round() as usize,
    );
    let mut values = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            let (x, y) = ((i as f32 + 0.5) * h, (j as f32 + 0.5) * h);
            values.push(if maze.wall_at(x, y) {
                None
            } else {
                Some(potential.value([x, y, 0.0, 0.0])? as f64)
            });
        }
    }
    // The maze's x runs down the rows and y along the columns, as in its layout.
    let mut map = Heatmap::new(rows, cols, values);
    map.x_range = (0.0, maze.cols as f64);
    map.y_range = (0.0, maze.rows as f64);
    map.y_down = true;
    map.title = format!(
        "V(x, y, 0, 0) and shaped {} paths",
        r.body.name().replace('_', " ")
    );
    map.x_label = "y".into();
    map.y_label = "x".into();
    map.colorbar_label = "V".into();
    if let Some(c) = r.condition(Condition::Shaped) {
        map.paths = c
            .trajectories
            .iter()
            .map(|t| t.iter().map(|p| (p[1] as f64, p[0] as f64)).collect())
            .collect();
    }
    let (tx, ty) = maze.target_point();
    map.markers = vec![((ty as f64, tx as f64), "target".into())];
    Ok(map)
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
        let bar = laq::progress::bar(cfg.total_steps(), body.name());
        let r = sac::shaping_study(&maze, &bytes, body, &cfg, &bar)?;
        bar.finish_and_clear();
        write_figures(&args.out, &maze, &bytes, &r)?;
        eprintln!("{}: {:.0} s", body.name(), r.seconds);
        results.push(r);
    }
    let wall = clock.elapsed().as_secs_f64();
    let json = serde_json::json!({ "wall_seconds": wall, "studies": results });
    laq::io::write_text(
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

fn write_figures(out: &Path, maze: &Maze, bytes: &[u8], r: &ShapingResult) -> Result<()> {
    success_plot(r)?.save(&out.join(format!("success_{}.png", r.body.name())))?;
    let mut potential = Potential::new(bytes, maze)?;
    value_map(maze, &mut potential, r)?.save(&out.join(format!("value_{}.png", r.body.name())))
}
