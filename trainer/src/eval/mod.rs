//! What a trained model is worth and what it costs: label [`purity`], V of a dataset
//! through the runtime ([`predict`]), file descriptions and microcontroller footprints
//! ([`inspect`]), and training speed ([`bench`](mod@bench)).

pub mod bench;
pub mod inspect;
pub mod predict;
pub mod purity;
