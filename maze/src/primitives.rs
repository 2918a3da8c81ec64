//! The 8 motion primitives ("turn in place to heading k * 45 degrees, then drive
//! straight") as [`Controller`]s, and their closed-loop execution on the robot.

use core::f32::consts::{FRAC_1_SQRT_2, FRAC_PI_2, FRAC_PI_4, PI};

use laq_runtime::{Controller, Error, Outcome};

use crate::{distance, step, wrap, Layout, Pose, DT, FRAME_SKIP, MAX_SPEED, MAX_TURN, RADIUS};

/// Number of motion primitives: one per multiple of 45 degrees.
///
/// ```
/// use laq_maze::{Primitive, Settings, NUM_PRIMITIVES, U_MAZE};
///
/// assert_eq!(Primitive::all(&U_MAZE, &Settings::DEFAULT).len(), NUM_PRIMITIVES);
/// ```
pub const NUM_PRIMITIVES: usize = 8;

/// Target heading of primitive k: k * 45 degrees wrapped to (-pi, pi] (written out, so
/// that every target has the same f32 values).
///
/// ```
/// use laq_maze::{wrap, HEADINGS};
///
/// for (k, h) in HEADINGS.iter().enumerate() {
///     assert!((wrap(k as f32 * core::f32::consts::FRAC_PI_4) - h).abs() < 1e-6);
/// }
/// ```
pub const HEADINGS: [f32; NUM_PRIMITIVES] = [
    0.0,
    FRAC_PI_4,
    FRAC_PI_2,
    3.0 * FRAC_PI_4,
    PI,
    -3.0 * FRAC_PI_4,
    -FRAC_PI_2,
    -FRAC_PI_4,
];

/// Unit vector of each heading, exact for the axes: the direction a primitive predicts.
///
/// ```
/// use laq_maze::DIRECTIONS;
///
/// assert_eq!(DIRECTIONS[2], [0.0, 1.0]);
/// assert!(DIRECTIONS.iter().all(|d| (d[0] * d[0] + d[1] * d[1] - 1.0).abs() < 1e-6));
/// ```
pub const DIRECTIONS: [[f32; 2]; NUM_PRIMITIVES] = [
    [1.0, 0.0],
    [FRAC_1_SQRT_2, FRAC_1_SQRT_2],
    [0.0, 1.0],
    [-FRAC_1_SQRT_2, FRAC_1_SQRT_2],
    [-1.0, 0.0],
    [-FRAC_1_SQRT_2, -FRAC_1_SQRT_2],
    [0.0, -1.0],
    [FRAC_1_SQRT_2, -FRAC_1_SQRT_2],
];

/// Distance driven in one action at full speed.
///
/// ```
/// assert!((laq_maze::STEP_LENGTH - 0.06).abs() < 1e-7);
/// ```
pub const STEP_LENGTH: f32 = MAX_SPEED * DT * FRAME_SKIP as f32;

/// Heading change in one action at full turn rate.
///
/// ```
/// use laq_maze::TURN_PER_ACTION;
///
/// // A half turn takes 34 actions.
/// assert_eq!((core::f32::consts::PI / TURN_PER_ACTION).ceil(), 34.0);
/// ```
pub const TURN_PER_ACTION: f32 = MAX_TURN * DT * FRAME_SKIP as f32;

/// Most turning actions of one primitive (a half turn takes 34 at full rate).
///
/// ```
/// assert!(laq_maze::MAX_TURN_ACTIONS as f32 * laq_maze::TURN_PER_ACTION > core::f32::consts::PI);
/// ```
pub const MAX_TURN_ACTIONS: usize = 64;

/// Primitives planned ahead per decision by default ([`Settings::lookahead`]).
///
/// ```
/// assert_eq!(laq_maze::LOOKAHEAD, laq_maze::Settings::DEFAULT.lookahead);
/// ```
pub const LOOKAHEAD: usize = 3;

