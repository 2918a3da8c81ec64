//! The `laq-value` model format, spelled once: its name, versions, metadata keys and
//! values, tensor names, heads and convolution geometry (`docs/model-format.md`
//! describes the format in full).
//!
//! Readers parse with the `parse` functions (the runtime's loader does), writers emit
//! with `as_str`/`name` and [`Display`](core::fmt::Display), so that a writer and the
//! runtime cannot disagree on a spelling:
//!
//! ```
//! use laq_runtime::format::{self, Head, MetaKey, TensorName, Version};
//!
//! // What a writer puts into the header...
//! let name = format!("{}", TensorName::LayerWeight(3));
//! let metadata = [
//!     (MetaKey::Format.as_str(), format::NAME),
//!     (MetaKey::Version.as_str(), Version::FullyConnected.as_str()),
//!     (MetaKey::Activation.as_str(), format::RELU),
//!     (MetaKey::Head.as_str(), Head::MaxQ.name()),
//! ];
//! // ...is what a reader recognises.
//! assert_eq!(TensorName::parse(name.as_bytes()), Some(TensorName::LayerWeight(3)));
//! assert_eq!(MetaKey::parse(metadata[3].0.as_bytes()), Some(MetaKey::Head));
//! assert_eq!(Head::parse(metadata[3].1.as_bytes()), Some(Head::MaxQ));
//! ```
//!
//! Every `parse` compares bytes exactly: no whitespace, no case folding and no JSON
//! escapes (the loader hands it the raw bytes between the quotes).

use core::fmt;

use crate::limits::{MAX_CONV_LAYERS, MAX_LAYERS};

/// The value of the `format` metadata key ([`MetaKey::Format`]).
///
/// ```
/// assert_eq!(laq_runtime::format::NAME, "laq-value");
/// ```
pub const NAME: &str = "laq-value";

/// The value of the `activation` metadata key ([`MetaKey::Activation`]), the only
/// activation the format has: ReLU after every linear layer but the last, and after
/// every convolution.
///
/// ```
/// assert_eq!(laq_runtime::format::RELU, "relu");
/// ```
pub const RELU: &str = "relu";

/// Height and width of a convolution's kernel in an image model (version 2).
///
/// ```
/// use laq_runtime::format::{CONV_KERNEL, CONV_PADDING, CONV_STRIDE};
///
/// // A 4x4 kernel with stride 2 and one pixel of zero padding halves an even side.
/// let side = 32;
/// assert_eq!((side + 2 * CONV_PADDING - CONV_KERNEL) / CONV_STRIDE + 1, side / 2);
/// ```
pub const CONV_KERNEL: usize = 4;

/// Stride of a convolution in an image model: each halves the height and width.
///
/// ```
/// assert_eq!(laq_runtime::format::CONV_STRIDE, 2);
/// ```
pub const CONV_STRIDE: usize = 2;

/// Zero padding of a convolution in an image model, in pixels on every side.
///
/// ```
/// assert_eq!(laq_runtime::format::CONV_PADDING, 1);
/// ```
pub const CONV_PADDING: usize = 1;

/// `a == b` for byte strings, as one small loop shared by every name, key and value
/// comparison (slice `==` and byte-string patterns each call `memcmp`, which the
/// target then has to link).
#[inline(never)]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Whether a tensor name starts like a convolution's (`conv.`), whatever follows.
#[cfg(not(feature = "images"))]
pub(crate) fn is_conv(name: &[u8]) -> bool {
    strip(name, CONV).is_some()
}

/// `bytes` without `prefix`, or `None` if it does not start with it.
fn strip<'b>(bytes: &'b [u8], prefix: &str) -> Option<&'b [u8]> {
    let (head, rest) = bytes.split_at_checked(prefix.len())?;
    same(head, prefix.as_bytes()).then_some(rest)
}

/// The format's versions, the value of the `version` metadata key
/// ([`MetaKey::Version`]).
///
/// ```
/// use laq_runtime::format::Version;
///
/// assert_eq!(Version::Image.as_str(), "2");
/// assert_eq!(Version::parse(b"1"), Some(Version::FullyConnected));
/// assert_eq!(Version::parse(b"3"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Version {
    /// Version 1: a fully connected network on a state vector.
    FullyConnected,
    /// Version 2: an image model, convolutions on the image before the linear layers
    /// (read by the runtime with its `images` feature).
    Image,
}

