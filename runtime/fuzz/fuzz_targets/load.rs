//! Fuzzes the loader: any byte string either fails `Model::new_checked` with an error
//! or yields a model that evaluates a state of the right length without panicking
//! (and without an error other than overflow on this caller-chosen input).
#![no_main]

use laq_runtime::{Candidate, Error, Model};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(model) = Model::new_checked(data) else {
        return;
    };
    let d = model.input_dim();
    let mut scratch = vec![0.0f32; model.scratch_len()];
    let state: Vec<f32> = (0..d).map(|i| i as f32 * 0.25 - 1.0).collect();
    match model.value(&state, &mut scratch) {
        Ok(v) => assert!(v.is_finite()),
        Err(e) => assert_eq!(e, Error::NonFiniteOutput),
    }
    model
        .log_density(&state)
        .expect("a finite state of the right length");
    let _ = model.gated_value(&state, &mut scratch);
    let next: Vec<f32> = state.iter().map(|v| v + 1.0).collect();
    let table: [&[f32]; 2] = [&state, &next];
    let mut report = [Candidate::default(); 2];
    let _ = model.select(&state, &table, &mut scratch, &mut report);
    let _ = model.shaped_reward(&state, Default::default(), &next, &mut scratch);
});
