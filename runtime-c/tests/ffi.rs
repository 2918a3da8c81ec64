//! The C functions called from Rust, for what a C test cannot easily arrange: misaligned
//! pointers, stale handle storage, flag bytes other than 0 and 1, and many corrupted
//! files (none may crash, and a refused file leaves the handle empty).

use std::cell::Cell;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::ptr;

use laq_runtime::{Candidate, Controller, Error, Model, Outcome, Status, MAX_LOOKAHEAD};
use laq_runtime_c::*;

fn grid_bytes() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/gridworld/value.safetensors"
    );
    std::fs::read(path).expect("the shipped grid model")
}

fn ok(code: i32) -> i32 {
    assert_eq!(code, laq_error::LAQ_OK as i32, "{:?}", unsafe {
        std::ffi::CStr::from_ptr(laq_error_str(code))
    });
    code
}

fn load(bytes: &[u8]) -> Box<laq_model> {
    let mut m = Box::new(MaybeUninit::<laq_model>::zeroed());
    let rc = unsafe { laq_model_init(m.as_mut_ptr(), bytes.as_ptr(), bytes.len()) };
    ok(rc);
    // SAFETY: zeroed, then filled by a successful init.
    unsafe { Box::from_raw(Box::into_raw(m).cast::<laq_model>()) }
}

#[test]
fn values_equal_the_runtime() {
    let bytes = grid_bytes();
    let m = load(&bytes);
    let model = Model::new_checked(&bytes).unwrap();
    let n = unsafe { laq_scratch_len(&*m) };
    assert_eq!(n, model.scratch_len());
    let mut scratch = vec![0.0f32; n];
    let mut rust_scratch = vec![0.0f32; n];
    for r in 0..6 {
        for c in 0..6 {
            let s = [r as f32, c as f32];
            let mut v = f32::NAN;
            ok(unsafe { laq_value(&*m, s.as_ptr(), 2, scratch.as_mut_ptr(), n, &mut v) });
            let expected = model.value(&s, &mut rust_scratch).unwrap();
            assert_eq!(v.to_bits(), expected.to_bits(), "V({r}, {c})");
        }
    }
}

/// `bytes` with `key: value` added to the header's metadata.
fn with_meta(bytes: &[u8], key: &str, value: &str) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + n]).unwrap();
    let mut header = header.replacen(
        "\"__metadata__\":{",
        &format!("\"__metadata__\":{{\"{key}\":\"{value}\","),
        1,
    );
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&bytes[8 + n..]);
    out
}

#[test]
fn a_cost_per_step_maps_values_to_the_logs_units() {
    let bytes = grid_bytes();
    let mut info = MaybeUninit::<laq_info>::zeroed();
    ok(unsafe { laq_model_info(&*load(&bytes), info.as_mut_ptr()) });
    assert_eq!(unsafe { info.assume_init() }.cost_per_step, 0.0);
    let mut v = f32::NAN;
    ok(unsafe { laq_value_in_data_units(&*load(&bytes), 0.5, &mut v) });
    assert_eq!(v, 0.5);

    let cost = with_meta(&bytes, "cost_per_step", "-1");
    let m = load(&cost);
    let model = Model::new_checked(&cost).unwrap();
    let mut info = MaybeUninit::<laq_info>::zeroed();
    ok(unsafe { laq_model_info(&*m, info.as_mut_ptr()) });
    assert_eq!(unsafe { info.assume_init() }.cost_per_step, -1.0);
    ok(unsafe { laq_value_in_data_units(&*m, 0.5, &mut v) });
    assert_eq!(v, model.value_in_data_units(0.5));
    let gamma = model.gamma();
    assert!(
        (v - -(1.0 - gamma * 0.5) / (1.0 - gamma)).abs() < 1e-4,
        "{v}"
    );
    let rc = unsafe { laq_value_in_data_units(ptr::null(), 0.5, &mut v) };
    assert_ne!(rc, laq_error::LAQ_OK as i32);
}

