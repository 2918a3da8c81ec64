use super::*;
use std::collections::HashSet;

/// A ring round one block: S top left, N top right, F bottom middle.
const SMALL: &str = "\
#######
#S...N#
#.###.#
#..F..#
#######";

fn random_free(nav: &Nav, rng: &mut impl Rng) -> Pose {
    let lay = nav.layout();
    let open: Vec<usize> = (0..lay.open.len()).filter(|&i| lay.open[i]).collect();
    loop {
        let i = open[rng.random_range(0..open.len())];
        let (r, c) = (i / lay.cols, i % lay.cols);
        let p = Pose {
            gx: (c * L) as i32 + rng.random_range(0..LATTICE),
            gy: (r * L) as i32 + rng.random_range(0..LATTICE),
            heading: rng.random_range(0..HEADINGS) as u8,
        };
        if nav.is_free(p) && nav.goal_at(p).is_none() {
            return p;
        }
    }
}

fn forward_bfs(nav: &Nav, start: Pose, goal: Goal) -> Option<usize> {
    let mut seen = HashSet::from([start]);
    let mut frontier = vec![start];
    let mut d = 0;
    while !frontier.is_empty() {
        d += 1;
        let mut next = vec![];
        for p in frontier {
            for a in 0..NUM_ACTIONS {
                let t = nav.step(p, a).unwrap();
                if t.done {
                    if t.goal == Some(goal) {
                        return Some(d);
                    }
                } else if seen.insert(t.pose) {
                    next.push(t.pose);
                }
            }
        }
        frontier = next;
    }
    None
}

fn count(img: &[u8], n: usize, pred: impl Fn(f32, f32, f32) -> bool) -> usize {
    (0..n)
        .filter(|&i| pred(img[i] as f32, img[n + i] as f32, img[2 * n + i] as f32))
        .count()
}

fn red(r: f32, g: f32, b: f32) -> bool {
    r > 60.0 && r > 2.0 * g && r > 2.0 * b
}

#[test]
fn nav_layout_parses_and_moves_follow_the_headings() {
    let nav = Nav::branching().unwrap();
    let m = &nav.map;
    assert_eq!((m.rows, m.cols), (10, 17));
    assert_eq!((m.near, m.far, m.waypoint), ((3, 1), (8, 15), Some((1, 8))));
    assert_eq!(m.start.len(), 9);
    let lay = nav.layout();
    assert_eq!(
        lay.open.iter().filter(|&&o| o).count(),
        nav.graph.cells.len()
    );
    assert_eq!(lay.goals[0], (Goal::Near, (1.5, 3.5)));
    assert!(Map::parse("#####\n#S.N#\n#####").is_err());
    assert!(Map::parse("#####\n#SxNF#\n#####").is_err());
    assert!(Map::parse(SMALL).is_ok());
    for h in 0..HEADINGS {
        let (dx, dy) = DIRS[h];
        assert_eq!(
            MOVES[h],
            ((8.0 * dx).round() as i32, (8.0 * dy).round() as i32)
        );
        let len = ((MOVES[h].0.pow(2) + MOVES[h].1.pow(2)) as f32).sqrt() / 32.0;
        assert!((len - STEP).abs() < 0.01, "{h}: {len}");
    }
}

