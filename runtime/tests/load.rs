//! Loader tests: valid files load; every kind of corrupted file is rejected with the
//! right error and without panicking.

mod common;

#[cfg(not(feature = "images"))]
use common::conv;
use common::{edit_header, join, mlp, split, tiny, with_gate, File, Placed, Tensor};
use laq_runtime::{Error, Head, Model, MAX_HEADER_LEN};

fn load(bytes: &[u8]) -> Result<Model<'_>, Error> {
    Model::new_checked(bytes)
}

fn err(bytes: &[u8]) -> Error {
    match load(bytes) {
        Ok(_) => panic!("file unexpectedly accepted"),
        Err(e) => e,
    }
}

fn base() -> File {
    mlp(&[3, 8, 5, 4], "max_q", 7)
}

#[test]
fn tiny_fixture_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors");
    let bytes = tiny().to_bytes();
    if std::env::var_os("LAQ_REGENERATE_FIXTURES").is_some() {
        std::fs::write(path, &bytes).unwrap();
    }
    let on_disk = std::fs::read(path).expect("fixture missing: run with LAQ_REGENERATE_FIXTURES=1");
    assert_eq!(
        on_disk, bytes,
        "fixture outdated: run with LAQ_REGENERATE_FIXTURES=1"
    );
}

#[test]
fn valid_files_load() {
    let bytes = base().to_bytes();
    let m = load(&bytes).unwrap();
    assert_eq!(m.input_dim(), 3);
    assert_eq!(m.num_layers(), 3);
    assert_eq!(m.output_dim(), 4);
    assert_eq!(m.head(), Head::MaxQ);
    assert_eq!(m.gamma(), 0.95);
    assert_eq!(m.macs(), 3 * 8 + 8 * 5 + 5 * 4);
    assert_eq!(m.scratch_len(), 3 + 13);
    assert!(!m.has_density_gate());
    assert_eq!(m.density_threshold(), None);

    let one_norm = mlp(&[2, 4, 1], "one_norm", 1)
        .without_meta("gamma")
        .to_bytes();
    let m = load(&one_norm).unwrap();
    assert_eq!(m.head(), Head::OneNorm);
    assert_eq!(m.gamma(), 1.0, "default discount");

    let gated = with_gate(base(), 3, 2, Some(&[0, 2]), "-5.5").to_bytes();
    let m = load(&gated).unwrap();
    assert_eq!(m.density_threshold(), Some(-5.5));

    let single = mlp(&[1, 1], "max_q", 3).to_bytes();
    assert!(load(&single).is_ok());

    assert_eq!(m.cost_per_step(), None);
    let cost = base().meta("cost_per_step", "-0.5").to_bytes();
    assert_eq!(load(&cost).unwrap().cost_per_step(), Some(-0.5));
}

