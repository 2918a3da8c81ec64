use super::*;
use crate::data::import::{convert, import, ImportOptions, Source};
use hdf5_writer::{
    ByteOrder as Order, DatasetBuilder, Datatype as Type, EnumMember, FilterDescription,
    H5WriteElement, Hdf5Builder, WriteOptions, FILTER_DEFLATE, FILTER_SHUFFLE,
};
use std::collections::BTreeMap;

/// The arrays of a file to write, by path; the writer creates the groups on the paths.
type Tree = BTreeMap<String, DatasetBuilder>;

fn dims(shape: &[usize]) -> Vec<u64> {
    shape.iter().map(|&d| d as u64).collect()
}

fn put<T: H5WriteElement>(t: &mut Tree, path: &str, shape: &[usize], v: &[T]) {
    let d = DatasetBuilder::typed_data(path, dims(shape), v).unwrap();
    t.insert(path.into(), d);
}

/// The mission of a MiniGrid environment as Minari stores it: a string of variable length
/// per step, `rows` of them.
fn put_mission(t: &mut Tree, path: &str, rows: usize) {
    let text = vec!["get to the green goal square"; rows];
    let d = DatasetBuilder::vlen_string_data(path, [rows as u64], &text).unwrap();
    t.insert(path.into(), d);
}

/// Chunked, shuffled and gzip-compressed, as D4RL's files store their arrays.
fn put_gz<T: H5WriteElement>(t: &mut Tree, path: &str, shape: &[usize], v: &[T]) {
    let mut chunk = dims(shape);
    chunk[0] = chunk[0].div_ceil(3).max(1);
    let filter = |id, client_data| FilterDescription {
        id,
        name: None,
        client_data,
    };
    let d = DatasetBuilder::typed_data(path, dims(shape), v)
        .unwrap()
        .chunked(chunk)
        .filter(filter(FILTER_SHUFFLE, vec![]))
        .filter(filter(FILTER_DEFLATE, vec![4]));
    t.insert(path.into(), d);
}

/// Booleans as h5py stores them: an enum over one-byte integers, FALSE = 0 and TRUE = 1.
fn put_bool(t: &mut Tree, path: &str, v: &[bool]) {
    let member = |name: &str, value: u8| EnumMember {
        name: name.into(),
        value: vec![value],
    };
    let ty = Type::Enum {
        base: Box::new(i8::hdf5_type_with_order(Order::LittleEndian)),
        members: vec![member("FALSE", 0), member("TRUE", 1)],
    };
    let bytes: Vec<u8> = v.iter().map(|&b| b as u8).collect();
    let d = DatasetBuilder::new(path, ty, [v.len() as u64]).raw_data(bytes);
    t.insert(path.into(), d);
}

fn save(t: Tree, path: &Path) {
    let plan = t
        .into_values()
        .fold(Hdf5Builder::new(), Hdf5Builder::dataset)
        .into_plan()
        .unwrap();
    std::fs::write(path, plan.encode(WriteOptions::default()).unwrap()).unwrap();
}

fn err(path: &Path, source: Source, opts: &ImportOptions) -> String {
    format!("{:#}", import(path, source, opts).unwrap_err())
}

