//! States outside the data (the paper's appendix on extrapolation error): U-maze data with
//! every transition in one cell removed, so that V there is extrapolated, and controller
//! guidance from 100 random starts with three models of the same data: V as learned, V
//! with a density gate over (x, y) (`--density-gate 0,1`: the runtime's `select` never
//! picks a primitive that ends outside the data), and the one-norm head (`--head
//! one-norm`). Writes `extrapolation.json` and `value_<model>.png` (V at rest, cells
//! outside the gate grey) to the output directory.
//!
//! ```sh
//! cargo run --release -p laq --example extrapolation -- [--out out/extrapolation] [--cell 3,1]
//! ```

use anyhow::{bail, Context, Result};
use candle_core::Device;
use laq::envs::maze2d::Maze;
use laq::run::config::{TrainConfig, ValueHead};
use laq::run::plot::Heatmap;
use laq::studies::guidance::{self, GuideConfig, Policy};
use laq_runtime::OwnedModel;
use std::path::PathBuf;

fn main() -> Result<()> {
    laq::default_threads(None);
    laq::util::progress::init(0);
    let mut out = PathBuf::from("out/extrapolation");
    let mut cell = (3usize, 1usize);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--out" => out = value()?.into(),
            "--cell" => {
                let v = value()?;
                let (r, c) = v.split_once(',').context("--cell takes ROW,COL")?;
                cell = (
                    r.parse().context("--cell row")?,
                    c.parse().context("--cell col")?,
                );
            }
            other => bail!("unknown argument `{other}`"),
        }
    }
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let maze = Maze::named("umaze")?;
    let full = maze.generate(200_000, 1000, 0);
    let inside = |s: &[f32]| s[0].floor() as usize == cell.0 && s[1].floor() as usize == cell.1;
    let keep: Vec<usize> = (0..full.len())
        .filter(|&i| !inside(&full.obs_row(i)) && !inside(&full.next_obs_row(i)))
        .collect();
    let data = full.select(&keep);
    eprintln!(
        "kept {} of {} transitions (none in cell {cell:?})",
        data.len(),
        full.len()
    );
    let base = TrainConfig::for_data(&data);
    let mut gated = base.clone();
    gated.density.enabled = true;
    gated.density.dims = vec![0, 1];
    let mut one_norm = base.clone();
    one_norm.head = ValueHead::OneNorm;
    let cfg = GuideConfig::default();
    let mut results = vec![];
    for (name, tc) in [
        ("plain", base),
        ("density_gate", gated),
        ("one_norm", one_norm),
    ] {
        let trained = laq::run::train::train(&data, &tc, &Device::Cpu, None)?;
        let bytes = trained.model.to_bytes(false)?;
        let r = guidance::guidance_study(&maze, &bytes, None, &cfg, 0)?;
        let laq = r.summary(Policy::LaqValue).context("no LAQ summary")?;
        // Success from starts in and next to the removed cell, where its V lures.
        let near = |e: &guidance::Episode| {
            let (r, c) = (e.start[0] as usize, e.start[1] as usize);
            r == cell.0 && c.abs_diff(cell.1) <= 1
        };
        let near_runs: Vec<bool> = r
            .episodes
            .iter()
            .filter(|e| near(e))
            .filter_map(|e| e.runs.iter().find(|run| run.policy == Policy::LaqValue))
            .map(|run| run.success)
            .collect();
        let near_success =
            near_runs.iter().filter(|&&s| s).count() as f64 / near_runs.len().max(1) as f64;
        println!(
            "{name:<13} success {:.2} (SPL {:.3}); from starts in row {} next to the removed \
             cell: {:.2} of {}; verdict {:?}",
            laq.success,
            laq.spl,
            cell.0,
            near_success,
            near_runs.len(),
            trained.trust.verdict
        );
        let model = OwnedModel::from_vec(bytes.clone()).context("the model")?;
        let m = model.model();
        let mut scratch = vec![0f32; m.scratch_len()];
        let h = 0.05f32;
        let (rows, cols) = (
            (maze.rows as f32 / h).round() as usize,
            (maze.cols as f32 / h).round() as usize,
        );
        let mut values = Vec::with_capacity(rows * cols);
        for i in 0..rows {
            for j in 0..cols {
                let (x, y) = ((i as f32 + 0.5) * h, (j as f32 + 0.5) * h);
                let s = [x, y, 0.0, 0.0];
                let g = m.gated_value(&s, &mut scratch)?;
                values
                    .push((!maze.wall_at(x, y) && g.in_distribution).then_some(g.raw_value as f64));
            }
        }
        let mut map = Heatmap::new(rows, cols, values);
        map.x_range = (0.0, maze.cols as f64);
        map.y_range = (0.0, maze.rows as f64);
        map.y_down = true;
        map.title = format!(
            "V(x, y, 0, 0), {name}: success {:.2}, {:.2} next to the removed cell",
            laq.success, near_success
        );
        map.x_label = "y".into();
        map.y_label = "x".into();
        map.colorbar_label = "V".into();
        let (tx, ty) = maze.target_point();
        map.markers = vec![((ty as f64, tx as f64), "target".into())];
        map.save(&out.join(format!("value_{name}.png")))?;
        results.push(serde_json::json!({
            "model": name,
            "success": laq.success,
            "spl": laq.spl,
            "success_next_to_removed_cell": near_success,
            "starts_next_to_removed_cell": near_runs.len(),
            "verdict": trained.trust.verdict,
        }));
    }
    let json = serde_json::json!({ "removed_cell": [cell.0, cell.1], "kept": data.len(), "models": results });
    laq::util::io::write_text(
        &out.join("extrapolation.json"),
        &serde_json::to_string_pretty(&json)?,
    )?;
    eprintln!("wrote {}", out.display());
    Ok(())
}
