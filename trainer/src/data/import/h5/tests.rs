use super::*;
use crate::data::import::{convert, import, ImportOptions, Source};
use hdf5::H5Type;

fn put<T: H5Type>(g: &Group, name: &str, shape: &[usize], v: &[T]) {
    g.new_dataset::<T>()
        .shape(shape.to_vec())
        .create(name)
        .unwrap()
        .write_raw(v)
        .unwrap();
}

/// Chunked and gzip-compressed, as D4RL's files store their arrays.
fn put_gz<T: H5Type>(g: &Group, name: &str, shape: &[usize], v: &[T]) {
    let mut chunk = shape.to_vec();
    chunk[0] = chunk[0].div_ceil(3);
    g.new_dataset::<T>()
        .chunk(chunk)
        .deflate(4)
        .shape(shape.to_vec())
        .create(name)
        .unwrap()
        .write_raw(v)
        .unwrap();
}

fn err(path: &Path, source: Source, opts: &ImportOptions) -> String {
    format!("{:#}", import(path, source, opts).unwrap_err())
}

/// 7 rows in three episodes: rows 0-2 (timeout at 2), 3-4 (terminal at 4), 5-6
/// (the end of the file). Observation row i is [i, 10 i, 100 i].
fn d4rl_file(path: &Path, next: bool) {
    let f = hdf5::File::create(path).unwrap();
    let obs: Vec<f32> = (0..7)
        .flat_map(|i| [i as f32, 10.0 * i as f32, 100.0 * i as f32])
        .collect();
    put_gz(&f, "observations", &[7, 3], &obs);
    if next {
        let nx: Vec<f32> = obs.iter().map(|x| x + 0.5).collect();
        put_gz(&f, "next_observations", &[7, 3], &nx);
    }
    let act: Vec<f64> = (0..14).map(|i| i as f64 * 0.25).collect();
    put(&f, "actions", &[7, 2], &act);
    let rew: Vec<f64> = (0..7).map(|i| i as f64 + 0.125).collect();
    put_gz(&f, "rewards", &[7], &rew);
    let term = [false, false, false, false, true, false, false];
    put(&f, "terminals", &[7], &term);
    put(&f, "timeouts", &[7], &[0u8, 0, 1, 0, 0, 0, 0]);
    put(&f.create_group("infos").unwrap(), "qpos", &[7], &[0f32; 7]);
}

#[test]
fn d4rl_fixture_is_chunked_and_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.hdf5");
    d4rl_file(&p, false);
    let f = hdf5::File::open(&p).unwrap();
    let ds = f.dataset("observations").unwrap();
    assert_eq!(ds.chunk(), Some(vec![3, 3]));
    // Superblock version 0, as h5py writes by default.
    assert_eq!(std::fs::read(&p).unwrap()[8], 0);
    assert!(ds
        .filters()
        .iter()
        .any(|x| matches!(x, hdf5::filters::Filter::Deflate(4))));
}

#[test]
fn d4rl_import_respects_episode_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.hdf5");
    d4rl_file(&p, false);
    let imp = import(&p, Source::Auto, &ImportOptions::default()).unwrap();
    assert_eq!(imp.source, Source::D4rl);
    let d = &imp.data;
    // Kept: rows 0, 1, 3, 5, and the terminal row 4 without its next observation; rows 2
    // (a timeout) and 6 (the end of the file) have no next observation and no terminal.
    assert_eq!((d.len(), imp.episodes, imp.dropped), (5, 3, 2));
    let row = |i: usize| [i as f32, 10.0 * i as f32, 100.0 * i as f32];
    for (k, i) in [0usize, 1, 3, 4, 5].into_iter().enumerate() {
        assert_eq!(d.obs(k), row(i));
        let next = if i == 4 { row(4) } else { row(i + 1) };
        assert_eq!(d.next_obs(k), next, "transition {k} crosses an episode");
        assert_eq!(d.rewards[k], i as f32 + 0.125);
    }
    assert_eq!(d.terminals, vec![false, false, false, true, false]);
    assert_eq!(d.next_missing, Some(vec![false, false, false, true, false]));
    assert_eq!(d.timeouts, Some(vec![false, true, false, false, true]));
    assert_eq!(
        d.actions,
        Some(Actions::Continuous {
            dim: 2,
            values: vec![0.0, 0.25, 0.5, 0.75, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75],
        })
    );
    let s = imp.summary();
    assert!(
        s.contains("dropped rows: 2") && s.contains("terminal rows without a next observation: 1"),
        "{s}"
    );
}

