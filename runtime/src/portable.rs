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

/// `sum_j row[j] * xq[j]` over the packed inputs of `x` (int8 weights read from any
/// address), exact in i32: the packing bounds every partial sum (`kernels::act_range`),
/// so the wrapping operations never wrap.
fn dot_i8(x: &Packed<'_>, row: &[u8]) -> i32 {
    let mut s = 0i32;
    for (j, &w) in row.iter().enumerate() {
        s = s.wrapping_add(i32::from(w as i8).wrapping_mul(x.get(j)));
    }
    s
}

/// Writes to `sums[r]` the int8 sum of row `r` of `q` (`sums.len()` rows of `cols`
/// bytes): the portable path, one row at a time.
pub(crate) fn rows_i8(x: &Packed<'_>, q: &[u8], cols: usize, sums: &mut [i32]) {
    for (s, row) in sums.iter_mut().zip(q.chunks_exact(cols.max(1))) {
        *s = dot_i8(x, row);
    }
}
