//! Instruction counts of the runtime's inner loops, and its stack high-water mark.
//!
//! Run under `qemu-system-arm ... -icount shift=0` (see docs/runtime.md): SysTick then
//! counts virtual time that is proportional to executed instructions, calibrated here
//! with a loop of known length. Reports instructions per inference and per
//! multiply-accumulate (MAC) for the grid model and a 4-128-128-8 MLP (f32 and int8),
//! checks each result against the host, and exits with failure on a mismatch.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use laq_firmware_examples::{grid, stack, systick, Aligned};
use laq_runtime::{Candidate, Model};
use panic_semihosting as _;

include!(concat!(env!("OUT_DIR"), "/host_values.rs"));

static GRID: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/grid.safetensors")));
static BENCH: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/bench.safetensors")));
static BENCH_I8: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/bench_i8.safetensors")));

const SCRATCH: usize = if BENCH_SCRATCH > GRID_SCRATCH { BENCH_SCRATCH } else { GRID_SCRATCH };
const RUNS: u32 = 20;

/// Times `RUNS` evaluations of `state`; returns (instructions per inference, value).
fn time(model: &Model<'_>, state: &[f32], scratch: &mut [f32], per_tick: f32, overhead: u32) -> (f32, f32) {
    let mut v = 0.0;
    let t0 = systick::now();
    for _ in 0..RUNS {
        v = model
            .value(core::hint::black_box(state), scratch)
            .unwrap_or(f32::NAN);
    }
    let t1 = systick::now();
    let ticks = systick::elapsed(t0, t1).saturating_sub(overhead);
    (ticks as f32 * per_tick / RUNS as f32, v)
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() <= 1e-5 * b.abs()
}

#[inline(never)]
fn run(per_tick: f32, overhead: u32) -> bool {
    let mut ok = true;
    let mut scratch = [0.0f32; SCRATCH];
    for (name, bytes, state, host) in [
        ("grid 2-64-64-8 f32", &GRID.0, &[2.0f32, 3.0][..], GRID_V[2][3]),
        ("mlp 4-128-128-8 f32", &BENCH.0, &BENCH_STATE[..], BENCH_V),
        ("mlp 4-128-128-8 int8", &BENCH_I8.0, &BENCH_STATE[..], BENCH_I8_V),
    ] {
        let t0 = systick::now();
        let model = Model::new_checked(core::hint::black_box(bytes));
        let load = systick::elapsed(t0, systick::now()) as f32 * per_tick;
        let Ok(model) = model else {
            hprintln!("{}: failed to load", name);
            return false;
        };
        let (per_inference, v) = time(&model, state, &mut scratch, per_tick, overhead);
        let macs = model.macs() as f32;
        let matches = close(v, host);
        ok &= matches;
        hprintln!(
            "{:<22} {:>6} MACs  {:>8.0} instr/inference  {:.2} instr/MAC  (load {:.0} instr)  V ok: {}",
            name,
            model.macs(),
            per_inference,
            per_inference / macs,
            load,
            matches
        );
    }

    // Controller selection over the 8 grid moves (8 evaluations + gate checks).
    if let Ok(model) = Model::new_checked(&GRID.0) {
        let mut report = [Candidate::default(); 8];
        let t0 = systick::now();
        let best = model.select(&[2.0, 2.0], &grid::CONTROLLERS, &mut scratch, &mut report);
        let ticks = systick::elapsed(t0, systick::now());
        hprintln!(
            "select among 8 grid moves: {:.0} instr, best {:?}",
            ticks as f32 * per_tick,
            best
        );
    }
    ok
}

#[entry]
fn main() -> ! {
    let Some(mut p) = cortex_m::Peripherals::take() else {
        debug::exit(debug::EXIT_FAILURE);
        loop {}
    };
    systick::start(&mut p.SYST);
    let (per_tick, overhead) = systick::calibrate();
    hprintln!(
        "calibration: {:.2} instructions per SysTick tick (expect 40.00 with -icount shift=0)",
        per_tick
    );
    let icount = (per_tick - 40.0).abs() < 0.5;
    if !icount {
        hprintln!("warning: not running with -icount shift=0; figures are not instruction counts");
    }

    let painted = stack::paint();
    let ok = run(per_tick, overhead);
    let used = stack::high_water(painted);
    hprintln!(
        "stack high-water mark: {} bytes (load + evaluate + select; includes formatting)",
        used
    );
    hprintln!(
        "size_of: Model {} B, Candidate {} B",
        core::mem::size_of::<Model<'static>>(),
        core::mem::size_of::<Candidate>()
    );
    if ok {
        hprintln!("bench_mcu: PASS");
        debug::exit(debug::EXIT_SUCCESS);
    } else {
        hprintln!("bench_mcu: FAIL");
        debug::exit(debug::EXIT_FAILURE);
    }
    loop {}
}