#[test]
fn nav_turns_cycle_and_walls_block() {
    let nav = Nav::branching().unwrap();
    let p = Pose::from_xy(2.5, 5.5, 0);
    for a in [LEFT, RIGHT] {
        let mut q = p;
        let mut seen = HashSet::new();
        for _ in 0..HEADINGS {
            q = nav.step(q, a).unwrap().pose;
            seen.insert(q.heading);
        }
        assert_eq!((q, seen.len()), (p, HEADINGS));
    }
    let q = nav
        .step(nav.step(p, LEFT).unwrap().pose, RIGHT)
        .unwrap()
        .pose;
    assert_eq!(q, p);
    assert!(nav.step(p, 3).is_none());
    // Facing north into the wall above row 5: the first move fits (0.5 m to the wall,
    // radius 0.2), then the wall stops the agent.
    let mut q = Pose::from_xy(2.5, 5.5, 9);
    let mut moved = vec![];
    for _ in 0..6 {
        let t = nav.step(q, FORWARD).unwrap();
        moved.push(t.moved);
        q = t.pose;
        assert!(q.y() - RADIUS >= 5.0 && nav.is_free(q), "{q:?}");
    }
    assert_eq!(moved[0], 0.25);
    assert!(moved[1..].iter().all(|&m| m == 0.0), "{moved:?}");
    // Moving east along the corridor is not blocked.
    let t = nav.step(Pose::from_xy(2.5, 5.5, 0), FORWARD).unwrap();
    assert_eq!((t.moved, t.pose.x()), (0.25, 2.75));
}

#[test]
fn nav_rendering_is_deterministic_and_depends_on_the_pose() {
    let nav = Nav::branching().unwrap();
    let r = Renderer::new(32, 32).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let poses: Vec<Pose> = (0..40).map(|_| random_free(&nav, &mut rng)).collect();
    let imgs: Vec<Vec<u8>> = poses.iter().map(|&p| r.render(&nav.map, p)).collect();
    for (p, img) in poses.iter().zip(&imgs) {
        assert_eq!(img.len(), 3 * 32 * 32);
        assert_eq!(&r.render(&nav.map, *p), img);
    }
    for i in 0..imgs.len() {
        for j in 0..i {
            if poses[i] != poses[j] {
                let diff: f64 = imgs[i]
                    .iter()
                    .zip(&imgs[j])
                    .map(|(&a, &b)| (a as f64 - b as f64).abs())
                    .sum::<f64>()
                    / imgs[i].len() as f64;
                assert!(diff > 1.0, "{:?} vs {:?}: {diff}", poses[i], poses[j]);
            }
        }
    }
    // One step changes the view; so does one turn.
    let p = Pose::from_xy(5.5, 6.5, 0);
    let a = r.render(&nav.map, p);
    for act in [FORWARD, LEFT] {
        let q = nav.step(p, act).unwrap().pose;
        assert_ne!(r.render(&nav.map, q), a);
    }
    assert!(Renderer::new(0, 8).is_err());
    assert!(Renderer::with_fov(8, 8, 180.0).is_err());
    let wide = Renderer::with_fov(32, 32, 120.0).unwrap();
    assert_ne!(wide.render(&nav.map, p), r.render(&nav.map, p));
}

#[test]
fn nav_goals_are_visible() {
    let nav = Nav::branching().unwrap();
    let r = Renderer::new(32, 32).unwrap();
    let n = 32 * 32;
    // Looking down column 1 at G_near, 2 m away, then away from it.
    let toward = r.render(&nav.map, Pose::from_xy(1.5, 1.5, 3));
    let away = r.render(&nav.map, Pose::from_xy(1.5, 1.5, 9));
    assert!(count(&toward, n, red) > 10, "{}", count(&toward, n, red));
    assert_eq!(count(&away, n, red), 0);
    let blue = |r: f32, g: f32, b: f32| b > 60.0 && b > 2.0 * r && b > 1.5 * g;
    let far = r.render(&nav.map, Pose::from_xy(15.5, 5.5, 3));
    assert!(count(&far, n, blue) > 10);
    assert_eq!(count(&far, n, red), 0);
    assert_eq!(count(&toward, n, blue), 0);
}

