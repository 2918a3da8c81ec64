#![allow(dead_code)]
//! Helpers of the `laq` command-line tests.

use std::path::Path;
use std::process::Command;

pub fn laq(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_laq"))
        .args(args)
        .env("LAQ_QUIET", "1")
        .output()
        .unwrap()
}

pub fn ok(args: &[&str]) -> String {
    let out = laq(args);
    assert!(
        out.status.success(),
        "laq {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A xorshift generator from `seed`: the same numbers on every machine, without a crate.
pub fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

pub fn metrics(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `laq train` on `data` into `dir/run`, then `laq predict` of its V over the same file:
/// the training summary, and the Spearman of the prediction's column 1 (the state's first
/// value) against its V. The summary must say what reading the file left out.
pub fn train_and_rank(data: &str, dir: &Path) -> (String, f64) {
    let run = dir.join("run");
    let summary = ok(&["train", "--data", data, "--out", run.to_str().unwrap()]);
    assert!(
        summary.contains("terminal rows without a next observation")
            && summary.contains("rows left out"),
        "the run reports what reading did: {summary}"
    );
    let csv = dir.join("v.csv");
    let model = run.join("value.safetensors");
    ok(&[
        "predict",
        "--model",
        model.to_str().unwrap(),
        "--data",
        data,
        "--out",
        csv.to_str().unwrap(),
    ]);
    let (mut first, mut value) = (vec![], vec![]);
    for line in std::fs::read_to_string(&csv).unwrap().lines().skip(1) {
        let cols: Vec<f64> = line.split(',').map(|c| c.parse().unwrap()).collect();
        first.push(cols[1]);
        value.push(cols[3]);
    }
    (summary, laq::util::stats::spearman(&first, &value))
}
