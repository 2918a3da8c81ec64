//! Generates the navigation dataset of the paper's protocol (branching maze, 1000 episodes,
//! 64x64 frames by default) and reports its size and how long each part took.
//!
//! `cargo run --release -p laq --example nav_gen -- OUT.npz [episodes] [size] [seed]`
//! (`.safetensors` works too; observations are stored as u8).

use anyhow::{bail, Context, Result};
use laq::data::write_arrays;
use laq::envs::nav::{GenConfig, Goal, Kind, Nav, Renderer};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::path::Path;
use std::time::Instant;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(out) = args.first() else {
        bail!("usage: nav_gen OUT.npz|OUT.safetensors [episodes] [size] [seed]");
    };
    let num = |i: usize, default: u64| -> Result<u64> {
        args.get(i).map_or(Ok(default), |s| {
            s.parse()
                .with_context(|| format!("argument {i}: `{s}` is not a whole number"))
        })
    };
    let cfg = GenConfig {
        episodes: num(1, 1000)? as usize,
        size: num(2, 64)? as usize,
        ..GenConfig::default()
    };
    let seed = num(3, 0)?;

    let t = Instant::now();
    let nav = Nav::branching()?;
    println!(
        "pose graph and distance tables: {:.3} s",
        t.elapsed().as_secs_f64()
    );

    let renderer = Renderer::new(cfg.size, cfg.size)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let poses: Vec<_> = (0..2000).map(|_| nav.random_start(&mut rng)).collect();
    let mut frame = Vec::new();
    let t = Instant::now();
    for &p in &poses {
        renderer.render_into(&nav.map, p, &mut frame);
    }
    println!(
        "rendering {0}x{0}: {1:.4} ms per frame",
        cfg.size,
        t.elapsed().as_secs_f64() * 1e3 / poses.len() as f64
    );

    let t = Instant::now();
    let data = nav.generate(&cfg, seed)?;
    let gen_s = t.elapsed().as_secs_f64();
    println!(
        "generated {} episodes, {} transitions in {gen_s:.2} s",
        data.episodes.len(),
        data.len()
    );
    for kind in Kind::ALL {
        let eps: Vec<_> = data.episodes.iter().filter(|e| e.kind == kind).collect();
        let mean = eps.iter().map(|e| e.len).sum::<usize>() as f64 / eps.len().max(1) as f64;
        let at = |g: Option<Goal>| eps.iter().filter(|e| e.goal == g).count();
        println!(
            "  {kind:?}: {} episodes, mean length {mean:.1}, ended at G_near {}, G_far {}, \
             cut at the step limit {}",
            eps.len(),
            at(Some(Goal::Near)),
            at(Some(Goal::Far)),
            at(None)
        );
    }
    let obs_bytes = data.observations.len() + data.next_observations.len();
    println!(
        "observations {:?} per transition: {:.1} MB as u8 in memory (an f32 Dataset takes 4x)",
        data.obs_shape,
        obs_bytes as f64 / 1e6
    );

    let t = Instant::now();
    let path = Path::new(out);
    write_arrays(path, &data.into_arrays())?;
    let size = std::fs::metadata(path)
        .with_context(|| format!("cannot stat {}", path.display()))?
        .len();
    println!(
        "wrote {} ({:.1} MB) in {:.2} s",
        path.display(),
        size as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
