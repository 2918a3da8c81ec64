//! Several states through a fully connected network at once: each weight is read once for
//! [`BATCH`] states, whose sums sit side by side in the vector registers. Every state's
//! sums keep the single-state order (left to right, multiply then add, bias last), so the
//! values are bit-identical to [`Model::value`]'s.

#[cfg(feature = "batch")]
use crate::kernels::{finish, le_at, F32s};
#[cfg(feature = "batch")]
use crate::slots::{bias_slot, weight_slot, SLOT_INPUT_MEAN, SLOT_INPUT_SCALE};
use crate::{Error, Model};

/// States evaluated together by [`Model::values`] and [`Model::select`] (when the
/// scratch holds [`Model::batch_scratch_len`] elements).
///
/// ```
/// assert_eq!(laq_runtime::BATCH, 8);
/// ```
pub const BATCH: usize = 8;

#[cfg(feature = "batch")]
/// One feature of every state of a group: lane `c` belongs to state `c`.
pub(crate) type Lanes = [f32; BATCH];

#[cfg(feature = "batch")]
/// `acc[c] += w * x[c]` for every lane.
#[inline(always)]
fn axpy(acc: &mut Lanes, w: f32, x: &Lanes) {
    for (a, &x) in acc.iter_mut().zip(x) {
        *a += w * x;
    }
}

#[cfg(all(feature = "batch", target_arch = "x86_64"))]
use crate::x86::layer_f32;

#[cfg(all(feature = "batch", not(target_arch = "x86_64")))]
use layer_f32_body as layer_f32;

#[cfg(feature = "batch")]
/// Aligned f32 weights `[rows, cols]`: four rows at a time, so that eight independent
/// vector sums hide the adder's latency. Inlined into each caller, so that on x86-64
/// `x86::layer_f32` compiles it once more with AVX.
#[inline(always)]
pub(crate) fn layer_f32_body(w: &[f32], bias: &[u8], x: &[Lanes], y: &mut [Lanes], relu: bool) {
    let cols = x.len();
    if cols == 0 {
        return;
    }
    let mut rows = w.chunks_exact(cols);
    let mut outs = y.chunks_exact_mut(4);
    let mut r = 0usize;
    for out in &mut outs {
        let (Some(r0), Some(r1), Some(r2), Some(r3)) =
            (rows.next(), rows.next(), rows.next(), rows.next())
        else {
            break;
        };
        let mut acc = [[0.0f32; BATCH]; 4];
        for ((((xj, &a), &b), &c), &d) in x.iter().zip(r0).zip(r1).zip(r2).zip(r3) {
            let [a0, a1, a2, a3] = &mut acc;
            axpy(a0, a, xj);
            axpy(a1, b, xj);
            axpy(a2, c, xj);
            axpy(a3, d, xj);
        }
        for (k, (o, a)) in out.iter_mut().zip(&acc).enumerate() {
            let b = le_at(bias, r + k);
            for (o, &a) in o.iter_mut().zip(a) {
                *o = finish(a, b, relu);
            }
        }
        r += 4;
    }
    for (row, o) in rows.zip(outs.into_remainder()) {
        let mut acc = [0.0f32; BATCH];
        for (xj, &wj) in x.iter().zip(row) {
            axpy(&mut acc, wj, xj);
        }
        let b = le_at(bias, r);
        for (o, &a) in o.iter_mut().zip(&acc) {
            *o = finish(a, b, relu);
        }
        r += 1;
    }
}

#[cfg(feature = "batch")]
/// Unaligned f32 weights (read byte-wise), one row at a time.
fn layer_bytes(w: &[u8], bias: &[u8], x: &[Lanes], y: &mut [Lanes], relu: bool) {
    let cols = x.len();
    for (r, o) in y.iter_mut().enumerate() {
        let mut acc = [0.0f32; BATCH];
        let start = r.saturating_mul(cols);
        for (j, xj) in x.iter().enumerate() {
            axpy(&mut acc, le_at(w, start.saturating_add(j)), xj);
        }
        let b = le_at(bias, r);
        for (o, &a) in o.iter_mut().zip(&acc) {
            *o = finish(a, b, relu);
        }
    }
}

