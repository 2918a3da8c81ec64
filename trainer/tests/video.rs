//! Camera videos: MP4 files of AV1 and H.264, the decoded frames against what was encoded,
//! and damaged files refused with an error, never a panic.

mod encode;
use encode::{find_square, scene};
use laq::data::import::video::{ImageSize, Video};
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
