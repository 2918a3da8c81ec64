//! The crate's `unsafe` code for hard-float ARM (Cortex-M4F, M7, M33, ...; the other
//! module with `unsafe` is `x86.rs`, for x86-64 hosts): the f32 inner loop and the square
//! root, in assembly, and on ARMv7E-M (with the DSP extension and the `int8` feature)
//! the int8 layers' loops: quantising and packing ([`pack_groups`]), the row sums
//! ([`rows_i8`], audit notes at [`passes_i8`]) and the rescale ([`rescale`]).
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

#[cfg(all(laq_dsp, feature = "int8"))]
use crate::int8::{Packed, PACKED_END};
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

/// See `portable::rows_i8`: each row's exact i32 sum, three rows at a time, with the
/// DSP extension's dual 16-bit multiply-accumulate (see [`passes_i8`]), the last two
/// rows of a layer whose rows are not a multiple of three two at a time
/// ([`two_rows_i8`]); rows of exactly four inputs four at a time ([`rows_four_i8`]). Falls back to the portable code unless
/// there are at least three rows (four of four inputs), the row length is a multiple
/// of 4 and the rows start 4-aligned (`ldrd` needs word alignment).
#[cfg(all(laq_dsp, feature = "int8"))]
#[inline]
pub(crate) fn rows_i8(x: &Packed<'_>, q: &[u8], cols: usize, sums: &mut [i32]) {
    let rows = sums.len();
    let groups = x.groups();
    let words = x.words();
    let pairs = groups / 2;
    let fits = groups > 0
        && rows >= if cols == 4 { 4 } else { 3 }
        && cols == 4 * groups
        && words.len() >= cols
        && q.as_ptr() as usize % 4 == 0
        && q.len() / cols >= rows
        && (pairs == 0 || words.get(2 * groups) == Some(&PACKED_END));
    if !fits {
        return crate::portable::rows_i8_compact(x, q, cols, sums);
    }
    if cols == 4 {
        return rows_four_i8(words, q, sums);
    }
    let x = words.as_ptr();
    // SAFETY: the preconditions of `passes_i8`, checked above: `q` holds `rows >= 3 *
    // passes` rows of `cols = 4 * groups` bytes from a 4-aligned address, `sums` holds
    // `rows` sums, `passes >= 1`.
    unsafe { passes_i8(x, groups, cols, q.as_ptr(), sums.as_mut_ptr(), rows / 3) };
    // The last `rows % 3` rows: with an even number of groups, the last two rows by
    // [`two_rows_i8`] (the first of them rewritten with its value if only one is
    // left); otherwise one more pass over the last three rows, which rewrites one or
    // two sums with the values they already have.
    if rows % 3 == 0 {
        return;
    }
    if groups % 2 == 0 {
        let last = rows - 2;
        if let (Some(out), Some(rest)) = (sums.get_mut(last..), q.get(last * cols..)) {
            two_rows_i8(words, rest, cols, out);
        }
        return;
    }
    let last = rows - 3;
    if let (Some(out), Some(rest)) = (sums.get_mut(last..), q.get(last * cols..)) {
        // SAFETY: as above, one pass from row `last`, three sums to `out`.
        unsafe { passes_i8(x, groups, cols, rest.as_ptr(), out.as_mut_ptr(), 1) };
    }
}

/// Eight inputs (a pair of groups, packed in r0-r3) against eight int8 weights of a
/// row (read through `$row`, advanced), added to the row's sum `$acc`: one `ldrd`, four
/// `sxtb16`, four `smlad`; `$w`, `$v` and `$k` are scratch (registers, or operands of
/// the asm that expands it).
#[cfg(all(laq_dsp, feature = "int8"))]
macro_rules! eight_of_a_row {
    ($row:literal, $acc:literal, $w:literal, $v:literal, $k:literal) => {
        concat!(
            "ldrd ",
            $w,
            ", ",
            $v,
            ", [",
            $row,
            "], #8\n",
            "sxtb16 ",
            $k,
            ", ",
            $w,
            "\n",
            "smlad ",
            $acc,
            ", ",
            $k,
            ", r0, ",
            $acc,
            "\n",
            "sxtb16 ",
            $w,
            ", ",
            $w,
            ", ror #8\n",
            "smlad ",
            $acc,
            ", ",
            $w,
            ", r1, ",
            $acc,
            "\n",
            "sxtb16 ",
            $k,
            ", ",
            $v,
            "\n",
            "smlad ",
            $acc,
            ", ",
            $k,
            ", r2, ",
            $acc,
            "\n",
            "sxtb16 ",
            $v,
            ", ",
            $v,
            ", ror #8\n",
            "smlad ",
            $acc,
            ", ",
            $v,
            ", r3, ",
            $acc,
            "\n",
        )
    };
}