/// 7 rows in three episodes: rows 0-2 (timeout at 2), 3-4 (terminal at 4), 5-6
/// (the end of the file). Observation row i is [i, 10 i, 100 i].
fn d4rl_file(path: &Path, next: bool) {
    let mut f = Tree::new();
    let obs: Vec<f32> = (0..7)
        .flat_map(|i| [i as f32, 10.0 * i as f32, 100.0 * i as f32])
        .collect();
    put_gz(&mut f, "observations", &[7, 3], &obs);
    if next {
        let nx: Vec<f32> = obs.iter().map(|x| x + 0.5).collect();
        put_gz(&mut f, "next_observations", &[7, 3], &nx);
    }
    let act: Vec<f64> = (0..14).map(|i| i as f64 * 0.25).collect();
    put(&mut f, "actions", &[7, 2], &act);
    let rew: Vec<f64> = (0..7).map(|i| i as f64 + 0.125).collect();
    put_gz(&mut f, "rewards", &[7], &rew);
    let term = [false, false, false, false, true, false, false];
    put_bool(&mut f, "terminals", &term);
    put(&mut f, "timeouts", &[7], &[0u8, 0, 1, 0, 0, 0, 0]);
    put(&mut f, "infos/qpos", &[7], &[0f32; 7]);
    // Strings elsewhere in the file are no obstacle.
    let name = DatasetBuilder::fixed_string_data("metadata/name", [1], &["hopper"]).unwrap();
    f.insert("metadata/name".into(), name);
    save(f, path);
}

#[test]
fn d4rl_fixture_is_chunked_and_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.hdf5");
    d4rl_file(&p, false);
    let f = Hdf5File::open(&p).unwrap();
    let ds = f.dataset("observations").unwrap();
    assert_eq!(ds.chunks(), Some(vec![3, 3]));
    assert!(is_bool(f.dataset("terminals").unwrap().dtype()));
    // The writer's superblock (version 2) and groups of link messages; h5py's default
    // (version 0, symbol-table groups) is one no Rust writer produces.
    assert_eq!(f.superblock().version, 2);
    // Stored transformed: the bytes of an observation row appear nowhere in the file,
    // where those of an action row (contiguous, unfiltered) do.
    let file = std::fs::read(&p).unwrap();
    let holds = |v: &[u8]| file.windows(v.len()).any(|w| w == v);
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>();
    assert!(!holds(&bytes(&[1.0, 10.0, 100.0])));
    let act: Vec<u8> = [0.5f64, 0.75]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert!(holds(&act));
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
    assert!(s.contains("note: left out: metadata"), "{s}");
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
    let mut f = Tree::new();
    put(&mut f, "observations", &[4], &[0u8, 1, 2, 3]);
    put(&mut f, "rewards", &[4, 1], &[0f32, 0.0, 0.0, 1.0]);
    put(&mut f, "actions", &[4], &[2i32, 0, 1, 1]);
    save(f, &p);
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
/// data/main_data.hdf5, after `edit` changed the arrays.
fn minari_dir(dir: &Path, edit: impl FnOnce(&mut Tree)) -> PathBuf {
    let mut f = Tree::new();
    for (e, t) in [(0usize, 3usize), (1, 2)] {
        let g = format!("episode_{e}");
        let base = 100.0 * e as f64;
        let obs: Vec<f64> = (0..=t)
            .flat_map(|s| [base + s as f64, -(s as f64)])
            .collect();
        let o = format!("{g}/observations");
        put_gz(&mut f, &format!("{o}/observation"), &[t + 1, 2], &obs);
        let ach: Vec<f32> = (0..=t).map(|s| (base + s as f64) as f32 + 0.5).collect();
        put(&mut f, &format!("{o}/achieved_goal"), &[t + 1, 1], &ach);
        let desired = vec![7f32; 2 * (t + 1)];
        put(&mut f, &format!("{o}/goal/desired"), &[t + 1, 2], &desired);
        let act: Vec<i64> = (0..t as i64).collect();
        put(&mut f, &format!("{g}/actions"), &[t], &act);
        put(&mut f, &format!("{g}/rewards"), &[t], &vec![1f64; t]);
        let mut te = vec![false; t];
        te[t - 1] = e == 0;
        put_bool(&mut f, &format!("{g}/terminations"), &te);
        let mut tr = vec![false; t];
        tr[t - 1] = e == 1;
        put_bool(&mut f, &format!("{g}/truncations"), &tr);
    }
    edit(&mut f);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let p = dir.join("data").join("main_data.hdf5");
    save(f, &p);
    p
}

