//! A differential-drive (unicycle) robot in the Maze2D mazes: another body for the same
//! task. State (x, y, heading); action (forward speed, turn rate) in [-1, 1]^2. It shares
//! the point mass's walls, disc radius, time step, frame skip and target, so a value
//! function learned from the point mass's logs can be queried at (x, y, 0, 0).

use super::maze2d::{Maze, DT, FRAME_SKIP};

/// Top forward speed (maze units per second) and turn rate (radians per second).
pub const MAX_SPEED: f32 = 2.0;
pub const MAX_TURN: f32 = std::f32::consts::PI;

/// The unicycle's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose {
    pub x: f32,
    pub y: f32,
    /// Heading in radians; 0 points along +x (down the rows, as D4RL's x).
    pub heading: f32,
}

impl Pose {
    /// Where the point mass's value function is queried for this body: at rest.
    pub fn as_point_mass(&self) -> [f32; 4] {
        [self.x, self.y, 0.0, 0.0]
    }
}

/// One action: `FRAME_SKIP` simulation steps of unicycle kinematics. As for the point
/// mass, each axis of a move is checked on its own, so the robot slides along walls.
pub fn step(maze: &Maze, p: Pose, a: [f32; 2]) -> Pose {
    let (v, w) = (
        a[0].clamp(-1.0, 1.0) * MAX_SPEED,
        a[1].clamp(-1.0, 1.0) * MAX_TURN,
    );
    let Pose {
        mut x,
        mut y,
        mut heading,
    } = p;
    for _ in 0..FRAME_SKIP {
        heading = wrap(heading + w * DT);
        let (dx, dy) = (v * heading.cos() * DT, v * heading.sin() * DT);
        if !maze.blocked(x + dx, y) {
            x += dx;
        }
        if !maze.blocked(x, y + dy) {
            y += dy;
        }
    }
    Pose { x, y, heading }
}

/// An angle in (-pi, pi].
pub fn wrap(a: f32) -> f32 {
    use std::f32::consts::PI;
    let r = (a + PI).rem_euclid(2.0 * PI) - PI;
    if r <= -PI {
        r + 2.0 * PI
    } else {
        r
    }
}

/// The sparse task reward of the point mass, for this body.
pub fn reward(maze: &Maze, p: Pose) -> f32 {
    maze.reward(p.as_point_mass())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drives_turns_and_stops_at_walls() {
        let m = Maze::named("umaze").unwrap();
        // Facing +y in the top corridor: drives along it.
        let mut p = Pose {
            x: 1.5,
            y: 1.5,
            heading: std::f32::consts::FRAC_PI_2,
        };
        p = step(&m, p, [1.0, 0.0]);
        assert!((p.y - (1.5 + MAX_SPEED * DT * FRAME_SKIP as f32)).abs() < 1e-5);
        assert!((p.x - 1.5).abs() < 1e-5);
        // Turning in place changes only the heading.
        let q = step(&m, p, [0.0, 1.0]);
        assert_eq!((q.x, q.y), (p.x, p.y));
        assert!((q.heading - wrap(p.heading + MAX_TURN * DT * 3.0)).abs() < 1e-5);
        // Driving into the wall above row 1 for a long time never crosses it.
        let mut p = Pose {
            x: 1.5,
            y: 1.5,
            heading: std::f32::consts::PI,
        };
        for _ in 0..300 {
            p = step(&m, p, [1.0, 0.0]);
            assert!(p.x >= 1.0 + crate::envs::maze2d::RADIUS - 1e-4, "{p:?}");
        }
        assert!(!m.blocked(p.x, p.y));
    }

    #[test]
    fn wrap_keeps_angles_in_range() {
        use std::f32::consts::PI;
        for a in [-7.0, -PI, -1.0, 0.0, 1.0, PI, 7.0, 100.0] {
            let w = wrap(a);
            assert!(w > -PI - 1e-6 && w <= PI + 1e-6, "{a} -> {w}");
            assert!(
                ((w - a) / (2.0 * PI)).fract().abs() < 1e-4
                    || ((w - a) / (2.0 * PI)).fract().abs() > 1.0 - 1e-4
            );
        }
    }
}