#[test]
fn misaligned_and_stale_pointers_are_refused() {
    let bytes = grid_bytes();
    let m = load(&bytes);
    let n = unsafe { laq_scratch_len(&*m) };
    let mut scratch = vec![0.0f32; n + 1];
    let raw = [0u8; 12];
    // A state one byte past a float boundary.
    let misaligned = unsafe { raw.as_ptr().add(1) }.cast::<f32>();
    let mut v = 0.0f32;
    let rc = unsafe { laq_value(&*m, misaligned, 2, scratch.as_mut_ptr(), n, &mut v) };
    assert_eq!(rc, laq_error::LAQ_ERR_INVALID_ARGUMENT as i32);

    // A handle at an odd address, and storage that no init has touched.
    let mut storage = vec![0u64; LAQ_MODEL_WORDS + 1];
    let odd = unsafe { storage.as_mut_ptr().cast::<u8>().add(4) }.cast::<laq_model>();
    let rc = unsafe { laq_model_init(odd, bytes.as_ptr(), bytes.len()) };
    assert_eq!(rc, laq_error::LAQ_ERR_NOT_LOADED as i32);
    storage.fill(0x5a5a_5a5a_5a5a_5a5a);
    let stale = storage.as_ptr().cast::<laq_model>();
    let s = [0.0f32; 2];
    let rc = unsafe { laq_value(stale, s.as_ptr(), 2, scratch.as_mut_ptr(), n, &mut v) };
    assert_eq!(rc, laq_error::LAQ_ERR_NOT_LOADED as i32);
    assert_eq!(unsafe { laq_obs_len(stale) }, 0);

    // Scratch overlapping the state.
    let rc = unsafe {
        laq_value(
            &*m,
            scratch.as_ptr(),
            2,
            scratch.as_mut_ptr().add(1),
            n,
            &mut v,
        )
    };
    assert_eq!(rc, laq_error::LAQ_ERR_INVALID_ARGUMENT as i32);
}

#[test]
fn any_nonzero_terminal_byte_is_true() {
    let bytes = grid_bytes();
    let m = load(&bytes);
    let n = unsafe { laq_scratch_len(&*m) };
    let mut scratch = vec![0.0f32; n];
    let candidates = [0.0f32, 0.0, 1.0, 1.0];
    let rewards = [5.0f32, 0.0];
    // Byte 2 for the first candidate: terminal, so its score is its reward alone.
    let flags = [2u8, 0u8];
    let mut report = [MaybeUninit::<laq_candidate>::uninit(); 2];
    let mut best = usize::MAX;
    ok(unsafe {
        laq_select_report(
            &*m,
            candidates.as_ptr(),
            2,
            2,
            rewards.as_ptr(),
            flags.as_ptr().cast::<bool>(),
            scratch.as_mut_ptr(),
            n,
            report.as_mut_ptr().cast::<laq_candidate>(),
            2,
            &mut best,
        )
    });
    let first = unsafe { report[0].assume_init() };
    assert!(first.terminal);
    assert_eq!(first.value, 0.0);
    assert_eq!(first.score, 5.0);
    assert_eq!(best, 0);
}

#[test]
fn corrupted_files_never_crash() {
    let bytes = grid_bytes();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut refused = 0;
    for i in 0..2000 {
        let mut copy = bytes.clone();
        let flips = 1 + (next() % 4) as usize;
        for _ in 0..flips {
            // Mostly the header, where a flip changes the structure.
            let at = if i % 4 == 0 {
                (next() as usize) % copy.len()
            } else {
                (next() as usize) % 800
            };
            copy[at] ^= 1 << (next() % 8);
        }
        let len = if i % 5 == 0 {
            (next() as usize) % copy.len()
        } else {
            copy.len()
        };
        let mut m = Box::new(MaybeUninit::<laq_model>::zeroed());
        let rc = unsafe { laq_model_init(m.as_mut_ptr(), copy.as_ptr(), len) };
        let runtime = Model::new_checked(&copy[..len]);
        assert_eq!(
            rc == 0,
            runtime.is_ok(),
            "the C layer and the runtime disagree"
        );
        let m = m.as_ptr();
        let mut scratch = vec![0.0f32; 1024];
        let s = [1.0f32, 2.0];
        let mut v = 0.0f32;
        let rc2 = unsafe { laq_value(m, s.as_ptr(), 2, scratch.as_mut_ptr(), 1024, &mut v) };
        if rc < 0 {
            refused += 1;
            assert_eq!(rc2, laq_error::LAQ_ERR_NOT_LOADED as i32);
            assert!(!unsafe { std::ffi::CStr::from_ptr(laq_error_str(rc)) }.is_empty());
        } else if rc2 == 0 {
            let mut expected_scratch = vec![0.0f32; 1024];
            let expected = runtime.unwrap().value(&s, &mut expected_scratch).unwrap();
            assert_eq!(v.to_bits(), expected.to_bits());
        }
    }
    assert!(refused > 100, "only {refused} corrupted files refused");
    // NULL everywhere.
    let rc = unsafe { laq_model_init(ptr::null_mut(), ptr::null(), 0) };
    assert_eq!(rc, laq_error::LAQ_ERR_NULL as i32);
}

