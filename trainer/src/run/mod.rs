//! One training run end to end: its settings ([`config`]), the pipeline ([`train`]; its
//! deep Q-learning in `deep`), what to try when its V is doubtful ([`advice`]), how
//! `laq train` starts, resumes or repeats it ([`launch`]), and the run directory it writes
//! ([`dir`]: model, [`record`]s, [`figures`] drawn with [`plot`], report).

pub mod advice;
pub mod config;
mod deep;
pub mod dir;
pub mod figures;
pub mod launch;
pub mod plot;
pub mod record;
pub mod train;
pub mod trust;