/// The sums of the first two rows of `q` (rows of `cols` bytes) into `out`, a pair of
/// groups per iteration as in [`passes_i8`] (21 instructions per 16
/// multiply-accumulates, against 28 per 24 in a pass of three rows, whose third row
/// would be one already done). Called by [`rows_i8`] with a packing of an even number
/// of groups, at least two, its marker in place and four readable words from it, `cols
/// = 4 * groups` and `q` starting 4-aligned.
#[cfg(all(laq_dsp, feature = "int8"))]
fn two_rows_i8(words: &[u32], q: &[u8], cols: usize, out: &mut [i32]) {
    let (Some(a), Some(b), Some([s, t])) = (q.get(..cols), q.get(cols..2 * cols), out.get_mut(..2))
    else {
        return;
    };
    // SAFETY: as in the audit notes of `passes_i8`, the loop stops at the first word
    // equal to the marker at the start of a pair, checked after every pair (so after
    // at least one); the marker follows the groups, all in pairs (their number is
    // even), so it
    // reads at most `2 * groups + 4` words of the packing (which holds them) and `cols
    // = 4 * groups` bytes of each row, `a` and `b` (which hold them), from 4-aligned
    // addresses (the packing is a `&[u32]`; `q` starts 4-aligned and `cols` is a
    // multiple of 4). Only registers are written (the listed ones and the flags); the
    // stack is not used.
    unsafe {
        core::arch::asm!(
            "ldm {x}!, {{r0-r3}}",
            "2:",
            eight_of_a_row!("{a}", "{s}", "{w}", "{v}", "{k}"),
            eight_of_a_row!("{b}", "{t}", "{w}", "{v}", "{k}"),
            "ldm {x}!, {{r0-r3}}",
            "cmp r0, #{end}",
            "bne 2b",
            x = inout(reg) words.as_ptr() => _,
            a = inout(reg) a.as_ptr() => _,
            b = inout(reg) b.as_ptr() => _,
            s = inout(reg) 0i32 => *s,
            t = inout(reg) 0i32 => *t,
            w = out(reg) _,
            v = out(reg) _,
            k = out(reg) _,
            // r0-r3: ascending, for the `ldm`.
            out("r0") _,
            out("r1") _,
            out("r2") _,
            out("r3") _,
            end = const PACKED_END,
            options(nostack),
        );
    }
}