/// Settings of the primitives and of a guided episode.
///
/// ```
/// use laq_maze::Settings;
///
/// let short = Settings { drive_length: 0.25, ..Settings::DEFAULT };
/// assert_eq!(short.budget, 60);
/// assert_eq!(Settings::default(), Settings::DEFAULT);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// Length of each primitive's straight segment, in maze units (cells are 1 wide).
    ///
    /// 0.5 by default: the body's free corridor is `1 - 2 * RADIUS = 0.8` wide, so from
    /// the middle of a corridor a 0.5 segment fits along it and a diagonal one (0.35 per
    /// axis) across it. Shorter primitives need more decisions (each a `select` over 8
    /// candidates); longer ones cannot always turn into the U's bend.
    pub drive_length: f32,
    /// Decisions (primitives) per episode before it counts as a failure.
    pub budget: usize,
    /// Heading error (radians) at which a primitive stops turning and starts driving.
    pub heading_tolerance: f32,
    /// Clearance a primitive's straight segment keeps from the walls (beyond the body's
    /// [`RADIUS`]) to count as available, so that rounding in the executed path never
    /// grazes a wall the predictor missed.
    pub wall_margin: f32,
    /// Whether a primitive that starts a sequence of at most [`Settings::lookahead`]
    /// primitives predicted to end in the target disc is taken without asking the
    /// policy: the task ends there ([`crate::reaching_target`]).
    ///
    /// On by default. The data's reward marks a disc, not a point, and data that pass
    /// through the disc without stopping give it a flat value (no latent action stays
    /// inside), so V at rest can peak just outside the rim: a choice by V alone then
    /// hovers there, one primitive in and one out, until the budget is spent.
    pub goal_check: bool,
    /// Primitives planned ahead at each decision ([`crate::choose_by_value`] through
    /// `Model::select_ahead`): 1 is greedy selection by V of the next point.
    pub lookahead: usize,
}

impl Settings {
    /// The settings of the guidance study and of the firmware: primitives of 0.5 units,
    /// 60 decisions, 1e-3 radians, 0.01 units, the goal check on.
    ///
    /// ```
    /// let s = laq_maze::Settings::DEFAULT;
    /// assert_eq!((s.drive_length, s.budget, s.heading_tolerance, s.wall_margin), (0.5, 60, 1e-3, 0.01));
    /// assert!(s.goal_check);
    /// ```
    pub const DEFAULT: Settings = Settings {
        drive_length: 0.5,
        budget: 60,
        heading_tolerance: 1e-3,
        wall_margin: 0.01,
        goal_check: true,
        lookahead: LOOKAHEAD,
    };
}

impl Default for Settings {
    fn default() -> Self {
        Settings::DEFAULT
    }
}

/// A motion primitive as the runtime sees it: "turn to heading [`HEADINGS`]`[index]`,
/// then drive straight for `drive_length`". Turning happens in place, so it predicts
/// the point `drive_length` along the heading from the current (x, y), at rest: (x',
/// y', 0, 0).
///
/// A primitive whose straight segment would run into a wall reports itself unavailable:
/// `predict` fails with [`Error::Controller`] and `Model::select` marks it
/// `Status::Failed`. The robot would slide along the wall to a point the predictor does
/// not know, and V at the nominal point (inside or behind a wall, where there are no
/// data) means nothing.
///
/// ```
/// use laq_maze::{Primitive, Settings, U_MAZE};
/// use laq_runtime::{Controller, Error};
///
/// let prims = Primitive::all(&U_MAZE, &Settings::DEFAULT);
/// let mut next = [0.0; 4];
/// // Along the top corridor (+y), at rest.
/// prims[2].predict(&[1.5, 2.0, 0.3, 0.1], &mut next)?;
/// assert_eq!(next, [1.5, 2.5, 0.0, 0.0]);
/// // Up (-x) runs into the wall above row 1.
/// assert_eq!(prims[4].predict(&[1.5, 2.0, 0.0, 0.0], &mut next), Err(Error::Controller));
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Primitive<'a> {
    layout: &'a Layout<'a>,
    /// k: the heading is `HEADINGS[k]`.
    pub index: usize,
    length: f32,
    margin: f32,
}

