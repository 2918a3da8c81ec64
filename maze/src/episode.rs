//! One guided episode: decide among the primitives, execute the choice, until the target
//! is reached, the decision budget is spent or no primitive is available.

use core::f32::consts::PI;

use laq_runtime::{Candidate, Error, Model};

use crate::{distance, execute, Executed, Layout, Pose, Primitive, Settings};

/// The outcome of one guided episode ([`run_episode`]).
///
/// ```
/// use laq_maze::{run_episode, Pose, Settings, U_MAZE};
///
/// // In the target disc from the start: nothing to do.
/// let start = Pose { x: 1.5, y: 1.6, heading: 0.0 };
/// let ep = run_episode(&U_MAZE, &Settings::DEFAULT, start, |_, _| Ok::<_, laq_runtime::Error>(None), |_, _| {})?;
/// assert!(ep.success && ep.decisions == 0 && ep.travelled == 0.0 && !ep.stuck);
/// # Ok::<(), laq_runtime::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Episode {
    /// Whether the robot reached the target disc.
    pub success: bool,
    /// Primitives executed.
    pub decisions: usize,
    /// Distance travelled.
    pub travelled: f32,
    /// Whether the episode ended because no primitive was available.
    pub stuck: bool,
}

/// Guides the robot from `start`: each decision, `choose(pose, primitives)` picks one of
/// the [`Primitive::all`] of `layout` (or `None` when none is available: the episode
/// ends stuck), and it is executed ([`execute`]); `executed(k, &what)` sees each
/// executed primitive. With `settings.goal_check`, the first primitive of a sequence of
/// at most `settings.lookahead` primitives predicted to end in the target disc is
/// executed without asking `choose` ([`reaching_target`]). Runs until the target is reached, `settings.budget` decisions
/// are spent or nothing is chosen. `choose`'s errors end the episode and are returned.
///
/// ```
/// use laq_maze::{run_episode, Pose, Settings, U_MAZE};
///
/// // Always "left" (-y) along the top corridor: reaches the target.
/// let mut path = Vec::new();
/// let start = Pose { x: 1.5, y: 3.4, heading: 0.0 };
/// let ep = run_episode(
///     &U_MAZE,
///     &Settings::DEFAULT,
///     start,
///     |_, _| Ok::<_, laq_runtime::Error>(Some(6)),
///     |k, e| path.push((k, e.pose)),
/// )?;
/// assert!(ep.success && ep.decisions == 3 && path.len() == 3);
/// # Ok::<(), laq_runtime::Error>(())
/// ```
pub fn run_episode<'a, E: From<Error>>(
    layout: &'a Layout<'a>,
    settings: &Settings,
    start: Pose,
    mut choose: impl FnMut(Pose, &[Primitive<'a>]) -> Result<Option<usize>, E>,
    mut executed: impl FnMut(usize, &Executed),
) -> Result<Episode, E> {
    let primitives = Primitive::all(layout, settings);
    let mut pose = start;
    let mut ep = Episode {
        success: layout.in_target([start.x, start.y]),
        decisions: 0,
        travelled: 0.0,
        stuck: false,
    };
    while !ep.success && ep.decisions < settings.budget {
        let reaching = settings
            .goal_check
            .then(|| reaching_target(layout, pose, &primitives, settings.lookahead))
            .flatten();
        let Some(k) = reaching.map_or_else(|| choose(pose, &primitives), |k| Ok(Some(k)))? else {
            ep.stuck = true;
            break;
        };
        let e = execute(layout, settings, pose, k)?;
        executed(k, &e);
        pose = e.pose;
        ep.decisions += 1;
        ep.travelled += e.travelled;
        ep.success = e.reached;
    }
    Ok(ep)
}

/// The first primitive of the shortest sequence of at most `depth` primitives whose
/// predicted points, each from the last, end in the target disc (of several, the one
/// whose first point is closest to the target's centre; ties: the lowest index), if any: the goal check of [`run_episode`], over the horizon the value
/// policy plans ([`Settings::lookahead`]).
///
/// ```
/// use laq_maze::{reaching_target, Pose, Primitive, Settings, U_MAZE};
///
/// let prims = Primitive::all(&U_MAZE, &Settings::DEFAULT);
/// // 0.4 above the disc's rim in the top corridor: "left" (-y) ends inside.
/// let near = Pose { x: 1.5, y: 2.4, heading: 0.0 };
/// assert_eq!(reaching_target(&U_MAZE, near, &prims, 1), Some(6));
/// // 1.4 above it: two primitives are not enough, three are.
/// let far = Pose { x: 1.5, y: 3.4, heading: 0.0 };
/// assert_eq!(reaching_target(&U_MAZE, far, &prims, 2), None);
/// assert_eq!(reaching_target(&U_MAZE, far, &prims, 3), Some(6));
/// ```
pub fn reaching_target(
    layout: &Layout<'_>,
    pose: Pose,
    primitives: &[Primitive<'_>],
    depth: usize,
) -> Option<usize> {
    let target = layout.target_point();
    (1..=depth).find_map(|d| {
        let mut best: Option<(usize, f32)> = None;
        for (i, p) in primitives.iter().enumerate() {
            let Some(q) = p.predicted(pose.x, pose.y) else {
                continue;
            };
            let gap = distance(q, target);
            if best.is_none_or(|(_, g)| gap < g) && reaches(layout, primitives, q, d - 1) {
                best = Some((i, gap));
            }
        }
        best.map(|(i, _)| i)
    })
}

/// Whether `p` is in the target disc or `more` primitives can take it there. The
/// recursion is as deep as `more` (at most `laq_runtime::MAX_LOOKAHEAD` in guidance).
fn reaches(layout: &Layout<'_>, primitives: &[Primitive<'_>], p: [f32; 2], more: usize) -> bool {
    layout.in_target(p)
        || (more > 0
            && primitives.iter().any(|k| {
                k.predicted(p[0], p[1])
                    .is_some_and(|q| reaches(layout, primitives, q, more - 1))
            }))
}

/// The value-guided choice: `model.select_ahead` picks the first primitive of the
/// sequence of `depth` primitives whose predicted points, each from the last at rest
/// (x', y', 0, 0), end where V is highest; `None` if no primitive is available.
/// `depth` 1 is `model.select` over the next points. `scratch` needs
/// `model.lookahead_scratch_len(depth)` elements, `report` one per primitive (it
/// receives each first primitive's score and status).
///
/// ```
/// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../models/maze2d/value.safetensors"));
/// use laq_maze::{choose_by_value, Pose, Primitive, Settings, U_MAZE};
/// use laq_runtime::{Candidate, Model, Status};
///
/// let model = Model::new_checked(bytes)?;
/// let prims = Primitive::all(&U_MAZE, &Settings::DEFAULT);
/// let mut scratch = vec![0.0; model.lookahead_scratch_len(2)];
/// let mut report = [Candidate::default(); 8];
/// // At the far arm's end: "up" (-x) would hit the middle wall.
/// let pose = Pose { x: 3.5, y: 1.5, heading: 0.0 };
/// let k = choose_by_value(&model, pose, &prims, 2, &mut scratch, &mut report)?.unwrap();
/// assert_eq!(report[4].status, Status::Failed);
/// assert!(report[k].status.is_valid());
/// # Ok::<(), laq_runtime::Error>(())
/// ```
pub fn choose_by_value(
    model: &Model<'_>,
    pose: Pose,
    primitives: &[Primitive<'_>],
    depth: usize,
    scratch: &mut [f32],
    report: &mut [Candidate],
) -> Result<Option<usize>, Error> {
    match model.select_ahead(&pose.as_point_mass(), primitives, depth, scratch, report) {
        Ok(k) => Ok(Some(k)),
        Err(Error::NoValidCandidate) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `N` deterministic starts in `layout`, the same on every target (no RNG crate, no
/// float rounding in the draws): a pseudo-random point in the middle half of a
/// pseudo-random interior cell that is open, outside the target disc, with a
/// pseudo-random heading in [-pi, pi). A 64-bit LCG seeded with `seed` gives 24-bit
/// outputs, exact in f32. `None` if fewer than `N` starts turn up in `100 * N` draws.
///
/// ```
/// use laq_maze::{fixed_starts, U_MAZE};
///
/// let starts = fixed_starts::<10>(&U_MAZE, 1).unwrap();
/// assert!(starts.iter().all(|p| !U_MAZE.blocked(p.x, p.y) && !U_MAZE.in_target([p.x, p.y])));
/// assert_eq!(fixed_starts::<10>(&U_MAZE, 1), Some(starts));
/// ```
pub fn fixed_starts<const N: usize>(layout: &Layout<'_>, seed: u64) -> Option<[Pose; N]> {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 40) as f32 / (1u32 << 24) as f32
    };
    let mut out = [Pose {
        x: 0.0,
        y: 0.0,
        heading: 0.0,
    }; N];
    // The interior: the outer rows and columns of D4RL's layouts are walls.
    let (rows, cols) = (
        layout.rows().saturating_sub(2) as f32,
        layout.cols().saturating_sub(2) as f32,
    );
    let mut slots = out.iter_mut();
    let mut slot = slots.next();
    for _ in 0..100 * N {
        let Some(s) = slot else { break };
        let (r, c) = (1 + (next() * rows) as usize, 1 + (next() * cols) as usize);
        let (x, y) = (
            r as f32 + 0.25 + 0.5 * next(),
            c as f32 + 0.25 + 0.5 * next(),
        );
        let heading = -PI + 2.0 * PI * next();
        if layout.is_wall(r, c) || layout.in_target([x, y]) {
            slot = Some(s);
            continue;
        }
        *s = Pose { x, y, heading };
        slot = slots.next();
    }
    slot.is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Geodesic, LARGE_MAZE, MEDIUM_MAZE, U_MAZE};

    #[test]
    fn no_choice_ends_the_episode_stuck() {
        // A cell of its own: the straight primitives do not fit (the diagonals do).
        let far = Layout::parse(b"#####\n#GO##\n###O#\n#####").unwrap();
        let start = Pose {
            x: 2.5,
            y: 3.5,
            heading: 0.0,
        };
        let (mut calls, mut runs) = (0, 0);
        let ep = run_episode(
            &far,
            &Settings::DEFAULT,
            start,
            |pose, prims| {
                calls += 1;
                assert_eq!(pose, start);
                let fits = prims.iter().map(|p| p.predicted(pose.x, pose.y).is_some());
                assert!(fits.eq([false, true, false, true, false, true, false, true]));
                Ok::<_, Error>(None)
            },
            |_, _| runs += 1,
        )
        .unwrap();
        assert!(ep.stuck && !ep.success && ep.decisions == 0 && calls == 1 && runs == 0);
    }

    #[test]
    fn errors_end_the_episode() {
        let start = Pose {
            x: 3.5,
            y: 1.5,
            heading: 0.0,
        };
        let bad = run_episode(
            &U_MAZE,
            &Settings::DEFAULT,
            start,
            |_, _| Ok::<_, Error>(Some(9)),
            |_, _| {},
        );
        assert_eq!(bad, Err(Error::InvalidArgument));
        let budget = Settings {
            budget: 2,
            ..Settings::DEFAULT
        };
        let ep = run_episode(
            &U_MAZE,
            &budget,
            start,
            |_, _| Ok::<_, Error>(Some(2)),
            |_, _| {},
        )
        .unwrap();
        assert_eq!((ep.decisions, ep.success, ep.stuck), (2, false, false));
    }

    #[test]
    fn the_firmware_starts() {
        let starts = fixed_starts::<10>(&U_MAZE, 0x6d61_7a65).unwrap();
        let g = Geodesic::<32>::new(&U_MAZE).unwrap();
        assert!(starts.iter().all(|p| g.to_target(p.x, p.y).is_some()));
        assert!(fixed_starts::<20>(&MEDIUM_MAZE, 7).is_some());
        // The large maze: every open cell's centre reaches the target within the 256
        // nodes the trainer's guidance gives the graph.
        let g = Geodesic::<256>::new(&LARGE_MAZE).unwrap();
        let mut farthest = 0.0f32;
        for r in 0..LARGE_MAZE.rows() {
            for c in 0..LARGE_MAZE.cols() {
                if !LARGE_MAZE.is_wall(r, c) {
                    let d = g.to_target(r as f32 + 0.5, c as f32 + 0.5).unwrap();
                    farthest = farthest.max(d);
                }
            }
        }
        assert!((12.0..14.0).contains(&farthest), "{farthest}");
        let closed = Layout::parse(b"###\n#G#\n###").unwrap();
        assert_eq!(fixed_starts::<1>(&closed, 0), None);
    }
}
