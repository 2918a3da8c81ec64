//! The crate's `unsafe` code for hard-float ARM (Cortex-M4F, M7, M33, ...; the other
//! module with `unsafe` is `x86.rs`, for x86-64 hosts): the f32 inner loop and the square
//! root, in assembly, and on ARMv7E-M (with the DSP extension) the int8 layer loop
//! ([`rows_i8`], audit notes at [`passes_i8`]).
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
//! clobbered core registers are declared; the loop runs `n >= 1` times. All three
//! are exercised on the target by the firmware tests, against values computed on the
//! host with the portable code.
#![allow(unsafe_code)]

#[cfg(laq_dsp)]
use crate::kernels::{Packed, PACKED_END};
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

/// See `portable::rows_i8`: each row's exact i32 sum, three rows at a time,
/// with the DSP extension's dual 16-bit multiply-accumulate (see [`passes_i8`]). Falls
/// back to the portable code unless there are at least three rows, the row length is a
/// multiple of 4 and the rows start 4-aligned (`ldrd` needs word alignment).
#[inline]
pub(crate) fn rows_i8(x: &Packed<'_>, q: &[u8], cols: usize, sums: &mut [i32]) {
    let rows = sums.len();
    let groups = x.groups();
    let words = x.words();
    let pairs = groups / 2;
    let fits = groups > 0
        && rows >= 3
        && cols == 4 * groups
        && words.len() >= cols
        && q.as_ptr() as usize % 4 == 0
        && q.len() / cols >= rows
        && (pairs == 0 || words.get(2 * groups) == Some(&PACKED_END));
    if !fits {
        return crate::portable::rows_i8_compact(x, q, cols, sums);
    }
    let x = words.as_ptr() as usize;
    let frame = |out: &mut [i32], passes| [x, groups, cols, out.as_mut_ptr() as usize, passes];
    let mut all = frame(sums, rows / 3);
    // SAFETY: the preconditions of `passes_i8`, checked above: `q` holds `rows >= 3 *
    // passes` rows of `cols = 4 * groups` bytes from a 4-aligned address, `sums` holds
    // `rows` sums, `passes >= 1`.
    unsafe { passes_i8(&mut all, q.as_ptr()) };
    // The last `rows % 3` rows: one more pass over the last three rows, which rewrites
    // one or two sums with the values they already have.
    let last = rows - 3;
    if let (Some(out), Some(rest)) = (sums.get_mut(last..), q.get(last * cols..)) {
        if rows % 3 != 0 {
            let mut one = frame(out, 1);
            // SAFETY: as above, one pass from row `last`, three sums to `out`.
            unsafe { passes_i8(&mut one, rest.as_ptr()) };
        }
    }
}