/// The sums of rows of exactly four inputs (a first layer over a small state): each row
/// one word of weights against the group's two words, four rows per iteration with no
/// per-pass work (one `ldm` of four rows, four instructions per row, one `stm`: 5
/// instructions per row, against about 11 in a pass of three); `smuad` starts each sum,
/// which ends in the register that held the row. The last `rows % 4` rows: the last
/// four rows again, by the same loop. Called by [`rows_i8`] with at least four rows of
/// 4 bytes from a 4-aligned `q` and the two words of one group in `words`.
#[cfg(all(laq_dsp, feature = "int8"))]
fn rows_four_i8(words: &[u32], q: &[u8], sums: &mut [i32]) {
    let rows = sums.len().min(q.len() / 4);
    let (Some(&[a, b]), true) = (words.get(..2), rows >= 4) else {
        return;
    };
    // Bytes of `q` (and of `sums`) between where the loop stops and where the last
    // four rows start: the loop runs once more from there.
    let back = (4 - rows % 4) % 4 * 4;
    // SAFETY: each iteration reads four words of `q` and writes four sums. The loop
    // runs `rows / 4 >= 1` times from the starts of `q` and `sums`, which hold `rows`
    // rows of 4 bytes (from a 4-aligned address, `rows_i8` checked it) and `rows` sums,
    // then, if `back > 0`, once more from `back` bytes before where it stopped, that is
    // from row `rows - 4 >= 0`. No stack, no other memory; flags and the listed
    // registers only.
    unsafe {
        core::arch::asm!(
            "2:",
            "ldm {q}!, {{r0-r3}}",
            "sxtb16 {t}, r0",
            "smuad {s}, {t}, {a}",
            "sxtb16 r0, r0, ror #8",
            "smlad r0, r0, {b}, {s}",
            "sxtb16 {t}, r1",
            "smuad {s}, {t}, {a}",
            "sxtb16 r1, r1, ror #8",
            "smlad r1, r1, {b}, {s}",
            "sxtb16 {t}, r2",
            "smuad {s}, {t}, {a}",
            "sxtb16 r2, r2, ror #8",
            "smlad r2, r2, {b}, {s}",
            "sxtb16 {t}, r3",
            "smuad {s}, {t}, {a}",
            "sxtb16 r3, r3, ror #8",
            "smlad r3, r3, {b}, {s}",
            "stm {out}!, {{r0-r3}}",
            "subs {n}, {n}, #1",
            "bne 2b",
            "cmp {back}, #0",
            "beq 3f",
            "sub {q}, {q}, {back}",
            "sub {out}, {out}, {back}",
            "movs {back}, #0",
            "movs {n}, #1",
            "b 2b",
            "3:",
            a = in(reg) a,
            b = in(reg) b,
            q = inout(reg) q.as_ptr() => _,
            out = inout(reg) sums.as_mut_ptr() => _,
            n = inout(reg) rows / 4 => _,
            back = inout(reg) back => _,
            t = out(reg) _,
            s = out(reg) _,
            // r0-r3: ascending, for the `ldm` and the `stm`.
            out("r0") _,
            out("r1") _,
            out("r2") _,
            out("r3") _,
            options(nostack),
        );
    }
}

/// A pair of groups for the three rows of a pass of [`passes_i8`] (27 instructions).
#[cfg(all(laq_dsp, feature = "int8"))]
macro_rules! pair_of_groups {
    () => {
        concat!(
            eight_of_a_row!("r9", "r4", "r6", "r7", "r12"),
            eight_of_a_row!("r10", "r5", "r6", "r7", "r12"),
            eight_of_a_row!("r11", "r8", "r6", "r7", "r12"),
        )
    };
}

