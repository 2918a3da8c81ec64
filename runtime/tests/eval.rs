//! Evaluation, density gate, controller selection and shaping against a plain f64
//! reference implementation of docs/model-format.md.

mod common;

use common::{mlp, tiny, with_gate, File, Lcg, Placed, Tensor};
use laq_runtime::{Candidate, Controller, Error, Model, Outcome, Predicted, Scratch, Status};

fn f32s(f: &File, name: &str) -> Vec<f64> {
    let t = f.tensors.iter().find(|t| t.name == name).unwrap();
    t.data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
        .collect()
}

fn meta(f: &File, key: &str) -> Option<String> {
    f.meta
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
}

/// Reference weights of layer `i`, dequantised if I8.
fn weights(f: &File, i: usize) -> (Vec<f64>, usize, usize) {
    let t = f
        .tensors
        .iter()
        .find(|t| t.name == format!("layers.{i}.weight"))
        .unwrap();
    let (rows, cols) = (t.shape[0] as usize, t.shape[1] as usize);
    let w = if t.dtype == "I8" {
        let scale = f32s(f, &format!("layers.{i}.scale"));
        t.data
            .iter()
            .enumerate()
            .map(|(k, &q)| q as i8 as f64 * scale[k / cols])
            .collect()
    } else {
        f32s(f, &t.name)
    };
    (w, rows, cols)
}

/// The reference forward pass: (V, y).
fn reference(f: &File, s: &[f32]) -> (f64, Vec<f64>) {
    let mean = f32s(f, "input.mean");
    let scale = f32s(f, "input.scale");
    let mut h: Vec<f64> = s
        .iter()
        .enumerate()
        .map(|(j, &v)| (v as f64 - mean[j]) * scale[j])
        .collect();
    let layers: usize = meta(f, "num_layers").unwrap().parse().unwrap();
    for i in 0..layers {
        let (w, rows, cols) = weights(f, i);
        let b = f32s(f, &format!("layers.{i}.bias"));
        h = (0..rows)
            .map(|r| {
                let v = (0..cols).map(|c| w[r * cols + c] * h[c]).sum::<f64>() + b[r];
                if i + 1 < layers {
                    v.max(0.0)
                } else {
                    v
                }
            })
            .collect();
    }
    let v = if meta(f, "head").unwrap() == "max_q" {
        h.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
    } else {
        1.0 - h.iter().map(|v| v * v).sum::<f64>().sqrt()
    };
    (v, h)
}

fn reference_log_density(f: &File, s: &[f32]) -> f64 {
    let w = f32s(f, "density.weights");
    let mu = f32s(f, "density.means");
    let var = f32s(f, "density.variances");
    let g = mu.len() / w.len();
    let dims: Vec<usize> = match f.tensors.iter().find(|t| t.name == "density.dims") {
        Some(t) => t
            .data
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as usize)
            .collect(),
        None => (0..g).collect(),
    };
    let terms: Vec<f64> = (0..w.len())
        .map(|m| {
            let t: f64 = (0..g)
                .map(|j| {
                    let k = m * g + j;
                    let d = s[dims[j]] as f64 - mu[k];
                    d * d / var[k] + (2.0 * std::f64::consts::PI * var[k]).ln()
                })
                .sum();
            w[m].ln() - 0.5 * t
        })
        .collect();
    let max = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    max + terms.iter().map(|t| (t - max).exp()).sum::<f64>().ln()
}

fn close(a: f32, b: f64, tol: f64) -> bool {
    (a as f64 - b).abs() <= tol * (1.0 + b.abs())
}

#[test]
fn matches_reference() {
    let mut rng = Lcg(5);
    for (dims, head) in [
        (&[2usize, 64, 64, 8][..], "max_q"),
        (&[4, 128, 128, 8][..], "max_q"),
        (&[3, 5, 1][..], "one_norm"),
        (&[7, 13, 6][..], "one_norm"),
        (&[1, 1][..], "max_q"),
        (&[9, 3, 3, 3, 3, 2][..], "max_q"),
    ] {
        let f = mlp(dims, head, dims.iter().sum::<usize>() as u64);
        let bytes = f.to_bytes();
        let placed = Placed::new(&bytes, 0);
        let m = Model::new_checked(placed.bytes()).unwrap();
        let mut scratch = vec![0.0f32; m.scratch_len()];
        for _ in 0..20 {
            let s = rng.vec(dims[0], 3.0);
            let (v, y) = reference(&f, &s);
            let out = m.evaluate(&s, &mut scratch).unwrap();
            assert!(close(out.value, v, 1e-5), "{dims:?}: {} vs {v}", out.value);
            assert_eq!(out.outputs.len(), y.len());
            for (a, b) in out.outputs.iter().zip(&y) {
                assert!(close(*a, *b, 1e-5));
            }
            if head == "max_q" {
                let best = out.best.unwrap();
                assert_eq!(out.outputs[best], out.value);
                assert!(
                    out.outputs[..best].iter().all(|&q| q < out.value),
                    "lowest index wins ties"
                );
            } else {
                assert_eq!(out.best, None);
            }
        }
    }
}

