//! Runs the first-person navigation study ([`laq::navstudy`]) and prints its table; with
//! an output path, also writes the results as JSON.
//!
//! `cargo run --release -p laq --example nav_study -- [episodes] [size] [seed] [OUT.json]
//! [dqn|bcq|cql]`

use anyhow::{Context, Result};
use laq::navstudy::{self, NavStudyConfig};

fn main() -> Result<()> {
    laq::default_threads(None);
    laq::progress::init(0);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cfg = NavStudyConfig::default();
    let num = |i: usize| -> Result<Option<u64>> {
        args.get(i)
            .map(|s| {
                s.parse()
                    .with_context(|| format!("argument {i}: `{s}` is not a whole number"))
            })
            .transpose()
    };
    if let Some(e) = num(0)? {
        cfg.episodes = e as usize;
    }
    if let Some(s) = num(1)? {
        cfg.size = s as usize;
    }
    if let Some(s) = num(2)? {
        cfg.seed = s;
    }
    if let Some(q) = args.get(4) {
        cfg.train.q = match q.as_str() {
            "dqn" => laq::qlearn::QKind::Dqn,
            "bcq" => laq::qlearn::QKind::Bcq,
            "cql" => laq::qlearn::QKind::Cql,
            other => anyhow::bail!("argument 5: `{other}` is not dqn, bcq or cql"),
        };
    }
    let t = std::time::Instant::now();
    let r = navstudy::run(&cfg, &candle_core::Device::Cpu)?.study;
    print!("{}", r.report());
    println!("total {:.0} s", t.elapsed().as_secs_f64());
    if let Some(out) = args.get(3) {
        std::fs::write(out, serde_json::to_string_pretty(&r)?)
            .with_context(|| format!("cannot write {out}"))?;
    }
    Ok(())
}
