//! Shared pieces of the firmware examples: the grid world's move controllers, an
//! alignment wrapper for embedded model files, SysTick timing and stack painting. (The
//! U-maze guidance of `maze_guide` is the `laq-maze` crate.)
#![no_std]

use laq_runtime::{Controller, Error, Outcome};

/// Ends the program through semihosting (QEMU's exit status; a debug probe reports
/// it too), with success or failure.
pub fn exit(success: bool) -> ! {
    use cortex_m_semihosting::debug;
    debug::exit(if success {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    // Not reached under QEMU; on a board without a debugger, idle.
    loop {
        cortex_m::asm::wfi();
    }
}

/// Wraps `include_bytes!` data so that it starts 8-aligned (the runtime then reads f32
/// tensors in place through its aligned fast path).
#[repr(C, align(8))]
pub struct Aligned<T: ?Sized>(pub T);

/// The grid-world model (`models/gridworld/value.safetensors`, copied by `build.rs`), in
/// flash and 8-aligned.
pub static GRID_MODEL: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/grid.safetensors"
)));

/// The U-maze value model (`models/maze2d/value.safetensors`, copied by `build.rs`), in
/// flash and 8-aligned.
pub static MAZE_MODEL: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/maze.safetensors"
)));

/// The 6x6 grid world the example model was trained on.
pub mod grid {
    use super::*;

    /// Cells per side; coordinates are `0..=5`.
    pub const SIZE: i32 = 6;
    /// The start cell (row, col).
    pub const START: [f32; 2] = [0.0, 0.0];
    /// The goal cell (row, col): entering it gives reward 1 and ends the episode.
    pub const GOAL: [i32; 2] = [5, 5];
    /// Steps of the optimal path from the start to the goal.
    pub const OPTIMAL_STEPS: usize = 5;
    /// The 8 moves as (d_row, d_col), in action-index order.
    pub const MOVES: [(i32, i32); 8] = [
        (-1, 0),  // 0 up
        (1, 0),   // 1 down
        (0, -1),  // 2 left
        (0, 1),   // 3 right
        (-1, -1), // 4 up-left
        (-1, 1),  // 5 up-right
        (1, -1),  // 6 down-left
        (1, 1),   // 7 down-right
    ];
    /// Names of the moves, for printing.
    pub const NAMES: [&str; 8] = [
        "up",
        "down",
        "left",
        "right",
        "up-left",
        "up-right",
        "down-left",
        "down-right",
    ];

    /// The controller that executes move `.0`: it predicts the clamped next cell.
    #[derive(Clone, Copy, Debug)]
    pub struct Move(pub usize);

    /// All 8 move controllers.
    pub const CONTROLLERS: [Move; 8] = [
        Move(0),
        Move(1),
        Move(2),
        Move(3),
        Move(4),
        Move(5),
        Move(6),
        Move(7),
    ];

    fn cell(v: f32) -> i32 {
        // States are whole cells; round to be robust to float noise.
        (v + 0.5) as i32
    }

    /// The cell reached from `(row, col)` by move `m` (each coordinate clamped).
    pub fn step(state: [i32; 2], m: usize) -> Option<[i32; 2]> {
        let (dr, dc) = *MOVES.get(m)?;
        Some([
            (state[0] + dr).clamp(0, SIZE - 1),
            (state[1] + dc).clamp(0, SIZE - 1),
        ])
    }

    impl Controller for Move {
        fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, Error> {
            let (&[r, c], [nr, nc]) = (state, next) else {
                return Err(Error::StateLength);
            };
            let to = step([cell(r), cell(c)], self.0).ok_or(Error::Controller)?;
            *nr = to[0] as f32;
            *nc = to[1] as f32;
            Ok(if to == GOAL {
                Outcome {
                    reward: 1.0,
                    terminal: true,
                }
            } else {
                Outcome::default()
            })
        }
    }
}

/// Instruction counting with SysTick under `qemu-system-arm -icount shift=0`.
///
/// QEMU does not model cycles; with `-icount shift=0` every instruction advances
/// virtual time by 1 ns, and SysTick (on the 25 MHz core clock of mps2-an386) ticks
/// every 40 ns, so ticks are proportional to executed instructions. The factor is
/// measured at run time with a loop of known length ([`systick::calibrate`]).
pub mod systick {
    use cortex_m::peripheral::{syst::SystClkSource, SYST};

