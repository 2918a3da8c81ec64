//! The crate's `unsafe` code for x86-64 hosts: the batched f32 layer compiled a second
//! time with AVX enabled, chosen at run time when the processor and the operating system
//! support AVX.
//!
//! The default x86-64 target only assumes SSE2, whose vector registers hold four lanes:
//! a group of [`crate::BATCH`] = 8 states then needs two registers per sum. With AVX one
//! register holds all eight lanes, which halves the instructions of the batched inner
//! loop. The code compiled is the same Rust function ([`crate::batch`]'s layer body,
//! inlined): every lane still multiplies, rounds and then adds, left to right (AVX has
//! no fused multiply-add; FMA is a separate feature that is not enabled), so the values
//! are bit-identical to the SSE2 build's and to [`crate::Model::value`]'s.
//!
//! Audit notes: [`layer_f32`] calls the `#[target_feature(enable = "avx")]` function
//! only after [`avx`] found that the processor has AVX (CPUID leaf 1, ECX bit 28) and
//! that the operating system saves the vector registers it uses (ECX bit 27, OSXSAVE,
//! then XCR0 bits 1 and 2); that is the whole safety condition of calling it. The answer
//! is kept in one atomic byte (0 unknown, 1 without, 2 with), so CPUID, which a
//! hypervisor may trap, runs once per process.
#![allow(unsafe_code)]

use crate::batch::{layer_f32_body, Lanes};
use core::sync::atomic::{AtomicU8, Ordering};

static AVX: AtomicU8 = AtomicU8::new(0);

/// Whether the processor and the operating system support AVX.
fn avx() -> bool {
    match AVX.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let found = detect();
            AVX.store(if found { 2 } else { 1 }, Ordering::Relaxed);
            found
        }
    }
}

fn detect() -> bool {
    let leaf1 = core::arch::x86_64::__cpuid(1);
    let osxsave = leaf1.ecx & (1 << 27) != 0;
    let avx = leaf1.ecx & (1 << 28) != 0;
    // SAFETY: XGETBV is available when OSXSAVE is set (CPUID leaf 1, ECX bit 27), checked
    // first.
    osxsave && avx && unsafe { xcr0() } & 0b110 == 0b110
}

#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    core::arch::x86_64::_xgetbv(0)
}

#[target_feature(enable = "avx")]
fn layer_f32_avx(w: &[f32], bias: &[u8], x: &[Lanes], y: &mut [Lanes], relu: bool) {
    layer_f32_body(w, bias, x, y, relu);
}

/// The batched f32 layer, with AVX where the machine has it.
#[inline]
pub(crate) fn layer_f32(w: &[f32], bias: &[u8], x: &[Lanes], y: &mut [Lanes], relu: bool) {
    if avx() {
        // SAFETY: `avx()` checked that the processor has AVX and that the operating system
        // saves its registers (see the audit notes above).
        unsafe { layer_f32_avx(w, bias, x, y, relu) }
    } else {
        layer_f32_body(w, bias, x, y, relu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BATCH;
    use std::vec::Vec;

    #[test]
    fn avx_and_sse2_layers_agree_bit_for_bit() {
        if !avx() {
            return;
        }
        let (rows, cols) = (13, 37);
        let mut seed = 1u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
        };
        let w: Vec<f32> = (0..rows * cols).map(|_| next()).collect();
        let bias: Vec<u8> = (0..rows).flat_map(|_| next().to_le_bytes()).collect();
        let x: Vec<Lanes> = (0..cols)
            .map(|_| core::array::from_fn::<f32, BATCH, _>(|_| next()))
            .collect();
        for relu in [false, true] {
            let mut a = std::vec![[0.0f32; BATCH]; rows];
            let mut b = a.clone();
            // SAFETY: AVX was detected above.
            unsafe { layer_f32_avx(&w, &bias, &x, &mut a, relu) };
            layer_f32_body(&w, &bias, &x, &mut b, relu);
            let bits = |v: &[Lanes]| v.iter().flatten().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&b));
        }
    }
}
