//! A fully connected layer, its element-wise parts (bias and ReLU), and a convolution as
//! that layer on gathered patches, with backward passes written for the CPU.
//!
//! Candle's own backward passes are correct but slow for LAQ's small networks: the bias
//! gradient is a reduction that divides two integers per element, the ReLU gradient
//! takes five tensor operations, and every node of the graph adds its gradient to a
//! fresh tensor of zeros. A layer as candle builds it is four nodes (transpose,
//! product, bias, ReLU); [`dense`] is one, and [`patch_dense`] folds a convolution's
//! patch gather (three nodes as candle builds it: a padded copy, `index_select`,
//! reshape) into it. These give the same values and the same gradients, bit for bit
//! (the products are the same `gemm` calls, the bias gradient sums the rows in the same
//! order, from zero), so trained models do not change; off the CPU, and for anything
//! but `f32`, candle's operations run as before.
//!
//! ```
//! use candle_core::{Device, Tensor};
//! let x = Tensor::new(&[[-1f32, 2.0], [3.0, -4.0]], &Device::Cpu)?;
//! let b = Tensor::new(&[0.5f32, 0.5], &Device::Cpu)?;
//! let y = laq::nn::ops::relu(&laq::nn::ops::add_bias(&x, &b)?)?;
//! assert_eq!(y.to_vec2::<f32>()?, [[0.0, 2.5], [3.5, 0.0]]);
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{CpuStorage, DType, Layout, Shape, Storage, Tensor};
use candle_nn::Linear;
use std::sync::{Arc, OnceLock};

/// `x [B, N] + b [N]` on every row.
pub fn add_bias(x: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    if fast(x) && fast(b) && x.rank() == 2 && b.rank() == 1 {
        x.contiguous()?.apply_op2(&b.contiguous()?, AddBias)
    } else {
        x.broadcast_add(b)
    }
}

/// `max(x, 0)`, element-wise.
pub fn relu(x: &Tensor) -> candle_core::Result<Tensor> {
    if fast(x) {
        x.contiguous()?.apply_op1(Relu)
    } else {
        x.relu()
    }
}

/// A linear layer, `x W^T + b`: [`dense`] without the ReLU.
pub fn linear(l: &Linear, x: &Tensor) -> candle_core::Result<Tensor> {
    dense(l, x, false)
}

/// What [`dense`] does where its single node does not apply: on `[B, in]` inputs candle's
/// product with the bias added by [`add_bias`], on others candle's layer itself.
fn layer_ops(l: &Linear, x: &Tensor) -> candle_core::Result<Tensor> {
    if x.rank() != 2 {
        return candle_nn::Module::forward(l, x);
    }
    let y = x.matmul(&l.weight().t()?)?;
    match l.bias() {
        Some(b) => add_bias(&y, b),
        None => Ok(y),
    }
}

/// The layer `l` on `[..., in]` inputs, `x W^T + b`, then a ReLU when `relu`: one node of
/// the graph. A contiguous input of rank 3 or 4 is multiplied as `[N, in]` rows, as
/// candle's `Linear` multiplies it. Without a bias, off the CPU, or on a strided input,
/// candle's product, [`add_bias`] and [`relu`], with the same values.
///
/// ```
/// use candle_core::{Device, Tensor};
/// let w = Tensor::new(&[[1f32, -1.0], [2.0, 0.0]], &Device::Cpu)?;
/// let b = Tensor::new(&[0.5f32, -5.0], &Device::Cpu)?;
/// let layer = candle_nn::Linear::new(w, Some(b));
/// let x = Tensor::new(&[[3f32, 1.0]], &Device::Cpu)?;
/// let y = laq::nn::ops::dense(&layer, &x, true)?;
/// assert_eq!(y.to_vec2::<f32>()?, [[2.5, 1.0]]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn dense(l: &Linear, x: &Tensor, relu: bool) -> candle_core::Result<Tensor> {
    let w = l.weight();
    let rows_of = |x: &Tensor| (2..=4).contains(&x.rank()) && x.is_contiguous();
    match l.bias() {
        Some(b) if fast(x) && fast(w) && fast(b) && w.rank() == 2 && rows_of(x) => {
            let op = Dense::new(relu);
            let dims = x.dims();
            let (lead, inputs) = dims.split_at(dims.len() - 1);
            let rows = x.reshape((lead.iter().product::<usize>(), inputs[0]))?;
            let y = rows.apply_op3(&w.contiguous()?, &b.contiguous()?, op)?;
            if lead.len() == 1 {
                Ok(y)
            } else {
                let mut shape = lead.to_vec();
                shape.push(w.dim(0)?);
                y.reshape(shape)
            }
        }
        _ => {
            let y = layer_ops(l, x)?;
            if relu {
                self::relu(&y)
            } else {
                Ok(y)
            }
        }
    }
}

