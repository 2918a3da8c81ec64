//! Instruction counts of the runtime, its stack high-water mark, and target-vs-host
//! checks of the paths `grid_guide` does not take.
//!
//! Run under `qemu-system-arm ... -icount shift=0` (see docs/runtime.md): SysTick then
//! counts virtual time that is proportional to executed instructions, calibrated here
//! with a loop of known length. Reports instructions per inference and per
//! multiply-accumulate (MAC) for the grid model and a 4-128-128-8 MLP (f32 and int8).
//! Checks against values the build script computed on the host: the int8 model, a
//! `one_norm` model with a density gate and the grid model loaded from an unaligned
//! address (byte-wise path). Exits with failure on any mismatch. Built without the
//! `images` feature, like firmware for fully connected models; `bench_image` covers
//! image models.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use laq_firmware_examples::{exit, grid, stack, systick, Aligned, GRID_MODEL};
use laq_runtime::{Candidate, Model, Scratch};
use panic_semihosting as _;

include!(concat!(env!("OUT_DIR"), "/host_values.rs"));

static BENCH: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/bench.safetensors"
)));
static BENCH_I8: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/bench_i8.safetensors"
)));
static SHAPES_I8: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/shapes_i8.safetensors"
)));
static ONE_NORM: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/one_norm.safetensors"
)));

const SCRATCH: usize = max(
    max(BENCH_SCRATCH, GRID_SCRATCH),
    max(ONE_NORM_SCRATCH, SHAPES_I8_SCRATCH),
);
const RUNS: u32 = 20;

const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

/// What an application does per control step, without any printing: load (validate)
/// the model, then select among the 8 grid moves and shape a reward. Measured for the
/// stack high-water mark.
#[inline(never)]
fn runtime_work() -> Option<usize> {
    let model = Model::new_checked(core::hint::black_box(&GRID_MODEL.0)).ok()?;
    let mut scratch = Scratch::<GRID_SCRATCH>::new();
    let mut report = [Candidate::default(); 8];
    let state = core::hint::black_box([2.0f32, 2.0]);
    let best = model
        .select(&state, &grid::CONTROLLERS, &mut scratch, &mut report)
        .ok()?;
    let shaped = model.shaped_reward(&state, Default::default(), &[3.0, 3.0], &mut scratch);
    core::hint::black_box(shaped).ok()?;
    Some(best)
}