#[test]
fn written_by_the_reference_crate() {
    use safetensors::tensor::{serialize, Dtype, TensorView};
    use std::collections::HashMap;
    let f = with_gate(base(), 3, 2, Some(&[1]), "-3");
    let views: Vec<(String, TensorView<'_>)> = f
        .tensors
        .iter()
        .map(|t| {
            let dtype = match t.dtype {
                "F32" => Dtype::F32,
                "I32" => Dtype::I32,
                _ => Dtype::I8,
            };
            let shape = t.shape.iter().map(|&d| d as usize).collect();
            (
                t.name.clone(),
                TensorView::new(dtype, shape, &t.data).unwrap(),
            )
        })
        .collect();
    let meta: HashMap<String, String> = f.meta.iter().cloned().collect();
    let bytes = serialize(views, Some(meta)).unwrap();
    let placed = Placed::new(&bytes, 0);
    let m = load(placed.bytes()).unwrap();
    assert!(m.is_aligned(), "the reference writer aligns tensors");
    let mine = load(&f.to_bytes())
        .unwrap()
        .value(&[0.1, 0.2, 0.3], &mut [0.0; 16])
        .unwrap();
    let theirs = m.value(&[0.1, 0.2, 0.3], &mut [0.0; 16]).unwrap();
    assert_eq!(mine, theirs);
}

#[test]
fn truncated() {
    let bytes = base().to_bytes();
    for n in 0..8 {
        assert_eq!(err(&bytes[..n]), Error::Truncated, "{n} bytes");
    }
    let (header, _) = split(&bytes);
    // Header cut short by the end of the file.
    assert_eq!(err(&bytes[..8 + header.len() - 1]), Error::Truncated);
    // Data cut short: the last tensor runs past the end.
    assert_eq!(err(&bytes[..bytes.len() - 1]), Error::InvalidOffsets);
    assert_eq!(err(&bytes[..8 + header.len()]), Error::InvalidOffsets);
}

#[test]
fn bad_header_length() {
    let bytes = base().to_bytes();
    let (header, _) = split(&bytes);
    let mut longer = bytes.clone();
    longer[..8].copy_from_slice(&(bytes.len() as u64 - 7).to_le_bytes());
    assert_eq!(err(&longer), Error::Truncated);
    let mut shorter = bytes.clone();
    shorter[..8].copy_from_slice(&(header.len() as u64 - 10).to_le_bytes());
    assert_eq!(err(&shorter), Error::InvalidJson);
    let mut zero = bytes.clone();
    zero[..8].copy_from_slice(&0u64.to_le_bytes());
    assert_eq!(err(&zero), Error::InvalidJson);
}

#[test]
fn header_too_long() {
    let bytes = base().to_bytes();
    let mut huge = bytes.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(err(&huge), Error::HeaderTooLong);
    let (header, data) = split(&bytes);
    // Exactly at the cap (padded with spaces): accepted.
    let mut at_cap = header.clone().into_bytes();
    at_cap.resize(MAX_HEADER_LEN, b' ');
    let mut file = (at_cap.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&at_cap);
    file.extend_from_slice(&data);
    assert!(load(&file).is_ok());
    // One byte more: rejected before reading it.
    let mut over = header.into_bytes();
    over.resize(MAX_HEADER_LEN + 1, b' ');
    let mut file = (over.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&over);
    file.extend_from_slice(&data);
    assert_eq!(err(&file), Error::HeaderTooLong);
}

#[test]
fn invalid_json() {
    let bytes = base().to_bytes();
    let edits: [fn(String) -> String; 9] = [
        |h: String| h.replacen('{', "[", 1),
        |h: String| h.replacen(':', "=", 1),
        |h: String| h.replace("}}", "}"),
        |h: String| format!("{h},"),
        |h: String| format!("{h}{{}}"),
        |h: String| h.replacen("\"data_offsets\"", "\"offsets\"", 1),
        |h: String| h.replacen("[0,", "[-0,", 1),
        |h: String| h.replacen(&format!("\"{}\"", laq_runtime::format::NAME), "1", 1),
        |h: String| h.replacen("\"dtype\":\"F32\",", "", 1),
    ];
    for edit in edits {
        assert_eq!(err(&edit_header(&bytes, edit)), Error::InvalidJson);
    }
    let (header, data) = split(&bytes);
    let mut raw = header.into_bytes();
    raw[20] = 0xff; // not UTF-8
    let mut file = (raw.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&raw);
    file.extend_from_slice(&data);
    assert_eq!(err(&file), Error::InvalidJson);
}

#[test]
fn escaped_spellings_do_not_match() {
    let bytes = base().to_bytes();
    // Names and the metadata the runtime reads are compared without decoding escapes.
    let escaped = edit_header(&bytes, |h| {
        h.replace("layers.0.bias", "layers.0.\\u0062ias")
    });
    assert_eq!(err(&escaped), Error::UnknownTensor);
    let escaped = edit_header(&bytes, |h| h.replace("\"1\"", "\"\\u0031\""));
    assert_eq!(err(&escaped), Error::UnsupportedFormat);
    // Escapes in free text are fine, and checked for syntax.
    let free = edit_header(&bytes, |h| {
        h.replace(
            "free text is ignored",
            "tab\\there \\u00e9 \\\"quoted\\\" \\/",
        )
    });
    assert!(load(&free).is_ok());
    let bad = edit_header(&bytes, |h| {
        h.replace("free text is ignored", "bad \\q escape")
    });
    assert_eq!(err(&bad), Error::InvalidJson);
}

#[test]
fn wrong_dtype() {
    let bytes = base().to_bytes();
    let f16 = edit_header(&bytes, |h| {
        h.replace(
            r#""input.mean":{"dtype":"F32","shape":[3],"data_offsets":[0,12]"#,
            r#""input.mean":{"dtype":"F16","shape":[6],"data_offsets":[0,12]"#,
        )
    });
    assert_eq!(err(&f16), Error::InvalidDtype);
    let mut f = base();
    f.get_mut("layers.0.bias").dtype = "I32";
    assert_eq!(err(&f.to_bytes()), Error::InvalidDtype);
    let f = base().tensor(Tensor::i8("layers.1.bias", &[5], &[1; 5]));
    assert_eq!(err(&f.to_bytes()), Error::InvalidDtype);
    let f = with_gate(base(), 3, 1, None, "-1").tensor(Tensor::f32(
        "density.dims",
        &[3],
        &[0.0, 1.0, 2.0],
    ));
    assert_eq!(err(&f.to_bytes()), Error::InvalidDtype);
}

#[test]
fn shape_and_offset_mismatch() {
    // Shape disagrees with the byte length of the data.
    let mut f = base();
    f.get_mut("input.mean").shape = vec![4];
    assert_eq!(err(&f.to_bytes()), Error::InvalidOffsets);
    // Shape consistent with its data but not with input_dim.
    let f = base().meta("input_dim", "4");
    assert_eq!(err(&f.to_bytes()), Error::InvalidShape);
    // Broken layer chain.
    let f = base().tensor(Tensor::f32("layers.1.weight", &[5, 7], &[0.1; 35]));
    assert_eq!(err(&f.to_bytes()), Error::InvalidShape);
    // Bias of the wrong length.
    let f = base().tensor(Tensor::f32("layers.2.bias", &[3], &[0.1; 3]));
    assert_eq!(err(&f.to_bytes()), Error::InvalidShape);
    // Rank 3 and rank 0, zero-sized dimensions.
    let mut f = base();
    f.get_mut("layers.0.weight").shape = vec![8, 3, 1];
    assert_eq!(err(&f.to_bytes()), Error::InvalidShape);
    let mut f = base();
    f.get_mut("layers.0.bias").shape = vec![];
    assert_eq!(err(&f.to_bytes()), Error::InvalidShape);
    let f = base().tensor(Tensor::f32("layers.0.bias", &[0], &[]));
    assert_eq!(err(&f.to_bytes()), Error::InvalidShape);
    // Weight given as a vector.
    let mut f = base();
    f.get_mut("layers.0.weight").shape = vec![24];
    assert_eq!(err(&f.to_bytes()), Error::InvalidShape);
}

#[test]
fn bad_offsets() {
    let bytes = base().to_bytes();
    let (header, data) = split(&bytes);
    // Overlap: layers.0.bias reuses the bytes of input.mean (same length would need
    // [0,32]; use two 12-byte tensors instead).
    let overlapping = header.trim_end().replacen(
        r#""input.scale":{"dtype":"F32","shape":[3],"data_offsets":[12,24]}"#,
        r#""input.scale":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}"#,
        1,
    );
    assert_ne!(overlapping, header.trim_end());
    assert_eq!(err(&join(&overlapping, &data)), Error::InvalidOffsets);
    let same = header.trim_end().replacen("[12,24]", "[0,12]", 1);
    assert_eq!(err(&join(&same, &data)), Error::InvalidOffsets);
    // Reversed.
    let reversed = header.trim_end().replacen("[12,24]", "[24,12]", 1);
    assert_eq!(err(&join(&reversed, &data)), Error::InvalidOffsets);
    // Past the end.
    let n = data.len();
    let past = header
        .trim_end()
        .replacen("[12,24]", &format!("[{},{}]", n - 8, n + 4), 1);
    assert_eq!(err(&join(&past, &data)), Error::InvalidOffsets);
    // Absurdly large numbers saturate and are rejected.
    let big = header.trim_end().replacen(
        "[12,24]",
        "[99999999999999999999999,99999999999999999999999]",
        1,
    );
    assert_eq!(err(&join(&big, &data)), Error::InvalidOffsets);
    // Trailing bytes (flash padding) and gaps are fine.
    let mut padded = bytes.clone();
    padded.extend_from_slice(&[0xff; 100]);
    assert!(load(&padded).is_ok());
    let mut gap_data = data.clone();
    gap_data.extend_from_slice(&data[12..24]);
    let gap = header
        .trim_end()
        .replacen("[12,24]", &format!("[{},{}]", n, n + 12), 1);
    assert!(load(&join(&gap, &gap_data)).is_ok());
}

#[test]
fn missing_tensor() {
    for name in [
        "input.mean",
        "input.scale",
        "layers.0.weight",
        "layers.2.bias",
    ] {
        assert_eq!(
            err(&base().without(name).to_bytes()),
            Error::MissingTensor,
            "{name}"
        );
    }
    // I8 weights need their scale (and the `int8` feature).
    let f = base().tensor(Tensor::i8("layers.1.weight", &[5, 8], &[3; 40]));
    let want = if cfg!(feature = "int8") {
        Error::MissingTensor
    } else {
        Error::UnsupportedFormat
    };
    assert_eq!(err(&f.to_bytes()), want);
    // A partial density gate.
    let f = with_gate(base(), 3, 2, None, "-3").without("density.variances");
    assert_eq!(err(&f.to_bytes()), Error::MissingTensor);
    let f = base().tensor(Tensor::i32("density.dims", &[1], &[0]));
    assert_eq!(err(&f.to_bytes()), Error::MissingTensor);
    let f = base().meta("density_threshold", "-3");
    assert_eq!(err(&f.to_bytes()), Error::MissingTensor);
}

#[test]
fn unknown_tensor() {
    let f = base().tensor(Tensor::f32("layers.0.weights", &[1], &[0.0]));
    assert_eq!(err(&f.to_bytes()), Error::UnknownTensor);
    let f = base().tensor(Tensor::f32("extra", &[1], &[0.0]));
    assert_eq!(err(&f.to_bytes()), Error::UnknownTensor);
    let f = base().tensor(Tensor::f32("layers.3.bias", &[4], &[0.0; 4]));
    assert_eq!(err(&f.to_bytes()), Error::UnknownTensor);
    let f = base().tensor(Tensor::f32("layers.16.bias", &[4], &[0.0; 4]));
    assert_eq!(err(&f.to_bytes()), Error::UnknownTensor);
    // A scale next to f32 weights is not part of the format.
    let f = base().tensor(Tensor::f32("layers.0.scale", &[8], &[1.0; 8]));
    assert_eq!(err(&f.to_bytes()), Error::UnknownTensor);
}

#[test]
fn duplicates() {
    let bytes = base().to_bytes();
    let dup = edit_header(&bytes, |h| {
        let entry = r#""input.mean":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}"#;
        h.replacen(entry, &format!("{entry},{entry}"), 1)
    });
    assert_eq!(err(&dup), Error::DuplicateTensor);
    let dup_meta = edit_header(&bytes, |h| {
        h.replacen(
            "\"version\":\"1\"",
            "\"version\":\"1\",\"version\":\"1\"",
            1,
        )
    });
    assert_eq!(err(&dup_meta), Error::DuplicateTensor);
}

#[test]
fn wrong_format_or_version() {
    assert_eq!(
        err(&base().meta("format", "laq").to_bytes()),
        Error::UnsupportedFormat
    );
    assert_eq!(
        err(&base().meta("version", "3").to_bytes()),
        Error::UnsupportedFormat
    );
    // Version 2 is the image format: without its metadata the file is incomplete; a
    // build without `images` does not read the format at all.
    let version_2 = if cfg!(feature = "images") {
        Error::InvalidMetadata
    } else {
        Error::UnsupportedFormat
    };
    assert_eq!(err(&base().meta("version", "2").to_bytes()), version_2);
    assert_eq!(
        err(&base().without_meta("format").to_bytes()),
        Error::UnsupportedFormat
    );
    assert_eq!(
        err(&base().without_meta("version").to_bytes()),
        Error::UnsupportedFormat
    );
    let mut no_meta = base();
    no_meta.meta.clear();
    assert_eq!(err(&no_meta.to_bytes()), Error::UnsupportedFormat);
}

/// Without `images`, image models are refused whole.
#[cfg(not(feature = "images"))]
#[test]
fn image_models_need_the_images_feature() {
    let fixture = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tiny_conv.safetensors"
    ));
    assert_eq!(err(fixture), Error::UnsupportedFormat);
    assert!(Error::UnsupportedFormat
        .to_string()
        .contains("needs the `images` feature"));
    let gated = with_gate(
        conv([2, 4, 4], &[3, 2], &[4, 3], "max_q", 5),
        32,
        2,
        None,
        "-9",
    );
    assert_eq!(err(&gated.to_bytes()), Error::UnsupportedFormat);
    let mut slot = None;
    let bytes = conv([3, 8, 8], &[4, 6], &[16, 5], "max_q", 9).to_bytes();
    assert_eq!(
        Model::new_checked_in_place(&mut slot, &bytes).err(),
        Some(Error::UnsupportedFormat)
    );
    assert!(slot.is_none());
}

