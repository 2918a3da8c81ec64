//! The checked model view: loading, and the model's shape and metadata.

#[cfg(feature = "images")]
use crate::format::{CONV_KERNEL, CONV_STRIDE};
use crate::kernels::F32s;
#[cfg(feature = "images")]
use crate::slots::conv_weight_slot;
use crate::slots::weight_slot;
use crate::validate::{check_gamma, Layout};
use crate::{Error, Head};

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
/// pixels (rounded down: an odd side loses its last row or column's half-patch) of
/// `out_channels`, each followed by ReLU. Needs the `images` feature.
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
    pub(crate) layout: Layout,
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
    /// [`MAX_HEADER_LEN`](crate::MAX_HEADER_LEN)) and JSON syntax; dtypes; shapes and the layer chain; data
    /// offsets inside the data section, matching the shapes, and not overlapping;
    /// required tensors and metadata (`format` `laq-value`, `version` `1` or `2`,
    /// `input_dim`, `num_layers`, `activation` `relu`, `head`; for version 2
    /// `num_conv` and `input_shape`, with at least one pixel left after `num_conv`
    /// halvings, `input_dim = C * H * W` and the channel chain matching the
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

    /// The `cost_per_step` a V was learned above (`None` for a V in the log's own units).
    /// A log that pays a cost `c < 0` a step until its episodes end is learned as the
    /// value above paying it for ever: 1 one step from an end, 0 for a state that never
    /// ends (and for a state the density gate rejects). [`Model::value_in_data_units`]
    /// maps such a V back to the log's return.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.cost_per_step(), None);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn cost_per_step(&self) -> Option<f32> {
        (self.layout.cost != 0.0).then_some(self.layout.cost)
    }

    /// A value of this model in the units of the log it was learned from: `value` itself,
    /// or, where V was learned above a cost per step `c` ([`Model::cost_per_step`]), the
    /// discounted return `c (1 - gamma V) / (1 - gamma)` at the file's `gamma` (not the
    /// one [`Model::set_gamma`] gives). The map rises with V, so it keeps every ranking
    /// and every choice; shaping needs it, since the rewards it adds to are the log's.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// assert_eq!(model.value_in_data_units(0.25), 0.25);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn value_in_data_units(&self, value: f32) -> f32 {
        let (c, gamma) = (self.layout.cost, self.layout.learned_gamma);
        if c == 0.0 {
            value
        } else {
            c * (1.0 - gamma * value) / (1.0 - gamma)
        }
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
                let pixels = (c.in_height / CONV_STRIDE) * (c.in_width / CONV_STRIDE);
                let per_pixel = c.out_channels * CONV_KERNEL * CONV_KERNEL * c.in_channels;
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
    pub(crate) fn patch_len(&self) -> usize {
        self.layout.patch as usize
    }

    #[cfg(not(feature = "images"))]
    pub(crate) fn patch_len(&self) -> usize {
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

    /// The bytes of the tensor in `slot` (empty if absent).
    pub(crate) fn bytes(&self, slot: usize) -> &'a [u8] {
        self.data
            .and_then(|d| d.get(self.layout.range(slot)))
            .unwrap_or(&[])
    }

    /// The bytes of linear layer `i`'s weights, scales (empty for f32 weights) and
    /// biases: [`Model::bytes`] of its three slots (see `Layout::layer_ranges`).
    pub(crate) fn layer_bytes(&self, i: usize) -> [&'a [u8]; 3] {
        let d = self.data.unwrap_or(&[]);
        let get = |r: core::ops::Range<usize>| d.get(r).unwrap_or(&[]);
        let [w, s, b] = self.layout.layer_ranges(i);
        [get(w), get(s), get(b)]
    }

    /// The f32 values of the tensor in `slot`.
    pub(crate) fn f32s(&self, slot: usize) -> F32s<'a> {
        F32s::new(self.bytes(slot))
    }
}
