//! What every layer uses: atomic file writes, the one safetensors writer, logging and
//! progress bars, statistics, nearest neighbours.

pub mod io;
pub mod neighbours;
pub mod parallel;
pub mod progress;
pub mod safetensors;
pub mod stats;
