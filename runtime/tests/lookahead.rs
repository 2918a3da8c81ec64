//! `Model::select_ahead` against an enumeration of every controller sequence.

mod common;

use common::{mlp, tiny, with_gate, Lcg};
use laq_runtime::{Candidate, Controller, Error, Model, Outcome, Status, MAX_LOOKAHEAD};

/// Adds a fixed step; reports `outcome`; fails where the first coordinate would pass
/// `wall`.
struct Step {
    delta: [f32; 2],
    outcome: Outcome,
    wall: f32,
}

impl Controller for Step {
    fn predict(&self, state: &[f32], next: &mut [f32]) -> Result<Outcome, Error> {
        if next.len() != 2 || state.len() != 2 {
            return Err(Error::StateLength);
        }
        for ((n, s), d) in next.iter_mut().zip(state).zip(self.delta) {
            *n = s + d;
        }
        if next[0] > self.wall {
            return Err(Error::Controller);
        }
        Ok(self.outcome)
    }
}

fn step(dx: f32, dy: f32) -> Step {
    Step {
        delta: [dx, dy],
        outcome: Outcome::default(),
        wall: f32::INFINITY,
    }
}

/// The best score of the sequences of `depth` controllers from `s` by enumeration, in
/// the order of operations the documentation gives: `r + gamma * best(rest)`, `r` for a
/// terminal step, `V` at the end.
fn best(m: &Model<'_>, s: &[f32], controllers: &[Step], depth: usize) -> Option<f32> {
    let mut top: Option<f32> = None;
    for c in controllers {
        let Some(score) = first(m, s, c, controllers, depth) else {
            continue;
        };
        top = Some(top.map_or(score, |t| t.max(score)));
    }
    top
}

fn first(m: &Model<'_>, s: &[f32], c: &Step, controllers: &[Step], depth: usize) -> Option<f32> {
    let mut next = [0.0; 2];
    let outcome = c.predict(s, &mut next).ok()?;
    if outcome.terminal {
        return Some(outcome.reward);
    }
    let rest = if depth == 1 {
        m.value(&next, &mut vec![0.0; m.scratch_len()]).ok()?
    } else {
        best(m, &next, controllers, depth - 1)?
    };
    Some(outcome.reward + m.gamma() * rest)
}

#[test]
fn lookahead_is_the_best_sequence() {
    let bytes = mlp(&[2, 16, 16, 3], "max_q", 5).to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    let mut rng = Lcg(11);
    let mut changed = 0;
    for case in 0..40 {
        let mut controllers: Vec<Step> = (0..5)
            .map(|_| step(rng.next() * 2.0, rng.next() * 2.0))
            .collect();
        // Some rewards, a terminal goal and a wall in some cases.
        controllers[1].outcome.reward = rng.next().abs() * 0.2;
        if case % 3 == 0 {
            controllers[2].outcome = Outcome {
                reward: rng.next(),
                terminal: true,
            };
        }
        if case % 4 == 0 {
            controllers[3].wall = 0.5;
        }
        let s = [rng.next(), rng.next()];
        let mut picks = vec![];
        for depth in 1..=3 {
            let mut scratch = vec![0.0; m.lookahead_scratch_len(depth)];
            let mut report = [Candidate::default(); 5];
            let k = m
                .select_ahead(&s, &controllers, depth, &mut scratch, &mut report)
                .unwrap();
            let expected: Vec<Option<f32>> = controllers
                .iter()
                .map(|c| first(&m, &s, c, &controllers, depth))
                .collect();
            for (i, (c, e)) in report.iter().zip(&expected).enumerate() {
                match e {
                    Some(e) => {
                        assert_eq!(c.status, Status::Valid, "case {case} depth {depth} #{i}");
                        assert_eq!(c.score, *e, "case {case} depth {depth} #{i}");
                    }
                    None => assert!(!c.status.is_valid(), "case {case} depth {depth} #{i}"),
                }
            }
            let top = best(&m, &s, &controllers, depth).unwrap();
            assert_eq!(report[k].score, top, "case {case} depth {depth}");
            let first_best = expected.iter().position(|e| *e == Some(top));
            assert_eq!(Some(k), first_best, "ties go to the lowest index");
            // With room for batched evaluation at the last step: the same.
            let mut wide = vec![0.0; m.lookahead_scratch_len(depth) + m.batch_scratch_len()];
            let mut again = [Candidate::default(); 5];
            let k2 = m
                .select_ahead(&s, &controllers, depth, &mut wide, &mut again)
                .unwrap();
            assert_eq!(format!("{k2} {again:?}"), format!("{k} {report:?}"));
            picks.push(k);
        }
        // Depth 1 is `select`.
        let mut scratch = vec![0.0; m.scratch_len()];
        let mut report = [Candidate::default(); 5];
        assert_eq!(
            m.select(&s, &controllers, &mut scratch, &mut report),
            Ok(picks[0])
        );
        changed += usize::from(picks.iter().any(|&p| p != picks[0]));
    }
    // Looking ahead changes some decisions (else this test would show nothing).
    assert!(changed > 0);
}

