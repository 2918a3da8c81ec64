#![no_std]
//! The Maze2D task and value-guided motion primitives, without heap or panics: one
//! implementation for the trainer (`laq::envs::maze2d`, `laq::envs::unicycle`,
//! `laq::studies::guidance`) and for firmware (`firmware-examples`, `maze_guide`).
//!
//! - [`Layout`]: the maze as a grid of cells given by borrowed bytes (D4RL's text, e.g.
//!   the built-in [`U_MAZE`], [`MEDIUM_MAZE`] and [`LARGE_MAZE`] consts), its walls
//!   ([`Layout::blocked`] for a body of half-width [`RADIUS`]), the target disc
//!   ([`TARGET_RADIUS`]) and wall-clear segments ([`Layout::segment_clear`]).
//! - [`Pose`], [`step`], [`wrap`]: the differential-drive robot; [`DT`] and
//!   [`FRAME_SKIP`] are the point mass's simulation constants too.
//! - [`Primitive`]: the 8 motion primitives "turn to k * 45 degrees, drive
//!   [`Settings::drive_length`]" as `laq_runtime::Controller`s that predict (x', y', 0,
//!   0); [`execute`] runs one on the robot.
//! - [`run_episode`] with [`choose_by_value`]: one guided episode, where
//!   `laq_runtime::Model::select_ahead` picks the primitive that starts the sequence of
//!   [`Settings::lookahead`] primitives ending where V is highest, and a primitive that
//!   ends in the target disc is taken at once ([`Settings::goal_check`]).
//! - [`Geodesic`] (capacity a const parameter) and [`spl`]: the geodesic shortest path
//!   of the body to the target, for success weighted by path length.
//!
//! sin, cos, floor, fmod and sqrt come from `libm`, so every target (the trainer's
//! x86-64 or aarch64, a Cortex-M4F) computes bit-identical positions and decisions.
//! The crate has no features.
//!
//! ```
//! # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../models/maze2d/value.safetensors"));
//! use laq_maze::{choose_by_value, run_episode, spl, Geodesic, Pose, Settings, U_MAZE};
//! use laq_runtime::{Candidate, Model};
//!
//! let model = Model::new_checked(bytes)?;
//! let settings = Settings::DEFAULT;
//! let mut scratch = vec![0.0; model.lookahead_scratch_len(settings.lookahead)];
//! let mut report = [Candidate::default(); 8];
//! let start = Pose { x: 3.5, y: 3.5, heading: 0.0 };
//! let ep = run_episode(
//!     &U_MAZE,
//!     &settings,
//!     start,
//!     |pose, prims| choose_by_value(&model, pose, prims, settings.lookahead, &mut scratch, &mut report),
//!     |_, _| {},
//! )?;
//! let shortest = Geodesic::<32>::new(&U_MAZE)?.to_target(start.x, start.y).unwrap();
//! assert!(ep.success && spl(ep.success, shortest, ep.travelled) > 0.5);
//! # Ok::<(), laq_runtime::Error>(())
//! ```
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

#[cfg(test)]
extern crate std;

mod episode;
mod geodesic;
mod layout;
mod primitives;
mod robot;

pub use episode::{choose_by_value, fixed_starts, reaching_target, run_episode, Episode};
pub use geodesic::{spl, Geodesic, TARGET_SAMPLES};
pub use layout::{
    distance, Layout, LayoutError, LARGE_MAZE, MEDIUM_MAZE, RADIUS, TARGET_RADIUS, U_MAZE,
};
pub use primitives::{
    execute, Executed, Primitive, Settings, DIRECTIONS, HEADINGS, LOOKAHEAD, MAX_TURN_ACTIONS,
    NUM_PRIMITIVES, STEP_LENGTH, TURN_PER_ACTION,
};
pub use robot::{step, wrap, Pose, DT, FRAME_SKIP, MAX_SPEED, MAX_TURN};
