//! Writing V as the runtime's model format (`docs/model-format.md`) and reading it back
//! into candle, so tests can compare the runtime against the trainer on the same file.

use crate::nn::Mlp;
use crate::stages::qlearn::{QModel, QNetwork};
use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use candle_nn::Module;
use safetensors::Dtype;
use std::collections::BTreeMap;
use std::path::Path;

pub mod density;
pub mod quantize;
pub mod table;

use density::DensityGate;

pub use laq_runtime::format::Head;
use laq_runtime::format::{MetaKey, TensorName, Version, NAME, RELU};

/// Weights of one linear layer, `[out, in]` row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    pub out_dim: usize,
    pub in_dim: usize,
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

/// The convolutions of an image model, in front of its linear layers: 4x4 kernels,
/// stride 2, one pixel of zero padding, ReLU after each, on channels-last maps.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvLayers {
    /// `[C, H, W]` of the input image.
    pub input_shape: [usize; 3],
    /// Weights `[out, 16 * in]`, each row's patch ordered (row, column, channel), and
    /// biases (`in_dim` is `16 * in`).
    pub layers: Vec<Layer>,
}

impl ConvLayers {
    /// Height, width and channels of the last feature map, which the linear layers read
    /// flattened in (row, column, channel) order.
    pub fn out_shape(&self) -> (usize, usize, usize) {
        let [c, h, w] = self.input_shape;
        let n = self.layers.len();
        let channels = self.layers.last().map_or(c, |l| l.out_dim);
        (h >> n, w >> n, channels)
    }
}

/// A value function as exported.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueModel {
    /// Subtracted from each input (from each channel of an image).
    pub mean: Vec<f32>,
    /// 1 / std of each input (of each channel of an image).
    pub scale: Vec<f32>,
    /// The convolutions of an image model (`None`: fully connected).
    pub conv: Option<ConvLayers>,
    pub layers: Vec<Layer>,
    pub head: Head,
    pub gamma: f64,
    /// Layers kept in f32 when the rest is exported as int8 (see `quantize`).
    pub keep_f32: Vec<usize>,
    /// Free-text metadata (labels, Q-learning, trainer version).
    pub info: BTreeMap<String, String>,
    /// The density gate, if the model carries one.
    pub density: Option<DensityGate>,
    /// The cost a step that V was learned above (`cost_per_step`;
    /// [`crate::data::cost::CostToEnd`]), `None` for a V in the log's own units.
    pub cost_per_step: Option<f32>,
}

/// Refuses states the runtime cannot evaluate a V of, before any training: fully
/// connected models take at most [`laq_runtime::MAX_INPUT_DIM`] values, image models
/// frames of at most [`laq_runtime::MAX_IMAGE_SIDE`] a side and
/// [`laq_runtime::MAX_CHANNELS`] channels.
///
/// ```
/// use laq::export::fits_runtime;
///
/// assert!(fits_runtime(&[4]).is_ok());
/// assert!(fits_runtime(&[12, 84, 84]).is_ok());
/// let e = fits_runtime(&[laq_runtime::MAX_INPUT_DIM + 1]).unwrap_err().to_string();
/// assert!(e.contains("--obs-keys"), "{e}");
/// assert!(fits_runtime(&[3, 480, 640]).is_err());
/// ```
pub fn fits_runtime(obs_shape: &[usize]) -> Result<()> {
    use laq_runtime::{MAX_CHANNELS, MAX_IMAGE_SIDE, MAX_INPUT_DIM};
    match *obs_shape {
        [c, h, w] if c > MAX_CHANNELS || h > MAX_IMAGE_SIDE || w > MAX_IMAGE_SIDE => bail!(
            "frames of {obs_shape:?} ([C, H, W]): the runtime evaluates images of at most \
             {MAX_IMAGE_SIDE} pixels a side and {MAX_CHANNELS} channels; store the frames \
             smaller (`--image-size` for a LeRobot camera)"
        ),
        [_, _, _] => Ok(()),
        _ => {
            let d: usize = obs_shape.iter().product();
            if d > MAX_INPUT_DIM {
                bail!(
                    "observations of {d} values: the runtime evaluates fully connected \
                     models of at most {MAX_INPUT_DIM} inputs; pick fewer arrays of a dict \
                     observation with `--obs-keys`, or store frames as u8 images to train \
                     an image model"
                );
            }
            Ok(())
        }
    }
}

