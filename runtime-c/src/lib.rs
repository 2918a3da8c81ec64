#![no_std]
//! The C interface to [`laq_runtime`]: a static library (`liblaq_runtime_c.a`) and its
//! header, `include/laq.h` (generated from this file by cbindgen; see the README).
//!
//! The C API keeps the runtime's shape:
//!
//! - **Validate once, then evaluate.** [`laq_model_init`] checks the whole model file
//!   (`Model::new_checked`); afterwards evaluation fails only on the caller's input.
//! - **No heap.** The model reads the caller's bytes in place (they must outlive the
//!   handle); the caller provides the handle's storage ([`laq_model`],
//!   [`LAQ_MODEL_SIZE`] bytes) and the scratch buffer ([`laq_scratch_len`] floats).
//! - **Error codes.** Every fallible function returns `0` ([`LAQ_OK`]) or a negative
//!   code: `-1..=-20` are the runtime's [`Error`] variants one to one, in their order;
//!   [`LAQ_ERR_NULL`] and [`LAQ_ERR_NOT_LOADED`] are the C layer's own.
//!   [`laq_error_str`] describes any code.
//! - **No panics, no out-of-bounds reads.** Every pointer is checked for NULL (and its
//!   alignment), every length against the model, before a slice is formed.
//!
//! # Features
//!
//! - `images` (default): image models (`laq-value` version 2), as the runtime's
//!   feature of the same name. Firmware that only runs fully connected models turns it
//!   off to carry no convolution code. The header and [`LAQ_MODEL_SIZE`] are the same
//!   either way.
//! - `int8` (default): models with int8 layers, as the runtime's feature of the same
//!   name. Firmware for f32 models turns it off to carry no int8 kernels.
//!
//! # Targets
//!
//! On hosted targets the library links `std` (only for its panic handler, never
//! reached: the code is panic-free); C programs linking it then need the system
//! libraries that `cargo rustc -p laq-runtime-c --crate-type staticlib -- --print
//! native-static-libs` lists. On bare-metal targets (`target_os = "none"`, e.g.
//! `thumbv7em-none-eabihf`) it brings its own panic handler, which parks the core.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]
// The C names are the API.
#![allow(non_camel_case_types)]

#[cfg(any(test, not(target_os = "none")))]
extern crate std;

use core::ffi::{c_char, c_void, CStr};
use core::mem::{align_of, size_of};
use core::ptr;

use laq_runtime::{Candidate, Controller, Error, Head, Model, Outcome, Predicted, Status};

/// A parked core is the least harmful end on a bare-metal target; the library has no
/// panicking path of its own (see the lints above), so only a bug in a dependency could
/// get here.
#[cfg(all(target_os = "none", not(test)))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {
        core::hint::spin_loop();
    }
}

/// The return codes: 0 for success, negative for an error. `-1..=-20` are the
/// runtime's errors in their order (`-1..=-13` a bad model file, the rest the caller's
/// input); the C layer adds [`LAQ_ERR_NULL`] and
/// [`LAQ_ERR_NOT_LOADED`]. Functions return them as `int32_t`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum laq_error {
    /// Success.
    LAQ_OK = 0,
    /// The file is shorter than 8 bytes, or the header runs past its end.
    LAQ_ERR_TRUNCATED = -1,
    /// The header is longer than the loader's cap (64 KiB).
    LAQ_ERR_HEADER_TOO_LONG = -2,
    /// The header is not UTF-8, not JSON, or not a safetensors header.
    LAQ_ERR_INVALID_JSON = -3,
    /// A tensor has a dtype the format does not allow for it.
    LAQ_ERR_INVALID_DTYPE = -4,
    /// A tensor's shape disagrees with the metadata or with the other tensors.
    LAQ_ERR_INVALID_SHAPE = -5,
    /// Tensor data offsets are reversed, out of bounds, overlapping or mismatched.
    LAQ_ERR_INVALID_OFFSETS = -6,
    /// A tensor (or the metadata) appears twice in the header.
    LAQ_ERR_DUPLICATE_TENSOR = -7,
    /// A required tensor is missing.
    LAQ_ERR_MISSING_TENSOR = -8,
    /// A tensor name the format does not define.
    LAQ_ERR_UNKNOWN_TENSOR = -9,
    /// Not a `laq-value` file of a supported version (or an image model without the
    /// library's `images` feature, or int8 layers without its `int8` feature).
    LAQ_ERR_UNSUPPORTED_FORMAT = -10,
    /// Required metadata is missing or invalid.
    LAQ_ERR_INVALID_METADATA = -11,
    /// A tensor contains NaN or an infinity.
    LAQ_ERR_NON_FINITE = -12,
    /// The density gate's parameters are inconsistent.
    LAQ_ERR_INVALID_DENSITY = -13,
    /// A state has the wrong length (not the model's `obs_len`).
    LAQ_ERR_STATE_LENGTH = -14,
    /// A caller-provided buffer (scratch, outputs or report) is too small.
    LAQ_ERR_BUFFER_TOO_SMALL = -15,
    /// A state contains NaN or an infinity.
    LAQ_ERR_NON_FINITE_STATE = -16,
    /// Evaluation overflowed to a non-finite value (the input is far out of range).
    LAQ_ERR_NON_FINITE_OUTPUT = -17,
    /// An argument is out of range (a misaligned pointer, overlapping buffers, a
    /// non-finite reward, a discount outside `[0, 1]`, a length that overflows).
    LAQ_ERR_INVALID_ARGUMENT = -18,
    /// Controller selection found no valid candidate.
    LAQ_ERR_NO_VALID_CANDIDATE = -19,
    /// A controller failed to predict.
    LAQ_ERR_CONTROLLER = -20,
    /// A required pointer is NULL.
    LAQ_ERR_NULL = -64,
    /// The handle holds no model: [`laq_model_init`] has not accepted a file into it (or
    /// it is misaligned).
    LAQ_ERR_NOT_LOADED = -65,
    /// An error of a newer runtime that this interface does not know.
    LAQ_ERR_UNKNOWN = -127,
}

use laq_error::*;

