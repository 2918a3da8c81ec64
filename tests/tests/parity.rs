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
        conv: None,
        layers,
        head,
        gamma: 0.99,
        keep_f32: vec![],
        info: BTreeMap::new(),
        density: None,
        cost_per_step: None,
    }
}

/// Runtime and candle on f32 layers: only the summation order differs.
const F32_TOLERANCE: f32 = 1e-5;
/// With int8 layers the runtime also rounds each layer's input to int16 (one scale per
/// vector, docs/runtime.md): on these models the largest difference is 8.9e-5.
const INT8_TOLERANCE: f32 = 3e-4;

/// Runtime against candle, within `rel` of max(|V|, 1).
fn check(model: &ValueModel, bytes: Vec<u8>, states: &[f32], rel: f32) {
    let ours = model.values_candle(states, &Device::Cpu).unwrap();
    let owned = OwnedModel::from_vec(bytes).unwrap();
    let rt = owned.model();
    let mut scratch = vec![0f32; rt.scratch_len()];
    let d = model.input_dim();
    for (i, s) in states.chunks_exact(d).enumerate() {
        let v = rt.value(s, &mut scratch).unwrap();
        let tol = rel * ours[i].abs().max(1.0);
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
        check(&m, m.to_bytes(false).unwrap(), &states, F32_TOLERANCE);
        // int8: the runtime against the dequantised weights the trainer reads back; they
        // differ by the runtime's quantisation of each int8 layer's input to int16.
        let q_bytes = m.to_bytes(true).unwrap();
        let q = ValueModel::from_bytes(&q_bytes).unwrap();
        check(&q, q_bytes, &states, INT8_TOLERANCE);
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
    check(&m, bytes, &states, F32_TOLERANCE);
}

/// A convolutional Q-network as the trainer builds it, with random weights and a random
/// per-channel standardisation.
fn random_conv_net(
    rng: &mut ChaCha8Rng,
    shape: [usize; 3],
    channels: &[usize],
    hidden: &[usize],
    k: usize,
) -> laq::stages::qlearn::QNetwork {
    use laq::nn::conv::ImageShape;
    use laq::stages::qlearn::{QModel, QNetwork};
    let [c, h, w] = shape;
    let (vm, vb) = laq::nn::new_varmap(&Device::Cpu);
    let image = ImageShape::new(&shape, channels.len()).unwrap();
    let net = QModel::new(vb, c * h * w, Some((image, channels)), hidden, k).unwrap();
    laq::nn::init_vars(&vm, rng.random()).unwrap();
    QNetwork {
        net,
        mean: (0..c).map(|_| rng.random_range(60.0f32..190.0)).collect(),
        std: (0..c).map(|_| rng.random_range(20.0f32..80.0)).collect(),
        obs_shape: shape.to_vec(),
        loss_curve: vec![],
        imitation: None,
        value: None,
        checkpoints: vec![],
        snapshots: vec![],
    }
}

/// Random images of raw pixel values (0..=255 as f32), `[n, C, H, W]`.
fn random_images(rng: &mut ChaCha8Rng, n: usize, shape: [usize; 3]) -> Vec<f32> {
    let len = n * shape.iter().product::<usize>();
    (0..len)
        .map(|_| rng.random_range(0u8..=255) as f32)
        .collect()
}

/// Image models: the runtime's V of the exported file equals the trainer's V of the
/// Q-network it came from (`QNetwork::values`, channels-last gathered convolutions) and
/// the exporter's own candle `conv2d` evaluation of the file read back.
#[test]
fn runtime_matches_the_trainer_on_random_conv_networks_and_images() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for (shape, channels, hidden, k) in [
        ([3, 32, 32], &[16usize, 32, 32][..], &[128usize][..], 8),
        ([1, 8, 8], &[4][..], &[][..], 3),
        ([3, 16, 24], &[5, 7][..], &[16, 16][..], 4),
        ([2, 32, 16], &[3, 4, 5, 6][..], &[9][..], 1),
        // Sides that are not multiples of 2^layers: each convolution rounds down.
        ([4, 84, 84], &[4, 6, 8][..], &[16][..], 3),
        ([3, 21, 13], &[5, 6][..], &[8][..], 2),
        ([1, 27, 20], &[3, 3, 3, 3][..], &[][..], 2),
    ] {
        let q = random_conv_net(&mut rng, shape, channels, hidden, k);
        let model = ValueModel::from_qnetwork(&q, 0.9, BTreeMap::new()).unwrap();
        let bytes = model.to_bytes(false).unwrap();
        let back = ValueModel::from_bytes(&bytes).unwrap();
        assert_eq!(back.conv, model.conv);
        let images = random_images(&mut rng, 40, shape);
        let trainer = q.values(&images, &Device::Cpu).unwrap();
        let candle = back.values_candle(&images, &Device::Cpu).unwrap();
        let owned = OwnedModel::from_vec(bytes).unwrap();
        let rt = owned.model();
        assert_eq!(rt.input_shape(), Some(shape));
        assert_eq!(rt.num_conv(), channels.len());
        let mut scratch = vec![0f32; rt.scratch_len()];
        let d: usize = shape.iter().product();
        for (i, s) in images.chunks_exact(d).enumerate() {
            let v = rt.value(s, &mut scratch).unwrap();
            for (what, want) in [("trainer", trainer[i]), ("candle conv2d", candle[i])] {
                let tol = 1e-5 * want.abs().max(1.0);
                assert!(
                    (v - want).abs() <= tol,
                    "{shape:?} {channels:?} image {i}: runtime {v} vs {what} {want}"
                );
            }
        }
        // Scored straight from a dataset's u8 store, as `laq predict` does.
        let data = laq::data::Dataset {
            obs_shape: shape.to_vec(),
            observations: images.iter().map(|&v| v as u8).collect::<Vec<u8>>().into(),
            next_observations: images.iter().map(|&v| v as u8).collect::<Vec<u8>>().into(),
            rewards: vec![0.0; 40],
            terminals: vec![false; 40],
            timeouts: None,
            next_missing: None,
            actions: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("value.safetensors");
        model.save(&path, false).unwrap();
        let predicted = laq::eval::predict::values(&path, &data).unwrap();
        for (a, b) in predicted.iter().zip(&trainer) {
            assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{a} vs {b}");
        }
    }
}

/// int8 export of an image model quantises the linear layers only; the runtime matches
/// the dequantised file the trainer reads back.
#[test]
fn int8_image_models_keep_f32_convolutions() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let q = random_conv_net(&mut rng, [3, 16, 16], &[8, 8], &[32], 4);
    let model = ValueModel::from_qnetwork(&q, 0.9, BTreeMap::new()).unwrap();
    let bytes = model.to_bytes(true).unwrap();
    let back = ValueModel::from_bytes(&bytes).unwrap();
    assert_eq!(back.conv, model.conv);
    let owned = OwnedModel::from_vec(bytes).unwrap();
    let rt = owned.model();
    assert!(rt.layer(0).unwrap().int8 && rt.layer(1).unwrap().int8);
    let images = random_images(&mut rng, 20, [3, 16, 16]);
    let want = back.values_candle(&images, &Device::Cpu).unwrap();
    let mut scratch = vec![0f32; rt.scratch_len()];
    for (s, w) in images.chunks_exact(768).zip(&want) {
        let v = rt.value(s, &mut scratch).unwrap();
        assert!((v - w).abs() <= 1e-5 * w.abs().max(1.0), "{v} vs {w}");
    }
}