/// The int8 sums of `passes` passes of three rows each: `groups` groups of four inputs
/// packed at `x` (`int8::Packed::words`), rows of `cols = 4 * groups` bytes from
/// `rows`, three sums per pass to `out`.
///
/// Per word of four int8 weights `w0..w3` of a row: `sxtb16` gives the pair `(w0, w2)`
/// and `sxtb16 ror #8` the pair `(w1, w3)`, and two `smlad`s multiply them with the two
/// packed activation words and add both products to the row's sum. A pair of groups
/// (eight inputs) takes one `ldm` of activations shared by the three rows and one
/// `ldrd` of weights per row; the loop does four pairs per iteration (114 instructions
/// per 96 multiply-accumulates). The pass after a pass over rows `r..r + 3` starts at
/// row `r + 3`, where the third row's pointer stopped.
///
/// The loop needs 14 core registers, so what a pass needs to start lies in a frame on
/// the stack, built once: three zero sums, where the pass starts, `cols`, where the
/// loop is entered, `x`, `out` and the passes left; one `ldm` sets up a pass. A pass
/// loads its first four activation words and jumps to where it starts: with an even
/// number of groups, into the loop, at the block that leaves `pairs % 4` blocks (four
/// if none) before the first end check, so that every check falls after a multiple of
/// four pairs counted from the last; with an odd number, to the odd group first (the
/// first two words), which then moves the first pair's two loaded words down, loads
/// its other two and enters the loop. r6 and r7, which cannot be operands, are saved on
/// the stack and restored.
///
/// Audit notes: the loop over pairs of groups stops at the first word equal to
/// [`PACKED_END`] at the start of a pair, checked after a multiple of four pairs counted
/// from the last (so after at least one pair); `int8::pack` writes the marker right
/// after the groups, so the loop handles at most `pairs = groups / 2 >= 1` pairs and
/// its last `ldm` reads at most the four words from the marker on. (A group's first
/// word equals the marker only if two of its inputs are not finite, see `int8::pack`;
/// the loop then stops early and reads less.) The first load of a pass reads four words
/// that lie in the groups (two of the first pair, or the odd group and half of the
/// first pair: `groups >= 2`). So each pass reads at most `2 * groups + 4` words of
/// activations and `4 * groups` bytes from each of its row pointers; the next pass
/// starts where the third pointer stopped, at or before the next row, so the third
/// row of every pass ends at or before the end of `rows`. Memory written: the sums
/// (`stmia`, three words per pass) and the stack (the two saved registers and the
/// nine-word frame, all released before the asm ends).
///
/// # Safety
///
/// `x` points to a packing of `int8::pack` with `groups >= 2` groups that is live for
/// the call (its marker in place and four readable words from it); `cols == 4 *
/// groups`; `rows` points to `3 * passes` consecutive rows of `cols` readable bytes
/// each, 4-aligned; `out` points to `3 * passes` writable i32s; `passes > 0`.
#[cfg(all(laq_dsp, feature = "int8"))]
#[inline(never)]
unsafe fn passes_i8(
    x: *const u32,
    groups: usize,
    cols: usize,
    rows: *const u8,
    out: *mut i32,
    passes: usize,
) {
    // SAFETY: the caller's contract, the audit notes above: every read is inside the
    // packing or the rows, every word load is aligned (the activations are a `&[u32]`,
    // the rows checked by the caller); the writes are the sums and the stack words
    // released before the end. Every register the asm changes but r6 and r7 (restored)
    // is declared.
    unsafe {
        core::arch::asm!(
            "push {{r6, r7}}",
            // Where the loop is entered, from `pairs % 4` (a Thumb address: bit 0 set).
            "ubfx r6, r0, #1, #2",
            "adr r2, 3f",
            "cmp r6, #3",
            "it eq",
            "adreq r2, 5f",
            "cmp r6, #2",
            "it eq",
            "adreq r2, 6f",
            "cmp r6, #1",
            "it eq",
            "adreq r2, 7f",
            "orr r2, r2, #1",
            "push {{r1-r5}}",
            // Where a pass starts: the odd group, or the loop.
            "tst r0, #1",
            "it ne",
            "adrne r2, 8f",
            "it ne",
            "orrne r2, r2, #1",
            "movs r0, #0",
            "movs r1, #0",
            "movs r3, #0",
            "push {{r0-r3}}",
            "1:",
            "ldm sp, {{r4, r5, r7, r8, r11, r12, lr}}",
            "add r10, r9, r11",
            "add r11, r10, r11",
            "ldm lr!, {{r0-r3}}",
            "bx r7",
            // `adr` above counts from the word-aligned PC, resolved when assembling: the
            // section must start word-aligned (this raises its alignment; the padding,
            // if any, is never executed).
            ".p2align 2",
            "8:",
            "ldr r6, [r9], #4",
            "sxtb16 r7, r6",
            "smlad r4, r7, r0, r4",
            "sxtb16 r6, r6, ror #8",
            "smlad r4, r6, r1, r4",
            "ldr r6, [r10], #4",
            "sxtb16 r7, r6",
            "smlad r5, r7, r0, r5",
            "sxtb16 r6, r6, ror #8",
            "smlad r5, r6, r1, r5",
            "ldr r6, [r11], #4",
            "sxtb16 r7, r6",
            "smlad r8, r7, r0, r8",
            "sxtb16 r6, r6, ror #8",
            "smlad r8, r6, r1, r8",
            "mov r0, r2",
            "mov r1, r3",
            "ldrd r2, r3, [lr], #8",
            "bx r12",
            "3:",
            pair_of_groups!(),
            "ldm lr!, {{r0-r3}}",
            "5:",
            pair_of_groups!(),
            "ldm lr!, {{r0-r3}}",
            "6:",
            pair_of_groups!(),
            "ldm lr!, {{r0-r3}}",
            "7:",
            pair_of_groups!(),
            "ldm lr!, {{r0-r3}}",
            "cmp r0, #{end}",
            "bne 3b",
            "ldrd r1, r2, [sp, #28]",
            "stmia r1!, {{r4, r5, r8}}",
            "mov r9, r11",
            "subs r2, r2, #1",
            "strd r1, r2, [sp, #28]",
            "bne 1b",
            "add sp, sp, #36",
            "pop {{r6, r7}}",
            inout("r0") groups => _,
            inout("r1") cols => _,
            out("r2") _,
            inout("r3") x => _,
            inout("r4") out => _,
            inout("r5") passes => _,
            out("r8") _,
            inout("r9") rows => _,
            out("r10") _,
            out("r11") _,
            out("r12") _,
            out("lr") _,
            end = const PACKED_END,
        );
    }
}

