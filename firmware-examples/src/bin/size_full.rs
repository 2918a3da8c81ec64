//! Flash and stack footprint of the runtime: loads the grid model, evaluates it,
//! applies the density gate, selects among predicted states and shapes a reward,
//! without printing.
//! Compare with `size_base` for the runtime's code size (docs/runtime.md). Exits with
//! success if the selection picks the state closest to the goal.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use laq_firmware_examples::{exit, GRID_MODEL};
use laq_runtime::{Candidate, Model, Scratch};
use panic_halt as _;

include!(concat!(env!("OUT_DIR"), "/host_values.rs"));

#[inline(never)]
fn work(bytes: &[u8], state: [f32; 2]) -> Option<usize> {
    let mut slot = None;
    let model = Model::new_checked_in_place(&mut slot, bytes).ok()?;
    let mut scratch = Scratch::<GRID_SCRATCH>::new();
    let gated = model.gated_value(&state, &mut scratch).ok()?;
    // A table of predicted next states (no controller code of our own in the binary).
    let table: [&[f32]; 3] = [&[1.0, 2.0], &[3.0, 3.0], &[2.0, 3.0]];
    let mut report = [Candidate::default(); 3];
    let best = model
        .select(&state, &table, &mut scratch, &mut report)
        .ok()?;
    let shaped = model
        .shaped_reward(&state, Default::default(), &[3.0, 3.0], &mut scratch)
        .ok()?;
    core::hint::black_box((gated, shaped));
    Some(best)
}

#[entry]
fn main() -> ! {
    let bytes = core::hint::black_box(&GRID_MODEL.0);
    let state = core::hint::black_box([2.0f32, 2.0]);
    let ok = work(bytes, state) == Some(1);
    exit(ok)
}
