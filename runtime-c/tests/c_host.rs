//! The C interface from C: builds the static library (release, in its own target
//! directory), compiles `tests/c/host.c` against `include/laq.h` with the system C
//! compiler (`CC`, else `cc`), runs it on the shipped grid model and a model with a
//! density gate, and compares every number it prints with `laq_runtime` evaluating the
//! same files here: bit for bit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use laq_runtime::{Candidate, Controller, Error, Model, Outcome, Predicted};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn grid_model() -> PathBuf {
    root().join("../models/gridworld/value.safetensors")
}

fn gated_model() -> PathBuf {
    root().join("../runtime/tests/data/tiny.safetensors")
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Builds the library as a C user would and links `host.c` against it.
fn build_host_program() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-host");
    let target_dir = dir.join("target");
    run(Command::new(env!("CARGO"))
        .args(["build", "-p", "laq-runtime-c", "--release", "--lib"])
        .arg("--manifest-path")
        .arg(root().join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir));
    let lib = target_dir.join("release/liblaq_runtime_c.a");
    assert!(lib.is_file(), "{} not built", lib.display());
    let exe = dir.join("host");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    run(Command::new(&cc)
        .args([
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-O1",
        ])
        .arg("-I")
        .arg(root().join("include"))
        .arg(root().join("tests/c/host.c"))
        .arg(&lib)
        // What the Rust standard library in a hosted static library needs on Linux
        // (`--print native-static-libs`); the C library itself uses none of it.
        .args(["-lpthread", "-ldl", "-lm"])
        .arg("-o")
        .arg(&exe));
    exe
}

/// A move of host.c's lookahead: unavailable off the 6x6 grid; entering the goal (5, 5)
/// pays 1 and ends the episode.
struct GridMove(f32, f32);

impl Controller for GridMove {
    fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, Error> {
        let (r, c) = (state[0] + self.0, state[1] + self.1);
        if !(0.0..=5.0).contains(&r) || !(0.0..=5.0).contains(&c) {
            return Err(Error::Controller);
        }
        next.copy_from_slice(&[r, c]);
        let terminal = r == 5.0 && c == 5.0;
        Ok(Outcome {
            reward: if terminal { 1.0 } else { 0.0 },
            terminal,
        })
    }
}

fn bits(v: f32) -> String {
    format!("{:08x}", v.to_bits())
}