#[test]
fn d4rl_next_observations_are_used_when_present() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.hdf5");
    d4rl_file(&p, true);
    let imp = import(&p, Source::D4rl, &ImportOptions::default()).unwrap();
    let d = &imp.data;
    assert_eq!((d.len(), imp.dropped, imp.episodes), (7, 0, 3));
    for i in 0..7 {
        let x = i as f32;
        assert_eq!(d.obs(i), [x, 10.0 * x, 100.0 * x]);
        assert_eq!(d.next_obs(i), [x + 0.5, 10.0 * x + 0.5, 100.0 * x + 0.5]);
    }
    assert_eq!(
        d.terminals,
        vec![false, false, false, false, true, false, false]
    );
    // The file's own timeout, and its last row, which ends the last episode.
    assert_eq!(
        d.timeouts,
        Some(vec![false, false, true, false, false, false, true])
    );
}

#[test]
fn d4rl_without_flags_says_what_it_assumes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.hdf5");
    {
        let f = hdf5::File::create(&p).unwrap();
        put(&f, "observations", &[4], &[0u8, 1, 2, 3]);
        put(&f, "rewards", &[4, 1], &[0f32, 0.0, 0.0, 1.0]);
        put(&f, "actions", &[4], &[2i32, 0, 1, 1]);
    }
    let imp = import(&p, Source::D4rl, &ImportOptions::default()).unwrap();
    let d = &imp.data;
    assert_eq!((d.len(), imp.episodes, imp.dropped), (3, 1, 1));
    assert_eq!(d.obs_shape, vec![1]);
    assert_eq!(d.next_observations, vec![1.0, 2.0, 3.0]);
    assert_eq!(d.actions, Some(Actions::Discrete(vec![2, 0, 1])));
    let notes = imp.notes.join("\n");
    assert!(
        notes.contains("no `terminals`") && notes.contains("no `timeouts`"),
        "{notes}"
    );
}

/// Two episodes (3 and 2 steps) with a dict observation: `observation` [T + 1, 2],
/// `achieved_goal` [T + 1, 1], `goal/desired` [T + 1, 2] (nested), in
/// data/main_data.hdf5, written in the newest file format (the D4RL fixture has the
/// oldest).
fn minari_dir(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let p = dir.join("data").join("main_data.hdf5");
    let f = hdf5::File::with_options()
        .with_fapl(|a| a.libver_latest())
        .create(&p)
        .unwrap();
    for (e, t) in [(0usize, 3usize), (1, 2)] {
        let g = f.create_group(&format!("episode_{e}")).unwrap();
        let base = 100.0 * e as f64;
        let o = g.create_group("observations").unwrap();
        let obs: Vec<f64> = (0..=t)
            .flat_map(|s| [base + s as f64, -(s as f64)])
            .collect();
        put_gz(&o, "observation", &[t + 1, 2], &obs);
        let ach: Vec<f32> = (0..=t).map(|s| (base + s as f64) as f32 + 0.5).collect();
        put(&o, "achieved_goal", &[t + 1, 1], &ach);
        let goal = o.create_group("goal").unwrap();
        put(&goal, "desired", &[t + 1, 2], &vec![7f32; 2 * (t + 1)]);
        put(&g, "actions", &[t], &(0..t as i64).collect::<Vec<_>>());
        put(&g, "rewards", &[t], &vec![1f64; t]);
        let mut te = vec![false; t];
        te[t - 1] = e == 0;
        put(&g, "terminations", &[t], &te);
        let mut tr = vec![false; t];
        tr[t - 1] = e == 1;
        put(&g, "truncations", &[t], &tr);
    }
    p
}

#[test]
fn minari_episodes_and_dict_observations() {
    let dir = tempfile::tempdir().unwrap();
    let p = minari_dir(dir.path());
    assert!(std::fs::read(&p).unwrap()[8] >= 2, "not a new superblock");
    let imp = import(dir.path(), Source::Auto, &ImportOptions::default()).unwrap();
    assert_eq!((imp.source, imp.file.clone()), (Source::Minari, p.clone()));
    assert_eq!(
        imp.obs_keys,
        ["achieved_goal", "goal/desired", "observation"]
    );
    let d = &imp.data;
    assert_eq!((d.len(), imp.episodes, imp.dropped), (5, 2, 0));
    assert_eq!(d.obs_shape, vec![5]);
    let row = |e: usize, s: usize| {
        let x = (100 * e + s) as f32;
        [x + 0.5, 7.0, 7.0, x, -(s as f32)]
    };
    let steps = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)];
    for (k, &(e, s)) in steps.iter().enumerate() {
        assert_eq!(d.obs(k), row(e, s));
        assert_eq!(d.next_obs(k), row(e, s + 1), "transition {k}");
    }
    assert_eq!(d.terminals, vec![false, false, true, false, false]);
    assert_eq!(d.timeouts, Some(vec![false, false, false, false, true]));
    assert_eq!(d.actions, Some(Actions::Discrete(vec![0, 1, 2, 0, 1])));

    // The user's keys, in the user's order; the file itself works too.
    let opts = ImportOptions {
        obs_keys: Some(vec!["observation".into(), "achieved_goal".into()]),
        rewards: None,
    };
    let imp = import(&p, Source::Minari, &opts).unwrap();
    assert_eq!(imp.data.obs_shape, vec![3]);
    assert_eq!(imp.data.obs(4), [101.0, -1.0, 101.5]);
    assert_eq!(imp.data.next_obs(4), [102.0, -2.0, 102.5]);
}

