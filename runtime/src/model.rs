//! The checked model view: loading (validation of the whole file) and evaluation.

use core::ops::{Deref, DerefMut};

use crate::json::{
    self, Dtype, Entry, RawStr, TensorInfo, SLOTS, SLOT_CONV, SLOT_DENSITY_DIMS,
    SLOT_DENSITY_MEANS, SLOT_DENSITY_VARIANCES, SLOT_DENSITY_WEIGHTS, SLOT_INPUT_MEAN,
    SLOT_INPUT_SCALE, SLOT_LAYERS,
};
use crate::kernels::{le_at, linear, F32s, Weights};
use crate::num::{parse_f32, parse_usize};
use crate::Error;

#[cfg(all(target_arch = "arm", target_abi = "eabihf"))]
use crate::arm::sqrtf;
#[cfg(not(all(target_arch = "arm", target_abi = "eabihf")))]
use libm::sqrtf;

/// The largest JSON header [`Model::new_checked`] accepts, in bytes (64 KiB).
///
/// A header of the format needs about 80 bytes per tensor plus the metadata; the
/// reference safetensors parser allows 100 MB, far too much to scan on a
/// microcontroller.
///
/// ```
/// assert_eq!(laq_runtime::MAX_HEADER_LEN, 65536);
/// ```
pub const MAX_HEADER_LEN: usize = 64 * 1024;

/// The most linear layers a model may have (`num_layers` is `1..=MAX_LAYERS`).
///
/// ```
/// assert_eq!(laq_runtime::MAX_LAYERS, 16);
/// ```
pub const MAX_LAYERS: usize = 16;

/// The largest state dimension of a fully connected model (`input_dim` is
/// `1..=MAX_INPUT_DIM`). An image model's state is its image, bounded by
/// [`MAX_IMAGE_SIDE`] and [`MAX_CHANNELS`] instead.
///
/// ```
/// assert_eq!(laq_runtime::MAX_INPUT_DIM, 1024);
/// ```
pub const MAX_INPUT_DIM: usize = 1024;

/// The most convolutional layers an image model may have (`num_conv` is
/// `1..=MAX_CONV_LAYERS`).
///
/// ```
/// assert_eq!(laq_runtime::MAX_CONV_LAYERS, 4);
/// ```
pub const MAX_CONV_LAYERS: usize = 4;

/// The largest height and width of an image model's input, in pixels.
///
/// ```
/// assert_eq!(laq_runtime::MAX_IMAGE_SIDE, 256);
/// ```
pub const MAX_IMAGE_SIDE: usize = 256;

/// The most channels of an image or of a convolution's output.
///
/// ```
/// assert_eq!(laq_runtime::MAX_CHANNELS, 256);
/// ```
pub const MAX_CHANNELS: usize = 256;

/// Height and width of a convolution's kernel (the stride is 2, the zero padding 1).
#[cfg(feature = "images")]
const KERNEL: usize = 4;

/// Tolerance on the sum of the density mixture weights (which must be 1).
const MIXTURE_SUM_TOLERANCE: f32 = 1e-3;

/// How the last layer's outputs `y` become the value `V(s)`.
///
/// ```
/// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
/// use laq_runtime::{Head, Model};
///
/// let model = Model::new_checked(bytes)?;
/// assert_eq!(model.head(), Head::MaxQ);
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

/// Shape and weight type of one linear layer.
///
/// ```
/// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
/// use laq_runtime::{LayerInfo, Model};
///
/// let model = Model::new_checked(bytes)?;
/// assert_eq!(model.layer(0), Some(LayerInfo { inputs: 2, outputs: 4, int8: false }));
/// # Ok::<(), laq_runtime::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LayerInfo {
    /// Input width (`in_i`).
    pub inputs: usize,
    /// Output width (`out_i`).
    pub outputs: usize,
    /// Whether the weights are I8 with per-output-channel scales.
    pub int8: bool,
}

/// Shape of one convolutional layer of an image model: a 4x4 kernel with stride 2 and
/// one pixel of zero padding, so the output map is `in_height / 2` by `in_width / 2`
/// pixels of `out_channels`, each followed by ReLU. Needs the `images` feature.
///
/// ```
/// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny_conv.safetensors"));
/// use laq_runtime::{ConvInfo, Model};
///
/// let model = Model::new_checked(bytes)?;
/// assert_eq!(
///     model.conv_layer(1),
///     Some(ConvInfo { in_channels: 2, out_channels: 3, in_height: 2, in_width: 2 })
/// );
/// # Ok::<(), laq_runtime::Error>(())
/// ```
#[cfg(feature = "images")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ConvInfo {
    /// Channels of the input map.
    pub in_channels: usize,
    /// Channels of the output map.
    pub out_channels: usize,
    /// Height of the input map in pixels.
    pub in_height: usize,
    /// Width of the input map in pixels.
    pub in_width: usize,
}

/// The result of [`Model::evaluate`].
///
/// ```
/// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
/// use laq_runtime::{Model, Scratch};
///
/// let model = Model::new_checked(bytes)?;
/// let mut scratch = Scratch::<16>::new();
/// let out = model.evaluate(&[1.0, 2.0], &mut scratch)?;
/// assert_eq!(out.outputs.len(), 3);
/// assert_eq!(out.best, Some(2));
/// assert_eq!(out.value, out.outputs[2]);
/// # Ok::<(), laq_runtime::Error>(())
/// ```
#[derive(Debug, PartialEq)]
pub struct Output<'s> {
    /// `V(s)` (not gated by the density).
    pub value: f32,
    /// The last layer's outputs: the Q values for [`Head::MaxQ`], `y` for
    /// [`Head::OneNorm`]. Borrowed from the scratch buffer.
    pub outputs: &'s [f32],
    /// For [`Head::MaxQ`], the index of the largest Q value (lowest index on ties).
    pub best: Option<usize>,
}

/// A value together with the density gate's verdict, from [`Model::gated_value`].
///
/// ```
/// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
/// use laq_runtime::{Model, Scratch};
///
/// let model = Model::new_checked(bytes)?;
/// let mut scratch = Scratch::<16>::new();
/// let far = model.gated_value(&[100.0, -100.0], &mut scratch)?;
/// assert!(!far.in_distribution);
/// assert_eq!(far.value, 0.0);
/// # Ok::<(), laq_runtime::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Gated {
    /// `V(s)`, or 0 when the state is out of distribution.
    pub value: f32,
    /// `V(s)` as evaluated, ignoring the gate.
    pub raw_value: f32,
    /// `log p(s)` under the density gate (`None` if the model has no gate).
    pub log_density: Option<f32>,
    /// `false` if `log p(s) < density_threshold`; always `true` without a gate.
    pub in_distribution: bool,
}

/// A fixed-size scratch buffer for evaluation, usable wherever `&mut [f32]` scratch is
/// asked for. `N` must be at least [`Model::scratch_len`], i.e.
/// `input_dim + max_i(in_i + out_i)` over the layers of a fully connected model (an
/// image model adds its patch buffer and feature maps, see [`Model::scratch_len`]).
///
/// ```
/// use laq_runtime::Scratch;
///
/// // A 2-64-64-8 MLP needs 2 + max(2 + 64, 64 + 64, 64 + 8) = 130.
/// let mut scratch = Scratch::<130>::new();
/// assert_eq!(scratch.len(), 130);
/// scratch[0] = 1.0;
/// ```
#[derive(Clone, Debug)]
pub struct Scratch<const N: usize> {
    buf: [f32; N],
}

impl<const N: usize> Scratch<N> {
    /// A zeroed buffer (usable in `static`s and `const`s).
    ///
    /// ```
    /// static mut SCRATCH: laq_runtime::Scratch<64> = laq_runtime::Scratch::new();
    /// ```
    pub const fn new() -> Self {
        Self { buf: [0.0; N] }
    }
}