#[test]
fn minari_episodes_and_dict_observations() {
    let dir = tempfile::tempdir().unwrap();
    let p = minari_dir(dir.path(), |_| {});
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
    // Which values are which key's, as `laq inspect` numbers them.
    assert!(
        imp.notes
            .iter()
            .any(|n| n.contains("dims `achieved_goal` 0, `goal/desired` 1-2, `observation` 3-4")),
        "{:?}",
        imp.notes
    );

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

/// Text in a dict observation (MiniGrid's `mission`, as Minari stores it: a string of
/// variable length per step) is left out by default, with a note naming it; the numbers
/// beside it are read as before. A dict of text alone is refused, naming its keys.
#[test]
fn text_in_a_dict_observation_is_left_out_and_named() {
    let text = |f: &mut Tree, key: &str| {
        for (e, t) in [(0usize, 3usize), (1, 2)] {
            put_mission(f, &format!("episode_{e}/observations/{key}"), t + 1);
        }
    };
    let dir = tempfile::tempdir().unwrap();
    minari_dir(dir.path(), |f| text(f, "mission"));
    let imp = import(dir.path(), Source::Minari, &ImportOptions::default()).unwrap();
    assert_eq!(
        imp.obs_keys,
        ["achieved_goal", "goal/desired", "observation"]
    );
    assert_eq!(imp.data.obs_shape, vec![5]);
    assert!(
        imp.notes
            .iter()
            .any(|n| n.contains("`mission` (string (variable length)) left out, not numbers")),
        "{:?}",
        imp.notes
    );
    // Named, it is read, and its type refused.
    let pick = ImportOptions {
        obs_keys: Some(vec!["observation".into(), "mission".into()]),
        rewards: None,
    };
    let e = err(dir.path(), Source::Minari, &pick);
    assert!(
        e.contains(
            "`episode_0/observations/mission`: dtype string (variable length) not supported"
        ),
        "{e}"
    );
    // Nothing but text.
    let dir = tempfile::tempdir().unwrap();
    minari_dir(dir.path(), |f| {
        for (e, _) in [(0usize, 3usize), (1, 2)] {
            for k in ["observation", "achieved_goal", "goal/desired"] {
                f.remove(&format!("episode_{e}/observations/{k}"));
            }
        }
        text(f, "mission");
    });
    let e = err(dir.path(), Source::Minari, &ImportOptions::default());
    assert!(
        e.contains("`episode_0/observations`: no array of numbers or booleans (`mission`"),
        "{e}"
    );
}

/// A camera in a dict observation (`pixels`, u8 [T + 1, 20, 20, 3] beside the vectors of
/// [`minari_dir`]): named alone it is read as frames, u8, as a file's one observation
/// array is; by default the vectors are taken without it, and picked among them it is
/// flattened; a note says which.
#[test]
fn a_camera_of_a_dict_observation_named_alone_stays_frames() {
    let dir = tempfile::tempdir().unwrap();
    let pixel = |e: usize, s: usize, i: usize| ((e * 50 + s * 10 + i) % 256) as u8;
    let p = minari_dir(dir.path(), |f| {
        for (e, t) in [(0usize, 3usize), (1, 2)] {
            let v: Vec<u8> = (0..=t)
                .flat_map(|s| (0..1200).map(move |i| pixel(e, s, i)))
                .collect();
            let key = format!("episode_{e}/observations/pixels");
            put(f, &key, &[t + 1, 20, 20, 3], &v);
        }
    });
    let opts = |keys: &[&str]| ImportOptions {
        obs_keys: Some(keys.iter().map(|k| k.to_string()).collect()),
        rewards: None,
    };
    let imp = import(&p, Source::Minari, &opts(&["pixels"])).unwrap();
    let d = &imp.data;
    // Channels-last frames are read as [C, H, W], as every frame is.
    assert_eq!(d.obs_shape, vec![3, 20, 20]);
    let frames = d.observations.as_u8().expect("frames stay u8");
    // Transition 3 is episode 1's first step, its next observation the step after; the
    // value at channel 1, row 0, column 7 was stored at (0 * 20 + 7) * 3 + 1.
    assert_eq!(frames[3 * 1200 + 400 + 7], pixel(1, 0, 22));
    let next = d.next_observations.as_u8().unwrap();
    assert_eq!(next[3 * 1200 + 400 + 7], pixel(1, 1, 22));
    assert!(
        imp.notes.iter().all(|n| !n.contains("frames")),
        "{:?}",
        imp.notes
    );

    // By default the vectors, as a LeRobot dataset's state; the note names the camera
    // left out once, and how to take it.
    let imp = import(&p, Source::Minari, &ImportOptions::default()).unwrap();
    assert_eq!(
        imp.obs_keys,
        ["achieved_goal", "goal/desired", "observation"]
    );
    assert_eq!(imp.data.obs_shape, vec![5]);
    let said: Vec<&String> = imp.notes.iter().filter(|n| n.contains("frames")).collect();
    assert_eq!(said.len(), 1, "{:?}", imp.notes);
    assert!(said[0].contains("left out of the observations: `pixels` ([20, 20, 3])"));
    assert!(said[0].contains("`--obs-keys pixels`"), "{}", said[0]);
    // Picked with the vectors: flattened into one vector per step, and said so.
    let imp = import(&p, Source::Minari, &opts(&["observation", "pixels"])).unwrap();
    assert_eq!(imp.data.obs_shape, vec![2 + 1200]);
    assert_eq!(imp.data.obs(4)[..2], [101.0, -1.0]);
    let said: Vec<&String> = imp.notes.iter().filter(|n| n.contains("frames")).collect();
    assert_eq!(said.len(), 1, "{:?}", imp.notes);
    assert!(
        said[0].contains("`pixels` ([20, 20, 3]): flattened"),
        "{}",
        said[0]
    );

    // A vector named alone keeps its own shape too.
    let imp = import(&p, Source::Minari, &opts(&["observation"])).unwrap();
    assert_eq!(imp.data.obs_shape, vec![2]);
    assert_eq!(imp.data.obs(4), [101.0, -1.0]);
}

/// A dict observation as Minari records MiniGrid: the heading (`direction`, one number a
/// row), a grid's symbolic encoding (`image`, u8: the agent's own 7 x 7 cells, or the
/// whole 19 x 19 grid) and the mission (text). The grid is read as frames, as a camera
/// is; the lone heading beside it is no state, and is left out.
#[test]
fn a_minigrid_dict_reads_its_grid_by_default() {
    for side in [7usize, 19] {
        let dir = tempfile::tempdir().unwrap();
        minari_dir(dir.path(), |f| {
            for (e, t) in [(0usize, 3usize), (1, 2)] {
                for k in ["observation", "achieved_goal", "goal/desired"] {
                    f.remove(&format!("episode_{e}/observations/{k}"));
                }
                let o = format!("episode_{e}/observations");
                let heading: Vec<i64> = (0..=t as i64).map(|s| s % 4).collect();
                put(f, &format!("{o}/direction"), &[t + 1], &heading);
                let cells = side * side * 3;
                let grid: Vec<u8> = (0..=t)
                    .flat_map(|s| (0..cells).map(move |i| ((e + s + i) % 11) as u8))
                    .collect();
                put(f, &format!("{o}/image"), &[t + 1, side, side, 3], &grid);
                put_mission(f, &format!("{o}/mission"), t + 1);
            }
        });
        let imp = import(dir.path(), Source::Minari, &ImportOptions::default()).unwrap();
        let notes = imp.notes.join(" | ");
        assert_eq!(imp.obs_keys, ["image"]);
        // Channels-last where the frames are large enough to tell ([`FrameLayout`]).
        let shape = if side == 7 { [7, 7, 3] } else { [3, 19, 19] };
        assert_eq!(imp.data.obs_shape, shape);
        assert!(imp.data.observations.as_u8().is_some());
        assert!(
            notes.contains("`direction` (one number a row) left out beside frames")
                && notes.contains("`--obs-keys image,direction`")
                && notes.contains("`mission`"),
            "{notes}"
        );
    }
}

#[test]
fn episodes_are_read_in_numeric_order() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.hdf5");
    let mut f = Tree::new();
    for e in [10usize, 2] {
        let g = format!("episode_{e}");
        let obs = [e as f32, e as f32 + 1.0];
        put(&mut f, &format!("{g}/observations"), &[2, 1], &obs);
        put(&mut f, &format!("{g}/rewards"), &[1], &[0f32]);
        put_bool(&mut f, &format!("{g}/terminations"), &[false]);
        put_bool(&mut f, &format!("{g}/truncations"), &[false]);
    }
    save(f, &p);
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
    let write = |edit: &dyn Fn(&mut Tree)| {
        let mut h = Tree::new();
        let obs = [0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
        put(&mut h, "observations", &[3, 2], &obs);
        edit(&mut h);
        save(h, &p);
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
    write(&|h| put(h, "rewards/r", &[3], &[0f32; 3]));
    check(
        err(&p, Source::D4rl, &o),
        &["`rewards`: a group, expected an array"],
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
    // Strings, of fixed and of variable length.
    write(&|h| {
        let s = DatasetBuilder::fixed_string_data("rewards", [3], &["abc"; 3]).unwrap();
        h.insert("rewards".into(), s);
    });
    check(
        err(&p, Source::D4rl, &o),
        &["`rewards`", "string (fixed length 3) not supported"],
    );
    write(&|h| {
        let s = DatasetBuilder::vlen_string_data("rewards", [3], &["a", "bc", ""]).unwrap();
        h.insert("rewards".into(), s);
    });
    check(
        err(&p, Source::D4rl, &o),
        &["`rewards`", "string (variable length) not supported"],
    );
    write(&|h| {
        put(h, "rewards", &[3], &[0f32; 3]);
        put_bool(h, "timeouts", &[true; 3]);
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
    write(&|h| {
        let obs = [0f64, 1.0, 2.0, 3.0, f64::NAN, 5.0];
        put_gz(h, "observations", &[3, 2], &obs);
        put(h, "rewards", &[3], &[0f32; 3]);
    });
    check(
        err(&p, Source::Auto, &o),
        &["`observations`", "row 2", "NaN"],
    );

    // Cut short, as by an interrupted download: refused whole, wherever the cut.
    d4rl_file(&p, true);
    let full = std::fs::read(&p).unwrap();
    for keep in [full.len() - 1, full.len() * 2 / 3, 100, 20] {
        std::fs::write(&p, &full[..keep]).unwrap();
        check(err(&p, Source::D4rl, &o), &["not a readable HDF5 file"]);
    }
    std::fs::write(&p, &full[..full.len() - 1]).unwrap();
    check(err(&p, Source::D4rl, &o), &["truncated"]);

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
    let broken = |edit: &dyn Fn(&mut Tree)| {
        let dir = tempfile::tempdir().unwrap();
        minari_dir(dir.path(), edit);
        let e = err(dir.path(), Source::Minari, &o);
        assert!(e.contains("main_data.hdf5"), "{e}");
        e
    };
    let e = broken(&|f| {
        f.remove("episode_1/truncations");
    });
    assert!(e.contains("missing key `episode_1/truncations`"), "{e}");
    let e = broken(&|f| put(f, "episode_1/rewards", &[3], &[0f32; 3]));
    assert!(
        e.contains("`episode_1/terminations`: 2 rows, expected 3"),
        "{e}"
    );
    let e = broken(&|f| {
        let nan = [0f32, f32::NAN, 0.0];
        put(f, "episode_1/observations/achieved_goal", &[3, 1], &nan);
    });
    assert!(
        e.contains("`episode_1/observations/achieved_goal`: row 1 holds a non-finite"),
        "{e}"
    );
    let e = broken(&|f| {
        put(f, "episode_2/observations", &[1, 2], &[0f32; 2]);
        for k in ["rewards", "terminations", "truncations"] {
            put(f, &format!("episode_2/{k}"), &[0], &[0f32; 0]);
        }
    });
    assert!(e.contains("`episode_2`: an empty episode"), "{e}");
    let e = broken(&|f| {
        f.remove("episode_0/observations/achieved_goal");
    });
    assert!(
        e.contains("`episode_1/observations`") && e.contains("episode_0"),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    minari_dir(dir.path(), |_| {});
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

/// Frames stored as u8 stay u8 (a quarter of f32's memory), whether D4RL's rows or
/// Minari's episodes, and are read in the layouts the dataset format reads.
#[test]
fn u8_frames_stay_u8() {
    let dir = tempfile::tempdir().unwrap();
    // D4RL: 5 grey 20x20 frames, a terminal at row 2, the file ending at row 4.
    let px = |i: usize, j: usize| ((i * 7 + j) % 256) as u8;
    let frames: Vec<u8> = (0..5)
        .flat_map(|i| (0..400).map(move |j| px(i, j)))
        .collect();
    let mut f = Tree::new();
    put(&mut f, "observations", &[5, 20, 20], &frames);
    put(&mut f, "rewards", &[5], &[0f32, 0., 1., 0., 0.]);
    put(&mut f, "terminals", &[5], &[0u8, 0, 1, 0, 0]);
    let p = dir.path().join("d.hdf5");
    save(f, &p);
    let d = import(&p, Source::Auto, &ImportOptions::default())
        .unwrap()
        .data;
    assert_eq!((d.len(), d.obs_shape.clone()), (4, vec![1, 20, 20]));
    let bytes = d.next_observations.as_u8().expect("u8 kept");
    assert_eq!(bytes[3 * 400 + 9], px(4, 9));
    assert_eq!(bytes[2 * 400 + 9], px(2, 9), "a terminal's next is its own");

    // Minari: one episode of 3 steps, RGB frames 17x4 stored channels-last.
    let mut f = Tree::new();
    let rgb: Vec<u8> = (0..4)
        .flat_map(|s| (0..17 * 4 * 3).map(move |j| px(s, j)))
        .collect();
    put(&mut f, "episode_0/observations", &[4, 17, 4, 3], &rgb);
    put(&mut f, "episode_0/rewards", &[3], &[0f64, 0., 1.]);
    put_bool(&mut f, "episode_0/terminations", &[false, false, true]);
    put_bool(&mut f, "episode_0/truncations", &[false; 3]);
    let m = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(m.path().join("data")).unwrap();
    save(f, &m.path().join("data").join("main_data.hdf5"));
    let d = import(m.path(), Source::Auto, &ImportOptions::default())
        .unwrap()
        .data;
    assert_eq!((d.len(), d.obs_shape.clone()), (3, vec![3, 17, 4]));
    let obs = d.observations.as_u8().expect("u8 kept");
    // Step 1, channel 2 (blue), pixel (h 5, w 3): stored at ((5 * 4) + 3) * 3 + 2.
    assert_eq!(obs[204 + (2 * 17 + 5) * 4 + 3], px(1, (5 * 4 + 3) * 3 + 2));
    let next = d.next_observations.as_u8().expect("u8 kept");
    assert_eq!(next[..204], obs[204..408]);
}

/// A robomimic file of two demos (3 and 2 steps): `obs` and `next_obs` groups with
/// `robot0_eef_pos` [T, 2], a camera `agentview_image` u8 [T, 20, 20, 3] and a grey one
/// `wrist_image` [T, 1, 20, 20], `actions`
/// [T, 7], `rewards`, `dones` (demo 0 done at its last step, demo 1 cut), and a `mask`
/// group of filter keys beside `data`; `next` says whether `next_obs` is written.
fn robomimic_file(path: &Path, next: bool) {
    let mut f = Tree::new();
    for (e, t) in [(0usize, 3usize), (1, 2)] {
        let g = format!("data/demo_{e}");
        let pos = |s: usize| [(10 * e + s) as f32, -(s as f32)];
        let cam = |s: usize| (0..1200).map(move |i| ((e * 50 + s * 10 + i) % 256) as u8);
        let mut groups = vec![("obs", 0usize)];
        if next {
            groups.push(("next_obs", 1));
        }
        for (o, shift) in groups {
            let p: Vec<f32> = (shift..t + shift).flat_map(pos).collect();
            put(&mut f, &format!("{g}/{o}/robot0_eef_pos"), &[t, 2], &p);
            let c: Vec<u8> = (shift..t + shift).flat_map(cam).collect();
            put(
                &mut f,
                &format!("{g}/{o}/agentview_image"),
                &[t, 20, 20, 3],
                &c,
            );
            // A grey wrist camera stored [1, H, W]: 200 + the step, everywhere.
            let wrist: Vec<u8> = (shift..t + shift)
                .flat_map(|s| std::iter::repeat_n(200 + s as u8, 400))
                .collect();
            put(
                &mut f,
                &format!("{g}/{o}/wrist_image"),
                &[t, 1, 20, 20],
                &wrist,
            );
        }
        put(
            &mut f,
            &format!("{g}/actions"),
            &[t, 7],
            &vec![0.5f64; 7 * t],
        );
        put(&mut f, &format!("{g}/rewards"), &[t], &vec![0f32; t]);
        let mut done = vec![0u8; t];
        done[t - 1] = u8::from(e == 0);
        put(&mut f, &format!("{g}/dones"), &[t], &done);
    }
    put(&mut f, "mask/train", &[2], &[0u8, 1]);
    save(f, path);
}

#[test]
fn robomimic_demos_with_and_without_next_obs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("image.hdf5");
    robomimic_file(&p, true);
    let pick = |keys: &[&str]| ImportOptions {
        obs_keys: Some(keys.iter().map(|k| k.to_string()).collect()),
        rewards: None,
    };
    let imp = import(&p, Source::Auto, &pick(&["robot0_eef_pos"])).unwrap();
    assert_eq!(imp.source, Source::Robomimic);
    let d = &imp.data;
    assert_eq!((d.len(), imp.episodes, imp.dropped), (5, 2, 0));
    assert_eq!(d.obs_shape, vec![2]);
    let steps = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)];
    for (k, &(e, s)) in steps.iter().enumerate() {
        assert_eq!(d.obs(k), [(10 * e + s) as f32, -(s as f32)]);
        assert_eq!(d.next_obs(k), [(10 * e + s + 1) as f32, -(s as f32 + 1.0)]);
    }
    assert_eq!(d.terminals, vec![false, false, true, false, false]);
    assert_eq!(d.timeouts, Some(vec![false, false, false, false, true]));
    assert!(matches!(
        d.actions,
        Some(Actions::Continuous { dim: 7, .. })
    ));
    assert!(
        imp.notes.iter().any(|n| n == "left out: mask"),
        "{:?}",
        imp.notes
    );
    assert!(imp.notes.iter().any(|n| n.contains("1 of 2 demos stop")));

    // The camera alone: u8 frames, read as [C, H, W].
    let imp = import(&p, Source::Robomimic, &pick(&["agentview_image"])).unwrap();
    assert_eq!(imp.data.obs_shape, vec![3, 20, 20]);
    assert!(imp.data.observations.as_u8().is_some());
    // Both cameras: one frame of their channels side by side, u8.
    let imp = import(&p, Source::Auto, &pick(&["agentview_image", "wrist_image"])).unwrap();
    let d = &imp.data;
    assert_eq!(d.obs_shape, vec![4, 20, 20]);
    let frames = d.observations.as_u8().unwrap();
    // Transition 4 is demo 1's step 1: channel 1 of the first camera at row 0, column 7
    // was stored at (0 * 20 + 7) * 3 + 1; channel 3 is the wrist's.
    assert_eq!(frames[4 * 1600 + 400 + 7], 50 + 10 + 22);
    assert_eq!(frames[4 * 1600 + 3 * 400 + 7], 201);
    assert_eq!(
        d.next_observations.as_u8().unwrap()[4 * 1600 + 3 * 400],
        202
    );
    let said = "side by side along the channels, [4, 20, 20]";
    assert!(
        imp.notes.iter().any(|n| n.contains(said)),
        "{:?}",
        imp.notes
    );
    // By default the vectors, the cameras named in a note.
    let imp = import(&p, Source::Auto, &ImportOptions::default()).unwrap();
    assert_eq!(imp.obs_keys, ["robot0_eef_pos"]);
    assert_eq!(imp.data.obs_shape, vec![2]);
    let said = "left out of the observations: `agentview_image` ([20, 20, 3]), `wrist_image` ([1, 20, 20])";
    assert!(
        imp.notes.iter().any(|n| n.contains(said)),
        "{:?}",
        imp.notes
    );

    // Without `next_obs`: the next step of the demo; demo 0 ends done (kept, no next
    // observation), demo 1 is cut (its last step left out and counted).
    let p = dir.path().join("low_dim.hdf5");
    robomimic_file(&p, false);
    let imp = import(&p, Source::Auto, &pick(&["robot0_eef_pos"])).unwrap();
    let d = &imp.data;
    assert_eq!((d.len(), imp.dropped), (4, 1));
    assert_eq!(d.obs(1), [1.0, -1.0]);
    assert_eq!(d.next_obs(1), [2.0, -2.0]);
    assert_eq!(d.terminals, vec![false, false, true, false]);
    assert_eq!(d.next_missing, Some(vec![false, false, true, false]));
    assert_eq!(d.obs(3), [10.0, 0.0]);
    assert_eq!(d.next_obs(3), [11.0, -1.0]);
    assert!(imp.notes.iter().any(|n| n.contains("no `next_obs`")));
}

#[test]
fn robomimic_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.hdf5");
    let mut f = Tree::new();
    put(&mut f, "data/demo_0/obs/state", &[4, 2], &[0f32; 8]);
    put(&mut f, "data/demo_0/rewards", &[3], &[0f32; 3]);
    save(f, &p);
    let e = format!(
        "{:#}",
        import(&p, Source::Auto, &ImportOptions::default()).unwrap_err()
    );
    assert!(e.contains("`data/demo_0/obs`: 4 rows, expected 3"), "{e}");
    let mut f = Tree::new();
    put(&mut f, "data/other", &[1], &[0f32]);
    save(f, &p);
    let e = format!(
        "{:#}",
        import(&p, Source::Robomimic, &ImportOptions::default()).unwrap_err()
    );
    assert!(e.contains("no `data/demo_N` groups"), "{e}");
}

/// Each array is weighed before it is read: one larger than the memory left is refused
/// with its key, shape and type.
#[test]
fn an_array_larger_than_the_memory_left_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.hdf5");
    d4rl_file(&p, true);
    let opts = ImportOptions::default();
    // 7 x 3 f32 observations: 84 bytes.
    let e = crate::util::memory::with_left(80, || err(&p, Source::Auto, &opts));
    assert!(
        e.contains("`observations` ([7, 3] f32): 0.1 kB in memory"),
        "{e}"
    );
    let fits = crate::util::memory::with_left(1 << 20, || import(&p, Source::Auto, &opts));
    assert!(fits.is_ok());
}
