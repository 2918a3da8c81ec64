//! Instructions per multiply-accumulate on a Cortex-M0 (no FPU, no DSP extension): the
//! 4-128-128-8 benchmark MLP with f32 weights (software floating point) and with int8
//! weights (the runtime's integer path), each checked against the value the build
//! script computed on the host.
//!
//! Built for `thumbv6m-none-eabi` and run on QEMU's microbit (nRF51, 256 KB flash,
//! 16 KB RAM) under `-icount shift=0`, SysTick calibrated as in `bench_mcu` (see
//! docs/runtime.md). Exits with failure on any mismatch.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use laq_firmware_examples::{exit, systick, Aligned};
use laq_runtime::Model;
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

const SCRATCH: usize = if BENCH_SCRATCH > BENCH_I8_SCRATCH {
    BENCH_SCRATCH
} else {
    BENCH_I8_SCRATCH
};
const RUNS: u32 = 4;

#[entry]
fn main() -> ! {
    let Some(mut p) = cortex_m::Peripherals::take() else {
        exit(false)
    };
    systick::start(&mut p.SYST);
    let (per_tick, overhead) = systick::calibrate();
    hprintln!("calibration: {:.2} instructions per SysTick tick", per_tick);
    let mut ok = true;
    let mut scratch = [0.0f32; SCRATCH];
    for (name, bytes, host) in [
        ("mlp 4-128-128-8 f32", &BENCH.0, BENCH_V),
        ("mlp 4-128-128-8 int8", &BENCH_I8.0, BENCH_I8_V),
    ] {
        let Ok(model) = Model::new_checked(core::hint::black_box(bytes)) else {
            hprintln!("{}: failed to load", name);
            exit(false)
        };
        let (per_inference, v) = systick::time_value(
            &model,
            &BENCH_STATE,
            &mut scratch,
            (per_tick, overhead),
            RUNS,
        );
        // Same code on both sides: the target's value equals the host's exactly.
        let matches = v.to_bits() == host.to_bits();
        ok &= matches;
        hprintln!(
            "{:<21} {:>6} MACs {:>9.0} instr/inference {:>6.2} instr/MAC  V ok: {}",
            name,
            model.macs(),
            per_inference,
            per_inference / model.macs() as f32,
            matches
        );
    }
    hprintln!("bench_m0: {}", if ok { "PASS" } else { "FAIL" });
    exit(ok)
}