impl Version {
    /// Every version, oldest first.
    ///
    /// ```
    /// use laq_runtime::format::Version;
    ///
    /// assert_eq!(Version::ALL.map(Version::number), [1, 2]);
    /// ```
    pub const ALL: [Version; 2] = [Version::FullyConnected, Version::Image];

    /// The version number.
    ///
    /// ```
    /// assert_eq!(laq_runtime::format::Version::FullyConnected.number(), 1);
    /// ```
    pub const fn number(self) -> u32 {
        match self {
            Version::FullyConnected => 1,
            Version::Image => 2,
        }
    }

    /// The metadata value: the version number in decimal.
    ///
    /// ```
    /// assert_eq!(laq_runtime::format::Version::Image.as_str(), "2");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Version::FullyConnected => "1",
            Version::Image => "2",
        }
    }

    /// The version a metadata value names (exactly `1` or `2`).
    ///
    /// ```
    /// use laq_runtime::format::Version;
    ///
    /// assert_eq!(Version::parse(b"2"), Some(Version::Image));
    /// assert_eq!(Version::parse(b"02"), None);
    /// ```
    pub fn parse(value: &[u8]) -> Option<Self> {
        match value {
            [b'1'] => Some(Version::FullyConnected),
            [b'2'] => Some(Version::Image),
            _ => None,
        }
    }
}

impl fmt::Display for Version {
    /// Writes [`Version::as_str`].
    ///
    /// ```
    /// assert_eq!(laq_runtime::format::Version::Image.to_string(), "2");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the last layer's outputs `y` become the value `V(s)`: the value of the `head`
/// metadata key ([`MetaKey::Head`]). Also `laq_runtime::Head`.
///
/// ```
/// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
/// use laq_runtime::{Head, Model};
///
/// let model = Model::new_checked(bytes)?;
/// assert_eq!(model.head(), Head::MaxQ);
/// assert_eq!(model.head().name(), "max_q");
/// # Ok::<(), laq_runtime::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Head {
    /// `Q(s, k) = y_k`, `V(s) = max_k y_k`.
    MaxQ,
    /// `V(s) = 1 - ||y||_2`.
    OneNorm,
}

impl Head {
    /// Every head.
    ///
    /// ```
    /// use laq_runtime::Head;
    ///
    /// assert_eq!(Head::ALL.map(Head::name), ["max_q", "one_norm"]);
    /// ```
    pub const ALL: [Head; 2] = [Head::MaxQ, Head::OneNorm];

    /// The metadata value.
    ///
    /// ```
    /// assert_eq!(laq_runtime::Head::OneNorm.name(), "one_norm");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Head::MaxQ => "max_q",
            Head::OneNorm => "one_norm",
        }
    }

    /// The head a metadata value names.
    ///
    /// ```
    /// use laq_runtime::Head;
    ///
    /// assert_eq!(Head::parse(b"one_norm"), Some(Head::OneNorm));
    /// assert_eq!(Head::parse(b"max-q"), None);
    /// ```
    pub fn parse(value: &[u8]) -> Option<Self> {
        if same(value, Head::MaxQ.name().as_bytes()) {
            Some(Head::MaxQ)
        } else if same(value, Head::OneNorm.name().as_bytes()) {
            Some(Head::OneNorm)
        } else {
            None
        }
    }
}

