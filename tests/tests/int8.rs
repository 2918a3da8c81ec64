//! int8 export (`laq export --quantize int8`) keeps the grid model's ranking and choices.

use laq::envs::gridworld::GridWorld;
use laq::export::quantize::calibrate_int8;
use laq::export::ValueModel;
use laq_runtime::OwnedModel;

fn grid_values(bytes: Vec<u8>, states: &[[f32; 2]]) -> Vec<f32> {
    let owned = OwnedModel::from_vec(bytes).unwrap();
    let m = owned.model();
    let mut scratch = vec![0f32; m.scratch_len()];
    states
        .iter()
        .map(|s| m.value(s, &mut scratch).unwrap())
        .collect()
}

#[test]
fn int8_grid_model_keeps_ranking_and_controller_choice() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../models/gridworld/value.safetensors");
    let f32_bytes = std::fs::read(path).unwrap();
    let g = GridWorld::default();
    let data = g.generate(2000, 3, 0.0);
    let calib: Vec<f32> = data
        .observations
        .iter()
        .chain(&data.next_observations)
        .copied()
        .collect();
    let f32_model = ValueModel::from_bytes(&f32_bytes).unwrap();
    let calibrated = calibrate_int8(
        &f32_model,
        &calib,
        &Default::default(),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    let int8_bytes = calibrated.to_bytes(true).unwrap();
    assert!(
        int8_bytes.len() * 3 < f32_bytes.len() * 2,
        "int8 file is not smaller"
    );

    let cells: Vec<[f32; 2]> = (0..36).map(|i| [(i / 6) as f32, (i % 6) as f32]).collect();
    let vf = grid_values(f32_bytes.clone(), &cells);
    let vq = grid_values(int8_bytes.clone(), &cells);
    let to64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let rho = laq::util::stats::spearman(&to64(&vf), &to64(&vq));
    // Calibrated export: int8 for every layer but the last, which is refitted in f32.
    assert!(rho >= 0.999, "Spearman int8 vs f32: {rho}");

    // Controller choice: the move whose predicted next state has the best r + gamma V.
    let choose = |v: &[f32], s: usize| {
        let scores = (0..8).map(|a| {
            let (np, r, done) = g.outcome(g.cell(s), a);
            r + if done {
                0.0
            } else {
                0.95 * v[g.index(np)] as f64
            }
        });
        laq::envs::gridworld::argmax(scores)
    };
    let non_goal: Vec<usize> = (0..35).collect();
    let same = non_goal
        .iter()
        .filter(|&&s| choose(&vf, s) == choose(&vq, s))
        .count();
    assert!(
        same as f64 / non_goal.len() as f64 >= 0.99,
        "{same}/35 choices agree"
    );
    assert_eq!(g.behaviour_accuracy(&to64(&vf), 0.95), 1.0);
    assert_eq!(g.behaviour_accuracy(&to64(&vq), 0.95), 1.0);
}