impl laq_error {
    /// Every code, for looking one up.
    const ALL: [laq_error; 24] = [
        LAQ_OK,
        LAQ_ERR_TRUNCATED,
        LAQ_ERR_HEADER_TOO_LONG,
        LAQ_ERR_INVALID_JSON,
        LAQ_ERR_INVALID_DTYPE,
        LAQ_ERR_INVALID_SHAPE,
        LAQ_ERR_INVALID_OFFSETS,
        LAQ_ERR_DUPLICATE_TENSOR,
        LAQ_ERR_MISSING_TENSOR,
        LAQ_ERR_UNKNOWN_TENSOR,
        LAQ_ERR_UNSUPPORTED_FORMAT,
        LAQ_ERR_INVALID_METADATA,
        LAQ_ERR_NON_FINITE,
        LAQ_ERR_INVALID_DENSITY,
        LAQ_ERR_STATE_LENGTH,
        LAQ_ERR_BUFFER_TOO_SMALL,
        LAQ_ERR_NON_FINITE_STATE,
        LAQ_ERR_NON_FINITE_OUTPUT,
        LAQ_ERR_INVALID_ARGUMENT,
        LAQ_ERR_NO_VALID_CANDIDATE,
        LAQ_ERR_CONTROLLER,
        LAQ_ERR_NULL,
        LAQ_ERR_NOT_LOADED,
        LAQ_ERR_UNKNOWN,
    ];

    /// The code of `value`, if it is one.
    fn from_i32(value: i32) -> Option<laq_error> {
        Self::ALL.iter().copied().find(|&e| e as i32 == value)
    }
}

/// 64-bit words in a [`laq_model`].
pub const LAQ_MODEL_WORDS: usize = 56;
/// Bytes of storage for one model handle ([`laq_model`]).
pub const LAQ_MODEL_SIZE: usize = LAQ_MODEL_WORDS * 8;

/// Storage for one loaded model, provided by the caller (static, stack or a member of
/// a larger structure) and filled by [`laq_model_init`]. Its contents are private; its
/// size ([`LAQ_MODEL_SIZE`]) and alignment (that of `uint64_t`) are what the library
/// needs on every target.
///
/// The model refers to the file's bytes in place: they must stay valid and unchanged
/// for as long as the handle is used. A handle may be copied with `memcpy` and used
/// from several threads for reading; [`laq_set_gamma`] changes it.
#[repr(C)]
pub struct laq_model {
    _storage: [u64; LAQ_MODEL_WORDS],
}

/// Which function of the last layer's outputs `y` gives `V(s)`.
// 32 bits rather than `repr(C)`: bare-metal ARM C compilers make enums as small as
// their values (`-fshort-enums`), so a C `enum` field would not match across compilers.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum laq_head {
    /// `Q(s, k) = y_k`, `V(s) = max_k y_k`.
    LAQ_HEAD_MAX_Q = 0,
    /// `V(s) = 1 - ||y||_2`.
    LAQ_HEAD_ONE_NORM = 1,
}

/// Why a candidate of [`laq_select_report`] or [`laq_select_ahead`] can or cannot be
/// selected.
// 32 bits, as `laq_head`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum laq_status {
    /// Scored; may win.
    LAQ_STATUS_VALID = 0,
    /// The predicted state, the reward or the score is NaN or infinite, or the state
    /// has the wrong length.
    LAQ_STATUS_NON_FINITE = 1,
    /// The predicted state fails the density gate.
    LAQ_STATUS_OUT_OF_DISTRIBUTION = 2,
    /// The candidate could not be evaluated.
    LAQ_STATUS_FAILED = 3,
}

/// A model's shape and metadata, from [`laq_model_info`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct laq_info {
    /// The state length `D` (`input_dim`).
    pub obs_len: usize,
    /// Outputs of the last layer (latent actions for [`laq_head::LAQ_HEAD_MAX_Q`]).
    pub output_len: usize,
    /// Floats of scratch every evaluation needs.
    pub scratch_len: usize,
    /// Linear layers.
    pub num_layers: usize,
    /// Convolutional layers (0 for a fully connected model, and without `images`).
    pub num_conv: usize,
    /// `[C, H, W]` of an image model's input (zeros for a fully connected model).
    pub input_shape: [usize; 3],
    /// Multiply-accumulates per evaluation.
    pub macs: usize,
    /// The value head.
    pub head: laq_head,
    /// The discount of shaping and selection (the file's `gamma`, or
    /// [`laq_set_gamma`]'s).
    pub gamma: f32,
    /// Whether the model has a density gate.
    pub has_density_gate: bool,
    /// The gate's `density_threshold` (NaN without a gate).
    pub density_threshold: f32,
    /// Whether every f32 weight matrix is 4-aligned in memory (the fast path; results
    /// are identical either way). Load the file from an 8-aligned address to get it.
    pub aligned: bool,
    /// The file's `cost_per_step` (below 0) where V was learned above paying a cost a
    /// step for ever, 0 where V is in the log's own units; [`laq_value_in_data_units`]
    /// maps such a V to the log's return.
    pub cost_per_step: f32,
}

/// A value together with the density gate's verdict, from [`laq_gated_value`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct laq_gated {
    /// `V(s)`, or 0 when the state is out of distribution.
    pub value: f32,
    /// `V(s)` as evaluated, ignoring the gate.
    pub raw_value: f32,
    /// `log p(s)` under the density gate (NaN without a gate).
    pub log_density: f32,
    /// Whether the model has a density gate (and `log_density` is set).
    pub has_log_density: bool,
    /// `false` if `log p(s) < density_threshold`; always `true` without a gate.
    pub in_distribution: bool,
}

/// One candidate's report from [`laq_select_report`] or [`laq_select_ahead`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct laq_candidate {
    /// Whether the candidate could be scored.
    pub status: laq_status,
    /// The step's reward as given (0 without rewards).
    pub reward: f32,
    /// Whether the predicted state was given as terminal (its value is then 0).
    pub terminal: bool,
    /// `V(next)`: 0 for terminal states, the raw value for out-of-distribution
    /// states, NaN if not evaluated.
    pub value: f32,
    /// `log p(next)` under the density gate (NaN if the model has none or it was not
    /// evaluated).
    pub log_density: f32,
    /// `reward + gamma * V(next)`, with `V := 0` for terminal and out-of-distribution
    /// states (NaN if not evaluated).
    pub score: f32,
}

/// What the handle's storage holds: a tag, set only once a file is accepted, then the
/// runtime's model (its bytes' lifetime is the caller's contract, hence `'static`).
#[repr(C)]
struct Handle {
    tag: usize,
    model: Option<Model<'static>>,
}

/// "LAQM": unlikely in zeroed or stale storage.
const TAG: usize = 0x4c41_514d;

const _: () = assert!(size_of::<Handle>() <= size_of::<laq_model>());
const _: () = assert!(align_of::<Handle>() <= align_of::<laq_model>());
const _: () = assert!(size_of::<laq_model>() == LAQ_MODEL_SIZE);
const _: () = assert!(size_of::<laq_head>() == 4 && size_of::<laq_status>() == 4);

