//! The `laq` command line, end to end.

mod common;

use common::{laq, metrics, ok, predicted};
use std::path::Path;
use std::process::Command;

#[test]
fn bad_inputs_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    ok(&["gen", "gridworld", "--episodes", "50", "--out", &p("g.npz")]);
    // A corrupt model: a clear error, non-zero exit, no output file.
    let bytes = std::fs::read("../models/gridworld/value.safetensors").unwrap();
    for cut in [0, 7, 100, bytes.len() - 1] {
        std::fs::write(p("bad.safetensors"), &bytes[..cut]).unwrap();
        let out = laq(&[
            "predict",
            "--model",
            &p("bad.safetensors"),
            "--data",
            &p("g.npz"),
            "--out",
            &p("v.csv"),
        ]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("error:") && err.contains("bad.safetensors"),
            "{err}"
        );
        assert!(!Path::new(&p("v.csv")).exists());
    }
    // A missing file and a file that is not a dataset.
    let out = laq(&["train", "--data", &p("missing.npz"), "--out", &p("run")]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.npz"));
    std::fs::write(p("junk.npz"), b"not a zip").unwrap();
    let out = laq(&["train", "--data", &p("junk.npz"), "--out", &p("run")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!Path::new(&p("run")).exists());
    // States wider than the runtime evaluates: refused before any training, naming the
    // file and the limit, where the run once trained and wrote a model nothing could load.
    let d = laq_runtime::MAX_INPUT_DIM + 1;
    let wide = laq::data::Dataset {
        obs_shape: vec![d],
        observations: vec![0.5f32; 4 * d].into(),
        next_observations: vec![0.25f32; 4 * d].into(),
        rewards: vec![0.0, 0.0, 0.0, 1.0],
        terminals: vec![false, false, false, true],
        timeouts: None,
        next_missing: None,
        actions: None,
    };
    wide.save(Path::new(&p("wide.safetensors"))).unwrap();
    let out = laq(&[
        "train",
        "--data",
        &p("wide.safetensors"),
        "--out",
        &p("run"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("wide.safetensors") && err.contains(&format!("at most {} inputs", d - 1)),
        "{err}"
    );
    assert!(!Path::new(&p("run")).exists());
}

#[test]
fn ground_truth_labels_need_actions() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.npz");
    let data = laq::envs::gridworld::GridWorld::default().generate(30, 0, 0.0);
    let mut arrays = data.to_arrays();
    arrays.remove("actions");
    laq::data::write_arrays(&g, &arrays).unwrap();
    let out = laq(&[
        "train",
        "--data",
        g.to_str().unwrap(),
        "--out",
        dir.path().join("r").to_str().unwrap(),
        "--labels",
        "gt",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs ground-truth `actions`"));
}

/// The shipped model is what the documented command produces, bit for bit.
#[test]
fn shipped_gridworld_model_is_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("grid.npz");
    let run = dir.path().join("run");
    ok(&[
        "gen",
        "gridworld",
        "--episodes",
        "20000",
        "--seed",
        "0",
        "--out",
        data.to_str().unwrap(),
    ]);
    ok(&[
        "train",
        "--data",
        data.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
        "--seed",
        "0",
    ]);
    let shipped = std::fs::read("../models/gridworld/value.safetensors").unwrap();
    let fresh = std::fs::read(run.join("value.safetensors")).unwrap();
    assert!(shipped == fresh, "models/gridworld/value.safetensors differs from a fresh run: regenerate it (see models/gridworld/README.md)");
}

/// The shipped maze model (used by the `maze_guide` firmware) comes out of its documented
/// commands bit for bit.
#[test]
fn shipped_maze_model_is_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("maze.npz");
    let run = dir.path().join("run");
    let (d, r) = (data.to_str().unwrap(), run.to_str().unwrap());
    ok(&[
        "gen", "maze2d", "--layout", "umaze", "--steps", "200000", "--seed", "0", "--out", d,
    ]);
    ok(&["train", "--data", d, "--out", r, "--seed", "0"]);
    let shipped = std::fs::read("../models/maze2d/value.safetensors").unwrap();
    let fresh = std::fs::read(run.join("value.safetensors")).unwrap();
    assert!(shipped == fresh, "models/maze2d/value.safetensors differs from a fresh run: regenerate it (see models/maze2d/README.md)");
}

/// `laq train` on a dataset that is not the built-in grid: a 7x5 grid with a wall,
/// written here, with continuous-looking offsets so DQN is used.
#[test]
fn train_works_on_other_data() {
    use laq::data::{Actions, Dataset};
    let (rows, cols) = (5i32, 7i32);
    let wall = |r: i32, c: i32| c == 3 && r < 4;
    let goal = (0, 6);
    let mut next_rand = common::xorshift(12345);
    let (mut o, mut n, mut r, mut t, mut a) = (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..400 {
        let mut pos = (0i32, 0i32);
        for _ in 0..60 {
            let act = (next_rand() % 4) as i64;
            let (dr, dc) = [(-1, 0), (1, 0), (0, -1), (0, 1)][act as usize];
            let mut np = (pos.0 + dr, pos.1 + dc);
            if np.0 < 0 || np.0 >= rows || np.1 < 0 || np.1 >= cols || wall(np.0, np.1) {
                np = pos;
            }
            let done = np == goal;
            o.extend([pos.0 as f32 + 0.5, pos.1 as f32 + 0.25]);
            n.extend([np.0 as f32 + 0.5, np.1 as f32 + 0.25]);
            r.push(done as u8 as f32);
            t.push(done);
            a.push(act);
            pos = np;
            if done {
                break;
            }
        }
    }
    let data = Dataset {
        obs_shape: vec![2],
        observations: o.into(),
        next_observations: n.into(),
        rewards: r,
        terminals: t,
        timeouts: None,
        next_missing: None,
        actions: Some(Actions::Discrete(a)),
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("walls.safetensors");
    data.save(&file).unwrap();
    let run = dir.path().join("run");
    let summary = ok(&[
        "train",
        "--data",
        file.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
        "--latent-actions",
        "4",
        "--mining-steps",
        "600",
        "--mining-restarts",
        "2",
        "--dqn-steps",
        "3000",
    ]);
    assert!(summary.contains("dqn"), "{summary}");
    let m = metrics(&run.join("metrics.json"));
    assert_eq!(m["q"], "dqn");
    // Next to the goal beats the far side of the wall.
    let model = laq::export::ValueModel::load(&run.join("value.safetensors")).unwrap();
    let v = model
        .values_candle(&[0.5, 5.25, 4.5, 0.25], &candle_core::Device::Cpu)
        .unwrap();
    assert!(v[0] > v[1], "{v:?}");
}

/// `laq train --resume` after a real kill (SIGKILL, at whatever step the process had
/// reached) writes the same model as an uninterrupted run; a fresh run refuses a
/// directory holding an unfinished one.
#[test]
fn train_resumes_after_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    ok(&[
        "gen",
        "maze2d",
        "--steps",
        "20000",
        "--seed",
        "4",
        "--out",
        &p("m.npz"),
    ]);
    let args = |out: &str| {
        vec![
            "train".to_string(),
            "--data".into(),
            p("m.npz"),
            "--out".into(),
            out.to_string(),
            "--mining-steps".into(),
            "600".into(),
            "--dqn-steps".into(),
            "3000".into(),
            "--seed".into(),
            "2".into(),
        ]
    };
    ok(&args(&p("whole"))
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());

    let mut a = args(&p("killed"));
    a.extend(["--checkpoint-secs".into(), "0".into()]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_laq"))
        .args(&a)
        .env("LAQ_QUIET", "1")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ckpt = dir.path().join("killed").join("checkpoint.safetensors");
    let t = std::time::Instant::now();
    while !ckpt.exists() && t.elapsed().as_secs() < 120 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Let it run past the first checkpoints, then kill it mid-run.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        ckpt.exists() && !dir.path().join("killed/value.safetensors").exists(),
        "the run finished before it could be killed"
    );
    let again = laq(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success() && err.contains("--resume"), "{err}");

    let out = ok(&["train", "--resume", &p("killed")]);
    assert!(out.contains("wrote"), "{out}");
    assert!(!ckpt.exists(), "the checkpoint outlived the run");
    let read = |d: &str| std::fs::read(dir.path().join(d).join("value.safetensors")).unwrap();
    assert!(read("whole") == read("killed"), "resumed model differs");

    let none = laq(&["train", "--resume", &p("whole")]);
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(
        !none.status.success() && err.contains("checkpoint.safetensors"),
        "{err}"
    );
}

/// A TOML file from `laq config default` drives `laq train`, flags override it, and a run
/// directory alone is enough to repeat the run bit for bit.
#[test]
fn config_files_and_repeated_runs() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    ok(&[
        "gen",
        "gridworld",
        "--episodes",
        "300",
        "--out",
        &p("g.npz"),
    ]);
    let toml = ok(&["config", "default", "--data", &p("g.npz")]);
    let toml = toml.replace("steps = 3000", "steps = 400");
    std::fs::write(p("laq.toml"), &toml).unwrap();
    ok(&[
        "train",
        "--data",
        &p("g.npz"),
        "--out",
        &p("a"),
        "--config",
        &p("laq.toml"),
        "--seed",
        "5",
    ]);
    let saved = std::fs::read_to_string(dir.path().join("a/config.toml")).unwrap();
    assert!(
        saved.contains("seed = 5") && saved.contains("steps = 400"),
        "{saved}"
    );
    // The run directory shows what was learned.
    for f in [
        "loss_mining.png",
        "loss_q.png",
        "label_usage.png",
        "value.png",
    ] {
        let png = std::fs::read(dir.path().join("a").join(f)).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{f}");
    }
    let report = std::fs::read_to_string(dir.path().join("a/report.md")).unwrap();
    assert!(
        report.contains("](value.png)") && report.contains("seed = 5"),
        "{report}"
    );
    ok(&["train", "--repeat", &p("a"), "--out", &p("b")]);
    let read = |d: &str| std::fs::read(dir.path().join(d).join("value.safetensors")).unwrap();
    assert!(read("a") == read("b"));

    std::fs::write(p("bad.toml"), "[mining]\nstepz = 3\n").unwrap();
    let out = laq(&[
        "train",
        "--data",
        &p("g.npz"),
        "--out",
        &p("c"),
        "--config",
        &p("bad.toml"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("mining.stepz") && err.contains("bad.toml"),
        "{err}"
    );
    assert!(!dir.path().join("c/value.safetensors").exists());
}

/// `laq convert` on a D4RL-style HDF5 file (chunked, gzip-compressed, no
/// `next_observations`) and on a Minari dataset with a dict observation, then `laq train`
/// on the converted file.
#[test]
fn convert_d4rl_and_minari_then_train() {
    use hdf5_writer::{
        ByteOrder, DatasetBuilder, Datatype, EnumMember, FilterDescription, H5WriteElement,
        Hdf5Builder, WriteOptions, FILTER_DEFLATE,
    };
    /// The arrays of a file to write, each chunked and compressed; their paths name groups.
    struct File(Hdf5Builder);
    impl File {
        fn put<T: H5WriteElement>(self, name: &str, shape: &[usize], v: &[T]) -> Self {
            let d = DatasetBuilder::typed_data(name, dims(shape), v).unwrap();
            self.add(d, shape)
        }
        /// Booleans as h5py writes them: an enum over i8, FALSE = 0 and TRUE = 1.
        fn put_bool(self, name: &str, v: &[bool]) -> Self {
            let member = |name: &str, value| EnumMember {
                name: name.into(),
                value: vec![value],
            };
            let ty = Datatype::Enum {
                base: Box::new(i8::hdf5_type_with_order(ByteOrder::LittleEndian)),
                members: vec![member("FALSE", 0), member("TRUE", 1)],
            };
            let bytes: Vec<u8> = v.iter().map(|&b| b as u8).collect();
            let d = DatasetBuilder::new(name, ty, [v.len() as u64]).raw_data(bytes);
            self.add(d, &[v.len()])
        }
        fn add(self, d: DatasetBuilder, shape: &[usize]) -> Self {
            let chunk: Vec<u64> = dims(shape).iter().map(|&d| d.clamp(1, 64)).collect();
            let deflate = FilterDescription {
                id: FILTER_DEFLATE,
                name: None,
                client_data: vec![4],
            };
            File(self.0.dataset(d.chunked(chunk).filter(deflate)))
        }
        fn save(self, path: &str) {
            let plan = self.0.into_plan().unwrap();
            std::fs::write(path, plan.encode(WriteOptions::default()).unwrap()).unwrap();
        }
    }
    fn dims(shape: &[usize]) -> Vec<u64> {
        shape.iter().map(|&d| d as u64).collect()
    }
    let file = || File(Hdf5Builder::new());
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();

    // A point mass on a line segment [0, 10]; the goal is at 10. Episodes of 40 steps end
    // in a timeout, or earlier in a terminal at the goal.
    let (mut obs, mut act, mut rew, mut term, mut tout) = (vec![], vec![], vec![], vec![], vec![]);
    let mut next_rand = common::xorshift(7);
    let (mut episodes, mut goals) = (0, 0);
    for _ in 0..15 {
        let mut x = 0.0f32;
        episodes += 1;
        for step in 0..40 {
            let a = if next_rand().is_multiple_of(3) {
                -1.0f32
            } else {
                1.0
            };
            let goal = x >= 10.0;
            obs.extend([x, 1.0]);
            act.push(a);
            rew.push(x / 10.0);
            term.push(goal);
            tout.push(!goal && step == 39);
            if goal {
                goals += 1;
                break;
            }
            x = (x + a).max(0.0);
        }
    }
    let n = rew.len();
    file()
        .put("observations", &[n, 2], &obs)
        .put("actions", &[n, 1], &act)
        .put("rewards", &[n], &rew)
        .put_bool("terminals", &term)
        .put_bool("timeouts", &tout)
        .save(&p("d4rl.hdf5"));
    let summary = ok(&["convert", &p("d4rl.hdf5"), "--out", &p("d4rl.npz")]);
    // The last row of each episode has no next observation: a terminal one (at the goal)
    // is kept, the others are dropped.
    assert!(goals > 0);
    let kept = n - episodes + goals;
    assert!(
        summary.contains(&format!(
            "(D4RL): {kept} transitions from {episodes} episodes"
        )) && summary.contains(&format!("dropped rows: {}", episodes - goals)),
        "{summary}"
    );
    assert!(
        summary.contains(&format!(
            "terminal rows without a next observation: {goals}"
        )),
        "{summary}"
    );
    let run = dir.path().join("run");
    ok(&[
        "train",
        "--data",
        &p("d4rl.npz"),
        "--out",
        run.to_str().unwrap(),
        "--latent-actions",
        "2",
        "--mining-steps",
        "50",
        "--dqn-steps",
        "50",
    ]);
    assert_eq!(metrics(&run.join("metrics.json"))["transitions"], kept);
    assert!(run.join("value.safetensors").exists());

    // Minari: two episodes whose observation is a dict; two of its keys, in this order.
    std::fs::create_dir_all(dir.path().join("minari/data")).unwrap();
    let mut f = file();
    for (e, t) in [(0usize, 5usize), (1, 4)] {
        let g = |k: &str| format!("episode_{e}/{k}");
        let x: Vec<f32> = (0..=t).map(|s| s as f32).collect();
        let mut tr = vec![false; t];
        tr[t - 1] = true;
        f = f
            .put(&g("observations/position"), &[t + 1, 1], &x)
            .put(&g("observations/goal"), &[t + 1, 1], &vec![9f32; t + 1])
            .put(&g("observations/velocity"), &[t + 1, 1], &vec![1f32; t + 1])
            .put(&g("actions"), &[t, 1], &vec![1f32; t])
            .put(&g("rewards"), &[t], &vec![0f64; t])
            .put_bool(&g("terminations"), &vec![false; t])
            .put_bool(&g("truncations"), &tr);
    }
    f.save(&p("minari/data/main_data.hdf5"));
    let summary = ok(&[
        "convert",
        "--from",
        "minari",
        &p("minari"),
        "--obs-keys",
        "position,goal",
        "--out",
        &p("m.safetensors"),
    ]);
    assert!(
        summary.contains("(Minari): 9 transitions from 2 episodes")
            && summary.contains("from keys position, goal"),
        "{summary}"
    );
    let d = laq::data::Dataset::load(dir.path().join("m.safetensors").as_path()).unwrap();
    assert_eq!(d.obs(4), [4.0, 9.0]);
    assert_eq!(d.next_obs(4), [5.0, 9.0]);
    assert_eq!(d.obs(5), [0.0, 9.0]);

    // A model trained on some keys records them; `predict` (of the run directory) and
    // `export --data` read the same data so without the flags again (three values a row
    // by default).
    let run = dir.path().join("keys");
    let (run, model) = (
        run.to_str().unwrap(),
        dir.path().join("keys/value.safetensors"),
    );
    let model = model.to_str().unwrap();
    let steps = ["--mining-steps", "20", "--dqn-steps", "20", "--q", "dqn"];
    let minari = p("minari");
    let train = [&["train", "--data", &minari, "--out", run], &steps[..]].concat();
    ok(&[&train[..], &["--obs-keys", "position,goal"]].concat());
    assert!(ok(&["inspect", model]).contains("obs_keys=position,goal"));
    let csv = p("v.csv");
    let out = laq(&["predict", "--model", run, "--data", &minari, "--out", &csv]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("trained on --obs-keys position,goal"), "{err}");
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert!(rows.starts_with("index,obs_0,obs_1,value\n"), "{rows}");
    assert_eq!(rows.lines().count(), 10);
    let m8 = p("m8.safetensors");
    let export = [
        "export",
        "--model",
        model,
        "--quantize",
        "int8",
        "--out",
        &m8,
    ];
    assert!(ok(&[&export[..], &["--data", &minari]].concat()).contains("Spearman"));
    // Keys that are not the model's are read as asked, with a warning, and refused by
    // the model's width; read flags without --data are refused.
    let other = ["--obs-keys", "position,goal,velocity"];
    let out = laq(&[&export[..], &["--data", &minari], &other[..]].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("reading --obs-keys position,goal,velocity as asked"),
        "{err}"
    );
    assert!(err.contains("expects states of 2 values"), "{err}");
    let out = laq(&[&export[..], &other[..]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("which is not given"));

    // A broken input: a clear error naming the file and the key, and no output.
    file()
        .put("observations", &[3, 1], &[0f32, 1.0, 2.0])
        .put("rewards", &[2], &[0f32, 1.0])
        .save(&p("broken.hdf5"));
    let out = laq(&["convert", &p("broken.hdf5"), "--out", &p("broken.npz")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("broken.hdf5") && err.contains("`rewards`: 2 rows, expected 3"),
        "{err}"
    );
    assert!(!Path::new(&p("broken.npz")).exists());
}

#[test]
fn nav_data_trains_with_the_convolutional_path() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("nav.npz");
    ok(&[
        "gen",
        "nav-branching",
        "--episodes",
        "3",
        "--size",
        "16",
        "--out",
        data.to_str().unwrap(),
        "--truth",
    ]);
    let info = ok(&["inspect", data.to_str().unwrap()]);
    assert!(info.contains("16"), "{info}");
    // V* of every transition, beside the data: the optimal value of its first pose.
    let truth = std::fs::read(dir.path().join("nav_truth.npy")).unwrap();
    let truth = laq::data::files::parse_npy(&truth).unwrap().to_f64();
    let env = laq::envs::nav::Nav::branching().unwrap();
    let poses = laq::envs::nav::load_poses(&data).unwrap();
    assert_eq!(truth.len(), poses.len());
    for (v, (p, _)) in truth.iter().zip(&poses) {
        assert!((v - env.optimal_value(*p)).abs() < 1e-6, "{v}");
    }
    assert!(truth.iter().any(|&v| v > 0.0));
    let run = dir.path().join("run");
    ok(&[
        "train",
        "--data",
        data.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
        "--mining-steps",
        "10",
        "--dqn-steps",
        "10",
    ]);
    let m = metrics(&run.join("metrics.json"));
    assert!(
        m["purity"].as_f64().is_some() || m["global_purity"].as_f64().is_some(),
        "{m}"
    );
    let summary = std::fs::read_to_string(run.join("summary.txt")).unwrap();
    assert!(summary.contains("[3, 16, 16]"), "{summary}");
    // Image models are written in the runtime's format.
    assert!(run.join("value.safetensors").exists());
}

/// Image observations end to end: `laq train` on `[N, C, H, W]` u8 frames (a bright
/// column moving along a row of an 8x8 image; the convolutional networks are picked
/// automatically) writes a version 2 `value.safetensors`, which `laq predict` scores
/// through the runtime and `laq inspect` describes; with BCQ too (V fitted by a
/// convolutional network for export).
#[test]
fn image_datasets_train_predict_and_inspect() {
    use laq::data::{Actions, Dataset};
    let (c, h, w) = (3usize, 8usize, 8usize);
    let frame = |col: usize| {
        let mut f = vec![10u8; c * h * w];
        for ch in 0..c {
            for y in 2..6 {
                f[ch * h * w + y * w + col] = 200 + 20 * ch as u8;
            }
        }
        f
    };
    let mut next_rand = common::xorshift(7);
    let (mut o, mut n, mut r, mut t, mut a) = (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..240 {
        let col = (next_rand() % 7) as usize;
        let act = (next_rand() % 2) as i64;
        let next = if act == 1 {
            col + 1
        } else {
            col.saturating_sub(1)
        };
        o.extend(frame(col));
        n.extend(frame(next));
        r.push((next == 7) as u8 as f32);
        t.push(next == 7);
        a.push(act);
    }
    let data = Dataset {
        obs_shape: vec![c, h, w],
        observations: o.into(),
        next_observations: n.into(),
        rewards: r,
        terminals: t,
        timeouts: None,
        next_missing: None,
        actions: Some(Actions::Discrete(a)),
    };
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    data.save(Path::new(&p("frames.safetensors"))).unwrap();
    std::fs::write(
        p("small.toml"),
        "[mining]\nlatent_actions = 2\nsteps = 30\n[mining.conv]\nchannels = [4, 4]\n\
         [dqn]\nhidden = [8]\nsteps = 60\ntarget_update = 20\n[dqn.conv]\nchannels = [4, 4]\n\
         [distill]\nhidden = [8]\nsteps = 40\n",
    )
    .unwrap();
    for q in ["dqn", "bcq"] {
        let run = p(q);
        ok(&[
            "train",
            "--data",
            &p("frames.safetensors"),
            "--out",
            &run,
            "--config",
            &p("small.toml"),
            "--q",
            q,
        ]);
        let model = Path::new(&run).join("value.safetensors");
        assert!(!Path::new(&run).join("qnet.safetensors").exists());
        let v = predicted(&model, Path::new(&p("frames.safetensors")));
        assert_eq!(v.len(), data.len());
        // The runtime's values are those of the trainer's reading of the same file
        // (candle's conv2d).
        let vm = laq::export::ValueModel::load(&model).unwrap();
        assert_eq!(vm.conv.as_ref().unwrap().input_shape, [c, h, w]);
        let states: Vec<f32> = (0..data.len())
            .flat_map(|i| data.obs_row(i).into_owned())
            .collect();
        let want = vm
            .values_candle(&states, &candle_core::Device::Cpu)
            .unwrap();
        for (i, (a, b)) in v.iter().zip(&want).enumerate() {
            assert!(
                (a - f64::from(*b)).abs() <= 1e-5 * f64::from(b.abs()).max(1.0),
                "{q} row {i}: {a} vs {b}"
            );
        }
        let m = metrics(&Path::new(&run).join("metrics.json"));
        assert_eq!(m["q"], q);
        if q == "bcq" {
            assert!(m["export_max_abs_error"].as_f64().unwrap().is_finite());
            assert_eq!(vm.num_outputs(), 1);
        }
        let report = ok(&["inspect", model.to_str().unwrap(), "--json"]);
        let j: serde_json::Value = serde_json::from_str(&report).unwrap();
        assert_eq!(j["version"], 2);
        assert_eq!(j["input_shape"], serde_json::json!([c, h, w]));
        assert_eq!(j["conv_layers"].as_array().unwrap().len(), 2);
    }
    // int8 export of an image model: the linear layers calibrated on the frames, the
    // convolutions kept in f32; the runtime reads it back.
    let compared = ok(&[
        "export",
        "--model",
        &p("dqn/value.safetensors"),
        "--quantize",
        "int8",
        "--data",
        &p("frames.safetensors"),
        "--out",
        &p("q8.safetensors"),
    ]);
    assert!(compared.contains("Spearman"), "{compared}");
    let report = ok(&["inspect", &p("q8.safetensors"), "--json"]);
    let j: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(j["conv_layers"][0]["weights"], "f32");
    assert_eq!(j["layers"][0]["weights"], "i8");
    // A model for other images is refused with both shapes named.
    let other = Dataset {
        obs_shape: vec![c, w, h * 2],
        observations: vec![0u8; c * h * w * 2].into(),
        next_observations: vec![0u8; c * h * w * 2].into(),
        rewards: vec![0.0],
        terminals: vec![false],
        timeouts: None,
        next_missing: None,
        actions: None,
    };
    other.save(Path::new(&p("wide.safetensors"))).unwrap();
    let out = laq(&[
        "predict",
        "--model",
        &p("dqn/value.safetensors"),
        "--data",
        &p("wide.safetensors"),
        "--out",
        &p("wide.csv"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("[3, 8, 8]") && err.contains("[3, 8, 16]"),
        "{err}"
    );
}

/// `laq ... | head` closes the pipe early: the program ends quietly, without a panic.
#[test]
fn a_closed_stdout_pipe_is_not_a_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_laq"))
        .args(["config", "default"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the program writes anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.success(), "{err}");
}

#[test]
fn bench_prints_its_figures_as_json() {
    let out = ok(&[
        "bench",
        "--quick",
        "--json",
        "--image-size",
        "8",
        "--image-batch",
        "4",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON only on stdout");
    for step in ["mining", "dqn"] {
        for key in ["laq_ms", "pytorch_ms", "speedup_vs_pytorch"] {
            let x = v["steps"][step][key].as_f64().unwrap_or(-1.0);
            assert!(x > 0.0, "steps.{step}.{key}: {}", v["steps"][step]);
        }
    }
    for row in [
        "select8_mlp128",
        "select8_mlp64",
        "value_mlp128",
        "value_mlp64",
    ] {
        for key in ["runtime_us", "candle_us"] {
            let x = v["inference"][row][key].as_f64().unwrap_or(-1.0);
            assert!(x > 0.0, "inference.{row}.{key}: {}", v["inference"]);
        }
    }
    assert!(v["images"]["cpu"]["mining_ms"].as_f64().unwrap() > 0.0);
}

/// An output never replaces an input (`predict` and `export` once overwrote the dataset
/// they read), a model is not calibrated on states it cannot take, and a setting out of
/// its range is refused before a run directory exists.
#[test]
fn outputs_never_replace_inputs_and_settings_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    ok(&["gen", "gridworld", "--episodes", "20", "--out", &p("g.npz")]);
    std::fs::copy("../models/gridworld/value.safetensors", p("m.safetensors")).unwrap();
    let data = std::fs::read(p("g.npz")).unwrap();
    let model = std::fs::read(p("m.safetensors")).unwrap();
    let refused = |args: &[&str], names: &[&str]| {
        let out = laq(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(names.iter().all(|n| err.contains(n)), "{args:?}: {err}");
    };
    let m = p("m.safetensors");
    let g = p("g.npz");
    let same_model = format!("{}/./m.safetensors", dir.path().display());
    for out in [&g, &m, &same_model] {
        refused(
            &["predict", "--model", &m, "--data", &g, "--out", out],
            &["--out"],
        );
    }
    refused(
        &["export", "--model", &m, "--out", &same_model],
        &["is the input"],
    );
    refused(&["export", "--model", &m, "--out", &g], &["`.npz`"]);
    // States of 4 values for a model of 2: refused before the int8 file is written.
    ok(&["gen", "maze2d", "--steps", "300", "--out", &p("maze.npz")]);
    let int8 = p("int8.safetensors");
    let args = [
        "export",
        "--model",
        &m,
        "--quantize",
        "int8",
        "--data",
        &p("maze.npz"),
    ];
    refused(
        &[&args[..], &["--out", &int8]].concat(),
        &["m.safetensors", "4"],
    );
    assert!(!Path::new(&int8).exists());
    assert_eq!(std::fs::read(p("g.npz")).unwrap(), data);
    assert_eq!(std::fs::read(p("m.safetensors")).unwrap(), model);
    // Rewards taken from a key the dataset needs too keep that key.
    let text = ok(&["inspect", &g, "--reward", "terminals"]);
    assert!(
        text.contains("episodes: 20 ") && text.contains("20 terminals"),
        "{text}"
    );
    // A discount of 1.5 in a settings file names the setting; no run directory is left.
    let text = ok(&["config", "default"]).replace("gamma = 0.99", "gamma = 1.5");
    std::fs::write(p("bad.toml"), text).unwrap();
    let run = p("run");
    let args = [
        "train",
        "--data",
        &g,
        "--out",
        &run,
        "--config",
        &p("bad.toml"),
    ];
    refused(&args, &["gamma", "1.5"]);
    assert!(!Path::new(&run).exists());
    // A folder of the user's own files is not a run directory: nothing in it is replaced.
    let own = dir.path().join("own");
    std::fs::create_dir(&own).unwrap();
    std::fs::write(own.join("report.md"), "mine").unwrap();
    let own = own.to_str().unwrap();
    refused(&["train", "--data", &g, "--out", own], &["own", "run.json"]);
    // Nor a study's: a study writes its figures, models and data there.
    for study in ["gridworld", "maze2d", "nav"] {
        refused(&["reproduce", study, "--out", own], &["own", "study.json"]);
    }
    assert_eq!(std::fs::read_dir(own).unwrap().count(), 1);
    assert_eq!(std::fs::read_to_string(p("own/report.md")).unwrap(), "mine");
}
