//! Q-networks: fully connected or convolutional, with their input standardisation, and
//! the trainer-only `laq-qnet` file that holds a whole one.

use super::*;

/// A Q-network: fully connected on the standardised observation, or, for images, a
/// convolutional trunk and a fully connected head.
#[derive(Clone, Debug)]
pub enum QModel {
    Mlp(Mlp),
    Conv(ConvQ),
}

/// The convolutional Q-network: [`Encoder`] (strided convolutions), flattened, then an MLP.
#[derive(Clone, Debug)]
pub struct ConvQ {
    pub shape: ImageShape,
    pub encoder: Encoder,
    pub head: Mlp,
}

impl QModel {
    /// A network from `num_inputs` (or `image`) to `k` outputs through `hidden` layers.
    pub fn new(
        vb: VarBuilder,
        num_inputs: usize,
        image: Option<(ImageShape, &[usize])>,
        hidden: &[usize],
        k: usize,
    ) -> Result<Self> {
        let dims = |input: usize| {
            let mut v = vec![input];
            v.extend(hidden);
            v.push(k);
            v
        };
        Ok(match image {
            None => QModel::Mlp(Mlp::new(vb, &dims(num_inputs))?),
            Some((shape, channels)) => {
                let encoder = Encoder::new(vb.pp("encoder"), shape, channels)?;
                let head = Mlp::new(vb.pp("head"), &dims(encoder.out_len()))?;
                QModel::Conv(ConvQ {
                    shape,
                    encoder,
                    head,
                })
            }
        })
    }

    /// Outputs `[B, K]` of standardised inputs `[B, D]` (channels-last for images).
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            QModel::Mlp(m) => m.forward(x),
            QModel::Conv(c) => {
                let b = x.dim(0)?;
                let h = c.encoder.forward(x, c.shape)?.reshape((b, ()))?;
                c.head.forward(&h)
            }
        }
    }

    /// This network with its outputs multiplied by `factor`: the last layer's weights and
    /// bias scaled, so the same function in other units.
    ///
    /// ```
    /// use candle_core::{Device, Tensor};
    /// use candle_nn::Module;
    /// use laq::stages::qlearn::QModel;
    /// let (vm, vb) = laq::nn::new_varmap(&Device::Cpu);
    /// let q = QModel::new(vb, 3, None, &[8], 2)?;
    /// laq::nn::init_vars(&vm, 1)?;
    /// let x = Tensor::new(&[[0.5f32, -1.0, 2.0]], &Device::Cpu)?;
    /// let (a, b) = (q.forward(&x)?, q.scaled(4.0)?.forward(&x)?);
    /// let (a, b): (Vec<f32>, Vec<f32>) = (a.flatten_all()?.to_vec1()?, b.flatten_all()?.to_vec1()?);
    /// assert!(a.iter().zip(&b).all(|(a, b)| (4.0 * a - b).abs() < 1e-5));
    /// # Ok::<(), anyhow::Error>(())
    /// ```
    pub fn scaled(&self, factor: f32) -> Result<QModel> {
        let scale = |m: &Mlp| -> Result<Mlp> {
            let mut m = m.clone();
            let last = m.layers.last_mut().context("a network without layers")?;
            let bias = last.bias().context("layer without bias")?;
            let f = f64::from(factor);
            *last = candle_nn::Linear::new((last.weight() * f)?, Some((bias * f)?));
            Ok(m)
        };
        Ok(match self {
            QModel::Mlp(m) => QModel::Mlp(scale(m)?),
            QModel::Conv(c) => QModel::Conv(ConvQ {
                head: scale(&c.head)?,
                ..c.clone()
            }),
        })
    }

    pub fn is_conv(&self) -> bool {
        matches!(self, QModel::Conv(_))
    }

    /// The fully connected network, when there is no convolutional trunk.
    pub fn as_mlp(&self) -> Option<&Mlp> {
        match self {
            QModel::Mlp(m) => Some(m),
            QModel::Conv(_) => None,
        }
    }

    /// Every parameter, named as [`QModel::new`] names it under its builder.
    pub fn tensors(&self) -> Result<Vec<(String, Tensor)>> {
        let mlp = |m: &Mlp, prefix: &str| -> Result<Vec<(String, Tensor)>> {
            let mut v = vec![];
            for (i, l) in m.layers.iter().enumerate() {
                v.push((format!("{prefix}layers.{i}.weight"), l.weight().clone()));
                let b = l.bias().context("layer without bias")?;
                v.push((format!("{prefix}layers.{i}.bias"), b.clone()));
            }
            Ok(v)
        };
        match self {
            QModel::Mlp(m) => mlp(m, ""),
            QModel::Conv(c) => {
                let mut v: Vec<(String, Tensor)> = c
                    .encoder
                    .tensors()
                    .into_iter()
                    .map(|(n, t)| (format!("encoder.{n}"), t))
                    .collect();
                v.extend(mlp(&c.head, "head.")?);
                Ok(v)
            }
        }
    }

    /// Sizes of the fully connected layers, input first.
    fn dims(&self) -> Vec<usize> {
        let m = match self {
            QModel::Mlp(m) => m,
            QModel::Conv(c) => &c.head,
        };
        let mut d: Vec<usize> = m
            .layers
            .first()
            .map(|l| l.weight().dims()[1])
            .into_iter()
            .collect();
        d.extend(m.layers.iter().map(|l| l.weight().dims()[0]));
        d
    }
}