#[test]
fn episodes_are_read_in_numeric_order() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.hdf5");
    {
        let f = hdf5::File::create(&p).unwrap();
        for e in [10usize, 2] {
            let g = f.create_group(&format!("episode_{e}")).unwrap();
            put(&g, "observations", &[2, 1], &[e as f32, e as f32 + 1.0]);
            put(&g, "rewards", &[1], &[0f32]);
            put(&g, "terminations", &[1], &[false]);
            put(&g, "truncations", &[1], &[false]);
        }
    }
    let imp = import(&p, Source::Auto, &ImportOptions::default()).unwrap();
    assert_eq!(imp.data.observations, vec![2.0, 10.0]);
    // Neither flag: cut by the recording, and said so.
    assert_eq!(imp.data.timeouts, Some(vec![true, true]));
    assert!(
        imp.notes.iter().any(|n| n.contains("2 episodes stop")),
        "{:?}",
        imp.notes
    );
    assert!(imp.notes.iter().any(|n| n.contains("actions left out")));
}

#[test]
fn d4rl_errors_name_the_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.hdf5");
    let write = |f: &dyn Fn(&hdf5::File)| {
        let _ = std::fs::remove_file(&p);
        let h = hdf5::File::create(&p).unwrap();
        put(
            &h,
            "observations",
            &[3, 2],
            &[0f32, 1.0, 2.0, 3.0, 4.0, 5.0],
        );
        f(&h);
    };
    let o = ImportOptions::default();
    let check = |e: String, want: &[&str]| {
        assert!(e.contains("bad.hdf5"), "{e}");
        for w in want {
            assert!(e.contains(w), "`{w}` not in: {e}");
        }
    };

    write(&|_| {});
    check(err(&p, Source::D4rl, &o), &["missing key `rewards`"]);
    write(&|h| put(h, "rewards", &[2], &[0f32, 1.0]));
    check(
        err(&p, Source::D4rl, &o),
        &["`rewards`", "2 rows, expected 3"],
    );
    write(&|h| put(h, "rewards", &[3, 2], &[0f32; 6]));
    check(err(&p, Source::D4rl, &o), &["`rewards`", "shape [3, 2]"]);
    write(&|h| put(h, "rewards", &[3], &[0f32, f32::NAN, 0.0]));
    check(
        err(&p, Source::D4rl, &o),
        &["`rewards`", "row 1", "non-finite"],
    );
    write(&|h| {
        put(h, "rewards", &[3], &[0f32; 3]);
        put(h, "terminals", &[3], &[0f32, 0.5, 0.0]);
    });
    check(err(&p, Source::D4rl, &o), &["`terminals`", "row 1 is 0.5"]);
    write(&|h| {
        put(h, "rewards", &[3], &[0f32; 3]);
        put(h, "actions", &[3, 1], &[0f64, f64::INFINITY, 0.0]);
    });
    check(
        err(&p, Source::D4rl, &o),
        &["`actions`", "row 1", "non-finite"],
    );
    write(&|h| {
        put(h, "rewards", &[3], &[0f32; 3]);
        put(h, "next_observations", &[3, 3], &[0f32; 9]);
    });
    check(
        err(&p, Source::D4rl, &o),
        &["`next_observations`", "shape [3]"],
    );
    write(&|h| {
        let s: Vec<hdf5::types::FixedAscii<4>> = (0..3)
            .map(|_| hdf5::types::FixedAscii::from_ascii(b"abc").unwrap())
            .collect();
        put(h, "rewards", &[3], &s);
    });
    check(err(&p, Source::D4rl, &o), &["`rewards`", "not supported"]);
    write(&|h| {
        put(h, "rewards", &[3], &[0f32; 3]);
        put(h, "timeouts", &[3], &[true; 3]);
    });
    check(err(&p, Source::D4rl, &o), &["no transition left"]);
    write(&|h| put(h, "rewards", &[3], &[0f32; 3]));
    let pick = ImportOptions {
        obs_keys: Some(vec!["a".into()]),
        rewards: None,
    };
    check(
        err(&p, Source::D4rl, &pick),
        &["`observations` is one array"],
    );

    // NaN in an observation, with its row.
    let _ = std::fs::remove_file(&p);
    {
        let h = hdf5::File::create(&p).unwrap();
        put_gz(
            &h,
            "observations",
            &[3, 2],
            &[0f64, 1.0, 2.0, 3.0, f64::NAN, 5.0],
        );
        put(&h, "rewards", &[3], &[0f32; 3]);
    }
    check(
        err(&p, Source::Auto, &o),
        &["`observations`", "row 2", "NaN"],
    );

    // Not HDF5 at all, or not there.
    std::fs::write(&p, b"not an hdf5 file").unwrap();
    check(err(&p, Source::D4rl, &o), &["not a readable HDF5 file"]);
    let gone = dir.path().join("gone.hdf5");
    let e = err(&gone, Source::Auto, &o);
    assert!(e.contains("gone.hdf5"), "{e}");
}