#[test]
fn nav_planner_is_optimal_on_a_small_map() {
    let nav = Nav::new(Map::parse(SMALL).unwrap());
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..6 {
        let p = random_free(&nav, &mut rng);
        for g in [Goal::Near, Goal::Far] {
            let plan = nav.plan(p, Some(g)).unwrap();
            let bfs = forward_bfs(&nav, p, g).unwrap();
            assert_eq!(plan.len(), bfs, "{p:?} to {g:?}");
            assert_eq!(nav.steps_to(p, g), Some(bfs as u32));
            let mut q = p;
            for (k, &a) in plan.iter().enumerate() {
                let t = nav.step(q, a).unwrap();
                assert_eq!(t.done, k + 1 == plan.len());
                q = t.pose;
            }
            assert_eq!(nav.goal_at(q), Some(g));
        }
        let nearest = nav.plan(p, None).unwrap();
        let best = nav
            .steps_to(p, Goal::Near)
            .min(nav.steps_to(p, Goal::Far))
            .unwrap();
        assert_eq!(nearest.len() as u32, best);
    }
    // A straight corridor: 2 m to the goal's centre, facing it.
    let big = Nav::branching().unwrap();
    let p = Pose::from_xy(1.5, 1.5, 3);
    let want = ((2.0 - GOAL_RADIUS) / STEP).ceil() as usize;
    assert_eq!(big.plan(p, Some(Goal::Near)).unwrap(), vec![FORWARD; want]);
    assert!(nav.plan(Pose::from_xy(0.5, 0.5, 0), None).is_none());
}

#[test]
fn nav_detour_plan_goes_round_the_ring() {
    let nav = Nav::branching().unwrap();
    let p = Pose::from_xy(5.5, 6.5, 0);
    let w = nav.map.waypoint.unwrap();
    let direct = nav.plan(p, Some(Goal::Near)).unwrap();
    let detour = nav.plan_via(p, w, Goal::Near).unwrap();
    assert!(
        detour.len() > 2 * direct.len(),
        "{} {}",
        detour.len(),
        direct.len()
    );
    let mut q = p;
    let mut passed = false;
    let mut east = false;
    for &a in &detour {
        q = nav.step(q, a).unwrap().pose;
        passed |= within(q.gx, q.gy, Map::centre_units(w), GOAL_RADIUS);
        east |= q.x() > 9.0;
    }
    assert!(passed && east && nav.goal_at(q) == Some(Goal::Near));
    // The same waypoint given by a cell the cache does not hold: same plan length.
    let other = Nav::new(Map::parse(&BRANCHING.replace('W', ".")).unwrap());
    assert_eq!(
        other.plan_via(p, w, Goal::Near).unwrap().len(),
        detour.len()
    );
}

#[test]
fn nav_optimal_value_prefers_the_near_goal() {
    let nav = Nav::branching().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for _ in 0..50 {
        let p = nav.random_start(&mut rng);
        let (dn, df) = (
            nav.steps_to(p, Goal::Near).unwrap(),
            nav.steps_to(p, Goal::Far).unwrap(),
        );
        assert!(dn < df, "{p:?}: {dn} {df}");
        assert_eq!(nav.optimal_value(p), GAMMA.powi(dn as i32 - 1));
    }
    // Along the shortest path to G_near the value rises at every step.
    let mut p = nav.random_start(&mut rng);
    let mut v = nav.optimal_value(p);
    for a in nav.plan(p, Some(Goal::Near)).unwrap() {
        let t = nav.step(p, a).unwrap();
        if t.done {
            break;
        }
        p = t.pose;
        let nv = nav.optimal_value(p);
        assert!(nv > v, "{p:?}");
        v = nv;
    }
    // Bellman optimality everywhere.
    for _ in 0..300 {
        let p = random_free(&nav, &mut rng);
        let best = (0..NUM_ACTIONS)
            .map(|a| {
                let t = nav.step(p, a).unwrap();
                let next = if t.done {
                    0.0
                } else {
                    nav.optimal_value(t.pose)
                };
                t.reward as f64 + GAMMA * next
            })
            .fold(f64::MIN, f64::max);
        assert!((best - nav.optimal_value(p)).abs() < 1e-12, "{p:?}");
    }
    // Near the far goal, the far goal is the nearer one.
    let p = Pose::from_xy(15.5, 6.5, 3);
    assert_eq!(nav.nearest_goal(p), Some(Goal::Far));
    assert_eq!(nav.optimal_value(Pose::from_xy(1.5, 3.5, 0)), 0.0);
}

