//! The controller-guidance study on the U-maze (see docs/runtime.md, "Controller guidance
//! in the maze"): trains the single-action baseline (about 20 s), runs every policy from
//! the same random starts, prints the table and V along the corridor, and writes
//! `guide.json` (summaries, per-episode paths and choices, the profile) and the
//! baseline's model to the output directory.
//!
//! ```sh
//! cargo run --release -p laq --example guide -- [--out out/guide] [--seed 0]
//!     [--starts 100] [--value models/maze2d/value.safetensors] [--sweep]
//!     [--single out/guide/single.safetensors] [--no-goal-check] [--lookahead N]
//!     [--layout umaze|medium|large]
//! ```
//!
//! `--no-goal-check` leaves every decision to the policy, also the one that would end
//! in the target disc (`laq_maze::Settings::goal_check`); `--lookahead N` plans N
//! primitives ahead (1: greedy; default `laq_maze::LOOKAHEAD`).
//!
//! `--sweep` also runs the study for several primitive lengths; `--single` reuses the
//! baseline an earlier run wrote instead of training it again.

use anyhow::{bail, Context, Result};
use laq::envs::maze2d::Maze;
use laq::studies::guidance::{self, GuideConfig};
use std::path::PathBuf;
use std::time::Instant;

struct Args {
    out: PathBuf,
    seed: u64,
    starts: usize,
    value: PathBuf,
    sweep: bool,
    /// The single-action baseline from an earlier run (`single.safetensors`).
    single: Option<PathBuf>,
    goal_check: bool,
    lookahead: usize,
    layout: String,
}

fn parse() -> Result<Args> {
    let mut a = Args {
        out: PathBuf::from("out/guide"),
        seed: 0,
        starts: GuideConfig::default().starts,
        value: PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../models/maze2d/value.safetensors"
        )),
        sweep: false,
        single: None,
        goal_check: true,
        lookahead: laq_maze::LOOKAHEAD,
        layout: "umaze".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--out" => a.out = value()?.into(),
            "--seed" => a.seed = value()?.parse().context("--seed")?,
            "--starts" => a.starts = value()?.parse().context("--starts")?,
            "--value" => a.value = value()?.into(),
            "--sweep" => a.sweep = true,
            "--single" => a.single = Some(value()?.into()),
            "--no-goal-check" => a.goal_check = false,
            "--lookahead" => a.lookahead = value()?.parse().context("--lookahead")?,
            "--layout" => a.layout = value()?,
            other => bail!("unknown argument `{other}`"),
        }
    }
    Ok(a)
}

fn main() -> Result<()> {
    laq::default_threads(None);
    let args = parse()?;
    let maze = Maze::named(&args.layout)?;
    let value = std::fs::read(&args.value)
        .with_context(|| format!("cannot read {}", args.value.display()))?;
    let t = Instant::now();
    let single = match &args.single {
        Some(p) => std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?,
        None => {
            let m = guidance::train_single_action_model(
                &maze,
                200_000,
                1000,
                0,
                &candle_core::Device::Cpu,
            )?;
            eprintln!(
                "trained the single-action model in {:.1} s",
                t.elapsed().as_secs_f64()
            );
            m
        }
    };
    let cfg = GuideConfig {
        starts: args.starts,
        goal_check: args.goal_check,
        lookahead: args.lookahead,
        ..GuideConfig::default()
    };
    let t = Instant::now();
    let result = guidance::guidance_study(&maze, &value, Some(&single), &cfg, args.seed)?;
    print!("{}", guidance::report(&result));
    println!("({:.2} s)", t.elapsed().as_secs_f64());

    let profile = guidance::corridor_profile(&maze, &[&value, &single], 0.25)?;
    println!("\nV at rest along the corridor, far end to target:");
    println!(
        "{:>5} {:>5} {:>9} {:>9} {:>9}",
        "x", "y", "geodesic", "V laq", "V single"
    );
    for p in &profile {
        println!(
            "{:>5.2} {:>5.2} {:>9.2} {:>9.2} {:>9.2}",
            p.x, p.y, p.shortest, p.values[0], p.values[1]
        );
    }

    let mut sweep = vec![];
    if args.sweep {
        for length in [0.25, 0.5, 0.75, 1.0] {
            let cfg = GuideConfig {
                drive_length: length,
                ..cfg.clone()
            };
            let r = guidance::guidance_study(&maze, &value, Some(&single), &cfg, args.seed)?;
            print!("\n{}", guidance::report(&r));
            sweep.push(serde_json::json!({ "drive_length": length, "policies": r.policies }));
        }
    }

    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let json = serde_json::json!({ "study": result, "profile": profile, "sweep": sweep });
    let path = args.out.join("guide.json");
    laq::util::io::write_atomic(&path, serde_json::to_string(&json)?.as_bytes())?;
    laq::util::io::write_atomic(&args.out.join("single.safetensors"), &single)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
