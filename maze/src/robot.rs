//! The differential-drive (unicycle) robot: pose, kinematics, sliding along walls.

use core::f32::consts::PI;

use crate::Layout;

/// Simulation step, in seconds (the point mass's too).
///
/// ```
/// use laq_maze::{DT, FRAME_SKIP};
///
/// // One action lasts 0.03 s.
/// assert!((DT * FRAME_SKIP as f32 - 0.03).abs() < 1e-7);
/// ```
pub const DT: f32 = 0.01;

/// Simulation steps per action (the point mass's too).
///
/// ```
/// assert_eq!(laq_maze::FRAME_SKIP, 3);
/// ```
pub const FRAME_SKIP: usize = 3;

/// Top forward speed of the robot, maze units per second (action 1).
///
/// ```
/// use laq_maze::{DT, FRAME_SKIP, MAX_SPEED};
///
/// // One full-speed action drives 0.06 units.
/// assert!((MAX_SPEED * DT * FRAME_SKIP as f32 - 0.06).abs() < 1e-7);
/// ```
pub const MAX_SPEED: f32 = 2.0;

/// Top turn rate of the robot, radians per second (action 1).
///
/// ```
/// assert_eq!(laq_maze::MAX_TURN, core::f32::consts::PI);
/// ```
pub const MAX_TURN: f32 = PI;

/// The robot's state.
///
/// ```
/// use laq_maze::Pose;
///
/// let p = Pose { x: 3.5, y: 1.5, heading: 0.0 };
/// assert_eq!(p.as_point_mass(), [3.5, 1.5, 0.0, 0.0]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose {
    /// Position along the rows.
    pub x: f32,
    /// Position along the columns.
    pub y: f32,
    /// Heading in radians; 0 points along +x (down the rows, as D4RL's x).
    pub heading: f32,
}

impl Pose {
    /// Where the point mass's value function is queried for this body: (x, y) at rest.
    ///
    /// ```
    /// use laq_maze::Pose;
    ///
    /// let p = Pose { x: 1.0, y: 2.0, heading: 3.0 };
    /// assert_eq!(p.as_point_mass(), [1.0, 2.0, 0.0, 0.0]);
    /// ```
    pub const fn as_point_mass(&self) -> [f32; 4] {
        [self.x, self.y, 0.0, 0.0]
    }
}

/// An angle wrapped to (-pi, pi].
///
/// ```
/// use core::f32::consts::PI;
/// use laq_maze::wrap;
///
/// assert_eq!(wrap(-PI), PI);
/// assert!((wrap(3.0 * PI / 2.0) + PI / 2.0).abs() < 1e-6);
/// assert_eq!(wrap(0.5), 0.5);
/// ```
pub fn wrap(a: f32) -> f32 {
    // `(a + PI).rem_euclid(2 PI) - PI` (fmod is exact).
    let m = 2.0 * PI;
    let f = libm::fmodf(a + PI, m);
    let r = if f < 0.0 { f + m } else { f } - PI;
    if r <= -PI {
        r + 2.0 * PI
    } else {
        r
    }
}

/// One action (forward speed, turn rate), each clamped to [-1, 1]: [`FRAME_SKIP`] steps of
/// unicycle kinematics. Each axis of a move is checked against the walls on its own
/// ([`Layout::blocked`]); an axis that would hit one keeps its position, so the robot
/// slides along walls.
///
/// ```
/// use core::f32::consts::{FRAC_PI_2, PI};
/// use laq_maze::{step, Pose, U_MAZE};
///
/// // Facing +y in the top corridor: drives along it.
/// let p = step(&U_MAZE, Pose { x: 1.5, y: 1.5, heading: FRAC_PI_2 }, [1.0, 0.0]);
/// assert!((p.y - 1.56).abs() < 1e-5 && (p.x - 1.5).abs() < 1e-5);
/// // Driving into the wall above row 1 never crosses it.
/// let mut p = Pose { x: 1.5, y: 1.5, heading: PI };
/// for _ in 0..300 {
///     p = step(&U_MAZE, p, [1.0, 0.0]);
/// }
/// assert!(p.x >= 1.1 - 1e-4 && !U_MAZE.blocked(p.x, p.y));
/// ```
pub fn step(layout: &Layout<'_>, pose: Pose, action: [f32; 2]) -> Pose {
    let (v, w) = (
        action[0].clamp(-1.0, 1.0) * MAX_SPEED,
        action[1].clamp(-1.0, 1.0) * MAX_TURN,
    );
    let Pose {
        mut x,
        mut y,
        mut heading,
    } = pose;
    for _ in 0..FRAME_SKIP {
        heading = wrap(heading + w * DT);
        let (dx, dy) = (v * libm::cosf(heading) * DT, v * libm::sinf(heading) * DT);
        if !layout.blocked(x + dx, y) {
            x += dx;
        }
        if !layout.blocked(x, y + dy) {
            y += dy;
        }
    }
    Pose { x, y, heading }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RADIUS, U_MAZE};

    #[test]
    fn turning_in_place_changes_only_the_heading() {
        let p = Pose {
            x: 1.5,
            y: 2.5,
            heading: 0.3,
        };
        let q = step(&U_MAZE, p, [0.0, 1.0]);
        assert_eq!((q.x, q.y), (p.x, p.y));
        assert!((q.heading - wrap(p.heading + MAX_TURN * DT * 3.0)).abs() < 1e-5);
        // Sliding: pushing diagonally into the wall above row 1 still moves along y.
        let mut p = Pose {
            x: 1.0 + RADIUS,
            y: 1.5,
            heading: 3.0 * PI / 4.0,
        };
        for _ in 0..5 {
            p = step(&U_MAZE, p, [1.0, 0.0]);
        }
        assert!(p.y > 1.6 && p.x >= 1.0 + RADIUS, "{p:?}");
    }

    #[test]
    fn wrap_keeps_angles_in_range() {
        for a in [-7.0, -PI, -1.0, 0.0, 1.0, PI, 7.0, 100.0] {
            let w = wrap(a);
            assert!(w > -PI - 1e-6 && w <= PI + 1e-6, "{a} -> {w}");
            let turns = (w - a) / (2.0 * PI);
            assert!((turns - libm::roundf(turns)).abs() < 1e-4, "{a} -> {w}");
        }
    }
}