/// A fully connected file that names image metadata is refused with and without
/// `images`; one with a convolution's tensor too, without `images` as an image model.
#[test]
fn version_1_with_image_parts() {
    for (key, value) in [("num_conv", "1"), ("input_shape", "[1,1,2]")] {
        assert_eq!(
            err(&base().meta(key, value).to_bytes()),
            Error::InvalidMetadata,
            "{key}"
        );
    }
    let with_conv = base().tensor(Tensor::f32("conv.0.weight", &[2, 32], &[0.1; 64]));
    let expected = if cfg!(feature = "images") {
        Error::UnknownTensor
    } else {
        Error::UnsupportedFormat
    };
    assert_eq!(err(&with_conv.to_bytes()), expected);
    // Names that only look like a convolution's are unknown in both builds.
    let odd = base().tensor(Tensor::f32("conv", &[2], &[0.1; 2]));
    assert_eq!(err(&odd.to_bytes()), Error::UnknownTensor);
}

#[test]
fn invalid_metadata() {
    for (key, value) in [
        ("input_dim", "0"),
        ("input_dim", "three"),
        ("input_dim", "4097"),
        ("num_layers", "0"),
        ("num_layers", "17"),
        ("activation", "tanh"),
        ("head", "mean"),
        ("gamma", "1.5"),
        ("gamma", "-0.1"),
        ("gamma", "nan"),
        ("gamma", ""),
        ("cost_per_step", "0"),
        ("cost_per_step", "1"),
        ("cost_per_step", "-inf"),
        ("cost_per_step", "nan"),
        ("cost_per_step", "cheap"),
    ] {
        assert_eq!(
            err(&base().meta(key, value).to_bytes()),
            Error::InvalidMetadata,
            "{key}={value}"
        );
    }
    for key in ["input_dim", "num_layers", "activation", "head"] {
        assert_eq!(
            err(&base().without_meta(key).to_bytes()),
            Error::InvalidMetadata,
            "{key}"
        );
    }
    // A cost is mapped back through `1 / (1 - gamma)`: it needs a discount below 1.
    for gamma in [Some("1"), None] {
        let mut f = base().meta("cost_per_step", "-1");
        f = match gamma {
            Some(g) => f.meta("gamma", g),
            None => f.without_meta("gamma"),
        };
        assert_eq!(
            err(&f.to_bytes()),
            Error::InvalidMetadata,
            "gamma {gamma:?}"
        );
    }
    let gate = with_gate(base(), 3, 2, None, "-3");
    assert_eq!(
        err(&gate.clone().meta("density_threshold", "low").to_bytes()),
        Error::InvalidMetadata
    );
    assert_eq!(
        err(&gate.without_meta("density_threshold").to_bytes()),
        Error::InvalidMetadata
    );
}

