//! Image models (`laq-value` version 2): loading and validation of the convolutional
//! part, and evaluation against a plain f64 reference of docs/model-format.md. Without
//! the `images` feature, `load.rs` checks that such files are refused instead.
#![cfg(feature = "images")]

mod common;

use common::{conv, mlp, tiny_conv, with_gate, File, Lcg, Placed, Tensor};
use laq_runtime::{Candidate, ConvInfo, Error, Model, Scratch};

fn err(bytes: &[u8]) -> Error {
    match Model::new_checked(bytes) {
        Ok(_) => panic!("file unexpectedly accepted"),
        Err(e) => e,
    }
}

fn f32s(f: &File, name: &str) -> Vec<f64> {
    let t = f.tensors.iter().find(|t| t.name == name).unwrap();
    t.data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
        .collect()
}

fn meta(f: &File, key: &str) -> String {
    f.meta.iter().find(|(k, _)| k == key).unwrap().1.clone()
}

/// The reference forward pass of an image model, straight from the format's
/// definition: standardise per channel, then for every output pixel and channel the
/// sum over the 4x4 window (stride 2, zero padding 1) in `[H, W, C]` maps, ReLU,
/// flatten (row, column, channel), linear layers, max_q head. Returns (V, Q).
fn reference(f: &File, s: &[f32]) -> (f64, Vec<f64>) {
    let shape: Vec<usize> = meta(f, "input_shape")
        .trim_matches(['[', ']'])
        .split(',')
        .map(|v| v.trim().parse().unwrap())
        .collect();
    let (c, mut h, mut w) = (shape[0], shape[1], shape[2]);
    let mean = f32s(f, "input.mean");
    let scale = f32s(f, "input.scale");
    // The image as [H, W, C], standardised.
    let mut map: Vec<f64> = vec![0.0; c * h * w];
    for ch in 0..c {
        for y in 0..h {
            for x in 0..w {
                map[(y * w + x) * c + ch] =
                    (s[ch * h * w + y * w + x] as f64 - mean[ch]) * scale[ch];
            }
        }
    }
    let mut cin = c;
    let n: usize = meta(f, "num_conv").parse().unwrap();
    for i in 0..n {
        let wt = f32s(f, &format!("conv.{i}.weight"));
        let b = f32s(f, &format!("conv.{i}.bias"));
        let cout = b.len();
        let (ho, wo) = (h / 2, w / 2);
        let mut out = vec![0.0; ho * wo * cout];
        for oy in 0..ho {
            for ox in 0..wo {
                for o in 0..cout {
                    let mut acc = b[o];
                    for ky in 0..4 {
                        for kx in 0..4 {
                            let y = (2 * oy + ky) as isize - 1;
                            let x = (2 * ox + kx) as isize - 1;
                            if y < 0 || x < 0 || y >= h as isize || x >= w as isize {
                                continue;
                            }
                            for ch in 0..cin {
                                let v = map[((y as usize) * w + x as usize) * cin + ch];
                                acc += wt[o * 16 * cin + (ky * 4 + kx) * cin + ch] * v;
                            }
                        }
                    }
                    out[(oy * wo + ox) * cout + o] = acc.max(0.0);
                }
            }
        }
        map = out;
        (h, w, cin) = (ho, wo, cout);
    }
    let layers: usize = meta(f, "num_layers").parse().unwrap();
    for i in 0..layers {
        let wt = f32s(f, &format!("layers.{i}.weight"));
        let b = f32s(f, &format!("layers.{i}.bias"));
        let cols = map.len();
        map = (0..b.len())
            .map(|r| {
                let v = (0..cols).map(|k| wt[r * cols + k] * map[k]).sum::<f64>() + b[r];
                if i + 1 < layers {
                    v.max(0.0)
                } else {
                    v
                }
            })
            .collect();
    }
    let v = map.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (v, map)
}

/// A random image: raw pixel values 0..=255.
fn image(rng: &mut Lcg, len: usize) -> Vec<f32> {
    (0..len)
        .map(|_| ((rng.next() + 1.0) * 127.5).floor())
        .collect()
}

