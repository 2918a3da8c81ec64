//! Camera videos: `laq convert --from video` on a folder of MP4 files (AV1 and H.264), the
//! decoded frames against what was encoded, and damaged files refused in one line.

mod common;
mod encode;
use common::{laq, ok};
use encode::{find_square, scene};
use laq::data::import::video::{ImageSize, Video};
use laq::data::Dataset;
use rand::{Rng, SeedableRng};
use std::path::Path;

const H: usize = 32;
const W: usize = 48;

/// `n` frames of the square moving right one pixel a frame from x = 2, at height `y`.
fn walk(n: usize, y: usize) -> Vec<Vec<u8>> {
    (0..n).map(|t| scene(H, W, 2 + t, y)).collect()
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The error `laq args` gives, checked to be one line and no panic.
fn error(args: &[&str]) -> String {
    let out = laq(args);
    let e = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "accepted: {e}");
    assert!(!e.contains("panicked"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    e
}

/// The square of each frame where it was drawn: one pixel off at most, in a colour near
/// the one drawn.
fn check_square(frame: &[u8], h: usize, w: usize, x: f64, y: f64, what: &str) {
    let Some(((cx, cy), colour)) = find_square(frame, h, w) else {
        panic!("{what}: no square");
    };
    assert!(
        (cx - x).abs() <= 1.0 && (cy - y).abs() <= 1.0,
        "{what}: square at ({cx:.2}, {cy:.2}), drawn at ({x}, {y})"
    );
    for k in 0..3 {
        assert!(
            (colour[k] - f64::from(encode::SQUARE[k])).abs() <= 30.0,
            "{what}: colour {colour:?}"
        );
    }
}

#[test]
fn decoded_frames_match_the_encoded_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let frames = walk(24, 6);
    let half = encode::SIDE as f64 / 2.0 - 0.5;
    for (name, coded) in [
        ("av1.mp4", encode::av1(&frames, H, W)),
        ("h264.mp4", encode::h264(&frames, H, W)),
    ] {
        let p = tmp.path().join(name);
        write(&p, &encode::mp4(&coded, 10));
        let mut v = Video::open(&p).unwrap();
        assert_eq!((v.len(), v.size()), (24, (H, W)), "{name}");
        assert!((v.times()[5] - 0.5).abs() < 1e-9, "{name}: {:?}", v.times());
        let all: Vec<usize> = (0..24).collect();
        let d = v.decode(&all, ImageSize { h: H, w: W }).unwrap();
        assert_eq!(d.pixels.len(), 24 * 3 * H * W);
        for (t, f) in d.pixels.chunks(3 * H * W).enumerate() {
            let what = format!("{name} frame {t}");
            check_square(f, H, W, 2.0 + t as f64 + half, 6.0 + half, &what);
        }
        // A few frames, shrunk by half: the square's centre halves.
        let d = v.decode(&[3, 10], ImageSize { h: 16, w: 24 }).unwrap();
        assert_eq!(d.pixels.len(), 2 * 3 * 16 * 24);
        for (f, t) in d.pixels.chunks(3 * 16 * 24).zip([3.0, 10.0]) {
            let (x, y) = (
                (2.0 + t + half + 0.5) / 2.0 - 0.5,
                (6.0 + half + 0.5) / 2.0 - 0.5,
            );
            check_square(f, 16, 24, x, y, &format!("{name} frame {t} at 16x24"));
        }
    }
}

#[test]
fn a_folder_of_videos_converts_to_an_image_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("videos");
    // Name order, not creation order: b is written first.
    write(
        &dir.join("b.mp4"),
        &encode::mp4(&encode::h264(&walk(20, 12), H, W), 10),
    );
    write(
        &dir.join("a.mp4"),
        &encode::mp4(&encode::av1(&walk(16, 4), H, W), 10),
    );
    write(
        &dir.join("c.mp4"),
        &encode::mp4(&encode::av1(&walk(12, 20), H, W), 10),
    );
    write(&dir.join("notes.txt"), b"camera on the left");
    let d = dir.to_str().unwrap();
    let npz = tmp.path().join("v.npz");
    let out = ok(&[
        "convert",
        d,
        "--from",
        "video",
        "--reward",
        "episode-end",
        "--out",
        npz.to_str().unwrap(),
    ]);
    for needle in [
        "3 files, 48 frames, 45 transitions",
        "a.mp4: AV1, 48x32, 16 frames",
        "b.mp4: H.264, 48x32, 20 frames",
        "RGB frames [3, 32, 48]",
        "dropped frames: 3",
        "not videos, left out: notes.txt",
        "rewards: 1 on the last transition of each of the 3 episodes",
        "wrote 45 transitions",
    ] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
    let data = Dataset::load(&npz).unwrap();
    assert_eq!(data.obs_shape, vec![3, H, W]);
    assert_eq!(data.len(), 45);
    let ends: Vec<usize> = (0..45).filter(|&i| data.terminals[i]).collect();
    assert_eq!(ends, vec![14, 33, 44]);
    assert_eq!(data.rewards.iter().sum::<f32>(), 3.0);
    let half = encode::SIDE as f64 / 2.0 - 0.5;
    // Episode b (the second) from its first transition: frame t then t + 1.
    for t in [0usize, 7, 18] {
        let i = 15 + t;
        let (o, n) = (data.obs_row(i), data.next_obs_row(i));
        let o: Vec<u8> = o.iter().map(|&x| x as u8).collect();
        let n: Vec<u8> = n.iter().map(|&x| x as u8).collect();
        check_square(
            &o,
            H,
            W,
            2.0 + t as f64 + half,
            12.0 + half,
            &format!("b {t}"),
        );
        check_square(
            &n,
            H,
            W,
            3.0 + t as f64 + half,
            12.0 + half,
            &format!("b {t} next"),
        );
    }

    // Rewards from a CSV: episode = the video's place in name order, step = transition.
    let csv = tmp.path().join("r.csv");
    std::fs::write(&csv, "episode,step\n1,3\n2,10\n").unwrap();
    let small = tmp.path().join("small.safetensors");
    let out = ok(&[
        "convert",
        d,
        "--from",
        "video",
        "--reward",
        csv.to_str().unwrap(),
        "--image-size",
        "16x24",
        "--out",
        small.to_str().unwrap(),
    ]);
    assert!(out.contains("RGB frames [3, 16, 24]"), "{out}");
    let data = Dataset::load(&small).unwrap();
    assert_eq!(data.obs_shape, vec![3, 16, 24]);
    let rewarded: Vec<usize> = (0..45).filter(|&i| data.rewards[i] > 0.0).collect();
    assert_eq!(rewarded, vec![18, 44]);

    // A dataset of videos trains like any image dataset.
    let run = tmp.path().join("run");
    ok(&[
        "train",
        "--data",
        small.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
        "--mining-steps",
        "20",
        "--mining-restarts",
        "1",
        "--dqn-steps",
        "20",
    ]);
    assert!(run.join("value.safetensors").is_file());
}