#[test]
fn nav_data_follow_the_mix_and_end_at_goals() {
    let nav = Nav::branching().unwrap();
    let cfg = GenConfig {
        episodes: 200,
        size: 16,
        ..GenConfig::default()
    };
    let d = nav.generate(&cfg, 11).unwrap();
    assert_eq!(d.episodes.len(), 200);
    let kinds = |k: Kind| d.episodes.iter().filter(|e| e.kind == k).count();
    assert_eq!(
        (kinds(Kind::Far), kinds(Kind::Detour), kinds(Kind::Direct)),
        (100, 99, 1)
    );
    let ended = |k: Kind, g: Goal| {
        d.episodes
            .iter()
            .filter(|e| e.kind == k && e.goal == Some(g))
            .count()
    };
    assert!(
        ended(Kind::Far, Goal::Far) >= 95,
        "{}",
        ended(Kind::Far, Goal::Far)
    );
    assert!(ended(Kind::Detour, Goal::Near) >= 94);
    assert_eq!(ended(Kind::Direct, Goal::Near), 1);
    let frame = 3 * 16 * 16;
    assert_eq!(d.obs_shape, vec![3, 16, 16]);
    assert_eq!(d.observations.len(), d.len() * frame);
    let r = Renderer::new(16, 16).unwrap();
    let w = Map::centre_units(nav.map.waypoint.unwrap());
    let mut start = 0;
    for e in &d.episodes {
        assert_eq!(e.start, start);
        start += e.len;
        let last = e.start + e.len - 1;
        for i in e.start..=last {
            let t = nav.step(d.poses[i], d.actions[i] as usize).unwrap();
            assert_eq!(t.pose, d.next_poses[i]);
            assert_eq!((t.reward, t.done), (d.rewards[i], d.terminals[i]));
            assert_eq!(d.terminals[i], i == last && e.goal.is_some());
            assert_eq!(d.timeouts[i], i == last && e.goal.is_none());
            if i > e.start {
                assert_eq!(d.poses[i], d.next_poses[i - 1]);
            }
        }
        assert!(e.len <= MAX_STEPS);
        assert_eq!(e.goal.is_none(), e.len == MAX_STEPS);
        assert_eq!(nav.goal_at(d.next_poses[last]), e.goal);
        assert!(nav
            .map
            .start
            .contains(&nav.map.cell_of(d.poses[e.start]).unwrap()));
        if e.kind == Kind::Detour && e.goal == Some(Goal::Near) {
            let passed =
                (e.start..=last).any(|i| within(d.poses[i].gx, d.poses[i].gy, w, GOAL_RADIUS));
            assert!(passed);
        }
        // Frames are the views of the poses.
        for i in [e.start, last] {
            assert_eq!(
                &d.observations[i * frame..(i + 1) * frame],
                &r.render(&nav.map, d.poses[i])[..]
            );
            assert_eq!(
                &d.next_observations[i * frame..(i + 1) * frame],
                &r.render(&nav.map, d.next_poses[i])[..]
            );
        }
    }
    assert_eq!(start, d.len());
    // Mostly east: the data rarely show the short way west.
    let west = d.poses.iter().filter(|p| p.x() < 4.0).count();
    let east = d.poses.iter().filter(|p| p.x() > 7.0).count();
    assert!(east > 5 * west, "{east} {west}");
}

