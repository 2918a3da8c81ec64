//! Batched evaluation (`Model::values`, `Model::select` with `batch_scratch_len`) gives
//! bit for bit what one state at a time gives: every weight path (aligned f32, byte-wise
//! f32, int8), both heads, the density gate, failed, non-finite and terminal candidates,
//! and groups that do not fill a batch.

mod common;

#[cfg(feature = "int8")]
use common::Tensor;
use common::{mlp, with_gate, File, Lcg, Placed};
use laq_runtime::{Candidate, Error, Model, Outcome, Predicted, BATCH};

/// `f` with the weights of layer `i` stored as int8 with one scale per row.
#[cfg(feature = "int8")]
fn quantise(f: File, i: usize, rows: usize, cols: usize, seed: u64) -> File {
    let mut rng = Lcg(seed);
    let q: Vec<i8> = (0..rows * cols)
        .map(|_| (rng.next() * 127.0) as i8)
        .collect();
    let scales: Vec<f32> = (0..rows).map(|_| 0.01 + rng.next().abs() * 0.01).collect();
    f.tensor(Tensor::i8(
        &format!("layers.{i}.weight"),
        &[rows as u64, cols as u64],
        &q,
    ))
    .tensor(Tensor::f32(
        &format!("layers.{i}.scale"),
        &[rows as u64],
        &scales,
    ))
}

fn models() -> Vec<(&'static str, File)> {
    #[allow(unused_mut)]
    let mut models = vec![
        ("2-64-64-8", mlp(&[2, 64, 64, 8], "max_q", 1)),
        ("4-128-128-8", mlp(&[4, 128, 128, 8], "max_q", 2)),
        ("3-7-5 one-norm", mlp(&[3, 7, 5], "one_norm", 3)),
        ("5-9 single layer", mlp(&[5, 9], "max_q", 4)),
        (
            "2-16-4 gated",
            with_gate(mlp(&[2, 16, 4], "max_q", 8), 2, 3, None, "-3.0"),
        ),
    ];
    // Int8 layers need the `int8` feature.
    #[cfg(feature = "int8")]
    models.push((
        "4-24-16-5 int8",
        quantise(
            quantise(mlp(&[4, 24, 16, 5], "max_q", 5), 0, 24, 4, 6),
            2,
            5,
            16,
            7,
        ),
    ));
    models
}

#[test]
fn values_in_batches_equal_values_one_at_a_time() {
    for (name, f) in models() {
        let bytes = f.to_bytes();
        for shift in [0, 1] {
            let placed = Placed::new(&bytes, shift);
            let m = Model::new_checked(placed.bytes()).unwrap();
            let d = m.input_dim();
            let mut big = vec![0.0f32; m.batch_scratch_len()];
            let mut small = vec![0.0f32; m.scratch_len()];
            let mut rng = Lcg(9);
            for n in [1usize, 3, BATCH, 13, 24] {
                let states = rng.vec(n * d, 3.0);
                let mut batched = vec![0.0f32; n];
                m.values(&states, &mut batched, &mut big).unwrap();
                let mut one = vec![0.0f32; n];
                m.values(&states, &mut one, &mut small).unwrap();
                for (i, s) in states.chunks_exact(d).enumerate() {
                    let v = m.value(s, &mut small).unwrap();
                    assert_eq!(
                        batched[i].to_bits(),
                        v.to_bits(),
                        "{name} shift {shift} n {n} state {i}"
                    );
                    assert_eq!(one[i].to_bits(), v.to_bits(), "{name}");
                }
            }
            // A bad state fails the call as `value` fails on it.
            let mut states = rng.vec(5 * d, 1.0);
            states[2 * d] = f32::NAN;
            let mut out = [0.0f32; 5];
            assert_eq!(
                m.values(&states, &mut out, &mut big),
                Err(Error::NonFiniteState)
            );
            assert_eq!(
                m.values(&states[1..], &mut out, &mut big),
                Err(Error::StateLength)
            );
        }
    }
}

#[test]
fn selection_in_batches_equals_selection_one_at_a_time() {
    for (name, f) in models() {
        let bytes = f.to_bytes();
        for shift in [0, 1] {
            let placed = Placed::new(&bytes, shift);
            let m = Model::new_checked(placed.bytes()).unwrap();
            let d = m.input_dim();
            let mut rng = Lcg(11);
            for n in [2usize, 7, BATCH, 13, 17] {
                let state = rng.vec(d, 1.0);
                let nexts: Vec<Vec<f32>> = (0..n)
                    .map(|k| {
                        let mut s = rng.vec(d, 3.0);
                        if k % 5 == 3 {
                            s[0] = f32::NAN;
                        }
                        s
                    })
                    .collect();
                let table: Vec<Predicted> = nexts
                    .iter()
                    .enumerate()
                    .map(|(k, s)| Predicted {
                        next: s,
                        outcome: Outcome {
                            reward: if k % 4 == 1 { 0.5 } else { 0.0 },
                            terminal: k % 6 == 5,
                        },
                    })
                    .collect();
                let mut big = vec![0.0f32; m.batch_scratch_len()];
                let mut small = vec![0.0f32; m.scratch_len()];
                let mut rb = vec![Candidate::default(); n];
                let mut rs = vec![Candidate::default(); n];
                let b = m.select(&state, &table, &mut big, &mut rb);
                let s = m.select(&state, &table, &mut small, &mut rs);
                assert_eq!(b, s, "{name} shift {shift} n {n}");
                // NaN fields compare equal through their printed form.
                assert_eq!(
                    format!("{rb:?}"),
                    format!("{rs:?}"),
                    "{name} shift {shift} n {n}"
                );
            }
        }
    }
}