/// The C code of a runtime error.
fn code(e: Error) -> laq_error {
    match e {
        Error::Truncated => LAQ_ERR_TRUNCATED,
        Error::HeaderTooLong => LAQ_ERR_HEADER_TOO_LONG,
        Error::InvalidJson => LAQ_ERR_INVALID_JSON,
        Error::InvalidDtype => LAQ_ERR_INVALID_DTYPE,
        Error::InvalidShape => LAQ_ERR_INVALID_SHAPE,
        Error::InvalidOffsets => LAQ_ERR_INVALID_OFFSETS,
        Error::DuplicateTensor => LAQ_ERR_DUPLICATE_TENSOR,
        Error::MissingTensor => LAQ_ERR_MISSING_TENSOR,
        Error::UnknownTensor => LAQ_ERR_UNKNOWN_TENSOR,
        Error::UnsupportedFormat => LAQ_ERR_UNSUPPORTED_FORMAT,
        Error::InvalidMetadata => LAQ_ERR_INVALID_METADATA,
        Error::NonFinite => LAQ_ERR_NON_FINITE,
        Error::InvalidDensity => LAQ_ERR_INVALID_DENSITY,
        Error::StateLength => LAQ_ERR_STATE_LENGTH,
        Error::BufferTooSmall => LAQ_ERR_BUFFER_TOO_SMALL,
        Error::NonFiniteState => LAQ_ERR_NON_FINITE_STATE,
        Error::NonFiniteOutput => LAQ_ERR_NON_FINITE_OUTPUT,
        Error::InvalidArgument => LAQ_ERR_INVALID_ARGUMENT,
        Error::NoValidCandidate => LAQ_ERR_NO_VALID_CANDIDATE,
        Error::Controller => LAQ_ERR_CONTROLLER,
        _ => LAQ_ERR_UNKNOWN,
    }
}

/// The C layer's failures, carried as the code to return.
type Result<T> = core::result::Result<T, laq_error>;

/// Runs `f` and turns its result into a return code.
fn status(f: impl FnOnce() -> Result<()>) -> i32 {
    match f() {
        Ok(()) => LAQ_OK as i32,
        Err(c) => c as i32,
    }
}

/// The loaded model behind `model`.
///
/// # Safety
///
/// `model` is NULL or points to a readable [`laq_model`].
unsafe fn loaded<'m>(model: *const laq_model) -> Result<&'m Model<'static>> {
    if model.is_null() {
        return Err(LAQ_ERR_NULL);
    }
    let handle = model.cast::<Handle>();
    if !handle.is_aligned() {
        return Err(LAQ_ERR_NOT_LOADED);
    }
    // SAFETY: `handle` is non-null, aligned, and inside the caller's storage, which is
    // readable (contract); the tag is read on its own before anything else, so stale
    // storage never has its `Option` read.
    let tag = unsafe { ptr::addr_of!((*handle).tag).read() };
    if tag != TAG {
        return Err(LAQ_ERR_NOT_LOADED);
    }
    // SAFETY: the tag is only written after `laq_model_init` stored a model, so the
    // handle is initialised.
    match unsafe { &(*handle).model } {
        Some(m) => Ok(m),
        None => Err(LAQ_ERR_NOT_LOADED),
    }
}