impl<const N: usize> Default for Scratch<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Deref for Scratch<N> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.buf
    }
}

impl<const N: usize> DerefMut for Scratch<N> {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf
    }
}

/// Everything the loader learnt about a file: offsets of the tensors in the data
/// section and the dimensions. Independent of where the bytes live.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    /// Start of each present tensor in the data section.
    offsets: [u32; SLOTS],
    /// Bit `slot` set if the tensor is present (low and high words of a `u64`, so
    /// that `Layout` is only 4-aligned: the target then needs one `memclr` routine,
    /// shared with the scratch buffer's, instead of two).
    present: [u32; 2],
    /// The input width of the first linear layer (`input_dim`, or the flattened
    /// feature map of an image model), then the output width of each layer: layer `i`
    /// maps `widths[i]` inputs to `widths[i + 1]` outputs.
    widths: [u32; MAX_LAYERS + 1],
    // The image model's fields exist only with `images`: without them `Model` stays
    // as small as a fully connected model needs (it lives on the caller's stack).
    /// The state length `D` (`input_dim`).
    #[cfg(feature = "images")]
    dim: u32,
    /// Number of convolutional layers (0: a fully connected model).
    #[cfg(feature = "images")]
    conv: u8,
    /// Height and width of an image model's input.
    #[cfg(feature = "images")]
    image: [u16; 2],
    /// The image's channels, then the output channels of each convolution.
    #[cfg(feature = "images")]
    channels: [u16; MAX_CONV_LAYERS + 1],
    /// Length of the patch buffer at the start of the scratch: the largest
    /// convolution input patch, `16 * channels[i]` (0 without convolutions).
    #[cfg(feature = "images")]
    patch: u32,
    /// Bit `i` set if layer `i` has I8 weights.
    int8: u16,
    layers: u8,
    /// 1 for [`Head::OneNorm`], 0 for [`Head::MaxQ`]: a plain integer rather than the
    /// enum, so that `Model` has no niche (see [`Model`]'s `data`).
    one_norm: u8,
    /// `max_i(in_i + out_i)` along the chain of feature maps and layer outputs.
    act_len: u32,
    gamma: f32,
    threshold: f32,
    /// Number of mixture components `M` (0: no density gate).
    mixtures: u32,
    /// Number of gated dimensions `G`.
    gate_dims: u32,
    /// Start of the data section in the file.
    data_start: u32,
}

/// The metadata keys the format defines, in the order of [`Meta`]'s fields.
const META_KEYS: [&[u8]; 10] = [
    b"format",
    b"version",
    b"input_dim",
    b"num_layers",
    b"activation",
    b"head",
    b"gamma",
    b"density_threshold",
    b"num_conv",
    b"input_shape",
];

/// Raw values of the metadata keys the format defines (see [`META_KEYS`]).
#[derive(Default)]
struct Meta<'h> {
    values: [Option<RawStr<'h>>; 10],
}

impl<'h> Meta<'h> {
    fn set(&mut self, key: RawStr<'h>, value: RawStr<'h>) -> Result<(), Error> {
        let Some(field) = META_KEYS
            .iter()
            .position(|k| json::same(k, key.bytes()))
            .and_then(|i| self.values.get_mut(i))
        else {
            return Ok(());
        };
        if field.replace(value).is_some() {
            return Err(Error::DuplicateTensor);
        }
        Ok(())
    }

    fn get(&self, key: usize) -> Option<RawStr<'h>> {
        self.values.get(key).copied().flatten()
    }
}

const FORMAT: usize = 0;
const VERSION: usize = 1;
const INPUT_DIM: usize = 2;
const NUM_LAYERS: usize = 3;
const ACTIVATION: usize = 4;
const HEAD: usize = 5;
const GAMMA: usize = 6;
const THRESHOLD: usize = 7;
const NUM_CONV: usize = 8;
const INPUT_SHAPE: usize = 9;

fn meta_usize(
    value: Option<RawStr<'_>>,
    range: core::ops::RangeInclusive<usize>,
) -> Result<usize, Error> {
    value
        .and_then(|v| parse_usize(v.bytes()))
        .filter(|v| range.contains(v))
        .ok_or(Error::InvalidMetadata)
}

fn meta_f32(value: RawStr<'_>) -> Result<f32, Error> {
    parse_f32(value.bytes()).ok_or(Error::InvalidMetadata)
}

/// `input_shape`: `[C,H,W]`, spaces allowed around the numbers. One pass over the
/// bytes (a split-and-trim would cost more flash than the whole parser). Numbers
/// saturate; the caller's range checks reject them.
#[cfg(feature = "images")]
fn parse_shape(value: &[u8]) -> Option<[u32; 3]> {
    let [b'[', inner @ .., b']'] = value else {
        return None;
    };
    let mut shape = [0u32; 3];
    // Index of the number being read, whether it has digits, and whether a space
    // ended them.
    let (mut n, mut digits, mut ended) = (0usize, false, false);
    for &c in inner {
        match c {
            b'0'..=b'9' if !ended => {
                let dim = shape.get_mut(n)?;
                *dim = dim.saturating_mul(10).saturating_add(u32::from(c - b'0'));
                digits = true;
            }
            b',' if digits => (n, digits, ended) = (n + 1, false, false),
            b' ' => ended = digits,
            _ => return None,
        }
    }
    (n == 2 && digits).then_some(shape)
}

const fn bit(slot: usize) -> u64 {
    1u64 << slot
}

const fn weight_slot(layer: usize) -> usize {
    SLOT_LAYERS + 3 * layer
}

const fn scale_slot(layer: usize) -> usize {
    SLOT_LAYERS + 3 * layer + 1
}

const fn bias_slot(layer: usize) -> usize {
    SLOT_LAYERS + 3 * layer + 2
}

#[cfg(feature = "images")]
const fn conv_weight_slot(layer: usize) -> usize {
    SLOT_CONV + 2 * layer
}

#[cfg(feature = "images")]
const fn conv_bias_slot(layer: usize) -> usize {
    SLOT_CONV + 2 * layer + 1
}

impl Layout {
    /// Validates a whole file. See [`Model::new_checked`].
    /// A layout with nothing in it (all zero, so it costs no flash), to be filled by
    /// [`Layout::check`].
    pub(crate) const EMPTY: Layout = Layout {
        offsets: [0; SLOTS],
        present: [0; 2],
        widths: [0; MAX_LAYERS + 1],
        #[cfg(feature = "images")]
        dim: 0,
        #[cfg(feature = "images")]
        conv: 0,
        #[cfg(feature = "images")]
        image: [0; 2],
        #[cfg(feature = "images")]
        channels: [0; MAX_CONV_LAYERS + 1],
        #[cfg(feature = "images")]
        patch: 0,
        int8: 0,
        layers: 0,
        one_norm: 0,
        act_len: 0,
        gamma: 0.0,
        threshold: 0.0,
        mixtures: 0,
        gate_dims: 0,
        data_start: 0,
    };

