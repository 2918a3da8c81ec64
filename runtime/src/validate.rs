//! Validation of a whole file into a [`Layout`]: what the loader learns about a file,
//! checked once so that evaluation needs no checks of the file.

use crate::format::{self, Head, MetaKey, Version};
#[cfg(feature = "images")]
use crate::format::{CONV_KERNEL, CONV_STRIDE};
use crate::json::{self, Dtype, Entry, TensorInfo};
#[cfg(feature = "images")]
use crate::limits::{MAX_CHANNELS, MAX_CONV_LAYERS, MAX_IMAGE_SIDE};
use crate::limits::{MAX_HEADER_LEN, MAX_INPUT_DIM, MAX_LAYERS};
#[cfg(feature = "images")]
use crate::meta::parse_shape;
use crate::meta::{meta_f32, meta_usize, Meta};
use crate::slots::{
    bias_slot, bit, scale_slot, weight_slot, SLOTS, SLOT_CONV, SLOT_DENSITY_DIMS,
    SLOT_DENSITY_MEANS, SLOT_DENSITY_VARIANCES, SLOT_DENSITY_WEIGHTS, SLOT_INPUT_MEAN,
    SLOT_INPUT_SCALE, SLOT_LAYERS,
};
#[cfg(feature = "images")]
use crate::slots::{conv_bias_slot, conv_weight_slot};
use crate::Error;

/// Tolerance on the sum of the density mixture weights (which must be 1).
const MIXTURE_SUM_TOLERANCE: f32 = 1e-3;

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
    pub(crate) widths: [u32; MAX_LAYERS + 1],
    // The image model's fields exist only with `images`: without them `Model` stays
    // as small as a fully connected model needs (it lives on the caller's stack).
    /// The state length `D` (`input_dim`).
    #[cfg(feature = "images")]
    pub(crate) dim: u32,
    /// Number of convolutional layers (0: a fully connected model).
    #[cfg(feature = "images")]
    pub(crate) conv: u8,
    /// Height and width of an image model's input.
    #[cfg(feature = "images")]
    pub(crate) image: [u16; 2],
    /// The image's channels, then the output channels of each convolution.
    #[cfg(feature = "images")]
    pub(crate) channels: [u16; MAX_CONV_LAYERS + 1],
    /// Length of the patch buffer at the start of the scratch: the largest
    /// convolution input patch, `16 * channels[i]` (0 without convolutions).
    #[cfg(feature = "images")]
    pub(crate) patch: u32,
    /// Bit `i` set if layer `i` has I8 weights.
    pub(crate) int8: u16,
    /// Number of linear layers.
    pub(crate) layers: u8,
    /// 1 for [`Head::OneNorm`], 0 for [`Head::MaxQ`]: a plain integer rather than the
    /// enum, so that `Model` has no niche (see [`Model`](crate::Model)'s `data`).
    pub(crate) one_norm: u8,
    /// `max_i(in_i + out_i)` along the chain of feature maps and layer outputs.
    pub(crate) act_len: u32,
    /// The discount (`gamma`, 1 if absent).
    pub(crate) gamma: f32,
    /// The density gate's `density_threshold`.
    pub(crate) threshold: f32,
    /// `cost_per_step` (below 0), 0 without one.
    pub(crate) cost: f32,
    /// The file's `gamma`, which [`Model::set_gamma`](crate::Model::set_gamma) does not
    /// change: the discount V was learned at, and so the one that maps it back to a
    /// cost's units.
    pub(crate) learned_gamma: f32,
    /// Number of mixture components `M` (0: no density gate).
    pub(crate) mixtures: u32,
    /// Number of gated dimensions `G`.
    pub(crate) gate_dims: u32,
    /// Start of the data section in the file.
    pub(crate) data_start: u32,
}

