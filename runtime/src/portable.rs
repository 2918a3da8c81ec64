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

/// `s + sum_k w[k] * xq[k]` over four weights (see [`mac`]).
#[cfg(all(
    feature = "int8",
    not(all(target_arch = "arm", target_abi = "eabihf", laq_dsp))
))]
#[inline(always)]
fn dot4(s: i32, w: &[u8], xq: [i32; 4]) -> i32 {
    let &[w0, w1, w2, w3] = w else {
        return s;
    };
    let [x0, x1, x2, x3] = xq;
    let p = |w: u8, x: i32| i32::from(w as i8).wrapping_mul(x);
    s.wrapping_add(p(w0, x0))
        .wrapping_add(p(w1, x1))
        .wrapping_add(p(w2, x2))
        .wrapping_add(p(w3, x3))
}

/// Writes to `sums[r]` the int8 sum `sum_j q[r][j] * xq[j]` of row `r` of `q`
/// (`sums.len()` rows of `cols` bytes, read from any address): the portable path.
/// Three rows at a time, so that they share the unpacking of each group of inputs.
#[cfg(all(
    feature = "int8",
    not(all(target_arch = "arm", target_abi = "eabihf", laq_dsp))
))]
pub(crate) fn rows_i8(x: &Packed<'_>, q: &[u8], cols: usize, sums: &mut [i32]) {
    let head = 4 * x.groups();
    let mut rows = q.chunks_exact(cols.max(1));
    for out in sums.chunks_mut(3) {
        let Some(r0) = rows.next() else {
            break;
        };
        // A pass of fewer than three rows repeats its last row.
        let r1 = if out.len() > 1 { rows.next() } else { None }.unwrap_or(r0);
        let r2 = if out.len() > 2 { rows.next() } else { None }.unwrap_or(r1);
        let (mut s0, mut s1, mut s2) = (0i32, 0i32, 0i32);
        let groups = x.words().chunks_exact(2).take(x.groups());
        let [w0, w1, w2] = [r0, r1, r2].map(|r| r.chunks_exact(4));
        for (((pair, w0), w1), w2) in groups.zip(w0).zip(w1).zip(w2) {
            let &[a, b] = pair else {
                continue;
            };
            // Inputs 0 and 2 are the halves of `a`, 1 and 3 those of `b`.
            let xq = [
                i32::from(a as i16),
                i32::from(b as i16),
                i32::from((a >> 16) as i16),
                i32::from((b >> 16) as i16),
            ];
            s0 = dot4(s0, w0, xq);
            s1 = dot4(s1, w1, xq);
            s2 = dot4(s2, w2, xq);
        }
        let mut s = [s0, s1, s2];
        for (s, row) in s.iter_mut().zip([r0, r1, r2]) {
            for (j, &w) in row.iter().enumerate().skip(head) {
                mac(s, w, x.get(j));
            }
        }
        for (o, s) in out.iter_mut().zip(s) {
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

/// Packs `groups` groups of four inputs in place (see `int8::Packed`): group `g`
/// moves from words `4g..` to `2g..`, never over a group still to be read.
#[cfg(all(
    feature = "int8",
    not(all(target_arch = "arm", target_abi = "eabihf", laq_dsp))
))]
pub(crate) fn pack_groups(words: &mut [u32], groups: usize, inv: f32) {
    use crate::int8::level;
    for g in 0..groups {
        if let Some(&[v0, v1, v2, v3]) = words.get(4 * g..4 * g + 4) {
            if let Some([a, b]) = words.get_mut(2 * g..2 * g + 2) {
                *a = level(v0, inv) | level(v2, inv) << 16;
                *b = level(v1, inv) | level(v3, inv) << 16;
            }
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
