//! The one error type of the crate.

use core::fmt;

/// Everything that can go wrong, in one small `Copy` enum.
///
/// The variants up to [`Error::InvalidDensity`] describe a bad model file and are only
/// returned by [`Model::new_checked`](crate::Model::new_checked) (and
/// `OwnedModel::from_vec` with the `alloc` feature). Once a file
/// has been accepted, evaluation can only fail because of the caller's input: the
/// remaining variants.
///
/// ```
/// use laq_runtime::{Error, Model};
///
/// assert_eq!(Model::new_checked(&[0u8; 4]).err(), Some(Error::Truncated));
/// assert_eq!(Error::Truncated.to_string(), "file shorter than its header claims");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// The file is shorter than 8 bytes, or the header runs past its end.
    Truncated,
    /// The header is longer than [`MAX_HEADER_LEN`](crate::MAX_HEADER_LEN).
    HeaderTooLong,
    /// The header is not UTF-8, not JSON, or not a safetensors header.
    InvalidJson,
    /// A tensor has a dtype this format does not allow for it.
    InvalidDtype,
    /// A tensor's shape disagrees with the metadata or with the other tensors (e.g. a
    /// layer's inputs are not the previous layer's outputs, or a convolution has more
    /// than [`MAX_CHANNELS`](crate::MAX_CHANNELS) output channels).
    InvalidShape,
    /// Data offsets are reversed, run past the data section, overlap, or do not match
    /// the tensor's shape and dtype.
    InvalidOffsets,
    /// A tensor (or the metadata) appears twice in the header.
    DuplicateTensor,
    /// A required tensor is missing.
    MissingTensor,
    /// A tensor name that the format does not define (or not for this file's
    /// `num_layers`, `num_conv` or weight dtypes).
    UnknownTensor,
    /// `format` is not `laq-value` or `version` is neither `1` nor `2` (or either is
    /// missing); without the `images` feature also an image model (`version` `2`, or
    /// any file with a `conv.*` tensor), without the `int8` feature a file with int8
    /// weights.
    UnsupportedFormat,
    /// Required metadata is missing or has an invalid value (e.g. an image model's
    /// `input_shape` too small for `num_conv` halvings, or an
    /// `input_dim` other than `C * H * W`).
    InvalidMetadata,
    /// A tensor contains NaN or an infinity.
    NonFinite,
    /// The density gate is inconsistent: a variance is not positive, a mixture weight is
    /// negative or the weights do not sum to 1, or `density.dims` indexes past the state.
    InvalidDensity,
    /// The state (or predicted state) has the wrong length.
    StateLength,
    /// A caller-provided buffer (scratch or report) is too small.
    BufferTooSmall,
    /// The state contains NaN or an infinity.
    NonFiniteState,
    /// Evaluation overflowed to a non-finite value (the input is far out of range).
    NonFiniteOutput,
    /// An argument is out of range (e.g. a non-finite or negative discount).
    InvalidArgument,
    /// Controller selection found no candidate that is valid.
    NoValidCandidate,
    /// A user [`Controller`](crate::Controller) failed to predict.
    Controller,
}

impl Error {
    /// Whether this error describes a bad model file (as opposed to bad caller input).
    ///
    /// ```
    /// use laq_runtime::Error;
    ///
    /// assert!(Error::NonFinite.is_file_error());
    /// assert!(!Error::StateLength.is_file_error());
    /// ```
    pub const fn is_file_error(self) -> bool {
        matches!(
            self,
            Error::Truncated
                | Error::HeaderTooLong
                | Error::InvalidJson
                | Error::InvalidDtype
                | Error::InvalidShape
                | Error::InvalidOffsets
                | Error::DuplicateTensor
                | Error::MissingTensor
                | Error::UnknownTensor
                | Error::UnsupportedFormat
                | Error::InvalidMetadata
                | Error::NonFinite
                | Error::InvalidDensity
        )
    }

    const fn message(self) -> &'static str {
        match self {
            Error::Truncated => "file shorter than its header claims",
            Error::HeaderTooLong => "header longer than the loader's cap",
            Error::InvalidJson => "header is not a valid safetensors JSON header",
            Error::InvalidDtype => "tensor has a dtype the format does not allow",
            Error::InvalidShape => "tensor shape inconsistent with the model",
            Error::InvalidOffsets => "tensor data offsets invalid, overlapping or out of bounds",
            Error::DuplicateTensor => "tensor or metadata given twice",
            Error::MissingTensor => "required tensor missing",
            Error::UnknownTensor => "tensor name not defined by the format",
            #[cfg(all(feature = "images", feature = "int8"))]
            Error::UnsupportedFormat => "not a laq-value version 1 or 2 file",
            #[cfg(all(not(feature = "images"), feature = "int8"))]
            Error::UnsupportedFormat => {
                "not a laq-value version 1 file (version 2, image models, needs the `images` feature)"
            }
            #[cfg(all(feature = "images", not(feature = "int8")))]
            Error::UnsupportedFormat => {
                "not a laq-value version 1 or 2 file without int8 layers (they need the `int8` feature)"
            }
            #[cfg(not(any(feature = "images", feature = "int8")))]
            Error::UnsupportedFormat => {
                "not a laq-value version 1 file without int8 layers (version 2, image models, needs the `images` feature; int8 layers the `int8` feature)"
            }
            Error::InvalidMetadata => "required metadata missing or invalid",
            Error::NonFinite => "tensor contains NaN or infinity",
            Error::InvalidDensity => "density gate parameters invalid",
            Error::StateLength => "state has the wrong length",
            Error::BufferTooSmall => "caller-provided buffer too small",
            Error::NonFiniteState => "state contains NaN or infinity",
            Error::NonFiniteOutput => "evaluation overflowed",
            Error::InvalidArgument => "argument out of range",
            Error::NoValidCandidate => "no valid controller candidate",
            Error::Controller => "controller failed to predict",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl core::error::Error for Error {}