#[test]
fn minari_errors_name_the_episode_and_key() {
    let o = ImportOptions::default();
    let broken = |f: &dyn Fn(&hdf5::File)| {
        let dir = tempfile::tempdir().unwrap();
        let p = minari_dir(dir.path());
        f(&hdf5::File::open_rw(&p).unwrap());
        let e = err(dir.path(), Source::Minari, &o);
        assert!(e.contains("main_data.hdf5"), "{e}");
        e
    };
    let e = broken(&|f| f.unlink("episode_1/truncations").unwrap());
    assert!(e.contains("missing key `episode_1/truncations`"), "{e}");
    let e = broken(&|f| {
        f.unlink("episode_1/rewards").unwrap();
        put(&f.group("episode_1").unwrap(), "rewards", &[3], &[0f32; 3]);
    });
    assert!(
        e.contains("`episode_1/terminations`: 2 rows, expected 3"),
        "{e}"
    );
    let e = broken(&|f| {
        f.unlink("episode_1/observations/achieved_goal").unwrap();
        let g = f.group("episode_1/observations").unwrap();
        put(&g, "achieved_goal", &[3, 1], &[0f32, f32::NAN, 0.0]);
    });
    assert!(
        e.contains("`episode_1/observations/achieved_goal`: row 1 holds a non-finite"),
        "{e}"
    );
    let e = broken(&|f| {
        let g = f.create_group("episode_2").unwrap();
        put(&g, "observations", &[1, 2], &[0f32; 2]);
        for k in ["rewards", "terminations", "truncations"] {
            put(&g, k, &[0], &[0f32; 0]);
        }
    });
    assert!(e.contains("`episode_2`: an empty episode"), "{e}");
    let e = broken(&|f| {
        f.unlink("episode_0/observations/achieved_goal").unwrap();
    });
    assert!(
        e.contains("`episode_1/observations`") && e.contains("episode_0"),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    minari_dir(dir.path());
    let pick = ImportOptions {
        obs_keys: Some(vec!["observation".into(), "velocity".into()]),
        rewards: None,
    };
    let e = err(dir.path(), Source::Auto, &pick);
    assert!(
        e.contains("`episode_0/observations/velocity` not found")
            && e.contains("achieved_goal, goal/desired, observation"),
        "{e}"
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = err(&empty, Source::Minari, &o);
    assert!(e.contains("without data/main_data.hdf5"), "{e}");
}

#[test]
fn convert_writes_whole_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.hdf5");
    d4rl_file(&p, false);
    let o = ImportOptions::default();
    for name in ["d.npz", "d.safetensors"] {
        let out = dir.path().join(name);
        let imp = convert(&p, Source::Auto, &o, &Default::default(), &out).unwrap();
        assert_eq!(Dataset::load(&out).unwrap(), imp.data);
    }
    // Episode ends survive: `laq inspect` finds no transition out of time order.
    let r = crate::eval::inspect::inspect(&dir.path().join("d.npz"), None).unwrap();
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["episodes"]["count"], 3, "{j}");
    let problems = j["problems"].as_array().unwrap();
    assert!(
        !problems
            .iter()
            .any(|p| p.as_str().unwrap().contains("next observation")),
        "{j}"
    );

    // A failed conversion leaves nothing behind.
    let bad = dir.path().join("bad.hdf5");
    std::fs::write(&bad, b"junk").unwrap();
    let out = dir.path().join("bad.npz");
    assert!(convert(&bad, Source::D4rl, &o, &Default::default(), &out).is_err());
    assert!(convert(
        &p,
        Source::D4rl,
        &o,
        &Default::default(),
        &dir.path().join("d.csv")
    )
    .is_err());
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["bad.hdf5", "d.hdf5", "d.npz", "d.safetensors"]);
}