/// A controller of the lookahead tests: adds `delta` and reports `outcome`; unavailable
/// where the first coordinate would pass `wall`.
#[derive(Clone, Copy)]
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

/// What the C callback reads through its context.
struct Steps {
    steps: Vec<Step>,
    calls: Cell<usize>,
    /// Whether a call found its outputs other than 0 and false on entry (a panic could
    /// not cross the C boundary to report it).
    unset: Cell<bool>,
}

impl Steps {
    fn new(steps: Vec<Step>) -> Self {
        Steps {
            steps,
            calls: Cell::new(0),
            unset: Cell::new(false),
        }
    }
}

/// The C callback over a `Steps`: `Step::predict` through raw pointers.
unsafe extern "C" fn predict_step(
    context: *mut c_void,
    controller: usize,
    state: *const f32,
    next: *mut f32,
    obs_len: usize,
    reward: *mut f32,
    terminal: *mut bool,
) -> i32 {
    let steps = unsafe { &*context.cast::<Steps>() };
    steps.calls.set(steps.calls.get() + 1);
    if unsafe { *reward != 0.0 || *terminal } {
        steps.unset.set(true);
    }
    let state = unsafe { std::slice::from_raw_parts(state, obs_len) };
    let next = unsafe { std::slice::from_raw_parts_mut(next, obs_len) };
    let Some(s) = steps.steps.get(controller) else {
        return -1;
    };
    match s.predict(state, next) {
        Ok(o) => {
            unsafe {
                *reward = o.reward;
                *terminal = o.terminal;
            }
            0
        }
        Err(_) => 1,
    }
}

fn c_status(s: Status) -> laq_status {
    match s {
        Status::Valid => laq_status::LAQ_STATUS_VALID,
        Status::NonFinite => laq_status::LAQ_STATUS_NON_FINITE,
        Status::OutOfDistribution => laq_status::LAQ_STATUS_OUT_OF_DISTRIBUTION,
        Status::Failed => laq_status::LAQ_STATUS_FAILED,
    }
}

/// `laq_select_ahead` with the `Steps` callback: its code, its pick and its report.
fn select_ahead_c(
    m: &laq_model,
    state: &[f32],
    steps: &Steps,
    depth: usize,
    scratch: &mut [f32],
) -> (i32, usize, Vec<laq_candidate>) {
    let n = steps.steps.len();
    let mut report = vec![MaybeUninit::<laq_candidate>::zeroed(); n];
    let mut best = usize::MAX;
    let rc = unsafe {
        laq_select_ahead(
            m,
            state.as_ptr(),
            state.len(),
            n,
            Some(predict_step),
            ptr::from_ref(steps).cast_mut().cast::<c_void>(),
            depth,
            scratch.as_mut_ptr(),
            scratch.len(),
            report.as_mut_ptr().cast::<laq_candidate>(),
            n,
            &mut best,
        )
    };
    let report = report
        .into_iter()
        .map(|c| unsafe { c.assume_init() })
        .collect();
    (rc, best, report)
}