/// `len` floats at `p`, for reading.
///
/// # Safety
///
/// `p` is NULL or points to `len` readable floats.
unsafe fn floats<'a>(p: *const f32, len: usize) -> Result<&'a [f32]> {
    if p.is_null() {
        return Err(LAQ_ERR_NULL);
    }
    if !p.is_aligned() || len > isize::MAX as usize / size_of::<f32>() {
        return Err(LAQ_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null, aligned, within `isize::MAX` bytes, readable (contract).
    Ok(unsafe { core::slice::from_raw_parts(p, len) })
}

/// `len` floats at `p`, for writing; they must not overlap `others`.
///
/// # Safety
///
/// `p` is NULL or points to `len` writable floats that nothing else refers to during
/// the call, apart from the slices in `others` (which are checked).
unsafe fn floats_mut<'a>(p: *mut f32, len: usize, others: &[&[f32]]) -> Result<&'a mut [f32]> {
    // SAFETY: forwarded contract.
    let read = unsafe { floats(p, len)? };
    let range = read.as_ptr_range();
    let range = range.start as usize..range.end as usize;
    for other in others.iter().filter(|o| !o.is_empty()) {
        let o = other.as_ptr_range();
        if range.start < o.end as usize && (o.start as usize) < range.end {
            return Err(LAQ_ERR_INVALID_ARGUMENT);
        }
    }
    // SAFETY: as checked by `floats`, and writable and unaliased (contract and the
    // overlap check).
    Ok(unsafe { core::slice::from_raw_parts_mut(p, len) })
}

/// The first `count` of the `report_len` entries at `report`, for writing; `None` if
/// `report` is NULL.
///
/// # Safety
///
/// `report` is NULL or points to `report_len` writable entries that nothing else refers
/// to during the call.
unsafe fn report_entries<'a>(
    report: *mut laq_candidate,
    report_len: usize,
    count: usize,
) -> Result<Option<&'a mut [laq_candidate]>> {
    if report.is_null() {
        return Ok(None);
    }
    if report_len < count {
        return Err(LAQ_ERR_BUFFER_TOO_SMALL);
    }
    if !report.is_aligned() || report_len > isize::MAX as usize / size_of::<laq_candidate>() {
        return Err(LAQ_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null, aligned, within `isize::MAX` bytes, writable and referred to by
    // nothing else during the call (contract); the `count` entries are within
    // `report_len`.
    Ok(Some(unsafe {
        core::slice::from_raw_parts_mut(report, count)
    }))
}

/// Writes `value` through `out`.
///
/// # Safety
///
/// `out` is NULL or points to a writable `T`.
unsafe fn put<T>(out: *mut T, value: T) -> Result<()> {
    if out.is_null() {
        return Err(LAQ_ERR_NULL);
    }
    if !out.is_aligned() {
        return Err(LAQ_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null, aligned, writable (contract).
    unsafe { out.write(value) };
    Ok(())
}

/// Validates the `laq-value` file of `len` bytes at `bytes` and stores the model in
/// `model`.
///
/// Returns 0, or a negative code: a file error (`-1..=-13`), [`LAQ_ERR_NULL`], or
/// [`LAQ_ERR_NOT_LOADED`] for misaligned storage. On failure the handle holds no
/// model (other functions return [`LAQ_ERR_NOT_LOADED`]).
///
/// The bytes are read in place and must outlive the handle; from an 8-aligned address
/// f32 weights are read directly (`laq_info.aligned`).
///
/// # Safety
///
/// `model` is NULL or points to writable storage of [`LAQ_MODEL_SIZE`] bytes; `bytes`
/// is NULL or points to `len` readable bytes that stay valid and unchanged while the
/// handle is used.
#[no_mangle]
pub unsafe extern "C" fn laq_model_init(
    model: *mut laq_model,
    bytes: *const u8,
    len: usize,
) -> i32 {
    status(|| {
        if model.is_null() || bytes.is_null() {
            return Err(LAQ_ERR_NULL);
        }
        let handle = model.cast::<Handle>();
        if !handle.is_aligned() {
            return Err(LAQ_ERR_NOT_LOADED);
        }
        if len > isize::MAX as usize {
            return Err(LAQ_ERR_INVALID_ARGUMENT);
        }
        // SAFETY: non-null, at most `isize::MAX` bytes, readable and outliving the
        // handle (contract): hence the `'static` the handle stores.
        let bytes: &'static [u8] = unsafe { core::slice::from_raw_parts(bytes, len) };
        // SAFETY: writable, aligned storage large enough for a `Handle` (contract and
        // the assertions above); written whole, without reading the old contents.
        unsafe {
            handle.write(Handle {
                tag: 0,
                model: None,
            })
        };
        // SAFETY: just initialised, and the caller's storage is ours during the call.
        let h = unsafe { &mut *handle };
        Model::new_checked_in_place(&mut h.model, bytes).map_err(code)?;
        h.tag = TAG;
        Ok(())
    })
}

/// Floats of scratch every evaluating function needs for this model (0 if `model`
/// holds none).
///
/// # Safety
///
/// `model` is NULL or points to a readable [`laq_model`].
#[no_mangle]
pub unsafe extern "C" fn laq_scratch_len(model: *const laq_model) -> usize {
    // SAFETY: forwarded contract.
    unsafe { loaded(model) }.map_or(0, |m| m.scratch_len())
}

/// The state length `D` of this model (0 if `model` holds none).
///
/// # Safety
///
/// `model` is NULL or points to a readable [`laq_model`].
#[no_mangle]
pub unsafe extern "C" fn laq_obs_len(model: *const laq_model) -> usize {
    // SAFETY: forwarded contract.
    unsafe { loaded(model) }.map_or(0, |m| m.input_dim())
}

/// Outputs of the last layer (latent actions of a `max_q` head; 0 if `model` holds
/// none): the length [`laq_evaluate`] writes.
///
/// # Safety
///
/// `model` is NULL or points to a readable [`laq_model`].
#[no_mangle]
pub unsafe extern "C" fn laq_output_len(model: *const laq_model) -> usize {
    // SAFETY: forwarded contract.
    unsafe { loaded(model) }.map_or(0, |m| m.output_dim())
}

/// The model's shape and metadata, into `*info_out`.
///
/// # Safety
///
/// `model` is NULL or points to a readable [`laq_model`]; `info_out` is NULL or
/// points to a writable [`laq_info`].
#[no_mangle]
pub unsafe extern "C" fn laq_model_info(model: *const laq_model, info_out: *mut laq_info) -> i32 {
    status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { loaded(model)? };
        #[cfg(feature = "images")]
        let (num_conv, input_shape) = (m.num_conv(), m.input_shape().unwrap_or([0; 3]));
        #[cfg(not(feature = "images"))]
        let (num_conv, input_shape) = (0, [0; 3]);
        let info = laq_info {
            obs_len: m.input_dim(),
            output_len: m.output_dim(),
            scratch_len: m.scratch_len(),
            num_layers: m.num_layers(),
            num_conv,
            input_shape,
            macs: m.macs(),
            head: match m.head() {
                Head::MaxQ => laq_head::LAQ_HEAD_MAX_Q,
                Head::OneNorm => laq_head::LAQ_HEAD_ONE_NORM,
            },
            gamma: m.gamma(),
            has_density_gate: m.has_density_gate(),
            density_threshold: m.density_threshold().unwrap_or(f32::NAN),
            aligned: m.is_aligned(),
            cost_per_step: m.cost_per_step().unwrap_or(0.0),
        };
        // SAFETY: forwarded contract.
        unsafe { put(info_out, info) }
    })
}

/// Overrides the discount used by shaping and selection (`0 <= gamma <= 1`, else
/// [`LAQ_ERR_INVALID_ARGUMENT`] and the discount is unchanged).
///
/// # Safety
///
/// `model` is NULL or points to a writable [`laq_model`] that no other thread uses
/// during the call.
#[no_mangle]
pub unsafe extern "C" fn laq_set_gamma(model: *mut laq_model, gamma: f32) -> i32 {
    status(|| {
        // SAFETY: forwarded contract (checks NULL, alignment and the tag).
        unsafe { loaded(model)? };
        // SAFETY: a loaded handle (just checked), writable and ours (contract).
        let handle = unsafe { &mut *model.cast::<Handle>() };
        let m = handle.model.as_mut().ok_or(LAQ_ERR_NOT_LOADED)?;
        m.set_gamma(gamma).map_err(code)
    })
}

/// `V(s)` of the state `obs` (`obs_len` floats), ignoring the density gate.
///
/// `scratch` holds at least [`laq_scratch_len`] floats and must not overlap `obs`.
///
/// # Safety
///
/// `model` is NULL or points to a readable [`laq_model`]; `obs` is NULL or points to
/// `obs_len` readable floats; `scratch` is NULL or points to `scratch_len` writable
/// floats; `value_out` is NULL or points to a writable float.
#[no_mangle]
pub unsafe extern "C" fn laq_value(
    model: *const laq_model,
    obs: *const f32,
    obs_len: usize,
    scratch: *mut f32,
    scratch_len: usize,
    value_out: *mut f32,
) -> i32 {
    status(|| {
        // SAFETY: forwarded contract.
        let (m, obs, scratch) = unsafe { inputs(model, obs, obs_len, scratch, scratch_len)? };
        let v = m.value(obs, scratch).map_err(code)?;
        // SAFETY: forwarded contract.
        unsafe { put(value_out, v) }
    })
}

/// A value of the model in the units of the log it was learned from, into
/// `*value_out`: `value` itself, or where V was learned above a cost per step `c`
/// (`laq_info.cost_per_step`), the return `c (1 - gamma V) / (1 - gamma)` at the file's
/// `gamma`. Selection and shaping use it already; it rises with V.
///
/// # Safety
///
/// `model` is NULL or points to a readable [`laq_model`]; `value_out` is NULL or points
/// to a writable float.
#[no_mangle]
pub unsafe extern "C" fn laq_value_in_data_units(
    model: *const laq_model,
    value: f32,
    value_out: *mut f32,
) -> i32 {
    status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { loaded(model)? };
        // SAFETY: forwarded contract.
        unsafe { put(value_out, m.value_in_data_units(value)) }
    })
}

