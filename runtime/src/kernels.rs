//! Inner loops: dot products over weight rows read in place from the model bytes.
//!
//! Every f32 row is accumulated left to right, whatever the storage (aligned `&[f32]`
//! or unaligned bytes), so the aligned and byte-wise paths give bit-identical results,
//! and the host and the target compute the same values. Int8 rows are accumulated
//! exactly in integers (see `int8::matvec_i8`), hence equal everywhere too.

/// Weights of one layer: a run of little-endian f32 values inside the model bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum F32s<'a> {
    /// 4-aligned data on a little-endian target: read as `f32` directly.
    Aligned(&'a [f32]),
    /// Any other data: read with `f32::from_le_bytes`.
    Bytes(&'a [u8]),
}

impl<'a> F32s<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        #[cfg(target_endian = "little")]
        if let Ok(values) = bytemuck::try_cast_slice::<u8, f32>(bytes) {
            return F32s::Aligned(values);
        }
        F32s::Bytes(bytes)
    }

    /// Whether the data is read through the aligned fast path.
    pub(crate) fn is_aligned(self) -> bool {
        matches!(self, F32s::Aligned(_))
    }
}

/// The little-endian f32 at index `i` of `bytes` (0.0 past the end, which validated
/// tensors never reach). Used for the small per-row and per-input vectors.
#[inline]
pub(crate) fn le_at(bytes: &[u8], i: usize) -> f32 {
    let start = i.saturating_mul(4);
    match bytes.get(start..start.saturating_add(4)) {
        Some(chunk) => le(chunk),
        None => 0.0,
    }
}

/// Reads the little-endian f32 in a 4-byte chunk.
#[inline(always)]
fn le(chunk: &[u8]) -> f32 {
    match *chunk {
        [a, b, c, d] => f32::from_le_bytes([a, b, c, d]),
        _ => 0.0,
    }
}

/// Weights of one linear layer.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Weights<'a> {
    F32(F32s<'a>),
    /// Int8 weights with one f32 scale per output row: `w = q * scale[row]`.
    #[cfg(feature = "int8")]
    I8 {
        q: &'a [u8],
        scale: &'a [u8],
    },
}

/// Bias, then ReLU if asked.
#[inline(always)]
pub(crate) fn finish(sum: f32, bias: f32, relu: bool) -> f32 {
    let v = sum + bias;
    if relu && v < 0.0 {
        0.0
    } else {
        v
    }
}

/// `sum_j w[j] * x[j]`, accumulated left to right (the order every kernel uses).
#[inline(always)]
fn dot_f32(w: &[f32], x: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for (&w, &x) in w.iter().zip(x) {
        s += w * x;
    }
    s
}

#[cfg(not(all(target_arch = "arm", target_abi = "eabihf")))]
use crate::portable::block4_portable as block4;

#[cfg(all(target_arch = "arm", target_abi = "eabihf"))]
use crate::arm::block4;

/// `v[start..]`, empty if out of range.
#[inline(always)]
fn from(v: &[f32], start: usize) -> &[f32] {
    v.get(start..).unwrap_or(&[])
}

/// Aligned f32 weights, the fast path: four rows at a time through [`block4`] (the
/// columns in groups of four), then the leftover columns and rows. Every row is summed
/// left to right, so results equal [`dot_f32`]'s and the byte-wise path's.
// Out of line: inlined into `linear` next to the int8 code, its register allocation
// (hence its instruction count, docs/runtime.md) would depend on that code.
#[inline(never)]
fn matvec_f32(w: &[f32], bias: &[u8], x: &[f32], y: &mut [f32], relu: bool) {
    let cols = x.len();
    if cols == 0 {
        return;
    }
    let head = cols & !3;
    let (xh, xt) = x.split_at_checked(head).unwrap_or((x, &[]));
    let mut rows = w.chunks_exact(cols);
    let mut outs = y.chunks_exact_mut(4);
    let mut biases = bias.chunks_exact(16);
    for (out, b) in (&mut outs).zip(&mut biases) {
        let (Some(r0), Some(r1), Some(r2), Some(r3)) =
            (rows.next(), rows.next(), rows.next(), rows.next())
        else {
            break;
        };
        let [mut s0, mut s1, mut s2, mut s3] = block4(xh, [r0, r1, r2, r3]);
        if !xt.is_empty() {
            let tails = xt
                .iter()
                .zip(from(r0, head))
                .zip(from(r1, head))
                .zip(from(r2, head))
                .zip(from(r3, head));
            for ((((&xv, &a), &b), &c), &d) in tails {
                s0 += a * xv;
                s1 += b * xv;
                s2 += c * xv;
                s3 += d * xv;
            }
        }
        if let [o0, o1, o2, o3] = out {
            *o0 = finish(s0, le_at(b, 0), relu);
            *o1 = finish(s1, le_at(b, 1), relu);
            *o2 = finish(s2, le_at(b, 2), relu);
            *o3 = finish(s3, le_at(b, 3), relu);
        }
    }
    let rest = rows
        .zip(outs.into_remainder())
        .zip(biases.remainder().chunks_exact(4));
    for ((row, out), b) in rest {
        *out = finish(dot_f32(row, x), le(b), relu);
    }
}