/// The groups of `int8::pack`, eight inputs (two groups) per iteration: one `vldmia`,
/// eight products and eight sums on the FPU (the same operations as the portable code),
/// the results' low halves put together by four `pkhbt`s, one `stm`: 28 instructions per
/// two groups instead of about 60 compiled. An odd last group: the same for four inputs.
#[cfg(all(laq_dsp, feature = "int8"))]
pub(crate) fn pack_groups(words: &mut [u32], groups: usize, inv: f32) {
    let groups = groups.min(words.len() / 4);
    if groups == 0 {
        return;
    }
    // SAFETY: the loop reads `4 * groups` words from `words` (which holds them) and
    // writes `2 * groups`, each store after the loads of the words it overwrites (the
    // write pointer never ahead of the read pointer), so only words of the exclusively
    // borrowed slice are touched; word accesses are aligned (a `&mut [u32]`). s0-s9 are
    // declared clobbered; the stack is not used.
    unsafe {
        core::arch::asm!(
            "vmov s8, {inv}",
            "vmov s9, {round}",
            "mov {dst}, {src}",
            "cmp {n}, #0",
            "beq 3f",
            "2:",
            "vldmia {src}!, {{s0-s7}}",
            "vmul.f32 s0, s0, s8",
            "vmul.f32 s1, s1, s8",
            "vmul.f32 s2, s2, s8",
            "vmul.f32 s3, s3, s8",
            "vmul.f32 s4, s4, s8",
            "vmul.f32 s5, s5, s8",
            "vmul.f32 s6, s6, s8",
            "vmul.f32 s7, s7, s8",
            "vadd.f32 s0, s0, s9",
            "vadd.f32 s1, s1, s9",
            "vadd.f32 s2, s2, s9",
            "vadd.f32 s3, s3, s9",
            "vadd.f32 s4, s4, s9",
            "vadd.f32 s5, s5, s9",
            "vadd.f32 s6, s6, s9",
            "vadd.f32 s7, s7, s9",
            "vmov r0, r1, s0, s1",
            "vmov {c}, {d}, s2, s3",
            "pkhbt r0, r0, {c}, lsl #16",
            "pkhbt r1, r1, {d}, lsl #16",
            "vmov r2, r3, s4, s5",
            "vmov {c}, {d}, s6, s7",
            "pkhbt r2, r2, {c}, lsl #16",
            "pkhbt r3, r3, {d}, lsl #16",
            "stm {dst}!, {{r0-r3}}",
            "subs {n}, {n}, #1",
            "bne 2b",
            "3:",
            "cmp {odd}, #0",
            "beq 4f",
            "vldmia {src}, {{s0-s3}}",
            "vmul.f32 s0, s0, s8",
            "vmul.f32 s1, s1, s8",
            "vmul.f32 s2, s2, s8",
            "vmul.f32 s3, s3, s8",
            "vadd.f32 s0, s0, s9",
            "vadd.f32 s1, s1, s9",
            "vadd.f32 s2, s2, s9",
            "vadd.f32 s3, s3, s9",
            "vmov r0, r1, s0, s1",
            "vmov {c}, {d}, s2, s3",
            "pkhbt r0, r0, {c}, lsl #16",
            "pkhbt r1, r1, {d}, lsl #16",
            "strd r0, r1, [{dst}]",
            "4:",
            inv = in(reg) inv.to_bits(),
            round = in(reg) crate::int8::ROUND.to_bits(),
            src = inout(reg) words.as_mut_ptr() => _,
            dst = out(reg) _,
            n = inout(reg) groups / 2 => _,
            odd = in(reg) groups % 2,
            c = out(reg) _,
            d = out(reg) _,
            // r0-r3: ascending, for the `stm`.
            out("r0") _,
            out("r1") _,
            out("r2") _,
            out("r3") _,
            out("s0") _,
            out("s1") _,
            out("s2") _,
            out("s3") _,
            out("s4") _,
            out("s5") _,
            out("s6") _,
            out("s7") _,
            out("s8") _,
            out("s9") _,
            options(nostack),
        );
    }
}