fn fast(x: &Tensor) -> bool {
    x.device().is_cpu() && x.dtype() == DType::F32
}

/// The `f32` values of a CPU tensor's storage, in logical order, when contiguous.
fn values<'a>(s: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(v) = s else {
        candle_core::bail!("expected f32 values")
    };
    match l.contiguous_offsets() {
        Some((start, end)) => Ok(&v[start..end]),
        None => candle_core::bail!("expected a contiguous tensor"),
    }
}

/// Runs `f` on the `f32` values of a contiguous CPU tensor, in place.
fn with_values<T>(
    t: &Tensor,
    f: impl FnOnce(&[f32]) -> candle_core::Result<T>,
) -> candle_core::Result<T> {
    let (storage, layout) = t.storage_and_layout();
    match &*storage {
        Storage::Cpu(s) => f(values(s, layout)?),
        _ => candle_core::bail!("expected a CPU tensor"),
    }
}

/// `lhs [m, k] rhs [k, n]` as a row-major `[m, n]`, each operand given with its (row,
/// column) strides: the call candle's CPU matmul makes, so the same sums in the same order.
fn product(
    mnk: (usize, usize, usize),
    lhs: &[f32],
    lhs_strides: (usize, usize),
    rhs: &[f32],
    rhs_strides: (usize, usize),
) -> candle_core::Result<Vec<f32>> {
    product_into(mnk, lhs, lhs_strides, rhs, rhs_strides, false)
}

/// [`product`], written column-major (`[n, m]` row-major) when `columns`.
fn product_into(
    (m, n, k): (usize, usize, usize),
    lhs: &[f32],
    (lhs_rs, lhs_cs): (usize, usize),
    rhs: &[f32],
    (rhs_rs, rhs_cs): (usize, usize),
    columns: bool,
) -> candle_core::Result<Vec<f32>> {
    let mut dst = vec![0f32; m * n];
    if m == 0 || n == 0 || k == 0 {
        return Ok(dst);
    }
    let last = |rs: usize, cs: usize, rows: usize, cols: usize| (rows - 1) * rs + (cols - 1) * cs;
    if last(lhs_rs, lhs_cs, m, k) >= lhs.len() || last(rhs_rs, rhs_cs, k, n) >= rhs.len() {
        candle_core::bail!("matrix product operands shorter than their shapes")
    }
    let threads = candle_core::utils::get_num_threads();
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: every element the strides reach lies inside `lhs` and `rhs` (checked above),
    // and `dst` holds the m x n row-major result.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            if columns { m as isize } else { 1 },
            if columns { 1 } else { n as isize },
            false,
            lhs.as_ptr(),
            lhs_cs as isize,
            lhs_rs as isize,
            rhs.as_ptr(),
            rhs_cs as isize,
            rhs_rs as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        )
    }
    Ok(dst)
}

/// [`dense`]'s node. `zeros` records where the pre-activation was exactly zero: candle's
/// ReLU passes the gradient there (`x >= 0`), which the output alone cannot tell.
struct Dense {
    relu: bool,
    zeros: OnceLock<Vec<usize>>,
}

impl Dense {
    fn new(relu: bool) -> Self {
        Dense {
            relu,
            zeros: OnceLock::new(),
        }
    }