impl ValueModel {
    /// The Q-network as the runtime's model (V = max over its outputs): fully connected,
    /// or convolutional (version 2 of the format). BCQ's V also depends on its imitation
    /// network, which the format cannot hold: such networks are refused (the trainer
    /// fits a network to their V instead).
    pub fn from_qnetwork(q: &QNetwork, gamma: f64, info: BTreeMap<String, String>) -> Result<Self> {
        if q.imitation.is_some() {
            bail!(
                "BCQ's V is a max over the actions its imitation network allows, which \
                 `{NAME}` cannot express: fit a network to its V first"
            );
        }
        let host = |m: &crate::nn::Mlp| -> Result<Vec<Layer>> {
            Ok(m.to_host()?
                .into_iter()
                .map(|(dims, weight, bias)| Layer {
                    out_dim: dims[0],
                    in_dim: dims[1],
                    weight,
                    bias,
                })
                .collect())
        };
        // IQL exports its value network (one output: V itself).
        let (conv, layers) = match q.value.as_ref().unwrap_or(&q.net) {
            QModel::Mlp(m) => (None, host(m)?),
            QModel::Conv(c) => {
                let mut conv = vec![];
                let mut tensors = c.encoder.tensors().into_iter();
                while let (Some((_, w)), Some((_, b))) = (tensors.next(), tensors.next()) {
                    let (out_dim, in_dim) = w.dims2()?;
                    conv.push(Layer {
                        out_dim,
                        in_dim,
                        weight: w.flatten_all()?.to_vec1()?,
                        bias: b.to_vec1()?,
                    });
                }
                let shape = [c.shape.c, c.shape.h, c.shape.w];
                let layers = ConvLayers {
                    input_shape: shape,
                    layers: conv,
                };
                (Some(layers), host(&c.head)?)
            }
        };
        Ok(ValueModel {
            mean: q.mean.clone(),
            scale: q.std.iter().map(|s| 1.0 / s).collect(),
            conv,
            layers,
            head: Head::MaxQ,
            gamma,
            keep_f32: vec![],
            info,
            density: None,
            cost_per_step: None,
        })
    }

    /// The format and version this model is written in: `laq-value 1` (fully connected)
    /// or `laq-value 2` (image model).
    pub fn format_name(&self) -> String {
        format!("{NAME} {}", self.version())
    }

    /// Version 2 for an image model, 1 otherwise.
    pub fn version(&self) -> Version {
        match self.conv {
            Some(_) => Version::Image,
            None => Version::FullyConnected,
        }
    }

    /// Values per state: `C * H * W` for an image model.
    pub fn input_dim(&self) -> usize {
        match &self.conv {
            Some(c) => c.input_shape.iter().product(),
            None => self.mean.len(),
        }
    }

    pub fn num_outputs(&self) -> usize {
        self.layers.last().map(|l| l.out_dim).unwrap_or(0)
    }