    /// Validates a whole file into `self` (which must be [`Layout::EMPTY`]; filled in
    /// place, so the large struct is not moved around). See [`Model::new_checked`].
    pub(crate) fn check(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let (len_bytes, rest) = bytes.split_first_chunk::<8>().ok_or(Error::Truncated)?;
        let header_len = u64::from_le_bytes(*len_bytes);
        if header_len > MAX_HEADER_LEN as u64 {
            return Err(Error::HeaderTooLong);
        }
        let header_len = header_len as usize;
        let header = rest.get(..header_len).ok_or(Error::Truncated)?;
        let data = rest.get(header_len..).ok_or(Error::Truncated)?;
        if !json::is_utf8(header) {
            return Err(Error::InvalidJson);
        }
        // Offsets are u32: the data section must be shorter than 4 GiB.
        let data_len = u32::try_from(data.len())
            .ok()
            .filter(|&n| n < u32::MAX)
            .ok_or(Error::InvalidOffsets)?;
        let data_start =
            u32::try_from(header_len.saturating_add(8)).map_err(|_| Error::HeaderTooLong)?;

        let layout = self;
        layout.data_start = data_start;

        // Pass 1: metadata, dtypes, offsets against each tensor's own shape, and the
        // shape-defining tensors (weights, density means).
        let mut meta = Meta::default();
        json::walk(header, &mut |entry| match entry {
            Entry::Meta(key, value) => meta.set(key, value),
            Entry::Tensor(slot, info) => layout.record(slot, &info, data_len),
        })?;
        layout.apply_metadata(&meta)?;
        layout.check_structure(meta.get(THRESHOLD).is_some())?;

        // Pass 2: every remaining shape against the dimensions now known.
        json::walk(header, &mut |entry| match entry {
            Entry::Meta(..) => Ok(()),
            Entry::Tensor(slot, info) => layout.check_shape(slot, &info),
        })?;

        layout.check_overlaps()?;
        layout.check_values(data)?;
        Ok(())
    }

    fn record(&mut self, slot: usize, info: &TensorInfo, data_len: u32) -> Result<(), Error> {
        let is_weight = self.is_weight_slot(slot);
        let dtype_ok = match info.dtype {
            Dtype::F32 => slot != SLOT_DENSITY_DIMS,
            Dtype::I8 => is_weight,
            Dtype::I32 => slot == SLOT_DENSITY_DIMS,
            Dtype::Other => false,
        };
        if !dtype_ok {
            return Err(Error::InvalidDtype);
        }
        let [d0, d1] = info.shape;
        let numel = match info.rank {
            1 => d0,
            2 => d0.checked_mul(d1).ok_or(Error::InvalidShape)?,
            _ => return Err(Error::InvalidShape),
        };
        if numel == 0 {
            return Err(Error::InvalidShape);
        }
        // `data_len < u32::MAX`, so saturated (huge) offsets fail here.
        if info.begin > info.end || info.end > data_len {
            return Err(Error::InvalidOffsets);
        }
        let size = info.dtype.size() as u32;
        if numel.checked_mul(size) != Some(info.end - info.begin) {
            return Err(Error::InvalidOffsets);
        }
        let offset = self.offsets.get_mut(slot).ok_or(Error::UnknownTensor)?;
        *offset = info.begin;
        let present = self.present() | bit(slot);
        self.present = [present as u32, (present >> 32) as u32];

        if is_weight {
            if info.rank != 2 {
                return Err(Error::InvalidShape);
            }
            let layer = (slot - SLOT_LAYERS) / 3;
            if let Some(r) = self.widths.get_mut(layer + 1) {
                *r = d0;
            }
            if info.dtype == Dtype::I8 {
                self.int8 |= 1 << layer;
            }
        } else if slot == SLOT_DENSITY_MEANS {
            if info.rank != 2 {
                return Err(Error::InvalidShape);
            }
            self.mixtures = d0;
            self.gate_dims = d1;
        }
        #[cfg(feature = "images")]
        if slot >= SLOT_CONV && (slot - SLOT_CONV) % 2 == 0 {
            // The output channels of a convolution; `check_structure` bounds them.
            if info.rank != 2 {
                return Err(Error::InvalidShape);
            }
            if let Some(c) = self.channels.get_mut((slot - SLOT_CONV) / 2 + 1) {
                *c = u16::try_from(d0).unwrap_or(u16::MAX);
            }
        }
        Ok(())
    }

    fn apply_metadata(&mut self, meta: &Meta<'_>) -> Result<(), Error> {
        if !meta.get(FORMAT).is_some_and(|f| f.is("laq-value")) {
            return Err(Error::UnsupportedFormat);
        }
        // Version 1 is fully connected; version 2 adds convolutions on an image and is
        // a format this build does not read without `images`.
        match meta.get(VERSION) {
            Some(v) if v.is("1") => {
                // A version 1 file with these keys was meant for a reader that knows
                // them (rejected whether or not this build reads image models).
                if meta.get(NUM_CONV).is_some() || meta.get(INPUT_SHAPE).is_some() {
                    return Err(Error::InvalidMetadata);
                }
                let dim = meta_usize(meta.get(INPUT_DIM), 1..=MAX_INPUT_DIM)? as u32;
                #[cfg(feature = "images")]
                {
                    self.dim = dim;
                }
                let [input_dim, ..] = &mut self.widths;
                *input_dim = dim;
            }
            #[cfg(feature = "images")]
            Some(v) if v.is("2") => self.apply_image_metadata(meta)?,
            _ => return Err(Error::UnsupportedFormat),
        }
        self.layers = meta_usize(meta.get(NUM_LAYERS), 1..=MAX_LAYERS)? as u8;
        if !meta.get(ACTIVATION).is_some_and(|a| a.is("relu")) {
            return Err(Error::InvalidMetadata);
        }
        self.one_norm = match meta.get(HEAD) {
            Some(h) if h.is("max_q") => 0,
            Some(h) if h.is("one_norm") => 1,
            _ => return Err(Error::InvalidMetadata),
        };
        self.gamma = match meta.get(GAMMA) {
            Some(g) => meta_f32(g)
                .and_then(check_gamma)
                .map_err(|_| Error::InvalidMetadata)?,
            None => 1.0,
        };
        if let Some(t) = meta.get(THRESHOLD) {
            self.threshold = meta_f32(t)?;
        }
        Ok(())
    }

    /// The image of a version 2 file: `num_conv`, `input_shape` and `input_dim`.
    #[cfg(feature = "images")]
    fn apply_image_metadata(&mut self, meta: &Meta<'_>) -> Result<(), Error> {
        let n = meta_usize(meta.get(NUM_CONV), 1..=MAX_CONV_LAYERS)?;
        let [c, h, w] = meta
            .get(INPUT_SHAPE)
            .and_then(|v| parse_shape(v.bytes()))
            .ok_or(Error::InvalidMetadata)?;
        // Each layer halves the height and width exactly: multiples of 2^n.
        let odd = (h | w) & ((1 << n) - 1);
        if c.wrapping_sub(1) >= MAX_CHANNELS as u32
            || h.wrapping_sub(1) >= MAX_IMAGE_SIDE as u32
            || w.wrapping_sub(1) >= MAX_IMAGE_SIDE as u32
            || odd != 0
        {
            return Err(Error::InvalidMetadata);
        }
        self.conv = n as u8;
        self.image = [h as u16, w as u16];
        // Pass 1 recorded the convolutions' output channels after this one.
        let [c0, ..] = &mut self.channels;
        *c0 = c as u16;
        self.dim = c * h * w;
        if meta_usize(meta.get(INPUT_DIM), 1..=usize::MAX)? != self.dim as usize {
            return Err(Error::InvalidMetadata);
        }
        Ok(())
    }

