//! Test support: builds `laq-value` safetensors files by hand, so tests control every
//! byte (tensor order, padding, alignment) and can corrupt them precisely.
#![allow(dead_code)]

/// One tensor to write.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub name: String,
    pub dtype: &'static str,
    pub shape: Vec<u64>,
    pub data: Vec<u8>,
}

impl Tensor {
    pub fn f32(name: &str, shape: &[u64], values: &[f32]) -> Self {
        assert_eq!(
            shape.iter().product::<u64>() as usize,
            values.len(),
            "{name}"
        );
        Tensor {
            name: name.into(),
            dtype: "F32",
            shape: shape.to_vec(),
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    pub fn i8(name: &str, shape: &[u64], values: &[i8]) -> Self {
        assert_eq!(
            shape.iter().product::<u64>() as usize,
            values.len(),
            "{name}"
        );
        Tensor {
            name: name.into(),
            dtype: "I8",
            shape: shape.to_vec(),
            data: values.iter().map(|&v| v as u8).collect(),
        }
    }

    pub fn i32(name: &str, shape: &[u64], values: &[i32]) -> Self {
        Tensor {
            name: name.into(),
            dtype: "I32",
            shape: shape.to_vec(),
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }
}

/// A file under construction.
#[derive(Clone, Debug, Default)]
pub struct File {
    pub meta: Vec<(String, String)>,
    pub tensors: Vec<Tensor>,
}

impl File {
    pub fn meta(mut self, key: &str, value: &str) -> Self {
        self.meta.retain(|(k, _)| k != key);
        self.meta.push((key.into(), value.into()));
        self
    }

    pub fn without_meta(mut self, key: &str) -> Self {
        self.meta.retain(|(k, _)| k != key);
        self
    }

    pub fn tensor(mut self, t: Tensor) -> Self {
        self.tensors.retain(|x| x.name != t.name);
        self.tensors.push(t);
        self
    }

    pub fn without(mut self, name: &str) -> Self {
        self.tensors.retain(|x| x.name != name);
        self
    }

    pub fn get_mut(&mut self, name: &str) -> &mut Tensor {
        self.tensors
            .iter_mut()
            .find(|t| t.name == name)
            .expect(name)
    }

    /// The header JSON (metadata first, tensors in order with contiguous offsets, all
    /// 4-byte tensors before 1-byte ones as the reference writer does) and the data.
    pub fn parts(&self) -> (String, Vec<u8>) {
        let mut order: Vec<&Tensor> = self.tensors.iter().collect();
        order.sort_by_key(|t| if t.dtype == "I8" { 1 } else { 0 });
        let mut header = String::from("{");
        let mut first = true;
        if !self.meta.is_empty() {
            header.push_str("\"__metadata__\":{");
            let items: Vec<String> = self
                .meta
                .iter()
                .map(|(k, v)| format!("\"{k}\":\"{v}\""))
                .collect();
            header.push_str(&items.join(","));
            header.push('}');
            first = false;
        }
        let mut data = Vec::new();
        for t in order {
            if !first {
                header.push(',');
            }
            first = false;
            let shape: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
            header.push_str(&format!(
                "\"{}\":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                t.name,
                t.dtype,
                shape.join(","),
                data.len(),
                data.len() + t.data.len()
            ));
            data.extend_from_slice(&t.data);
        }
        header.push('}');
        (header, data)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let (header, data) = self.parts();
        join(&header, &data)
    }
}

/// Assembles a file from a header (padded with spaces to a multiple of 8, as the
/// reference writer does) and data.
pub fn join(header: &str, data: &[u8]) -> Vec<u8> {
    let mut header = header.as_bytes().to_vec();
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out
}

/// Splits a file into header text and data.
pub fn split(bytes: &[u8]) -> (String, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8(bytes[8..8 + n].to_vec()).unwrap();
    (header, bytes[8 + n..].to_vec())
}

/// Rewrites a file's header with `f`, keeping its data.
pub fn edit_header(bytes: &[u8], f: impl FnOnce(String) -> String) -> Vec<u8> {
    let (header, data) = split(bytes);
    join(&f(header.trim_end().to_string()), &data)
}

/// A copy of `bytes` at an address that is 8-aligned (`shift` 0) or shifted by `shift`
/// bytes from that, to exercise the aligned and byte-wise paths.
pub struct Placed {
    storage: Vec<u64>,
    shift: usize,
    len: usize,
}

impl Placed {
    pub fn new(bytes: &[u8], shift: usize) -> Self {
        let mut storage = vec![0u64; (bytes.len() + shift).div_ceil(8) + 1];
        let raw: &mut [u8] = bytemuck::cast_slice_mut(&mut storage);
        raw[shift..shift + bytes.len()].copy_from_slice(bytes);
        Placed {
            storage,
            shift,
            len: bytes.len(),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        let raw: &[u8] = bytemuck::cast_slice(&self.storage);
        &raw[self.shift..self.shift + self.len]
    }
}

/// Deterministic pseudo-random numbers in [-1, 1).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next() * scale).collect()
    }
}

/// A random MLP with the given widths (`dims[0]` = input_dim), f32 weights.
pub fn mlp(dims: &[usize], head: &str, seed: u64) -> File {
    let mut rng = Lcg(seed);
    let d = dims[0];
    let mut f = File::default()
        .meta("format", laq_runtime::format::NAME)
        .meta("version", "1")
        .meta("input_dim", &d.to_string())
        .meta("num_layers", &(dims.len() - 1).to_string())
        .meta("activation", "relu")
        .meta("head", head)
        .meta("gamma", "0.95")
        .meta("labels", "free text is ignored")
        .tensor(Tensor::f32("input.mean", &[d as u64], &rng.vec(d, 1.0)))
        .tensor(Tensor::f32(
            "input.scale",
            &[d as u64],
            &rng.vec(d, 0.5).iter().map(|v| 1.0 + v).collect::<Vec<_>>(),
        ));
    for (i, w) in dims.windows(2).enumerate() {
        let (inp, out) = (w[0], w[1]);
        let scale = 1.0 / (inp as f32).sqrt();
        f = f
            .tensor(Tensor::f32(
                &format!("layers.{i}.weight"),
                &[out as u64, inp as u64],
                &rng.vec(inp * out, scale),
            ))
            .tensor(Tensor::f32(
                &format!("layers.{i}.bias"),
                &[out as u64],
                &rng.vec(out, 0.1),
            ));
    }
    f
}

/// Adds a density gate with `m` components over `dims` (or all dimensions).
pub fn with_gate(f: File, d: usize, m: usize, dims: Option<&[i32]>, threshold: &str) -> File {
    let g = dims.map_or(d, |x| x.len());
    let mut rng = Lcg(99);
    let mut f = f
        .meta("density_threshold", threshold)
        .tensor(Tensor::f32(
            "density.weights",
            &[m as u64],
            &vec![1.0 / m as f32; m],
        ))
        .tensor(Tensor::f32(
            "density.means",
            &[m as u64, g as u64],
            &rng.vec(m * g, 2.0),
        ))
        .tensor(Tensor::f32(
            "density.variances",
            &[m as u64, g as u64],
            &rng.vec(m * g, 0.5)
                .iter()
                .map(|v| 1.0 + v)
                .collect::<Vec<_>>(),
        ));
    if let Some(dims) = dims {
        f = f.tensor(Tensor::i32("density.dims", &[g as u64], dims));
    }
    f
}

/// The small model the documentation examples use (`tests/data/tiny.safetensors`):
/// 2-4-3, max_q, gamma 0.9, a two-component density gate.
pub fn tiny() -> File {
    File::default()
        .meta("format", laq_runtime::format::NAME)
        .meta("version", "1")
        .meta("input_dim", "2")
        .meta("num_layers", "2")
        .meta("activation", "relu")
        .meta("head", "max_q")
        .meta("gamma", "0.9")
        .meta("density_threshold", "-8")
        .meta("labels", "example model for the documentation")
        .tensor(Tensor::f32("input.mean", &[2], &[2.5, 2.5]))
        .tensor(Tensor::f32("input.scale", &[2], &[0.4, 0.4]))
        .tensor(Tensor::f32(
            "layers.0.weight",
            &[4, 2],
            &[1.0, 0.0, 0.0, 1.0, -1.0, 0.0, 0.0, -1.0],
        ))
        .tensor(Tensor::f32("layers.0.bias", &[4], &[0.0; 4]))
        .tensor(Tensor::f32(
            "layers.1.weight",
            &[3, 4],
            &[
                -1.0, -1.0, -1.0, -1.0, //
                0.5, 0.0, 0.0, 0.0, //
                1.0, 1.0, -1.0, -1.0,
            ],
        ))
        .tensor(Tensor::f32("layers.1.bias", &[3], &[0.0, -1.0, 0.5]))
        .tensor(Tensor::f32("density.weights", &[2], &[0.5, 0.5]))
        .tensor(Tensor::f32("density.means", &[2, 2], &[1.0, 1.0, 4.0, 4.0]))
        .tensor(Tensor::f32("density.variances", &[2, 2], &[2.0; 4]))
}

/// A random image model: `shape` = `[C, H, W]`, convolutions to `channels`, then
/// linear layers of widths `dense` (after the flattened feature map), f32 weights.
pub fn conv(shape: [usize; 3], channels: &[usize], dense: &[usize], head: &str, seed: u64) -> File {
    let mut rng = Lcg(seed);
    let [c, h, w] = shape;
    let n = channels.len();
    let mut f = File::default()
        .meta("format", laq_runtime::format::NAME)
        .meta("version", "2")
        .meta("input_dim", &(c * h * w).to_string())
        .meta("input_shape", &format!("[{c},{h},{w}]"))
        .meta("num_conv", &n.to_string())
        .meta("num_layers", &dense.len().to_string())
        .meta("activation", "relu")
        .meta("head", head)
        .meta("gamma", "0.95")
        .tensor(Tensor::f32(
            "input.mean",
            &[c as u64],
            &rng.vec(c, 50.0)
                .iter()
                .map(|v| 120.0 + v)
                .collect::<Vec<_>>(),
        ))
        .tensor(Tensor::f32(
            "input.scale",
            &[c as u64],
            &rng.vec(c, 0.005)
                .iter()
                .map(|v| 0.015 + v)
                .collect::<Vec<_>>(),
        ));
    let mut cin = c;
    for (i, &cout) in channels.iter().enumerate() {
        let cols = 16 * cin;
        f = f
            .tensor(Tensor::f32(
                &format!("conv.{i}.weight"),
                &[cout as u64, cols as u64],
                &rng.vec(cout * cols, 1.0 / (cols as f32).sqrt()),
            ))
            .tensor(Tensor::f32(
                &format!("conv.{i}.bias"),
                &[cout as u64],
                &rng.vec(cout, 0.1),
            ));
        cin = cout;
    }
    let flat = (h >> n) * (w >> n) * cin;
    let mut inp = flat;
    for (i, &out) in dense.iter().enumerate() {
        f = f
            .tensor(Tensor::f32(
                &format!("layers.{i}.weight"),
                &[out as u64, inp as u64],
                &rng.vec(inp * out, 1.0 / (inp as f32).sqrt()),
            ))
            .tensor(Tensor::f32(
                &format!("layers.{i}.bias"),
                &[out as u64],
                &rng.vec(out, 0.1),
            ));
        inp = out;
    }
    f
}

/// The image model the documentation examples use
/// (`tests/data/tiny_conv.safetensors`): a 1x4x4 image, convolutions to 2 and 3
/// channels (2x2, then 1x1 pixels), then 3 -> 2, max_q, gamma 0.9.
pub fn tiny_conv() -> File {
    conv([1, 4, 4], &[2, 3], &[2], "max_q", 4)
        .meta("gamma", "0.9")
        .meta("labels", "example image model for the documentation")
}