#[test]
fn int8_weights() {
    let f32_model = mlp(&[4, 24, 16, 5], "max_q", 17);
    let mut f = f32_model.clone();
    for i in [0usize, 2] {
        let (w, rows, cols) = weights(&f32_model, i);
        let scales: Vec<f32> = (0..rows)
            .map(|r| {
                w[r * cols..(r + 1) * cols]
                    .iter()
                    .fold(0.0f64, |a, v| a.max(v.abs())) as f32
                    / 127.0
            })
            .collect();
        let q: Vec<i8> = w
            .iter()
            .enumerate()
            .map(|(k, v)| (*v as f32 / scales[k / cols]).round().clamp(-127.0, 127.0) as i8)
            .collect();
        f = f
            .tensor(Tensor::i8(
                &format!("layers.{i}.weight"),
                &[rows as u64, cols as u64],
                &q,
            ))
            .tensor(Tensor::f32(
                &format!("layers.{i}.scale"),
                &[rows as u64],
                &scales,
            ));
    }
    let bytes = f.to_bytes();
    // Without the `int8` feature the loader refuses int8 layers.
    if !cfg!(feature = "int8") {
        assert_eq!(
            Model::new_checked(&bytes).err(),
            Some(laq_runtime::Error::UnsupportedFormat)
        );
        return;
    }
    for shift in [0, 1] {
        let placed = Placed::new(&bytes, shift);
        let m = Model::new_checked(placed.bytes()).unwrap();
        assert!(m.layer(0).unwrap().int8 && !m.layer(1).unwrap().int8 && m.layer(2).unwrap().int8);
        let mut scratch = Scratch::<64>::new();
        let mut rng = Lcg(8);
        for _ in 0..20 {
            let s = rng.vec(4, 2.0);
            let (v, _) = reference(&f, &s);
            let got = m.value(&s, &mut scratch).unwrap();
            assert!(close(got, v, 1e-5), "{got} vs {v}");
            // Quantisation error against the original f32 model stays small.
            let (v32, _) = reference(&f32_model, &s);
            assert!((got as f64 - v32).abs() < 0.05, "{got} vs {v32}");
        }
    }
}

#[test]
fn caller_errors() {
    let bytes = mlp(&[3, 8, 4], "max_q", 1).to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    assert_eq!(m.scratch_len(), 3 + 12);
    let mut exact = vec![0.0; m.scratch_len()];
    assert!(m.value(&[0.0; 3], &mut exact).is_ok());
    // Evaluation alone needs max(in + out); selection also needs room for next state.
    assert!(m.value(&[0.0; 3], &mut [0.0; 12]).is_ok());
    assert_eq!(
        m.value(&[0.0; 3], &mut [0.0; 11]),
        Err(Error::BufferTooSmall)
    );
    assert_eq!(m.value(&[0.0; 2], &mut exact), Err(Error::StateLength));
    assert_eq!(m.value(&[0.0; 4], &mut exact), Err(Error::StateLength));
    assert_eq!(
        m.value(&[0.0, f32::NAN, 0.0], &mut exact),
        Err(Error::NonFiniteState)
    );
    assert_eq!(
        m.log_density(&[f32::INFINITY, 0.0, 0.0]),
        Err(Error::NonFiniteState)
    );
    assert_eq!(m.log_density(&[0.0; 3]), Ok(None));
    assert!(m.in_distribution(&[0.0; 3]).unwrap());
    // Extreme inputs overflow: reported, not returned as a value.
    assert_eq!(
        m.value(&[f32::MAX, f32::MAX, f32::MAX], &mut exact),
        Err(Error::NonFiniteOutput)
    );
    let table: [&[f32]; 1] = [&[0.0; 3]];
    let mut report = [Candidate::default(); 1];
    assert_eq!(
        m.select(&[0.0; 3], &table, &mut exact[..14], &mut report),
        Err(Error::BufferTooSmall)
    );
    assert_eq!(
        m.select(&[0.0; 3], &table, &mut exact, &mut []),
        Err(Error::BufferTooSmall)
    );
}