    fn check_structure(&mut self, has_threshold: bool) -> Result<(), Error> {
        let layers = usize::from(self.layers);
        // Layers past num_layers are not part of this file's format.
        let mut allowed = bit(SLOT_INPUT_MEAN)
            | bit(SLOT_INPUT_SCALE)
            | bit(SLOT_DENSITY_WEIGHTS)
            | bit(SLOT_DENSITY_MEANS)
            | bit(SLOT_DENSITY_VARIANCES)
            | bit(SLOT_DENSITY_DIMS);
        let mut required = bit(SLOT_INPUT_MEAN) | bit(SLOT_INPUT_SCALE);
        #[cfg(feature = "images")]
        for layer in 0..usize::from(self.conv) {
            allowed |= bit(conv_weight_slot(layer)) | bit(conv_bias_slot(layer));
            required |= bit(conv_weight_slot(layer)) | bit(conv_bias_slot(layer));
        }
        for layer in 0..layers {
            allowed |= bit(weight_slot(layer)) | bit(bias_slot(layer));
            required |= bit(weight_slot(layer)) | bit(bias_slot(layer));
            if self.int8 & (1 << layer) != 0 {
                allowed |= bit(scale_slot(layer));
                required |= bit(scale_slot(layer));
            }
        }
        if self.present() & !allowed != 0 {
            return Err(Error::UnknownTensor);
        }
        if self.present() & required != required {
            return Err(Error::MissingTensor);
        }

        #[cfg(feature = "images")]
        let mut act_len = self.check_feature_maps()?;
        #[cfg(not(feature = "images"))]
        let mut act_len = 0u32;

        // Activations along the layer chain in_0 = D (or the flattened feature map),
        // in_{i+1} = out_i (the weights' input widths are checked against the chain in
        // pass 2, by `check_shape`).
        for pair in self.widths.windows(2).take(layers) {
            if let &[cols, rows] = pair {
                act_len = act_len.max(rows.checked_add(cols).ok_or(Error::InvalidShape)?);
            }
        }
        self.act_len = act_len;

        // The density gate: all of weights, means and variances plus a threshold, or none.
        let gate =
            bit(SLOT_DENSITY_WEIGHTS) | bit(SLOT_DENSITY_MEANS) | bit(SLOT_DENSITY_VARIANCES);
        let any_gate = self.present() & (gate | bit(SLOT_DENSITY_DIMS)) != 0;
        if any_gate || has_threshold {
            if self.present() & gate != gate {
                return Err(Error::MissingTensor);
            }
            if !has_threshold {
                return Err(Error::InvalidMetadata);
            }
            if self.present() & bit(SLOT_DENSITY_DIMS) == 0 && self.gate_dims != self.input_dim() {
                return Err(Error::InvalidShape);
            }
        } else {
            self.mixtures = 0;
            self.gate_dims = 0;
        }
        Ok(())
    }

    /// Feature maps along the convolutions: each reads its input (the state itself for
    /// the first) and writes a map half as high and wide; consecutive maps share the
    /// activation buffer, so it holds the two largest neighbours. The channel chain is
    /// checked against the weights' columns in pass 2. Sets the patch length and the
    /// first linear layer's input width; returns the activations the maps need.
    #[cfg(feature = "images")]
    fn check_feature_maps(&mut self) -> Result<u32, Error> {
        let mut act_len = 0u32;
        let [mut h, mut w] = self.image.map(u32::from);
        let mut prev = 0u32;
        let mut patch = 0u32;
        for (i, pair) in self.channels.windows(2).enumerate() {
            if let (true, &[cin, cout]) = (i < usize::from(self.conv), pair) {
                if !(1..=MAX_CHANNELS as u16).contains(&cout) {
                    return Err(Error::InvalidShape);
                }
                patch = patch.max((KERNEL * KERNEL) as u32 * u32::from(cin));
                h /= 2;
                w /= 2;
                let size = h * w * u32::from(cout);
                act_len = act_len.max(prev + size);
                prev = size;
                if let Some(flat) = self.widths.first_mut() {
                    *flat = size;
                }
            }
        }
        self.patch = patch;
        Ok(act_len)
    }

    fn check_shape(&self, slot: usize, info: &TensorInfo) -> Result<(), Error> {
        let m = self.mixtures;
        let g = self.gate_dims;
        let expected: (usize, [u32; 2]) = match slot {
            SLOT_INPUT_MEAN | SLOT_INPUT_SCALE => (1, [self.norm_len(), 0]),
            SLOT_DENSITY_WEIGHTS => (1, [m, 0]),
            SLOT_DENSITY_MEANS | SLOT_DENSITY_VARIANCES => (2, [m, g]),
            SLOT_DENSITY_DIMS => (1, [g, 0]),
            #[cfg(feature = "images")]
            _ if slot >= SLOT_CONV => {
                let (cols, rows) = self.conv_shape((slot - SLOT_CONV) / 2);
                if (slot - SLOT_CONV) % 2 == 0 {
                    (2, [rows, cols])
                } else {
                    (1, [rows, 0])
                }
            }
            _ => {
                let layer = (slot - SLOT_LAYERS) / 3;
                let (cols, rows) = self.shape(layer);
                match (slot - SLOT_LAYERS) % 3 {
                    // The layer chain: in_0 = D, in_{i+1} = out_i.
                    0 => (2, [rows, cols]),
                    _ => (1, [rows, 0]),
                }
            }
        };
        let shape = match info.rank {
            1 => [info.shape[0], 0],
            _ => info.shape,
        };
        if (info.rank, shape) == expected {
            Ok(())
        } else {
            Err(Error::InvalidShape)
        }
    }

    /// Length in bytes of the tensor in `slot` (0 if absent).
    fn slot_len(&self, slot: usize) -> usize {
        if self.present() & bit(slot) == 0 {
            return 0;
        }
        let m = self.mixtures as usize;
        let g = self.gate_dims as usize;
        let (numel, size) = match slot {
            SLOT_INPUT_MEAN | SLOT_INPUT_SCALE => (self.norm_len() as usize, 4),
            SLOT_DENSITY_WEIGHTS => (m, 4),
            SLOT_DENSITY_MEANS | SLOT_DENSITY_VARIANCES => (m.saturating_mul(g), 4),
            SLOT_DENSITY_DIMS => (g, 4),
            #[cfg(feature = "images")]
            _ if slot >= SLOT_CONV => {
                let (cols, rows) = self.conv_shape((slot - SLOT_CONV) / 2);
                let (cols, rows) = (cols as usize, rows as usize);
                if (slot - SLOT_CONV) % 2 == 0 {
                    (rows.saturating_mul(cols), 4)
                } else {
                    (rows, 4)
                }
            }
            _ => {
                let layer = (slot - SLOT_LAYERS) / 3;
                let (cols, rows) = self.shape(layer);
                let (cols, rows) = (cols as usize, rows as usize);
                if (slot - SLOT_LAYERS) % 3 != 0 {
                    (rows, 4)
                } else {
                    let numel = rows.saturating_mul(cols);
                    // I8: one byte per element.
                    (numel, if self.int8 & (1 << layer) != 0 { 1 } else { 4 })
                }
            }
        };
        numel.saturating_mul(size)
    }

    fn range(&self, slot: usize) -> core::ops::Range<usize> {
        let start = self.offsets.get(slot).copied().unwrap_or(0) as usize;
        start..start.saturating_add(self.slot_len(slot))
    }

    fn check_overlaps(&self) -> Result<(), Error> {
        for a in 0..SLOTS {
            let ra = self.range(a);
            if ra.is_empty() {
                continue;
            }
            for b in (a + 1)..SLOTS {
                let rb = self.range(b);
                if !rb.is_empty() && ra.start < rb.end && rb.start < ra.end {
                    return Err(Error::InvalidOffsets);
                }
            }
        }
        Ok(())
    }

