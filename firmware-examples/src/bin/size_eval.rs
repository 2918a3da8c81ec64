//! Flash footprint of the runtime's core: load (validate) the grid model and evaluate
//! V, without printing; the model is built in place (`Model::new_checked_in_place`).
//! Compare with `size_base` for the code size (docs/runtime.md).
//! Exits with success if V matches the host's value.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use laq_firmware_examples::{exit, GRID_MODEL};
use laq_runtime::{Model, Scratch};
use panic_halt as _;

include!(concat!(env!("OUT_DIR"), "/host_values.rs"));

#[inline(never)]
fn work(bytes: &[u8], state: [f32; 2]) -> Option<f32> {
    let mut slot = None;
    let model = Model::new_checked_in_place(&mut slot, bytes).ok()?;
    let mut scratch = Scratch::<GRID_SCRATCH>::new();
    model.value(&state, &mut scratch).ok()
}

#[entry]
fn main() -> ! {
    let bytes = core::hint::black_box(&GRID_MODEL.0);
    let state = core::hint::black_box([2.0f32, 3.0]);
    let ok = work(bytes, state) == Some(GRID_V[2][3]);
    exit(ok)
}
