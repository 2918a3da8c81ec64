#![no_std]
//! `no_std`, heap-free evaluation of LAQ value functions on microcontrollers.
//!
//! The crate reads a value model in the `laq-value` safetensors format (see
//! `docs/model-format.md`) **in place** from a byte slice, typically from flash:
//!
//! - [`Model::new_checked`] validates the whole file once (header, dtypes, shapes,
//!   offsets, metadata, finite values, density gate); afterwards evaluation can only fail
//!   on the caller's input.
//! - [`Model::evaluate`] / [`Model::value`] run the network (input normalisation,
//!   for image models 4x4 stride-2 convolutions, ReLU layers, `max_q` or `one_norm`
//!   head) with f32 or int8 weights, using a caller-provided scratch buffer
//!   ([`Scratch`]).
//! - [`Model::log_density`] / [`Model::gated_value`] apply the optional density gate.
//! - [`Model::select`] picks among user [`Controller`]s by `reward + gamma * V(next)`;
//!   [`Model::select_ahead`] by the best sequence of up to [`MAX_LOOKAHEAD`] of them.
//! - [`Model::shaped_reward`] gives the potential-based shaped reward.
//!
//! No allocation, no panics (enforced by lints), and no `unsafe` outside two audited
//! modules: one for hard-float ARM targets (`src/arm.rs`: the f32 inner loop, `vsqrt`
//! and, on ARMv7E-M, the int8 layer loop in assembly, bit-identical to the portable code
//! used elsewhere) and one for x86-64 hosts (`src/x86.rs`: the batched layer compiled
//! with AVX, chosen at run time, bit-identical too).
//!
//! The format itself (its name, versions, metadata keys, tensor names and heads) is
//! spelled once, in [`format`], for readers and writers alike.
//!
//! # Features
//!
//! This is the one description of the crate's features (`Cargo.toml` and
//! `docs/runtime.md` refer here):
//!
//! - `images` (default): image models (`laq-value` version 2: convolutions before the
//!   linear layers), with `Model::num_conv`, `Model::input_shape`, `Model::conv_layer`
//!   and `ConvInfo`. Firmware that only runs fully connected models turns it off
//!   (`default-features = false`): it then carries no convolution code (about 1.8 KB
//!   less flash on a Cortex-M4F, docs/runtime.md) and a smaller [`Model`] (56 bytes),
//!   and [`Model::new_checked`] refuses image models (a version 2 file, or any file
//!   with a `conv.*` tensor) with [`Error::UnsupportedFormat`].
//! - `batch` (default): [`Model::values`] and [`Model::select`] evaluate [`BATCH`]
//!   states of a fully connected f32 model at a time when the scratch holds
//!   [`Model::batch_scratch_len`] elements (bit-identical values). Without it they go
//!   one state at a time and [`Model::batch_scratch_len`] is [`Model::scratch_len`]; so
//!   on hard-float ARM (Cortex-M4F and up) with it too, where the one-state kernel is
//!   assembly and measured 3.9 times cheaper than the portable batched layer (the
//!   feature then adds no code there).
//! - `int8` (default): models whose linear layers hold int8 weights (one f32 scale per
//!   row), evaluated with integer sums (on ARMv7E-M in assembly with the DSP
//!   extension's dual 16-bit multiply-accumulate). Firmware for f32 models turns it off
//!   (`default-features = false`): it then carries no int8 kernels (about 1.6 KB less
//!   flash on a Cortex-M4F, docs/runtime.md), and [`Model::new_checked`] refuses a file
//!   with int8 weights with [`Error::UnsupportedFormat`].
//! - `alloc`: `OwnedModel`, a model that owns its bytes (a `Vec<u8>`).
//! - `defmt`: `defmt::Format` for the public types, for logging on the target.
//!
//! There is no `std` feature: nothing here needs one, and [`Error`] implements
//! `core::error::Error`, hence `std::error::Error`, in every configuration.
//!
//! ```
//! # let bytes: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
//! use laq_runtime::{Candidate, Model, Scratch};
//!
//! let model = Model::new_checked(bytes)?;
//! let mut scratch = Scratch::<16>::new();
//! let v = model.value(&[1.0, 2.0], &mut scratch)?;
//!
//! // Choose between two controllers by the value of the states they lead to.
//! let predicted: [&[f32]; 2] = [&[1.0, 3.0], &[2.0, 2.0]];
//! let mut report = [Candidate::default(); 2];
//! let best = model.select(&[1.0, 2.0], &predicted, &mut scratch, &mut report)?;
//! assert!(best < 2);
//! # let _ = v;
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

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(test)]
extern crate std;

#[cfg(all(target_arch = "arm", target_abi = "eabihf"))]
mod arm;
mod batch;
mod error;
mod eval;
pub mod format;
#[cfg(feature = "int8")]
mod int8;
mod json;
mod kernels;
mod limits;
mod lookahead;
mod meta;
mod model;
mod num;
#[cfg(feature = "alloc")]
mod owned;
mod portable;
mod scratch;
mod select;
mod slots;
mod validate;
#[cfg(all(feature = "batch", target_arch = "x86_64"))]
mod x86;

pub use batch::BATCH;
pub use error::Error;
pub use eval::{Gated, Output};
pub use format::Head;
pub use limits::{
    MAX_CHANNELS, MAX_CONV_LAYERS, MAX_HEADER_LEN, MAX_IMAGE_SIDE, MAX_INPUT_DIM, MAX_LAYERS,
};
pub use lookahead::MAX_LOOKAHEAD;
#[cfg(feature = "images")]
pub use model::ConvInfo;
pub use model::{LayerInfo, Model};
#[cfg(feature = "alloc")]
pub use owned::OwnedModel;
pub use scratch::Scratch;
pub use select::{Candidate, Controller, Outcome, Predicted, Status};
