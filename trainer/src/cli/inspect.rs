//! `laq inspect`: a dataset or a model described.

use crate::eval::inspect::{self, Budget};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `laq inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// A dataset (any format `laq train` reads), a model or a run directory.
    pub file: PathBuf,
    #[command(flatten)]
    pub read: super::ReadArgs,
    /// Flash budget of the target MCU for a model, e.g. `256K` or `1M`.
    #[arg(long, value_parser = parse_bytes)]
    pub flash: Option<usize>,
    /// RAM budget of the target MCU for a model, e.g. `64K`.
    #[arg(long, value_parser = parse_bytes)]
    pub ram: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Prints the description; exits with status 3 when a model does not fit the budget.
pub fn run(a: &InspectArgs) -> Result<()> {
    let budget = match (a.flash, a.ram) {
        (None, None) => None,
        (f, r) => Some(Budget {
            flash: f.unwrap_or(usize::MAX),
            ram: r.unwrap_or(usize::MAX),
        }),
    };
    let report = inspect::inspect_with(&a.file, budget, &a.read.options())?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!("{report}");
    }
    if report.fits() == Some(false) {
        std::process::exit(3);
    }
    Ok(())
}

/// A byte count with an optional binary suffix: `4096`, `256K`, `1M`.
fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1024),
        Some('M' | 'm') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("`{s}` is not a size in bytes (e.g. 4096, 256K, 1M)"))
}