impl fmt::Display for Head {
    /// Writes [`Head::name`].
    ///
    /// ```
    /// assert_eq!(laq_runtime::Head::MaxQ.to_string(), "max_q");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The metadata keys the format defines (`__metadata__`, every value a JSON string).
/// Other keys are free text, ignored by the runtime.
///
/// ```
/// use laq_runtime::format::MetaKey;
///
/// assert_eq!(MetaKey::DensityThreshold.as_str(), "density_threshold");
/// assert_eq!(MetaKey::parse(b"num_conv"), Some(MetaKey::NumConv));
/// assert_eq!(MetaKey::parse(b"labels"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MetaKey {
    /// `format`: [`NAME`]. Required.
    Format,
    /// `version`: a [`Version`]. Required.
    Version,
    /// `input_dim`: the length of a state (`C * H * W` for an image model). Required.
    InputDim,
    /// `num_layers`: the number of linear layers. Required.
    NumLayers,
    /// `activation`: [`RELU`]. Required.
    Activation,
    /// `head`: a [`Head`]. Required.
    Head,
    /// `gamma`: the discount used in training (default 1).
    Gamma,
    /// `density_threshold`: the log-density below which the gate rejects a state.
    /// Required with a density gate, and only with one.
    DensityThreshold,
    /// `num_conv`: the number of convolutions. Version 2 only, required there.
    NumConv,
    /// `input_shape`: `[C,H,W]` of the image. Version 2 only, required there.
    InputShape,
    /// `cost_per_step`: the cost `c < 0` a step of a log whose episodes end, where V is
    /// learned as the value above paying it for ever (1 one step from an end, 0 never
    /// ending); the return in the log's units is `c (1 - gamma V) / (1 - gamma)` at the
    /// file's `gamma`, which must then be below 1. Optional.
    CostPerStep,
}

impl MetaKey {
    /// Every key, in declaration order (`MetaKey::ALL[k as usize] == k`).
    ///
    /// ```
    /// use laq_runtime::format::MetaKey;
    ///
    /// assert_eq!(MetaKey::ALL.len(), 11);
    /// assert!(MetaKey::ALL.iter().enumerate().all(|(i, &k)| k as usize == i));
    /// ```
    pub const ALL: [MetaKey; 11] = [
        MetaKey::Format,
        MetaKey::Version,
        MetaKey::InputDim,
        MetaKey::NumLayers,
        MetaKey::Activation,
        MetaKey::Head,
        MetaKey::Gamma,
        MetaKey::DensityThreshold,
        MetaKey::NumConv,
        MetaKey::InputShape,
        MetaKey::CostPerStep,
    ];

    /// The key as written in the header.
    ///
    /// ```
    /// assert_eq!(laq_runtime::format::MetaKey::Gamma.as_str(), "gamma");
    /// ```
    pub fn as_str(self) -> &'static str {
        KEYS.get(self as usize).copied().unwrap_or_default()
    }

    /// The key a header key names (`None` for keys the format does not define).
    ///
    /// ```
    /// use laq_runtime::format::MetaKey;
    ///
    /// assert_eq!(MetaKey::parse(b"input_shape"), Some(MetaKey::InputShape));
    /// assert_eq!(MetaKey::parse(b"Input_shape"), None);
    /// ```
    pub fn parse(key: &[u8]) -> Option<Self> {
        MetaKey::index(key).and_then(|i| MetaKey::ALL.get(i).copied())
    }

    /// [`MetaKey::parse`] as the position in [`MetaKey::ALL`] (`k as usize`), which is
    /// all the loader needs.
    #[inline]
    pub(crate) fn index(key: &[u8]) -> Option<usize> {
        KEYS.iter().position(|k| same(k.as_bytes(), key))
    }
}

/// The spelling of each [`MetaKey`], in [`MetaKey::ALL`]'s order.
const KEYS: [&str; MetaKey::ALL.len()] = [
    "format",
    "version",
    "input_dim",
    "num_layers",
    "activation",
    "head",
    "gamma",
    "density_threshold",
    "num_conv",
    "input_shape",
    "cost_per_step",
];

impl fmt::Display for MetaKey {
    /// Writes [`MetaKey::as_str`].
    ///
    /// ```
    /// assert_eq!(laq_runtime::format::MetaKey::NumLayers.to_string(), "num_layers");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tensor names the format defines; no others are allowed. Layer indices run over
/// `0..num_layers` (below [`MAX_LAYERS`]), convolution indices over `0..num_conv`
/// (below [`MAX_CONV_LAYERS`]), written in decimal without leading zeros.
///
/// ```
/// use laq_runtime::format::TensorName;
///
/// assert_eq!(TensorName::ConvBias(1).to_string(), "conv.1.bias");
/// assert_eq!(TensorName::parse(b"layers.12.scale"), Some(TensorName::LayerScale(12)));
/// assert_eq!(TensorName::parse(b"layers.12.shift"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TensorName {
    /// `input.mean`: subtracted from the raw state (from each channel of an image).
    InputMean,
    /// `input.scale`: multiplies the state after the subtraction.
    InputScale,
    /// `layers.{i}.weight`: linear layer `i`'s `[out, in]` weights, F32 or I8.
    LayerWeight(u8),
    /// `layers.{i}.scale`: the per-row scales of linear layer `i`'s I8 weights.
    LayerScale(u8),
    /// `layers.{i}.bias`: linear layer `i`'s bias.
    LayerBias(u8),
    /// `conv.{i}.weight`: convolution `i`'s `[out, 16 * in]` weights (version 2).
    ConvWeight(u8),
    /// `conv.{i}.bias`: convolution `i`'s bias (version 2).
    ConvBias(u8),
    /// `density.weights`: the density gate's mixture weights.
    DensityWeights,
    /// `density.means`: the density gate's component means.
    DensityMeans,
    /// `density.variances`: the density gate's diagonal variances.
    DensityVariances,
    /// `density.dims`: the state dimensions the density gate reads (optional).
    DensityDims,
}

