//! Inner loops: dot products over weight rows read in place from the model bytes.
//!
//! Every f32 row is accumulated left to right, whatever the storage (aligned `&[f32]`
//! or unaligned bytes), so the aligned and byte-wise paths give bit-identical results,
//! and the host and the target compute the same values. Int8 rows are accumulated
//! exactly in integers (see [`matvec_i8`]), hence equal everywhere too.

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

/// Marks the end of the packed groups for the assembly loop (`arm::passes_i8`): a word
/// whose low half is -32768, which no activation takes (they lie in `-32767..=32767`).
pub(crate) const PACKED_END: u32 = 0x8000_8000;

/// The largest |activation| of a layer with `cols` inputs once quantised to integers:
/// with int8 weights (|w| <= 128) every partial sum of a row is bounded by
/// `cols * 128 * range <= i32::MAX`, so the i32 accumulators never overflow; 32 767
/// (int16) up to 512 columns, fewer levels beyond.
fn act_range(cols: usize) -> i32 {
    let per_level = u32::try_from(cols)
        .unwrap_or(u32::MAX)
        .saturating_mul(128)
        .max(1);
    (i32::MAX as u32 / per_level).min(i16::MAX as u32) as i32
}

/// A layer's input quantised to integers `xq` (`x ~ xq * scale`) and packed in place
/// over its f32 values, in the order the dual 16-bit multiply-accumulate wants.
///
/// Each group of four inputs `x0..x3` becomes two words, `x0 | x2 << 16` then
/// `x1 | x3 << 16`: sign-extending bytes 0 and 2 of a word of four int8 weights gives
/// the pair `(w0, w2)`, bytes 1 and 3 the pair `(w1, w3)`, each multiplied with its
/// word by one instruction. With at least two groups, [`PACKED_END`] follows them
/// (the assembly loop stops on it). The `cols % 4` last inputs stay where they were,
/// one word each (offset by 32 768). Built only by [`pack`], which upholds these
/// invariants for the assembly.
pub(crate) struct Packed<'a> {
    words: &'a [u32],
    groups: usize,
}

impl Packed<'_> {
    /// The whole buffer, `x.len()` words, starting with the `2 * groups()` of the groups.
    pub(crate) fn words(&self) -> &[u32] {
        self.words
    }

    /// Complete groups of four inputs.
    pub(crate) fn groups(&self) -> usize {
        self.groups
    }

    /// Input `j` as quantised: in a group, the half of its pair's word (inputs 0 and 2
    /// of a group in the first word, 1 and 3 in the second); past the groups, a word.
    #[inline(always)]
    pub(crate) fn get(&self, j: usize) -> i32 {
        let in_groups = j < 4 * self.groups;
        let at = if in_groups { j / 4 * 2 + j % 2 } else { j };
        let w = self.words.get(at).copied().unwrap_or(0);
        if in_groups {
            i32::from((w >> ((j & 2) * 8)) as i16)
        } else {
            (w as i32).wrapping_sub(32768)
        }
    }
}

/// Quantises `x` to `-range..=range` with one scale for the whole vector (its largest
/// magnitude maps to `range`, see [`act_range`]) and packs it in place (see
/// [`Packed`]); returns the packing and the largest magnitude.
///
/// `v * inv + 32768.5` lies in `0.5..=65535.5` (|v| <= max), so the conversion, which
/// truncates, rounds `v * inv` to the nearest integer plus 32 768; the 16-bit halves
/// of a packed word then become two's complement with one `^ 0x8000_8000`. An input
/// with an infinity or a NaN gives a scale that is not finite, so the outputs are not
/// either (their bits may differ between targets); such inputs quantise to -32 768.
fn pack(x: &mut [f32]) -> Option<(Packed<'_>, f32)> {
    let cols = x.len();
    // The largest magnitude, compared as bits without the sign (monotonic in |v|).
    let mut max_bits = 0u32;
    for &v in x.iter() {
        max_bits = max_bits.max(v.to_bits() << 1);
    }
    // At least 2^-100, so that an input of zeros (a layer whose ReLUs are all off)
    // quantises to zeros with a finite `inv`.
    let max = f32::from_bits((max_bits >> 1).max(0x0d80_0000));
    let range = act_range(cols) as f32;
    let inv = range / max;
    let words: &mut [u32] = bytemuck::try_cast_slice_mut(x).ok()?;
    for w in words.iter_mut() {
        *w = (f32::from_bits(*w) * inv + 32768.5) as u32;
    }
    let groups = cols / 4;
    // Group `g` moves from words 4g.. to 2g..: never over a group still to be read.
    for g in 0..groups {
        if let Some(&[q0, q1, q2, q3]) = words.get(4 * g..4 * g + 4) {
            if let Some([a, b]) = words.get_mut(2 * g..2 * g + 2) {
                *a = (q0 | q2 << 16) ^ 0x8000_8000;
                *b = (q1 | q3 << 16) ^ 0x8000_8000;
            }
        }
    }
    if groups >= 2 {
        if let Some(w) = words.get_mut(2 * groups) {
            *w = PACKED_END;
        }
    }
    Some((Packed { words, groups }, max))
}

