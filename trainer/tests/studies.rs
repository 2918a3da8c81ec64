//! `laq reproduce`: the paper's studies end to end, at full or toy size.

mod common;

use common::{laq, metrics, ok, predicted};

/// The paper's grid-world claims, computed from scratch by `laq reproduce gridworld`.
#[test]
fn reproduce_gridworld_meets_the_papers_claims() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("grid");
    let report = ok(&["reproduce", "gridworld", "--out", out.to_str().unwrap()]);
    assert!(
        report.contains("latent") && report.contains("Sticky"),
        "{report}"
    );
    let m = metrics(&out.join("metrics.json"));
    let get = |s: &str, k: &str| m["methods"][s][k].as_f64().unwrap();
    for s in [
        "latent",
        "single",
        "gt",
        "gt_refined4",
        "impure",
        "cluster",
        "cluster_diff",
    ] {
        for k in ["spearman", "purity", "value_mse", "behavior_accuracy"] {
            assert!(get(s, k).is_finite(), "{s}.{k}");
        }
    }
    assert!(
        get("latent", "purity") >= 0.98,
        "{}",
        get("latent", "purity")
    );
    assert!(get("latent", "spearman") >= 0.95);
    assert!(get("single", "spearman") < 0.5);
    assert!(get("gt_refined4", "spearman") >= 0.95);
    assert!(get("gt_refined4", "behavior_accuracy") >= get("gt", "behavior_accuracy") - 1e-9);
    assert!(get("impure", "value_mse") > 10.0 * get("gt", "value_mse"));
    assert!(get("impure", "behavior_accuracy") < get("gt", "behavior_accuracy"));
    assert_eq!(get("gt", "spearman"), 1.0);
    assert_eq!(m["sticky"].as_array().unwrap().len(), 5);
    assert!(out.join("model/value.safetensors").exists());
    // The exported model is evaluated through the runtime by `laq predict`.
    let rows = predicted(&out.join("model/value.safetensors"), &out.join("grid.npz"));
    assert_eq!(rows.len(), m["transitions"].as_u64().unwrap() as usize);
}

/// `laq reproduce maze2d` at toy size: every method gets finite Spearman figures of both
/// kinds, and the files are written.
#[test]
fn reproduce_maze2d_small() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("maze");
    let report = ok(&[
        "reproduce",
        "maze2d",
        "--out",
        out.to_str().unwrap(),
        "--steps",
        "20000",
        "--seeds",
        "1",
        "--q-steps",
        "1500",
        "--reference-steps",
        "800",
        "--shaping-seeds",
        "1",
        "--shaping-steps",
        "1500",
    ]);
    assert!(
        report.contains("latent/dqn") && report.contains("TD3+BC"),
        "{report}"
    );
    let m = metrics(&out.join("metrics.json"));
    let methods = m["methods"].as_object().unwrap();
    assert_eq!(methods.len(), 8);
    for (k, v) in methods {
        for f in [
            "spearman_gt",
            "spearman_oracle",
            "spearman_gt_p95",
            "spearman_oracle_p95",
        ] {
            let x = v[f].as_f64().unwrap();
            assert!((-1.0..=1.0).contains(&x), "{k}.{f} = {x}");
        }
    }
    assert!(out.join("maze.npz").exists() && out.join("report.txt").exists());
    // Guidance ran with the first seed's models, and every policy has figures.
    let g = &m["guidance"];
    for k in ["success", "spl"] {
        let x = g[k].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&x), "guidance.{k} = {x}");
    }
    for p in ["laq_value", "straight_to_goal", "single_value", "geodesic"] {
        assert!(g["policies"][p]["success"].is_number(), "{p}");
    }
    assert!(g["policies"]["geodesic"]["success"].as_f64().unwrap() >= 0.9);
    let per_seed = g["per_seed"].as_array().unwrap();
    assert!(!per_seed.is_empty(), "{g}");
    for p in per_seed {
        for k in ["success", "spl", "first_q_success"] {
            assert!((0.0..=1.0).contains(&p[k].as_f64().unwrap()), "{p}");
        }
        assert!(p["verdict"].is_string(), "{p}");
        // The exported V, chosen without an oracle, against GT V, in the report beside
        // the oracle's choice.
        let rho = p["selected_spearman_gt"].as_f64().unwrap();
        assert!((-1.0..=1.0).contains(&rho), "{p}");
        assert!(report.contains(&format!("V vs GT V {rho:.3}")), "{report}");
    }
    assert!(out.join("model_latent/value.safetensors").exists());
    // Both bodies ran both reward conditions and drew their figures.
    for body in ["point_mass", "unicycle"] {
        for c in ["sparse", "shaped"] {
            let f = m["shaping"][body][c]["final_success"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&f), "{body} {c} {f}");
        }
        for fig in ["success", "value"] {
            let png = std::fs::read(out.join(format!("{fig}_{body}.png"))).unwrap();
            assert!(png.starts_with(b"\x89PNG"), "{fig}_{body}.png");
        }
    }
}