#[test]
fn a_step_with_no_continuation_or_outside_the_gate_cannot_win() {
    // States far from the gate's components fail it.
    let f = with_gate(mlp(&[2, 8, 3], "max_q", 4), 2, 2, None, "-6");
    let bytes = f.to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    let s = [0.0, 0.0];
    let far = step(50.0, 50.0);
    // Past 0.5, every controller runs into the wall at 0.9.
    let walled = [
        Step {
            wall: 0.9,
            ..step(0.6, 0.0)
        },
        Step {
            wall: 0.9,
            ..step(0.5, 0.1)
        },
    ];
    let mut scratch = vec![0.0; m.lookahead_scratch_len(2)];
    let mut report = [Candidate::default(); 2];
    assert_eq!(
        m.select_ahead(&s, &walled, 2, &mut scratch, &mut report),
        Err(Error::NoValidCandidate)
    );
    assert_eq!(report.map(|c| c.status), [Status::Failed; 2]);
    let both = [far, step(0.1, 0.0)];
    assert_eq!(
        m.select_ahead(&s, &both, 2, &mut scratch, &mut report),
        Ok(1)
    );
    assert_eq!(report[0].status, Status::OutOfDistribution);
    assert!(report[0].log_density.unwrap() < -6.0);
}

#[test]
fn lookahead_arguments() {
    let bytes = tiny().to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    let moves = [step(1.0, 0.0), step(-1.0, 0.0)];
    let s = [2.0, 2.0];
    let mut report = [Candidate::default(); 2];
    let mut scratch = vec![0.0; m.lookahead_scratch_len(MAX_LOOKAHEAD)];
    for bad in [0, MAX_LOOKAHEAD + 1] {
        assert_eq!(
            m.select_ahead(&s, &moves, bad, &mut scratch, &mut report),
            Err(Error::InvalidArgument)
        );
    }
    assert!(m
        .select_ahead(&s, &moves, MAX_LOOKAHEAD, &mut scratch, &mut report)
        .is_ok());
    let short = m.lookahead_scratch_len(3) - 1;
    assert_eq!(
        m.select_ahead(&s, &moves, 3, &mut scratch[..short], &mut report),
        Err(Error::BufferTooSmall)
    );
    assert_eq!(
        m.select_ahead(&s, &moves, 3, &mut scratch, &mut report[..1]),
        Err(Error::BufferTooSmall)
    );
    assert_eq!(
        m.select_ahead(&[1.0], &moves, 2, &mut scratch, &mut report),
        Err(Error::StateLength)
    );
    let none: [Step; 0] = [];
    assert_eq!(
        m.select_ahead(&s, &none, 2, &mut scratch, &mut []),
        Err(Error::NoValidCandidate)
    );
    // A terminal first step ends its sequence: it scores its reward, V := 0.
    let goal = Step {
        outcome: Outcome {
            reward: 1e3,
            terminal: true,
        },
        ..step(0.0, 0.0)
    };
    let with_goal = [step(1.0, 0.0), goal];
    assert_eq!(
        m.select_ahead(&s, &with_goal, 3, &mut scratch, &mut report),
        Ok(1)
    );
    assert_eq!((report[1].score, report[1].value), (1e3, 0.0));
}