#[test]
fn select_ahead_equals_the_runtime() {
    let grid = grid_bytes();
    let gated = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../runtime/tests/data/tiny.safetensors"
    ))
    .expect("the runtime's gated test model");
    let mut seen = std::collections::HashSet::new();
    let mut changed = 0;
    for bytes in [&grid, &gated] {
        let m = load(bytes);
        let model = Model::new_checked(bytes).unwrap();
        for case in 0..12 {
            let mut steps = vec![
                step(1.0, 0.0),
                step(0.0, 1.0),
                step(1.0, 1.0),
                step(-1.0, 0.0),
                step(0.0, -1.0),
                // Far outside the data: the gate refuses it on the gated model.
                step(50.0, 50.0),
            ];
            // A reward, a terminal goal, a wall.
            steps[1].outcome.reward = 0.05 * case as f32;
            if case % 3 == 0 {
                steps[2].outcome = Outcome {
                    reward: 0.5,
                    terminal: true,
                };
            }
            for s in &mut steps[..4] {
                s.wall = if case % 2 == 0 { 3.5 } else { 4.5 };
            }
            let state = [(case % 5) as f32, (case / 2) as f32];
            let steps = Steps::new(steps);
            let mut picks = vec![];
            for depth in 1..=3 {
                let n = unsafe { laq_lookahead_scratch_len(&*m, depth) };
                assert_eq!(n, model.lookahead_scratch_len(depth));
                let mut scratch = vec![0.0f32; n];
                let (rc, best, report) = select_ahead_c(&m, &state, &steps, depth, &mut scratch);
                let mut expected = vec![Candidate::default(); steps.steps.len()];
                let mut rust_scratch = vec![0.0f32; n];
                // The controllers past the walls keep a valid first step in every case.
                let k = model
                    .select_ahead(
                        &state,
                        &steps.steps,
                        depth,
                        &mut rust_scratch,
                        &mut expected,
                    )
                    .unwrap();
                let what = format!("case {case} depth {depth}");
                ok(rc);
                assert_eq!(best, k, "{what}");
                picks.push(k);
                for (i, (c, e)) in report.iter().zip(&expected).enumerate() {
                    assert_eq!(c.status, c_status(e.status), "{what} #{i}");
                    assert_eq!(
                        (c.reward.to_bits(), c.terminal),
                        (e.outcome.reward.to_bits(), e.outcome.terminal),
                        "{what} #{i}"
                    );
                    assert_eq!(c.value.to_bits(), e.value.to_bits(), "{what} #{i}");
                    assert_eq!(c.score.to_bits(), e.score.to_bits(), "{what} #{i}");
                    assert_eq!(
                        c.log_density.to_bits(),
                        e.log_density.unwrap_or(f32::NAN).to_bits(),
                        "{what} #{i}"
                    );
                    seen.insert(c.status as i32);
                }
                // Without a report: the same pick.
                let mut again = usize::MAX;
                let rc = unsafe {
                    laq_select_ahead(
                        &*m,
                        state.as_ptr(),
                        2,
                        steps.steps.len(),
                        Some(predict_step),
                        ptr::from_ref(&steps).cast_mut().cast::<c_void>(),
                        depth,
                        scratch.as_mut_ptr(),
                        n,
                        ptr::null_mut(),
                        0,
                        &mut again,
                    )
                };
                ok(rc);
                assert_eq!(again, best, "{what}");
            }
            changed += usize::from(picks.iter().any(|&p| p != picks[0]));
            assert!(steps.calls.get() > 0);
            assert!(!steps.unset.get(), "outputs not preset to 0 and false");
        }
    }
    // Valid, out of distribution and failed first steps all came up, and looking ahead
    // changed some picks.
    let all = [
        laq_status::LAQ_STATUS_VALID,
        laq_status::LAQ_STATUS_OUT_OF_DISTRIBUTION,
        laq_status::LAQ_STATUS_FAILED,
    ];
    for s in all {
        assert!(seen.contains(&(s as i32)), "no {s:?} in {seen:?}");
    }
    assert!(changed > 0);
}

