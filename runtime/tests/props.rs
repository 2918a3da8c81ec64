//! Property tests: no mutation of a valid file makes the loader or the evaluation
//! panic, and an accepted file always evaluates.

mod common;

use common::{conv, mlp, with_gate, Placed, Tensor};
use laq_runtime::{Candidate, Error, Model};
use proptest::prelude::*;

fn valid_file() -> Vec<u8> {
    with_gate(mlp(&[3, 6, 5, 4], "max_q", 3), 3, 2, Some(&[0, 2]), "-9")
        .tensor(Tensor::i8("layers.1.weight", &[5, 6], &[7; 30]))
        .tensor(Tensor::f32("layers.1.scale", &[5], &[0.01; 5]))
        .to_bytes()
}

/// An image model (two convolutions) with a density gate over two pixels.
fn valid_conv_file() -> Vec<u8> {
    with_gate(
        conv([2, 4, 4], &[3, 2], &[4, 3], "max_q", 5),
        32,
        2,
        Some(&[0, 31]),
        "-9",
    )
    .to_bytes()
}

/// Loads and, if accepted, exercises every evaluation entry point.
fn exercise(bytes: &[u8]) {
    let Ok(m) = Model::new_checked(bytes) else {
        return;
    };
    let d = m.input_dim();
    let mut scratch = vec![0.0f32; m.scratch_len()];
    let state: Vec<f32> = (0..d).map(|i| i as f32 * 0.5 - 1.0).collect();
    match m.value(&state, &mut scratch) {
        Ok(v) => assert!(v.is_finite()),
        Err(e) => assert_eq!(e, Error::NonFiniteOutput),
    }
    let _ = m.log_density(&state).unwrap();
    let _ = m.gated_value(&state, &mut scratch);
    let next: Vec<f32> = state.iter().map(|v| v + 1.0).collect();
    let table: [&[f32]; 2] = [&state, &next];
    let mut report = [Candidate::default(); 2];
    let _ = m.select(&state, &table, &mut scratch, &mut report);
    let _ = m.shaped_reward(&state, Default::default(), &next, &mut scratch);
}

#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u8),
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, u8),
    Remove(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Remove),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let n = bytes.len();
    match *m {
        Mutation::Set(i, b) => bytes[i % n] = b,
        Mutation::Flip(i, bit) => bytes[i % n] ^= 1 << bit,
        Mutation::Truncate(i) => bytes.truncate(i % n),
        Mutation::Insert(i, b) => bytes.insert(i % n, b),
        Mutation::Remove(i) => {
            bytes.remove(i % n);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn mutations_never_panic(mutations in proptest::collection::vec(mutation(), 1..6), shift in 0usize..4) {
        let mut bytes = valid_file();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let placed = Placed::new(&bytes, shift);
        exercise(placed.bytes());
    }

    /// Mutations confined to the header (most of them reach the JSON scanner and the
    /// validation rather than the float data).
    #[test]
    fn header_mutations_never_panic(i in 8usize..400, b in any::<u8>()) {
        let mut bytes = valid_file();
        let idx = i % bytes.len();
        bytes[idx] = b;
        exercise(&bytes);
    }

    #[test]
    fn conv_mutations_never_panic(mutations in proptest::collection::vec(mutation(), 1..6), shift in 0usize..4) {
        let mut bytes = valid_conv_file();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let placed = Placed::new(&bytes, shift);
        exercise(placed.bytes());
    }

    #[test]
    fn conv_header_mutations_never_panic(i in 8usize..700, b in any::<u8>()) {
        let mut bytes = valid_conv_file();
        let idx = i % bytes.len();
        bytes[idx] = b;
        exercise(&bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        exercise(&bytes);
    }
}

#[test]
fn the_unmutated_file_is_valid() {
    let bytes = valid_file();
    // Its int8 layer needs the `int8` feature.
    if cfg!(feature = "int8") {
        assert!(Model::new_checked(&bytes).is_ok());
    } else {
        assert_eq!(
            Model::new_checked(&bytes).err(),
            Some(laq_runtime::Error::UnsupportedFormat)
        );
    }
    // Without `images` the mutations above check that refusing image files never
    // panics either.
    let bytes = valid_conv_file();
    #[cfg(feature = "images")]
    assert_eq!(Model::new_checked(&bytes).map(|m| m.num_conv()), Ok(2));
    #[cfg(not(feature = "images"))]
    assert_eq!(
        Model::new_checked(&bytes).err(),
        Some(Error::UnsupportedFormat)
    );
}
