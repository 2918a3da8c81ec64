//! `laq_runtime::format`: every spelling parses back to what emitted it (tensor names
//! for every kind and a range of indices, metadata keys, versions, heads), and near
//! misses do not parse. Parse and emit tests side by side.

use laq_runtime::format::{
    Head, MetaKey, TensorName, Version, CONV_KERNEL, CONV_PADDING, CONV_STRIDE, NAME, RELU,
};
use laq_runtime::{MAX_CONV_LAYERS, MAX_LAYERS};

/// Every tensor name with an index below `n` (each indexed kind).
fn names(n: u8) -> Vec<TensorName> {
    let mut all = vec![
        TensorName::InputMean,
        TensorName::InputScale,
        TensorName::DensityWeights,
        TensorName::DensityMeans,
        TensorName::DensityVariances,
        TensorName::DensityDims,
    ];
    for i in 0..n {
        all.extend([
            TensorName::LayerWeight(i),
            TensorName::LayerScale(i),
            TensorName::LayerBias(i),
            TensorName::ConvWeight(i),
            TensorName::ConvBias(i),
        ]);
    }
    all
}

fn in_range(t: TensorName) -> bool {
    match t {
        TensorName::LayerWeight(i) | TensorName::LayerScale(i) | TensorName::LayerBias(i) => {
            usize::from(i) < MAX_LAYERS
        }
        TensorName::ConvWeight(i) | TensorName::ConvBias(i) => usize::from(i) < MAX_CONV_LAYERS,
        _ => true,
    }
}

#[test]
fn parse_tensor_names() {
    assert_eq!(
        TensorName::parse(b"input.mean"),
        Some(TensorName::InputMean)
    );
    assert_eq!(
        TensorName::parse(b"layers.0.weight"),
        Some(TensorName::LayerWeight(0))
    );
    assert_eq!(
        TensorName::parse(b"layers.15.bias"),
        Some(TensorName::LayerBias(15))
    );
    assert_eq!(
        TensorName::parse(b"conv.3.bias"),
        Some(TensorName::ConvBias(3))
    );
    for bad in [
        &b""[..],
        b"input",
        b"input.mean ",
        b"Input.mean",
        b"inputs.mean",
        b"density.dim",
        b"layers.16.bias",
        b"layers.20.bias",
        b"layers.01.bias",
        b"layers.00.bias",
        b"layers..bias",
        b"layers.1",
        b"layers.1.",
        b"layers.1.weights",
        b"layers.1.Weight",
        b"layers.-1.bias",
        b"layers.+1.bias",
        b"layers.1 .bias",
        b"layer.1.bias",
        b"layers1.bias",
        b"conv.4.bias",
        b"conv.10.weight",
        b"conv.01.weight",
        b"conv..weight",
        b"conv.0.scale",
        b"conv.0",
        b"conv.",
        b"conv",
    ] {
        assert_eq!(
            TensorName::parse(bad),
            None,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn emit_tensor_names() {
    assert_eq!(TensorName::InputMean.to_string(), "input.mean");
    assert_eq!(
        TensorName::DensityVariances.to_string(),
        "density.variances"
    );
    assert_eq!(TensorName::LayerWeight(0).to_string(), "layers.0.weight");
    assert_eq!(TensorName::LayerScale(15).to_string(), "layers.15.scale");
    assert_eq!(TensorName::ConvWeight(2).to_string(), "conv.2.weight");
    assert_eq!(TensorName::ConvBias(3).to_string(), "conv.3.bias");
}

#[test]
fn tensor_names_round_trip() {
    // Every kind, indices inside and past the limits.
    for t in names(40)
        .into_iter()
        .chain(names(u8::MAX).into_iter().rev().take(5))
    {
        let s = t.to_string();
        let parsed = TensorName::parse(s.as_bytes());
        assert_eq!(parsed, in_range(t).then_some(t), "{s}");
        if in_range(t) {
            // Near misses: a byte more, a byte less, a changed byte.
            let mut longer = s.clone().into_bytes();
            longer.push(b'x');
            assert_eq!(TensorName::parse(&longer), None, "{s}x");
            assert_eq!(TensorName::parse(&s.as_bytes()[..s.len() - 1]), None, "{s}");
            assert_eq!(TensorName::parse(&s.as_bytes()[1..]), None, "{s}");
            let mut upper = s.clone().into_bytes();
            upper[0] = upper[0].to_ascii_uppercase();
            assert_eq!(TensorName::parse(&upper), None, "{s}");
        }
    }
    let count = names(u8::MAX).into_iter().filter(|&t| in_range(t)).count();
    assert_eq!(count, 6 + 3 * MAX_LAYERS + 2 * MAX_CONV_LAYERS);
}

#[test]
fn parse_meta_keys() {
    assert_eq!(MetaKey::parse(b"format"), Some(MetaKey::Format));
    assert_eq!(
        MetaKey::parse(b"density_threshold"),
        Some(MetaKey::DensityThreshold)
    );
    for bad in [
        &b""[..],
        b"labels",
        b"Format",
        b"format ",
        b"num-conv",
        b"input_dims",
        b"gamm",
    ] {
        assert_eq!(
            MetaKey::parse(bad),
            None,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn emit_meta_keys() {
    let keys: Vec<&str> = MetaKey::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "format",
            "version",
            "input_dim",
            "num_layers",
            "activation",
            "head",
            "gamma",
            "density_threshold",
            "num_conv",
            "input_shape",
            "cost_per_step"
        ]
    );
}

#[test]
fn meta_keys_round_trip() {
    for (i, &k) in MetaKey::ALL.iter().enumerate() {
        assert_eq!(k as usize, i);
        assert_eq!(k.to_string(), k.as_str());
        assert_eq!(MetaKey::parse(k.as_str().as_bytes()), Some(k));
        let s = k.as_str().as_bytes();
        assert_eq!(MetaKey::parse(&s[..s.len() - 1]), None);
        assert_eq!(MetaKey::parse(&[s, &b"_"[..]].concat()), None);
        assert_eq!(MetaKey::parse(&s.to_ascii_uppercase()), None);
    }
}

#[test]
fn parse_and_emit_values() {
    assert!(!NAME.is_empty() && NAME.is_ascii());
    assert_eq!(RELU, "relu");
    assert_eq!((CONV_KERNEL, CONV_STRIDE, CONV_PADDING), (4, 2, 1));
    for v in Version::ALL {
        assert_eq!(Version::parse(v.as_str().as_bytes()), Some(v));
        assert_eq!(v.to_string(), v.number().to_string());
    }
    for h in Head::ALL {
        assert_eq!(Head::parse(h.name().as_bytes()), Some(h));
        assert_eq!(h.to_string(), h.name());
        let s = h.name().as_bytes();
        assert_eq!(Head::parse(&s[..s.len() - 1]), None);
        assert_eq!(Head::parse(&s.to_ascii_uppercase()), None);
    }
    for bad in [&b""[..], b"0", b"3", b"12", b"1 ", b"+1", b"1.0"] {
        assert_eq!(
            Version::parse(bad),
            None,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    for bad in [&b""[..], b"maxq", b"max-q", b"MaxQ", b"one norm", b"max_q "] {
        assert_eq!(Head::parse(bad), None, "{}", String::from_utf8_lossy(bad));
    }
}
