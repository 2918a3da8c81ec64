//! The stages of one run, in pipeline order: [`labels`] (mining latent actions or another
//! label source), [`qlearn`] (offline Q-learning on the labels, and the fits that make its
//! V exportable). [`checkpoint`] makes each stage resumable.

pub mod checkpoint;
pub mod labels;
pub mod mining;
pub mod moved;
pub mod qlearn;
