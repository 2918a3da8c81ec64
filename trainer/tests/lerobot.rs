//! LeRobot dataset directories (v3.0) read directly by `inspect`, `train`, `predict` and
//! `convert`, and refused with one line naming the file, the key and the problem.

mod common;
mod encode;
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

    let (_, rho) = common::train_and_rank(d, tmp.path());
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

    // A camera whose videos are not there is refused by name; a feature that is not
    // there, too.
    for (keys, needle) in [
        (
            "observation.images.front",
            "meta/episodes: no Parquet files; they give each episode's place in the videos \
             of `observation.images.front`",
        ),
        (
            "observation.nope",
            "; or one camera alone: observation.images.front)",
        ),
    ] {
        let out = laq(&["inspect", d, "--obs-keys", keys]);
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && e.contains(needle), "{e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
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

/// Camera frames: 48 wide, 32 high, 10 per second.
const CAM_H: usize = 32;
const CAM_W: usize = 48;

/// Where the square of episode `e`, frame `t` lies (its top left corner).
fn square_at(e: usize, t: usize) -> (usize, usize) {
    (2 + t, 4 + 6 * e)
}

/// A LeRobot v3.0 dataset with two cameras of the same scene, `top` in AV1 and `wrist` in
/// H.264: three episodes of `lens` frames, the first two sharing one MP4 file per camera,
/// the third in a second file. Episodes 0 and 2 end with `next.done`, episode 1 in a
/// timeout. `video_frames` changes the number of frames the third episode's videos hold.
fn camera_dataset(dir: &Path, lens: [usize; 3], video_frames: Option<usize>) {
    let mut frames = vec![];
    for (e, &n) in lens.iter().enumerate() {
        for t in 0..n {
            frames.push(Frame {
                episode: e as i64,
                frame: t as i64,
                cell: t as f32,
                action: 1.0,
                reward: if t + 1 == n && e != 1 { 1.0 } else { 0.0 },
                done: t + 1 == n && e != 1,
            });
        }
    }
    let all: Vec<&Frame> = frames.iter().collect();
    data_file(
        &dir.join("data/chunk-000/file-000.parquet"),
        &all,
        true,
        2,
        true,
    );
    let mut info = info(frames.len(), 2, true);
    let video = json!({"dtype": "video", "shape": [CAM_H, CAM_W, 3],
                       "names": ["height", "width", "channels"]});
    let features = info["features"].as_object_mut().unwrap();
    features.remove("observation.images.front");
    features.insert("observation.images.top".into(), video.clone());
    features.insert("observation.images.wrist".into(), video);
    write_info(dir, &info);

    // The frames of each file: episodes 0 and 1, then episode 2.
    let scenes = |eps: &[usize], cut: Option<usize>| -> Vec<Vec<u8>> {
        let mut out = vec![];
        for &e in eps {
            let n = cut.unwrap_or(lens[e]);
            for t in 0..n {
                let (x, y) = square_at(e, t.min(CAM_W - 3 - encode::SIDE));
                out.push(encode::scene(CAM_H, CAM_W, x, y));
            }
        }
        out
    };
    let files = [scenes(&[0, 1], None), scenes(&[2], video_frames)];
    for (key, h264) in [
        ("observation.images.top", false),
        ("observation.images.wrist", true),
    ] {
        for (k, f) in files.iter().enumerate() {
            let coded = if h264 {
                encode::h264(f, CAM_H, CAM_W)
            } else {
                encode::av1(f, CAM_H, CAM_W)
            };
            let path = dir.join(format!("videos/{key}/chunk-000/file-{k:03}.mp4"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, encode::mp4(&coded, 10)).unwrap();
        }
    }
    // Where each episode lies in the videos: its file and its start in seconds.
    let place = [(0, 0.0), (0, lens[0] as f32 / 10.0), (1, 0.0)];
    let mut cols = vec![Col::I64("episode_index", vec![0, 1, 2])];
    for key in ["top", "wrist"] {
        let name = |f: &str| -> &'static str {
            Box::leak(format!("videos/observation.images.{key}/{f}").into_boxed_str())
        };
        cols.push(Col::I64(name("chunk_index"), vec![0; 3]));
        cols.push(Col::I64(
            name("file_index"),
            place.iter().map(|p| p.0).collect(),
        ));
        cols.push(Col::F32(
            name("from_timestamp"),
            place.iter().map(|p| p.1).collect(),
        ));
        cols.push(Col::F32(
            name("to_timestamp"),
            place
                .iter()
                .zip([lens[0], lens[1], video_frames.unwrap_or(lens[2])])
                .map(|(p, n)| p.1 + n as f32 / 10.0)
                .collect(),
        ));
    }
    cols.push(Col::I64("length", lens.iter().map(|&n| n as i64).collect()));
    write_parquet(&dir.join("meta/episodes/chunk-000/file-000.parquet"), &cols);
}

#[test]
fn lerobot_cameras_decode_from_shared_videos_in_both_codecs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cams");
    let lens = [10, 12, 8];
    camera_dataset(&dir, lens, None);
    let d = dir.to_str().unwrap();
    let half = encode::SIDE as f64 / 2.0 - 0.5;
    for (key, codec) in [
        ("observation.images.top", "AV1"),
        ("observation.images.wrist", "H.264"),
    ] {
        let report = ok(&["inspect", d, "--obs-keys", key]);
        assert!(
            report.contains(&format!(
                "camera `{key}` ({codec}, 48x32 frames, BT.601 to RGB) stored at 32x48"
            )),
            "{report}"
        );
        assert!(
            report.contains("30 frames decoded from 2 video files"),
            "{report}"
        );
        let opts = laq::data::read::ReadOptions {
            obs_keys: Some(vec![key.to_string()]),
            ..Default::default()
        };
        let data = laq::data::read::read(&dir, &opts).unwrap().data;
        assert_eq!(data.obs_shape, vec![3, CAM_H, CAM_W]);
        // Episode 1 ends in a timeout: its last frame is left out.
        assert_eq!(data.len(), 29);
        assert_eq!(data.missing_next_count(), 2);
        // Each transition's frames are its episode's frames t and t + 1.
        let mut i = 0;
        for (e, &n) in lens.iter().enumerate() {
            let kept = if e == 1 { n - 1 } else { n };
            for t in 0..kept {
                let o: Vec<u8> = data.obs_row(i).iter().map(|&x| x as u8).collect();
                let (x, y) = square_at(e, t);
                let what = format!("{key} episode {e} frame {t}");
                let Some(((cx, cy), colour)) = encode::find_square(&o, CAM_H, CAM_W) else {
                    panic!("{what}: no square");
                };
                assert!(
                    (cx - x as f64 - half).abs() <= 1.0 && (cy - y as f64 - half).abs() <= 1.0,
                    "{what}: square at ({cx:.2}, {cy:.2}), drawn at ({x}, {y})"
                );
                for k in 0..3 {
                    assert!(
                        (colour[k] - f64::from(encode::SQUARE[k])).abs() <= 30.0,
                        "{what}: {colour:?}"
                    );
                }
                if t + 1 < n {
                    let nx: Vec<u8> = data.next_obs_row(i).iter().map(|&x| x as u8).collect();
                    let ((nx_x, _), _) = encode::find_square(&nx, CAM_H, CAM_W).unwrap();
                    assert!(
                        (nx_x - cx - 1.0).abs() <= 1.0,
                        "{what}: next frame at x {nx_x:.2}"
                    );
                }
                i += 1;
            }
        }
    }

    // Another size: averaged down to 16x24, the square's centre halves.
    let report = ok(&[
        "inspect",
        d,
        "--obs-keys",
        "observation.images.top",
        "--image-size",
        "16x24",
    ]);
    assert!(
        report.contains("stored at 16x24 (height x width), averaged over areas"),
        "{report}"
    );
    let opts = laq::data::read::ReadOptions {
        obs_keys: Some(vec!["observation.images.top".into()]),
        image_size: Some("16x24".parse().unwrap()),
        ..Default::default()
    };
    let data = laq::data::read::read(&dir, &opts).unwrap().data;
    assert_eq!(data.obs_shape, vec![3, 16, 24]);
    let o: Vec<u8> = data.obs_row(3).iter().map(|&x| x as u8).collect();
    let ((cx, cy), _) = encode::find_square(&o, 16, 24).unwrap();
    let (x, y) = square_at(0, 3);
    let (ex, ey) = (
        (x as f64 + half + 0.5) / 2.0 - 0.5,
        (y as f64 + half + 0.5) / 2.0 - 0.5,
    );
    assert!(
        (cx - ex).abs() <= 1.0 && (cy - ey).abs() <= 1.0,
        "({cx}, {cy}) vs ({ex}, {ey})"
    );

    // The same frames through `convert`, which writes them once.
    let npz = tmp.path().join("cams.npz");
    let out = ok(&[
        "convert",
        d,
        "--obs-keys",
        "observation.images.wrist",
        "--out",
        npz.to_str().unwrap(),
    ]);
    assert!(
        out.contains("camera `observation.images.wrist` (H.264"),
        "{out}"
    );
    let opts = laq::data::read::ReadOptions {
        obs_keys: Some(vec!["observation.images.wrist".into()]),
        ..Default::default()
    };
    assert_eq!(
        laq::data::Dataset::load(&npz).unwrap(),
        laq::data::read::read(&dir, &opts).unwrap().data
    );

    // A camera and state features in one observation, two cameras, a size for states.
    for (args, needle) in [
        (
            vec!["--obs-keys", "observation.state,observation.images.top"],
            "--obs-keys names the camera `observation.images.top` with other features \
             (observation.state)",
        ),
        (
            vec![
                "--obs-keys",
                "observation.images.top,observation.images.wrist",
            ],
            "either one camera's frames or state features side by side",
        ),
        (
            vec!["--image-size", "16x16"],
            "--image-size 16x16 applies to a camera",
        ),
        (
            vec!["--obs-keys", "observation.images.top", "--image-size", "16"],
            "HEIGHTxWIDTH",
        ),
    ] {
        let mut a = vec!["inspect", d];
        a.extend(args);
        let out = laq(&a);
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && e.contains(needle), "{needle}: {e}");
    }
}