    /// The safetensors bytes. With `int8`, weights are stored as i8 with a per-output-row
    /// scale (symmetric, max |w| maps to 127).
    pub fn to_bytes(&self, int8: bool) -> Result<Vec<u8>> {
        use crate::util::safetensors::{to_bytes, Entry};
        let mut meta = self.info.clone();
        let mut set = |k: MetaKey, v: String| meta.insert(k.as_str().to_string(), v);
        set(MetaKey::Format, NAME.into());
        set(MetaKey::Version, self.version().as_str().into());
        if let Some(c) = &self.conv {
            set(MetaKey::InputShape, serde_json::to_string(&c.input_shape)?);
            set(MetaKey::NumConv, c.layers.len().to_string());
        }
        set(MetaKey::InputDim, self.input_dim().to_string());
        set(MetaKey::NumLayers, self.layers.len().to_string());
        set(MetaKey::Activation, RELU.into());
        set(MetaKey::Head, self.head.name().into());
        set(MetaKey::Gamma, format!("{}", self.gamma as f32));
        if let Some(gate) = &self.density {
            set(MetaKey::DensityThreshold, format!("{}", gate.threshold));
        }
        if let Some(c) = self.cost_per_step {
            set(MetaKey::CostPerStep, c.to_string());
        }
        let d = self.mean.len();
        let mut entries = vec![
            Entry::f32(TensorName::InputMean.to_string(), vec![d], &self.mean),
            Entry::f32(TensorName::InputScale.to_string(), vec![d], &self.scale),
        ];
        // Convolutions stay f32 under `int8`: the runtime reads them as f32 only.
        for (i, l) in self.conv.iter().flat_map(|c| c.layers.iter()).enumerate() {
            entries.push(Entry::f32(
                TensorName::ConvWeight(i as u8).to_string(),
                vec![l.out_dim, l.in_dim],
                &l.weight,
            ));
            entries.push(Entry::f32(
                TensorName::ConvBias(i as u8).to_string(),
                vec![l.out_dim],
                &l.bias,
            ));
        }
        for (i, l) in self.layers.iter().enumerate() {
            let shape = vec![l.out_dim, l.in_dim];
            if int8 && !self.keep_f32.contains(&i) {
                let (q, s) = quantize_rows(&l.weight, l.in_dim);
                entries.push(Entry {
                    name: TensorName::LayerWeight(i as u8).to_string(),
                    dtype: safetensors::Dtype::I8,
                    shape,
                    bytes: q.iter().map(|&x| x as u8).collect::<Vec<u8>>().into(),
                });
                entries.push(Entry::f32(
                    TensorName::LayerScale(i as u8).to_string(),
                    vec![l.out_dim],
                    &s,
                ));
            } else {
                entries.push(Entry::f32(
                    TensorName::LayerWeight(i as u8).to_string(),
                    shape,
                    &l.weight,
                ));
            }
            entries.push(Entry::f32(
                TensorName::LayerBias(i as u8).to_string(),
                vec![l.out_dim],
                &l.bias,
            ));
        }
        if let Some(gate) = &self.density {
            let (m, g) = (
                gate.weights.len(),
                gate.means.len() / gate.weights.len().max(1),
            );
            entries.push(Entry::f32(
                TensorName::DensityWeights.to_string(),
                vec![m],
                &gate.weights,
            ));
            entries.push(Entry::f32(
                TensorName::DensityMeans.to_string(),
                vec![m, g],
                &gate.means,
            ));
            entries.push(Entry::f32(
                TensorName::DensityVariances.to_string(),
                vec![m, g],
                &gate.variances,
            ));
            if let Some(dims) = &gate.dims {
                entries.push(Entry {
                    name: TensorName::DensityDims.to_string(),
                    dtype: safetensors::Dtype::I32,
                    shape: vec![dims.len()],
                    bytes: dims
                        .iter()
                        .flat_map(|d| d.to_le_bytes())
                        .collect::<Vec<u8>>()
                        .into(),
                });
            }
        }
        to_bytes(&entries, &meta)
    }

    /// Writes the model atomically, once the runtime has loaded it: a file the runtime
    /// refuses is never written.
    pub fn save(&self, path: &Path, int8: bool) -> Result<()> {
        let bytes = self.to_bytes(int8)?;
        if let Err(e) = laq_runtime::Model::new_checked(&bytes) {
            bail!(
                "{}: not written, the runtime refuses this model ({e}); inputs {:?}",
                path.display(),
                self.input_shape()
            );
        }
        crate::util::io::write_atomic(path, &bytes)
    }

    /// The state the model reads: `[C, H, W]` for an image model, `[D]` otherwise.
    pub fn input_shape(&self) -> Vec<usize> {
        match &self.conv {
            Some(c) => c.input_shape.to_vec(),
            None => vec![self.mean.len()],
        }
    }