    /// `x [rows, in] W^T + b`, then the ReLU when `relu`, as a row-major `[rows, out]`.
    fn forward(
        &self,
        x: &[f32],
        w: &[f32],
        b: &[f32],
        (rows, inputs, outputs): (usize, usize, usize),
    ) -> candle_core::Result<Vec<f32>> {
        // x [rows, in] times the transposed view of w [out, in], as `linear` multiplies.
        // Written row-major, gemm copies w into its own layout first; written column-major,
        // it copies x instead, and the result must be transposed back. The sums are the
        // same either way: the cheaper copy wins (a transposed element counted as two).
        let columns = rows * (inputs + 2 * outputs) < outputs * inputs;
        let mnk = (rows, outputs, inputs);
        let mut y = product_into(mnk, x, (inputs, 1), w, (1, inputs), columns)?;
        if columns {
            // Back to rows, eight outputs at a time so the reads stay on a few cache lines.
            let yt = y;
            y = vec![0f32; rows * outputs];
            for o0 in (0..outputs).step_by(8) {
                let o1 = (o0 + 8).min(outputs);
                for (r, row) in y.chunks_exact_mut(outputs).enumerate() {
                    for o in o0..o1 {
                        row[o] = yt[o * rows + r];
                    }
                }
            }
        }
        for row in y.chunks_exact_mut(outputs.max(1)) {
            for (y, b) in row.iter_mut().zip(b) {
                *y += b;
            }
        }
        if self.relu {
            // Exact zeros are rare: a branch-free scan first, the indices only if needed.
            if y.iter().fold(false, |any, v| any | (*v == 0.0)) {
                let _ = self
                    .zeros
                    .set((0..y.len()).filter(|&i| y[i] == 0.0).collect());
            }
            for y in &mut y {
                *y = y.max(0.0);
            }
        }
        Ok(y)
    }

    /// The gradients of [`Dense::forward`] from the gradient of its output: of the input
    /// rows (only when `input`), of the weights and of the bias, as candle computes them.
    fn backward(
        &self,
        x: &[f32],
        w: &Tensor,
        res: &Tensor,
        grad: &Tensor,
        (rows, inputs, outputs): (usize, usize, usize),
        input: bool,
    ) -> candle_core::Result<DenseGrads> {
        let mut g: Vec<f32> = grad.flatten_all()?.to_vec1()?;
        if self.relu {
            let zeros = self.zeros.get().map(Vec::as_slice).unwrap_or_default();
            let res = res.contiguous()?;
            let kept: Vec<f32> = zeros.iter().map(|&i| g[i]).collect();
            with_values(&res, |r| {
                for (g, r) in g.iter_mut().zip(r) {
                    *g *= if *r > 0.0 { 1.0 } else { 0.0 };
                }
                Ok(())
            })?;
            for (&i, k) in zeros.iter().zip(kept) {
                g[i] = k * 1.0;
            }
        }
        // Candle adds each node's gradient to zeros before passing it on, which turns -0
        // into +0; the sums below must see the same signs.
        for g in &mut g {
            *g += 0.0;
        }
        let mut gb = vec![0f32; outputs];
        for row in g.chunks_exact(outputs.max(1)) {
            for (s, g) in gb.iter_mut().zip(row) {
                *s += g;
            }
        }
        // Candle's matmul backward: grad (w^T)^T for x.
        let gx = if input {
            Some(with_values(w, |w| {
                product((rows, inputs, outputs), &g, (outputs, 1), w, (inputs, 1))
            })?)
        } else {
            None
        };
        // Candle computes x^T grad and transposes it; grad^T x is the same sums of the same
        // products in the same order, written where they belong.
        let gw = product((outputs, inputs, rows), &g, (1, outputs), x, (inputs, 1))?;
        Ok(DenseGrads { gx, gw, gb })
    }
}

/// What [`Dense::backward`] gives: row-major host vectors.
struct DenseGrads {
    gx: Option<Vec<f32>>,
    gw: Vec<f32>,
    gb: Vec<f32>,
}