/// The one-line error of reading camera `top` of the dataset at `dir`.
fn camera_error(dir: &Path) -> String {
    let out = laq(&[
        "inspect",
        dir.to_str().unwrap(),
        "--obs-keys",
        "observation.images.top",
    ]);
    let e = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "accepted: {e}");
    assert!(!e.contains("panicked"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    e
}

#[test]
fn broken_camera_videos_are_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let lens = [6, 5, 4];
    let fresh = |name: &str| {
        let dir = tmp.path().join(name);
        camera_dataset(&dir, lens, None);
        dir
    };
    let video = |dir: &Path, k: usize| {
        dir.join(format!(
            "videos/observation.images.top/chunk-000/file-{k:03}.mp4"
        ))
    };

    let dir = fresh("missing");
    std::fs::remove_file(video(&dir, 1)).unwrap();
    let e = camera_error(&dir);
    assert!(
        e.contains("file-001.mp4: no such file; it holds the frames of `observation.images.top` for episodes 2")
            && e.contains("video_path"),
        "{e}"
    );

    let dir = fresh("truncated");
    let bytes = std::fs::read(video(&dir, 0)).unwrap();
    std::fs::write(video(&dir, 0), &bytes[..bytes.len() - 100]).unwrap();
    let e = camera_error(&dir);
    assert!(e.contains("file-000.mp4: cut short"), "{e}");

    let dir = fresh("not-a-video");
    std::fs::write(video(&dir, 0), "{\"frames\": []}").unwrap();
    let e = camera_error(&dir);
    assert!(e.contains("file-000.mp4: not an MP4 file"), "{e}");

    // The third episode's video holds 3 frames for its 4 rows.
    let dir = tmp.path().join("short");
    camera_dataset(&dir, lens, Some(3));
    let e = camera_error(&dir);
    assert!(
        e.contains("file-001.mp4: no frame at 0.300 s for episode 2 frame 3")
            && e.contains(
                "the file holds 3 frames from 0.000 s to 0.200 s: the video and the data disagree"
            ),
        "{e}"
    );
    // 6 frames for 4 rows: two are left out, and said so.
    let dir = tmp.path().join("long");
    camera_dataset(&dir, lens, Some(6));
    let report = ok(&[
        "inspect",
        dir.to_str().unwrap(),
        "--obs-keys",
        "observation.images.top",
    ]);
    assert!(
        report.contains(
            "2 video frames of `observation.images.top` inside the episodes match no row"
        ),
        "{report}"
    );

    let dir = fresh("no-episodes");
    std::fs::remove_dir_all(dir.join("meta/episodes")).unwrap();
    let e = camera_error(&dir);
    assert!(e.contains("meta/episodes: no Parquet files"), "{e}");
}