const INPUT_MEAN: &str = "input.mean";
const INPUT_SCALE: &str = "input.scale";
const DENSITY_WEIGHTS: &str = "density.weights";
const DENSITY_MEANS: &str = "density.means";
const DENSITY_VARIANCES: &str = "density.variances";
const DENSITY_DIMS: &str = "density.dims";
/// Prefix of a linear layer's tensors, before the index.
const LAYERS: &str = "layers.";
/// Prefix of a convolution's tensors, before the index.
const CONV: &str = "conv.";
const WEIGHT: &str = ".weight";
const SCALE: &str = ".scale";
const BIAS: &str = ".bias";

/// The names without an index (in the order of the loader's slots).
const FIXED: [&str; 6] = [
    INPUT_MEAN,
    INPUT_SCALE,
    DENSITY_WEIGHTS,
    DENSITY_MEANS,
    DENSITY_VARIANCES,
    DENSITY_DIMS,
];

/// The tensors [`FIXED`] names, in its order.
const FIXED_TENSORS: [TensorName; 6] = [
    TensorName::InputMean,
    TensorName::InputScale,
    TensorName::DensityWeights,
    TensorName::DensityMeans,
    TensorName::DensityVariances,
    TensorName::DensityDims,
];

/// The suffixes after a layer's index, in the order of [`parse_name`]'s part numbers.
const PARTS: [&str; 3] = [WEIGHT, SCALE, BIAS];

// `parse_name` reads convolution indices of one digit and layer indices of at most
// two digits, the second only after a 1.
const _: () = assert!(MAX_CONV_LAYERS <= 10 && MAX_LAYERS <= 20);

/// The one parser of tensor names. It finds what a name is made of and hands the parts
/// to the caller's constructors: `fixed(i)` for the `i`-th of [`FIXED`];
/// `layer(i, part)` for `layers.{i}` with `part` 0, 1 or 2 for `.weight`, `.scale` or
/// `.bias`; and, only if `conv`, `convolution(i, bias)` for `conv.{i}.weight` or
/// `.bias`. Indices are below [`MAX_LAYERS`] and [`MAX_CONV_LAYERS`].
///
/// [`TensorName::parse`] builds a [`TensorName`] with it; the loader builds its slot
/// index directly (no [`TensorName`] in between, which keeps the loader small), and,
/// without image models, passes `conv = false` and carries no code for convolutions.
#[inline(always)]
pub(crate) fn parse_name<T>(
    name: &[u8],
    conv: bool,
    fixed: impl FnOnce(usize) -> Option<T>,
    layer: impl FnOnce(usize, usize) -> Option<T>,
    convolution: impl FnOnce(usize, bool) -> Option<T>,
) -> Option<T> {
    if let Some(i) = FIXED.iter().position(|n| same(n.as_bytes(), name)) {
        return fixed(i);
    }
    if conv {
        if let Some(rest) = strip(name, CONV) {
            let [d @ b'0'..=b'9', suffix @ ..] = rest else {
                return None;
            };
            let i = usize::from(d - b'0');
            let bias = match PARTS.iter().position(|p| same(p.as_bytes(), suffix))? {
                0 => false,
                2 => true,
                _ => return None,
            };
            return if i < MAX_CONV_LAYERS {
                convolution(i, bias)
            } else {
                None
            };
        }
    }
    let rest = strip(name, LAYERS)?;
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let (index, suffix) = rest.split_at_checked(digits)?;
    // A decimal index without leading zeros.
    let i = match *index {
        [d] => usize::from(d - b'0'),
        [b'1', d] => 10 + usize::from(d - b'0'),
        _ => return None,
    };
    let part = PARTS.iter().position(|p| same(p.as_bytes(), suffix))?;
    if i < MAX_LAYERS {
        layer(i, part)
    } else {
        None
    }
}

