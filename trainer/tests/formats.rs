//! Robot logs as they come: a D4RL-style HDF5 file read directly by `inspect`, `train` and
//! `predict`, with its rewards on terminal rows that have no next observation.

mod common;
use common::{laq, ok};
use hdf5_writer::{
    ByteOrder, DatasetBuilder, Datatype, EnumMember, H5WriteElement, Hdf5Builder, WriteOptions,
};
use rand::{Rng, SeedableRng};
use std::path::Path;

/// Cells of the corridor; the step from the second-to-last cell into the last one is
/// rewarded and ends the episode.
const CELLS: usize = 12;

fn array<T: H5WriteElement>(name: &str, shape: &[usize], v: &[T]) -> DatasetBuilder {
    let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    DatasetBuilder::typed_data(name, dims, v).unwrap()
}

/// Booleans as h5py stores them: an enum over one-byte integers.
fn flags(name: &str, v: &[bool]) -> DatasetBuilder {
    let member = |name: &str, value: u8| EnumMember {
        name: name.into(),
        value: vec![value],
    };
    let ty = Datatype::Enum {
        base: Box::new(i8::hdf5_type_with_order(ByteOrder::LittleEndian)),
        members: vec![member("FALSE", 0), member("TRUE", 1)],
    };
    DatasetBuilder::new(name, ty, [v.len() as u64])
        .raw_data(v.iter().map(|&b| b as u8).collect::<Vec<u8>>())
}

/// Random walks along the corridor from random cells (right with probability 0.6), cut
/// by a timeout after 40 steps, in D4RL's layout without `next_observations`: the
/// rewarded, terminal row is the last of its episode. Observations are the cell and a
/// constant, as a robot's logs carry channels that never change.
fn corridor(path: &Path) -> usize {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let (mut obs, mut rew, mut term, mut tout) = (vec![], vec![], vec![], vec![]);
    while rew.len() < 3000 {
        let mut x = rng.random_range(0..CELLS - 1);
        for t in 0..40 {
            obs.extend([x as f32, 1.0]);
            let next = if rng.random::<f64>() < 0.6 {
                x + 1
            } else {
                x.saturating_sub(1)
            };
            let goal = next == CELLS - 1;
            rew.push(if goal { 1.0f32 } else { 0.0 });
            term.push(goal);
            tout.push(!goal && t == 39);
            if goal {
                break;
            }
            x = next;
        }
    }
    let n = rew.len();
    let plan = Hdf5Builder::new()
        .dataset(array("observations", &[n, 2], &obs))
        .dataset(array("rewards", &[n], &rew))
        .dataset(flags("terminals", &term))
        .dataset(flags("timeouts", &tout))
        .into_plan()
        .unwrap();
    std::fs::write(path, plan.encode(WriteOptions::default()).unwrap()).unwrap();
    term.iter().filter(|&&t| t).count()
}

#[test]
fn d4rl_file_with_rewards_on_terminal_rows_reads_directly() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("corridor.hdf5");
    let goals = corridor(&file);
    let f = file.to_str().unwrap();

    let report = ok(&["inspect", f]);
    assert!(report.contains("read as D4RL"), "{report}");
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
    assert!(report.contains("rows left out"), "{report}");

    let (_, rho) = common::train_and_rank(f, dir.path());
    assert!(
        rho >= 0.9,
        "V against the distance along the corridor: {rho:.3}"
    );

    // The same file with its rewards derived from episode ends: every episode, cut or
    // not, counts as a success, so V no longer singles out the corridor's end.
    let report = ok(&["inspect", f, "--reward", "episode-end"]);
    assert!(
        report.contains("rewards: 1 on the last transition"),
        "{report}"
    );
    let out = laq(&["inspect", f, "--reward", "success"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("corridor.hdf5") && e.contains("success"),
        "{e}"
    );
}

/// h5py's own LZF filter (id 32000), alone and after h5py's shuffle, reads as the arrays
/// h5py wrote. `tests/data/h5py_lzf.hdf5` was written by h5py 3.x: `create_dataset` with
/// `chunks` of 16 rows and `compression="lzf"` (observations also `shuffle=True`), rows
/// `i < 40` holding observations `[i, i % 5, 1]`, a reward of 1 and a terminal where
/// `i % 10 == 9`; every chunk is compressed (the last one padded past row 40).
#[test]
fn h5py_lzf_files_read() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/h5py_lzf.hdf5");
    let d = laq::data::Dataset::load(&file).unwrap();
    assert_eq!(d.len(), 40);
    for i in 0..40 {
        assert_eq!(d.obs(i), [i as f32, (i % 5) as f32, 1.0], "row {i}");
        assert_eq!(d.rewards[i], f32::from(i % 10 == 9), "row {i}");
        assert_eq!(d.terminals[i], i % 10 == 9, "row {i}");
    }
    let report = ok(&["inspect", file.to_str().unwrap()]);
    assert!(report.contains("4 non-zero"), "{report}");

    // The same file with its filter id (32000, then the name's length, 8) made Blosc's
    // (32001), whose C library this reader lacks: refused, naming the key and the way out.
    let mut bytes = std::fs::read(&file).unwrap();
    let mut patched = 0;
    for i in 0..bytes.len() - 4 {
        if bytes[i..i + 4] == [0x00, 0x7d, 0x08, 0x00] {
            bytes[i] = 0x01;
            patched += 1;
        }
    }
    assert_eq!(patched, 3, "one filter pipeline per array");
    let dir = tempfile::tempdir().unwrap();
    let blosc = dir.path().join("blosc.hdf5");
    std::fs::write(&blosc, bytes).unwrap();
    let out = laq(&["inspect", blosc.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{e}");
    assert!(
        e.contains("blosc.hdf5") && e.contains("observations"),
        "{e}"
    );
    assert!(
        e.contains("32001") && e.contains("compression=\"gzip\""),
        "{e}"
    );
}