/// See `portable::rescale`: with 4-aligned scales and biases, four rows per iteration
/// in assembly (37 instructions with the ReLU, 33 without: the same operations in the
/// same order as the portable code, `vmla` not being fused; the ReLU a `bic` of the
/// sign, skipped by a `cbz` without it; the largest magnitude tracked as the bits
/// shifted left by one, as `int8::magnitude`), the last `rows % 4` rows and every other
/// case in the portable code.
#[cfg(all(laq_dsp, feature = "int8"))]
pub(crate) fn rescale(y: &mut [f32], scale: &[u8], bias: &[u8], x_scale: f32, relu: bool) -> u32 {
    let aligned = scale.as_ptr() as usize % 4 == 0 && bias.as_ptr() as usize % 4 == 0;
    let quads = (y.len() / 4).min(scale.len() / 16).min(bias.len() / 16);
    if !aligned || quads == 0 {
        return crate::portable::rescale(y, scale, bias, x_scale, relu);
    }
    let done = 4 * quads;
    let mut max: u32;
    // SAFETY: the loop reads and writes `4 * quads` words of `y` and reads as many of
    // `scale` and `bias`, each of which holds at least that many (checked above); all
    // three start 4-aligned (`y` is a `&mut [f32]`, the others checked), as `vldmia`
    // needs. s0-s8 are declared clobbered; the stack is not used.
    unsafe {
        core::arch::asm!(
            "vmov s8, {xs}",
            "movs {m}, #0",
            "2:",
            "vldmia {y}, {{s0-s3}}",
            "vcvt.f32.s32 s0, s0",
            "vcvt.f32.s32 s1, s1",
            "vcvt.f32.s32 s2, s2",
            "vcvt.f32.s32 s3, s3",
            "vldmia {sc}!, {{s4-s7}}",
            "vmul.f32 s0, s0, s4",
            "vmul.f32 s1, s1, s5",
            "vmul.f32 s2, s2, s6",
            "vmul.f32 s3, s3, s7",
            "vldmia {b}!, {{s4-s7}}",
            // Not fused: the product rounded, then the sum, as the portable code.
            "vmla.f32 s4, s0, s8",
            "vmla.f32 s5, s1, s8",
            "vmla.f32 s6, s2, s8",
            "vmla.f32 s7, s3, s8",
            "vmov r0, r1, s4, s5",
            "vmov r2, r3, s6, s7",
            "cbz r4, 3f",
            "bic r0, r0, r0, asr #31",
            "bic r1, r1, r1, asr #31",
            "bic r2, r2, r2, asr #31",
            "bic r3, r3, r3, asr #31",
            "3:",
            "cmp {m}, r0, lsl #1",
            "it lo",
            "lsllo {m}, r0, #1",
            "cmp {m}, r1, lsl #1",
            "it lo",
            "lsllo {m}, r1, #1",
            "cmp {m}, r2, lsl #1",
            "it lo",
            "lsllo {m}, r2, #1",
            "cmp {m}, r3, lsl #1",
            "it lo",
            "lsllo {m}, r3, #1",
            "stmia {y}!, {{r0, r1, r2, r3}}",
            "subs {n}, {n}, #1",
            "bne 2b",
            xs = in(reg) x_scale.to_bits(),
            m = out(reg) max,
            y = inout(reg) y.as_mut_ptr() => _,
            sc = inout(reg) scale.as_ptr() => _,
            b = inout(reg) bias.as_ptr() => _,
            n = inout(reg) quads => _,
            // r0-r3: ascending, for the `stmia`; r4: low, for the `cbz`.
            out("r0") _,
            out("r1") _,
            out("r2") _,
            out("r3") _,
            in("r4") u32::from(relu),
            out("s0") _,
            out("s1") _,
            out("s2") _,
            out("s3") _,
            out("s4") _,
            out("s5") _,
            out("s6") _,
            out("s7") _,
            out("s8") _,
            options(nostack),
        );
    }
    let rest = match (
        y.get_mut(done..),
        scale.get(4 * done..),
        bias.get(4 * done..),
    ) {
        (Some(y), Some(scale), Some(bias)) => {
            crate::portable::rescale(y, scale, bias, x_scale, relu)
        }
        _ => 0,
    };
    rest.max(max)
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