impl<'a> Primitive<'a> {
    /// The [`NUM_PRIMITIVES`] primitives in `layout` with the settings' length and wall
    /// margin, in heading order.
    ///
    /// ```
    /// use laq_maze::{Primitive, Settings, MEDIUM_MAZE};
    ///
    /// let prims = Primitive::all(&MEDIUM_MAZE, &Settings::DEFAULT);
    /// assert!(prims.iter().enumerate().all(|(k, p)| p.index == k));
    /// ```
    pub const fn all(
        layout: &'a Layout<'a>,
        settings: &Settings,
    ) -> [Primitive<'a>; NUM_PRIMITIVES] {
        let mut all = [Primitive {
            layout,
            index: 0,
            length: settings.drive_length,
            margin: settings.wall_margin,
        }; NUM_PRIMITIVES];
        let (mut rest, mut k): (&mut [Primitive<'a>], usize) = (&mut all, 0);
        while let [p, tail @ ..] = rest {
            p.index = k;
            k += 1;
            rest = tail;
        }
        all
    }

    /// The point the primitive ends at from (x, y), if its segment keeps `RADIUS +
    /// wall_margin` from the walls.
    ///
    /// ```
    /// use laq_maze::{Primitive, Settings, U_MAZE};
    ///
    /// let prims = Primitive::all(&U_MAZE, &Settings::DEFAULT);
    /// assert_eq!(prims[0].predicted(2.0, 3.5), Some([2.5, 3.5]));
    /// assert_eq!(prims[6].predicted(2.0, 3.5), None);
    /// ```
    pub fn predicted(&self, x: f32, y: f32) -> Option<[f32; 2]> {
        let d = DIRECTIONS.get(self.index)?;
        let q = [x + self.length * d[0], y + self.length * d[1]];
        self.layout
            .segment_clear([x, y], q, RADIUS + self.margin)
            .then_some(q)
    }
}

impl Controller for Primitive<'_> {
    fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, Error> {
        if next.len() != state.len() {
            return Err(Error::StateLength);
        }
        let (&[x, y, ..], [nx, ny, rest @ ..]) = (state, next) else {
            return Err(Error::StateLength);
        };
        let q = self.predicted(x, y).ok_or(Error::Controller)?;
        *nx = q[0];
        *ny = q[1];
        rest.fill(0.0);
        Ok(Outcome::default())
    }
}

/// What executing one primitive did.
///
/// ```
/// use laq_maze::{execute, Pose, Settings, U_MAZE};
///
/// let start = Pose { x: 1.5, y: 3.0, heading: 0.0 };
/// let e = execute(&U_MAZE, &Settings::DEFAULT, start, 2)?;
/// assert!(!e.reached && e.actions > 10);
/// # Ok::<(), laq_runtime::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Executed {
    /// Where the robot ended.
    pub pose: Pose,
    /// Distance actually travelled (sum of the per-action displacements).
    pub travelled: f32,
    /// Robot actions used (turning and driving).
    pub actions: usize,
    /// Whether the robot entered the target disc (execution stops there).
    pub reached: bool,
}

/// The heading command of the P controller: the turn rate (in [-1, 1]) that would
/// remove the heading error in one action, saturated.
fn turn_command(target: f32, heading: f32) -> f32 {
    (wrap(target - heading) / TURN_PER_ACTION).clamp(-1.0, 1.0)
}