/// The checked model, state and scratch of an evaluating function.
///
/// # Safety
///
/// As for [`laq_value`].
unsafe fn inputs<'a>(
    model: *const laq_model,
    obs: *const f32,
    obs_len: usize,
    scratch: *mut f32,
    scratch_len: usize,
) -> Result<(&'a Model<'static>, &'a [f32], &'a mut [f32])> {
    // SAFETY: forwarded contract.
    let m = unsafe { loaded(model)? };
    // SAFETY: forwarded contract.
    let obs = unsafe { floats(obs, obs_len)? };
    // SAFETY: forwarded contract.
    let scratch = unsafe { floats_mut(scratch, scratch_len, &[obs])? };
    Ok((m, obs, scratch))
}

/// Evaluates the network on `obs`: `V(s)` into `*value_out`, the last layer's outputs
/// (the Q values of a `max_q` head, `y` of a `one_norm` head) into
/// `outputs[..laq_output_len]`, and the best latent action (`max_q`, lowest index on
/// ties; `SIZE_MAX` for `one_norm`) into `*best_out`. Ignores the density gate.
///
/// `outputs` (with `outputs_len`) and `best_out` may be NULL when not wanted;
/// otherwise `outputs_len` must be at least [`laq_output_len`]. No buffer may overlap
/// another.
///
/// # Safety
///
/// As for [`laq_value`]; `outputs` is NULL or points to `outputs_len` writable floats;
/// `best_out` is NULL or points to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn laq_evaluate(
    model: *const laq_model,
    obs: *const f32,
    obs_len: usize,
    scratch: *mut f32,
    scratch_len: usize,
    value_out: *mut f32,
    outputs: *mut f32,
    outputs_len: usize,
    best_out: *mut usize,
) -> i32 {
    status(|| {
        // SAFETY: forwarded contract.
        let (m, obs, scratch) = unsafe { inputs(model, obs, obs_len, scratch, scratch_len)? };
        if value_out.is_null() {
            return Err(LAQ_ERR_NULL);
        }
        let outputs = if outputs.is_null() {
            None
        } else {
            // SAFETY: forwarded contract.
            Some(unsafe { floats_mut(outputs, outputs_len, &[obs, scratch])? })
        };
        if outputs.as_ref().is_some_and(|o| o.len() < m.output_dim()) {
            return Err(LAQ_ERR_BUFFER_TOO_SMALL);
        }
        let out = m.evaluate(obs, scratch).map_err(code)?;
        if let Some(dst) = outputs {
            for (d, s) in dst.iter_mut().zip(out.outputs) {
                *d = *s;
            }
        }
        if !best_out.is_null() {
            // SAFETY: forwarded contract.
            unsafe { put(best_out, out.best.unwrap_or(usize::MAX))? };
        }
        // SAFETY: forwarded contract.
        unsafe { put(value_out, out.value) }
    })
}

/// `V(s)` with the density gate applied (0 for an out-of-distribution state), with the
/// raw value and the gate's verdict, into `*gated_out`. Without a gate every state is
/// in distribution.
///
/// # Safety
///
/// As for [`laq_value`]; `gated_out` is NULL or points to a writable [`laq_gated`].
#[no_mangle]
pub unsafe extern "C" fn laq_gated_value(
    model: *const laq_model,
    obs: *const f32,
    obs_len: usize,
    scratch: *mut f32,
    scratch_len: usize,
    gated_out: *mut laq_gated,
) -> i32 {
    status(|| {
        // SAFETY: forwarded contract.
        let (m, obs, scratch) = unsafe { inputs(model, obs, obs_len, scratch, scratch_len)? };
        let g = m.gated_value(obs, scratch).map_err(code)?;
        let gated = laq_gated {
            value: g.value,
            raw_value: g.raw_value,
            log_density: g.log_density.unwrap_or(f32::NAN),
            has_log_density: g.log_density.is_some(),
            in_distribution: g.in_distribution,
        };
        // SAFETY: forwarded contract.
        unsafe { put(gated_out, gated) }
    })
}

/// `log p(s)` under the density gate into `*log_density_out` (NaN without a gate), and
/// whether `s` passes the gate (`log p(s) >= density_threshold`, always true without
/// one) into `*in_distribution_out`. Either output may be NULL when not wanted. Needs
/// no scratch.
///
/// # Safety
///
/// `model` is NULL or points to a readable [`laq_model`]; `obs` is NULL or points to
/// `obs_len` readable floats; each output is NULL or points to a writable value of its
/// type.
#[no_mangle]
pub unsafe extern "C" fn laq_log_density(
    model: *const laq_model,
    obs: *const f32,
    obs_len: usize,
    log_density_out: *mut f32,
    in_distribution_out: *mut bool,
) -> i32 {
    status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { loaded(model)? };
        // SAFETY: forwarded contract.
        let obs = unsafe { floats(obs, obs_len)? };
        let lp = m.log_density(obs).map_err(code)?;
        let inside = m.in_distribution(obs).map_err(code)?;
        if !log_density_out.is_null() {
            // SAFETY: forwarded contract.
            unsafe { put(log_density_out, lp.unwrap_or(f32::NAN))? };
        }
        if !in_distribution_out.is_null() {
            // SAFETY: forwarded contract.
            unsafe { put(in_distribution_out, inside)? };
        }
        Ok(())
    })
}

/// The potential-based shaped reward `reward + gamma * V(next) - V(obs)` into
/// `*shaped_out`, with `V(next) = 0` when `terminal` and the density gate applied to
/// both values. `obs` and `next` each hold `obs_len` floats; a non-finite `reward` is
/// [`LAQ_ERR_INVALID_ARGUMENT`].
///
/// # Safety
///
/// As for [`laq_value`]; `next` is NULL or points to `obs_len` readable floats;
/// `shaped_out` is NULL or points to a writable float.
#[no_mangle]
pub unsafe extern "C" fn laq_shaped_reward(
    model: *const laq_model,
    obs: *const f32,
    reward: f32,
    terminal: bool,
    next: *const f32,
    obs_len: usize,
    scratch: *mut f32,
    scratch_len: usize,
    shaped_out: *mut f32,
) -> i32 {
    status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { loaded(model)? };
        // SAFETY: forwarded contract.
        let obs = unsafe { floats(obs, obs_len)? };
        // SAFETY: forwarded contract.
        let next = unsafe { floats(next, obs_len)? };
        // SAFETY: forwarded contract.
        let scratch = unsafe { floats_mut(scratch, scratch_len, &[obs, next])? };
        let outcome = Outcome { reward, terminal };
        let r = m.shaped_reward(obs, outcome, next, scratch).map_err(code)?;
        // SAFETY: forwarded contract.
        unsafe { put(shaped_out, r) }
    })
}