#[test]
fn videos_without_rewards_or_readable_frames_are_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let good = encode::mp4(&encode::av1(&walk(12, 4), H, W), 10);
    let h264 = encode::mp4(&encode::h264(&walk(12, 4), H, W), 10);
    let out = tmp.path().join("o.npz");
    let o = out.to_str().unwrap();
    let convert = |dir: &Path| {
        error(&[
            "convert",
            dir.to_str().unwrap(),
            "--from",
            "video",
            "--reward",
            "episode-end",
            "--out",
            o,
        ])
    };

    let dir = tmp.path().join("ok");
    write(&dir.join("a.mp4"), &good);
    let e = error(&[
        "convert",
        dir.to_str().unwrap(),
        "--from",
        "video",
        "--out",
        o,
    ]);
    for needle in [
        "videos hold no rewards",
        "--reward episode-end",
        "FILE.csv",
        "name order",
    ] {
        assert!(e.contains(needle), "{needle}: {e}");
    }
    let e = error(&[
        "convert",
        dir.to_str().unwrap(),
        "--from",
        "video",
        "--reward",
        "success",
        "--out",
        o,
    ]);
    assert!(e.contains("videos hold no rewards"), "{e}");
    let e = error(&[
        "convert",
        dir.to_str().unwrap(),
        "--from",
        "video",
        "--reward",
        "episode-end",
        "--out",
        tmp.path().join("o.csv").to_str().unwrap(),
    ]);
    assert!(e.contains("unknown output type"), "{e}");
    assert!(!out.exists());

    let dir = tmp.path().join("empty");
    std::fs::create_dir_all(&dir).unwrap();
    assert!(convert(&dir).contains("no video files"));

    for (name, bytes) in [("av1", &good), ("h264", &h264)] {
        // Cut short: the samples run past the end of the file.
        let dir = tmp.path().join(format!("truncated-{name}"));
        write(&dir.join("a.mp4"), &bytes[..bytes.len() - 200]);
        let e = convert(&dir);
        assert!(e.contains("a.mp4: cut short"), "{e}");
        // Cut inside the index.
        write(&dir.join("a.mp4"), &bytes[..300]);
        let e = convert(&dir);
        assert!(e.contains("a.mp4: cut short") && e.contains("moov"), "{e}");
    }

    let dir = tmp.path().join("text");
    write(
        &dir.join("a.mp4"),
        b"these are not the frames you are looking for",
    );
    assert!(convert(&dir).contains("a.mp4: not an MP4 file"));

    let dir = tmp.path().join("one-frame");
    write(
        &dir.join("a.mp4"),
        &encode::mp4(&encode::av1(&walk(1, 4), H, W), 10),
    );
    assert!(convert(&dir).contains("a.mp4: 1 frame: an episode needs two frames"));

    let dir = tmp.path().join("not-a-folder");
    write(&dir.join("a.mp4"), &good);
    let e = error(&[
        "convert",
        dir.join("a.mp4").to_str().unwrap(),
        "--from",
        "video",
        "--reward",
        "episode-end",
        "--out",
        o,
    ]);
    assert!(e.contains("not a folder"), "{e}");

    // Samples whose bytes are damaged: the decoder's error names the file and the sample.
    let dir = tmp.path().join("garbled");
    let mut bad = good.clone();
    let n = bad.len();
    for b in &mut bad[n - 400..] {
        *b = 0xff;
    }
    write(&dir.join("a.mp4"), &bad);
    let e = convert(&dir);
    assert!(e.contains("a.mp4") && e.contains("AV1"), "{e}");
    assert!(!out.exists());
}