#[test]
fn non_finite_values() {
    for (name, bad) in [
        ("layers.1.weight", f32::NAN),
        ("layers.2.bias", f32::INFINITY),
        ("input.scale", f32::NEG_INFINITY),
    ] {
        let mut f = base();
        let t = f.get_mut(name);
        t.data[4..8].copy_from_slice(&bad.to_le_bytes());
        assert_eq!(err(&f.to_bytes()), Error::NonFinite, "{name}");
    }
    let mut f = with_gate(base(), 3, 2, None, "-3");
    f.get_mut("density.means").data[0..4].copy_from_slice(&f32::NAN.to_le_bytes());
    assert_eq!(err(&f.to_bytes()), Error::NonFinite);
    // NaN in an I8 scale is caught too (where int8 layers are supported).
    let f = base()
        .tensor(Tensor::i8("layers.1.weight", &[5, 8], &[3; 40]))
        .tensor(Tensor::f32(
            "layers.1.scale",
            &[5],
            &[0.1, 0.1, f32::NAN, 0.1, 0.1],
        ));
    let want = if cfg!(feature = "int8") {
        Error::NonFinite
    } else {
        Error::UnsupportedFormat
    };
    assert_eq!(err(&f.to_bytes()), want);
}

#[test]
fn invalid_density() {
    let gate = || with_gate(base(), 3, 2, None, "-3");
    let mut f = gate();
    f.get_mut("density.variances").data[8..12].copy_from_slice(&0.0f32.to_le_bytes());
    assert_eq!(err(&f.to_bytes()), Error::InvalidDensity);
    let mut f = gate();
    f.get_mut("density.variances").data[8..12].copy_from_slice(&(-1.0f32).to_le_bytes());
    assert_eq!(err(&f.to_bytes()), Error::InvalidDensity);
    let f = gate().tensor(Tensor::f32("density.weights", &[2], &[0.5, 0.4]));
    assert_eq!(err(&f.to_bytes()), Error::InvalidDensity);
    let f = gate().tensor(Tensor::f32("density.weights", &[2], &[1.5, -0.5]));
    assert_eq!(err(&f.to_bytes()), Error::InvalidDensity);
    let f = with_gate(base(), 3, 2, Some(&[0, 3]), "-3");
    assert_eq!(err(&f.to_bytes()), Error::InvalidDensity);
    let f = with_gate(base(), 3, 2, Some(&[-1]), "-3");
    assert_eq!(err(&f.to_bytes()), Error::InvalidDensity);
    // Without dims the gate must cover the whole state.
    let f = with_gate(base(), 2, 2, None, "-3");
    assert_eq!(err(&f.to_bytes()), Error::InvalidShape);
    // dims and means disagree on G.
    let f = with_gate(base(), 3, 2, Some(&[0, 1]), "-3").tensor(Tensor::i32(
        "density.dims",
        &[1],
        &[0],
    ));
    assert_eq!(err(&f.to_bytes()), Error::InvalidShape);
}