    /// Reads a model file back (f32 or int8 weights, dequantised), checking the format.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::from_bytes(&bytes).with_context(|| format!("invalid model {}", path.display()))
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let st = safetensors::SafeTensors::deserialize(bytes).context("not a safetensors file")?;
        let (_, header) = safetensors::SafeTensors::read_metadata(bytes)?;
        let meta = header.metadata().clone().unwrap_or_default();
        let get = |k: MetaKey| {
            meta.get(k.as_str())
                .with_context(|| format!("metadata lacks `{k}`"))
        };
        let version = match (get(MetaKey::Format)?.as_str(), get(MetaKey::Version)?) {
            (NAME, v) => Version::parse(v.as_bytes()),
            _ => None,
        };
        let image = match version {
            Some(v) => v == Version::Image,
            None => bail!("not a `{NAME}` version 1 or 2 model"),
        };
        let head = Head::parse(get(MetaKey::Head)?.as_bytes())
            .with_context(|| format!("unknown head `{}`", meta[MetaKey::Head.as_str()]))?;
        let num_layers: usize = get(MetaKey::NumLayers)?
            .parse()
            .context("bad `num_layers`")?;
        let gamma: f64 = meta
            .get(MetaKey::Gamma.as_str())
            .map(|g| g.parse())
            .transpose()
            .context("bad `gamma`")?
            .unwrap_or(1.0);
        let f32_of = |name: &str| -> Result<(Vec<usize>, Vec<f32>)> {
            let t = st
                .tensor(name)
                .with_context(|| format!("missing tensor `{name}`"))?;
            if t.dtype() != Dtype::F32 {
                bail!("tensor `{name}` is {:?}, expected F32", t.dtype());
            }
            let v = t
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Ok((t.shape().to_vec(), v))
        };
        let (_, mean) = f32_of(&TensorName::InputMean.to_string())?;
        let (_, scale) = f32_of(&TensorName::InputScale.to_string())?;
        let conv = if image {
            let shape: Vec<usize> = serde_json::from_str(get(MetaKey::InputShape)?)
                .context("bad `input_shape` (expected [C, H, W])")?;
            let input_shape: [usize; 3] = shape
                .try_into()
                .map_err(|s| anyhow::anyhow!("`input_shape` {s:?} is not [C, H, W]"))?;
            let n: usize = get(MetaKey::NumConv)?.parse().context("bad `num_conv`")?;
            let layers = (0..n)
                .map(|i| {
                    let (shape, weight) = f32_of(&TensorName::ConvWeight(i as u8).to_string())?;
                    let [out_dim, in_dim] = shape[..] else {
                        bail!(
                            "tensor `conv.{i}.weight` has shape {shape:?}, expected [out, 16 * in]"
                        );
                    };
                    let (_, bias) = f32_of(&TensorName::ConvBias(i as u8).to_string())?;
                    Ok(Layer {
                        out_dim,
                        in_dim,
                        weight,
                        bias,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Some(ConvLayers {
                input_shape,
                layers,
            })
        } else {
            None
        };
        let mut layers = vec![];
        let mut f32_layers = vec![];
        let mut any_i8 = false;
        for i in 0..num_layers {
            let wname = TensorName::LayerWeight(i as u8).to_string();
            let t = st
                .tensor(&wname)
                .with_context(|| format!("missing tensor `{wname}`"))?;
            let shape = t.shape().to_vec();
            if shape.len() != 2 {
                bail!("tensor `{wname}` has shape {shape:?}, expected [out, in]");
            }
            let weight = match t.dtype() {
                Dtype::F32 => {
                    f32_layers.push(i);
                    f32_of(&wname)?.1
                }
                Dtype::I8 => {
                    any_i8 = true;
                    let (_, s) = f32_of(&TensorName::LayerScale(i as u8).to_string())?;
                    t.data()
                        .iter()
                        .enumerate()
                        .map(|(j, &q)| q as i8 as f32 * s[j / shape[1]])
                        .collect()
                }
                other => bail!("tensor `{wname}` has dtype {other:?}"),
            };
            let (_, bias) = f32_of(&TensorName::LayerBias(i as u8).to_string())?;
            layers.push(Layer {
                out_dim: shape[0],
                in_dim: shape[1],
                weight,
                bias,
            });
        }
        let density = match st.tensor(&TensorName::DensityWeights.to_string()) {
            Err(_) => None,
            Ok(_) => {
                let (_, weights) = f32_of(&TensorName::DensityWeights.to_string())?;
                let (_, means) = f32_of(&TensorName::DensityMeans.to_string())?;
                let (_, variances) = f32_of(&TensorName::DensityVariances.to_string())?;
                let dims = match st.tensor(&TensorName::DensityDims.to_string()) {
                    Ok(t) => Some(
                        t.data()
                            .chunks_exact(4)
                            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                            .collect(),
                    ),
                    Err(_) => None,
                };
                let threshold: f32 = get(MetaKey::DensityThreshold)?
                    .parse()
                    .context("bad `density_threshold`")?;
                Some(DensityGate {
                    weights,
                    means,
                    variances,
                    dims,
                    threshold,
                })
            }
        };
        let cost_per_step = meta
            .get(MetaKey::CostPerStep.as_str())
            .map(|c| c.parse())
            .transpose()
            .context("bad `cost_per_step`")?;
        let info = meta
            .into_iter()
            .filter(|(k, _)| MetaKey::parse(k.as_bytes()).is_none())
            .collect();
        let keep_f32 = if any_i8 { f32_layers } else { vec![] };
        Ok(ValueModel {
            mean,
            scale,
            conv,
            layers,
            head,
            gamma,
            keep_f32,
            info,
            density,
            cost_per_step,
        })
    }

    /// The first linear layer's inputs `[n, in_0]` for raw states `[n * D]`: the
    /// standardised states, or for an image model (states `[C, H, W]`) the flattened
    /// last feature map. The convolutions are the trainer's own ([`crate::nn::conv::Conv`]:
    /// each patch row copied whole into one matrix product), as candle's `conv2d`
    /// gathers its patches element by element (the tests read the layout with it).
    pub fn features(&self, states: &[f32], device: &Device) -> Result<Tensor> {
        let d = self.input_dim();
        let n = states.len() / d.max(1);
        let Some(conv) = &self.conv else {
            let mean = Tensor::from_slice(&self.mean, (1, d), device)?;
            let scale = Tensor::from_slice(&self.scale, (1, d), device)?;
            return Ok(Tensor::from_slice(states, (n, d), device)?
                .broadcast_sub(&mean)?
                .broadcast_mul(&scale)?);
        };
        let [c, h, w] = conv.input_shape;
        let plane = h * w;
        // Standardised and channels-last, (row, column, channel): the runtime's order.
        let mut x = vec![0f32; n * d];
        for (row, out) in states.chunks_exact(d).zip(x.chunks_exact_mut(d)) {
            for ch in 0..c {
                let (m, k) = (self.mean[ch], self.scale[ch]);
                for (p, &v) in row[ch * plane..(ch + 1) * plane].iter().enumerate() {
                    out[p * c + ch] = (v - m) * k;
                }
            }
        }
        let mut x = Tensor::from_vec(x, (n, plane, c), device)?;
        let mut hw = (h, w);
        for l in &conv.layers {
            let tensors = std::collections::HashMap::from([
                (
                    "weight".to_string(),
                    Tensor::from_slice(&l.weight, (l.out_dim, l.in_dim), device)?,
                ),
                (
                    "bias".to_string(),
                    Tensor::from_slice(&l.bias, l.out_dim, device)?,
                ),
            ]);
            let vb = candle_nn::VarBuilder::from_tensors(tensors, candle_core::DType::F32, device);
            let layer = crate::nn::conv::Conv::new(vb, l.in_dim / 16, l.out_dim, 4, 2, 1, hw)?;
            x = layer.apply(&x, true)?;
            hw = layer.out_hw;
        }
        Ok(x.reshape((n, ()))?)
    }

    /// V of every observation of `data`, a chunk of rows at a time (computed with candle).
    pub fn values_of(&self, data: &crate::data::Dataset, device: &Device) -> Result<Vec<f32>> {
        let d = data.obs_dim();
        if d != self.input_dim() {
            bail!(
                "the model takes {} values per state, the dataset's observations have {d}",
                self.input_dim()
            );
        }
        let chunk = ((1 << 22) / d.max(1)).clamp(1, 4096);
        let mut out = Vec::with_capacity(data.len());
        let mut states = Vec::with_capacity(chunk * d);
        for start in (0..data.len()).step_by(chunk) {
            states.clear();
            for i in start..(start + chunk).min(data.len()) {
                states.extend_from_slice(&data.obs_row(i));
            }
            out.extend(self.values_candle(&states, device)?);
        }
        Ok(out)
    }

    /// The linear layers as an [`Mlp`] on `device`.
    pub fn mlp(&self, device: &Device) -> Result<Mlp> {
        Ok(Mlp::from_layers(
            self.layers
                .iter()
                .map(|l| {
                    Ok((
                        Tensor::from_slice(&l.weight, (l.out_dim, l.in_dim), device)?,
                        Tensor::from_slice(&l.bias, l.out_dim, device)?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?,
        ))
    }

    /// V of raw states `[n * D]`, computed with candle (the trainer's side of the
    /// host-parity check).
    pub fn values_candle(&self, states: &[f32], device: &Device) -> Result<Vec<f32>> {
        let h = self.mlp(device)?.forward(&self.features(states, device)?)?;
        let v = match self.head {
            Head::MaxQ => h.max(1)?,
            Head::OneNorm => (1.0 - h.sqr()?.sum(1)?.sqrt()?)?,
        };
        Ok(v.to_vec1()?)
    }
}

/// Symmetric per-row int8 quantisation of a row-major `[rows, cols]` matrix.
pub fn quantize_rows(w: &[f32], cols: usize) -> (Vec<i8>, Vec<f32>) {
    let mut q = Vec::with_capacity(w.len());
    let mut scales = vec![];
    for row in w.chunks_exact(cols) {
        let m = row.iter().fold(0f32, |a, &x| a.max(x.abs()));
        let s = if m > 0.0 { m / 127.0 } else { 1.0 };
        scales.push(s);
        q.extend(
            row.iter()
                .map(|&x| (x / s).round().clamp(-127.0, 127.0) as i8),
        );
    }
    (q, scales)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ValueModel {
        ValueModel {
            mean: vec![1.0, 2.0],
            scale: vec![0.5, 0.25],
            conv: None,
            layers: vec![
                Layer {
                    out_dim: 3,
                    in_dim: 2,
                    weight: vec![1., -1., 0.5, 2., 0., -3.],
                    bias: vec![0.1, 0.2, 0.3],
                },
                Layer {
                    out_dim: 2,
                    in_dim: 3,
                    weight: vec![1., 1., 1., -1., 2., 0.5],
                    bias: vec![0., 0.5],
                },
            ],
            head: Head::MaxQ,
            gamma: 0.95,
            keep_f32: vec![],
            info: BTreeMap::from([("labels".to_string(), "latent".to_string())]),
            density: None,
            cost_per_step: None,
        }
    }

    #[test]
    fn a_model_the_runtime_refuses_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("value.safetensors");
        model().save(&path, false).unwrap();
        assert!(laq_runtime::Model::new_checked(&std::fs::read(&path).unwrap()).is_ok());
        let d = laq_runtime::MAX_INPUT_DIM + 1;
        let mut wide = model();
        wide.mean = vec![0.0; d];
        wide.scale = vec![1.0; d];
        wide.layers[0].in_dim = d;
        wide.layers[0].weight = vec![0.5; 3 * d];
        let other = dir.path().join("wide.safetensors");
        let e = wide.save(&other, false).unwrap_err().to_string();
        assert!(
            e.contains("wide.safetensors") && e.contains("not written"),
            "{e}"
        );
        assert!(!other.exists());
        // A file already there stays as it was.
        std::fs::copy(&path, &other).unwrap();
        assert!(wide.save(&other, false).is_err());
        assert_eq!(
            std::fs::read(&other).unwrap(),
            std::fs::read(&path).unwrap()
        );
    }

    #[test]
    fn roundtrip_and_int8() {
        let m = model();
        let back = ValueModel::from_bytes(&m.to_bytes(false).unwrap()).unwrap();
        assert_eq!(back.layers, m.layers);
        assert_eq!(back.info, m.info);
        assert!((back.gamma - 0.95).abs() < 1e-6);
        assert_eq!(back.cost_per_step, None);
        let cost = ValueModel {
            cost_per_step: Some(-0.5),
            ..model()
        };
        let back = ValueModel::from_bytes(&cost.to_bytes(false).unwrap()).unwrap();
        assert_eq!(back.cost_per_step, Some(-0.5));
        let q = ValueModel::from_bytes(&m.to_bytes(true).unwrap()).unwrap();
        for (a, b) in q.layers.iter().zip(&m.layers) {
            for (x, y) in a.weight.iter().zip(&b.weight) {
                assert!((x - y).abs() <= 3.0 / 127.0 / 2.0 + 1e-6);
            }
        }
    }

    /// [`ValueModel::features`] of an image model computed with candle's `conv2d`: the
    /// same values up to the order of the sums, from the layout read another way.
    fn features_conv2d(m: &ValueModel, states: &[f32], device: &Device) -> Result<Tensor> {
        let conv = m.conv.as_ref().expect("an image model");
        let [c, h, w] = conv.input_shape;
        let n = states.len() / (c * h * w);
        let mean = Tensor::from_slice(&m.mean, (1, c, 1, 1), device)?;
        let scale = Tensor::from_slice(&m.scale, (1, c, 1, 1), device)?;
        let mut x = Tensor::from_slice(states, (n, c, h, w), device)?
            .broadcast_sub(&mean)?
            .broadcast_mul(&scale)?;
        for l in &conv.layers {
            let cin = l.in_dim / 16;
            // Rows are ordered (row, column, channel); candle's kernels [out, in, 4, 4].
            let k = Tensor::from_slice(&l.weight, (l.out_dim, 4, 4, cin), device)?
                .permute((0, 3, 1, 2))?
                .contiguous()?;
            let b = Tensor::from_slice(&l.bias, (1, l.out_dim, 1, 1), device)?;
            x = x.conv2d(&k, 1, 2, 1, 1)?.broadcast_add(&b)?.relu()?;
        }
        // [n, C', H', W'] to the runtime's (row, column, channel) order.
        Ok(x.permute((0, 2, 3, 1))?.contiguous()?.reshape((n, ()))?)
    }

    /// The trainer's convolutions and candle's `conv2d` read the format's layout alike:
    /// the same features up to the order of the sums, on sizes that halve oddly.
    #[test]
    fn image_features_match_candles_conv2d() {
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(3);
        let mut draw = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| rand::Rng::random_range(&mut rng, -1.0f32..1.0))
                .collect()
        };
        for (c, h, w, channels) in [
            (3, 16, 16, vec![4, 8]),
            (4, 13, 10, vec![5, 6, 3]),
            (1, 9, 9, vec![2]),
        ] {
            let mut layers = vec![];
            let mut cin = c;
            for &out in &channels {
                layers.push(Layer {
                    out_dim: out,
                    in_dim: 16 * cin,
                    weight: draw(out * 16 * cin),
                    bias: draw(out),
                });
                cin = out;
            }
            let conv = ConvLayers {
                input_shape: [c, h, w],
                layers,
            };
            let (oh, ow, oc) = conv.out_shape();
            let m = ValueModel {
                mean: draw(c),
                scale: draw(c).iter().map(|s| 1.0 + s.abs()).collect(),
                conv: Some(conv),
                layers: vec![Layer {
                    out_dim: 2,
                    in_dim: oh * ow * oc,
                    weight: draw(2 * oh * ow * oc),
                    bias: draw(2),
                }],
                ..model()
            };
            let n = 5;
            let states: Vec<f32> = draw(n * c * h * w)
                .iter()
                .map(|x| 128.0 + 100.0 * x)
                .collect();
            let ours = m.features(&states, &Device::Cpu).unwrap();
            let theirs = features_conv2d(&m, &states, &Device::Cpu).unwrap();
            assert_eq!(ours.dims(), [n, oh * ow * oc]);
            assert_eq!(ours.dims(), theirs.dims());
            let (a, b): (Vec<f32>, Vec<f32>) = (
                ours.flatten_all().unwrap().to_vec1().unwrap(),
                theirs.flatten_all().unwrap().to_vec1().unwrap(),
            );
            let largest = b.iter().fold(0f32, |m, x| m.max(x.abs()));
            assert!(largest > 0.0);
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    (x - y).abs() <= 1e-5 * largest.max(1.0),
                    "{c}x{h}x{w}: {x} against {y}"
                );
            }
        }
    }

    #[test]
    fn candle_values_match_hand_computation() {
        let m = model();
        let v = m.values_candle(&[3.0, 6.0], &Device::Cpu).unwrap();
        // x = (1, 1); h = relu([0.1, 2.7, -2.7]) = [0.1, 2.7, 0]; y = [2.8, 5.8]; V = 5.8
        assert!((v[0] - 5.8).abs() < 1e-5, "{v:?}");
    }
}