/// Unaligned f32 weights, the fallback: one row at a time, read byte-wise.
fn matvec_le(w: &[u8], bias: &[u8], x: &[f32], y: &mut [f32], relu: bool) {
    let row_bytes = x.len().saturating_mul(4);
    if row_bytes == 0 {
        return;
    }
    for ((row, out), b) in w
        .chunks_exact(row_bytes)
        .zip(y.iter_mut())
        .zip(bias.chunks_exact(4))
    {
        let mut s = 0.0f32;
        for (w, &xv) in row.chunks_exact(4).zip(x) {
            s += le(w) * xv;
        }
        *out = finish(s, le(b), relu);
    }
}

/// `y = W x + b`, then ReLU if `relu`. `W` is `[y.len(), x.len()]`, row-major; `bias`
/// holds `y.len()` little-endian f32 values.
/// An int8 layer quantises `x` and packs it in place (see `int8::pack`): the input is
/// consumed. `x_max` is the input's largest magnitude (see `int8::magnitude`) where the
/// layer before returned it; an int8 layer returns its output's, so that the next one
/// need not search for it.
pub(crate) fn linear(
    weights: Weights<'_>,
    bias: &[u8],
    x: &mut [f32],
    x_max: Option<u32>,
    y: &mut [f32],
    relu: bool,
) -> Option<u32> {
    match weights {
        Weights::F32(w) => linear_f32(w, bias, x, y, relu),
        #[cfg(feature = "int8")]
        Weights::I8 { q, scale } => {
            return crate::int8::matvec_i8(q, scale, bias, x, x_max, y, relu)
        }
    }
    let _ = x_max;
    None
}