/// The study's runs side by side (value study, per-seed guidance models, shaped SAC)
/// give the figures they give one after the other.
#[test]
fn maze2d_runs_in_parallel_give_the_sequential_figures() {
    let dir = tempfile::tempdir().unwrap();
    let run = |jobs: &str| {
        let out = dir.path().join(format!("maze{jobs}"));
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_laq"))
            .args(["reproduce", "maze2d", "--out"])
            .arg(&out)
            .args(["--steps", "8000", "--seeds", "2", "--q-steps", "600"])
            .args(["--reference-steps", "300"])
            .args(["--shaping-seeds", "2", "--shaping-steps", "600"])
            .env("LAQ_QUIET", "1")
            .env("LAQ_JOBS", jobs)
            .status()
            .unwrap();
        assert!(status.success());
        let m = metrics(&out.join("metrics.json"));
        assert!(m["shaping"]["unicycle"]["shaped"].is_object(), "{m}");
        let mut shaping = m["shaping"].clone();
        for body in shaping.as_object_mut().unwrap().values_mut() {
            body.as_object_mut().unwrap().remove("ms_per_update");
        }
        (
            m["methods"].clone(),
            m["guidance"]["per_seed"].clone(),
            shaping,
        )
    };
    assert_eq!(run("1"), run("2"));
}

#[test]
fn reproduce_nav_small() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nav");
    let report = ok(&[
        "reproduce",
        "nav",
        "--out",
        out.to_str().unwrap(),
        "--episodes",
        "4",
        "--size",
        "16",
        "--sources",
        "latent,gt",
        "--mining-steps",
        "20",
        "--q-steps",
        "20",
        "--spl-episodes",
        "3",
        "--seed",
        "3",
        "--ensemble",
        "2",
    ]);
    assert!(
        report.contains("latent") && report.contains("SPL"),
        "{report}"
    );
    let m = metrics(&out.join("metrics.json"));
    let methods = m["methods"].as_object().unwrap();
    assert_eq!(methods.len(), 2);
    for (k, v) in methods {
        for f in ["spearman", "purity", "spl"] {
            let x = v[f].as_f64().unwrap();
            assert!(x.is_finite() && x <= 1.0, "{k}.{f} = {x}");
        }
    }
    // Ground-truth labels are the recorded actions: pure by definition.
    assert_eq!(methods["gt"]["purity"].as_f64(), Some(1.0));
    for f in ["value_map_latent.png", "value_map_gt.png"] {
        let bytes = std::fs::read(out.join(f)).unwrap();
        assert_eq!(&bytes[..4], b"\x89PNG", "{f}");
    }
    assert!(out.join("model_latent").join("metrics.json").exists());
    // The seed draws the data and the starts, and seeds every source's training.
    assert_eq!(m["config"]["seed"].as_u64(), Some(3));
    assert_eq!(m["config"]["train"]["seed"].as_u64(), Some(3));
    let config = std::fs::read_to_string(out.join("model_latent").join("config.toml")).unwrap();
    assert!(config.contains("\nseed = 3\n"), "{config}");
    // Each source's V is the fitted mean of two Q-functions.
    assert_eq!(m["config"]["train"]["ensemble"].as_u64(), Some(2));
    assert!(config.contains("\nensemble = 2\n"), "{config}");
    if !cfg!(feature = "cuda") {
        let e = laq(&["--device", "cuda", "reproduce", "nav", "--out", "x"]);
        assert!(!e.status.success());
        let msg = String::from_utf8_lossy(&e.stderr);
        assert!(msg.contains("`cuda` feature"), "{msg}");
    }
}