/// Picks the best of `count` candidate next states by `reward + gamma * V(next)`:
/// [`laq_select_report`] without terminal flags or report.
///
/// `candidates` holds `count` states of `obs_len` floats, one after the other (row
/// major); `rewards` holds `count` rewards, or is NULL for all zero (the ranking is
/// then by `V`). The index of the winner goes to `*best_out`.
///
/// # Safety
///
/// As for [`laq_select_report`].
#[no_mangle]
pub unsafe extern "C" fn laq_select(
    model: *const laq_model,
    candidates: *const f32,
    count: usize,
    obs_len: usize,
    rewards: *const f32,
    scratch: *mut f32,
    scratch_len: usize,
    best_out: *mut usize,
) -> i32 {
    // SAFETY: forwarded contract; the optional pointers are NULL.
    unsafe {
        laq_select_report(
            model,
            candidates,
            count,
            obs_len,
            rewards,
            ptr::null(),
            scratch,
            scratch_len,
            ptr::null_mut(),
            0,
            best_out,
        )
    }
}

/// Picks the best of `count` candidate next states (e.g. the states that each of a
/// set of controllers predicts) by `reward + gamma * V(next)`, as the runtime's
/// `Model::select`: `V := 0` for a terminal state; a candidate that is NaN/infinite
/// (or whose reward is) or that fails the density gate never wins; ties go to the
/// lowest index. The winner's index goes to `*best_out`; with no valid candidate the
/// result is [`LAQ_ERR_NO_VALID_CANDIDATE`].
///
/// `candidates` holds `count` states of `obs_len` floats, row after row. `rewards`
/// (`count` floats) and `terminal` (`count` flags) may be NULL for all zero and all
/// false. `report` (`report_len >= count` entries) may be NULL; otherwise every
/// candidate's [`laq_candidate`] is written to it.
///
/// # Safety
///
/// `model` is NULL or points to a readable [`laq_model`]; `candidates` is NULL or
/// points to `count * obs_len` readable floats; `rewards` and `terminal` are NULL or
/// point to `count` readable values; `scratch` is NULL or points to `scratch_len`
/// writable floats; `report` is NULL or points to `report_len` writable entries;
/// `best_out` is NULL or points to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn laq_select_report(
    model: *const laq_model,
    candidates: *const f32,
    count: usize,
    obs_len: usize,
    rewards: *const f32,
    terminal: *const bool,
    scratch: *mut f32,
    scratch_len: usize,
    report: *mut laq_candidate,
    report_len: usize,
    best_out: *mut usize,
) -> i32 {
    status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { loaded(model)? };
        if best_out.is_null() {
            return Err(LAQ_ERR_NULL);
        }
        let total = count.checked_mul(obs_len).ok_or(LAQ_ERR_INVALID_ARGUMENT)?;
        // SAFETY: forwarded contract.
        let table = unsafe { floats(candidates, total)? };
        let rewards = if rewards.is_null() {
            None
        } else {
            // SAFETY: forwarded contract.
            Some(unsafe { floats(rewards, count)? })
        };
        let terminal = if terminal.is_null() {
            None
        } else if count > isize::MAX as usize {
            return Err(LAQ_ERR_INVALID_ARGUMENT);
        } else {
            // SAFETY: non-null, alignment 1, within `isize::MAX` bytes, readable
            // (contract). Read as bytes: any non-zero byte is true, so that a flag that
            // is not exactly 0 or 1 cannot make an invalid Rust `bool`.
            Some(unsafe { core::slice::from_raw_parts(terminal.cast::<u8>(), count) })
        };
        let others: [&[f32]; 2] = [table, rewards.unwrap_or(&[])];
        // SAFETY: forwarded contract.
        let scratch = unsafe { floats_mut(scratch, scratch_len, &others)? };
        // SAFETY: forwarded contract.
        let report = unsafe { report_entries(report, report_len, count)? };
        if obs_len != m.input_dim() {
            return Err(LAQ_ERR_STATE_LENGTH);
        }
        if scratch.len() < m.scratch_len() {
            return Err(LAQ_ERR_BUFFER_TOO_SMALL);
        }
        let mut best: Option<(usize, f32)> = None;
        let mut report = report;
        for i in 0..count {
            let start = i.saturating_mul(obs_len);
            let next = table
                .get(start..start.saturating_add(obs_len))
                .ok_or(LAQ_ERR_INVALID_ARGUMENT)?;
            let outcome = Outcome {
                reward: rewards.and_then(|r| r.get(i)).copied().unwrap_or(0.0),
                terminal: terminal.and_then(|t| t.get(i)).is_some_and(|&t| t != 0),
            };
            let c = score(m, next, outcome, scratch);
            if let Some(slot) = report.as_mut().and_then(|r| r.get_mut(i)) {
                *slot = c;
            }
            if c.status == laq_status::LAQ_STATUS_VALID && best.is_none_or(|(_, s)| c.score > s) {
                best = Some((i, c.score));
            }
        }
        let (best, _) = best.ok_or(LAQ_ERR_NO_VALID_CANDIDATE)?;
        // SAFETY: forwarded contract.
        unsafe { put(best_out, best) }
    })
}

/// Most controllers [`laq_select_ahead`] takes (more is [`LAQ_ERR_INVALID_ARGUMENT`]):
/// without a heap, the C layer keeps a controller and a report entry on the stack for
/// each of this many, 40 bytes a pair on a 32-bit target (52 on a 64-bit one).
pub const LAQ_MAX_CONTROLLERS: usize = 64;

/// Most controllers in a sequence that [`laq_select_ahead`] plans (its `depth`): the
/// runtime's `MAX_LOOKAHEAD`. With 8 controllers, 8^4 = 4096 sequences.
pub const LAQ_MAX_LOOKAHEAD: usize = 4;

const _: () = assert!(LAQ_MAX_LOOKAHEAD == laq_runtime::MAX_LOOKAHEAD);

/// A controller's prediction for [`laq_select_ahead`]: from `state` (`obs_len`
/// floats), the state that controller number `controller` leads to, written to `next`
/// (`obs_len` floats, never overlapping `state`), with the step's reward in `*reward`
/// and whether `next` is terminal in `*terminal` (preset to 0 and false). `context` is
/// the pointer given to `laq_select_ahead`, passed on untouched.
///
/// Returns 0, or any other value when the controller is unavailable from `state` (its
/// sequences then end there, as with a runtime controller that fails). `state` and
/// `next` lie in the caller's state or scratch: the function must not keep them, nor
/// touch the scratch or report buffers of the call it serves.
pub type laq_predict_fn = Option<
    unsafe extern "C" fn(
        context: *mut c_void,
        controller: usize,
        state: *const f32,
        next: *mut f32,
        obs_len: usize,
        reward: *mut f32,
        terminal: *mut bool,
    ) -> i32,