#[test]
fn nav_data_roundtrip_stack_and_determinism() {
    let nav = Nav::branching().unwrap();
    let cfg = GenConfig {
        episodes: 4,
        size: 8,
        frames: 2,
        ..GenConfig::default()
    };
    let d = nav.generate(&cfg, 2).unwrap();
    assert_eq!(d, nav.generate(&cfg, 2).unwrap());
    assert_ne!(d, nav.generate(&cfg, 3).unwrap());
    assert_eq!(d.obs_shape, vec![6, 8, 8]);
    let frame = 3 * 8 * 8;
    for e in &d.episodes {
        let s = e.start * 2 * frame;
        // The first observation repeats the first frame.
        assert_eq!(
            d.observations[s..s + frame],
            d.observations[s + frame..s + 2 * frame]
        );
        for i in e.start..e.start + e.len {
            let (o, n) = (i * 2 * frame, i * 2 * frame);
            assert_eq!(
                d.next_observations[n..n + frame],
                d.observations[o + frame..o + 2 * frame]
            );
        }
    }
    let ds = d.to_dataset();
    assert_eq!(ds.obs_dim(), 2 * frame);
    assert_eq!(ds.observations[5], d.observations[5] as f32);
    let dir = tempfile::tempdir().unwrap();
    for name in ["n.npz", "n.safetensors"] {
        let p = dir.path().join(name);
        d.save(&p).unwrap();
        let arrays = read_arrays(&p).unwrap();
        assert_eq!(arrays["observations"].dtype, crate::data::DType::U8);
        assert_eq!(Dataset::load(&p).unwrap(), ds);
        let poses = load_poses(&p).unwrap();
        assert_eq!(poses.len(), d.len());
        assert!(poses
            .iter()
            .zip(d.poses.iter().zip(&d.next_poses))
            .all(|(a, (p, q))| a == &(*p, *q)));
    }
    let bad = RawArray::from_f32(vec![1, 6], &[1.0, 1.0, 12.0, 1.0, 1.0, 0.0]);
    assert!(poses_from_infos(&bad).is_err());
    let small = generate(2, 1, 8).unwrap();
    assert_eq!(small.obs_shape, vec![3, 8, 8]);
    assert!(generate(2, 1, 4).is_err());
    for bad in [
        GenConfig {
            episodes: 0,
            ..cfg.clone()
        },
        GenConfig {
            frames: 0,
            ..cfg.clone()
        },
        GenConfig {
            epsilon: 1.5,
            ..cfg.clone()
        },
        GenConfig {
            mix: [0.0, 0.0, 0.0],
            ..cfg.clone()
        },
        GenConfig {
            mix: [0.5, f64::NAN, 0.5],
            ..cfg.clone()
        },
    ] {
        assert!(nav.generate(&bad, 0).is_err(), "{bad:?}");
    }
    let no_w = Nav::new(Map::parse(&BRANCHING.replace('W', ".")).unwrap());
    assert!(no_w.generate(&cfg, 0).is_err());
    let far_only = GenConfig {
        mix: [1.0, 0.0, 0.0],
        ..cfg
    };
    assert!(no_w.generate(&far_only, 0).is_ok());
    assert_eq!(allocate(1000, MIX), [500, 495, 5]);
    assert_eq!(allocate(7, [1.0, 1.0, 1.0]), [3, 2, 2]);
}

