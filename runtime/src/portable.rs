//! The portable four-row block of the f32 inner loop: what [`crate::kernels`] runs on
//! every target but hard-float ARM, where `arm::block4` computes the same sums in
//! assembly (and falls back to this function on rows too short for it).

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