impl DenseGrads {
    /// As the backward pass returns them, the input's gradient in the input's `shape`.
    fn tensors(
        self,
        shape: &[usize],
        (outputs, inputs): (usize, usize),
        dev: &candle_core::Device,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        Ok((
            self.gx
                .map(|gx| Tensor::from_vec(gx, shape, dev))
                .transpose()?,
            Some(Tensor::from_vec(self.gw, (outputs, inputs), dev)?),
            Some(Tensor::from_vec(self.gb, outputs, dev)?),
        ))
    }
}

/// The sizes of a layer of weights `lw` and bias `lb` on `[rows, inputs]`, checked.
fn layer_sizes(
    rows: usize,
    inputs: usize,
    lx: &Layout,
    lw: &Layout,
    lb: &Layout,
) -> candle_core::Result<(usize, usize, usize)> {
    let (outputs, w_inputs) = lw.shape().dims2()?;
    if w_inputs != inputs || lb.shape().elem_count() != outputs {
        candle_core::bail!(
            "a layer of weights {:?} and bias {:?} on inputs {:?}",
            lw.shape(),
            lb.shape(),
            lx.shape()
        )
    }
    Ok((rows, inputs, outputs))
}

impl candle_core::CustomOp3 for Dense {
    fn name(&self) -> &'static str {
        "dense"
    }

    fn cpu_fwd(
        &self,
        sx: &CpuStorage,
        lx: &Layout,
        sw: &CpuStorage,
        lw: &Layout,
        sb: &CpuStorage,
        lb: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (x, w, b) = (values(sx, lx)?, values(sw, lw)?, values(sb, lb)?);
        let (rows, inputs) = lx.shape().dims2()?;
        let sizes = layer_sizes(rows, inputs, lx, lw, lb)?;
        let y = self.forward(x, w, b, sizes)?;
        Ok((CpuStorage::F32(y), Shape::from((rows, sizes.2))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (rows, inputs) = x.dims2()?;
        let sizes = (rows, inputs, w.dim(0)?);
        let grads = with_values(x, |xv| self.backward(xv, w, res, grad, sizes, x.track_op()))?;
        grads.tensors(x.dims(), (sizes.2, inputs), grad.device())
    }
}

/// Which pixel of a channels-last map every element of every output pixel's patch reads,
/// as runs: a patch row inside the map is one run of consecutive pixels, and elements
/// outside it a run of zeros. Built once per layer; [`patch_dense`] copies and adds whole
/// runs instead of one pixel at a time.
///
/// ```
/// // Two output pixels of a 1x3 map, patches of two: (0, 1) and (2, outside).
/// let p = laq::nn::ops::Patches::new(&[0, 1, 2, 3], 3);
/// assert_eq!(p.len(), 4);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patches {
    /// Pixels of the map read.
    pixels: usize,
    /// Patch elements, over every output pixel.
    len: usize,
    /// The first pixel of each run ([`Patches::ZERO`] for zeros) and its length.
    runs: Vec<(u32, u32)>,
}

impl Patches {
    const ZERO: u32 = u32::MAX;

    /// From the pixel of each patch element, in order; one at or past `pixels` reads zero.
    pub fn new(idx: &[u32], pixels: usize) -> Self {
        let mut runs: Vec<(u32, u32)> = vec![];
        for &j in idx {
            let j = if (j as usize) < pixels { j } else { Self::ZERO };
            match runs.last_mut() {
                Some((s, n))
                    if (*s == Self::ZERO && j == Self::ZERO)
                        || (*s != Self::ZERO && j != Self::ZERO && *s + *n == j) =>
                {
                    *n += 1
                }
                _ => runs.push((j, 1)),
            }
        }
        Patches {
            pixels,
            len: idx.len(),
            runs,
        }
    }