impl Model<'_> {
    /// Whether [`Model::values`] evaluates this model [`BATCH`] states at a time: fully
    /// connected f32 models. Image models and models with int8 layers go one state at a
    /// time (an int8 layer quantises each state's activations with a scale of its own),
    /// and so does every model on hard-float ARM, where the one-state kernel is assembly
    /// (`arm::block4`) and the batched layer portable Rust: selecting among the 8 grid
    /// moves on a Cortex-M4 took 396 000 instructions batched, 102 000 one at a time.
    pub(crate) fn batches(&self) -> bool {
        if cfg!(any(
            not(feature = "batch"),
            all(target_arch = "arm", target_abi = "eabihf")
        )) {
            return false;
        }
        #[cfg(feature = "images")]
        let conv = self.layout.conv;
        #[cfg(not(feature = "images"))]
        let conv = 0;
        conv == 0 && self.layout.int8 == 0
    }

    /// Scratch (f32 elements) with which [`Model::values`] and [`Model::select`]
    /// evaluate [`BATCH`] states at a time; [`Model::scratch_len`] for image models,
    /// models with int8 layers and on hard-float ARM, which go one state at a time.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let model = laq_runtime::Model::new_checked(bytes)?;
    /// // BATCH states at a time with the `batch` feature, one otherwise.
    /// assert!(model.batch_scratch_len() >= model.scratch_len());
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn batch_scratch_len(&self) -> usize {
        if !self.batches() {
            return self.scratch_len();
        }
        let per_state = (self.input_dim() as u64).saturating_add(u64::from(self.layout.act_len));
        usize::try_from(per_state.saturating_mul(BATCH as u64)).unwrap_or(usize::MAX)
    }

    /// `V` of each state of `states` (`values.len()` states, row-major), ignoring the
    /// density gate: bit-identical to [`Model::value`] on each. With
    /// [`Model::batch_scratch_len`] elements of scratch a fully connected f32 model reads
    /// each weight once per [`BATCH`] states; with [`Model::scratch_len`] it goes one
    /// state at a time. Errors as [`Model::value`] (the first failing state's).
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// use laq_runtime::Model;
    ///
    /// let model = Model::new_checked(bytes)?;
    /// let states = [0.0, 0.0, 2.0, 2.0, 4.0, 4.0];
    /// let mut values = [0.0; 3];
    /// let mut scratch = vec![0.0; model.batch_scratch_len()];
    /// model.values(&states, &mut values, &mut scratch)?;
    /// assert_eq!(values[2], model.value(&[4.0, 4.0], &mut scratch)?);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn values(
        &self,
        states: &[f32],
        values: &mut [f32],
        scratch: &mut [f32],
    ) -> Result<(), Error> {
        let d = self.input_dim();
        if states.len() != values.len().saturating_mul(d) {
            return Err(Error::StateLength);
        }
        if !self.batches() || scratch.len() < self.batch_scratch_len() {
            for (s, v) in states.chunks_exact(d.max(1)).zip(values.iter_mut()) {
                *v = self.value(s, scratch)?;
            }
            return Ok(());
        }
        #[cfg(not(feature = "batch"))]
        return Ok(());
        #[cfg(feature = "batch")]
        {
            let mut group = [Ok(0.0f32); BATCH];
            for (s, v) in states
                .chunks(d.saturating_mul(BATCH).max(1))
                .zip(values.chunks_mut(BATCH))
            {
                let rows = s.chunks_exact(d.max(1));
                self.value_group(rows, &mut group, scratch)?;
                for (v, r) in v.iter_mut().zip(&group) {
                    *v = (*r)?;
                }
            }
            Ok(())
        }
    }

    #[cfg(feature = "batch")]
    /// V of up to [`BATCH`] states (each checked as [`Model::value`] checks it) into
    /// `out`, one result per state; lanes past the states are left as they are. Fails as
    /// a whole only when `scratch` is shorter than [`Model::batch_scratch_len`].
    pub(crate) fn value_group<'s, I>(
        &self,
        states: I,
        out: &mut [Result<f32, Error>; BATCH],
        scratch: &mut [f32],
    ) -> Result<(), Error>
    where
        I: Iterator<Item = &'s [f32]>,
    {
        let need = self.layout.act_len as usize;
        let buf = scratch
            .get_mut(..need.saturating_mul(BATCH))
            .ok_or(Error::BufferTooSmall)?;
        let buf: &mut [Lanes] =
            bytemuck::try_cast_slice_mut(buf).map_err(|_| Error::BufferTooSmall)?;
        // Lane `c` is state `c`'s; a state that fails its check is evaluated as zeros and
        // reported as failed.
        let mean = self.bytes(SLOT_INPUT_MEAN);
        let scale = self.bytes(SLOT_INPUT_SCALE);
        let mut used = 0usize;
        for (c, (s, r)) in states.zip(out.iter_mut()).enumerate() {
            *r = self.check_state(s).map(|()| 0.0);
            let ok = r.is_ok();
            for (j, lanes) in buf.iter_mut().take(self.input_dim()).enumerate() {
                if let Some(x) = lanes.get_mut(c) {
                    let v = s.get(j).copied().unwrap_or(0.0);
                    *x = if ok {
                        (v - le_at(mean, j)) * le_at(scale, j)
                    } else {
                        0.0
                    };
                }
            }
            used = c + 1;
        }
        let layers = self.num_layers();
        let mut front = true;
        let mut last = 0..0;
        for (i, pair) in self.layout.widths.windows(2).enumerate().take(layers) {
            let (cols, rows) = match pair {
                &[cols, rows] => (cols as usize, rows as usize),
                _ => (0, 0),
            };
            let bias = self.bytes(bias_slot(i));
            let relu = i + 1 < layers;
            // The single-state ping-pong, each element a group of lanes.
            let (x, y, out) = if front {
                let split = need.checked_sub(rows).ok_or(Error::BufferTooSmall)?;
                let (lo, hi) = buf
                    .split_at_mut_checked(split)
                    .ok_or(Error::BufferTooSmall)?;
                (
                    lo.get(..cols).ok_or(Error::BufferTooSmall)?,
                    hi,
                    split..need,
                )
            } else {
                let split = need.checked_sub(cols).ok_or(Error::BufferTooSmall)?;
                let (lo, hi) = buf
                    .split_at_mut_checked(split)
                    .ok_or(Error::BufferTooSmall)?;
                (
                    &*hi,
                    lo.get_mut(..rows).ok_or(Error::BufferTooSmall)?,
                    0..rows,
                )
            };
            match self.f32s(weight_slot(i)) {
                F32s::Aligned(w) => layer_f32(w, bias, x, y, relu),
                F32s::Bytes(w) => layer_bytes(w, bias, x, y, relu),
            }
            last = out;
            front = !front;
        }
        let y = buf.get(last).ok_or(Error::BufferTooSmall)?;
        for (c, r) in out.iter_mut().enumerate().take(used) {
            if r.is_ok() {
                let lane = y.iter().map(|l| l.get(c).copied().unwrap_or(f32::NAN));
                *r = self.head_value(lane).map(|(v, _)| v);
            }
        }
        Ok(())
    }
}