#[test]
fn nav_controllers_end_at_junctions() {
    let nav = Nav::branching().unwrap();
    let r = Renderer::new(16, 16).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut seen_goal = false;
    for _ in 0..60 {
        let p = random_free(&nav, &mut rng);
        let cell = nav.map.cell_of(p).unwrap();
        let ms = nav.controllers(p, &r);
        let exits = (0..4)
            .filter(|&d| nav.map.neighbour(cell, d).is_some())
            .count();
        assert_eq!(ms.len(), exits, "{p:?}");
        for m in &ms {
            match m.goal {
                Some(g) => {
                    seen_goal = true;
                    assert_eq!(nav.goal_at(m.end), Some(g));
                    assert_eq!(*m.cells.last().unwrap(), nav.map.goal_cell(g));
                }
                None => {
                    assert_eq!(nav.map.cell_of(m.end), m.cells.last().copied());
                    let j = *m.cells.last().unwrap();
                    assert!(nav.map.is_junction(j), "{j:?}");
                    assert!(within(
                        m.end.gx,
                        m.end.gy,
                        Map::centre_units(j),
                        ARRIVE_RADIUS
                    ));
                    let dir = m.cells[m.cells.len() - 1];
                    let prev = m.cells[m.cells.len() - 2];
                    let arrive = (0..4).find(|&d| nav.map.neighbour(prev, d) == Some(dir));
                    assert_eq!(Some(m.end.h()), arrive.map(|d| d * 3));
                }
            }
            // Intermediate cells are corridor cells.
            for c in &m.cells[1..m.cells.len() - 1] {
                assert!(!nav.map.is_junction(*c));
            }
            let mut q = p;
            let mut length = 0.0;
            for &a in &m.actions {
                let t = nav.step(q, a).unwrap();
                length += t.moved;
                q = t.pose;
            }
            assert_eq!((q, length), (m.end, m.length));
            assert_eq!(m.view, r.render(&nav.map, m.end));
        }
    }
    assert!(seen_goal);
    // In a corridor cell two ways lead on; at the T junction (5, 9) three.
    let corridor = Pose::from_xy(9.5, 3.5, 0);
    assert_eq!(nav.controllers(corridor, &r).len(), 2);
    let ends: HashSet<_> = nav
        .controllers(corridor, &r)
        .iter()
        .map(|m| *m.cells.last().unwrap())
        .collect();
    // North, the ring bends twice and ends in G_near's cell.
    assert_eq!(ends, HashSet::from([(5, 9), (3, 1)]));
    assert_eq!(nav.controllers(Pose::from_xy(9.5, 5.5, 0), &r).len(), 3);
    assert!(nav.controllers(Pose::from_xy(1.5, 3.5, 0), &r).is_empty());
}

#[test]
fn nav_spl_and_geodesic() {
    assert_eq!(spl(&[true, false], &[2.0, 2.0], &[4.0, 2.0]).unwrap(), 0.25);
    assert_eq!(spl(&[true], &[2.0], &[1.0]).unwrap(), 1.0);
    assert_eq!(spl(&[true], &[0.0], &[0.0]).unwrap(), 1.0);
    assert!(spl(&[], &[], &[]).is_err());
    assert!(spl(&[true], &[1.0, 2.0], &[1.0]).is_err());
    assert!(spl(&[true], &[f64::NAN], &[1.0]).is_err());
    let nav = Nav::branching().unwrap();
    // Straight down column 1: 2 m to the centre, 1.5 m to the goal's radius.
    let g = nav.geodesic_to_near(Pose::from_xy(1.5, 1.5, 0)).unwrap();
    assert!((g - 1.5).abs() < 1e-5, "{g}");
    assert_eq!(nav.geodesic_to_near(Pose::from_xy(1.5, 3.5, 0)), Some(0.0));
    assert!(nav.geodesic_to_near(Pose::from_xy(0.5, 0.5, 0)).is_none());
    // The geodesic is no longer than any executed path, and close to the planned one.
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    for _ in 0..20 {
        let p = nav.random_start(&mut rng);
        let geo = nav.geodesic_to_near(p).unwrap();
        let mut q = p;
        let mut walked = 0.0;
        for a in nav.plan(p, Some(Goal::Near)).unwrap() {
            let t = nav.step(q, a).unwrap();
            walked += t.moved;
            q = t.pose;
        }
        assert!(
            geo <= walked + 1e-6 && walked < geo * 1.3 + 0.3,
            "{geo} {walked}"
        );
        let far = nav.geodesic(p, Goal::Far).unwrap();
        assert!(far > geo + 4.0);
    }
}
