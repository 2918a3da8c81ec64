//! The crate's only `unsafe` code, for hard-float ARM (Cortex-M4F, M7, M33, ...): the
//! f32 inner loop and the square root, in assembly.
//!
//! Compiled Rust loads each weight with its own `vldr`; [`block4`] loads four
//! consecutive weights of a row with one `vldmia` and keeps four rows' sums in
//! registers: 23 instructions per 16 multiply-accumulates (the compiled loop needs
//! about 42). Two rows' chains are interleaved so consecutive `vmla`s are independent.
//! It computes exactly what `portable::block4_portable` computes: `vmla.f32` rounds
//! the product before adding (it is not fused), and each row is accumulated left to
//! right, so host and target results are bit-identical. [`sqrtf`] uses `vsqrt.f32`,
//! correctly rounded like `libm::sqrtf`.
//!
//! Audit notes for [`block4`]: the only memory read is `4 * n` f32 values through each
//! of the five slices, where `n = x.len() / 4` and every row slice was checked to hold
//! at least `4 * n` values; the only stores are to two local arrays (the sums, and
//! s0-s15 saved on entry and restored on exit); the asm does not touch the stack;
//! clobbered core registers are declared; the loop runs `n >= 1` times. Both
//! functions are exercised on the target by the firmware tests, against values
//! computed on the host with the portable code.
#![allow(unsafe_code)]

use crate::portable::block4_portable;

/// See [`block4_portable`]: `[sum_j rows[k][j] * x[j]; 4]` over `x.len() / 4 * 4`
/// columns, each row accumulated left to right.
#[inline]
pub(crate) fn block4(x: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
    let n = x.len() / 4;
    let len = n * 4;
    let [r0, r1, r2, r3] = rows;
    if n == 0 {
        return [0.0; 4];
    }
    if r0.len() < len || r1.len() < len || r2.len() < len || r3.len() < len {
        return block4_portable(x, rows);
    }
    let mut sums = [0.0f32; 4];
    // Written by the asm before it is read; never read from Rust.
    let mut saved = core::mem::MaybeUninit::<[f32; 16]>::uninit();
    // SAFETY: `x` and each row hold at least `4 * n` f32 values (checked above) and the
    // loop reads exactly `4 * n` consecutive values through each pointer (`n >= 1`
    // iterations of four). The pointers come from live shared slices, so they are
    // valid and aligned for `f32`. The only writes are to `sums` and `saved`, local
    // arrays the asm exclusively borrows. The stack is not used. Registers: the five
    // pointers and the counter are declared as clobbered inputs; s0-s15 are saved to
    // `saved` on entry and restored on exit, so no FPU register changes (the target's
    // FPU may not have the d16-d31 a `clobber_abi` would name).
    unsafe {
        core::arch::asm!(
            "vstmia {saved}, {{s0-s15}}",
            "vldmia {acc}, {{s4-s7}}",
            "2:",
            "vldmia {x}!, {{s0-s3}}",
            "vldmia {a}!, {{s8-s11}}",
            "vldmia {b}!, {{s12-s15}}",
            "vmla.f32 s4, s8, s0",
            "vmla.f32 s5, s12, s0",
            "vmla.f32 s4, s9, s1",
            "vmla.f32 s5, s13, s1",
            "vmla.f32 s4, s10, s2",
            "vmla.f32 s5, s14, s2",
            "vmla.f32 s4, s11, s3",
            "vmla.f32 s5, s15, s3",
            "vldmia {c}!, {{s8-s11}}",
            "vldmia {d}!, {{s12-s15}}",
            "vmla.f32 s6, s8, s0",
            "vmla.f32 s7, s12, s0",
            "vmla.f32 s6, s9, s1",
            "vmla.f32 s7, s13, s1",
            "vmla.f32 s6, s10, s2",
            "vmla.f32 s7, s14, s2",
            "vmla.f32 s6, s11, s3",
            "vmla.f32 s7, s15, s3",
            "subs {n}, {n}, #1",
            "bne 2b",
            "vstmia {acc}, {{s4-s7}}",
            "vldmia {saved}, {{s0-s15}}",
            saved = in(reg) saved.as_mut_ptr(),
            acc = in(reg) sums.as_mut_ptr(),
            x = inout(reg) x.as_ptr() => _,
            a = inout(reg) r0.as_ptr() => _,
            b = inout(reg) r1.as_ptr() => _,
            c = inout(reg) r2.as_ptr() => _,
            d = inout(reg) r3.as_ptr() => _,
            n = inout(reg) n => _,
            options(nostack),
        );
    }
    sums
}

/// `sqrt(v)` with the FPU's `vsqrt.f32`: correctly rounded, like `libm::sqrtf` (which
/// the other targets use), but one instruction instead of about 500 bytes of code.
#[inline]
pub(crate) fn sqrtf(v: f32) -> f32 {
    let mut bits = v.to_bits();
    // SAFETY: register-only instructions. s0 is saved to a core register first and
    // restored last, so no FPU register changes; no memory or stack access. `vsqrt`
    // updates only the FPSCR cumulative exception bits (not the condition flags).
    unsafe {
        core::arch::asm!(
            "vmov {saved}, s0",
            "vmov s0, {bits}",
            "vsqrt.f32 s0, s0",
            "vmov {bits}, s0",
            "vmov s0, {saved}",
            bits = inout(reg) bits,
            saved = out(reg) _,
            options(nomem, nostack, preserves_flags),
        );
    }
    f32::from_bits(bits)
}