    /// Starts SysTick free-running from its maximum reload value.
    pub fn start(syst: &mut SYST) {
        syst.disable_interrupt();
        syst.set_clock_source(SystClkSource::Core);
        syst.set_reload(0x00FF_FFFF);
        syst.clear_current();
        syst.enable_counter();
    }

    /// The current counter value (counts down).
    #[inline(always)]
    pub fn now() -> u32 {
        SYST::get_current()
    }

    /// Ticks elapsed between two [`now`] readings (intervals under 2^24 ticks).
    #[inline(always)]
    pub fn elapsed(start: u32, end: u32) -> u32 {
        start.wrapping_sub(end) & 0x00FF_FFFF
    }

    /// Runs a loop of exactly `2 * n` instructions (`subs`/`bne`).
    #[inline(always)]
    pub fn spin(n: u32) {
        if n == 0 {
            return;
        }
        // SAFETY: a register-only countdown loop; no memory is touched.
        unsafe {
            core::arch::asm!(
                "2:",
                "subs {0}, #1",
                "bne 2b",
                inout(reg) n => _,
                options(nomem, nostack),
            );
        }
    }

    /// Times `runs` evaluations of `state`; returns (instructions per evaluation, the
    /// value, NaN if evaluation failed).
    pub fn time_value(
        model: &laq_runtime::Model<'_>,
        state: &[f32],
        scratch: &mut [f32],
        (per_tick, overhead): (f32, u32),
        runs: u32,
    ) -> (f32, f32) {
        let mut v = 0.0;
        let t0 = now();
        for _ in 0..runs {
            v = model
                .value(core::hint::black_box(state), scratch)
                .unwrap_or(f32::NAN);
        }
        let ticks = elapsed(t0, now()).saturating_sub(overhead);
        (ticks as f32 * per_tick / runs as f32, v)
    }

    /// Instructions per SysTick tick, from a known loop of 2,000,000 instructions.
    /// Also returns the measurement overhead in ticks.
    pub fn calibrate() -> (f32, u32) {
        let t0 = now();
        let t1 = now();
        let overhead = elapsed(t0, t1);
        let n = 1_000_000;
        let t0 = now();
        spin(n);
        let t1 = now();
        let ticks = elapsed(t0, t1).saturating_sub(overhead).max(1);
        ((2 * n) as f32 / ticks as f32, overhead)
    }
}

/// Stack high-water mark by painting: fill the free stack below the current stack
/// pointer with a pattern, run the workload, then find the lowest overwritten word.
pub mod stack {
    const PATTERN: u32 = 0xA5A5_5A5A;
    /// How much of the free stack below the current stack pointer is painted.
    pub const PAINT_BYTES: usize = 32 * 1024;

    extern "C" {
        static _stack_start: u32;
        static _stack_end: u32;
    }

    /// The painted range and the stack pointer when it was painted.
    #[derive(Clone, Copy, Debug)]
    pub struct Painted {
        lo: usize,
        hi: usize,
        sp: usize,
    }

    fn bottom() -> usize {
        let top = core::ptr::addr_of!(_stack_start) as usize;
        let end = core::ptr::addr_of!(_stack_end) as usize;
        // Without flip-link the stack grows down towards the statics (`_stack_end`);
        // with flip-link it sits below them and grows towards the start of RAM.
        if end < top {
            end
        } else {
            0x2000_0000
        }
    }

    /// Paints the free stack below the caller's frame (up to [`PAINT_BYTES`]).
    #[inline(always)]
    pub fn paint() -> Painted {
        let sp = cortex_m::register::msp::read() as usize;
        let hi = sp & !3;
        let lo = hi.saturating_sub(PAINT_BYTES).max(bottom());
        let mut p = lo;
        while p < hi {
            // SAFETY: [lo, hi) is free stack below the caller's live frame, and this
            // loop (inlined into the caller) keeps its state in registers.
            unsafe { core::ptr::write_volatile(p as *mut u32, PATTERN) };
            p += 4;
        }
        Painted { lo, hi, sp }
    }

    /// Bytes of stack used below the painting caller's frame since [`paint`]: down to
    /// the lowest word of the painted range that no longer holds the pattern.
    pub fn high_water(painted: Painted) -> usize {
        let mut p = painted.lo;
        while p < painted.hi {
            // SAFETY: reads of painted (free or formerly used) stack memory.
            if unsafe { core::ptr::read_volatile(p as *const u32) } != PATTERN {
                break;
            }
            p += 4;
        }
        painted.sp - p
    }
}