fn bench(per_tick: f32, overhead: u32) -> bool {
    let mut ok = true;
    let mut scratch = [0.0f32; SCRATCH];
    for (name, bytes, state, host) in [
        (
            "grid 2-64-64-8 f32",
            &GRID_MODEL.0,
            &[2.0f32, 3.0][..],
            GRID_V[2][3],
        ),
        ("mlp 4-128-128-8 f32", &BENCH.0, &BENCH_STATE[..], BENCH_V),
        (
            "mlp 4-128-128-8 int8",
            &BENCH_I8.0,
            &BENCH_STATE[..],
            BENCH_I8_V,
        ),
    ] {
        let t0 = systick::now();
        let model = Model::new_checked(core::hint::black_box(bytes));
        let load = systick::elapsed(t0, systick::now()) as f32 * per_tick;
        let Ok(model) = model else {
            hprintln!("{}: failed to load", name);
            return false;
        };
        let (per_inference, v) =
            systick::time_value(&model, state, &mut scratch, (per_tick, overhead), RUNS);
        let macs = model.macs() as f32;
        // The same code on the host: the values agree bit for bit (the int8 path too,
        // its integer sums being exact).
        let matches = v.to_bits() == host.to_bits();
        ok &= matches;
        hprintln!(
            "{:<21} {:>6} MACs {:>8.0} instr/inference {:>5.2} instr/MAC  load {:>7.0} instr  V ok: {}",
            name,
            model.macs(),
            per_inference,
            per_inference / macs,
            load,
            matches
        );
    }
    if let Ok(model) = Model::new_checked(&GRID_MODEL.0) {
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

/// The one_norm head (hardware square root on this target) and the density gate.
fn check_one_norm() -> bool {
    let Ok(model) = Model::new_checked(&ONE_NORM.0) else {
        return false;
    };
    let mut scratch = [0.0f32; SCRATCH];
    let v = model.value(&BENCH_STATE, &mut scratch);
    let lp = model.log_density(&BENCH_STATE);
    let ok = v == Ok(ONE_NORM_V) && lp == Ok(Some(ONE_NORM_LOGP));
    hprintln!(
        "one_norm head + density gate match the host exactly: {}",
        ok
    );
    ok
}

/// The grid model read from an odd address: every weight goes through the byte-wise
/// path, and every value must still equal the host's.
fn check_unaligned() -> bool {
    let Some(buf) = cortex_m::singleton!(: [u8; GRID_LEN + 1] = [0; GRID_LEN + 1]) else {
        return false;
    };
    let Some(dst) = buf.get_mut(1..) else {
        return false;
    };
    dst.copy_from_slice(&GRID_MODEL.0);
    let Ok(model) = Model::new_checked(dst) else {
        return false;
    };
    let mut scratch = [0.0f32; SCRATCH];
    let mut ok = !model.is_aligned();
    for (r, row) in GRID_V.iter().enumerate() {
        for (c, &host) in row.iter().enumerate() {
            ok &= model.value(&[r as f32, c as f32], &mut scratch) == Ok(host);
        }
    }
    hprintln!(
        "unaligned (byte-wise) grid model matches the host exactly: {}",
        ok
    );
    ok
}

/// The int8 model of odd shapes (4-25-24-20-12-16-7: rows of four inputs, groups and
/// pairs of groups alone, partial passes) from an aligned address (the assembly) and from an odd one (the
/// portable fallbacks): each value must equal the host's.
fn check_int8_shapes() -> bool {
    let mut scratch = [0.0f32; SCRATCH];
    let Some(buf) = cortex_m::singleton!(: [u8; SHAPES_I8_LEN + 1] = [0; SHAPES_I8_LEN + 1]) else {
        return false;
    };
    let Some(dst) = buf.get_mut(1..) else {
        return false;
    };
    dst.copy_from_slice(&SHAPES_I8.0);
    let mut ok = true;
    for bytes in [&SHAPES_I8.0[..], dst] {
        ok &= Model::new_checked(bytes)
            .and_then(|m| m.value(&BENCH_STATE, &mut scratch))
            .is_ok_and(|v| v.to_bits() == SHAPES_I8_V.to_bits());
    }
    hprintln!(
        "int8 4-25-24-20-12-16-7 (odd rows, groups and pairs, partial passes), aligned and unaligned, matches the host exactly: {}",
        ok
    );
    ok
}

#[entry]
fn main() -> ! {
    let Some(mut p) = cortex_m::Peripherals::take() else {
        exit(false)
    };

    let painted = stack::paint();
    let work = runtime_work();
    let used = stack::high_water(painted);

    systick::start(&mut p.SYST);
    let (per_tick, overhead) = systick::calibrate();
    hprintln!(
        "calibration: {:.2} instructions per SysTick tick (40.00 expected with -icount shift=0)",
        per_tick
    );
    if (per_tick - 40.0).abs() > 0.5 {
        hprintln!(
            "warning: not running with -icount shift=0; the figures are not instruction counts"
        );
    }
    let mut ok = bench(per_tick, overhead);
    ok &= check_one_norm();
    ok &= check_unaligned();
    ok &= check_int8_shapes();
    ok &= work == Some(7);
    hprintln!(
        "stack used by load + select (8 moves) + shaping, incl. scratch and report: {} bytes",
        used
    );
    hprintln!(
        "RAM: Model {} B, Candidate {} B, grid scratch {} B (static RAM used by the runtime: 0 B)",
        core::mem::size_of::<Model<'static>>(),
        core::mem::size_of::<Candidate>(),
        GRID_SCRATCH * 4
    );
    hprintln!("bench_mcu: {}", if ok { "PASS" } else { "FAIL" });
    exit(ok)
}