    fn check_values(&self, data: &[u8]) -> Result<(), Error> {
        for slot in 0..SLOTS {
            let is_int =
                slot == SLOT_DENSITY_DIMS || (self.is_weight_slot(slot) && self.slot_is_int8(slot));
            if is_int {
                continue;
            }
            let bytes = data.get(self.range(slot)).ok_or(Error::InvalidOffsets)?;
            if bytes.chunks_exact(4).any(
                |c| !matches!(c, &[a, b, c, d] if f32::from_le_bytes([a, b, c, d]).is_finite()),
            ) {
                return Err(Error::NonFinite);
            }
        }
        if self.mixtures == 0 {
            return Ok(());
        }
        let variances = data
            .get(self.range(SLOT_DENSITY_VARIANCES))
            .ok_or(Error::InvalidOffsets)?;
        if f32_values(variances).any(|v| v <= 0.0) {
            return Err(Error::InvalidDensity);
        }
        let weights = data
            .get(self.range(SLOT_DENSITY_WEIGHTS))
            .ok_or(Error::InvalidOffsets)?;
        if f32_values(weights).any(|w| w < 0.0) {
            return Err(Error::InvalidDensity);
        }
        let sum: f32 = f32_values(weights).sum();
        if !((1.0 - MIXTURE_SUM_TOLERANCE)..=(1.0 + MIXTURE_SUM_TOLERANCE)).contains(&sum) {
            return Err(Error::InvalidDensity);
        }
        let dims = data
            .get(self.range(SLOT_DENSITY_DIMS))
            .ok_or(Error::InvalidOffsets)?;
        for c in dims.chunks_exact(4) {
            if let &[a, b, c, d] = c {
                let dim = i32::from_le_bytes([a, b, c, d]);
                if dim < 0 || dim as u32 >= self.input_dim() {
                    return Err(Error::InvalidDensity);
                }
            }
        }
        Ok(())
    }

    #[cfg(feature = "images")]
    fn input_dim(&self) -> u32 {
        self.dim
    }

    /// Without convolutions the first linear layer reads the state itself.
    #[cfg(not(feature = "images"))]
    fn input_dim(&self) -> u32 {
        let [dim, ..] = self.widths;
        dim
    }

    /// Length of `input.mean` and `input.scale`: one per state value, or one per
    /// channel of an image.
    fn norm_len(&self) -> u32 {
        #[cfg(feature = "images")]
        if let (true, [c, ..]) = (self.conv > 0, self.channels) {
            return u32::from(c);
        }
        self.input_dim()
    }

    /// `(16 * in_channels, out_channels)` of convolution `layer`: the weight matrix's
    /// columns and rows (zeros past [`MAX_CONV_LAYERS`]).
    #[cfg(feature = "images")]
    fn conv_shape(&self, layer: usize) -> (u32, u32) {
        match self.channels.get(layer..) {
            Some(&[cin, cout, ..]) => ((KERNEL * KERNEL) as u32 * u32::from(cin), u32::from(cout)),
            _ => (0, 0),
        }
    }

    /// `(inputs, outputs)` of `layer` (zeros past [`MAX_LAYERS`]).
    fn shape(&self, layer: usize) -> (u32, u32) {
        match self.widths.get(layer..) {
            Some(&[cols, rows, ..]) => (cols, rows),
            _ => (0, 0),
        }
    }

    fn present(&self) -> u64 {
        let [lo, hi] = self.present;
        u64::from(lo) | (u64::from(hi) << 32)
    }

    /// Whether `slot` holds a linear layer's weights (the only tensors that may be I8).
    fn is_weight_slot(&self, slot: usize) -> bool {
        (SLOT_LAYERS..SLOT_CONV).contains(&slot) && (slot - SLOT_LAYERS) % 3 == 0
    }

    fn slot_is_int8(&self, slot: usize) -> bool {
        let layer = (slot.saturating_sub(SLOT_LAYERS)) / 3;
        self.int8 & (1u16.checked_shl(layer as u32).unwrap_or(0)) != 0
    }
}

fn f32_values(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes.chunks_exact(4).map(|c| match c {
        &[a, b, c, d] => f32::from_le_bytes([a, b, c, d]),
        _ => 0.0,
    })
}

fn check_gamma(gamma: f32) -> Result<f32, Error> {
    if (0.0..=1.0).contains(&gamma) {
        Ok(gamma)
    } else {
        Err(Error::InvalidArgument)
    }
}

/// A validated value model, read in place from the bytes of a `laq-value` safetensors
/// file (see `docs/model-format.md`).
///
/// [`Model::new_checked`] validates the whole file once; afterwards no method fails on
/// the file's account, only on the caller's input (wrong state length, a too small
/// buffer, a non-finite state). Weights are never copied: each evaluation reads them
/// from the slice (4-aligned f32 data directly as `&[f32]`, other data byte-wise).
///
/// ```
/// # let bytes: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
/// use laq_runtime::{Model, Scratch};
///
/// let model = Model::new_checked(bytes)?;
/// let mut scratch = Scratch::<16>::new();
/// let v = model.value(&[1.0, 2.0], &mut scratch)?;
/// assert!(v.is_finite());
/// # Ok::<(), laq_runtime::Error>(())
/// ```
// `repr(C)` with the layout first: the zeroed layout and the `None` data pointer then
// form one zeroed prefix, which `new_checked_in_place` clears in place; in Rust's own
// order the compiler built the model in a temporary and copied it with `memcpy`
// (about 900 bytes of flash on a Cortex-M4).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Model<'a> {
    layout: Layout,
    /// The data section (always `Some` once loaded). An `Option` so that `Model` has
    /// no niche and `Result<Model, _>` keeps a separate tag, which compiles to less
    /// code on the target (docs/runtime.md, flash footprint).
    data: Option<&'a [u8]>,
}