/// A trained Q-network with the input standardisation it was trained with.
#[derive(Debug)]
pub struct QNetwork {
    pub net: QModel,
    /// Input standardisation: per observation value (fully connected), or per channel
    /// (convolutional).
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
    /// Shape of one raw observation.
    pub obs_shape: Vec<usize>,
    pub loss_curve: Vec<f32>,
    /// BCQ's imitation network (logits over labels) and threshold.
    pub imitation: Option<(QModel, f32)>,
    /// IQL's value network (one output): V itself, in place of a maximum over `net`.
    pub value: Option<QModel>,
    /// V of the probe states at each checkpoint: `(step, values)`.
    pub checkpoints: Vec<(usize, Vec<f32>)>,
    /// The networks as they were at each checkpoint (the same steps as `checkpoints`).
    pub snapshots: Vec<QNetwork>,
}

/// Rows per forward pass when scoring many states with a convolutional network.
const SCORE_CHUNK: usize = 256;

/// The trainer-only file format of whole Q-networks (BCQ's imitation network included),
/// which the runtime does not read.
pub const QNET_FORMAT: &str = "laq-qnet";
pub const QNET_VERSION: &str = "1";

impl QNetwork {
    /// The device the network's weights live on (where it was trained or loaded).
    pub fn device(&self) -> Result<Device> {
        Ok(self
            .net
            .tensors()?
            .first()
            .map_or(Device::Cpu, |(_, t)| t.device().clone()))
    }

    /// Values per raw observation.
    pub fn obs_dim(&self) -> usize {
        self.obs_shape.iter().product()
    }

    fn image_shape(&self) -> Option<ImageShape> {
        match &self.net {
            QModel::Conv(c) => Some(c.shape),
            QModel::Mlp(_) => None,
        }
    }