#[test]
fn density_gate() {
    let f = with_gate(mlp(&[3, 8, 4], "max_q", 2), 3, 3, None, "-6");
    let bytes = f.to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    let mut rng = Lcg(3);
    let mut scratch = vec![0.0; m.scratch_len()];
    let (mut inside, mut outside) = (0, 0);
    for _ in 0..200 {
        let s = rng.vec(3, 4.0);
        let lp = m.log_density(&s).unwrap().unwrap();
        let want = reference_log_density(&f, &s);
        assert!(close(lp, want, 1e-5), "{lp} vs {want}");
        let gated = m.gated_value(&s, &mut scratch).unwrap();
        assert_eq!(gated.in_distribution, lp >= -6.0);
        assert_eq!(gated.log_density, Some(lp));
        if gated.in_distribution {
            inside += 1;
            assert_eq!(gated.value, gated.raw_value);
        } else {
            outside += 1;
            assert_eq!(gated.value, 0.0);
        }
    }
    assert!(inside > 10 && outside > 10, "{inside} {outside}");
    // Far away: every component underflows; log p is -inf, not NaN.
    assert_eq!(
        m.log_density(&[1e30, 0.0, 0.0]).unwrap(),
        Some(f32::NEG_INFINITY)
    );
    assert!(!m.in_distribution(&[1e30, 0.0, 0.0]).unwrap());

    // A gate over a subset of dimensions ignores the others.
    let f = with_gate(mlp(&[3, 8, 4], "max_q", 2), 3, 2, Some(&[2, 0]), "-6");
    let bytes = f.to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    let a = m.log_density(&[0.5, -100.0, 0.25]).unwrap().unwrap();
    let b = m.log_density(&[0.5, 100.0, 0.25]).unwrap().unwrap();
    assert_eq!(a, b);
    assert!(close(a, reference_log_density(&f, &[0.5, 0.0, 0.25]), 1e-5));
}

/// A controller that adds a fixed step and reports a given outcome.
struct Step {
    delta: [f32; 2],
    outcome: Outcome,
}

impl Controller for Step {
    fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, Error> {
        for ((n, s), d) in next.iter_mut().zip(state).zip(self.delta) {
            *n = s + d;
        }
        Ok(self.outcome)
    }
}

struct Broken;

impl Controller for Broken {
    fn predict(&self, _: &[f32], _: &mut [f32]) -> Result<Outcome, Error> {
        Err(Error::Controller)
    }
}

fn tiny_model(bytes: &[u8]) -> Model<'_> {
    Model::new_checked(bytes).unwrap()
}

#[test]
fn selection_ranks_by_value() {
    let bytes = tiny().to_bytes();
    let m = tiny_model(&bytes);
    let mut scratch = Scratch::<9>::new();
    let s = [2.0, 2.0];
    let table: [&[f32]; 4] = [&[1.0, 1.0], &[3.0, 3.0], &[2.0, 3.0], &[3.0, 3.0]];
    let mut report = [Candidate::default(); 4];
    let best = m.select(&s, &table, &mut scratch, &mut report).unwrap();
    assert_eq!(best, 1, "tie between 1 and 3 goes to the lowest index");
    for (c, next) in report.iter().zip(table) {
        let v = m.value(next, &mut [0.0; 9]).unwrap();
        assert_eq!(c.status, Status::Valid);
        assert_eq!(c.value, v);
        assert_eq!(c.score, 0.9 * v);
        assert!(c.log_density.is_some());
    }
    assert_eq!(report[1].score, report[3].score);
    // Ranking with reward 0 is exactly ranking by V(next).
    let mut by_v: Vec<usize> = (0..4).collect();
    by_v.sort_by(|&a, &b| report[b].value.total_cmp(&report[a].value).then(a.cmp(&b)));
    assert_eq!(by_v[0], best);
}