#[test]
fn damaged_video_bytes_give_errors_not_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("v.mp4");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for (name, bytes) in [
        ("av1", encode::mp4(&encode::av1(&walk(8, 4), H, W), 10)),
        ("h264", encode::mp4(&encode::h264(&walk(8, 4), H, W), 10)),
    ] {
        let mut errors = 0;
        for k in 0..300 {
            let mut bad = bytes.clone();
            for _ in 0..1 + k % 3 {
                let at = rng.random_range(0..bad.len());
                bad[at] ^= rng.random_range(1..=255u8);
            }
            if k % 7 == 0 {
                bad.truncate(rng.random_range(0..bytes.len()));
            }
            std::fs::write(&p, &bad).unwrap();
            let got = std::panic::catch_unwind(|| {
                let mut v = Video::open(&p)?;
                let all: Vec<usize> = (0..v.len()).collect();
                v.decode(&all, ImageSize { h: 8, w: 12 })
            });
            match got {
                Err(_) => panic!("{name}: panicked on damaged bytes (try {k})"),
                Ok(Err(e)) => {
                    assert!(format!("{e:#}").contains("v.mp4"), "{e:#}");
                    errors += 1;
                }
                Ok(Ok(_)) => {}
            }
        }
        assert!(errors > 30, "{name}: {errors} errors");
    }
}