#[test]
fn c_program_matches_the_rust_runtime() {
    assert!(
        grid_model().is_file(),
        "the shipped grid model {} is missing",
        grid_model().display()
    );
    let exe = build_host_program();
    let out = run(Command::new(&exe).arg(grid_model()).arg(gated_model()));
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split(' ').collect()).collect();
    let find = |key: &str| -> Vec<&Vec<&str>> { lines.iter().filter(|l| l[0] == key).collect() };

    // Every check of the C program passed (its exit status says so too).
    let checks = find("check");
    assert!(checks.len() > 30, "{out}");
    for c in &checks {
        assert_eq!(c[2], "ok", "C check {} failed:\n{out}", c[1]);
    }
    assert_eq!(find("failures"), [&vec!["failures", "0"]]);

    // The 36 grid values, bit for bit.
    let bytes = std::fs::read(grid_model()).expect("grid model");
    let model = Model::new_checked(&bytes).expect("grid model loads");
    let mut scratch = vec![0.0f32; model.scratch_len()];
    let values: HashMap<(i32, i32), &str> = find("v")
        .iter()
        .map(|l| ((l[1].parse().unwrap(), l[2].parse().unwrap()), l[3]))
        .collect();
    assert_eq!(values.len(), 36, "{out}");
    for r in 0..6 {
        for c in 0..6 {
            let v = model.value(&[r as f32, c as f32], &mut scratch).unwrap();
            assert_eq!(values[&(r, c)], bits(v), "V({r}, {c}) differs");
        }
    }

    // Metadata, the full evaluation and selection.
    let info = find("info")[0];
    assert_eq!(
        info[1..4],
        [
            "2",
            &model.output_dim().to_string(),
            &model.scratch_len().to_string()
        ]
    );
    assert_eq!(info[5], model.macs().to_string());
    assert_eq!(info[7], bits(model.gamma()));
    let out0 = model.evaluate(&[0.0, 0.0], &mut scratch).unwrap();
    let mut expected = vec![
        "evaluate".to_string(),
        bits(out0.value),
        out0.best.unwrap().to_string(),
    ];
    expected.extend(out0.outputs.iter().map(|&q| bits(q)));
    assert_eq!(*find("evaluate")[0], expected);

    let cand: [[f32; 2]; 8] = [
        [0., 0.],
        [1., 0.],
        [0., 0.],
        [0., 1.],
        [0., 0.],
        [0., 1.],
        [1., 0.],
        [1., 1.],
    ];
    let table: Vec<&[f32]> = cand.iter().map(|c| &c[..]).collect();
    let mut report = [Candidate::default(); 8];
    let best = model
        .select(&[0.0, 0.0], &table, &mut scratch, &mut report)
        .unwrap();
    assert_eq!(find("select")[0][1], best.to_string());
    let rows: Vec<Predicted> = cand
        .iter()
        .enumerate()
        .map(|(k, c)| Predicted {
            next: c,
            outcome: if k == 3 {
                Outcome {
                    reward: 0.5,
                    terminal: true,
                }
            } else {
                Outcome::default()
            },
        })
        .collect();
    let best = model
        .select(&[0.0, 0.0], &rows, &mut scratch, &mut report)
        .unwrap();
    let mut expected = vec!["select-report".to_string(), best.to_string()];
    expected.extend(report.iter().map(|c| {
        let status = c.status as i32;
        format!("{status}:{}:{}", bits(c.value), bits(c.score))
    }));
    assert_eq!(*find("select-report")[0], expected);

    // Lookahead with a C callback: every pick and report.
    let moves: Vec<GridMove> = [
        (-1., 0.),
        (1., 0.),
        (0., -1.),
        (0., 1.),
        (-1., -1.),
        (-1., 1.),
        (1., -1.),
        (1., 1.),
    ]
    .iter()
    .map(|&(r, c)| GridMove(r, c))
    .collect();
    let ahead = find("select-ahead");
    assert_eq!(ahead.len(), 9, "{out}");
    for l in ahead {
        let start = [l[1].parse::<f32>().unwrap(), l[2].parse().unwrap()];
        let depth: usize = l[3].parse().unwrap();
        let mut scratch = vec![0.0f32; model.lookahead_scratch_len(depth)];
        let best = model
            .select_ahead(&start, &moves, depth, &mut scratch, &mut report)
            .unwrap();
        let mut expected: Vec<String> = l[..4].iter().map(|s| s.to_string()).collect();
        expected.push(best.to_string());
        expected.extend(report.iter().map(|c| {
            let status = c.status as i32;
            format!("{status}:{}:{}", bits(c.value), bits(c.score))
        }));
        assert_eq!(**l, expected);
    }

    // Refused files name the runtime's error, and the messages are the runtime's.
    for l in find("refused") {
        assert!(l[2].parse::<i32>().unwrap() < 0, "{l:?}");
    }
    let message = |code: &str| -> String {
        let l = out
            .lines()
            .find(|l| l.starts_with(&format!("error-str {code} ")))
            .unwrap();
        l.splitn(3, ' ').nth(2).unwrap().to_string()
    };
    let truncated = Model::new_checked(&bytes[..bytes.len() - 1]).unwrap_err();
    let refused = find("refused")
        .into_iter()
        .find(|l| l[1] == "truncated-last-byte")
        .unwrap();
    assert_eq!(message(refused[2]), truncated.to_string());

    // The density gate and shaping.
    let bytes = std::fs::read(gated_model()).expect("gated model");
    let model = Model::new_checked(&bytes).unwrap();
    let mut scratch = vec![0.0f32; model.scratch_len()];
    let states = [[1.0f32, 1.0], [4.0, 4.0], [100.0, -100.0]];
    for (i, s) in states.iter().enumerate() {
        let g = model.gated_value(s, &mut scratch).unwrap();
        let expected = [
            "gated".to_string(),
            i.to_string(),
            bits(g.value),
            bits(g.raw_value),
            bits(g.log_density.unwrap()),
            (g.in_distribution as i32).to_string(),
        ];
        assert_eq!(*find("gated")[i], expected);
    }
    let shaped = model
        .shaped_reward(&states[0], Outcome::default(), &states[1], &mut scratch)
        .unwrap();
    assert_eq!(find("shaped")[0][2], bits(shaped));
    let done = Outcome {
        reward: 1.0,
        terminal: true,
    };
    let shaped = model
        .shaped_reward(&states[0], done, &states[1], &mut scratch)
        .unwrap();
    assert_eq!(find("shaped")[1][2], bits(shaped));
}
