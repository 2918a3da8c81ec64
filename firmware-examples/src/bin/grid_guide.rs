//! Guides an agent through the 6x6 grid world with the trained value model.
//!
//! From (0, 0), each step asks the 8 move controllers for their predicted next cell and
//! lets `laq-runtime` pick the best by `reward + gamma * V(next)`. Exits with success
//! (semihosting) only if the goal (5, 5) is reached in the optimal 5 steps and the
//! value of all 36 cells matches the host's evaluation of the same file (1e-5
//! relative).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use laq_firmware_examples::grid::{self, CONTROLLERS, NAMES};
use laq_firmware_examples::{exit, GRID_MODEL};
use laq_runtime::{Candidate, Model, Scratch};
use panic_semihosting as _;

include!(concat!(env!("OUT_DIR"), "/host_values.rs"));

const MAX_STEPS: usize = 20;
const REL_TOL: f32 = 1e-5;

fn fail(what: &str, e: laq_runtime::Error) -> ! {
    hprintln!("error: {}: {}", what, e);
    exit(false)
}

#[entry]
fn main() -> ! {
    let model = match Model::new_checked(&GRID_MODEL.0) {
        Ok(m) => m,
        Err(e) => fail("loading the model", e),
    };
    hprintln!(
        "grid model: {} bytes, {} layers, {} MACs, gamma {}, aligned {}",
        GRID_MODEL.0.len(),
        model.num_layers(),
        model.macs(),
        model.gamma(),
        model.is_aligned()
    );
    let mut scratch = Scratch::<GRID_SCRATCH>::new();

    // 1. Parity with the host.
    let mut worst = 0.0f32;
    for (r, row) in GRID_V.iter().enumerate() {
        for (c, &host) in row.iter().enumerate() {
            let v = match model.value(&[r as f32, c as f32], &mut scratch) {
                Ok(v) => v,
                Err(e) => fail("evaluating V", e),
            };
            let rel = (v - host).abs() / host.abs().max(f32::MIN_POSITIVE);
            if (v - host).abs() > REL_TOL * host.abs() {
                worst = worst.max(rel);
                hprintln!("mismatch at ({}, {}): target {} host {}", r, c, v, host);
            }
        }
    }
    let values_ok = worst == 0.0;
    hprintln!("V of 36 cells matches the host: {}", values_ok);

    // 2. Drive from the start to the goal.
    let mut state = grid::START;
    let mut report = [Candidate::default(); 8];
    let mut steps = 0;
    let mut reached = false;
    hprintln!("path: ({}, {})", state[0] as i32, state[1] as i32);
    while steps < MAX_STEPS {
        let best = match model.select(&state, &CONTROLLERS, &mut scratch, &mut report) {
            Ok(i) => i,
            Err(e) => fail("selecting a controller", e),
        };
        let here = [state[0] as i32, state[1] as i32];
        let Some(next) = grid::step(here, best) else {
            break;
        };
        steps += 1;
        let score = report.get(best).map_or(f32::NAN, |c| c.score);
        hprintln!(
            "  step {}: {:<10} -> ({}, {})  score {}",
            steps,
            NAMES.get(best).copied().unwrap_or("?"),
            next[0],
            next[1],
            score
        );
        state = [next[0] as f32, next[1] as f32];
        if next == grid::GOAL {
            reached = true;
            break;
        }
    }
    let optimal = reached && steps == grid::OPTIMAL_STEPS;
    hprintln!(
        "goal reached: {}, steps: {} (optimal {})",
        reached,
        steps,
        grid::OPTIMAL_STEPS
    );
    let ok = optimal && values_ok;
    hprintln!("grid_guide: {}", if ok { "PASS" } else { "FAIL" });
    exit(ok)
}
