//! Int8 linear layers (the `int8` feature): the input quantised once to integers and
//! packed in place, each row's sum accumulated exactly in i32 (`arm::rows_i8` in
//! assembly on ARMv7E-M, `portable::rows_i8` elsewhere), then one f32 rescale per row.
//! Integer sums do not depend on the order, so every target gives the same values.

/// Marks the end of the packed groups for the assembly loop (`arm::passes_i8`): a word
/// whose low half is -32768, which no activation takes (they lie in `-32767..=32767`).
pub(crate) const PACKED_END: u32 = 0x8000_8000;

/// The largest |activation| of a layer with `cols` inputs once quantised to integers:
/// with int8 weights (|w| <= 128) every partial sum of a row is bounded by
/// `cols * 128 * range <= i32::MAX`, so the i32 accumulators never overflow; 32 767
/// (int16) up to 512 columns, fewer levels beyond.
pub(crate) fn act_range(cols: usize) -> i32 {
    let per_level = u32::try_from(cols)
        .unwrap_or(u32::MAX)
        .saturating_mul(128)
        .max(1);
    (i32::MAX as u32 / per_level).min(i16::MAX as u32) as i32
}

/// A layer's input quantised to integers `xq` (`x ~ xq * scale`) and packed in place
/// over its f32 values.
///
/// With the DSP extension (ARMv7E-M), in the order its dual 16-bit multiply-accumulate
/// wants: each group of four inputs `x0..x3` becomes two words, `x0 | x2 << 16` then
/// `x1 | x3 << 16`: sign-extending bytes 0 and 2 of a word of four int8 weights gives
/// the pair `(w0, w2)`, bytes 1 and 3 the pair `(w1, w3)`, each multiplied with its
/// word by one instruction. With at least two groups, [`PACKED_END`] follows them
/// (the assembly loop stops on it). The `cols % 4` last inputs stay where they were.
/// Elsewhere there are no groups. An input outside the groups is one word, its integer
/// sign-extended. Built only by [`pack`], which upholds these invariants for the
/// assembly.
pub(crate) struct Packed<'a> {
    words: &'a [u32],
    #[cfg_attr(
        not(any(test, all(target_arch = "arm", target_abi = "eabihf", laq_dsp))),
        allow(dead_code)
    )]
    groups: usize,
}

impl Packed<'_> {
    /// The whole buffer, `x.len()` words, starting with the `2 * groups()` of the groups.
    pub(crate) fn words(&self) -> &[u32] {
        self.words
    }

    /// Complete groups of four inputs.
    #[cfg(all(target_arch = "arm", target_abi = "eabihf", laq_dsp))]
    pub(crate) fn groups(&self) -> usize {
        self.groups
    }

    /// Input `j` as quantised: in a group, the half of its pair's word (inputs 0 and 2
    /// of a group in the first word, 1 and 3 in the second); past the groups, a word.
    #[cfg(any(test, all(target_arch = "arm", target_abi = "eabihf", laq_dsp)))]
    #[inline(always)]
    pub(crate) fn get(&self, j: usize) -> i32 {
        let in_groups = j < 4 * self.groups;
        let at = if in_groups { j / 4 * 2 + j % 2 } else { j };
        let w = self.words.get(at).copied().unwrap_or(0);
        let shift = if in_groups { (j & 2) * 8 } else { 0 };
        i32::from((w >> shift) as i16)
    }
}

/// `1.5 * 2^23`: adding it to a float `v` with `|v| < 2^22` rounds `v` to the nearest
/// integer `n` (ties to even) and leaves `n` in the low bits of the sum, so the low 16
/// bits of the sum's bits are `n` as an int16 (two's complement).
pub(crate) const ROUND: f32 = 12_582_912.0;

/// `v * inv` rounded to an integer, as the low half of a word (see [`ROUND`]).
#[inline(always)]
pub(crate) fn level(v: u32, inv: f32) -> u32 {
    (f32::from_bits(v) * inv + ROUND).to_bits() & 0xffff
}

/// `|v|` as bits without the sign: monotonic in `|v|` (a NaN above infinity), the form
/// in which an int8 layer passes its output's largest magnitude to the next layer.
#[inline(always)]
pub(crate) fn magnitude(v: f32) -> u32 {
    v.to_bits() << 1
}

#[cfg(not(all(target_arch = "arm", target_abi = "eabihf", laq_dsp)))]
use crate::portable::rescale;

#[cfg(all(target_arch = "arm", target_abi = "eabihf", laq_dsp))]
use crate::arm::{pack_groups, rescale};

/// Quantises `x` to `-range..=range` with one scale for the whole vector (its largest
/// magnitude maps to `range`, see [`act_range`]) and packs it in place (see
/// [`Packed`]); returns the packing and the largest magnitude. `max_bits` is that
/// magnitude (see [`magnitude`]) where the layer before computed it.
///
/// Each input is `v * inv` rounded to the nearest integer (ties to even) by [`ROUND`]:
/// one multiply and one add (not fused, as on every target); a group's two words are
/// the low halves of its four sums put together. An input with an infinity or a NaN
/// gives a scale that is not finite, so the outputs are not either (their bits may
/// differ between targets).
pub(crate) fn pack(x: &mut [f32], max_bits: Option<u32>) -> Option<(Packed<'_>, f32)> {
    let cols = x.len();
    let max_bits = max_bits.unwrap_or_else(|| x.iter().fold(0, |m, &v| m.max(magnitude(v))));
    // At least 2^-100, so that an input of zeros (a layer whose ReLUs are all off)
    // quantises to zeros with a finite `inv`.
    let max = f32::from_bits((max_bits >> 1).max(0x0d80_0000));
    let range = act_range(cols) as f32;
    let inv = range / max;
    let words: &mut [u32] = bytemuck::try_cast_slice_mut(x).ok()?;
    // Groups of four for the DSP extension's dual multiply-accumulate; elsewhere one
    // input per word.
    #[cfg(all(target_arch = "arm", target_abi = "eabihf", laq_dsp))]
    let groups = cols / 4;
    #[cfg(not(all(target_arch = "arm", target_abi = "eabihf", laq_dsp)))]
    let groups = 0;
    #[cfg(all(target_arch = "arm", target_abi = "eabihf", laq_dsp))]
    pack_groups(words, groups, inv);
    for w in words.iter_mut().skip(4 * groups) {
        *w = level(*w, inv) as u16 as i16 as i32 as u32;
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
/// x_scale + bias` and the ReLU (see `portable::rescale`). Integer sums do not depend
/// on the order or the instructions, so the assembly and the portable code give the
/// same sums, and the same f32 rescale gives bit-identical values on every target.
/// Returns the output's largest magnitude (see [`magnitude`]).
pub(crate) fn matvec_i8(
    q: &[u8],
    scale: &[u8],
    bias: &[u8],
    x: &mut [f32],
    x_max: Option<u32>,
    y: &mut [f32],
    relu: bool,
) -> Option<u32> {
    let cols = x.len();
    let (packed, max) = pack(x, x_max).filter(|_| cols > 0)?;
    // The sums go to `y` first (as i32), then each becomes its f32 value in place.
    let sums = bytemuck::try_cast_slice_mut::<f32, i32>(y).ok()?;
    rows_i8(&packed, q, cols, sums);
    let x_scale = max / act_range(cols) as f32;
    Some(rescale(y, scale, bias, x_scale, relu))
}