#[cfg(not(all(target_arch = "arm", target_abi = "eabihf", laq_dsp)))]
use crate::portable::rows_i8;

#[cfg(all(target_arch = "arm", target_abi = "eabihf", laq_dsp))]
use crate::arm::rows_i8;

/// Int8 weights with one scale per row: the input quantised once to integers (see
/// [`pack`]), each row's sum accumulated exactly in i32, then `sum * row_scale *
/// x_scale + bias`. Integer sums do not depend on the order or the instructions, so the
/// assembly and the portable code give the same sums, and the same f32 rescale gives
/// bit-identical values on every target.
fn matvec_i8(q: &[u8], scale: &[u8], bias: &[u8], x: &mut [f32], y: &mut [f32], relu: bool) {
    let cols = x.len();
    if cols == 0 {
        return;
    }
    let Some((packed, max)) = pack(x) else {
        return;
    };
    // The sums go to `y` first (as i32), then each becomes its f32 value in place.
    let Ok(sums) = bytemuck::try_cast_slice_mut::<f32, i32>(y) else {
        return;
    };
    rows_i8(&packed, q, cols, sums);
    let x_scale = max / act_range(cols) as f32;
    let rows = scale.chunks_exact(4).zip(bias.chunks_exact(4));
    for (v, (sc, b)) in y.iter_mut().zip(rows) {
        let s = v.to_bits() as i32;
        *v = finish(s as f32 * le(sc) * x_scale, le(b), relu);
    }
}

/// `y = W x + b`, then ReLU if `relu`. `W` is `[y.len(), x.len()]`, row-major; `bias`
/// holds `y.len()` little-endian f32 values.
/// An int8 layer quantises `x` and packs it in place (see [`pack`]): the input is
/// consumed.
pub(crate) fn linear(weights: Weights<'_>, bias: &[u8], x: &mut [f32], y: &mut [f32], relu: bool) {
    match weights {
        Weights::F32(F32s::Aligned(w)) => matvec_f32(w, bias, x, y, relu),
        Weights::F32(F32s::Bytes(w)) => matvec_le(w, bias, x, y, relu),
        Weights::I8 { q, scale } => matvec_i8(q, scale, bias, x, y, relu),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
                &mut a,
                false,
            );
            linear(
                Weights::F32(F32s::Bytes(&shifted[1..])),
                &b,
                &mut x.clone(),
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
    /// `-range..=range` with one scale, exact integer sums, `sum * row_scale * x_scale +
    /// bias`; every column count's layout (odd groups, tails, the marker) and row count's
    /// passes (a last pass of one or two rows).
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
                linear(weights, &bias, &mut x.clone(), &mut y, false);
                let max = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let range = act_range(cols) as f32;
                let inv = if max > 0.0 && max < f32::INFINITY {
                    range / max
                } else {
                    0.0
                };
                let xq: Vec<i64> = x
                    .iter()
                    .map(|&v| ((v * inv + 32768.5) as i64) - 32768)
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
            let (packed, _) = pack(&mut x).unwrap();
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
        linear(w, &bias, &mut std::vec![0.0; cols], &mut y, false);
        assert_eq!(y, b);
        let mut x = values(cols, 5);
        x[3] = f32::NAN;
        linear(w, &bias, &mut x, &mut y, false);
        assert!(y.iter().all(|v| v.is_nan()), "{y:?}");
    }

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
