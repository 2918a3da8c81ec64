#![allow(dead_code)]
//! Helpers of the `laq` command-line tests.

pub mod car;

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

/// `laq predict` of `model` (a value file or a run directory) over `data`, into a CSV
/// beside the model: the columns of each row, V last.
pub fn predict(model: &Path, data: &Path) -> Vec<Vec<f64>> {
    predict_csv(model, data).1
}

/// `laq predict`'s header and rows.
pub fn predict_csv(model: &Path, data: &Path) -> (Vec<String>, Vec<Vec<f64>>) {
    let csv = model.with_extension("csv");
    ok(&[
        "predict",
        "--model",
        model.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--out",
        csv.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(|c| c.parse().unwrap()).collect())
        .collect();
    (header, rows)
}

/// V of each row of `data` as `laq predict` gives it from `model`: its `value` column.
pub fn predicted(model: &Path, data: &Path) -> Vec<f64> {
    let (header, rows) = predict_csv(model, data);
    let col = header.iter().position(|h| h == "value").unwrap();
    rows.into_iter().map(|row| row[col]).collect()
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
    let rows = predict(&run.join("value.safetensors"), Path::new(data));
    let first: Vec<f64> = rows.iter().map(|r| r[1]).collect();
    let value: Vec<f64> = rows.iter().map(|r| r[3]).collect();
    (summary, laq::util::stats::spearman(&first, &value))
}
