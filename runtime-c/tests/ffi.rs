//! The C functions called from Rust, for what a C test cannot easily arrange: misaligned
//! pointers, stale handle storage, flag bytes other than 0 and 1, and many corrupted
//! files (none may crash, and a refused file leaves the handle empty).

use std::mem::MaybeUninit;
use std::ptr;

use laq_runtime::Model;
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
