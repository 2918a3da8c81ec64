//! The checked model view: loading (validation of the whole file) and evaluation.

use core::ops::{Deref, DerefMut};

use crate::json::{
    self, Dtype, Entry, RawStr, TensorInfo, SLOTS, SLOT_DENSITY_DIMS, SLOT_DENSITY_MEANS,
    SLOT_DENSITY_VARIANCES, SLOT_DENSITY_WEIGHTS, SLOT_INPUT_MEAN, SLOT_INPUT_SCALE, SLOT_LAYERS,
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

/// The largest state dimension (`input_dim` is `1..=MAX_INPUT_DIM`).
///
/// ```
/// assert_eq!(laq_runtime::MAX_INPUT_DIM, 1024);
/// ```
pub const MAX_INPUT_DIM: usize = 1024;

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
/// `input_dim + max_i(in_i + out_i)` over the layers.
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
    /// `input_dim`, then the output width of each layer: layer `i` maps
    /// `widths[i]` inputs to `widths[i + 1]` outputs.
    widths: [u32; MAX_LAYERS + 1],
    /// Bit `i` set if layer `i` has I8 weights.
    int8: u16,
    layers: u8,
    /// 1 for [`Head::OneNorm`], 0 for [`Head::MaxQ`]: a plain integer rather than the
    /// enum, so that `Model` has no niche (see [`Model`]'s `data`).
    one_norm: u8,
    /// `max_i(in_i + out_i)`.
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
const META_KEYS: [&[u8]; 8] = [
    b"format",
    b"version",
    b"input_dim",
    b"num_layers",
    b"activation",
    b"head",
    b"gamma",
    b"density_threshold",
];

/// Raw values of the metadata keys the format defines (see [`META_KEYS`]).
#[derive(Default)]
struct Meta<'h> {
    values: [Option<RawStr<'h>>; 8],
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

impl Layout {
    /// Validates a whole file. See [`Model::new_checked`].
    /// A layout with nothing in it (all zero, so it costs no flash), to be filled by
    /// [`Layout::check`].
    pub(crate) const EMPTY: Layout = Layout {
        offsets: [0; SLOTS],
        present: [0; 2],
        widths: [0; MAX_LAYERS + 1],
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
        let is_weight = slot >= SLOT_LAYERS && (slot - SLOT_LAYERS) % 3 == 0;
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
        Ok(())
    }

    fn apply_metadata(&mut self, meta: &Meta<'_>) -> Result<(), Error> {
        if !meta.get(FORMAT).is_some_and(|f| f.is("laq-value"))
            || !meta.get(VERSION).is_some_and(|v| v.is("1"))
        {
            return Err(Error::UnsupportedFormat);
        }
        let [input_dim, ..] = &mut self.widths;
        *input_dim = meta_usize(meta.get(INPUT_DIM), 1..=MAX_INPUT_DIM)? as u32;
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

        // Activations along the layer chain in_0 = D, in_{i+1} = out_i (the weights'
        // input widths are checked against the chain in pass 2, by `check_shape`).
        let mut act_len = 0u32;
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

    fn check_shape(&self, slot: usize, info: &TensorInfo) -> Result<(), Error> {
        let d = self.input_dim();
        let m = self.mixtures;
        let g = self.gate_dims;
        let expected: (usize, [u32; 2]) = match slot {
            SLOT_INPUT_MEAN | SLOT_INPUT_SCALE => (1, [d, 0]),
            SLOT_DENSITY_WEIGHTS => (1, [m, 0]),
            SLOT_DENSITY_MEANS | SLOT_DENSITY_VARIANCES => (2, [m, g]),
            SLOT_DENSITY_DIMS => (1, [g, 0]),
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
        let d = self.input_dim() as usize;
        let m = self.mixtures as usize;
        let g = self.gate_dims as usize;
        let (numel, size) = match slot {
            SLOT_INPUT_MEAN | SLOT_INPUT_SCALE => (d, 4),
            SLOT_DENSITY_WEIGHTS => (m, 4),
            SLOT_DENSITY_MEANS | SLOT_DENSITY_VARIANCES => (m.saturating_mul(g), 4),
            SLOT_DENSITY_DIMS => (g, 4),
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

    fn input_dim(&self) -> u32 {
        let [d, ..] = self.widths;
        d
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

    fn is_weight_slot(&self, slot: usize) -> bool {
        slot >= SLOT_LAYERS && (slot - SLOT_LAYERS) % 3 == 0
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
#[derive(Clone, Copy, Debug)]
pub struct Model<'a> {
    /// The data section (always `Some` once loaded). An `Option` so that `Model` has
    /// no niche and `Result<Model, _>` keeps a separate tag, which compiles to less
    /// code on the target (docs/runtime.md, flash footprint).
    data: Option<&'a [u8]>,
    layout: Layout,
}

impl<'a> Model<'a> {
    /// Validates `bytes` as a `laq-value` version 1 file and returns a view of it.
    ///
    /// Everything is checked here, once: the header length (at most
    /// [`MAX_HEADER_LEN`]) and JSON syntax; dtypes; shapes and the layer chain; data
    /// offsets inside the data section, matching the shapes, and not overlapping;
    /// required tensors and metadata (`format` `laq-value`, `version` `1`,
    /// `input_dim`, `num_layers`, `activation` `relu`, `head`); no unknown tensor
    /// names; every f32 value finite; the density gate (variances > 0, weights >= 0
    /// summing to 1 within 1e-3, `density.dims` inside the state, a
    /// `density_threshold`). Bytes after the last tensor (e.g. flash padding) and gaps
    /// between tensors are allowed.
    ///
    /// ```
    /// # let bytes: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// use laq_runtime::{Error, Model};
    ///
    /// let model = Model::new_checked(bytes)?;
    /// assert_eq!(model.input_dim(), 2);
    /// assert_eq!(Model::new_checked(&bytes[..bytes.len() - 1]).err(), Some(Error::InvalidOffsets));
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

    /// Multiply-accumulates per evaluation (`sum_i in_i * out_i`).
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.macs(), 2 * 4 + 4 * 3);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn macs(&self) -> usize {
        (0..self.num_layers())
            .filter_map(|i| self.layer(i))
            .fold(0usize, |acc, l| {
                acc.saturating_add(l.inputs.saturating_mul(l.outputs))
            })
    }

    /// The scratch length (in f32s) every method of this model needs:
    /// `input_dim + max_i(in_i + out_i)`.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.scratch_len(), 2 + (4 + 3));
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn scratch_len(&self) -> usize {
        (self.layout.input_dim() as usize).saturating_add(self.layout.act_len as usize)
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
        (0..self.num_layers())
            .all(|i| self.layout.int8 & (1 << i) != 0 || self.f32s(weight_slot(i)).is_aligned())
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

    /// Runs the MLP; returns the last layer's outputs (inside `scratch`).
    fn forward<'s>(&self, state: &[f32], scratch: &'s mut [f32]) -> Result<&'s [f32], Error> {
        self.check_state(state)?;
        let need = self.layout.act_len as usize;
        let buf = scratch.get_mut(..need).ok_or(Error::BufferTooSmall)?;

        let mean = self.bytes(SLOT_INPUT_MEAN);
        let scale = self.bytes(SLOT_INPUT_SCALE);
        for (j, (x, s)) in buf.iter_mut().zip(state).enumerate() {
            *x = (s - le_at(mean, j)) * le_at(scale, j);
        }

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