#[test]
fn tiny_conv_fixture_is_current() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tiny_conv.safetensors"
    );
    let bytes = tiny_conv().to_bytes();
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
fn shapes_and_sizes() {
    // The trainer's default: 3x32x32, 16-32-32 channels, 4x4x32 = 512 features,
    // then 128 and 8 latent actions.
    let bytes = conv([3, 32, 32], &[16, 32, 32], &[128, 8], "max_q", 1).to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    assert_eq!(m.input_dim(), 3 * 32 * 32);
    assert_eq!(m.input_shape(), Some([3, 32, 32]));
    assert_eq!(m.num_conv(), 3);
    assert_eq!(
        m.conv_layer(2),
        Some(ConvInfo {
            in_channels: 32,
            out_channels: 32,
            in_height: 8,
            in_width: 8
        })
    );
    assert_eq!(m.conv_layer(3), None);
    assert_eq!(m.num_layers(), 2);
    assert_eq!(m.layer(0).unwrap().inputs, 512);
    assert_eq!(m.output_dim(), 8);
    // State, the largest patch (16 x 32 channels), then the two largest
    // neighbouring maps: 16x16x16 and 8x8x32.
    assert_eq!(m.scratch_len(), 3072 + 512 + (4096 + 2048));
    let macs = 16 * 16 * 16 * 48 + 8 * 8 * 32 * 256 + 4 * 4 * 32 * 512 + 512 * 128 + 128 * 8;
    assert_eq!(m.macs(), macs);

    // A non-square image, one convolution: the feature map is 2x3x5 = 30.
    let bytes = conv([2, 4, 6], &[5], &[7, 3], "max_q", 2).to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    assert_eq!(m.layer(0).unwrap().inputs, 30);
    assert_eq!(m.scratch_len(), 48 + 32 + (30 + 7));
    // A fully connected model has no image part.
    let bytes = mlp(&[3, 4, 2], "max_q", 1).to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    assert_eq!(
        (m.num_conv(), m.input_shape(), m.conv_layer(0)),
        (0, None, None)
    );
}

#[test]
fn matches_reference() {
    let mut rng = Lcg(21);
    for (shape, channels, dense) in [
        ([1usize, 4, 4], &[2usize, 3][..], &[2usize][..]),
        ([3, 8, 8], &[4][..], &[5, 3][..]),
        ([3, 16, 8], &[5, 6, 7][..], &[9, 4][..]),
        ([2, 16, 16], &[3, 4, 5, 6][..], &[1][..]),
        ([4, 2, 6], &[1][..], &[8, 8, 2][..]),
        // Odd sides: each convolution rounds down (21 -> 10 -> 5, 13 -> 6 -> 3).
        ([3, 21, 13], &[4, 5][..], &[6, 2][..]),
        ([1, 7, 9], &[2][..], &[3][..]),
        ([4, 84, 84], &[2, 3, 4][..], &[5][..]),
    ] {
        let f = conv(
            shape,
            channels,
            dense,
            "max_q",
            shape.iter().sum::<usize>() as u64,
        );
        let bytes = f.to_bytes();
        for shift in [0, 1] {
            let placed = Placed::new(&bytes, shift);
            let m = Model::new_checked(placed.bytes()).unwrap();
            assert_eq!(m.is_aligned(), shift == 0);
            let mut scratch = vec![f32::NAN; m.scratch_len()];
            for _ in 0..10 {
                let s = image(&mut rng, m.input_dim());
                let (v, q) = reference(&f, &s);
                let out = m.evaluate(&s, &mut scratch).unwrap();
                let tol = 1e-5 * (1.0 + v.abs());
                assert!(
                    (out.value as f64 - v).abs() <= tol,
                    "{shape:?}: {} vs {v}",
                    out.value
                );
                for (a, b) in out.outputs.iter().zip(&q) {
                    assert!(
                        (*a as f64 - b).abs() <= 1e-5 * (1.0 + b.abs()),
                        "{a} vs {b}"
                    );
                }
                assert_eq!(out.outputs.len(), q.len());
                assert_eq!(out.outputs[out.best.unwrap()], out.value);
            }
        }
    }
}

#[test]
fn aligned_and_byte_wise_paths_agree_exactly() {
    let f = conv([3, 8, 8], &[4, 6], &[16, 5], "max_q", 3);
    let bytes = f.to_bytes();
    let s = image(&mut Lcg(2), 3 * 64);
    let mut scratch = vec![0.0; 1024];
    let a = Placed::new(&bytes, 0);
    let q: Vec<f32> = Model::new_checked(a.bytes())
        .unwrap()
        .evaluate(&s, &mut scratch)
        .unwrap()
        .outputs
        .to_vec();
    for shift in 1..8 {
        let p = Placed::new(&bytes, shift);
        let m = Model::new_checked(p.bytes()).unwrap();
        assert_eq!(m.evaluate(&s, &mut scratch).unwrap().outputs, &q[..]);
    }
}