>;

/// Controller `index` of a [`laq_select_ahead`] call: its C function (checked for NULL
/// by the call) and context.
struct Callback {
    index: usize,
    predict: laq_predict_fn,
    context: *mut c_void,
}

impl Controller for Callback {
    fn predict(&self, state: &[f32], next: &mut [f32]) -> core::result::Result<Outcome, Error> {
        if state.len() != next.len() {
            return Err(Error::StateLength);
        }
        let Some(predict) = self.predict else {
            return Err(Error::Controller);
        };
        let mut reward = 0.0f32;
        // A byte rather than a `bool`, so that a flag written as anything but 0 or 1
        // cannot make an invalid Rust `bool`.
        let mut terminal = 0u8;
        // SAFETY: `state` and `next` are valid for `next.len()` floats (reading and
        // writing) and do not overlap (the runtime's slices); `reward` and `terminal`
        // are live locals of the sizes the C types have; `predict` and `context` are
        // the caller's, whose contract (`laq_select_ahead`) is that the function reads
        // and writes only those.
        let rc = unsafe {
            predict(
                self.context,
                self.index,
                state.as_ptr(),
                next.as_mut_ptr(),
                next.len(),
                &mut reward,
                ptr::addr_of_mut!(terminal).cast::<bool>(),
            )
        };
        if rc != 0 {
            return Err(Error::Controller);
        }
        Ok(Outcome {
            reward,
            terminal: terminal != 0,
        })
    }
}

/// Floats of scratch that [`laq_select_ahead`] needs for sequences of `depth`
/// controllers: one predicted state per step before the last, then what
/// [`laq_scratch_len`] gives (0 if `model` holds none).
///
/// # Safety
///
/// `model` is NULL or points to a readable [`laq_model`].
#[no_mangle]
pub unsafe extern "C" fn laq_lookahead_scratch_len(model: *const laq_model, depth: usize) -> usize {
    // SAFETY: forwarded contract.
    unsafe { loaded(model) }.map_or(0, |m| m.lookahead_scratch_len(depth))
}

/// Picks the first of `count` controllers by looking `depth` steps ahead, as the
/// runtime's `Model::select_ahead`: every sequence of `depth` controllers from `state`
/// (each predicting from the state the previous one predicted, through `predict`)
/// scores `r1 + gamma * (r2 + gamma * (... + gamma * V(s_depth)))`; a terminal
/// prediction ends its sequence (its score is then the rewards so far). The first
/// controller of the best sequence goes to `*best_out`; ties go to the lowest index.
/// With `depth` 1 this is [`laq_select_report`] on the states the controllers predict.
///
/// A step whose controller is unavailable (`predict` returns non-zero), whose
/// prediction is NaN/infinite or that fails the density gate ends no sequence. The cost
/// is `count^depth` evaluations of V at most.
///
/// `state` holds `obs_len` floats; `count` is at most [`LAQ_MAX_CONTROLLERS`];
/// `context` is passed to every call of `predict` (it may be NULL). `scratch` holds at
/// least [`laq_lookahead_scratch_len`] floats for this `depth` and must not overlap
/// `state`. `report` (`report_len >= count` entries) may be NULL; otherwise
/// `report[i]` describes controller `i` as the first step: its status and outcome as in
/// [`laq_select_report`], its `value` the best score of the sequences that continue
/// from its predicted state, its `score` `reward + gamma * value`; a first step from
/// which no sequence continues is [`laq_status::LAQ_STATUS_FAILED`].
///
/// Returns 0, [`LAQ_ERR_NULL`] (`model`, `state`, `predict`, `scratch` or `best_out`
/// NULL), [`LAQ_ERR_INVALID_ARGUMENT`] (`depth` 0 or above [`LAQ_MAX_LOOKAHEAD`],
/// `count` above [`LAQ_MAX_CONTROLLERS`], overlapping or misaligned buffers),
/// [`LAQ_ERR_STATE_LENGTH`], [`LAQ_ERR_NON_FINITE_STATE`], [`LAQ_ERR_BUFFER_TOO_SMALL`]
/// (scratch or report), or [`LAQ_ERR_NO_VALID_CANDIDATE`] if no sequence scores (the
/// report is then written all the same).
///
/// # Safety
///
/// `model` is NULL or points to a readable [`laq_model`]; `state` is NULL or points to
/// `obs_len` readable floats; `predict` is NULL or a function that behaves as
/// [`laq_predict_fn`] describes, given `context`; `scratch` is NULL or points to
/// `scratch_len` writable floats; `report` is NULL or points to `report_len` writable
/// entries; `best_out` is NULL or points to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn laq_select_ahead(
    model: *const laq_model,
    state: *const f32,
    obs_len: usize,
    count: usize,
    predict: laq_predict_fn,
    context: *mut c_void,
    depth: usize,
    scratch: *mut f32,
    scratch_len: usize,
    report: *mut laq_candidate,
    report_len: usize,
    best_out: *mut usize,
) -> i32 {
    status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { loaded(model)? };
        if predict.is_none() || best_out.is_null() {
            return Err(LAQ_ERR_NULL);
        }
        // SAFETY: forwarded contract.
        let state = unsafe { floats(state, obs_len)? };
        // SAFETY: forwarded contract.
        let scratch = unsafe { floats_mut(scratch, scratch_len, &[state])? };
        // SAFETY: forwarded contract.
        let report = unsafe { report_entries(report, report_len, count)? };
        let controllers: [Callback; LAQ_MAX_CONTROLLERS] = core::array::from_fn(|index| Callback {
            index,
            predict,
            context,
        });
        let controllers = controllers.get(..count).ok_or(LAQ_ERR_INVALID_ARGUMENT)?;
        let mut candidates = [Candidate::default(); LAQ_MAX_CONTROLLERS];
        let candidates = candidates
            .get_mut(..count)
            .ok_or(LAQ_ERR_INVALID_ARGUMENT)?;
        let result = m.select_ahead(state, controllers, depth, scratch, candidates);
        // The report of a search that ran, lost or won; other errors leave it alone.
        if matches!(result, Ok(_) | Err(Error::NoValidCandidate)) {
            for (slot, c) in report.into_iter().flatten().zip(candidates.iter()) {
                *slot = reported(c);
            }
        }
        let best = result.map_err(code)?;
        // SAFETY: forwarded contract.
        unsafe { put(best_out, best) }
    })
}

