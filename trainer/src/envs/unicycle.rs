//! A differential-drive (unicycle) robot in the Maze2D mazes: another body for the same
//! task. State (x, y, heading); action (forward speed, turn rate) in [-1, 1]^2. It shares
//! the point mass's walls, disc radius, time step, frame skip and target, so a value
//! function learned from the point mass's logs can be queried at (x, y, 0, 0).
//!
//! The robot is `laq-maze`'s ([`laq_maze::step`]), the same code as the firmware's.

use super::maze2d::Maze;
pub use laq_maze::{wrap, Pose, MAX_SPEED, MAX_TURN};

/// One action: `FRAME_SKIP` simulation steps of unicycle kinematics. As for the point
/// mass, each axis of a move is checked on its own, so the robot slides along walls.
pub fn step(maze: &Maze, p: Pose, a: [f32; 2]) -> Pose {
    laq_maze::step(maze.layout(), p, a)
}

/// The sparse task reward of the point mass, for this body.
pub fn reward(maze: &Maze, p: Pose) -> f32 {
    maze.reward(p.as_point_mass())
}
