//! `laq config`: every training setting as TOML.

use crate::data::Dataset;
use crate::run::config::TrainConfig;
use anyhow::Result;
use clap::Subcommand;
use std::path::PathBuf;

/// What `laq config` prints.
#[derive(Subcommand)]
pub enum ConfigCmd {
    /// Every training setting with its default value.
    Default {
        /// Print the defaults `laq train` picks for this dataset (continuous states get a
        /// smaller forward model with larger batches).
        #[arg(long)]
        data: Option<PathBuf>,
    },
}

/// Prints the settings.
pub fn run(what: ConfigCmd) -> Result<()> {
    let ConfigCmd::Default { data } = what;
    let cfg = match data {
        Some(d) => TrainConfig::for_data(&Dataset::load(&d)?),
        None => TrainConfig::default(),
    };
    outln!("# laq training settings; `laq train --config FILE` reads them and flags override.");
    out!("{}", cfg.to_toml()?);
    Ok(())
}