/// Weights chosen by hand: which input pixel and channel each patch element reads,
/// the layout of the state (`[C, H, W]`) and the zero padding.
#[test]
fn patch_order_and_padding_by_hand() {
    // A 2-channel 2x2 image, one convolution to one channel (1x1 output), weight k at
    // patch element k (row, column, channel order), then a 1 -> 1 identity layer.
    let weight: Vec<f32> = (0..32).map(|k| k as f32).collect();
    let f = conv([2, 2, 2], &[1], &[1], "max_q", 1)
        .tensor(Tensor::f32("input.mean", &[2], &[0.0, 10.0]))
        .tensor(Tensor::f32("input.scale", &[2], &[1.0, 0.5]))
        .tensor(Tensor::f32("conv.0.weight", &[1, 32], &weight))
        .tensor(Tensor::f32("conv.0.bias", &[1], &[0.25]))
        .tensor(Tensor::f32("layers.0.weight", &[1, 1], &[1.0]))
        .tensor(Tensor::f32("layers.0.bias", &[1], &[0.0]));
    let bytes = f.to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    // Channel 0 plane then channel 1 plane, rows in order: pixel (y, x) of channel c is
    // at c * 4 + y * 2 + x.
    let s = [1.0, 2.0, 3.0, 4.0, 12.0, 14.0, 16.0, 18.0];
    // Channel 1 standardised: (v - 10) * 0.5 = 1, 2, 3, 4.
    // The output pixel's window covers rows and columns -1..=2; the image sits at
    // kernel rows and columns 1 and 2, so pixel (y, x) is element 4 (y + 1) + x + 1.
    let mut want = 0.25f32;
    for y in 0..2 {
        for x in 0..2 {
            let k = 4 * (y + 1) + x + 1;
            let v = (y * 2 + x + 1) as f32;
            want += weight[2 * k] * v + weight[2 * k + 1] * v;
        }
    }
    let mut scratch = vec![0.0; m.scratch_len()];
    assert_eq!(m.value(&s, &mut scratch).unwrap(), want);
    // ReLU after the convolution: a negative bias large enough clips it to 0.
    let f = f.tensor(Tensor::f32("conv.0.bias", &[1], &[-1000.0]));
    let bytes = f.to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    assert_eq!(m.value(&s, &mut scratch).unwrap(), 0.0);
}

#[test]
fn scratch_selection_and_gate() {
    let f = conv([3, 8, 8], &[4, 6], &[16, 5], "max_q", 9);
    let bytes = f.to_bytes();
    let m = Model::new_checked(&bytes).unwrap();
    let d = m.input_dim();
    let eval_len = m.scratch_len() - d;
    let s = image(&mut Lcg(4), d);
    let v = m.value(&s, &mut vec![0.0; eval_len]).unwrap();
    assert_eq!(
        m.value(&s, &mut vec![0.0; eval_len - 1]),
        Err(Error::BufferTooSmall)
    );
    assert_eq!(
        m.value(&s[1..], &mut vec![0.0; eval_len]),
        Err(Error::StateLength)
    );
    let mut bad = s.clone();
    bad[5] = f32::NAN;
    assert_eq!(
        m.value(&bad, &mut vec![0.0; eval_len]),
        Err(Error::NonFiniteState)
    );

    // Selection keeps the predicted image in the scratch too.
    let other = image(&mut Lcg(5), d);
    let v2 = m.value(&other, &mut vec![0.0; eval_len]).unwrap();
    let table: [&[f32]; 2] = [&s, &other];
    let mut report = [Candidate::default(); 2];
    let mut scratch = vec![0.0; m.scratch_len()];
    let best = m.select(&s, &table, &mut scratch, &mut report).unwrap();
    assert_eq!(best, usize::from(v2 > v));
    assert_eq!((report[0].value, report[1].value), (v, v2));
    assert_eq!(
        m.select(&s, &table, &mut scratch[1..], &mut report),
        Err(Error::BufferTooSmall)
    );

    // A density gate over two pixel values of the image.
    let gated = with_gate(f, d, 2, Some(&[0, 100]), "-1e9").to_bytes();
    let m = Model::new_checked(&gated).unwrap();
    let g = m.gated_value(&s, &mut Scratch::<2048>::new()).unwrap();
    assert!(g.in_distribution && g.log_density.is_some());
    assert_eq!(g.value, v);
}

