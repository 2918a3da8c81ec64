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

pub fn metrics(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}
