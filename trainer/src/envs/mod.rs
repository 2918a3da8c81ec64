//! Built-in environments that generate datasets and know their own ground truth.

pub mod gridworld;
pub mod maze2d;
pub mod nav;
pub mod squares;
pub mod unicycle;
