//! The image model on the target (needs the `images` feature:
//! `cargo build --release --features images --bin bench_image`): a generated model of
//! the trainer's default shape (3x32x32 image, three convolutions to 16-32-32
//! channels, 512-128-8), checked against the value the build script computed on the
//! host, its instructions per inference and the stack of loading and evaluating it.
//!
//! Run under `qemu-system-arm ... -icount shift=0` for instruction counts (see
//! `bench_mcu` and docs/runtime.md). Exits with failure on any mismatch.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use laq_firmware_examples::{exit, stack, systick, Aligned};
use laq_runtime::Model;
use panic_semihosting as _;

include!(concat!(env!("OUT_DIR"), "/host_values.rs"));

static CONV: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/conv.safetensors"
)));

const RUNS: u32 = 20;

/// Pixel `k` of the image model's test image (the build script's formula).
fn conv_pixel(k: usize) -> f32 {
    ((k * 37 + 11) % 256) as f32
}

/// V equals the host's exactly (the same kernel on the gathered patches,
/// bit-identical to the portable code), and its instruction count. The image and the
/// scratch are statics: 12 KB and 38 KB, more than the painted stack. Returns (ok,
/// stack bytes used by load + one evaluation).
fn check_conv(calibration: (f32, u32)) -> (bool, usize) {
    let (Some(image), Some(scratch)) = (
        cortex_m::singleton!(: [f32; CONV_DIM] = [0.0; CONV_DIM]),
        cortex_m::singleton!(: [f32; CONV_SCRATCH] = [0.0; CONV_SCRATCH]),
    ) else {
        return (false, 0);
    };
    for (k, p) in image.iter_mut().enumerate() {
        *p = conv_pixel(k);
    }
    let painted = stack::paint();
    let first = Model::new_checked(core::hint::black_box(&CONV.0))
        .and_then(|m| m.value(core::hint::black_box(&image[..]), &mut scratch[..]));
    let used = stack::high_water(painted);
    let t0 = systick::now();
    let model = Model::new_checked(core::hint::black_box(&CONV.0));
    let load = systick::elapsed(t0, systick::now()) as f32 * calibration.0;
    let Ok(model) = model else {
        hprintln!("conv model failed to load");
        return (false, used);
    };
    let macs = model.macs() as f32;
    let (per_inference, v) =
        systick::time_value(&model, &image[..], &mut scratch[..], calibration, RUNS);
    let ok = first == Ok(CONV_V) && v == CONV_V;
    hprintln!(
        "{:<21} {:>6} MACs {:>8.0} instr/inference {:>5.2} instr/MAC  load {:>7.0} instr  V ok: {}",
        "conv 3x32x32 16-32-32",
        model.macs(),
        per_inference,
        per_inference / macs,
        load,
        ok
    );
    hprintln!(
        "image model (3x32x32, convolutions 16-32-32, 512-128-8) matches the host exactly: {}",
        ok
    );
    (ok, used)
}

#[entry]
fn main() -> ! {
    let Some(mut p) = cortex_m::Peripherals::take() else {
        exit(false)
    };
    systick::start(&mut p.SYST);
    let calibration = systick::calibrate();
    hprintln!(
        "calibration: {:.2} instructions per SysTick tick (40.00 expected with -icount shift=0)",
        calibration.0
    );
    let (ok, used) = check_conv(calibration);
    hprintln!(
        "stack used by load + evaluation of the image model, scratch excluded: {} bytes",
        used
    );
    hprintln!(
        "RAM: Model {} B (with `images`), image model scratch {} B",
        core::mem::size_of::<Model<'static>>(),
        CONV_SCRATCH * 4
    );
    hprintln!("bench_image: {}", if ok { "PASS" } else { "FAIL" });
    exit(ok)
}