#[test]
fn validation_errors() {
    let base = || conv([3, 8, 8], &[4, 6], &[16, 5], "max_q", 9);
    assert!(Model::new_checked(&base().to_bytes()).is_ok());
    let cases: Vec<(&str, File, Error)> = vec![
        (
            "version 1 with conv metadata",
            base().meta("version", "1"),
            Error::InvalidMetadata,
        ),
        (
            "version 3",
            base().meta("version", "3"),
            Error::UnsupportedFormat,
        ),
        (
            "no num_conv",
            base().without_meta("num_conv"),
            Error::InvalidMetadata,
        ),
        (
            "num_conv 0",
            base().meta("num_conv", "0"),
            Error::InvalidMetadata,
        ),
        (
            "num_conv 5",
            base().meta("num_conv", "5"),
            Error::InvalidMetadata,
        ),
        (
            "no input_shape",
            base().without_meta("input_shape"),
            Error::InvalidMetadata,
        ),
        (
            "input_shape rank 2",
            base().meta("input_shape", "[3,8]"),
            Error::InvalidMetadata,
        ),
        (
            "input_shape rank 4",
            base().meta("input_shape", "[3,8,8,1]"),
            Error::InvalidMetadata,
        ),
        (
            "input_shape no brackets",
            base().meta("input_shape", "3,8,8"),
            Error::InvalidMetadata,
        ),
        (
            "input_shape not numbers",
            base().meta("input_shape", "[3,8,x]"),
            Error::InvalidMetadata,
        ),
        // Two convolutions halve 3 to 1 and then to nothing.
        (
            "too small for the convolutions",
            base()
                .meta("input_shape", "[3,3,8]")
                .meta("input_dim", "72"),
            Error::InvalidMetadata,
        ),
        // 6 rows end at 1 after two convolutions, not at the 2 the dense layer reads.
        (
            "odd side, dense layer of the even size",
            base()
                .meta("input_shape", "[3,6,8]")
                .meta("input_dim", "144"),
            Error::InvalidShape,
        ),
        (
            "zero channels",
            base().meta("input_shape", "[0,8,8]").meta("input_dim", "0"),
            Error::InvalidMetadata,
        ),
        (
            "too wide",
            base()
                .meta("input_shape", "[1,8,260]")
                .meta("input_dim", "2080"),
            Error::InvalidMetadata,
        ),
        (
            "input_dim not C*H*W",
            base().meta("input_dim", "191"),
            Error::InvalidMetadata,
        ),
        (
            "no input_dim",
            base().without_meta("input_dim"),
            Error::InvalidMetadata,
        ),
        // The metadata's channels disagree with the first convolution's columns.
        (
            "channel chain",
            base()
                .meta("input_shape", "[2,8,8]")
                .meta("input_dim", "128")
                .tensor(Tensor::f32("input.mean", &[2], &[0.0; 2]))
                .tensor(Tensor::f32("input.scale", &[2], &[1.0; 2])),
            Error::InvalidShape,
        ),
        (
            "per-value normalisation",
            base().tensor(Tensor::f32("input.mean", &[192], &[0.0; 192])),
            Error::InvalidShape,
        ),
        (
            "missing conv weight",
            base().without("conv.1.weight"),
            Error::MissingTensor,
        ),
        (
            "missing conv bias",
            base().without("conv.0.bias"),
            Error::MissingTensor,
        ),
        (
            "conv past num_conv",
            base().meta("num_conv", "1"),
            Error::UnknownTensor,
        ),
        (
            "conv scale",
            base().tensor(Tensor::f32("conv.0.scale", &[4], &[1.0; 4])),
            Error::UnknownTensor,
        ),
        (
            "conv weight rank 1",
            base().tensor(Tensor::f32("conv.0.weight", &[192], &[0.1; 192])),
            Error::InvalidShape,
        ),
        (
            "conv weight columns",
            base().tensor(Tensor::f32("conv.1.weight", &[6, 60], &[0.1; 360])),
            Error::InvalidShape,
        ),
        (
            "conv bias length",
            base().tensor(Tensor::f32("conv.1.bias", &[5], &[0.1; 5])),
            Error::InvalidShape,
        ),
        (
            "int8 conv weight",
            base().tensor(Tensor::i8("conv.0.weight", &[4, 48], &[1; 192])),
            Error::InvalidDtype,
        ),
        // The first linear layer must read the 2x2x6 feature map.
        (
            "dense input",
            base().tensor(Tensor::f32("layers.0.weight", &[16, 23], &[0.1; 368])),
            Error::InvalidShape,
        ),
    ];
    for (what, f, e) in cases {
        assert_eq!(err(&f.to_bytes()), e, "{what}");
    }
    // Too many output channels.
    let wide = conv([1, 4, 4], &[257], &[2], "max_q", 1);
    assert_eq!(err(&wide.to_bytes()), Error::InvalidShape);
    // NaN and infinities in the convolutional tensors and the channel normalisation.
    for name in ["conv.0.weight", "conv.1.bias", "input.scale"] {
        let mut f = base();
        f.get_mut(name).data[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
        assert_eq!(err(&f.to_bytes()), Error::NonFinite, "{name}");
        let mut f = base();
        f.get_mut(name).data[0..4].copy_from_slice(&f32::INFINITY.to_le_bytes());
        assert_eq!(err(&f.to_bytes()), Error::NonFinite, "{name}");
    }
    // Spaces inside the shape are fine; the largest allowed image loads.
    assert!(Model::new_checked(&base().meta("input_shape", "[3, 8, 8]").to_bytes()).is_ok());
    let big = conv([1, 256, 16], &[1, 1, 1, 1], &[1], "max_q", 1);
    assert!(Model::new_checked(&big.to_bytes()).is_ok());
}