/// [`linear`] for f32 weights (the convolutions call it directly: they are never int8).
#[inline(always)]
pub(crate) fn linear_f32(w: F32s<'_>, bias: &[u8], x: &[f32], y: &mut [f32], relu: bool) {
    match w {
        F32s::Aligned(w) => matvec_f32(w, bias, x, y, relu),
        F32s::Bytes(w) => matvec_le(w, bias, x, y, relu),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "int8")]
    use crate::int8::{act_range, pack};
    use std::vec::Vec;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn blocked_rows_match_sequential_sums_on_every_path() {
        for (rows, cols) in [(9usize, 7usize), (4, 1), (3, 5), (16, 16), (1, 1)] {
            let x = values(cols, 1);
            let w = values(rows * cols, 2);
            let b = bytes(&values(rows, 3));
            let wb = bytes(&w);
            let mut shifted = std::vec![0u8];
            shifted.extend_from_slice(&wb);
            let mut a = std::vec![0.0f32; rows];
            let mut u = std::vec![0.0f32; rows];
            linear(
                Weights::F32(F32s::Aligned(&w)),
                &b,
                &mut x.clone(),
                None,
                &mut a,
                false,
            );
            linear(
                Weights::F32(F32s::Bytes(&shifted[1..])),
                &b,
                &mut x.clone(),
                None,
                &mut u,
                false,
            );
            assert_eq!(a, u);
            for (r, out) in a.iter().enumerate() {
                let row = &w[r * cols..(r + 1) * cols];
                let expect = row.iter().zip(&x).fold(0.0f32, |s, (w, x)| s + w * x) + le_at(&b, r);
                assert_eq!(*out, expect, "rows {rows} cols {cols} row {r}");
            }
        }
    }

    #[cfg(feature = "int8")]
    #[test]
    fn relu_and_int8_row_scale() {
        let x = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        let q: Vec<u8> = [1i8, -1, 2, -128, 127].iter().map(|&v| v as u8).collect();
        let mut q6 = Vec::new();
        for _ in 0..6 {
            q6.extend_from_slice(&q);
        }
        let scale = bytes(&[0.5, 0.5, 0.5, 0.5, 0.5, 0.25]);
        let bias = bytes(&[0.0, 0.0, 0.0, 0.0, -1000.0, 0.0]);
        let mut y = [0.0f32; 6];
        linear(
            Weights::I8 {
                q: &q6,
                scale: &scale,
            },
            &bias,
            &mut x.clone(),
            None,
            &mut y,
            true,
        );
        let dot = 1.0 - 2.0 + 6.0 - 512.0 + 635.0;
        let expect = [dot * 0.5, dot * 0.5, dot * 0.5, dot * 0.5, 0.0, dot * 0.25];
        for (got, want) in y.iter().zip(expect) {
            // Inputs are quantised to 1/32767 of the largest (5), sums cancel to 64.
            assert!((got - want).abs() <= 1e-2, "{got} vs {want}");
        }
    }

    /// The int8 kernel against a direct computation of its definition: inputs rounded to
    /// `-range..=range` with one scale (to the nearest, ties to even), exact integer
    /// sums, `sum * row_scale * x_scale + bias`; every column and row count the host's
    /// layout meets (one input per word, passes of two rows with a last one alone). The
    /// grouped layout of ARMv7E-M is checked on the target (`bench_mcu`'s 4-25-24-20-12-16-7
    /// model).
    #[cfg(feature = "int8")]
    #[test]
    fn int8_sums_are_exact() {
        for (rows, cols) in [
            (7usize, 1usize),
            (5, 2),
            (3, 3),
            (4, 4),
            (8, 5),
            (2, 8),
            (9, 12),
            (10, 16),
            (6, 21),
            (4, 128),
            (5, 513),
            (3, 1024),
        ] {
            let x = values(cols, 5);
            let w: Vec<u8> = values(rows * cols, 6)
                .iter()
                .enumerate()
                .map(|(k, v)| {
                    if k % 7 == 0 {
                        128u8
                    } else {
                        (v * 127.0) as i8 as u8
                    }
                })
                .collect();
            let scale = bytes(
                &values(rows, 7)
                    .iter()
                    .map(|v| v.abs() * 0.01)
                    .collect::<Vec<_>>(),
            );
            let bias = bytes(&values(rows, 8));
            // Rows starting 4-aligned and not, through the assembly and around it.
            for shift in [0usize, 1] {
                let mut store = std::vec![0u8; shift];
                store.extend_from_slice(&w);
                let q = &store[shift..];
                let mut y = std::vec![0.0f32; rows];
                let weights = Weights::I8 { q, scale: &scale };
                linear(weights, &bias, &mut x.clone(), None, &mut y, false);
                let max = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let range = act_range(cols) as f32;
                let inv = if max > 0.0 && max < f32::INFINITY {
                    range / max
                } else {
                    0.0
                };
                let xq: Vec<i64> = x
                    .iter()
                    .map(|&v| (v * inv).round_ties_even() as i64)
                    .collect();
                for (r, &got) in y.iter().enumerate() {
                    let row = &w[r * cols..(r + 1) * cols];
                    let sum: i64 = row
                        .iter()
                        .zip(&xq)
                        .map(|(&w, &x)| i64::from(w as i8) * x)
                        .sum();
                    assert!(sum.unsigned_abs() <= i32::MAX as u64);
                    let want =
                        (sum as i32) as f32 * le_at(&scale, r) * (max / range) + le_at(&bias, r);
                    assert_eq!(got, want, "rows {rows} cols {cols} shift {shift} row {r}");
                }
            }
        }
    }

    #[cfg(feature = "int8")]
    #[test]
    fn int8_portable_paths_agree() {
        for (rows, cols) in [
            (1usize, 1usize),
            (2, 3),
            (4, 4),
            (5, 7),
            (7, 8),
            (8, 13),
            (3, 128),
        ] {
            let mut x = values(cols, 11);
            let q: Vec<u8> = values(rows * cols, 12)
                .iter()
                .map(|v| (v * 128.0) as i8 as u8)
                .collect();
            let (packed, _) = pack(&mut x, None).unwrap();
            let mut a = std::vec![0i32; rows];
            let mut b = std::vec![1i32; rows];
            crate::portable::rows_i8_compact(&packed, &q, cols, &mut a);
            #[cfg(not(all(target_arch = "arm", target_abi = "eabihf", laq_dsp)))]
            crate::portable::rows_i8(&packed, &q, cols, &mut b);
            #[cfg(all(target_arch = "arm", target_abi = "eabihf", laq_dsp))]
            crate::arm::rows_i8(&packed, &q, cols, &mut b);
            assert_eq!(a, b, "rows {rows} cols {cols}");
        }
    }

    /// An input of zeros (a layer whose ReLUs are all off) gives the biases; one with a
    /// NaN gives NaN.
    #[cfg(feature = "int8")]
    #[test]
    fn int8_degenerate_inputs() {
        let (rows, cols) = (5usize, 16usize);
        let q: Vec<u8> = (0..rows * cols).map(|k| (k * 37 % 256) as u8).collect();
        let scale = bytes(&std::vec![0.01; rows]);
        let b = values(rows, 4);
        let bias = bytes(&b);
        let w = Weights::I8 {
            q: &q,
            scale: &scale,
        };
        let mut y = std::vec![0.0f32; rows];
        linear(w, &bias, &mut std::vec![0.0; cols], None, &mut y, false);
        assert_eq!(y, b);
        let mut x = values(cols, 5);
        x[3] = f32::NAN;
        linear(w, &bias, &mut x, None, &mut y, false);
        assert!(y.iter().all(|v| v.is_nan()), "{y:?}");
    }

    #[cfg(feature = "int8")]
    #[test]
    fn int8_range_bounds_every_sum() {
        for cols in [1usize, 4, 128, 512, 513, 1024, 4096, 1 << 20] {
            let range = act_range(cols);
            assert!(range <= i16::MAX as i32);
            assert!(
                cols as u64 * 128 * range as u64 <= i32::MAX as u64,
                "{cols}"
            );
        }
        assert_eq!(act_range(512), 32767);
        assert_eq!(act_range(1024), 16383);
    }
}
