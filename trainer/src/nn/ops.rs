//! The element-wise parts of a fully connected layer (bias and ReLU) with backward passes
//! written for the CPU.
//!
//! Candle's own backward passes are correct but slow for LAQ's small networks: the bias
//! gradient is a reduction that divides two integers per element, and the ReLU gradient
//! takes five tensor operations. Together they were a fifth of a mining step. These give
//! the same values and the same gradients, bit for bit (the bias gradient sums the rows
//! in the same order, from zero), so trained models do not change; off the CPU, and for
//! anything but `f32`, candle's operations run as before.
//!
//! ```
//! use candle_core::{Device, Tensor};
//! let x = Tensor::new(&[[-1f32, 2.0], [3.0, -4.0]], &Device::Cpu)?;
//! let b = Tensor::new(&[0.5f32, 0.5], &Device::Cpu)?;
//! let y = laq::nn::ops::relu(&laq::nn::ops::add_bias(&x, &b)?)?;
//! assert_eq!(y.to_vec2::<f32>()?, [[0.0, 2.5], [3.5, 0.0]]);
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{CpuStorage, DType, Layout, Shape, Tensor};
use candle_nn::Linear;

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

/// A linear layer: on `[B, in]` inputs candle's [`Linear`] with the bias added by
/// [`add_bias`], on others candle's layer itself.
pub fn linear(l: &Linear, x: &Tensor) -> candle_core::Result<Tensor> {
    if x.rank() != 2 {
        return candle_nn::Module::forward(l, x);
    }
    let y = x.matmul(&l.weight().t()?)?;
    match l.bias() {
        Some(b) => add_bias(&y, b),
        None => Ok(y),
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
        let bits = |t: &Tensor| -> Vec<u32> {
            let v: Vec<f32> = t.flatten_all().unwrap().to_vec1().unwrap();
            v.iter().map(|v| v.to_bits()).collect()
        };
        assert_eq!(bits(&ours), bits(&theirs));
        let (g1, g2) = (ours.backward().unwrap(), theirs.backward().unwrap());
        for v in [x.as_tensor(), b.as_tensor()] {
            assert_eq!(bits(g1.get(v).unwrap()), bits(g2.get(v).unwrap()));
        }
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
