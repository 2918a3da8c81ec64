//! Baseline for the flash measurement: the same skeleton as `size_eval` and `size_full` (vector table,
//! semihosting exit, halt on panic, the model bytes kept alive) without the runtime.
//! `size_eval` or `size_full` minus `size_base` is the runtime's code (docs/runtime.md).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use laq_firmware_examples::{exit, GRID_MODEL};
use panic_halt as _;

#[entry]
fn main() -> ! {
    let bytes = core::hint::black_box(&GRID_MODEL.0);
    let state = core::hint::black_box([1.0f32, 2.0]);
    let ok = core::hint::black_box(bytes.len() as f32 + state[0]) > 0.0;
    exit(ok)
}
