//! Firmware golden test: builds `firmware-examples` for thumbv7em-none-eabihf, runs
//! `grid_guide` in QEMU (mps2-an386, Cortex-M4F) and checks that it reaches the goal
//! on the optimal path with the same values as the host; then runs `bench_mcu`, which
//! checks the remaining code paths against the host and prints the performance figures.
//!
//! Needs `qemu-system-arm`, the `thumbv7em-none-eabihf` Rust target and `flip-link`
//! (`.ci/firmware.sh` installs all three), and the trained grid model
//! (`models/gridworld/value.safetensors`). A missing prerequisite fails the test with
//! what to install; it never passes silently.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TARGET: &str = "thumbv7em-none-eabihf";
const QEMU: &str = "qemu-system-arm";
const QEMU_ARGS: [&str; 7] = [
    "-cpu",
    "cortex-m4",
    "-machine",
    "mps2-an386",
    "-nographic",
    "-semihosting-config",
    "enable=on,target=native",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

fn require_prerequisites(root: &Path) {
    let mut missing = Vec::new();
    if !on_path(QEMU) {
        missing.push(format!(
            "{QEMU} (Debian/Ubuntu: `apt-get install -y qemu-system-arm`)"
        ));
    }
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let has_target = sysroot
        .map(|s| s.join("lib/rustlib").join(TARGET).is_dir())
        .unwrap_or(false);
    if !has_target {
        missing.push(format!(
            "the {TARGET} Rust target (`rustup target add {TARGET}`)"
        ));
    }
    if !on_path("flip-link") {
        missing.push("flip-link, the firmware's linker (`cargo install flip-link`)".into());
    }
    let model = std::env::var_os("LAQ_GRID_MODEL")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("models/gridworld/value.safetensors"));
    if !model.is_file() {
        missing.push(format!(
            "the trained grid model {} (train it first, see README)",
            model.display()
        ));
    }
    assert!(
        missing.is_empty(),
        "firmware test prerequisites missing (.ci/firmware.sh installs the tools):\n  - {}",
        missing.join("\n  - ")
    );
}

/// Builds the firmware binaries; returns the directory holding them.
fn build_firmware(root: &Path) -> PathBuf {
    let dir = root.join("firmware-examples");
    let target_dir = dir.join("target");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(&dir)
        // The firmware is its own workspace with its own target directory; do not
        // inherit the test's (its lock is held while tests run).
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .args([
            "build",
            "--release",
            "--bins",
            "--target",
            TARGET,
            "--target-dir",
        ])
        .arg(&target_dir)
        .status()
        .expect("run cargo build for firmware-examples");
    assert!(status.success(), "building firmware-examples failed");
    target_dir.join(TARGET).join("release")
}

/// Runs a firmware image in QEMU; returns (exit success, output).
fn run_qemu(elf: &Path, extra: &[&str], timeout: Duration) -> (bool, String) {
    let mut child = Command::new(QEMU)
        .args(QEMU_ARGS)
        .args(extra)
        .arg("-kernel")
        .arg(elf)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start qemu-system-arm");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).expect("read qemu output");
        out
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for qemu") {
            break status;
        }
        if start.elapsed() > timeout {
            child.kill().expect("kill qemu");
            child.wait().expect("reap qemu");
            panic!("{} did not exit within {timeout:?}", elf.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).expect("read qemu stderr");
    }
    let out = reader.join().expect("output reader");
    (status.success(), format!("{out}{err}"))
}

#[test]
fn grid_guide_runs_in_qemu() {
    let root = repo_root();
    require_prerequisites(&root);
    let bin = build_firmware(&root);

    let (ok, out) = run_qemu(&bin.join("grid_guide"), &[], Duration::from_secs(60));
    println!("{out}");
    assert!(ok, "grid_guide exited with failure:\n{out}");
    assert!(
        out.contains("V of 36 cells matches the host: true"),
        "{out}"
    );
    assert!(
        out.contains("goal reached: true, steps: 5 (optimal 5)"),
        "{out}"
    );
    assert!(out.contains("grid_guide: PASS"), "{out}");
    let steps: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("step "))
        .collect();
    assert_eq!(steps.len(), 5, "{out}");
    assert!(
        steps.last().is_some_and(|l| l.contains("-> (5, 5)")),
        "{out}"
    );

    // Instruction counts need -icount; the run also checks the int8, one_norm/density
    // and unaligned paths on the target against the host.
    let (ok, out) = run_qemu(
        &bin.join("bench_mcu"),
        &["-icount", "shift=0"],
        Duration::from_secs(120),
    );
    println!("{out}");
    assert!(ok, "bench_mcu exited with failure:\n{out}");
    assert!(out.contains("bench_mcu: PASS"), "{out}");
}
