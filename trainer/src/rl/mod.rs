//! Reinforcement learning with actions, for the references and the behaviour studies:
//! [`td3bc`] (offline, the ground-truth-action value of Maze2D) and [`sac`] (online, the
//! shaped-reward study).

pub mod sac;
pub mod td3bc;