/// The C report of a runtime candidate.
fn reported(c: &Candidate) -> laq_candidate {
    laq_candidate {
        status: match c.status {
            Status::Valid => laq_status::LAQ_STATUS_VALID,
            Status::NonFinite => laq_status::LAQ_STATUS_NON_FINITE,
            Status::OutOfDistribution => laq_status::LAQ_STATUS_OUT_OF_DISTRIBUTION,
            Status::Failed => laq_status::LAQ_STATUS_FAILED,
        },
        reward: c.outcome.reward,
        terminal: c.outcome.terminal,
        value: c.value,
        log_density: c.log_density.unwrap_or(f32::NAN),
        score: c.score,
    }
}

/// Scores one candidate with the runtime's own selection (so the rules are the
/// runtime's): a one-row table whose predicted state also serves as the current state,
/// which a table of predictions never reads; `Model::select` only checks that it is a
/// finite state of the right length, which a scorable candidate is anyway.
fn score(m: &Model<'_>, next: &[f32], outcome: Outcome, scratch: &mut [f32]) -> laq_candidate {
    let c = laq_candidate {
        status: laq_status::LAQ_STATUS_NON_FINITE,
        reward: outcome.reward,
        terminal: outcome.terminal,
        value: f32::NAN,
        log_density: f32::NAN,
        score: f32::NAN,
    };
    if next.len() != m.input_dim() || !next.iter().all(|v| v.is_finite()) {
        return c;
    }
    let row = [Predicted { next, outcome }];
    let mut one = [Candidate::default()];
    // Any error leaves the report as the runtime filled it (an invalid candidate).
    let _ = m.select(next, &row, scratch, &mut one);
    let [r] = one;
    // The reward and flag as given, also for a candidate the runtime did not score.
    laq_candidate {
        reward: outcome.reward,
        terminal: outcome.terminal,
        ..reported(&r)
    }
}

/// A static, NUL-terminated description of `code` (never NULL): the runtime's message
/// for `-1..=-20`, the C layer's for its own codes, "success" for 0 and "unknown error
/// code" for anything else.
#[no_mangle]
pub extern "C" fn laq_error_str(code: i32) -> *const c_char {
    message(code).as_ptr()
}

/// The message of a code; for the runtime's errors the runtime's own text (a test
/// checks that they agree).
fn message(code: i32) -> &'static CStr {
    let Some(code) = laq_error::from_i32(code) else {
        return c"unknown error code";
    };
    match code {
        LAQ_OK => c"success",
        LAQ_ERR_TRUNCATED => c"file shorter than its header claims",
        LAQ_ERR_HEADER_TOO_LONG => c"header longer than the loader's cap",
        LAQ_ERR_INVALID_JSON => c"header is not a valid safetensors JSON header",
        LAQ_ERR_INVALID_DTYPE => c"tensor has a dtype the format does not allow",
        LAQ_ERR_INVALID_SHAPE => c"tensor shape inconsistent with the model",
        LAQ_ERR_INVALID_OFFSETS => c"tensor data offsets invalid, overlapping or out of bounds",
        LAQ_ERR_DUPLICATE_TENSOR => c"tensor or metadata given twice",
        LAQ_ERR_MISSING_TENSOR => c"required tensor missing",
        LAQ_ERR_UNKNOWN_TENSOR => c"tensor name not defined by the format",
        #[cfg(all(feature = "images", feature = "int8"))]
        LAQ_ERR_UNSUPPORTED_FORMAT => c"not a laq-value version 1 or 2 file",
        #[cfg(all(not(feature = "images"), feature = "int8"))]
        LAQ_ERR_UNSUPPORTED_FORMAT => {
            c"not a laq-value version 1 file (version 2, image models, needs the `images` feature)"
        }
        #[cfg(all(feature = "images", not(feature = "int8")))]
        LAQ_ERR_UNSUPPORTED_FORMAT => {
            c"not a laq-value version 1 or 2 file without int8 layers (they need the `int8` feature)"
        }
        #[cfg(not(any(feature = "images", feature = "int8")))]
        LAQ_ERR_UNSUPPORTED_FORMAT => {
            c"not a laq-value version 1 file without int8 layers (version 2, image models, needs the `images` feature; int8 layers the `int8` feature)"
        }
        LAQ_ERR_INVALID_METADATA => c"required metadata missing or invalid",
        LAQ_ERR_NON_FINITE => c"tensor contains NaN or infinity",
        LAQ_ERR_INVALID_DENSITY => c"density gate parameters invalid",
        LAQ_ERR_STATE_LENGTH => c"state has the wrong length",
        LAQ_ERR_BUFFER_TOO_SMALL => c"caller-provided buffer too small",
        LAQ_ERR_NON_FINITE_STATE => c"state contains NaN or infinity",
        LAQ_ERR_NON_FINITE_OUTPUT => c"evaluation overflowed",
        LAQ_ERR_INVALID_ARGUMENT => c"argument out of range",
        LAQ_ERR_NO_VALID_CANDIDATE => c"no valid controller candidate",
        LAQ_ERR_CONTROLLER => c"controller failed to predict",
        LAQ_ERR_NULL => c"a required pointer is NULL",
        LAQ_ERR_NOT_LOADED => c"the handle holds no model (laq_model_init did not accept one)",
        LAQ_ERR_UNKNOWN => c"error unknown to this interface",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use std::string::ToString;

    const ERRORS: [Error; 20] = [
        Error::Truncated,
        Error::HeaderTooLong,
        Error::InvalidJson,
        Error::InvalidDtype,
        Error::InvalidShape,
        Error::InvalidOffsets,
        Error::DuplicateTensor,
        Error::MissingTensor,
        Error::UnknownTensor,
        Error::UnsupportedFormat,
        Error::InvalidMetadata,
        Error::NonFinite,
        Error::InvalidDensity,
        Error::StateLength,
        Error::BufferTooSmall,
        Error::NonFiniteState,
        Error::NonFiniteOutput,
        Error::InvalidArgument,
        Error::NoValidCandidate,
        Error::Controller,
    ];

    #[test]
    fn codes_are_the_runtime_errors_in_order_with_its_messages() {
        for (i, e) in ERRORS.iter().enumerate() {
            assert_eq!(code(*e) as i32, -(i as i32) - 1, "{e:?}");
            assert_eq!(
                message(code(*e) as i32).to_str().unwrap(),
                e.to_string(),
                "{e:?}"
            );
            assert_eq!(e.is_file_error(), i < 13, "{e:?}");
        }
    }

    #[test]
    fn handle_fits() {
        // Also asserted at compile time; this reports the margin when it shrinks.
        assert!(
            size_of::<Handle>() <= LAQ_MODEL_SIZE,
            "{}",
            size_of::<Handle>()
        );
    }
}
