//! The portable inner loops: the four-row block of the f32 kernel and the int8 sums.
//! [`crate::kernels`] runs them wherever the assembly does not: `arm::block4` on
//! hard-float ARM and `arm::rows_i8` on ARMv7E-M compute the same sums (and fall back to
//! these functions where their preconditions do not hold).

#[cfg(feature = "int8")]
use crate::int8::{magnitude, Packed};
#[cfg(feature = "int8")]
use crate::kernels::le_at;

/// `[sum_j rows[k][j] * x[j]; 4]` over the columns of `x`, for a multiple of 4
/// columns, each row accumulated left to right. Portable version: blocks of 4 rows x
/// 4 columns, so each `x[j]` is loaded once for four rows and the four independent
/// sums hide the FPU's latency.
pub(crate) fn block4_portable(x: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
    let [r0, r1, r2, r3] = rows;
    let (mut s0, mut s1, mut s2, mut s3) = (0.0f32, 0.0f32, 0.0f32, 0.0f32);
    let quads = x
        .chunks_exact(4)
        .zip(r0.chunks_exact(4))
        .zip(r1.chunks_exact(4))
        .zip(r2.chunks_exact(4))
        .zip(r3.chunks_exact(4));
    for ((((xq, a), b), c), d) in quads {
        if let (
            [x0, x1, x2, x3],
            [a0, a1, a2, a3],
            [b0, b1, b2, b3],
            [c0, c1, c2, c3],
            [d0, d1, d2, d3],
        ) = (xq, a, b, c, d)
        {
            s0 += a0 * x0;
            s1 += b0 * x0;
            s2 += c0 * x0;
            s3 += d0 * x0;
            s0 += a1 * x1;
            s1 += b1 * x1;
            s2 += c1 * x1;
            s3 += d1 * x1;
            s0 += a2 * x2;
            s1 += b2 * x2;
            s2 += c2 * x2;
            s3 += d2 * x2;
            s0 += a3 * x3;
            s1 += b3 * x3;
            s2 += c3 * x3;
            s3 += d3 * x3;
        }
    }
    [s0, s1, s2, s3]
}

/// `w * xq` added to `s`: exact, since the packing bounds every partial sum
/// (`int8::act_range`), so the wrapping operations never wrap.
#[cfg(feature = "int8")]
#[inline(always)]
fn mac(s: &mut i32, w: u8, xq: i32) {
    *s = s.wrapping_add(i32::from(w as i8).wrapping_mul(xq));
}

/// Writes to `sums[r]` the int8 sum `sum_j q[r][j] * xq[j]` of row `r` of `q`
/// (`sums.len()` rows of `cols` bytes, read from any address): the portable path, where
/// `int8::pack` leaves one input per word (no groups). Two rows at a time, so that they
/// share each input's load.
#[cfg(all(
    feature = "int8",
    not(all(target_arch = "arm", target_abi = "eabihf", laq_dsp))
))]
pub(crate) fn rows_i8(x: &Packed<'_>, q: &[u8], cols: usize, sums: &mut [i32]) {
    let xs = x.words();
    let mut rows = q.chunks_exact(cols.max(1));
    for out in sums.chunks_mut(2) {
        let Some(r0) = rows.next() else {
            break;
        };
        // A pass of one row repeats it.
        let r1 = if out.len() > 1 { rows.next() } else { None }.unwrap_or(r0);
        let (mut s0, mut s1) = (0i32, 0i32);
        for ((&xv, &a), &b) in xs.iter().zip(r0).zip(r1) {
            mac(&mut s0, a, xv as i32);
            mac(&mut s1, b, xv as i32);
        }
        for (o, s) in out.iter_mut().zip([s0, s1]) {
            *o = s;
        }
    }
}

/// What `rows_i8` computes, in less code (one input at a time): the fallback of
/// `arm::rows_i8`, where the assembly does the work and flash is scarce.
#[cfg(all(
    feature = "int8",
    any(test, all(target_arch = "arm", target_abi = "eabihf", laq_dsp))
))]
pub(crate) fn rows_i8_compact(x: &Packed<'_>, q: &[u8], cols: usize, sums: &mut [i32]) {
    for (s, row) in sums.iter_mut().zip(q.chunks_exact(cols.max(1))) {
        *s = 0;
        for (j, &w) in row.iter().enumerate() {
            mac(s, w, x.get(j));
        }
    }
}

/// Turns the int8 layer's row sums in `y` (i32 bits) into its outputs in place: `sum *
/// scale[r] * x_scale + bias[r]` (two products and a sum, each rounded, in that order),
/// then, if `relu`, every value whose sign bit is set becomes +0.0 (a NaN stays a NaN:
/// the scales make it positive). Returns the largest magnitude (see
/// `int8::magnitude`).
#[cfg(feature = "int8")]
pub(crate) fn rescale(y: &mut [f32], scale: &[u8], bias: &[u8], x_scale: f32, relu: bool) -> u32 {
    let mut max = 0;
    for (r, v) in y.iter_mut().enumerate() {
        let sum = v.to_bits() as i32;
        let mut bits = (sum as f32 * le_at(scale, r) * x_scale + le_at(bias, r)).to_bits();
        if relu {
            bits &= !((bits as i32 >> 31) as u32);
        }
        *v = f32::from_bits(bits);
        max = max.max(magnitude(*v));
    }
    max
}