#[test]
fn selection_statuses() {
    let bytes = tiny().to_bytes();
    let m = tiny_model(&bytes);
    let mut scratch = Scratch::<9>::new();
    let s = [2.0, 2.0];
    let none = Outcome::default();
    let nan = Step {
        delta: [f32::NAN, 0.0],
        outcome: none,
    };
    let far = Step {
        delta: [50.0, 50.0],
        outcome: none,
    };
    let good = Step {
        delta: [-1.0, 0.0],
        outcome: none,
    };
    let bad_reward = Step {
        delta: [1.0, 1.0],
        outcome: Outcome {
            reward: f32::INFINITY,
            terminal: false,
        },
    };
    let goal = Step {
        delta: [0.0, 0.0],
        outcome: Outcome {
            reward: 1.0,
            terminal: true,
        },
    };
    let candidates: [&dyn Controller; 6] = [&nan, &far, &Broken, &good, &bad_reward, &goal];
    let mut report = [Candidate::default(); 6];
    let best = m
        .select(&s, &candidates, &mut scratch, &mut report)
        .unwrap();
    let statuses: Vec<Status> = report.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        [
            Status::NonFinite,
            Status::OutOfDistribution,
            Status::Failed,
            Status::Valid,
            Status::NonFinite,
            Status::Valid
        ]
    );
    // The far state has a high raw value but is out of distribution: it never wins.
    assert!(report[1].value > report[3].value);
    assert!(report[1].log_density.unwrap() < -8.0);
    // The terminal goal scores its reward (V := 0) and wins here.
    assert_eq!(report[5].score, 1.0);
    assert_eq!(report[5].value, 0.0);
    assert_eq!(best, 5);

    // Nothing valid: an error, and the report still says why.
    let candidates: [&dyn Controller; 3] = [&nan, &far, &Broken];
    let mut report = [Candidate::default(); 3];
    assert_eq!(
        m.select(&s, &candidates, &mut scratch, &mut report),
        Err(Error::NoValidCandidate)
    );
    assert_eq!(report[1].status, Status::OutOfDistribution);
    let empty: [&dyn Controller; 0] = [];
    assert_eq!(
        m.select(&s, &empty, &mut scratch, &mut []),
        Err(Error::NoValidCandidate)
    );
    // Wrong-length table entries fail instead of panicking.
    let table: [&[f32]; 1] = [&[1.0]];
    assert_eq!(
        m.select(&s, &table, &mut scratch, &mut report),
        Err(Error::NoValidCandidate)
    );
    assert_eq!(report[0].status, Status::Failed);
}

#[test]
fn selection_uses_gamma_and_rewards() {
    let bytes = tiny().to_bytes();
    let mut m = tiny_model(&bytes);
    let mut scratch = Scratch::<9>::new();
    let s = [2.0, 2.0];
    let v_hi = m.value(&[3.0, 3.0], &mut scratch).unwrap();
    let v_lo = m.value(&[2.0, 3.0], &mut scratch).unwrap();
    assert!(v_hi > v_lo);
    // A reward on the lower-valued state that beats gamma * (v_hi - v_lo).
    let gap = 0.9 * (v_hi - v_lo);
    let table = [
        Predicted {
            next: &[3.0, 3.0],
            outcome: Outcome::default(),
        },
        Predicted {
            next: &[2.0, 3.0],
            outcome: Outcome {
                reward: gap * 1.5,
                terminal: false,
            },
        },
    ];
    let mut report = [Candidate::default(); 2];
    assert_eq!(m.select(&s, &table, &mut scratch, &mut report), Ok(1));
    // Overriding the discount changes the scores (the reward still wins at gamma = 1).
    m.set_gamma(1.0).unwrap();
    assert_eq!(m.select(&s, &table, &mut scratch, &mut report), Ok(1));
    assert_eq!(report[0].score, v_hi);
    m.set_gamma(0.0).unwrap();
    assert_eq!(m.select(&s, &table, &mut scratch, &mut report), Ok(1));
    assert_eq!(m.set_gamma(1.5), Err(Error::InvalidArgument));
}