impl<'a> Model<'a> {
    /// Validates `bytes` as a `laq-value` file (version 1, fully connected, or
    /// version 2, convolutions on an image first) and returns a view of it. Without
    /// the `images` feature an image model (version 2, or any file with a `conv.*`
    /// tensor) is [`Error::UnsupportedFormat`].
    ///
    /// Everything is checked here, once: the header length (at most
    /// [`MAX_HEADER_LEN`]) and JSON syntax; dtypes; shapes and the layer chain; data
    /// offsets inside the data section, matching the shapes, and not overlapping;
    /// required tensors and metadata (`format` `laq-value`, `version` `1` or `2`,
    /// `input_dim`, `num_layers`, `activation` `relu`, `head`; for version 2
    /// `num_conv` and `input_shape`, with the height and width multiples of
    /// `2^num_conv`, `input_dim = C * H * W` and the channel chain matching the
    /// convolutions' weights); no unknown tensor names; every f32 value finite; the
    /// density gate (variances > 0, weights >= 0 summing to 1 within 1e-3,
    /// `density.dims` inside the state, a `density_threshold`). Bytes after the last
    /// tensor (e.g. flash padding) and gaps between tensors are allowed.
    ///
    /// ```
    /// # let bytes: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// # let image: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny_conv.safetensors"));
    /// use laq_runtime::{Error, Model};
    ///
    /// let model = Model::new_checked(bytes)?;
    /// assert_eq!(model.input_dim(), 2);
    /// assert_eq!(Model::new_checked(&bytes[..bytes.len() - 1]).err(), Some(Error::InvalidOffsets));
    /// #[cfg(feature = "images")]
    /// assert_eq!(Model::new_checked(image)?.input_shape(), Some([1, 4, 4]));
    /// #[cfg(not(feature = "images"))]
    /// assert_eq!(Model::new_checked(image).err(), Some(Error::UnsupportedFormat));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn new_checked(bytes: &'a [u8]) -> Result<Self, Error> {
        let mut model = Model {
            data: None,
            layout: Layout::EMPTY,
        };
        model.layout.check(bytes)?;
        model.data = bytes.get(model.layout.data_start as usize..);
        Ok(model)
    }

    /// [`Model::new_checked`], building the model in `slot` instead of returning it.
    ///
    /// The same checks and the same model; on success `slot` holds it and a reference
    /// is returned, on failure `slot` is `None`. A `Model` is a few hundred bytes, and
    /// moving it out of a `Result` makes the compiler copy it with its `memcpy`
    /// routine; this constructor never moves it, which keeps that routine (about
    /// 750 bytes on a Cortex-M4) out of firmware that has no other use for it.
    ///
    /// ```
    /// # let bytes: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// use laq_runtime::{Error, Model, Scratch};
    ///
    /// let mut slot = None;
    /// let model = Model::new_checked_in_place(&mut slot, bytes)?;
    /// let v = model.value(&[1.0, 2.0], &mut Scratch::<16>::new())?;
    /// assert!(v.is_finite());
    ///
    /// let bad = Model::new_checked_in_place(&mut slot, &bytes[..bytes.len() - 1]);
    /// assert_eq!(bad.err(), Some(Error::InvalidOffsets));
    /// assert!(slot.is_none());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn new_checked_in_place<'m>(
        slot: &'m mut Option<Self>,
        bytes: &'a [u8],
    ) -> Result<&'m mut Self, Error> {
        let model = slot.insert(Model {
            data: None,
            layout: Layout::EMPTY,
        });
        if let Err(e) = model.layout.check(bytes) {
            *slot = None;
            return Err(e);
        }
        // Always `Some` (just inserted); re-borrowed so that the error path above may
        // clear `slot`.
        let model = slot.as_mut().ok_or(Error::InvalidArgument)?;
        model.data = bytes.get(model.layout.data_start as usize..);
        Ok(model)
    }

    #[cfg(feature = "alloc")]
    pub(crate) fn from_layout(bytes: &'a [u8], layout: Layout) -> Self {
        let data = bytes.get(layout.data_start as usize..);
        Model { data, layout }
    }

    /// The state dimension `D`.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.input_dim(), 2);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn input_dim(&self) -> usize {
        self.layout.input_dim() as usize
    }

    /// The number of outputs of the last layer `K` (latent actions for
    /// [`Head::MaxQ`]).
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.output_dim(), 3);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn output_dim(&self) -> usize {
        let last = usize::from(self.layout.layers).saturating_sub(1);
        self.layout.shape(last).1 as usize
    }

    /// The number of linear layers `L`.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.num_layers(), 2);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn num_layers(&self) -> usize {
        usize::from(self.layout.layers)
    }

    /// Shape and weight type of layer `i` (`None` if `i >= num_layers()`).
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.layer(1).map(|l| l.outputs), Some(3));
    /// assert_eq!(model.layer(2), None);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn layer(&self, i: usize) -> Option<LayerInfo> {
        if i >= self.num_layers() {
            return None;
        }
        Some(LayerInfo {
            inputs: self.layout.shape(i).0 as usize,
            outputs: self.layout.shape(i).1 as usize,
            int8: self.layout.int8 & (1 << i) != 0,
        })
    }

    /// The value head.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.head(), laq_runtime::Head::MaxQ);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn head(&self) -> Head {
        if self.layout.one_norm != 0 {
            Head::OneNorm
        } else {
            Head::MaxQ
        }
    }

    /// The discount used for shaping and controller selection: the file's `gamma`
    /// metadata, 1.0 if absent, or the value given to [`Model::set_gamma`].
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.gamma(), 0.9);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn gamma(&self) -> f32 {
        self.layout.gamma
    }

    /// Overrides the discount (must be in `0.0..=1.0`, else
    /// [`Error::InvalidArgument`]).
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let mut model = laq_runtime::Model::new_checked(bytes)?;
    /// model.set_gamma(1.0)?;
    /// assert_eq!(model.gamma(), 1.0);
    /// assert!(model.set_gamma(f32::NAN).is_err());
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn set_gamma(&mut self, gamma: f32) -> Result<(), Error> {
        self.layout.gamma = check_gamma(gamma)?;
        Ok(())
    }

    /// The number of convolutional layers (0 for a fully connected model). Needs the
    /// `images` feature.
    ///
    /// ```
    /// # let mlp = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// # let image = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny_conv.safetensors"));
    /// use laq_runtime::Model;
    ///
    /// assert_eq!(Model::new_checked(mlp)?.num_conv(), 0);
    /// assert_eq!(Model::new_checked(image)?.num_conv(), 2);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    #[cfg(feature = "images")]
    pub fn num_conv(&self) -> usize {
        usize::from(self.layout.conv)
    }

    /// `[C, H, W]` of an image model's input (`None` for a fully connected model). The
    /// state is the image in this order: channel planes, each row after row, raw
    /// values (e.g. 0..=255 pixel intensities as f32), `input_dim() == C * H * W`.
    /// Needs the `images` feature.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny_conv.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.input_shape(), Some([1, 4, 4]));
    /// assert_eq!(model.input_dim(), 16);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    #[cfg(feature = "images")]
    pub fn input_shape(&self) -> Option<[usize; 3]> {
        let [c, ..] = self.layout.channels;
        let [h, w] = self.layout.image;
        (self.layout.conv > 0).then_some([usize::from(c), usize::from(h), usize::from(w)])
    }

    /// Shape of convolutional layer `i` (`None` if `i >= num_conv()`). Needs the
    /// `images` feature.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny_conv.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// let first = model.conv_layer(0).unwrap();
    /// assert_eq!((first.in_channels, first.out_channels), (1, 2));
    /// assert_eq!((first.in_height, first.in_width), (4, 4));
    /// assert_eq!(model.conv_layer(2), None);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    #[cfg(feature = "images")]
    pub fn conv_layer(&self, i: usize) -> Option<ConvInfo> {
        if i >= self.num_conv() {
            return None;
        }
        let [h, w] = self.layout.image;
        match self.layout.channels.get(i..) {
            Some(&[cin, cout, ..]) => Some(ConvInfo {
                in_channels: usize::from(cin),
                out_channels: usize::from(cout),
                in_height: usize::from(h >> i),
                in_width: usize::from(w >> i),
            }),
            _ => None,
        }
    }

    /// Multiply-accumulates per evaluation: `sum_i in_i * out_i` over the linear
    /// layers, plus `(H_i / 2) * (W_i / 2) * out_i * 16 * in_i` over the convolutions.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.macs(), 2 * 4 + 4 * 3);
    /// # #[cfg(feature = "images")] {
    /// # let image = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny_conv.safetensors"));
    /// let model = laq_runtime::Model::new_checked(image)?;
    /// assert_eq!(model.macs(), 2 * 2 * 2 * 16 + 1 * 1 * 3 * 32 + 3 * 2);
    /// # }
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn macs(&self) -> usize {
        let dense = (0..self.num_layers())
            .filter_map(|i| self.layer(i))
            .fold(0usize, |acc, l| {
                acc.saturating_add(l.inputs.saturating_mul(l.outputs))
            });
        #[cfg(feature = "images")]
        let dense = (0..self.num_conv())
            .filter_map(|i| self.conv_layer(i))
            .fold(dense, |acc, c| {
                let pixels = (c.in_height / 2) * (c.in_width / 2);
                let per_pixel = c.out_channels * KERNEL * KERNEL * c.in_channels;
                acc.saturating_add(pixels.saturating_mul(per_pixel))
            });
        dense
    }

    /// The scratch length (in f32s) every method of this model needs:
    /// `input_dim + max_i(in_i + out_i)` for a fully connected model. An image model
    /// adds the largest convolution patch, `16 * C_i` over the convolutions' inputs,
    /// and its consecutive feature maps join the chain (the image itself is read from
    /// the state, not copied): `input_dim + max_i 16 C_i + max(M_1 + M_2, ...,
    /// M_n + out_0, ..., in_i + out_i)` with `M_i` the size of the `i`-th feature map.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.scratch_len(), 2 + (4 + 3));
    /// # #[cfg(feature = "images")] {
    /// # let image = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny_conv.safetensors"));
    /// // 1x4x4 image, convolutions to 2x2x2 (8 values) and 1x1x3, then 3 -> 2.
    /// let model = laq_runtime::Model::new_checked(image)?;
    /// assert_eq!(model.scratch_len(), 16 + 16 * 2 + (8 + 3));
    /// # }
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn scratch_len(&self) -> usize {
        (self.layout.input_dim() as usize)
            .saturating_add(self.patch_len())
            .saturating_add(self.layout.act_len as usize)
    }

    /// Length of the patch buffer at the start of the scratch (0 without convolutions).
    #[cfg(feature = "images")]
    fn patch_len(&self) -> usize {
        self.layout.patch as usize
    }

    #[cfg(not(feature = "images"))]
    fn patch_len(&self) -> usize {
        0
    }

    /// Whether every f32 weight matrix is 4-aligned, i.e. read through the `&[f32]`
    /// fast path (otherwise byte-wise, one row at a time; results are identical either
    /// way). Load the file from an 8-aligned address to get the fast path.
    ///
    /// ```
    /// #[repr(C, align(8))]
    /// struct Aligned<T: ?Sized>(T);
    /// static FILE: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    ///     env!("CARGO_MANIFEST_DIR"),
    ///     "/tests/data/tiny.safetensors"
    /// )));
    /// let model = laq_runtime::Model::new_checked(&FILE.0)?;
    /// assert!(model.is_aligned());
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn is_aligned(&self) -> bool {
        let dense = (0..self.num_layers())
            .all(|i| self.layout.int8 & (1 << i) != 0 || self.f32s(weight_slot(i)).is_aligned());
        #[cfg(feature = "images")]
        let dense =
            dense && (0..self.num_conv()).all(|i| self.f32s(conv_weight_slot(i)).is_aligned());
        dense
    }

    /// Whether the file has a density gate.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert!(model.has_density_gate());
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn has_density_gate(&self) -> bool {
        self.layout.mixtures > 0
    }

    /// The gate's `density_threshold` (`None` without a gate).
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.density_threshold(), Some(-8.0));
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn density_threshold(&self) -> Option<f32> {
        self.has_density_gate().then_some(self.layout.threshold)
    }

    fn bytes(&self, slot: usize) -> &'a [u8] {
        self.data
            .and_then(|d| d.get(self.layout.range(slot)))
            .unwrap_or(&[])
    }

    fn f32s(&self, slot: usize) -> F32s<'a> {
        F32s::new(self.bytes(slot))
    }

    pub(crate) fn check_state(&self, state: &[f32]) -> Result<(), Error> {
        if state.len() != self.input_dim() {
            return Err(Error::StateLength);
        }
        if !state.iter().all(|v| v.is_finite()) {
            return Err(Error::NonFiniteState);
        }
        Ok(())
    }

    /// Runs the network; returns the last layer's outputs (inside `scratch`).
    fn forward<'s>(&self, state: &[f32], scratch: &'s mut [f32]) -> Result<&'s [f32], Error> {
        self.check_state(state)?;
        let need = self.layout.act_len as usize;
        // An image model's patch buffer comes first (empty without convolutions).
        #[cfg(feature = "images")]
        let (patch, scratch) = scratch
            .split_at_mut_checked(self.patch_len())
            .ok_or(Error::BufferTooSmall)?;
        let buf = scratch.get_mut(..need).ok_or(Error::BufferTooSmall)?;

        #[cfg(feature = "images")]
        if self.layout.conv > 0 {
            self.encode(state, patch, buf)?;
        } else {
            self.normalise(state, buf);
        }
        #[cfg(not(feature = "images"))]
        self.normalise(state, buf);

        let layers = self.num_layers();
        let mut front = true;
        let mut out = 0..0;
        for (i, pair) in self.layout.widths.windows(2).enumerate().take(layers) {
            let (cols, rows) = match pair {
                &[cols, rows] => (cols as usize, rows as usize),
                _ => (0, 0),
            };
            let weights = if self.layout.int8 & (1 << i) != 0 {
                Weights::I8 {
                    q: self.bytes(weight_slot(i)),
                    scale: self.bytes(scale_slot(i)),
                }
            } else {
                Weights::F32(self.f32s(weight_slot(i)))
            };
            let bias = self.bytes(bias_slot(i));
            let relu = i + 1 < layers;
            // Ping-pong between the front and the back of the buffer: the input of a
            // layer and its output never overlap because in_i + out_i <= need.
            if front {
                let split = need.checked_sub(rows).ok_or(Error::BufferTooSmall)?;
                let (lo, hi) = buf
                    .split_at_mut_checked(split)
                    .ok_or(Error::BufferTooSmall)?;
                let x = lo.get(..cols).ok_or(Error::BufferTooSmall)?;
                linear(weights, bias, x, hi, relu);
                out = split..need;
            } else {
                let split = need.checked_sub(cols).ok_or(Error::BufferTooSmall)?;
                let (lo, hi) = buf
                    .split_at_mut_checked(split)
                    .ok_or(Error::BufferTooSmall)?;
                let y = lo.get_mut(..rows).ok_or(Error::BufferTooSmall)?;
                linear(weights, bias, hi, y, relu);
                out = 0..rows;
            }
            front = !front;
        }
        buf.get(out).ok_or(Error::BufferTooSmall)
    }

    /// Writes the standardised state to the front of `buf`, the first linear layer's
    /// input.
    fn normalise(&self, state: &[f32], buf: &mut [f32]) {
        let mean = self.bytes(SLOT_INPUT_MEAN);
        let scale = self.bytes(SLOT_INPUT_SCALE);
        for (j, (x, s)) in buf.iter_mut().zip(state).enumerate() {
            *x = (s - le_at(mean, j)) * le_at(scale, j);
        }
    }

    /// Runs the convolutions on the image `state` (`[C, H, W]`, raw values), leaving
    /// the flattened last feature map (`[H', W', C']`) at the front of `buf`, where the
    /// linear layers read their input.
    ///
    /// Each output pixel's 4x4 input patch is gathered into `patch` (ordered row,
    /// column, channel, zero outside the image; the first layer standardises the raw
    /// values as it gathers them), then one matrix-vector product with the layer's
    /// `[out, 16 * in]` weights gives that pixel's channels: the linear layers' kernel
    /// serves the convolutions too.
    #[cfg(feature = "images")]
    #[inline(never)]
    fn encode(&self, state: &[f32], patch: &mut [f32], buf: &mut [f32]) -> Result<(), Error> {
        let n = usize::from(self.layout.conv);
        let need = buf.len();
        let mean = self.bytes(SLOT_INPUT_MEAN);
        let scale = self.bytes(SLOT_INPUT_SCALE);
        let [h, w] = self.layout.image;
        let (mut h, mut w) = (usize::from(h), usize::from(w));
        for (i, pair) in self.layout.channels.windows(2).enumerate().take(n) {
            let (cin, cout) = match pair {
                &[cin, cout] => (usize::from(cin), usize::from(cout)),
                _ => (0, 0),
            };
            let (ho, wo) = (h / 2, w / 2);
            let out_len = ho * wo * cout;
            // The first layer reads the state; each later one the previous map, at the
            // other end of `buf`. Outputs alternate ends so that the last is at the front.
            let in_len = if i == 0 { 0 } else { h * w * cin };
            let (src, dst) = if (n - 1 - i) % 2 == 0 {
                let split = need.checked_sub(in_len).ok_or(Error::BufferTooSmall)?;
                let (lo, hi) = buf
                    .split_at_mut_checked(split)
                    .ok_or(Error::BufferTooSmall)?;
                (&*hi, lo.get_mut(..out_len).ok_or(Error::BufferTooSmall)?)
            } else {
                let (lo, hi) = buf
                    .split_at_mut_checked(in_len)
                    .ok_or(Error::BufferTooSmall)?;
                let start = hi.len().checked_sub(out_len).ok_or(Error::BufferTooSmall)?;
                (&*lo, hi.get_mut(start..).ok_or(Error::BufferTooSmall)?)
            };
            let patch = patch
                .get_mut(..KERNEL * KERNEL * cin)
                .ok_or(Error::BufferTooSmall)?;
            let weights = Weights::F32(self.f32s(conv_weight_slot(i)));
            let bias = self.bytes(conv_bias_slot(i));
            let plane = h * w;
            for (p, out) in dst.chunks_exact_mut(cout.max(1)).enumerate() {
                let (oy, ox) = (p / wo.max(1), p % wo.max(1));
                for (k, cell) in patch.chunks_exact_mut(cin.max(1)).enumerate() {
                    // Kernel row and column `k / 4`, `k % 4` over the input pixel
                    // (2 oy + ky - 1, 2 ox + kx - 1); padding wraps to out of range.
                    let y = (2 * oy + k / KERNEL).wrapping_sub(1);
                    let x = (2 * ox + k % KERNEL).wrapping_sub(1);
                    let inside = y < h && x < w;
                    let pixel = if inside { y * w + x } else { 0 };
                    for (c, v) in cell.iter_mut().enumerate() {
                        *v = match (inside, i) {
                            (false, _) => 0.0,
                            (true, 0) => {
                                let s = state.get(c * plane + pixel).copied().unwrap_or(0.0);
                                (s - le_at(mean, c)) * le_at(scale, c)
                            }
                            (true, _) => src.get(pixel * cin + c).copied().unwrap_or(0.0),
                        };
                    }
                }
                linear(weights, bias, patch, out, true);
            }
            (h, w) = (ho, wo);
        }
        Ok(())
    }

    /// Evaluates the model: `V(s)`, the last layer's outputs and (for [`Head::MaxQ`])
    /// the best latent action. Ignores the density gate.
    ///
    /// `scratch` needs at least [`Model::scratch_len`] elements (see [`Scratch`]);
    /// the outputs borrow it.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// use laq_runtime::{Error, Model};
    ///
    /// let model = Model::new_checked(bytes)?;
    /// let mut scratch = [0.0f32; 9];
    /// let out = model.evaluate(&[1.0, 2.0], &mut scratch)?;
    /// println!("V = {}, Q = {:?}, best = {:?}", out.value, out.outputs, out.best);
    /// assert_eq!(model.evaluate(&[1.0], &mut scratch).err(), Some(Error::StateLength));
    /// assert_eq!(model.evaluate(&[1.0, 2.0], &mut [0.0; 3]).err(), Some(Error::BufferTooSmall));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn evaluate<'s>(&self, state: &[f32], scratch: &'s mut [f32]) -> Result<Output<'s>, Error> {
        let y = self.forward(state, scratch)?;
        let (value, best) = match self.head() {
            Head::MaxQ => {
                let mut best = 0usize;
                let mut max = f32::NEG_INFINITY;
                for (k, &q) in y.iter().enumerate() {
                    if q > max {
                        max = q;
                        best = k;
                    }
                }
                (max, Some(best))
            }
            Head::OneNorm => {
                let sq: f32 = y.iter().map(|v| v * v).sum();
                (1.0 - sqrtf(sq), None)
            }
        };
        if !value.is_finite() || !y.iter().all(|v| v.is_finite()) {
            return Err(Error::NonFiniteOutput);
        }
        Ok(Output {
            value,
            outputs: y,
            best,
        })
    }

    /// `V(s)`, ignoring the density gate. See [`Model::evaluate`].
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// let mut scratch = laq_runtime::Scratch::<9>::new();
    /// let near_goal = model.value(&[4.0, 4.0], &mut scratch)?;
    /// let far = model.value(&[0.0, 0.0], &mut scratch)?;
    /// assert!(near_goal > far);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn value(&self, state: &[f32], scratch: &mut [f32]) -> Result<f32, Error> {
        Ok(self.evaluate(state, scratch)?.value)
    }

    /// `log p(s)` under the density gate, or `None` if the model has none.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// let near = model.log_density(&[1.0, 1.0])?.unwrap();
    /// let far = model.log_density(&[9.0, -9.0])?.unwrap();
    /// assert!(near > far);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn log_density(&self, state: &[f32]) -> Result<Option<f32>, Error> {
        self.check_state(state)?;
        if !self.has_density_gate() {
            return Ok(None);
        }
        let g = self.layout.gate_dims as usize;
        let weights = self.bytes(SLOT_DENSITY_WEIGHTS);
        let means = self.bytes(SLOT_DENSITY_MEANS);
        let variances = self.bytes(SLOT_DENSITY_VARIANCES);
        let dims = self.bytes(SLOT_DENSITY_DIMS);
        let mut max = f32::NEG_INFINITY;
        let mut sum = 0.0f32;
        for m in 0..self.layout.mixtures as usize {
            let w = le_at(weights, m);
            if w <= 0.0 {
                continue;
            }
            let mut t = 0.0f32;
            for j in 0..g {
                let dim = if dims.is_empty() {
                    j
                } else {
                    let start = j.saturating_mul(4);
                    match dims.get(start..start.saturating_add(4)) {
                        Some(&[a, b, c, d]) => i32::from_le_bytes([a, b, c, d]) as usize,
                        _ => 0,
                    }
                };
                let s = state.get(dim).copied().unwrap_or(0.0);
                let k = m.saturating_mul(g).saturating_add(j);
                let var = le_at(variances, k);
                let diff = s - le_at(means, k);
                t += diff * diff / var + libm::logf(core::f32::consts::TAU * var);
            }
            let term = libm::logf(w) - 0.5 * t;
            if term == f32::NEG_INFINITY || term.is_nan() {
                continue;
            }
            if term > max {
                sum = sum * libm::expf(max - term) + 1.0;
                max = term;
            } else {
                sum += libm::expf(term - max);
            }
        }
        Ok(Some(if max == f32::NEG_INFINITY {
            max
        } else {
            max + libm::logf(sum)
        }))
    }

    /// Whether `s` passes the density gate (`log p(s) >= density_threshold`); always
    /// `true` without a gate.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert!(model.in_distribution(&[1.0, 1.0])?);
    /// assert!(!model.in_distribution(&[100.0, 1.0])?);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn in_distribution(&self, state: &[f32]) -> Result<bool, Error> {
        Ok(match self.log_density(state)? {
            Some(lp) => lp >= self.layout.threshold,
            None => true,
        })
    }

    /// `V(s)` with the density gate applied: 0 for out-of-distribution states (the
    /// value used for shaping and controller selection).
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// let mut scratch = laq_runtime::Scratch::<9>::new();
    /// let g = model.gated_value(&[1.0, 1.0], &mut scratch)?;
    /// assert!(g.in_distribution);
    /// assert_eq!(g.value, g.raw_value);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn gated_value(&self, state: &[f32], scratch: &mut [f32]) -> Result<Gated, Error> {
        let raw_value = self.value(state, scratch)?;
        let log_density = self.log_density(state)?;
        let in_distribution = log_density.is_none_or(|lp| lp >= self.layout.threshold);
        Ok(Gated {
            value: if in_distribution { raw_value } else { 0.0 },
            raw_value,
            log_density,
            in_distribution,
        })
    }
}

#[cfg(all(test, feature = "images"))]
mod tests {
    use super::parse_shape;

    #[test]
    fn input_shapes() {
        assert_eq!(parse_shape(b"[3,32,32]"), Some([3, 32, 32]));
        assert_eq!(parse_shape(b"[1,1,99999999999999]"), Some([1, 1, u32::MAX]));
        assert_eq!(parse_shape(b"[ 1 , 4,16 ]"), Some([1, 4, 16]));
        for bad in [
            &b"3,32,32"[..],
            b"[3,32]",
            b"[3,32,32,1]",
            b"[3,,32]",
            b"[,3,32,32]",
            b"[3,32,32,]",
            b"[3,3 2,32]",
            b"[3,-2,32]",
            b"[3,2.0,32]",
            b"[]",
        ] {
            assert_eq!(
                parse_shape(bad),
                None,
                "{}",
                std::string::String::from_utf8_lossy(bad)
            );
        }
    }
}
