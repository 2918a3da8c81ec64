//! The portable inner loops: the four-row block of the f32 kernel and the three-row
//! int8 sums, what [`crate::kernels`] runs on every target but hard-float ARM, where
//! `arm::block4` and `arm::dot3_i8` compute the same sums in assembly (and fall back to
//! these functions where their preconditions do not hold).

use crate::kernels::Packed;

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

/// `[sum_j rows[k][j] * xq[j]; 3]` over the complete groups of four inputs of `x`
/// (int8 weights, one row per sum, read from any address), exact in i32: the packing
/// bounds every partial sum (`kernels::act_range`), so the wrapping operations never
/// wrap.
pub(crate) fn dot3_i8(x: &Packed<'_>, rows: [&[u8]; 3]) -> [i32; 3] {
    let [r0, r1, r2] = rows.map(|r| r.chunks_exact(4));
    let pairs = x.words().chunks_exact(2).take(x.groups());
    let mut sums = [0i32; 3];
    for (((pair, w0), w1), w2) in pairs.zip(r0).zip(r1).zip(r2) {
        let &[a, b] = pair else {
            continue;
        };
        // Inputs 0 and 2 are the halves of `a`, 1 and 3 those of `b`.
        let xq = [a as i16, b as i16, (a >> 16) as i16, (b >> 16) as i16].map(i32::from);
        for (s, w) in sums.iter_mut().zip([w0, w1, w2]) {
            for (&w, x) in w.iter().zip(xq) {
                *s = s.wrapping_add(i32::from(w as i8).wrapping_mul(x));
            }
        }
    }
    sums
}

/// Writes to `sums[r]` the int8 sum ([`dot3_i8`]) of row `r` of `q` (`sums.len()` rows
/// of `cols` bytes), three rows at a time.
#[inline(always)]
pub(crate) fn rows3_i8(x: &Packed<'_>, q: &[u8], cols: usize, sums: &mut [i32]) {
    let mut rows = q.chunks_exact(cols.max(1));
    for out in sums.chunks_mut(3) {
        let Some(r0) = rows.next() else {
            break;
        };
        // A pass of fewer than three rows repeats its last row.
        let r1 = if out.len() > 1 { rows.next() } else { None }.unwrap_or(r0);
        let r2 = if out.len() > 2 { rows.next() } else { None }.unwrap_or(r1);
        for (o, s) in out.iter_mut().zip(dot3_i8(x, [r0, r1, r2])) {
            *o = s;
        }
    }
}