#[test]
fn unaligned_buffers_give_identical_results() {
    let f = with_gate(mlp(&[5, 17, 9, 6], "max_q", 11), 5, 3, None, "-20");
    let bytes = f.to_bytes();
    let state = [0.3, -1.2, 0.8, 2.0, -0.4];
    let aligned = Placed::new(&bytes, 0);
    let m = load(aligned.bytes()).unwrap();
    assert!(m.is_aligned());
    let mut scratch = vec![0.0; m.scratch_len()];
    let q: Vec<f32> = m.evaluate(&state, &mut scratch).unwrap().outputs.to_vec();
    let lp = m.log_density(&state).unwrap();
    for shift in 1..8 {
        let placed = Placed::new(&bytes, shift);
        let m = load(placed.bytes()).unwrap();
        assert_eq!(m.is_aligned(), shift % 4 == 0, "shift {shift}");
        let out = m.evaluate(&state, &mut scratch).unwrap();
        assert_eq!(out.outputs, &q[..], "shift {shift}");
        assert_eq!(m.log_density(&state).unwrap(), lp);
    }
}

#[test]
fn errors_classify() {
    assert!(Error::InvalidOffsets.is_file_error());
    assert!(!Error::BufferTooSmall.is_file_error());
    let e: Box<dyn std::error::Error> = Box::new(Error::MissingTensor);
    assert_eq!(e.to_string(), "required tensor missing");
}