impl TensorName {
    /// The tensor a header name names (`None` for names the format does not define,
    /// indices past [`MAX_LAYERS`] and [`MAX_CONV_LAYERS`] included).
    ///
    /// ```
    /// use laq_runtime::format::TensorName;
    ///
    /// assert_eq!(TensorName::parse(b"density.dims"), Some(TensorName::DensityDims));
    /// assert_eq!(TensorName::parse(b"conv.0.weight"), Some(TensorName::ConvWeight(0)));
    /// assert_eq!(TensorName::parse(b"conv.0.scale"), None);
    /// assert_eq!(TensorName::parse(b"layers.01.bias"), None);
    /// assert_eq!(TensorName::parse(b"layers.16.bias"), None);
    /// ```
    pub fn parse(name: &[u8]) -> Option<Self> {
        parse_name(
            name,
            true,
            |i| FIXED_TENSORS.get(i).copied(),
            |i, part| {
                let i = u8::try_from(i).ok()?;
                Some(match part {
                    0 => TensorName::LayerWeight(i),
                    1 => TensorName::LayerScale(i),
                    _ => TensorName::LayerBias(i),
                })
            },
            |i, bias| {
                let i = u8::try_from(i).ok()?;
                Some(if bias {
                    TensorName::ConvBias(i)
                } else {
                    TensorName::ConvWeight(i)
                })
            },
        )
    }
}

impl fmt::Display for TensorName {
    /// Writes the name as the header spells it.
    ///
    /// ```
    /// use laq_runtime::format::TensorName;
    ///
    /// assert_eq!(format!("{}", TensorName::LayerWeight(3)), "layers.3.weight");
    /// assert_eq!(TensorName::InputScale.to_string(), "input.scale");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TensorName::InputMean => f.write_str(INPUT_MEAN),
            TensorName::InputScale => f.write_str(INPUT_SCALE),
            TensorName::LayerWeight(i) => write!(f, "{LAYERS}{i}{WEIGHT}"),
            TensorName::LayerScale(i) => write!(f, "{LAYERS}{i}{SCALE}"),
            TensorName::LayerBias(i) => write!(f, "{LAYERS}{i}{BIAS}"),
            TensorName::ConvWeight(i) => write!(f, "{CONV}{i}{WEIGHT}"),
            TensorName::ConvBias(i) => write!(f, "{CONV}{i}{BIAS}"),
            TensorName::DensityWeights => f.write_str(DENSITY_WEIGHTS),
            TensorName::DensityMeans => f.write_str(DENSITY_MEANS),
            TensorName::DensityVariances => f.write_str(DENSITY_VARIANCES),
            TensorName::DensityDims => f.write_str(DENSITY_DIMS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes() {
        assert!(same(b"", b""));
        assert!(same(b"relu", b"relu"));
        assert!(!same(b"relu", b"rel"));
        assert!(!same(b"relu", b"relU"));
    }

    #[test]
    fn parser_without_convolutions() {
        let parts = |name: &[u8], conv| {
            parse_name(
                name,
                conv,
                |i| Some((0, i, 0)),
                |i, p| Some((1, i, p)),
                |i, b| Some((2, i, usize::from(b))),
            )
        };
        assert_eq!(parts(b"conv.0.weight", false), None);
        assert_eq!(parts(b"conv.3.bias", true), Some((2, 3, 1)));
        assert_eq!(parts(b"layers.2.scale", false), Some((1, 2, 1)));
        assert_eq!(parts(b"layers.12.bias", true), Some((1, 12, 2)));
        assert_eq!(parts(b"density.dims", false), Some((0, 5, 0)));
        for (i, name) in FIXED.iter().enumerate() {
            assert_eq!(parts(name.as_bytes(), true), Some((0, i, 0)));
            assert_eq!(
                TensorName::parse(name.as_bytes()),
                FIXED_TENSORS.get(i).copied()
            );
        }
    }
}