/// The int8 sums of `frame[4]` passes of three rows each. `frame` is `[x, groups, cols,
/// out, passes]`: the packed activations (`kernels::Packed::words`), the number of
/// groups of four inputs (`groups / 2` pairs, then whether one is left), the length of
/// a row in bytes, where the sums go (three per pass) and the number of passes; `rows`
/// is the first row.
///
/// Per word of four int8 weights `w0..w3` of a row: `sxtb16` gives the pair `(w0, w2)`
/// and `sxtb16 ror #8` the pair `(w1, w3)`, and two `smlad`s multiply them with the two
/// packed activation words and add both products to the row's sum. Eight inputs per
/// iteration (one `ldm` of activations shared by the three rows, one `ldrd` of weights
/// per row): 30 instructions per 24 multiply-accumulates. An odd group goes first,
/// alone. The pass after a pass over rows `r..r + 3` starts at row `r + 3`, where the
/// third row's pointer stopped. The loop needs 14 core registers: r6 and r7, which
/// cannot be operands, are saved on the stack and restored, and the frame's address
/// waits on the stack too.
///
/// Audit notes: the loop over pairs of groups stops at the first pair whose first word
/// equals [`PACKED_END`] (checked after each pair, so it runs at least once);
/// `kernels::pack` writes the marker right after the groups, so the loop runs at most
/// `pairs` times and its last `ldm` reads at most the four words from the marker on.
/// (A group's first word equals the marker only if two of its inputs are not finite, see
/// `kernels::pack`; the loop then stops early and reads less.) So each pass reads at
/// most `2 * groups + 4` words of activations and `4 * groups` bytes from each of its
/// row pointers; the next pass starts where the third pointer stopped, at or before the
/// next row, so the third row of every pass ends at or before the end of `q`. Memory
/// written: the sums (`stmia`, three words per pass), `frame[3]` and `frame[4]`
/// (advanced each pass), and three stack words (r6, r7 and the frame's address, popped
/// before the asm ends).
///
/// # Safety
///
/// `frame[0]` points to a packing of `kernels::pack` with `groups > 0` groups that is
/// live for the call (with at least two groups, its marker in place and four readable
/// words from it); `cols == 4 * groups`; `rows` points to `3 * passes` consecutive rows
/// of `cols` readable bytes each, 4-aligned; `frame[3]` points to `3 * passes` writable
/// i32s; `passes > 0`.
#[inline(never)]
unsafe fn passes_i8(frame: &mut [usize; 5], rows: *const u8) {
    // SAFETY: the caller's contract, the audit notes above: every read is inside the
    // packing or the rows, every word load is aligned (the activations are a `&[u32]`,
    // the rows checked by the caller); the writes are the sums, the frame (exclusively
    // borrowed) and the stack words popped before the end. Every register the asm
    // changes but r6 and r7 (restored) is declared.
    unsafe {
        core::arch::asm!(
            "push {{r0, r6, r7}}",
            "1:",
            "ldr lr, [r0]",
            "ldr r3, [r0, #4]",
            "ldr r11, [r0, #8]",
            "add r10, r9, r11",
            "add r11, r10, r11",
            "movs r4, #0",
            "movs r5, #0",
            "mov r8, r4",
            "lsrs r3, r3, #1",
            "bcc 2f",
            "ldrd r0, r1, [lr], #8",
            "ldr r6, [r9], #4",
            "sxtb16 r12, r6",
            "smlad r4, r12, r0, r4",
            "sxtb16 r6, r6, ror #8",
            "smlad r4, r6, r1, r4",
            "ldr r6, [r10], #4",
            "sxtb16 r12, r6",
            "smlad r5, r12, r0, r5",
            "sxtb16 r6, r6, ror #8",
            "smlad r5, r6, r1, r5",
            "ldr r6, [r11], #4",
            "sxtb16 r12, r6",
            "smlad r8, r12, r0, r8",
            "sxtb16 r6, r6, ror #8",
            "smlad r8, r6, r1, r8",
            "2:",
            "cmp r3, #0",
            "beq 4f",
            "ldm lr!, {{r0-r3}}",
            "3:",
            "ldrd r6, r7, [r9], #8",
            "sxtb16 r12, r6",
            "smlad r4, r12, r0, r4",
            "sxtb16 r6, r6, ror #8",
            "smlad r4, r6, r1, r4",
            "sxtb16 r12, r7",
            "smlad r4, r12, r2, r4",
            "sxtb16 r7, r7, ror #8",
            "smlad r4, r7, r3, r4",
            "ldrd r6, r7, [r10], #8",
            "sxtb16 r12, r6",
            "smlad r5, r12, r0, r5",
            "sxtb16 r6, r6, ror #8",
            "smlad r5, r6, r1, r5",
            "sxtb16 r12, r7",
            "smlad r5, r12, r2, r5",
            "sxtb16 r7, r7, ror #8",
            "smlad r5, r7, r3, r5",
            "ldrd r6, r7, [r11], #8",
            "sxtb16 r12, r6",
            "smlad r8, r12, r0, r8",
            "sxtb16 r6, r6, ror #8",
            "smlad r8, r6, r1, r8",
            "sxtb16 r12, r7",
            "smlad r8, r12, r2, r8",
            "sxtb16 r7, r7, ror #8",
            "smlad r8, r7, r3, r8",
            "ldm lr!, {{r0-r3}}",
            "cmp r0, #{end}",
            "bne 3b",
            "4:",
            "ldr r0, [sp]",
            "ldr r1, [r0, #12]",
            "stmia r1!, {{r4, r5, r8}}",
            "str r1, [r0, #12]",
            "mov r9, r11",
            "ldr r1, [r0, #16]",
            "subs r1, #1",
            "str r1, [r0, #16]",
            "bne 1b",
            "pop {{r0, r6, r7}}",
            inout("r0") frame.as_mut_ptr() => _,
            inout("r9") rows => _,
            out("r1") _,
            out("r2") _,
            out("r3") _,
            out("r4") _,
            out("r5") _,
            out("r8") _,
            out("r10") _,
            out("r11") _,
            out("r12") _,
            out("lr") _,
            end = const PACKED_END,
        );
    }
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
