//! The verdict every `laq train` gives on its V, the density gate and the one-norm head.

mod common;

use common::{laq, metrics, ok, predicted};

/// Every run judges its own V: the grid world's is trusted, the same data with s'
/// shuffled is doubtful (and `--strict` makes that exit with status 4) and says to check
/// how the rows pair; without rewards, it says where rewards are read from. The verdict
/// is in `metrics.json`, `summary.txt`, `report.md` and `laq inspect DIR`.
#[test]
fn every_run_gets_a_verdict_and_strict_fails_a_doubtful_one() {
    use laq::data::Dataset;
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.npz");
    let g = grid.to_str().unwrap();
    ok(&["gen", "gridworld", "--episodes", "5000", "--out", g]);
    let good = dir.path().join("good");
    let out = ok(&[
        "train",
        "--data",
        g,
        "--out",
        good.to_str().unwrap(),
        "--strict",
    ]);
    assert!(out.contains("verdict: trusted"), "{out}");
    let m = metrics(&good.join("metrics.json"));
    assert_eq!(m["trust"]["verdict"], "trusted");
    for c in m["trust"]["checks"].as_array().unwrap() {
        for k in ["name", "value", "threshold", "pass", "why"] {
            assert!(!c[k].is_null(), "{c}");
        }
    }
    let report = std::fs::read_to_string(good.join("report.md")).unwrap();
    assert!(report.contains("**Verdict: trusted.**"), "{report}");
    let shown = ok(&["inspect", good.to_str().unwrap()]);
    assert!(
        shown.contains("verdict: trusted") && shown.contains("layer 0"),
        "{shown}"
    );

    // The same data with every s' moved to another row.
    let mut d = Dataset::load(&grid).unwrap();
    let n = d.len();
    let idx: Vec<usize> = (0..n).map(|i| (i * 7919 + 13) % n).collect();
    let next = d.select(&idx).next_observations;
    d.next_observations = next;
    let shuffled = dir.path().join("shuffled.npz");
    d.save(&shuffled).unwrap();
    let bad = dir.path().join("bad");
    let args = [
        "train",
        "--data",
        shuffled.to_str().unwrap(),
        "--out",
        bad.to_str().unwrap(),
        "--strict",
    ];
    let run = laq(&args);
    assert_eq!(
        run.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(out.contains("verdict: DOUBTFUL"), "{out}");
    let m = metrics(&bad.join("metrics.json"));
    assert_eq!(m["trust"]["verdict"], "doubtful");
    // Mismatched rows are caught by the data alone, whatever V came out.
    let matched = m["trust"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "transitions_match")
        .unwrap();
    assert_eq!(matched["pass"], false, "{matched}");
    // And the run says what to look at; a trusted run has no advice.
    let advice = m["trust"]["advice"].to_string();
    assert!(
        advice.contains("next observation follows its own"),
        "{advice}"
    );
    assert!(
        out.contains("to try: check that each row's next observation"),
        "{out}"
    );
    let good = metrics(&good.join("metrics.json"));
    assert!(good["trust"].get("advice").is_none(), "{good}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["inspect", bad.to_str().unwrap(), "--json"])).unwrap();
    assert_eq!(json["kind"], "run");
    assert_eq!(json["metrics"]["trust"]["verdict"], "doubtful");

    // The grid's data with other rewards, trained: the run, its output, its metrics
    // and its `rewards` check.
    let rewarded_as = |name: &str, reward: fn(f32) -> f32| {
        let mut d = Dataset::load(&grid).unwrap();
        d.rewards.iter_mut().for_each(|r| *r = reward(*r));
        let file = dir.path().join(format!("{name}.npz"));
        d.save(&file).unwrap();
        let run = dir.path().join(name);
        let args = ["train", "--data", file.to_str().unwrap(), "--out"];
        let out = ok(&[&args[..], &[run.to_str().unwrap()]].concat());
        let m = metrics(&run.join("metrics.json"));
        let checks = m["trust"]["checks"].as_array().unwrap();
        let rewards = checks
            .iter()
            .find(|c| c["name"] == "rewards")
            .unwrap()
            .clone();
        (run, out, m, rewards)
    };

    // Without any reward: doubtful by `rewards`, told where rewards are read from. No
    // state collected a return to hold V to (the check was NaN, and `laq inspect` could
    // not read the run back).
    let (none, out, m, rewards) = rewarded_as("none", |_| 0.0);
    assert!(out.contains("to try: no row carries a reward"), "{out}");
    assert_eq!(rewards["pass"], false, "{rewards}");
    let checks = m["trust"]["checks"].as_array().unwrap();
    assert!(
        !checks.iter().any(|c| c["name"] == "below_data_returns"),
        "{m}"
    );
    let shown = ok(&["inspect", none.to_str().unwrap()]);
    assert!(shown.contains("verdict: DOUBTFUL"), "{shown}");

    // A penalty where the reward was, 0 elsewhere: V differs from state to state, but
    // nothing marks a goal for the checks to follow, so doubtful by `rewards` too.
    let (_, out, m, rewards) = rewarded_as("penalties", |r| -r.abs());
    assert_eq!(m["trust"]["verdict"], "doubtful", "{out}");
    assert_eq!(rewards["pass"], false, "{rewards}");
    let why = rewards["why"].as_str().unwrap();
    assert!(why.contains("below 0 are penalties"), "{rewards}");
}

/// The U-maze's V with the default schedule is trusted; with `--dqn-steps 300` it ranks
/// the maze far worse (about 0.35 against the geodesic distance, 0.88 by default), yet
/// its seeds agree and its ranking is stable: the run is doubtful because V lies below
/// the returns the data itself collected, and it says to train with the data's schedule.
/// The default run names, in `metrics.json` and
/// `report.md`, the checkpoint the checks chose. With four channels that wander on their
/// own beside the state, the halves of the trajectories disagree on V, and the run
/// learns again ignoring the values its labels call noise; values named in
/// `ignored_values` are read as zero by the exported V. With a clock beside it, the V
/// that ignores the clock is exported.
#[test]
fn an_undertrained_maze_v_is_doubtful() {
    let dir = tempfile::tempdir().unwrap();
    let maze = dir.path().join("maze.npz");
    let m = maze.to_str().unwrap();
    ok(&[
        "gen", "maze2d", "--layout", "umaze", "--steps", "20000", "--seed", "3", "--out", m,
    ]);
    let verdict = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let mut args = vec!["train", "--data", m, "--out", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        ok(&args);
        metrics(&out.join("metrics.json"))["trust"].clone()
    };
    let good = verdict("good", &[]);
    assert_eq!(good["verdict"], "trusted", "{good}");
    // Point-mass states have a distance: V is also judged against the fewest steps to a
    // reward through the data, its trajectories joined at near states.
    let passes = |name: &str| {
        let checks = good["checks"].as_array().unwrap();
        checks
            .iter()
            .any(|c| c["name"] == name && c["pass"] == true)
    };
    assert!(passes("path_ranking"), "{good}");
    // The checkpoint the checks chose is no lone pass: most of those after it pass too.
    assert!(passes("choice_holds"), "{good}");
    // The ensemble's checkpoint is chosen by the checks, and the run says which.
    let run = dir.path().join("good");
    let chosen: Vec<u64> = metrics(&run.join("metrics.json"))["q_checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["chosen"] == true)
        .map(|c| c["step"].as_u64().unwrap())
        .collect();
    assert_eq!(chosen.len(), 1, "{chosen:?}");
    let said = format!("V is the ensemble's at Q-learning step {} of", chosen[0]);
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains(&said), "{report}");
    let short = verdict("short", &["--dqn-steps", "300"]);
    assert_eq!(short["verdict"], "doubtful", "{short}");
    let failed: Vec<&str> = short["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["pass"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(failed.contains(&"below_data_returns"), "{short}");
    // The run knows it was cut short of its data's schedule, and says to train with it.
    let advice = short["advice"].to_string();
    assert!(advice.contains("Q-learning ran 300 steps"), "{advice}");
    let report = std::fs::read_to_string(dir.path().join("short/report.md")).unwrap();
    assert!(
        report.contains("To try: Q-learning ran 300 steps"),
        "{report}"
    );

    // Channels that wander on their own (a battery, a temperature: random walks along the
    // rows) let Q-learning tell each trajectory's states apart and learn each one's own
    // steps to a reward: one half of the trajectories then teaches nothing of the other's.
    // The run then learns again ignoring the values its labels call noise, and exports
    // that V only where it fails fewer checks.
    assert!(passes("halves_agree"), "{good}");
    let wander = dir.path().join("wander.npz");
    with_wandering_channels(&maze, &wander, 4, 7);
    let out = dir.path().join("wander");
    let w = wander.to_str().unwrap();
    ok(&["train", "--data", w, "--out", out.to_str().unwrap()]);
    let m = metrics(&out.join("metrics.json"));
    let noise = &m["noise_ignored"];
    assert_eq!(noise["reading"], "doubtful", "{m}");
    let failed = |key: &str| -> Vec<String> {
        let names = noise[key].as_array().unwrap().iter();
        names.map(|c| c.as_str().unwrap().to_string()).collect()
    };
    assert!(
        failed("reading_failed").contains(&"halves_agree".to_string()),
        "{noise}"
    );
    let explained: Vec<f64> = (m["change_explained"].as_array().unwrap().iter())
        .map(|x| x.as_f64().unwrap())
        .collect();
    // Each value named is noise to every label, or moved by none over up to 64 steps.
    let moved: Vec<Option<f64>> = serde_json::from_value(m["labels_move"].clone()).unwrap();
    let named: Vec<usize> = serde_json::from_value(noise["values"].clone()).unwrap();
    let unmoved: Vec<usize> = serde_json::from_value(noise["unmoved"].clone()).unwrap();
    let why = |j: usize| match unmoved.contains(&j) {
        true => moved[j].is_some_and(|x| x < 0.1),
        false => explained[j] < 0.1,
    };
    assert!(!named.is_empty() && named.iter().all(|&j| why(j)), "{m}");
    let fewer = failed("ignoring_failed").len() < failed("reading_failed").len();
    assert_eq!(noise["exported_ignoring"], fewer, "{noise}");
    let exported = if fewer { "ignoring" } else { "reading" };
    assert_eq!(m["trust"]["verdict"], noise[exported], "{m}");

    // Values named by `--ignore-values` are read as zero by the exported V, whatever a
    // state holds there; `config.toml` names them, and the run repeats to the same model.
    let first = dir.path().join("ignoring");
    let f = first.to_str().unwrap();
    // Only the values named: no retry that might add others.
    let settings = dir.path().join("no-retry.toml");
    std::fs::write(
        &settings,
        "retry_ignoring_noise = false\nretry_ignoring_unmoved = false\n",
    )
    .unwrap();
    let s = settings.to_str().unwrap();
    let ignore = ["--ignore-values", "4,5,6,7"];
    ok(&[
        &["train", "--data", w, "--config", s][..],
        &ignore,
        &["--out", f],
    ]
    .concat());
    assert!(metrics(&first.join("metrics.json"))["noise_ignored"].is_null());
    let config = std::fs::read_to_string(first.join("config.toml")).unwrap();
    assert!(config.contains("ignored_values = [4, 5, 6, 7]"), "{config}");
    let again = dir.path().join("again");
    ok(&["train", "--repeat", f, "--out", again.to_str().unwrap()]);
    let bytes = |run: &std::path::Path| std::fs::read(run.join("value.safetensors")).unwrap();
    assert!(bytes(&first) == bytes(&again));
    let elsewhere = dir.path().join("elsewhere.npz");
    with_wandering_channels(&maze, &elsewhere, 4, 8);
    let model = first.join("value.safetensors");
    assert_eq!(predicted(&model, &wander), predicted(&model, &elsewhere));
    let shown = ok(&["inspect", model.to_str().unwrap()]);
    let line = "values V does not read (scale 0; the run's `ignored_values`): 4, 5, 6, 7";
    assert!(shown.contains(line), "{shown}");

    // A clock (each row's place in the log) is noise to every label too: V ranked the
    // states by when they were logged, and the V that ignores it fails fewer checks.
    let clock = dir.path().join("clock.npz");
    with_clock(&maze, &clock);
    let out = dir.path().join("clock");
    let c = clock.to_str().unwrap();
    ok(&["train", "--data", c, "--out", out.to_str().unwrap()]);
    let m = metrics(&out.join("metrics.json"));
    let noise = &m["noise_ignored"];
    assert_eq!(noise["values"], serde_json::json!([4]), "{m}");
    assert_eq!(noise["exported_ignoring"], true, "{noise}");
    // No label moves the clock, over any stretch; they move the ball's place and speed.
    assert_eq!(noise["unmoved"], serde_json::json!([4]), "{m}");
    let moved: Vec<f64> = serde_json::from_value(m["labels_move"].clone()).unwrap();
    assert!(moved[..4].iter().all(|&x| x > 0.1) && moved[4] < 0.1, "{m}");
    let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(config.contains("ignored_values = [4]"), "{config}");
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(
        summary.contains("exported: the V that ignores it"),
        "{summary}"
    );
}

/// `from` with one more value: each row's place in the file, from 0 to 1.
fn with_clock(from: &std::path::Path, to: &std::path::Path) {
    use laq::data::Dataset;
    let d = Dataset::load(from).unwrap();
    let (n, dim) = (d.len(), d.obs_dim());
    let (mut obs, mut next) = (vec![], vec![]);
    for i in 0..n {
        obs.extend_from_slice(&d.obs_row(i));
        obs.push(i as f32 / n as f32);
        next.extend_from_slice(&d.next_obs_row(i));
        next.push((i + 1) as f32 / n as f32);
    }
    let clocked = Dataset {
        obs_shape: vec![dim + 1],
        observations: obs.into(),
        next_observations: next.into(),
        ..d
    };
    clocked.save(to).unwrap();
}

/// `from` with `k` more channels, each a random walk of step 0.02 along the rows that run
/// on into the next (a new start where they do not), drawn from `seed`.
fn with_wandering_channels(from: &std::path::Path, to: &std::path::Path, k: usize, seed: u64) {
    use laq::data::Dataset;
    use rand::{Rng, SeedableRng};
    let d = Dataset::load(from).unwrap();
    let (n, dim) = (d.len(), d.obs_dim());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let walk = |rng: &mut rand_chacha::ChaCha8Rng| -> f32 { rng.random_range(-1.0..1.0) };
    let mut now: Vec<f32> = (0..k).map(|_| walk(&mut rng)).collect();
    let (mut obs, mut next) = (vec![], vec![]);
    for i in 0..n {
        obs.extend_from_slice(&d.obs_row(i));
        obs.extend_from_slice(&now);
        let continues = d.continues(i);
        for v in now.iter_mut() {
            *v += 0.02 * walk(&mut rng);
        }
        next.extend_from_slice(&d.next_obs_row(i));
        next.extend_from_slice(&now);
        if !continues {
            now = (0..k).map(|_| walk(&mut rng)).collect();
        }
    }
    let wandering = Dataset {
        obs_shape: vec![dim + k],
        observations: obs.into(),
        next_observations: next.into(),
        ..d
    };
    wandering.save(to).unwrap();
}

/// `--density-gate 0,1 --head one-norm`: the model carries a gate the runtime applies
/// (a state far from the data is out of distribution) and V = 1 - ||phi(s)||.
#[test]
fn density_gate_and_one_norm_head_reach_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.npz");
    let g = grid.to_str().unwrap();
    ok(&["gen", "gridworld", "--episodes", "2000", "--out", g]);
    let run = dir.path().join("run");
    ok(&[
        "train",
        "--data",
        g,
        "--out",
        run.to_str().unwrap(),
        "--density-gate",
        "0,1",
        "--head",
        "one-norm",
    ]);
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(config.contains("head = \"one_norm\""), "{config}");
    let bytes = std::fs::read(run.join("value.safetensors")).unwrap();
    let m = laq_runtime::Model::new_checked(&bytes).unwrap();
    assert_eq!(m.head(), laq_runtime::Head::OneNorm);
    assert!(m.has_density_gate());
    assert!(m.in_distribution(&[2.0, 3.0]).unwrap());
    assert!(!m.in_distribution(&[40.0, -30.0]).unwrap());
    let mut scratch = vec![0f32; m.scratch_len()];
    let near = m.value(&[5.0, 4.0], &mut scratch).unwrap();
    let start = m.value(&[0.0, 0.0], &mut scratch).unwrap();
    assert!(
        near <= 1.0 && near > start,
        "V(5,4) {near} vs V(0,0) {start}"
    );
    let shown = ok(&["inspect", run.join("value.safetensors").to_str().unwrap()]);
    assert!(
        shown.contains("head one_norm") && shown.contains("density gate: yes"),
        "{shown}"
    );
}

/// A log that cuts each episode at its goal, as Minari's goal-reaching data record each
/// goal reached (a timeout on the rewarded row, the next episode going on from there with
/// another goal in the state): Q-learning ends those episodes there and learns by IQL,
/// `summary.txt` and `metrics.json` say so, and the check that V ranks the cut states
/// alike applies and passes; V ranks the states by their distance to the goal.
#[test]
fn a_log_cut_at_its_goals_ends_them_for_q_learning() {
    use laq::data::Dataset;
    let mut rand = common::xorshift(11);
    let mut uniform = move || (rand() % 1_000_000) as f32 / 1_000_000.0;
    let (mut obs, mut next, mut rewards, mut timeouts, mut distance) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut x, mut y) = (2.5f32, 2.5f32);
    let mut cuts = 0;
    while rewards.len() < 3000 {
        let (gx, gy) = (5.0 * uniform(), 5.0 * uniform());
        for step in 0..60 {
            let (dx, dy) = (gx - x, gy - y);
            let d = (dx * dx + dy * dy).sqrt();
            let (nx, ny) = (
                x + 0.3 * dx / d.max(0.3) + 0.2 * (uniform() - 0.5),
                y + 0.3 * dy / d.max(0.3) + 0.2 * (uniform() - 0.5),
            );
            let reached = ((gx - nx).powi(2) + (gy - ny).powi(2)).sqrt() < 0.3;
            obs.extend([x, y, gx, gy]);
            next.extend([nx, ny, gx, gy]);
            distance.push(-d as f64);
            rewards.push(f32::from(u8::from(reached)));
            timeouts.push(reached || step == 59);
            cuts += usize::from(reached);
            (x, y) = (nx, ny);
            if reached {
                break;
            }
        }
    }
    let n = rewards.len();
    let d = Dataset {
        obs_shape: vec![4],
        observations: obs.into(),
        next_observations: next.into(),
        rewards,
        terminals: vec![false; n],
        timeouts: Some(timeouts),
        next_missing: None,
        actions: None,
    };
    assert!(cuts >= 20 && d.reward_cuts().len() == cuts);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("goals.npz");
    d.save(&file).unwrap();
    let run = dir.path().join("run");
    let out = ok(&[
        "train",
        "--data",
        file.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ]);
    let summary = std::fs::read_to_string(run.join("summary.txt")).unwrap();
    assert!(summary.contains("Q-learning         iql"), "{summary}");
    assert!(
        summary.contains(&format!("reward cuts        {cuts} episodes")),
        "{summary}"
    );
    let m = metrics(&run.join("metrics.json"));
    assert_eq!(m["reward_cuts_ended"], cuts);
    let alike = m["trust"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "reward_ends_alike")
        .unwrap_or_else(|| panic!("no reward_ends_alike check: {out}"));
    assert_eq!(alike["pass"], true, "{alike}");
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(config.contains("reward_cuts_end = true"), "{config}");
    let v = predicted(&run.join("value.safetensors"), &file);
    let rho = laq::util::stats::spearman(&v, &distance);
    assert!(rho > 0.8, "V against minus the distance to the goal: {rho}");
}

/// A walk along a row of cells to the last, one step in five back, from random cells:
/// each row's cell and next cell, and whether it ends at the last cell (terminal) or by
/// the time limit.
struct Walk {
    path: Vec<(usize, usize)>,
    term: Vec<bool>,
    tout: Vec<bool>,
}

impl Walk {
    /// Episodes of at most `longest` steps along `cells` cells, until there are `rows`
    /// transitions.
    fn new(cells: usize, rows: usize, longest: usize, seed: u64) -> Walk {
        let mut next_rand = common::xorshift(seed);
        let (mut path, mut term, mut tout) = (vec![], vec![], vec![]);
        while path.len() < rows {
            let mut p = (next_rand() % cells as u64) as usize;
            for t in 0..longest {
                let q = match next_rand().is_multiple_of(5) {
                    true => p.saturating_sub(1),
                    false => p + 1,
                };
                path.push((p, q));
                term.push(q == cells);
                tout.push(q < cells && t + 1 == longest);
                if q == cells || t + 1 == longest {
                    break;
                }
                p = q;
            }
        }
        Walk { path, term, tout }
    }

    /// The walk as a dataset, each cell's state given by `of`.
    fn data(&self, of: &dyn Fn(usize) -> Vec<f32>, rewards: Vec<f32>) -> laq::data::Dataset {
        let states = |at: &dyn Fn(&(usize, usize)) -> usize| -> Vec<f32> {
            self.path.iter().flat_map(|x| of(at(x))).collect()
        };
        laq::data::Dataset {
            obs_shape: vec![of(0).len()],
            observations: states(&|&(p, _)| p).into(),
            next_observations: states(&|&(_, q)| q).into(),
            rewards,
            terminals: self.term.clone(),
            timeouts: Some(self.tout.clone()),
            next_missing: None,
            actions: None,
        }
    }

    /// Each row's cell.
    fn cells(&self) -> Vec<f64> {
        self.path.iter().map(|&(p, _)| p as f64).collect()
    }
}

/// States logged as one number that codes them (a discrete space's code, as gymnasium's
/// Taxi logs its states): the table tabular Q-learning learns ships as it is, a network
/// through every entry, and the run is trusted. Beside another value (the code and the
/// cell's parity), the table ships as a network fitted to it, which cannot follow a V
/// that jumps from code to code: `export_fits` fails, listed first, and the run says what
/// to try.
#[test]
fn a_table_of_codes_ships_as_it_is_and_a_fit_that_misses_is_named() {
    let dir = tempfile::tempdir().unwrap();
    // A walk along 200 cells to a reward at the last, one step in five back.
    let cells = 200usize;
    let walk = Walk::new(cells, 40_000, 400, 11);
    let rewards: Vec<f32> = walk.term.iter().map(|&t| f32::from(u8::from(t))).collect();
    // The corridor folded into 10 rows of 20 and coded as Taxi codes its grid, column
    // first: neighbours' codes lie 10 apart (189 where a row ends), and V jumps from code
    // to code. Beside the parity, a code that scatters the cells (211 is prime).
    let code = |p: usize| vec![((p % 20) * 10 + p / 20) as f32];
    let parity = |p: usize| vec![((p * 7919) % 211) as f32, (p % 2) as f32];
    for (name, of) in [
        ("code", &code as &dyn Fn(usize) -> Vec<f32>),
        ("parity", &parity),
    ] {
        let d = walk.data(of, rewards.clone());
        let file = dir.path().join(format!("{name}.npz"));
        d.save(&file).unwrap();
        let run = dir.path().join(name);
        let out = ok(&[
            "train",
            "--data",
            file.to_str().unwrap(),
            "--out",
            run.to_str().unwrap(),
        ]);
        let m = metrics(&run.join("metrics.json"));
        let checks = m["trust"]["checks"].as_array().unwrap();
        let fits = &checks[0];
        assert_eq!(fits["name"], "export_fits", "{m}");
        if name == "code" {
            assert!(fits["value"].as_f64().unwrap() > 0.99, "{fits}");
            assert_eq!(m["trust"]["verdict"], "trusted", "{m}");
            // V rises along the walk, whatever the codes.
            let v = predicted(&run, &file);
            let rho = laq::util::stats::spearman(&v, &walk.cells());
            assert!(rho > 0.95, "V against the cell: {rho}");
        } else {
            assert_eq!(fits["pass"], false, "{fits}");
            assert!(
                out.contains("to try: where a value codes several things"),
                "{out}"
            );
        }
    }
}

/// A log that pays -1 on every step, the one that reaches the goal too, and marks the goal
/// only by ending the episode there (gymnasium's MountainCar and CliffWalking): the run
/// learns the value above paying the cost for ever, so the ends are its rewards, its V
/// is trusted and rises along the walk, and the run and the model say so. Before, no row
/// lay above the cost and the run was doubtful by `rewards`.
#[test]
fn a_cost_until_the_end_is_learned_as_the_value_above_it() {
    let dir = tempfile::tempdir().unwrap();
    // A walk along 60 cells of a 6 x 10 grid to the last, one step in five back.
    let walk = Walk::new(60, 20_000, 300, 5);
    let cell = |p: usize| vec![(p / 10) as f32, (p % 10) as f32];
    let d = walk.data(&cell, vec![-1.0; walk.path.len()]);
    let file = dir.path().join("walk.npz");
    d.save(&file).unwrap();
    let run = dir.path().join("run");
    let out = ok(&[
        "train",
        "--data",
        file.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ]);
    let m = metrics(&run.join("metrics.json"));
    assert_eq!(m["trust"]["verdict"], "trusted", "{out}");
    assert_eq!(m["cost_to_end"]["cost"], -1.0, "{m}");
    let summary = std::fs::read_to_string(run.join("summary.txt")).unwrap();
    assert!(
        summary.contains("a cost of -1 a step until the episode ends"),
        "{summary}"
    );
    let info = ok(&["inspect", run.join("value.safetensors").to_str().unwrap()]);
    assert!(info.contains("cost_per_step"), "{info}");
    // 1 one step from the end, 0 never ending.
    let v = predicted(&run, &file);
    assert!(v.iter().all(|&x| (-0.05..=1.05).contains(&x)), "{v:?}");
    let rho = laq::util::stats::spearman(&v, &walk.cells());
    assert!(rho > 0.95, "V against the cell: {rho}");
    // And the return in the log's units beside it: -1 a step, so between minus one
    // step's cost and minus the cost for ever.
    let (header, rows) = common::predict_csv(&run.join("value.safetensors"), &file);
    assert_eq!(header.last().unwrap(), "value_in_data_units", "{header:?}");
    let gamma = m["cost_to_end"]["gamma"].as_f64().unwrap();
    for (row, &v) in rows.iter().zip(&v) {
        let ret = *row.last().unwrap();
        let expected = -(1.0 - gamma * v) / (1.0 - gamma);
        assert!(
            (ret - expected).abs() < 1e-3 * expected.abs(),
            "{ret} {expected}"
        );
        assert!(ret < 0.0 && ret > -1.0 / (1.0 - gamma) - 1.0, "{ret}");
    }
}

/// A car too weak to climb its hill directly (gymnasium's MountainCar, the push in the
/// direction it moves, one in three random): near states are no ways it can take, so
/// no ways bound DQN's bootstraps, and `auto` learns by IQL; the run and the summary say
/// why, and `config.toml` records the setting so that the run repeats.
#[test]
fn a_car_that_must_swing_learns_by_iql() {
    let mut next = common::xorshift(7);
    let uniform =
        move |lo: f32, hi: f32| lo + (hi - lo) * (next() >> 40) as f32 / (1u64 << 24) as f32;
    let (o, nx, r, t, cut) = common::car::mountain_car_rows(20_000, uniform);
    let d = laq::data::Dataset {
        obs_shape: vec![2],
        observations: o.into(),
        next_observations: nx.into(),
        rewards: r,
        terminals: t,
        timeouts: Some(cut),
        next_missing: None,
        actions: None,
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("car.npz");
    d.save(&file).unwrap();
    let run = dir.path().join("run");
    let args = [
        "train",
        "--data",
        file.to_str().unwrap(),
        "--dqn-steps",
        "2000",
    ];
    ok(&[&args[..], &["--out", run.to_str().unwrap()]].concat());
    let summary = std::fs::read_to_string(run.join("summary.txt")).unwrap();
    assert!(summary.contains("Q-learning         iql"), "{summary}");
    assert!(summary.contains("`iql_without_ways`"), "{summary}");
    assert_eq!(metrics(&run.join("metrics.json"))["iql_without_ways"], true);
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("Q was learned by IQL"), "{report}");
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(config.contains("iql_without_ways = true"), "{config}");
    // `--q dqn` takes DQN whatever the data.
    let dqn = dir.path().join("dqn");
    ok(&[&args[..], &["--q", "dqn", "--out", dqn.to_str().unwrap()]].concat());
    let summary = std::fs::read_to_string(dqn.join("summary.txt")).unwrap();
    assert!(summary.contains("Q-learning         dqn"), "{summary}");
    assert!(metrics(&dqn.join("metrics.json"))
        .get("iql_without_ways")
        .is_none());
}
