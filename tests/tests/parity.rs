//! The runtime and the trainer agree on V for the same file: the property the whole
//! export path rests on.

use candle_core::Device;
use laq::export::{Head, Layer, ValueModel};
use laq_runtime::OwnedModel;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

fn random_model(rng: &mut ChaCha8Rng, dims: &[usize], head: Head) -> ValueModel {
    let layers = dims
        .windows(2)
        .map(|w| Layer {
            out_dim: w[1],
            in_dim: w[0],
            weight: (0..w[0] * w[1])
                .map(|_| rng.random_range(-1.0f32..1.0) / (w[0] as f32).sqrt())
                .collect(),
            bias: (0..w[1]).map(|_| rng.random_range(-0.1f32..0.1)).collect(),
        })
        .collect();
    ValueModel {
        mean: (0..dims[0])
            .map(|_| rng.random_range(-2.0f32..2.0))
            .collect(),
        scale: (0..dims[0])
            .map(|_| rng.random_range(0.2f32..3.0))
            .collect(),
        layers,
        head,
        gamma: 0.99,
        keep_f32: vec![],
        info: BTreeMap::new(),
    }
}

fn check(model: &ValueModel, bytes: Vec<u8>, states: &[f32]) {
    let ours = model.values_candle(states, &Device::Cpu).unwrap();
    let owned = OwnedModel::from_vec(bytes).unwrap();
    let rt = owned.model();
    let mut scratch = vec![0f32; rt.scratch_len()];
    let d = model.input_dim();
    for (i, s) in states.chunks_exact(d).enumerate() {
        let v = rt.value(s, &mut scratch).unwrap();
        let tol = 1e-5 * ours[i].abs().max(1.0);
        assert!(
            (v - ours[i]).abs() <= tol,
            "state {i}: runtime {v} vs candle {}",
            ours[i]
        );
    }
}

#[test]
fn runtime_matches_candle_on_random_models_and_states() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for (dims, head) in [
        (vec![2, 64, 64, 8], Head::MaxQ),
        (vec![4, 128, 128, 8], Head::MaxQ),
        (vec![3, 16, 5], Head::OneNorm),
        (vec![6, 1], Head::MaxQ),
    ] {
        let m = random_model(&mut rng, &dims, head);
        let states: Vec<f32> = (0..200 * dims[0])
            .map(|_| rng.random_range(-5.0f32..5.0))
            .collect();
        check(&m, m.to_bytes(false).unwrap(), &states);
        // int8: the runtime must match the dequantised weights the trainer reads back.
        let q_bytes = m.to_bytes(true).unwrap();
        let q = ValueModel::from_bytes(&q_bytes).unwrap();
        check(&q, q_bytes, &states);
    }
}

#[test]
fn runtime_matches_candle_on_the_shipped_grid_model() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../models/gridworld/value.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let m = ValueModel::from_bytes(&bytes).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut states: Vec<f32> = (0..36)
        .flat_map(|i| [(i / 6) as f32, (i % 6) as f32])
        .collect();
    states.extend((0..400).map(|_| rng.random_range(-1.0f32..6.0)));
    check(&m, bytes, &states);
}