#[test]
fn shaping() {
    let bytes = tiny().to_bytes();
    let m = tiny_model(&bytes);
    let mut scratch = Scratch::<9>::new();
    let (s, s2) = ([1.0, 1.0], [2.0, 3.0]);
    let v = m.value(&s, &mut scratch).unwrap();
    let v2 = m.value(&s2, &mut scratch).unwrap();
    let r = 0.25;
    let shaped = m
        .shaped_reward(
            &s,
            Outcome {
                reward: r,
                terminal: false,
            },
            &s2,
            &mut scratch,
        )
        .unwrap();
    assert_eq!(shaped, r + 0.9 * v2 - v);
    let terminal = m
        .shaped_reward(
            &s,
            Outcome {
                reward: r,
                terminal: true,
            },
            &s2,
            &mut scratch,
        )
        .unwrap();
    assert_eq!(terminal, r - v);
    // Out-of-distribution next state: V(s') := 0.
    let far = m
        .shaped_reward(
            &s,
            Outcome {
                reward: r,
                terminal: false,
            },
            &[90.0, 90.0],
            &mut scratch,
        )
        .unwrap();
    assert_eq!(far, r - v);
    assert_eq!(
        m.shaped_reward(
            &s,
            Outcome {
                reward: f32::NAN,
                terminal: false
            },
            &s2,
            &mut scratch
        ),
        Err(Error::InvalidArgument)
    );
    assert_eq!(
        m.shaped_reward(
            &s,
            Outcome {
                reward: r,
                terminal: true
            },
            &[1.0],
            &mut scratch
        ),
        Err(Error::StateLength)
    );
}

/// A V learned above a cost per step shapes and selects in the log's units: the value
/// is the return that cost gives, `c (1 - gamma V) / (1 - gamma)`, and a state the gate
/// rejects is worth the cost for ever.
#[test]
fn a_cost_per_step_in_the_rewards_units() {
    let bytes = tiny().meta("cost_per_step", "-2").to_bytes();
    let m = tiny_model(&bytes);
    assert_eq!(m.cost_per_step(), Some(-2.0));
    let mut scratch = Scratch::<9>::new();
    let (s, s2) = ([1.0, 1.0], [2.0, 3.0]);
    let v = m.value(&s, &mut scratch).unwrap();
    let v2 = m.value(&s2, &mut scratch).unwrap();
    let ret = |v: f32| -2.0 * (1.0 - 0.9 * v) / (1.0 - 0.9);
    assert_eq!(m.value_in_data_units(v), ret(v));
    // One step from an end (V = 1) the return is the one cost that step pays.
    assert!((m.value_in_data_units(1.0) - -2.0).abs() < 1e-5);
    let step = Outcome {
        reward: -2.0,
        terminal: false,
    };
    let shaped = m.shaped_reward(&s, step, &s2, &mut scratch).unwrap();
    assert_eq!(shaped, -2.0 + 0.9 * ret(v2) - ret(v));
    let end = Outcome {
        reward: -2.0,
        terminal: true,
    };
    let shaped = m.shaped_reward(&s, end, &s2, &mut scratch).unwrap();
    assert_eq!(shaped, -2.0 - ret(v));
    let far = m
        .shaped_reward(&s, step, &[90.0, 90.0], &mut scratch)
        .unwrap();
    assert_eq!(far, -2.0 + 0.9 * ret(0.0) - ret(v));
    // The map is the file's: a discount set for shaping does not move it.
    let mut m = tiny_model(&bytes);
    m.set_gamma(0.5).unwrap();
    assert_eq!(m.value_in_data_units(v), ret(v));
    let shaped = m.shaped_reward(&s, step, &s2, &mut scratch).unwrap();
    assert_eq!(shaped, -2.0 + 0.5 * ret(v2) - ret(v));

    // Selection adds rewards to values in the same units: an end at the cost of one
    // step beats a step that goes on, which in the model's own units (V' > 0 added to
    // the same reward) it would not.
    let m = tiny_model(&bytes);
    assert!(v2 > 0.0 && 0.9 * v2 < 1.0, "V' of s2: {v2}");
    let candidates = [
        Predicted {
            next: &s2,
            outcome: step,
        },
        Predicted {
            next: &s2,
            outcome: end,
        },
    ];
    let mut report = [Candidate::default(); 2];
    assert_eq!(m.select(&s, &candidates, &mut scratch, &mut report), Ok(1));
    assert_eq!(report[0].value, ret(v2));
    assert_eq!(report[0].score, -2.0 + 0.9 * ret(v2));
    assert_eq!(report[1].score, -2.0);
}

#[cfg(feature = "alloc")]
#[test]
fn owned() {
    let bytes = tiny().to_bytes();
    let owned = laq_runtime::OwnedModel::from_vec(bytes.clone()).unwrap();
    let mut scratch = [0.0; 9];
    assert_eq!(
        owned.model().value(&[1.0, 2.0], &mut scratch),
        Model::new_checked(&bytes)
            .unwrap()
            .value(&[1.0, 2.0], &mut scratch)
    );
}