    /// Raw observations `[n * D]` as the network's standardised inputs.
    fn prepare(&self, obs: &[f32]) -> Vec<f32> {
        match self.image_shape() {
            None => crate::util::stats::standardise(obs, &self.mean, &self.std),
            Some(shape) => {
                let norm = ChannelNorm::new(self.mean.clone(), self.std.clone());
                let d = shape.len();
                let mut out = vec![0f32; obs.len()];
                for (src, dst) in obs.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
                    norm.fill_raw(src, shape, dst);
                }
                out
            }
        }
    }

    /// Q values `[n, K]` of raw observations `[n * D]`.
    pub fn q_values(&self, obs: &[f32], device: &Device) -> Result<Vec<Vec<f32>>> {
        let d = self.obs_dim();
        let mut out = vec![];
        for part in obs.chunks(SCORE_CHUNK * d.max(1)) {
            let x = self.prepare(part);
            let t = Tensor::from_vec(x, (part.len() / d, d), device)?;
            out.extend(self.net.forward(&t)?.to_vec2::<f32>()?);
        }
        Ok(out)
    }

    /// V of raw observations: max over actions (for BCQ, over the allowed ones).
    pub fn values(&self, obs: &[f32], device: &Device) -> Result<Vec<f32>> {
        let d = self.obs_dim();
        let mut out = Vec::with_capacity(obs.len() / d.max(1));
        for part in obs.chunks(SCORE_CHUNK * d.max(1)) {
            out.extend(self.values_standardised(self.prepare(part), device)?);
        }
        Ok(out)
    }

    /// V of dataset observations `idx`, converted from the store a chunk at a time.
    pub fn values_of(&self, data: &Dataset, idx: &[usize], device: &Device) -> Result<Vec<f32>> {
        let d = self.obs_dim();
        if data.obs_dim() != d {
            bail!(
                "the Q-network takes observations of shape {:?}, the dataset's are {:?}",
                self.obs_shape,
                data.obs_shape
            );
        }
        let mut out = Vec::with_capacity(idx.len());
        let norm = ChannelNorm::new(self.mean.clone(), self.std.clone());
        let mut x = vec![];
        for part in idx.chunks(SCORE_CHUNK) {
            x.resize(part.len() * d, 0.0);
            match self.image_shape() {
                Some(shape) => {
                    for (j, &i) in part.iter().enumerate() {
                        norm.fill(&data.observations, i, shape, &mut x[j * d..(j + 1) * d]);
                    }
                }
                None => {
                    for (j, &i) in part.iter().enumerate() {
                        x[j * d..(j + 1) * d].copy_from_slice(&data.obs_row(i));
                    }
                    x = crate::util::stats::standardise(&x, &self.mean, &self.std);
                }
            }
            out.extend(self.values_standardised(std::mem::take(&mut x), device)?);
        }
        Ok(out)
    }

    /// V of standardised inputs `[n * D]` (channels-last for images).
    pub fn values_standardised(&self, x: Vec<f32>, device: &Device) -> Result<Vec<f32>> {
        let d = self.obs_dim();
        let n = x.len() / d.max(1);
        let x = Tensor::from_vec(x, (n, d), device)?;
        if let Some(v) = &self.value {
            return Ok(v.forward(&x)?.flatten_all()?.to_vec1()?);
        }
        let (q, best) = self.best_labels(&x)?;
        Ok(at_labels(&q, &best))
    }

    /// V of standardised inputs `[n * D]` with the label this network prefers (max Q;
    /// for BCQ, over the allowed labels) valued by `judge`'s Q; IQL's V as it is.
    pub fn values_judged_by(
        &self,
        judge: &QNetwork,
        x: Vec<f32>,
        device: &Device,
    ) -> Result<Vec<f32>> {
        if self.value.is_some() {
            return self.values_standardised(x, device);
        }
        let d = self.obs_dim();
        let n = x.len() / d.max(1);
        let x = Tensor::from_vec(x, (n, d), device)?;
        let (_, best) = self.best_labels(&x)?;
        let q: Vec<f32> = judge.net.forward(&x)?.flatten_all()?.to_vec1()?;
        Ok(at_labels(&q, &best))
    }

    /// Q of a batch `[n, D]` (row-major) and each row's highest-valued label among the
    /// allowed ones (BCQ's filter; none allowed: `None`).
    fn best_labels(&self, x: &Tensor) -> Result<(Vec<f32>, Vec<Option<usize>>)> {
        let n = x.dim(0)?;
        let q: Vec<f32> = self.net.forward(x)?.flatten_all()?.to_vec1()?;
        let k = q.len() / n.max(1);
        let allowed = match &self.imitation {
            Some((m, t)) => Some((m.forward(x)?.flatten_all()?.to_vec1::<f32>()?, *t)),
            None => None,
        };
        let best = (0..n)
            .map(|j| {
                let row = &q[j * k..(j + 1) * k];
                let ok = |a: usize| {
                    allowed
                        .as_ref()
                        .is_none_or(|(l, t)| bcq_allowed(&l[j * k..(j + 1) * k], a, *t))
                };
                (0..k)
                    .filter(|&a| ok(a))
                    .fold(None, |acc: Option<usize>, a| match acc {
                        Some(b) if row[b] >= row[a] => Some(b),
                        _ => Some(a),
                    })
            })
            .collect();
        Ok((q, best))
    }

    /// The network as a trainer-only safetensors file (`laq-qnet`): the parameters under
    /// their training names, the input standardisation, and the shapes in the metadata.
    /// [`QNetwork::load`] reads it back; the runtime does not.
    pub fn to_bytes(&self, gamma: f64, info: &BTreeMap<String, String>) -> Result<Vec<u8>> {
        use crate::util::safetensors::{to_bytes, Entry};
        let mut meta = info.clone();
        meta.insert("format".into(), QNET_FORMAT.into());
        meta.insert("version".into(), QNET_VERSION.into());
        meta.insert("obs_shape".into(), serde_json::to_string(&self.obs_shape)?);
        meta.insert("dims".into(), serde_json::to_string(&self.net.dims())?);
        meta.insert("gamma".into(), format!("{}", gamma as f32));
        if let QModel::Conv(c) = &self.net {
            meta.insert(
                "channels".into(),
                serde_json::to_string(&c.encoder.channels())?,
            );
        }
        let mut entries = vec![
            Entry::f32("input.mean", vec![self.mean.len()], &self.mean),
            Entry::f32("input.std", vec![self.std.len()], &self.std),
        ];
        let mut tensors: Vec<(String, Tensor)> = self
            .net
            .tensors()?
            .into_iter()
            .map(|(n, t)| (format!("q.{n}"), t))
            .collect();
        if let Some((m, t)) = &self.imitation {
            meta.insert("bcq_threshold".into(), format!("{t}"));
            for (n, t) in m.tensors()? {
                tensors.push((format!("imitation.{n}"), t));
            }
        }
        if let Some(v) = &self.value {
            meta.insert("value_network".into(), "1".into());
            for (n, t) in v.tensors()? {
                tensors.push((format!("v.{n}"), t));
            }
        }
        for (n, t) in tensors {
            let v: Vec<f32> = t.flatten_all()?.to_vec1()?;
            entries.push(Entry::f32(n, t.dims().to_vec(), &v));
        }
        to_bytes(&entries, &meta)
    }

    /// Writes [`QNetwork::to_bytes`] atomically.
    pub fn save(&self, path: &Path, gamma: f64, info: &BTreeMap<String, String>) -> Result<()> {
        crate::util::io::write_atomic(path, &self.to_bytes(gamma, info)?)
    }

    /// Reads a `laq-qnet` file; returns the network and its discount.
    pub fn load(path: &Path, device: &Device) -> Result<(QNetwork, f64)> {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::from_bytes(&bytes, device)
            .with_context(|| format!("invalid Q-network {}", path.display()))
    }

    pub fn from_bytes(bytes: &[u8], device: &Device) -> Result<(QNetwork, f64)> {
        let (_, header) =
            safetensors::SafeTensors::read_metadata(bytes).context("not a safetensors file")?;
        let meta = header.metadata().clone().unwrap_or_default();
        let get = |k: &str| meta.get(k).with_context(|| format!("metadata lacks `{k}`"));
        if get("format")? != QNET_FORMAT || get("version")? != QNET_VERSION {
            bail!("not a `{QNET_FORMAT}` version {QNET_VERSION} file");
        }
        let json = |k: &str| -> Result<Vec<usize>> {
            serde_json::from_str(get(k)?).with_context(|| format!("bad `{k}`"))
        };
        let obs_shape = json("obs_shape")?;
        let dims = json("dims")?;
        if dims.len() < 2 {
            bail!("bad `dims` {dims:?}");
        }
        let gamma: f64 = get("gamma")?.parse().context("bad `gamma`")?;
        let mut tensors = candle_core::safetensors::load_buffer(bytes, device)?;
        let mut take = |k: &str| -> Result<Vec<f32>> {
            Ok(tensors
                .remove(k)
                .with_context(|| format!("missing tensor `{k}`"))?
                .to_vec1()?)
        };
        let mean = take("input.mean")?;
        let std = take("input.std")?;
        let image = match meta.get("channels") {
            Some(c) => {
                let channels: Vec<usize> = serde_json::from_str(c).context("bad `channels`")?;
                Some((ImageShape::new(&obs_shape, channels.len())?, channels))
            }
            None => None,
        };
        let vb = VarBuilder::from_tensors(tensors, candle_core::DType::F32, device);
        let hidden = &dims[1..dims.len() - 1];
        let k = dims[dims.len() - 1];
        let d: usize = obs_shape.iter().product();
        let image_ref = image.as_ref().map(|(s, c)| (*s, c.as_slice()));
        let net = QModel::new(vb.pp("q"), d, image_ref, hidden, k)?;
        let imitation = match meta.get("bcq_threshold") {
            Some(t) => Some((
                QModel::new(vb.pp("imitation"), d, image_ref, hidden, k)?,
                t.parse().context("bad `bcq_threshold`")?,
            )),
            None => None,
        };
        let value = match meta.get("value_network") {
            Some(_) => Some(QModel::new(vb.pp("v"), d, image_ref, hidden, 1)?),
            None => None,
        };
        Ok((
            QNetwork {
                net,
                mean,
                std,
                obs_shape,
                loss_curve: vec![],
                imitation,
                value,
                checkpoints: vec![],
                snapshots: vec![],
            },
            gamma,
        ))
    }
}

/// Each row's Q at its chosen label, from row-major Q `[n, K]`; no label: minus infinity.
fn at_labels(q: &[f32], best: &[Option<usize>]) -> Vec<f32> {
    let k = q.len() / best.len().max(1);
    best.iter()
        .enumerate()
        .map(|(j, b)| b.map_or(f32::NEG_INFINITY, |a| q[j * k + a]))
        .collect()
}

/// Whether a file is a [`QNET_FORMAT`] Q-network (by its metadata).
pub fn is_qnet_file(bytes: &[u8]) -> bool {
    safetensors::SafeTensors::read_metadata(bytes)
        .ok()
        .and_then(|(_, h)| h.metadata().clone())
        .is_some_and(|m| m.get("format").map(String::as_str) == Some(QNET_FORMAT))
}