/// Runs primitive `k` closed-loop on the robot: turn in place with a P controller until
/// the heading error is at most `heading_tolerance` (at most [`MAX_TURN_ACTIONS`]), then
/// drive forward for `drive_length` (whole actions at full speed and one shorter one),
/// still correcting the heading. Stops as soon as the robot is within the target disc
/// (and does nothing if it starts there). [`Error::InvalidArgument`] if `k` is not a
/// primitive.
///
/// ```
/// use laq_maze::{distance, execute, Primitive, Pose, Settings, HEADINGS, U_MAZE};
///
/// let s = Settings::DEFAULT;
/// // Down the right column (+x) from any heading: ends where the primitive predicted.
/// let q = Primitive::all(&U_MAZE, &s)[0].predicted(2.5, 3.5).unwrap();
/// let e = execute(&U_MAZE, &s, Pose { x: 2.5, y: 3.5, heading: 2.0 }, 0)?;
/// assert!(distance([e.pose.x, e.pose.y], q) < 1e-3);
/// assert!((e.travelled - s.drive_length).abs() < 1e-3);
/// assert!((e.pose.heading - HEADINGS[0]).abs() < 1e-3);
/// assert!(execute(&U_MAZE, &s, Pose { x: 2.5, y: 3.5, heading: 2.0 }, 8).is_err());
/// # Ok::<(), laq_runtime::Error>(())
/// ```
pub fn execute(
    layout: &Layout<'_>,
    settings: &Settings,
    start: Pose,
    k: usize,
) -> Result<Executed, Error> {
    let &target = HEADINGS.get(k).ok_or(Error::InvalidArgument)?;
    let mut e = Executed {
        pose: start,
        travelled: 0.0,
        actions: 0,
        reached: layout.in_target([start.x, start.y]),
    };
    if e.reached {
        return Ok(e);
    }
    for _ in 0..MAX_TURN_ACTIONS {
        if libm::fabsf(wrap(target - e.pose.heading)) <= settings.heading_tolerance {
            break;
        }
        let turn = turn_command(target, e.pose.heading);
        e.pose = step(layout, e.pose, [0.0, turn]);
        e.actions += 1;
    }
    let full = libm::floorf(settings.drive_length / STEP_LENGTH) as usize;
    let rest = settings.drive_length - full as f32 * STEP_LENGTH;
    let last = (rest > 1e-6).then_some(rest / STEP_LENGTH);
    for speed in core::iter::repeat_n(1.0, full).chain(last) {
        let turn = turn_command(target, e.pose.heading);
        let next = step(layout, e.pose, [speed, turn]);
        e.travelled += distance([e.pose.x, e.pose.y], [next.x, next.y]);
        e.pose = next;
        e.actions += 1;
        if layout.in_target([next.x, next.y]) {
            e.reached = true;
            break;
        }
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::U_MAZE;

    #[test]
    fn a_primitive_moves_the_robot_as_predicted_in_open_space() {
        let s = Settings::DEFAULT;
        let prims = Primitive::all(&U_MAZE, &s);
        // Along the top corridor (+-y) and the right column (+-x), from any heading.
        for (x, y, ks) in [(1.5, 3.0, [2usize, 6]), (2.5, 3.5, [0, 4])] {
            for k in ks {
                for heading in [0.0, 2.0, -2.5, PI] {
                    let start = Pose { x, y, heading };
                    let q = prims[k].predicted(x, y).expect("available");
                    let e = execute(&U_MAZE, &s, start, k).unwrap();
                    assert!(
                        distance([e.pose.x, e.pose.y], q) < 1e-3,
                        "k {k} from {start:?}: {e:?} vs {q:?}"
                    );
                    assert!((e.travelled - s.drive_length).abs() < 1e-3, "{e:?}");
                    assert!(wrap(e.pose.heading - HEADINGS[k]).abs() < 1e-3);
                    assert!(!e.reached);
                }
            }
        }
        // A diagonal in the right column.
        let q = prims[3].predicted(2.75, 3.25).expect("up-right fits");
        let start = Pose {
            x: 2.75,
            y: 3.25,
            heading: 0.0,
        };
        let e = execute(&U_MAZE, &s, start, 3).unwrap();
        assert!(distance([e.pose.x, e.pose.y], q) < 1e-3, "{e:?} vs {q:?}");
    }

    #[test]
    fn execution_stops_in_the_target_disc() {
        let s = Settings::DEFAULT;
        let start = Pose {
            x: 1.5,
            y: 2.2,
            heading: -FRAC_PI_2,
        };
        let e = execute(&U_MAZE, &s, start, 6).unwrap();
        assert!(e.reached && e.travelled < 0.3 && U_MAZE.in_target([e.pose.x, e.pose.y]));
        let inside = execute(&U_MAZE, &s, e.pose, 2).unwrap();
        assert_eq!((inside.actions, inside.pose), (0, e.pose));
    }

    #[test]
    fn predict_checks_the_state_length() {
        let p = Primitive::all(&U_MAZE, &Settings::DEFAULT)[2];
        let mut next = [0.0; 3];
        assert_eq!(
            p.predict(&[1.5, 2.0, 0.0, 0.0], &mut next),
            Err(Error::StateLength)
        );
        assert_eq!(p.predict(&[1.5], &mut next[..1]), Err(Error::StateLength));
    }
}
