//! Evaluation: the network (convolutions, linear layers), the value head and the
//! density gate.

#[cfg(feature = "images")]
use crate::format::{CONV_KERNEL, CONV_PADDING, CONV_STRIDE};
#[cfg(feature = "images")]
use crate::kernels::linear_f32;
use crate::kernels::{le_at, linear, F32s, Weights};
#[cfg(feature = "images")]
use crate::slots::{conv_bias_slot, conv_weight_slot};
use crate::slots::{
    SLOT_DENSITY_DIMS, SLOT_DENSITY_MEANS, SLOT_DENSITY_VARIANCES, SLOT_DENSITY_WEIGHTS,
    SLOT_INPUT_MEAN, SLOT_INPUT_SCALE,
};
use crate::{Error, Head, Model};

#[cfg(all(target_arch = "arm", target_abi = "eabihf"))]
use crate::arm::sqrtf;
#[cfg(not(all(target_arch = "arm", target_abi = "eabihf")))]
use libm::sqrtf;

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

impl Model<'_> {
    /// [`Error::StateLength`] or [`Error::NonFiniteState`] unless `state` is one of
    /// this model's.
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
        let mut x_max = None;
        for (i, pair) in self.layout.widths.windows(2).enumerate().take(layers) {
            let (cols, rows) = match pair {
                &[cols, rows] => (cols as usize, rows as usize),
                _ => (0, 0),
            };
            let [w, _scale, bias] = self.layer_bytes(i);
            #[cfg(feature = "int8")]
            let weights = if self.layout.int8 & (1 << i) != 0 {
                Weights::I8 {
                    q: w,
                    scale: _scale,
                }
            } else {
                Weights::F32(F32s::new(w))
            };
            #[cfg(not(feature = "int8"))]
            let weights = Weights::F32(F32s::new(w));
            let relu = i + 1 < layers;
            // Ping-pong between the front and the back of the buffer: the input of a
            // layer and its output never overlap because in_i + out_i <= need.
            if front {
                let split = need.checked_sub(rows).ok_or(Error::BufferTooSmall)?;
                let (lo, hi) = buf
                    .split_at_mut_checked(split)
                    .ok_or(Error::BufferTooSmall)?;
                let x = lo.get_mut(..cols).ok_or(Error::BufferTooSmall)?;
                x_max = linear(weights, bias, x, x_max, hi, relu);
                out = split..need;
            } else {
                let split = need.checked_sub(cols).ok_or(Error::BufferTooSmall)?;
                let (lo, hi) = buf
                    .split_at_mut_checked(split)
                    .ok_or(Error::BufferTooSmall)?;
                let y = lo.get_mut(..rows).ok_or(Error::BufferTooSmall)?;
                x_max = linear(weights, bias, hi, x_max, y, relu);
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
            let (ho, wo) = (h / CONV_STRIDE, w / CONV_STRIDE);
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
                .get_mut(..CONV_KERNEL * CONV_KERNEL * cin)
                .ok_or(Error::BufferTooSmall)?;
            let weights = self.f32s(conv_weight_slot(i));
            let bias = self.bytes(conv_bias_slot(i));
            let plane = h * w;
            for (p, out) in dst.chunks_exact_mut(cout.max(1)).enumerate() {
                let (oy, ox) = (p / wo.max(1), p % wo.max(1));
                for (k, cell) in patch.chunks_exact_mut(cin.max(1)).enumerate() {
                    // Kernel row and column `k / 4`, `k % 4` over the input pixel
                    // (2 oy + ky - 1, 2 ox + kx - 1); padding wraps to out of range.
                    let y = (CONV_STRIDE * oy + k / CONV_KERNEL).wrapping_sub(CONV_PADDING);
                    let x = (CONV_STRIDE * ox + k % CONV_KERNEL).wrapping_sub(CONV_PADDING);
                    // One loop per case, decided once per kernel position, not per value.
                    if y >= h || x >= w {
                        cell.fill(0.0);
                    } else if i == 0 {
                        let pixel = y * w + x;
                        for (c, v) in cell.iter_mut().enumerate() {
                            let s = state.get(c * plane + pixel).copied().unwrap_or(0.0);
                            *v = (s - le_at(mean, c)) * le_at(scale, c);
                        }
                    } else {
                        let from = (y * w + x) * cin;
                        for (c, v) in cell.iter_mut().enumerate() {
                            *v = src.get(from + c).copied().unwrap_or(0.0);
                        }
                    }
                }
                linear_f32(weights, bias, patch, out, true);
            }
            (h, w) = (ho, wo);
        }
        Ok(())
    }

    /// Evaluates the model: `V(s)`, the last layer's outputs and (for [`Head::MaxQ`])
    /// the best latent action. Ignores the density gate.
    ///
    /// `scratch` needs at least [`Model::scratch_len`] elements (see [`Scratch`](crate::Scratch));
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
        let (value, best) = self.head_value(y.iter().copied())?;
        Ok(Output {
            value,
            outputs: y,
            best,
        })
    }

    /// V and the best output of the last layer's outputs `y`, as the head computes them;
    /// [`Error::NonFiniteOutput`] unless every output and V are finite.
    pub(crate) fn head_value<I>(&self, y: I) -> Result<(f32, Option<usize>), Error>
    where
        I: Iterator<Item = f32> + Clone,
    {
        let (value, best) = match self.head() {
            Head::MaxQ => {
                let mut best = 0usize;
                let mut max = f32::NEG_INFINITY;
                for (k, q) in y.clone().enumerate() {
                    if q > max {
                        max = q;
                        best = k;
                    }
                }
                (max, Some(best))
            }
            Head::OneNorm => {
                let sq: f32 = y.clone().map(|v| v * v).sum();
                (1.0 - sqrtf(sq), None)
            }
        };
        if !value.is_finite() || !y.clone().all(|v| v.is_finite()) {
            return Err(Error::NonFiniteOutput);
        }
        Ok((value, best))
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
