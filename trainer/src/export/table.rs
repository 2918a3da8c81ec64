//! A Q table of one-number states, exported as it is: a network that goes through every
//! entry. Where each state is one whole number (a discrete space's code, such as
//! gymnasium's Taxi gives), a network fitted to the table reads near codes as near
//! states and cannot follow Q-values that jump from code to code (docs/trust.md,
//! "Discrete spaces as gymnasium logs them"); this one is the table, piecewise linear
//! between the codes.

use super::{Head, Layer, ValueModel};
use crate::stages::qlearn::Table;
use std::collections::BTreeMap;

/// The table as a network of one hidden layer, where each state is one number: a ReLU
/// unit at each of the table's codes, `relu(x - c_i)`, and for each action the sum that
/// is `Q(c_i, a)` at every code `c_i`, linear between neighbouring codes and flat beyond
/// the first and the last. `None` where the states are wider than one number, where the
/// table holds fewer than two, or more than the runtime takes as a layer's inputs.
///
/// ```
/// use laq::data::Dataset;
/// use laq::export::table::exact;
/// use laq::stages::qlearn::{tabular, TabularConfig};
///
/// // Codes whose values jump: 0 -> 30 -> 10 -> 20, a reward on reaching 20.
/// let codes = [0f32, 30.0, 10.0, 20.0];
/// let d = Dataset {
///     obs_shape: vec![1],
///     observations: codes[..3].to_vec().into(),
///     next_observations: codes[1..].to_vec().into(),
///     rewards: vec![0.0, 0.0, 1.0],
///     terminals: vec![false, false, true],
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let table = tabular(&d, &[0, 0, 0], 1, &TabularConfig::default(), 0).unwrap();
/// let model = exact(&table, 0.99, Default::default()).unwrap();
/// let v = model.values_candle(&codes, &candle_core::Device::Cpu).unwrap();
/// for (c, v) in codes.iter().zip(&v) {
///     let want = table.value(&[*c]).unwrap() as f32;
///     assert!((v - want).abs() < 1e-5, "{c}: {v} against {want}");
/// }
/// assert!(v[0] < v[1] && v[1] < v[2]);
/// ```
pub fn exact(table: &Table, gamma: f64, info: BTreeMap<String, String>) -> Option<ValueModel> {
    let n = table.index.len();
    if table.index.width() != 1 || !(2..=laq_runtime::MAX_INPUT_DIM).contains(&n) {
        return None;
    }
    let k = table.num_actions;
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| table.index.row(a)[0].total_cmp(&table.index.row(b)[0]));
    let codes: Vec<f64> = order
        .iter()
        .map(|&s| f64::from(table.index.row(s)[0]))
        .collect();
    // Each action's slope between neighbouring codes; the output weights are the changes
    // of slope at each code, so that the sum is Q at every code.
    let mut weight = vec![0f32; k * n];
    let mut bias = vec![0f32; k];
    for a in 0..k {
        let q = |i: usize| table.q_row(order[i])[a];
        bias[a] = q(0) as f32;
        let mut before = 0.0;
        for i in 0..n {
            let slope = if i + 1 < n {
                (q(i + 1) - q(i)) / (codes[i + 1] - codes[i])
            } else {
                0.0
            };
            weight[a * n + i] = (slope - before) as f32;
            before = slope;
        }
    }
    // The codes are taken as they are: centred on the first, unscaled.
    let hidden = Layer {
        out_dim: n,
        in_dim: 1,
        weight: vec![1.0; n],
        bias: codes.iter().map(|c| (codes[0] - c) as f32).collect(),
    };
    Some(ValueModel {
        mean: vec![codes[0] as f32],
        scale: vec![1.0],
        conv: None,
        layers: vec![
            hidden,
            Layer {
                out_dim: k,
                in_dim: n,
                weight,
                bias,
            },
        ],
        head: Head::MaxQ,
        gamma,
        keep_f32: vec![],
        info,
        density: None,
        cost_per_step: None,
    })
}