#[test]
fn select_ahead_arguments() {
    let bytes = grid_bytes();
    let m = load(&bytes);
    let model = Model::new_checked(&bytes).unwrap();
    let code = |e: laq_error| e as i32;
    let steps = Steps::new(vec![step(1.0, 0.0), step(0.0, 1.0)]);
    let context = ptr::from_ref(&steps).cast_mut().cast::<c_void>();
    let state = [1.0f32, 1.0];
    let mut scratch = vec![0.0f32; model.lookahead_scratch_len(MAX_LOOKAHEAD)];
    let n = scratch.len();
    let mut best = usize::MAX;
    let call = |state: &[f32],
                count: usize,
                predict: laq_predict_fn,
                depth: usize,
                scratch: &mut [f32],
                best: &mut usize| unsafe {
        laq_select_ahead(
            &*m,
            state.as_ptr(),
            state.len(),
            count,
            predict,
            context,
            depth,
            scratch.as_mut_ptr(),
            scratch.len(),
            ptr::null_mut(),
            0,
            best,
        )
    };
    let p = Some(predict_step as unsafe extern "C" fn(_, _, _, _, _, _, _) -> _);
    assert_eq!(LAQ_MAX_LOOKAHEAD, MAX_LOOKAHEAD);
    ok(call(&state, 2, p, MAX_LOOKAHEAD, &mut scratch, &mut best));
    assert_eq!(
        call(&state, 2, None, 2, &mut scratch, &mut best),
        code(laq_error::LAQ_ERR_NULL)
    );
    for depth in [0, MAX_LOOKAHEAD + 1] {
        assert_eq!(
            call(&state, 2, p, depth, &mut scratch, &mut best),
            code(laq_error::LAQ_ERR_INVALID_ARGUMENT),
            "depth {depth}"
        );
    }
    let short = model.lookahead_scratch_len(3) - 1;
    assert_eq!(
        call(&state, 2, p, 3, &mut scratch[..short], &mut best),
        code(laq_error::LAQ_ERR_BUFFER_TOO_SMALL)
    );
    assert_eq!(
        call(&[1.0, 1.0, 1.0], 2, p, 2, &mut scratch, &mut best),
        code(laq_error::LAQ_ERR_STATE_LENGTH)
    );
    assert_eq!(
        call(&[f32::NAN, 1.0], 2, p, 2, &mut scratch, &mut best),
        code(laq_error::LAQ_ERR_NON_FINITE_STATE)
    );
    assert_eq!(
        call(&state, 0, p, 2, &mut scratch, &mut best),
        code(laq_error::LAQ_ERR_NO_VALID_CANDIDATE)
    );

    // As many controllers as the C layer holds, and one more.
    let many = Steps::new(vec![step(0.0, 1.0); LAQ_MAX_CONTROLLERS + 1]);
    for (count, expected) in [
        (LAQ_MAX_CONTROLLERS, laq_error::LAQ_OK),
        (LAQ_MAX_CONTROLLERS + 1, laq_error::LAQ_ERR_INVALID_ARGUMENT),
    ] {
        let rc = unsafe {
            laq_select_ahead(
                &*m,
                state.as_ptr(),
                2,
                count,
                p,
                ptr::from_ref(&many).cast_mut().cast::<c_void>(),
                1,
                scratch.as_mut_ptr(),
                n,
                ptr::null_mut(),
                0,
                &mut best,
            )
        };
        assert_eq!(rc, code(expected), "{count} controllers");
    }

    // Every controller unavailable from (2, 1); from (1, 1) only the first, once.
    let walled = Steps::new(vec![
        Step {
            wall: 1.5,
            ..step(0.3, 0.0)
        },
        Step {
            wall: 1.2,
            ..step(0.4, 0.0)
        },
    ]);
    for (state, depth) in [([2.0, 1.0], 1), ([1.0, 1.0], 2), ([1.0, 1.0], 3)] {
        let (rc, _, report) = select_ahead_c(&m, &state, &walled, depth, &mut scratch);
        assert_eq!(
            rc,
            code(laq_error::LAQ_ERR_NO_VALID_CANDIDATE),
            "depth {depth}"
        );
        assert!(
            report
                .iter()
                .all(|c| c.status == laq_status::LAQ_STATUS_FAILED),
            "depth {depth}"
        );
    }
    let (rc, first, _) = select_ahead_c(&m, &[1.0, 1.0], &walled, 1, &mut scratch);
    assert_eq!((rc, first), (0, 0));

    // The caller's other mistakes: a short report, overlapping buffers, NULL pointers.
    let mut report = [MaybeUninit::<laq_candidate>::uninit(); 1];
    let rc = unsafe {
        laq_select_ahead(
            &*m,
            state.as_ptr(),
            2,
            2,
            p,
            context,
            2,
            scratch.as_mut_ptr(),
            n,
            report.as_mut_ptr().cast::<laq_candidate>(),
            1,
            &mut best,
        )
    };
    assert_eq!(rc, code(laq_error::LAQ_ERR_BUFFER_TOO_SMALL));
    let rc = unsafe {
        laq_select_ahead(
            &*m,
            scratch.as_ptr(),
            2,
            2,
            p,
            context,
            2,
            scratch.as_mut_ptr(),
            n,
            ptr::null_mut(),
            0,
            &mut best,
        )
    };
    assert_eq!(rc, code(laq_error::LAQ_ERR_INVALID_ARGUMENT));
    let rc = unsafe {
        laq_select_ahead(
            &*m,
            state.as_ptr(),
            2,
            2,
            p,
            context,
            2,
            scratch.as_mut_ptr(),
            n,
            ptr::null_mut(),
            0,
            ptr::null_mut(),
        )
    };
    assert_eq!(rc, code(laq_error::LAQ_ERR_NULL));
    let rc = unsafe {
        laq_select_ahead(
            ptr::null(),
            state.as_ptr(),
            2,
            2,
            p,
            context,
            2,
            scratch.as_mut_ptr(),
            n,
            ptr::null_mut(),
            0,
            &mut best,
        )
    };
    assert_eq!(rc, code(laq_error::LAQ_ERR_NULL));
    assert_eq!(unsafe { laq_lookahead_scratch_len(ptr::null(), 2) }, 0);
}