    /// Patch elements, over every output pixel.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A convolution as one node of the graph: each output pixel's patch is gathered from a
/// channels-last map `[B, P, C]` ([`Patches`]), then multiplied as [`dense`] multiplies
/// rows. The same values and gradients, bit for bit, as candle's `index_select` of the
/// patches from the map padded with a zero pixel, followed by [`dense`] (the gather
/// copies; the input's gradient is added back pixel by pixel in `index_add`'s order,
/// from zero), without the padded copy of the map, the zeroed patch buffer, and the two
/// zeroed gradients those nodes add. `None` where it does not apply (off the CPU, not
/// `f32`, no bias, a strided map): the caller takes candle's operations.
///
/// ```
/// use candle_core::{Device, Tensor};
/// // A 1x2 map of one channel; two output pixels, each a patch of (pixel, zero).
/// let w = Tensor::new(&[[2f32, 5.0]], &Device::Cpu)?;
/// let layer = candle_nn::Linear::new(w, Some(Tensor::new(&[1f32], &Device::Cpu)?));
/// let x = Tensor::new(&[[[3f32], [4.0]]], &Device::Cpu)?;
/// let patches = std::sync::Arc::new(laq::nn::ops::Patches::new(&[0, 2, 1, 2], 2));
/// let y = laq::nn::ops::patch_dense(&layer, &x, &patches, false)?.unwrap();
/// assert_eq!(y.to_vec3::<f32>()?, [[[7.0], [9.0]]]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn patch_dense(
    l: &Linear,
    x: &Tensor,
    patches: &Arc<Patches>,
    relu: bool,
) -> candle_core::Result<Option<Tensor>> {
    let w = l.weight();
    let Some(b) = l.bias() else {
        return Ok(None);
    };
    if !(fast(x) && fast(w) && fast(b) && x.rank() == 3 && w.rank() == 2 && x.is_contiguous()) {
        return Ok(None);
    }
    let (_, p, c) = x.dims3()?;
    let inputs = w.dim(1)?;
    if p != patches.pixels
        || c == 0
        || !inputs.is_multiple_of(c)
        || patches.is_empty()
        || !patches.len.is_multiple_of(inputs / c)
    {
        candle_core::bail!(
            "patches of {} elements over {} pixels and weights {:?} on a map {:?}",
            patches.len,
            patches.pixels,
            w.dims(),
            x.dims()
        )
    }
    let op = PatchDense {
        patches: patches.clone(),
        dense: Dense::new(relu),
        cols: OnceLock::new(),
    };
    x.apply_op3(&w.contiguous()?, &b.contiguous()?, op)
        .map(Some)
}

/// [`patch_dense`]'s node; `cols` keeps the gathered patches for the weights' gradient.
struct PatchDense {
    patches: Arc<Patches>,
    dense: Dense,
    cols: OnceLock<Vec<f32>>,
}

