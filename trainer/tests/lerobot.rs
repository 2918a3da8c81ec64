//! LeRobot dataset directories (v3.0) read directly by `inspect`, `train`, `predict` and
//! `convert`, and refused with one line naming the file, the key and the problem.

mod common;
use common::{laq, ok};
use parquet::basic::Compression;
use parquet::data_type::{BoolType, FloatType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

/// Cells of the corridor; the step into the last one is rewarded and ends the episode.
const CELLS: usize = 12;

/// A column as pyarrow writes it: every field nullable, lists in the three-level layout.
enum Col {
    I64(&'static str, Vec<i64>),
    F32(&'static str, Vec<f32>),
    Bool(&'static str, Vec<bool>),
    /// Lists of floats, one per row, of the lengths given.
    List(&'static str, Vec<usize>, Vec<f32>),
}

fn write_parquet(path: &Path, cols: &[Col]) {
    let mut schema = String::from("message schema {\n");
    for c in cols {
        schema += &match c {
            Col::I64(n, _) => format!("optional int64 {n};\n"),
            Col::F32(n, _) => format!("optional float {n};\n"),
            Col::Bool(n, _) => format!("optional boolean {n};\n"),
            Col::List(n, _, _) => format!(
                "optional group {n} (LIST) {{ repeated group list {{ optional float element; }} }}\n"
            ),
        };
    }
    schema += "}";
    let schema = Arc::new(parse_message_type(&schema).unwrap());
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build(),
    );
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut w = SerializedFileWriter::new(file, schema, props).unwrap();
    let mut rg = w.next_row_group().unwrap();
    for c in cols {
        let mut col = rg.next_column().unwrap().unwrap();
        match c {
            Col::I64(_, v) => {
                let def = vec![1; v.len()];
                col.typed::<Int64Type>()
                    .write_batch(v, Some(&def), None)
                    .unwrap();
            }
            Col::F32(_, v) => {
                let def = vec![1; v.len()];
                col.typed::<FloatType>()
                    .write_batch(v, Some(&def), None)
                    .unwrap();
            }
            Col::Bool(_, v) => {
                let def = vec![1; v.len()];
                col.typed::<BoolType>()
                    .write_batch(v, Some(&def), None)
                    .unwrap();
            }
            Col::List(_, lens, v) => {
                let def = vec![3; v.len()];
                let rep: Vec<i16> = lens
                    .iter()
                    .flat_map(|&l| (0..l).map(|j| i16::from(j > 0)))
                    .collect();
                col.typed::<FloatType>()
                    .write_batch(v, Some(&def), Some(&rep))
                    .unwrap();
            }
        }
        col.close().unwrap();
    }
    rg.close().unwrap();
    w.close().unwrap();
}

/// One frame of the corridor.
struct Frame {
    episode: i64,
    frame: i64,
    cell: f32,
    action: f32,
    reward: f32,
    done: bool,
}

/// Random walks along the corridor from random cells (right with probability 0.6), cut by
/// a timeout after 40 steps. A frame is a state before a step: the frame whose step
/// reaches the goal holds the reward and `next.done`, and the goal itself is never a
/// frame, as LeRobot records gym environments.
fn walks() -> Vec<Frame> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let mut frames = vec![];
    let mut episode = 0;
    while frames.len() < 3000 {
        let mut x = rng.random_range(0..CELLS - 1);
        for t in 0..40 {
            let right = rng.random::<f64>() < 0.6;
            let next = if right { x + 1 } else { x.saturating_sub(1) };
            let goal = next == CELLS - 1;
            frames.push(Frame {
                episode,
                frame: t,
                cell: x as f32,
                action: if right { 1.0 } else { -1.0 },
                reward: if goal { 1.0 } else { 0.0 },
                done: goal,
            });
            if goal {
                break;
            }
            x = next;
        }
        episode += 1;
    }
    frames
}

fn info(frames: usize, state_shape: usize, reward: bool) -> serde_json::Value {
    let scalar = |dtype: &str| json!({"dtype": dtype, "shape": [1], "names": null});
    let mut features = json!({
        "observation.state": {"dtype": "float32", "shape": [state_shape],
                              "names": ["cell", "battery"]},
        "observation.images.front": {"dtype": "video", "shape": [48, 64, 3],
                                     "names": ["height", "width", "channels"]},
        "action": {"dtype": "float32", "shape": [1], "names": ["move"]},
        "next.done": scalar("bool"),
        "timestamp": scalar("float32"),
        "frame_index": scalar("int64"),
        "episode_index": scalar("int64"),
        "index": scalar("int64"),
        "task_index": scalar("int64"),
    });
    if reward {
        features["next.reward"] = scalar("float32");
    }
    json!({
        "codebase_version": "v3.0",
        "robot_type": "corridor",
        "total_frames": frames,
        "fps": 10,
        "chunks_size": 1000,
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        "features": features,
    })
}

/// The frames as a data file, observations `[cell, 1.0]` (a robot's logs carry channels
/// that never change); `state_len` values per state list, `with_state` false to leave
/// the column out.
fn data_file(path: &Path, frames: &[&Frame], reward: bool, state_len: usize, with_state: bool) {
    let n = frames.len();
    let mut cols = vec![];
    if with_state {
        let mut v = vec![];
        for f in frames {
            v.push(f.cell);
            v.extend(std::iter::repeat_n(1.0, state_len - 1));
        }
        cols.push(Col::List("observation.state", vec![state_len; n], v));
    }
    cols.push(Col::List(
        "action",
        vec![1; n],
        frames.iter().map(|f| f.action).collect(),
    ));
    cols.push(Col::F32(
        "timestamp",
        frames.iter().map(|f| f.frame as f32 / 10.0).collect(),
    ));
    cols.push(Col::I64(
        "frame_index",
        frames.iter().map(|f| f.frame).collect(),
    ));
    cols.push(Col::I64(
        "episode_index",
        frames.iter().map(|f| f.episode).collect(),
    ));
    cols.push(Col::I64("index", (0..n as i64).collect()));
    cols.push(Col::I64("task_index", vec![0; n]));
    if reward {
        cols.push(Col::F32(
            "next.reward",
            frames.iter().map(|f| f.reward).collect(),
        ));
    }
    cols.push(Col::Bool(
        "next.done",
        frames.iter().map(|f| f.done).collect(),
    ));
    write_parquet(path, &cols);
}

/// The corridor as a LeRobot dataset in two data files, the second with its rows in
/// reverse order (the frames' indices, not the rows' order, give the time order).
/// Returns the episodes that reach the goal.
fn corridor(dir: &Path, reward: bool) -> usize {
    let frames = walks();
    let half = frames.len() / 2;
    let cut = frames
        .iter()
        .position(|f| f.episode == frames[half].episode)
        .unwrap();
    let all: Vec<&Frame> = frames.iter().collect();
    data_file(
        &dir.join("data/chunk-000/file-000.parquet"),
        &all[..cut],
        reward,
        2,
        true,
    );
    let rest: Vec<&Frame> = all[cut..].iter().rev().copied().collect();
    data_file(
        &dir.join("data/chunk-000/file-001.parquet"),
        &rest,
        reward,
        2,
        true,
    );
    write_info(dir, &info(frames.len(), 2, reward));
    frames.iter().filter(|f| f.done).count()
}

fn write_info(dir: &Path, info: &serde_json::Value) {
    std::fs::create_dir_all(dir.join("meta")).unwrap();
    std::fs::write(
        dir.join("meta/info.json"),
        serde_json::to_string_pretty(info).unwrap(),
    )
    .unwrap();
}

#[test]
fn lerobot_directory_reads_directly_and_v_rises_towards_the_goal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("corridor");
    let goals = corridor(&dir, true);
    let d = dir.to_str().unwrap();

    let report = ok(&["inspect", d]);
    assert!(report.contains("read as LeRobot"), "{report}");
    assert!(
        report.contains(&format!(
            "{goals} terminal rows without a next observation, kept"
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!("{goals} non-zero")),
        "every reward kept: {report}"
    );
    assert!(
        report.contains("rows left out") && report.contains("without `next.done`"),
        "{report}"
    );
    assert!(
        report.contains("cameras left out: observation.images.front"),
        "{report}"
    );
    assert!(!report.contains("not the following row"), "{report}");

    let run = tmp.path().join("run");
    let r = run.to_str().unwrap();
    let summary = ok(&["train", "--data", d, "--out", r]);
    assert!(
        summary.contains("terminal rows without a next observation")
            && summary.contains("rows left out"),
        "the run reports what reading did: {summary}"
    );
    let csv = tmp.path().join("v.csv");
    let model = run.join("value.safetensors");
    ok(&[
        "predict",
        "--model",
        model.to_str().unwrap(),
        "--data",
        d,
        "--out",
        csv.to_str().unwrap(),
    ]);
    let (mut cell, mut value) = (vec![], vec![]);
    for line in std::fs::read_to_string(&csv).unwrap().lines().skip(1) {
        let cols: Vec<f64> = line.split(',').map(|c| c.parse().unwrap()).collect();
        cell.push(cols[1]);
        value.push(cols[3]);
    }
    let rho = laq::util::stats::spearman(&cell, &value);
    println!("Spearman of V against the distance along the corridor: {rho:.3}");
    assert!(
        rho >= 0.9,
        "V against the distance along the corridor: {rho:.3}"
    );

    // The same transitions written once in the dataset format.
    let npz = tmp.path().join("c.npz");
    let out = ok(&["convert", d, "--out", npz.to_str().unwrap()]);
    assert!(out.contains("read as LeRobot"), "{out}");
    let direct = laq::data::Dataset::load(&dir).unwrap();
    assert_eq!(laq::data::Dataset::load(&npz).unwrap(), direct);

    // A camera is refused by name when asked for; a feature that is not there, too.
    for (keys, needle) in [
        (
            "observation.images.front",
            "feature `observation.images.front` is a camera (dtype video): decoding videos \
             is not supported yet",
        ),
        ("observation.nope", "no feature `observation.nope`"),
    ] {
        let out = laq(&["inspect", d, "--obs-keys", keys]);
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && e.contains(needle), "{e}");
        assert!(
            e.contains("info.json") && e.trim().lines().count() == 1,
            "{e}"
        );
    }
    // Features side by side.
    let report = ok(&["inspect", d, "--obs-keys", "observation.state,action"]);
    assert!(
        report.contains("features observation.state, action side by side"),
        "{report}"
    );
}

#[test]
fn lerobot_without_rewards_asks_for_a_source() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demos");
    let goals = corridor(&dir, false);
    let d = dir.to_str().unwrap();

    let out = laq(&["inspect", d]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{e}");
    for needle in [
        "info.json",
        "no rewards",
        "next.reward",
        "episode-end",
        ".csv",
    ] {
        assert!(e.contains(needle), "{needle}: {e}");
    }
    assert_eq!(e.trim().lines().count(), 1, "{e}");

    let report = ok(&["inspect", d, "--reward", "episode-end"]);
    assert!(
        report.contains("rewards: 1 on the last transition"),
        "{report}"
    );
    // A CSV names frames as LeRobot does: episode_index, frame_index.
    let csv = tmp.path().join("r.csv");
    std::fs::write(&csv, "episode,step\n0,3\n2,0\n").unwrap();
    let report = ok(&["inspect", d, "--reward", csv.to_str().unwrap()]);
    assert!(report.contains("2 non-zero"), "{report}");
    std::fs::write(&csv, "episode,step\n0,999\n").unwrap();
    let out = laq(&["inspect", d, "--reward", csv.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("r.csv line 2: episode 0, frame 999"),
        "{e}"
    );
    // A feature as the reward: `next.done` marks the goal here.
    let report = ok(&["inspect", d, "--reward", "next.done"]);
    assert!(report.contains(&format!("{goals} non-zero")), "{report}");
}

/// A small dataset to break: two episodes of three frames.
fn small(dir: &Path) {
    let frames: Vec<Frame> = (0..6)
        .map(|i| Frame {
            episode: i / 3,
            frame: i % 3,
            cell: i as f32,
            action: 1.0,
            reward: 0.0,
            done: i == 5,
        })
        .collect();
    let all: Vec<&Frame> = frames.iter().collect();
    data_file(
        &dir.join("data/chunk-000/file-000.parquet"),
        &all,
        true,
        2,
        true,
    );
    write_info(dir, &info(6, 2, true));
}

/// The one-line error `laq inspect` gives for the dataset at `dir`.
fn error(dir: &Path) -> String {
    let out = laq(&["inspect", dir.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "accepted: {e}");
    assert!(!e.contains("panicked"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    e
}

#[test]
fn broken_lerobot_datasets_are_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let fresh = |name: &str| {
        let dir = tmp.path().join(name);
        small(&dir);
        dir
    };
    let edit_info = |dir: &Path, f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = info(6, 2, true);
        f(&mut v);
        write_info(dir, &v);
    };

    let dir = fresh("ok");
    let report = ok(&["inspect", dir.to_str().unwrap()]);
    assert!(
        report.contains("5 transitions from 2 episodes (episode_index 0..=1)"),
        "{report}"
    );
    assert!(report.contains("1 rows left out"), "{report}");

    let dir = fresh("version");
    edit_info(&dir, &|v| v["codebase_version"] = json!("v2.1"));
    let e = error(&dir);
    assert!(
        e.contains("meta/info.json") && e.contains("`codebase_version` is `v2.1`"),
        "{e}"
    );
    assert!(e.contains("v3.0"), "{e}");

    let dir = fresh("no-version");
    edit_info(&dir, &|v| {
        v.as_object_mut().unwrap().remove("codebase_version");
    });
    let e = error(&dir);
    assert!(
        e.contains("meta/info.json: missing key `codebase_version`"),
        "{e}"
    );

    let dir = fresh("no-features");
    edit_info(&dir, &|v| {
        v.as_object_mut().unwrap().remove("features");
    });
    let e = error(&dir);
    assert!(e.contains("meta/info.json: missing key `features`"), "{e}");

    let dir = fresh("no-shape");
    edit_info(&dir, &|v| {
        v["features"]["observation.state"]
            .as_object_mut()
            .unwrap()
            .remove("shape");
    });
    let e = error(&dir);
    assert!(
        e.contains("meta/info.json: missing key `features.observation.state.shape`"),
        "{e}"
    );

    // A feature laq does not use may be described in ways it does not know.
    let dir = fresh("extra");
    edit_info(&dir, &|v| {
        v["features"]["language_instruction"] = json!({"dtype": "string"});
    });
    ok(&["inspect", dir.to_str().unwrap()]);

    let dir = fresh("not-json");
    std::fs::write(dir.join("meta/info.json"), "{\"codebase_version\": ").unwrap();
    let e = error(&dir);
    assert!(e.contains("meta/info.json: not valid JSON"), "{e}");

    let dir = fresh("truncated");
    let file = dir.join("data/chunk-000/file-000.parquet");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let e = error(&dir);
    assert!(
        e.contains("file-000.parquet: not a readable Parquet file"),
        "{e}"
    );
    // Damaged data pages behind an intact footer (its length is the 4 bytes before the
    // closing magic number).
    let tail = bytes.len() - 8;
    let footer = u32::from_le_bytes(bytes[tail..tail + 4].try_into().unwrap()) as usize;
    let mut bad = bytes.clone();
    for b in &mut bad[4..tail - footer] {
        *b ^= 0x5a;
    }
    std::fs::write(&file, &bad).unwrap();
    let e = error(&dir);
    assert!(e.contains("file-000.parquet"), "{e}");

    let dir = tmp.path().join("missing-column");
    let frames: Vec<Frame> = (0..3)
        .map(|i| Frame {
            episode: 0,
            frame: i,
            cell: i as f32,
            action: 1.0,
            reward: 0.0,
            done: i == 2,
        })
        .collect();
    let all: Vec<&Frame> = frames.iter().collect();
    data_file(
        &dir.join("data/chunk-000/file-000.parquet"),
        &all,
        true,
        2,
        false,
    );
    write_info(&dir, &info(3, 2, true));
    let e = error(&dir);
    assert!(
        e.contains("file-000.parquet: no column `observation.state`"),
        "{e}"
    );

    let dir = fresh("shape");
    edit_info(&dir, &|v| {
        v["features"]["observation.state"]["shape"] = json!([3]);
    });
    let e = error(&dir);
    assert!(
        e.contains("file-000.parquet: row 0: key `observation.state` holds 2 values")
            && e.contains("shape [3]"),
        "{e}"
    );

    let dir = fresh("frames");
    edit_info(&dir, &|v| v["total_frames"] = json!(9));
    let e = error(&dir);
    assert!(
        e.contains("meta/info.json: key `total_frames` is 9") && e.contains("hold 6 frames"),
        "{e}"
    );

    let dir = fresh("no-data");
    std::fs::remove_dir_all(dir.join("data")).unwrap();
    let e = error(&dir);
    assert!(e.contains("no Parquet files"), "{e}");
}

#[test]
fn damaged_parquet_bytes_give_errors_not_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    small(&dir);
    let file = dir.join("data/chunk-000/file-000.parquet");
    let bytes = std::fs::read(&file).unwrap();
    let opts = laq::data::read::ReadOptions::default();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(99);
    let mut errors = 0;
    for k in 0..4000 {
        // One to three bytes changed, and now and then the file cut short.
        let mut bad = bytes.clone();
        for _ in 0..1 + k % 3 {
            let at = rng.random_range(0..bytes.len());
            bad[at] ^= rng.random_range(1..=255u8);
        }
        if k % 7 == 0 {
            bad.truncate(rng.random_range(0..bytes.len()));
        }
        std::fs::write(&file, &bad).unwrap();
        match std::panic::catch_unwind(|| laq::data::read::read(&dir, &opts)) {
            Err(_) => panic!("panicked on damaged bytes (try {k})"),
            Ok(Err(e)) => {
                let e = format!("{e:#}");
                assert!(
                    e.contains("file-000.parquet") || e.contains("info.json"),
                    "{e}"
                );
                errors += 1;
            }
            Ok(Ok(_)) => {}
        }
    }
    assert!(errors > 1000, "{errors} errors");
}