impl Layout {
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
        cost: 0.0,
        learned_gamma: 0.0,
        mixtures: 0,
        gate_dims: 0,
        data_start: 0,
    };

    /// Validates a whole file into `self` (which must be [`Layout::EMPTY`]; filled in
    /// place, so the large struct is not moved around). See [`Model::new_checked`](crate::Model::new_checked).
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
        layout.check_structure(meta.get(MetaKey::DensityThreshold).is_some())?;

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
            // Int8 layers need the `int8` feature's kernels.
            Dtype::I8 if is_weight && !cfg!(feature = "int8") => {
                return Err(Error::UnsupportedFormat)
            }
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
        if !meta
            .get(MetaKey::Format)
            .is_some_and(|f| f.is(format::NAME))
        {
            return Err(Error::UnsupportedFormat);
        }
        // Version 1 is fully connected; version 2 adds convolutions on an image and is
        // a format this build does not read without `images`.
        match meta
            .get(MetaKey::Version)
            .and_then(|v| Version::parse(v.bytes()))
        {
            Some(Version::FullyConnected) => {
                // A version 1 file with these keys was meant for a reader that knows
                // them (rejected whether or not this build reads image models).
                if meta.get(MetaKey::NumConv).is_some() || meta.get(MetaKey::InputShape).is_some() {
                    return Err(Error::InvalidMetadata);
                }
                let dim = meta_usize(meta.get(MetaKey::InputDim), 1..=MAX_INPUT_DIM)? as u32;
                #[cfg(feature = "images")]
                {
                    self.dim = dim;
                }
                let [input_dim, ..] = &mut self.widths;
                *input_dim = dim;
            }
            #[cfg(feature = "images")]
            Some(Version::Image) => self.apply_image_metadata(meta)?,
            _ => return Err(Error::UnsupportedFormat),
        }
        self.layers = meta_usize(meta.get(MetaKey::NumLayers), 1..=MAX_LAYERS)? as u8;
        if !meta
            .get(MetaKey::Activation)
            .is_some_and(|a| a.is(format::RELU))
        {
            return Err(Error::InvalidMetadata);
        }
        // `Head::parse` spelled out: as a call it costs the firmware a few bytes more.
        self.one_norm = match meta.get(MetaKey::Head) {
            Some(h) if h.is(Head::MaxQ.name()) => 0,
            Some(h) if h.is(Head::OneNorm.name()) => 1,
            _ => return Err(Error::InvalidMetadata),
        };
        self.gamma = match meta.get(MetaKey::Gamma) {
            Some(g) => meta_f32(g)
                .and_then(check_gamma)
                .map_err(|_| Error::InvalidMetadata)?,
            None => 1.0,
        };
        self.learned_gamma = self.gamma;
        if let Some(c) = meta.get(MetaKey::CostPerStep) {
            // A cost is mapped back through `1 / (1 - gamma)`: it needs a discount below 1.
            match meta_f32(c) {
                Ok(c) if c < 0.0 && c.is_finite() && self.gamma < 1.0 => self.cost = c,
                _ => return Err(Error::InvalidMetadata),
            }
        }
        if let Some(t) = meta.get(MetaKey::DensityThreshold) {
            self.threshold = meta_f32(t)?;
        }
        Ok(())
    }

    /// The image of a version 2 file: `num_conv`, `input_shape` and `input_dim`.
    #[cfg(feature = "images")]
    fn apply_image_metadata(&mut self, meta: &Meta<'_>) -> Result<(), Error> {
        let n = meta_usize(meta.get(MetaKey::NumConv), 1..=MAX_CONV_LAYERS)?;
        let [c, h, w] = meta
            .get(MetaKey::InputShape)
            .and_then(|v| parse_shape(v.bytes()))
            .ok_or(Error::InvalidMetadata)?;
        // Each layer halves the height and width, rounding down: at least one pixel
        // must be left after the last.
        if c.wrapping_sub(1) >= MAX_CHANNELS as u32
            || h.wrapping_sub(1) >= MAX_IMAGE_SIDE as u32
            || w.wrapping_sub(1) >= MAX_IMAGE_SIDE as u32
            || (h >> n) == 0
            || (w >> n) == 0
        {
            return Err(Error::InvalidMetadata);
        }
        self.conv = n as u8;
        self.image = [h as u16, w as u16];
        // Pass 1 recorded the convolutions' output channels after this one.
        let [c0, ..] = &mut self.channels;
        *c0 = c as u16;
        self.dim = c * h * w;
        if meta_usize(meta.get(MetaKey::InputDim), 1..=usize::MAX)? != self.dim as usize {
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
                patch = patch.max((CONV_KERNEL * CONV_KERNEL) as u32 * u32::from(cin));
                h /= CONV_STRIDE as u32;
                w /= CONV_STRIDE as u32;
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

    pub(crate) fn range(&self, slot: usize) -> core::ops::Range<usize> {
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
    pub(crate) fn input_dim(&self) -> u32 {
        self.dim
    }

    /// Without convolutions the first linear layer reads the state itself.
    #[cfg(not(feature = "images"))]
    pub(crate) fn input_dim(&self) -> u32 {
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
            Some(&[cin, cout, ..]) => (
                (CONV_KERNEL * CONV_KERNEL) as u32 * u32::from(cin),
                u32::from(cout),
            ),
            _ => (0, 0),
        }
    }

    /// What [`Layout::range`] gives for linear layer `layer`'s weights, scales and biases
    /// (empty for a layer past the last), from the layer's shape at once, where the
    /// generic lookup matches on the slot for each. Validation requires a layer's
    /// weights and biases, and its scales exactly when its weights are int8, so only
    /// the scales can be absent (empty).
    pub(crate) fn layer_ranges(&self, layer: usize) -> [core::ops::Range<usize>; 3] {
        let (cols, rows) = self.shape(layer);
        let int8 = self.int8 & (1 << layer) != 0;
        // No overflow in a validated layout (each tensor lies in the file), so these
        // equal the saturating sums of `range`; otherwise `get` refuses the range.
        let per_row = rows.wrapping_mul(4);
        let weights = rows
            .wrapping_mul(cols)
            .wrapping_mul(if int8 { 1 } else { 4 });
        let slots = weight_slot(layer)..bias_slot(layer) + 1;
        match self.offsets.get(slots) {
            Some(&[w, s, b]) if layer < usize::from(self.layers) => {
                let at = |start: u32, len: u32| start as usize..start.wrapping_add(len) as usize;
                [
                    at(w, weights),
                    at(s, if int8 { per_row } else { 0 }),
                    at(b, per_row),
                ]
            }
            _ => [0..0, 0..0, 0..0],
        }
    }

    /// `(inputs, outputs)` of `layer` (zeros past [`MAX_LAYERS`]).
    pub(crate) fn shape(&self, layer: usize) -> (u32, u32) {
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

/// `gamma` if it is a discount (`0.0..=1.0`), else [`Error::InvalidArgument`].
pub(crate) fn check_gamma(gamma: f32) -> Result<f32, Error> {
    if (0.0..=1.0).contains(&gamma) {
        Ok(gamma)
    } else {
        Err(Error::InvalidArgument)
    }
}