impl candle_core::CustomOp3 for PatchDense {
    fn name(&self) -> &'static str {
        "patch-dense"
    }

    fn cpu_fwd(
        &self,
        sx: &CpuStorage,
        lx: &Layout,
        sw: &CpuStorage,
        lw: &Layout,
        sb: &CpuStorage,
        lb: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (x, w, b) = (values(sx, lx)?, values(sw, lw)?, values(sb, lb)?);
        let (batch, p, c) = lx.shape().dims3()?;
        let inputs = lw.shape().dims2()?.1;
        let pixels = self.patches.len * c / inputs.max(1);
        let sizes = layer_sizes(batch * pixels, inputs, lx, lw, lb)?;
        let mut cols = Vec::with_capacity(batch * self.patches.len * c);
        for map in x.chunks_exact((p * c).max(1)).take(batch) {
            for &(start, n) in &self.patches.runs {
                let (start, n) = (start as usize, n as usize);
                if start == Patches::ZERO as usize {
                    cols.resize(cols.len() + n * c, 0.0);
                } else {
                    cols.extend_from_slice(&map[start * c..(start + n) * c]);
                }
            }
        }
        let y = self.dense.forward(&cols, w, b, sizes)?;
        let _ = self.cols.set(cols);
        Ok((CpuStorage::F32(y), Shape::from((batch, pixels, sizes.2))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (batch, p, c) = x.dims3()?;
        let (outputs, inputs) = w.dims2()?;
        let pixels = self.patches.len * c / inputs.max(1);
        let sizes = (batch * pixels, inputs, outputs);
        let Some(cols) = self.cols.get() else {
            candle_core::bail!("patch-dense: backward pass before its forward pass")
        };
        let grads = self
            .dense
            .backward(cols, w, res, grad, sizes, x.track_op())?;
        // Each patch element's gradient goes back to its pixel in the order of the
        // elements, as `index_add` adds them; the zeros' are dropped, as the padded
        // copy's were.
        let gx = grads.gx.as_ref().map(|gcols| {
            let mut gx = vec![0f32; batch * p * c];
            let per_map = self.patches.len * c;
            for (map, gc) in gx
                .chunks_exact_mut((p * c).max(1))
                .zip(gcols.chunks_exact(per_map.max(1)))
            {
                let mut at = 0;
                for &(start, n) in &self.patches.runs {
                    let (start, n) = (start as usize, n as usize);
                    if start != Patches::ZERO as usize {
                        let dst = &mut map[start * c..(start + n) * c];
                        for (d, g) in dst.iter_mut().zip(&gc[at..at + n * c]) {
                            *d += g;
                        }
                    }
                    at += n * c;
                }
            }
            gx
        });
        DenseGrads { gx, ..grads }.tensors(x.dims(), (outputs, inputs), grad.device())
    }
}

struct AddBias;

impl candle_core::CustomOp2 for AddBias {
    fn name(&self) -> &'static str {
        "add-bias"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (x, b) = (values(s1, l1)?, values(s2, l2)?);
        let (rows, n) = l1.shape().dims2()?;
        if b.len() != n {
            candle_core::bail!("bias of {} for rows of {n}", b.len())
        }
        let mut out = Vec::with_capacity(rows * n);
        for row in x.chunks_exact(n.max(1)) {
            out.extend(row.iter().zip(b).map(|(x, b)| x + b));
        }
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    fn bwd(
        &self,
        _x: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        // Candle sums a broadcast dimension row after row, from zero; so does this.
        let n = b.dim(0)?;
        let g: Vec<f32> = grad.flatten_all()?.to_vec1()?;
        let mut sum = vec![0f32; n];
        for row in g.chunks_exact(n.max(1)) {
            for (s, g) in sum.iter_mut().zip(row) {
                *s += g;
            }
        }
        Ok((
            Some(grad.clone()),
            Some(Tensor::from_vec(sum, n, grad.device())?),
        ))
    }
}

struct Relu;

impl candle_core::CustomOp1 for Relu {
    fn name(&self) -> &'static str {
        "relu"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = values(s, l)?.iter().map(|v| v.max(0.0)).collect();
        Ok((CpuStorage::F32(out), l.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        // Candle's gradient: grad * (x >= 0 ? 1 : 0), the product kept for its signed zeros.
        let xs: Vec<f32> = x.flatten_all()?.to_vec1()?;
        let gs: Vec<f32> = grad.flatten_all()?.to_vec1()?;
        let out: Vec<f32> = gs
            .iter()
            .zip(&xs)
            .map(|(g, x)| g * if *x >= 0.0 { 1.0 } else { 0.0 })
            .collect();
        Ok(Some(Tensor::from_vec(out, x.shape(), x.device())?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// Values and gradients equal candle's own operations bit for bit, on values that
    /// include zeros of both signs.
    #[test]
    fn same_values_and_gradients_as_candle() {
        let dev = Device::Cpu;
        let mut x: Vec<f32> = (0..6 * 5)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) / 3.0)
            .collect();
        x[3] = 0.0;
        x[4] = -0.0;
        let x = Var::from_vec(x, (6, 5), &dev).unwrap();
        let b = Var::from_vec(vec![0.25f32, -1.0, 0.0, 2.0, -0.5], 5, &dev).unwrap();
        let w = Tensor::new(&[1f32, -2.0, 3.0, 0.5, -0.25], &dev).unwrap();
        let loss = |y: Tensor| {
            y.broadcast_mul(&w)
                .unwrap()
                .sqr()
                .unwrap()
                .sum_all()
                .unwrap()
        };
        let ours = loss(relu(&add_bias(&x, &b).unwrap()).unwrap());
        let theirs = loss(x.broadcast_add(&b).unwrap().relu().unwrap());
        assert_eq!(bits(&ours), bits(&theirs));
        let (g1, g2) = (ours.backward().unwrap(), theirs.backward().unwrap());
        for v in [x.as_tensor(), b.as_tensor()] {
            assert_eq!(bits(g1.get(v).unwrap()), bits(g2.get(v).unwrap()));
        }
    }

    fn bits(t: &Tensor) -> Vec<u32> {
        let v: Vec<f32> = t.flatten_all().unwrap().to_vec1().unwrap();
        v.iter().map(|v| v.to_bits()).collect()
    }

    /// A two-layer chain of [`dense`] against candle's `Linear` and ReLU: outputs and the
    /// gradients of every weight, bias and (when it is a variable) the input, bit for bit,
    /// over shapes from one row and one input to the paper's 128-wide layers, as rows and
    /// as maps of rank 3 and 4, with exact zeros before the ReLU.
    #[test]
    fn dense_matches_candles_layer_bit_for_bit() {
        let dev = Device::Cpu;
        let mut seed = 7u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * 2.0
        };
        for (rows, inputs, hidden, outputs, input_var) in [
            (16, 4, 128, 8, false),
            (16, 128, 128, 128, true),
            (1, 1, 1, 1, true),
            (1, 3, 5, 2, false),
            (5, 7, 3, 1, true),
            (33, 9, 64, 17, true),
            (256, 4, 128, 8, false),
            (1000, 12, 256, 16, true),
            (4096, 3, 40, 5, false),
        ] {
            let x: Vec<f32> = (0..rows * inputs).map(|_| next()).collect();
            let var = |n: usize, shape: (usize, usize), next: &mut dyn FnMut() -> f32| {
                Var::from_vec((0..n).map(|_| next()).collect::<Vec<_>>(), shape, &dev).unwrap()
            };
            let w1 = var(hidden * inputs, (hidden, inputs), &mut next);
            let w2 = var(outputs * hidden, (outputs, hidden), &mut next);
            let mut bias1: Vec<f32> = (0..hidden).map(|_| next()).collect();
            // A hidden unit whose pre-activation is exactly zero on every row (a zero
            // weight row and bias), and one exactly -0.
            if hidden > 2 {
                let w: Vec<f32> = w1.flatten_all().unwrap().to_vec1().unwrap();
                let mut w = w;
                for i in 0..inputs {
                    w[inputs + i] = 0.0;
                    w[2 * inputs + i] = -0.0;
                }
                w1.set(&Tensor::from_vec(w, (hidden, inputs), &dev).unwrap())
                    .unwrap();
                bias1[1] = 0.0;
                bias1[2] = -0.0;
            }
            let b1 = Var::from_vec(bias1, hidden, &dev).unwrap();
            let b2 = var(outputs, (1, outputs), &mut next);
            let b2 = Var::from_tensor(&b2.flatten_all().unwrap()).unwrap();
            let xv = Var::from_vec(x, (rows, inputs), &dev).unwrap();
            let xt = if input_var {
                xv.as_tensor().clone()
            } else {
                xv.as_tensor().detach()
            };
            // Rows as they come, and as [2, rows / 2, in] and [2, 2, rows / 4, in] maps,
            // which candle's `Linear` multiplies as rows too.
            let mut leads = vec![vec![rows]];
            if rows % 2 == 0 {
                leads.push(vec![2, rows / 2]);
            }
            if rows % 4 == 0 {
                leads.push(vec![2, 2, rows / 4]);
            }
            for lead in leads {
                let mut shape = lead.clone();
                shape.push(inputs);
                let xt = xt.reshape(shape).unwrap();
                let l1 = Linear::new(w1.as_tensor().clone(), Some(b1.as_tensor().clone()));
                let l2 = Linear::new(w2.as_tensor().clone(), Some(b2.as_tensor().clone()));
                let loss = |y: Tensor| y.sqr().unwrap().sum_all().unwrap();
                let ours = dense(&l2, &dense(&l1, &xt, true).unwrap(), false).unwrap();
                let theirs = candle_nn::Module::forward(
                    &l2,
                    &candle_nn::Module::forward(&l1, &xt)
                        .unwrap()
                        .relu()
                        .unwrap(),
                )
                .unwrap();
                assert_eq!(
                    bits(&ours),
                    bits(&theirs),
                    "{lead:?}x{inputs}x{hidden}x{outputs}"
                );
                let (g1, g2) = (
                    loss(ours).backward().unwrap(),
                    loss(theirs).backward().unwrap(),
                );
                let mut vars = vec![
                    w1.as_tensor(),
                    b1.as_tensor(),
                    w2.as_tensor(),
                    b2.as_tensor(),
                ];
                if input_var {
                    vars.push(xv.as_tensor());
                }
                for v in vars {
                    assert_eq!(
                        bits(g1.get(v).unwrap()),
                        bits(g2.get(v).unwrap()),
                        "gradient of {:?} at {lead:?}x{inputs}x{hidden}x{outputs}",
                        v.dims()
                    );
                }
            }
        }
    }

    /// Runs join consecutive pixels and consecutive zeros, and nothing else.
    #[test]
    fn patches_run_over_consecutive_pixels() {
        let z = Patches::ZERO;
        assert_eq!(Patches::new(&[0, 1, 2, 3], 3).runs, [(0, 3), (z, 1)]);
        assert_eq!(
            Patches::new(&[5, 5, 0, 1, 9, 6, 2, 3], 6).runs,
            [(5, 1), (5, 1), (0, 2), (z, 2), (2, 2)]
        );
        assert!(Patches::new(&[], 4).is_empty());
    }

    /// A map or a layer that does not fit the patches is an error, not a panic.
    #[test]
    fn patches_that_do_not_fit_are_an_error() {
        let dev = Device::Cpu;
        let layer = Linear::new(
            Tensor::zeros((1, 2), DType::F32, &dev).unwrap(),
            Some(Tensor::zeros(1, DType::F32, &dev).unwrap()),
        );
        let patches = Arc::new(Patches::new(&[0, 2, 1, 2], 2));
        let fits = Tensor::zeros((1, 2, 1), DType::F32, &dev).unwrap();
        assert!(patch_dense(&layer, &fits, &patches, true)
            .unwrap()
            .is_some());
        for shape in [(1, 3, 1), (1, 2, 3), (1, 2, 4)] {
            let x = Tensor::zeros(shape, DType::F32, &dev).unwrap();
            assert!(
                patch_dense(&layer, &x, &patches, true).is_err(),
                "{shape:?}"
            );
        }
        let odd = Arc::new(Patches::new(&[0, 2, 1], 2));
        assert!(patch_dense(&layer, &fits, &odd, true).is_err());
        let unbiased = Linear::new(Tensor::zeros((1, 2), DType::F32, &dev).unwrap(), None);
        assert!(patch_dense(&unbiased, &fits, &patches, true)
            .unwrap()
            .is_none());
    }

    #[test]
    fn strided_relu_and_bad_bias() {
        let dev = Device::Cpu;
        let x = Tensor::new(&[[-1f32, 2.0], [3.0, -4.0]], &dev).unwrap();
        let t = relu(&x.t().unwrap()).unwrap();
        assert_eq!(t.to_vec2::<f32>().unwrap(), [[0.0, 3.0], [2.0, 0.0]]);
        let b = Tensor::new(&[1f32, 2.0, 3.0], &dev).unwrap();
        assert!(add_bias(&x, &b).is_err());
    }
}
