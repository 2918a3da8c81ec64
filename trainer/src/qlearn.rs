//! Offline Q-learning on labelled transitions `(s, a, s', r)`: tabular Q-learning for
//! discrete observations and Double DQN for anything else (a convolutional Q-network for
//! image observations). V(s) = max_a Q(s, a).

use crate::checkpoint::{Checkpointer, State};
use crate::conv::{Arch, ChannelNorm, ConvConfig, Encoder, ImageShape, Inputs};
use crate::data::Dataset;
use crate::nn::{self, Adam, Mlp};
use crate::progress;
use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use candle_nn::VarBuilder;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::Path;

/// Which Q-learning to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum QKind {
    /// Tabular when every observation is integer-valued and there are at most
    /// `MAX_TABLE_STATES` distinct ones, DQN otherwise.
    Auto,
    Tabular,
    /// Double DQN.
    Dqn,
    /// Discrete BCQ: the bootstrap action is restricted to labels the data makes likely.
    Bcq,
    /// Discrete CQL: Q of actions the data does not take is pushed down.
    Cql,
}

/// Largest number of distinct observations `auto` sends to the tabular learner.
pub const MAX_TABLE_STATES: usize = 65536;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TabularConfig {
    pub gamma: f64,
    pub lr: f64,
    /// Passes over the data, each in a fresh seeded random order.
    pub passes: usize,
}

impl Default for TabularConfig {
    /// The authors' grid-world settings: gamma 0.95, learning rate 0.3, 3 passes.
    fn default() -> Self {
        TabularConfig {
            gamma: 0.95,
            lr: 0.3,
            passes: 3,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DqnConfig {
    pub hidden: Vec<usize>,
    pub gamma: f64,
    pub lr: f64,
    pub batch_size: usize,
    pub steps: usize,
    /// Steps between copies of the online network into the target network.
    pub target_update: usize,
    /// BCQ: an action may bootstrap when its imitation probability is at least this
    /// share of the most likely action's. Undirected data with action noise show most
    /// latent actions in most states, so the filter need only drop the truly unseen:
    /// on U-maze data (3 seeds), 0.3 (discrete BCQ's usual value) gave Spearman 0.91
    /// against the ground-truth-action V at the 95th-percentile checkpoint and 0.75 at
    /// the last; 0.1 gave 0.97 / 0.92; 0.03 gave 0.98 / 0.92.
    pub bcq_threshold: f64,
    /// CQL: weight of the conservative term logsumexp_a Q(s, a) - Q(s, a_data). Its
    /// gradient does not grow with the scale of Q while the TD term's does, so with
    /// returns up to 1/(1-gamma) a small weight suffices: on U-maze data, 1.0 turned the
    /// ranking upside down (Spearman -0.24 against the oracle) and 0.05 gave 0.90.
    pub cql_alpha: f64,
    /// Number of evenly spaced checkpoints at which `probe` states are evaluated.
    pub checkpoints: usize,
    /// Network kind: `auto` is convolutional for image observations `[C, H, W]` (a
    /// convolutional trunk, then `hidden` fully connected layers).
    #[serde(default)]
    pub arch: Arch,
    /// The convolutional trunk (used when the network is convolutional).
    #[serde(default)]
    pub conv: ConvConfig,
}

impl Default for DqnConfig {
    /// The authors' network (in-128-128-K) and discount; batch, steps and target period
    /// are sized for datasets of a few hundred thousand transitions.
    fn default() -> Self {
        DqnConfig {
            hidden: vec![128, 128],
            gamma: 0.99,
            lr: 5e-4,
            batch_size: 64,
            steps: 20000,
            target_update: 500,
            bcq_threshold: 0.03,
            cql_alpha: 0.05,
            checkpoints: 10,
            arch: Arch::Auto,
            conv: ConvConfig::default(),
        }
    }
}

/// Distinct observations, indexed in order of first appearance (observations first,
/// then next observations), keyed by their exact bit patterns.
#[derive(Clone, Debug, Default)]
pub struct StateIndex {
    map: HashMap<Vec<u32>, usize>,
    pub states: Vec<Vec<f32>>,
}

impl StateIndex {
    pub fn build(data: &Dataset) -> Self {
        let mut idx = StateIndex::default();
        for i in 0..data.len() {
            idx.insert(&data.obs_row(i));
        }
        for i in 0..data.len() {
            idx.insert(&data.next_obs_row(i));
        }
        idx
    }

    fn insert(&mut self, s: &[f32]) -> usize {
        let key: Vec<u32> = s.iter().map(|v| v.to_bits()).collect();
        let n = self.states.len();
        *self.map.entry(key).or_insert_with(|| {
            self.states.push(s.to_vec());
            n
        })
    }

    pub fn get(&self, s: &[f32]) -> Option<usize> {
        let key: Vec<u32> = s.iter().map(|v| v.to_bits()).collect();
        self.map.get(&key).copied()
    }

    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }
}

/// Whether `auto` should use the tabular learner on this data. Never for images: each
/// frame would be its own table row.
pub fn is_tabular(data: &Dataset) -> bool {
    if data.is_image() {
        return false;
    }
    let integer = data
        .observations
        .iter()
        .chain(&data.next_observations)
        .all(|v| v.fract() == 0.0);
    integer && StateIndex::build(data).len() <= MAX_TABLE_STATES
}

/// A learned Q table.
#[derive(Debug)]
pub struct Table {
    pub index: StateIndex,
    pub num_actions: usize,
    /// Row-major `[states, actions]`.
    pub q: Vec<f64>,
}

impl Table {
    pub fn q_row(&self, s: usize) -> &[f64] {
        &self.q[s * self.num_actions..(s + 1) * self.num_actions]
    }

    pub fn value_of(&self, s: usize) -> f64 {
        self.q_row(s)
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// V of an observation; `None` for an observation the data never contained.
    pub fn value(&self, obs: &[f32]) -> Option<f64> {
        self.index.get(obs).map(|s| self.value_of(s))
    }
}

/// Tabular Q-learning. No bootstrapping past terminals.
pub fn tabular(
    data: &Dataset,
    labels: &[u32],
    num_actions: usize,
    cfg: &TabularConfig,
    seed: u64,
) -> Result<Table> {
    check_labels(labels, num_actions, data.len())?;
    let index = StateIndex::build(data);
    let k = num_actions;
    let mut q = vec![0f64; index.len() * k];
    let s: Vec<usize> = (0..data.len())
        .map(|i| index.get(&data.obs_row(i)).unwrap_or(0))
        .collect();
    let s2: Vec<usize> = (0..data.len())
        .map(|i| index.get(&data.next_obs_row(i)).unwrap_or(0))
        .collect();
    let mut order: Vec<usize> = (0..data.len()).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7461_626c);
    for _ in 0..cfg.passes {
        order.shuffle(&mut rng);
        for &i in &order {
            let next_v = if data.terminals[i] {
                0.0
            } else {
                q[s2[i] * k..(s2[i] + 1) * k]
                    .iter()
                    .copied()
                    .fold(f64::NEG_INFINITY, f64::max)
            };
            let target = data.rewards[i] as f64 + cfg.gamma * next_v;
            let cell = &mut q[s[i] * k + labels[i] as usize];
            *cell += cfg.lr * (target - *cell);
        }
    }
    Ok(Table {
        index,
        num_actions: k,
        q,
    })
}

fn check_labels(labels: &[u32], k: usize, n: usize) -> Result<()> {
    if labels.len() != n {
        bail!("{} labels for {n} transitions", labels.len());
    }
    if let Some(i) = labels.iter().position(|&l| l as usize >= k) {
        bail!(
            "label {} of transition {i} is out of range for {k} actions",
            labels[i]
        );
    }
    Ok(())
}

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
    /// V of the probe states at each checkpoint: `(step, values)`.
    pub checkpoints: Vec<(usize, Vec<f32>)>,
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
            None => nn::standardise(obs, &self.mean, &self.std),
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
            out.extend(self.values_prepared(self.prepare(part), device)?);
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
                    x = nn::standardise(&x, &self.mean, &self.std);
                }
            }
            out.extend(self.values_prepared(std::mem::take(&mut x), device)?);
        }
        Ok(out)
    }

    /// V of standardised inputs `[n * D]`.
    fn values_prepared(&self, x: Vec<f32>, device: &Device) -> Result<Vec<f32>> {
        let d = self.obs_dim();
        let n = x.len() / d.max(1);
        let x = Tensor::from_vec(x, (n, d), device)?;
        let q: Vec<f32> = self.net.forward(&x)?.flatten_all()?.to_vec1()?;
        let k = q.len() / n.max(1);
        let allowed = match &self.imitation {
            Some((m, t)) => Some((m.forward(&x)?.flatten_all()?.to_vec1::<f32>()?, *t)),
            None => None,
        };
        Ok((0..n)
            .map(|j| {
                let row = &q[j * k..(j + 1) * k];
                let ok = |a: usize| {
                    allowed
                        .as_ref()
                        .is_none_or(|(l, t)| bcq_allowed(&l[j * k..(j + 1) * k], a, *t))
                };
                (0..k)
                    .filter(|&a| ok(a))
                    .map(|a| row[a])
                    .fold(f32::NEG_INFINITY, f32::max)
            })
            .collect())
    }

    /// The network as a trainer-only safetensors file (`laq-qnet`): the parameters under
    /// their training names, the input standardisation, and the shapes in the metadata.
    /// [`QNetwork::load`] reads it back; the runtime does not.
    pub fn to_bytes(&self, gamma: f64, info: &BTreeMap<String, String>) -> Result<Vec<u8>> {
        let mut meta: std::collections::HashMap<String, String> =
            info.clone().into_iter().collect();
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
        let mut named: Vec<(String, Tensor)> = vec![];
        named.push((
            "input.mean".into(),
            Tensor::new(self.mean.as_slice(), &Device::Cpu)?,
        ));
        named.push((
            "input.std".into(),
            Tensor::new(self.std.as_slice(), &Device::Cpu)?,
        ));
        for (n, t) in self.net.tensors()? {
            named.push((format!("q.{n}"), t));
        }
        if let Some((m, t)) = &self.imitation {
            meta.insert("bcq_threshold".into(), format!("{t}"));
            for (n, t) in m.tensors()? {
                named.push((format!("imitation.{n}"), t));
            }
        }
        let host = named
            .into_iter()
            .map(|(n, t)| {
                let shape = t.dims().to_vec();
                let v: Vec<f32> = t.flatten_all()?.to_vec1()?;
                Ok((
                    n,
                    shape,
                    v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let views = host
            .iter()
            .map(|(n, shape, bytes)| {
                Ok((
                    n.clone(),
                    safetensors::tensor::TensorView::new(
                        safetensors::Dtype::F32,
                        shape.clone(),
                        bytes,
                    )?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        crate::export::canonical_header(&safetensors::serialize(views, Some(meta))?)
    }

    /// Writes [`QNetwork::to_bytes`] atomically.
    pub fn save(&self, path: &Path, gamma: f64, info: &BTreeMap<String, String>) -> Result<()> {
        crate::io::write_atomic(path, &self.to_bytes(gamma, info)?)
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
        Ok((
            QNetwork {
                net,
                mean,
                std,
                obs_shape,
                loss_curve: vec![],
                imitation,
                checkpoints: vec![],
            },
            gamma,
        ))
    }
}

/// Whether a file is a [`QNET_FORMAT`] Q-network (by its metadata).
pub fn is_qnet_file(bytes: &[u8]) -> bool {
    safetensors::SafeTensors::read_metadata(bytes)
        .ok()
        .and_then(|(_, h)| h.metadata().clone())
        .is_some_and(|m| m.get("format").map(String::as_str) == Some(QNET_FORMAT))
}

/// Whether label `a` passes BCQ's filter: p(a) / max p >= threshold, from logits.
fn bcq_allowed(logits: &[f32], a: usize, threshold: f32) -> bool {
    let top = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    (logits[a] - top).exp() >= threshold
}

/// The range that discounted returns can take given the data's rewards. When every
/// rewarded transition ends its episode, a return is at most one reward.
fn return_bounds(data: &Dataset, gamma: f64) -> (f32, f32) {
    let rmin = data.rewards.iter().copied().fold(0f32, f32::min) as f64;
    let rmax = data.rewards.iter().copied().fold(0f32, f32::max) as f64;
    let rewarded_end = data
        .rewards
        .iter()
        .zip(&data.terminals)
        .all(|(&r, &t)| r == 0.0 || t);
    if rewarded_end {
        (rmin as f32, rmax as f32)
    } else {
        ((rmin / (1.0 - gamma)) as f32, (rmax / (1.0 - gamma)) as f32)
    }
}

/// Double DQN with a target network, standardised inputs, 0.5 * MSE loss and targets
/// clamped to the possible range of returns.
/// `variant` is `Dqn`, `Bcq` or `Cql`. When `probe` holds raw states, their V is recorded
/// at `cfg.checkpoints` evenly spaced steps (for model selection studies).
#[allow(clippy::too_many_arguments)]
pub fn dqn(
    data: &Dataset,
    labels: &[u32],
    num_actions: usize,
    cfg: &DqnConfig,
    variant: QKind,
    probe: Option<&[f32]>,
    seed: u64,
    device: &Device,
) -> Result<QNetwork> {
    dqn_resumable(
        data,
        labels,
        num_actions,
        cfg,
        variant,
        probe,
        seed,
        device,
        None,
    )
}

/// The checkpoint stage name of deep Q-learning.
const STAGE: &str = "q-learning";

/// [`dqn`], saving its state through `ckpt` and continuing from a resumed one.
#[allow(clippy::too_many_arguments)]
pub fn dqn_resumable(
    data: &Dataset,
    labels: &[u32],
    num_actions: usize,
    cfg: &DqnConfig,
    variant: QKind,
    probe: Option<&[f32]>,
    seed: u64,
    device: &Device,
    mut ckpt: Option<&mut Checkpointer>,
) -> Result<QNetwork> {
    if !matches!(variant, QKind::Dqn | QKind::Bcq | QKind::Cql) {
        bail!("deep Q-learning variant must be dqn, bcq or cql");
    }
    check_labels(labels, num_actions, data.len())?;
    let n = data.len();
    let image = if cfg.arch.is_conv(&data.obs_shape)? {
        Some(ImageShape::new(&data.obs_shape, cfg.conv.channels.len())?)
    } else {
        None
    };
    let (inputs, mean, std) = match image {
        None => {
            if data.is_image() {
                log::warn!(
                    "a fully connected Q-network on images converts every observation to f32 \
                     (4x the memory of u8 storage)"
                );
            }
            Inputs::dense(data)
        }
        Some(shape) => {
            let inputs = Inputs::image(data, shape);
            let (mean, std) = match &inputs {
                Inputs::Image { norm, .. } => (norm.mean.clone(), norm.std.clone()),
                Inputs::Dense { .. } => unreachable!("image inputs"),
            };
            (inputs, mean, std)
        }
    };
    let d = inputs.dim();
    let image_ref = image.map(|s| (s, cfg.conv.channels.as_slice()));
    let build = |vb: VarBuilder| QModel::new(vb, d, image_ref, &cfg.hidden, num_actions);
    let (vm, vb) = nn::new_varmap(device);
    let net = build(vb.pp("q"))?;
    let imitation = match variant {
        QKind::Bcq => Some((build(vb.pp("imitation"))?, cfg.bcq_threshold as f32)),
        _ => None,
    };
    nn::init_vars(&vm, seed)?;
    let (tvm, tvb) = nn::new_varmap(device);
    let target = build(tvb.pp("q"))?;
    nn::copy_vars(&vm, &tvm)?;
    let mut opt = Adam::new(&vm, cfg.lr, 0.0)?;
    let (lo, hi) = return_bounds(data, cfg.gamma);
    let cql_alpha = if variant == QKind::Cql {
        cfg.cql_alpha as f32
    } else {
        0.0
    };
    let mut snapshots = vec![];
    let every = (cfg.steps / cfg.checkpoints.max(1)).max(1);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6471_6e00);
    let bs = cfg.batch_size.min(n).max(1);
    let (mut bs_s, mut bs_s2) = (vec![0f32; bs * d], vec![0f32; bs * d]);
    let mut bs_a = vec![0u32; bs];
    let (mut bs_r, mut bs_t) = (vec![0f32; bs], vec![false; bs]);
    let mut curve = vec![];
    let mut acc = (0f64, 0usize);
    let bar = progress::bar(cfg.steps as u64, "Q-learning");
    let mut first = 0;
    if let Some(st) = ckpt.as_deref_mut().and_then(|c| c.resumed(STAGE)) {
        first = st.get_u64("step")? as usize;
        st.load_adam("adam", &mut opt)?;
        st.load_vars("target", &tvm)?;
        rng = st.get_rng("rng")?;
        curve = st.f32("curve")?.to_vec();
        let (sum, count): (f64, usize) = st.get_as("acc")?;
        acc = (sum, count);
        let steps: Vec<usize> = st.get_as("snapshot_steps")?;
        for (i, at) in steps.into_iter().enumerate() {
            snapshots.push((at, st.f32(&format!("snapshot.{i}"))?.to_vec()));
        }
        bar.set_position(first as u64);
    }
    for step in first..cfg.steps {
        if step > 0 && step % cfg.target_update.max(1) == 0 {
            nn::copy_vars(&vm, &tvm)?;
        }
        for j in 0..bs {
            let i = rng.random_range(0..n);
            inputs.fill(i, false, &mut bs_s[j * d..(j + 1) * d]);
            inputs.fill(i, true, &mut bs_s2[j * d..(j + 1) * d]);
            bs_a[j] = labels[i];
            bs_r[j] = data.rewards[i];
            bs_t[j] = data.terminals[i];
        }
        let batch = Batch {
            s: &bs_s,
            s2: &bs_s2,
            a: &bs_a,
            r: &bs_r,
            terminal: &bs_t,
        };
        let losses = Losses {
            imitation: imitation.as_ref().map(|(m, t)| (m, *t)),
            cql_alpha,
        };
        acc.0 += dqn_step(
            &net,
            &target,
            &mut opt,
            &batch,
            cfg.gamma as f32,
            (lo, hi),
            &losses,
            device,
        )? as f64;
        acc.1 += 1;
        if (step + 1) % (cfg.steps / 10).max(1) == 0 || step + 1 == cfg.steps {
            curve.push((acc.0 / acc.1 as f64) as f32);
            log::debug!(
                "Q-learning step {}: mean TD loss {:.4e}",
                step + 1,
                acc.0 / acc.1 as f64
            );
            bar.set_message(format!("TD loss {:.2e}", acc.0 / acc.1 as f64));
            acc = (0.0, 0);
        }
        if let Some(p) = probe {
            if (step + 1) % every == 0 {
                let q = QNetwork {
                    net: net.clone(),
                    mean: mean.clone(),
                    std: std.clone(),
                    obs_shape: data.obs_shape.clone(),
                    loss_curve: vec![],
                    imitation: imitation.clone(),
                    checkpoints: vec![],
                };
                snapshots.push((step + 1, q.values(p, device)?));
            }
        }
        bar.inc(1);
        if let Some(c) = ckpt.as_deref_mut() {
            let done = (step + 1) as u64;
            if step + 1 < cfg.steps && c.due(STAGE, done) {
                let mut st = State::default();
                st.put_adam("adam", &opt);
                st.put_vars("target", &tvm)?;
                st.put_rng("rng", &rng);
                st.put_f32("curve", curve.clone());
                st.set("acc", json!(acc));
                st.set(
                    "snapshot_steps",
                    json!(snapshots.iter().map(|(s, _)| *s).collect::<Vec<_>>()),
                );
                for (i, (_, v)) in snapshots.iter().enumerate() {
                    st.put_f32(&format!("snapshot.{i}"), v.clone());
                }
                c.save(STAGE, done, st)?;
            }
        }
    }
    bar.finish_and_clear();
    Ok(QNetwork {
        net,
        mean,
        std,
        obs_shape: data.obs_shape.clone(),
        loss_curve: curve,
        imitation,
        checkpoints: snapshots,
    })
}

/// A minibatch of standardised transitions, row-major.
pub struct Batch<'a> {
    pub s: &'a [f32],
    pub s2: &'a [f32],
    pub a: &'a [u32],
    pub r: &'a [f32],
    pub terminal: &'a [bool],
}

/// The extra terms of BCQ and CQL.
pub struct Losses<'a> {
    /// BCQ's imitation network and threshold.
    pub imitation: Option<(&'a QModel, f32)>,
    /// CQL's weight (0: none).
    pub cql_alpha: f32,
}

/// One Double-DQN step: the online network picks the next action, the target network
/// values it; returns the batch loss. BCQ restricts the pick to likely actions and
/// trains the imitation network alongside; CQL adds its conservative term.
#[allow(clippy::too_many_arguments)]
pub fn dqn_step(
    net: &QModel,
    target: &QModel,
    opt: &mut Adam,
    b: &Batch,
    gamma: f32,
    (lo, hi): (f32, f32),
    extra: &Losses,
    device: &Device,
) -> Result<f32> {
    let bs = b.a.len();
    let d = b.s.len() / bs;
    let s = Tensor::from_slice(b.s, (bs, d), device)?;
    let s2 = Tensor::from_slice(b.s2, (bs, d), device)?;
    let online_next: Vec<f32> = net.forward(&s2)?.flatten_all()?.to_vec1()?;
    let target_next: Vec<f32> = target.forward(&s2)?.flatten_all()?.to_vec1()?;
    let k = online_next.len() / bs;
    let logits_next: Option<Vec<f32>> = match extra.imitation {
        Some((m, _)) => Some(m.forward(&s2)?.flatten_all()?.to_vec1()?),
        None => None,
    };
    let y: Vec<f32> = (0..bs)
        .map(|j| {
            let row = &online_next[j * k..(j + 1) * k];
            let ok = |a: usize| match (&logits_next, extra.imitation) {
                (Some(l), Some((_, t))) => bcq_allowed(&l[j * k..(j + 1) * k], a, t),
                _ => true,
            };
            let best = (0..k)
                .filter(|&a| ok(a))
                .fold((0, f32::NEG_INFINITY), |acc, a| {
                    if row[a] > acc.1 {
                        (a, row[a])
                    } else {
                        acc
                    }
                })
                .0;
            let boot = if b.terminal[j] {
                0.0
            } else {
                gamma * target_next[j * k + best]
            };
            (b.r[j] + boot).clamp(lo, hi)
        })
        .collect();
    let y = Tensor::from_vec(y, (bs, 1), device)?;
    let a = Tensor::from_slice(b.a, (bs, 1), device)?;
    let q = net.forward(&s)?;
    let q_sa = q.gather(&a, 1)?;
    let mut loss = ((&q_sa - y)?.sqr()?.mean_all()? * 0.5)?;
    if extra.cql_alpha > 0.0 {
        let gap = (q.log_sum_exp(1)?.unsqueeze(1)? - &q_sa)?.mean_all()?;
        loss = (loss + (gap * extra.cql_alpha as f64)?)?;
    }
    if let Some((m, _)) = extra.imitation {
        let logits = m.forward(&s)?;
        let a1 = Tensor::from_slice(b.a, bs, device)?;
        let ce = candle_nn::loss::cross_entropy(&logits, &a1)?;
        let reg = (logits.sqr()?.mean_all()? * 1e-2)?;
        loss = (loss + ce + reg)?;
    }
    let value = loss.to_scalar::<f32>()?;
    opt.backward_step(&loss)?;
    Ok(value)
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DistillConfig {
    pub hidden: Vec<usize>,
    pub steps: usize,
    pub lr: f64,
}

impl Default for DistillConfig {
    fn default() -> Self {
        DistillConfig {
            hidden: vec![64, 64],
            steps: 3000,
            lr: 3e-3,
        }
    }
}

/// Fits an MLP to a Q table (every known state, every action) so the table can be
/// exported in the runtime's format. Returns the network and its largest absolute error
/// on the table.
pub fn distill(
    table: &Table,
    cfg: &DistillConfig,
    seed: u64,
    device: &Device,
) -> Result<(QNetwork, f64)> {
    let d = table.index.states.first().map(|s| s.len()).unwrap_or(0);
    if d == 0 {
        bail!("cannot distill an empty table");
    }
    let raw: Vec<f32> = table.index.states.iter().flatten().copied().collect();
    let y: Vec<f32> = table.q.iter().map(|&v| v as f32).collect();
    fit(&raw, d, &y, table.num_actions, cfg, seed, device)
}

/// Fits an MLP from raw states `[n * d]` to targets `[n * k]` by full-batch Adam (the
/// learning rate drops x0.1 for the last third). Returns the network and its largest
/// absolute error on the targets.
pub fn fit(
    raw: &[f32],
    d: usize,
    y_host: &[f32],
    k: usize,
    cfg: &DistillConfig,
    seed: u64,
    device: &Device,
) -> Result<(QNetwork, f64)> {
    let n = raw.len() / d;
    if n == 0 || y_host.len() != n * k {
        bail!("fit needs targets [{n}, {k}] for {n} states");
    }
    let (mean, std) = nn::column_stats(raw, d);
    let x = Tensor::from_vec(nn::standardise(raw, &mean, &std), (n, d), device)?;
    let y = Tensor::from_slice(y_host, (n, k), device)?;
    let num_actions = k;
    let mut dims = vec![d];
    dims.extend(&cfg.hidden);
    dims.push(num_actions);
    let (vm, vb) = nn::new_varmap(device);
    let mlp = Mlp::new(vb, &dims)?;
    nn::init_vars(&vm, seed ^ 0x6469_7374)?;
    let mut opt = Adam::new(&vm, cfg.lr, 0.0)?;
    let mut curve = vec![];
    let bar = progress::bar(cfg.steps as u64, "exporting Q table");
    for step in 0..cfg.steps {
        opt.lr = cfg.lr * if step * 3 >= cfg.steps * 2 { 0.1 } else { 1.0 };
        let loss = (mlp.forward(&x)? - &y)?.sqr()?.mean_all()?;
        if (step + 1) % (cfg.steps / 10).max(1) == 0 {
            curve.push(loss.to_scalar::<f32>()?);
        }
        opt.backward_step(&loss)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let pred: Vec<f32> = mlp.forward(&x)?.flatten_all()?.to_vec1()?;
    let max_err = pred
        .iter()
        .zip(y_host)
        .map(|(p, t)| (p - t).abs() as f64)
        .fold(0.0, f64::max);
    Ok((
        QNetwork {
            net: QModel::Mlp(mlp),
            mean,
            std,
            obs_shape: vec![d],
            loss_curve: curve,
            imitation: None,
            checkpoints: vec![],
        },
        max_err,
    ))
}

/// Rows per minibatch when fitting a convolutional network.
const FIT_BATCH: usize = 64;

/// Fits a convolutional network with one output to `net`'s V on the observations `idx`
/// of `data` (images), for export: BCQ's V is a max over the actions its imitation
/// network allows, which the format's max-Q head cannot express, so V itself is fitted.
/// The fitted network has `net`'s input standardisation, `channels` in its encoder and
/// `cfg.hidden` after it; minibatch Adam (the learning rate drops x0.1 for the last
/// third). Returns the network and its largest absolute error on those observations.
pub fn fit_image(
    net: &QNetwork,
    data: &Dataset,
    idx: &[usize],
    channels: &[usize],
    cfg: &DistillConfig,
    seed: u64,
    device: &Device,
) -> Result<(QNetwork, f64)> {
    if idx.is_empty() {
        bail!("fitting V needs at least one observation");
    }
    let shape = ImageShape::new(&data.obs_shape, channels.len())?;
    let target = net.values_of(data, idx, device)?;
    let norm = ChannelNorm::new(net.mean.clone(), net.std.clone());
    let d = shape.len();
    let (vm, vb) = nn::new_varmap(device);
    let model = QModel::new(vb, d, Some((shape, channels)), &cfg.hidden, 1)?;
    nn::init_vars(&vm, seed ^ 0x6669_7469)?;
    let mut opt = Adam::new(&vm, cfg.lr, 0.0)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6669_7462);
    let bs = FIT_BATCH.min(idx.len());
    let (mut x, mut y) = (vec![0f32; bs * d], vec![0f32; bs]);
    let mut curve = vec![];
    let bar = progress::bar(cfg.steps as u64, "fitting V for export");
    for step in 0..cfg.steps {
        opt.lr = cfg.lr * if step * 3 >= cfg.steps * 2 { 0.1 } else { 1.0 };
        for j in 0..bs {
            let k = rng.random_range(0..idx.len());
            norm.fill(
                &data.observations,
                idx[k],
                shape,
                &mut x[j * d..(j + 1) * d],
            );
            y[j] = target[k];
        }
        let xt = Tensor::from_slice(&x, (bs, d), device)?;
        let yt = Tensor::from_slice(&y, (bs, 1), device)?;
        let loss = (model.forward(&xt)? - &yt)?.sqr()?.mean_all()?;
        if (step + 1) % (cfg.steps / 10).max(1) == 0 {
            curve.push(loss.to_scalar::<f32>()?);
        }
        opt.backward_step(&loss)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let fitted = QNetwork {
        net: model,
        mean: net.mean.clone(),
        std: net.std.clone(),
        obs_shape: data.obs_shape.clone(),
        loss_curve: curve,
        imitation: None,
        checkpoints: vec![],
    };
    let pred = fitted.values_of(data, idx, device)?;
    let max_err = pred
        .iter()
        .zip(&target)
        .map(|(p, t)| (p - t).abs() as f64)
        .fold(0.0, f64::max);
    Ok((fitted, max_err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envs::gridworld::{GridWorld, GAMMA};

    fn gt_labels(data: &Dataset) -> Vec<u32> {
        let a = data.discrete_actions("test").unwrap();
        a.iter().map(|&a| a as u32).collect()
    }

    #[test]
    fn tabular_with_true_actions_recovers_optimal_values() {
        let g = GridWorld::default();
        let data = g.generate(3000, 0, 0.0);
        let labels = gt_labels(&data);
        let cfg = TabularConfig {
            passes: 20,
            ..Default::default()
        };
        let t = tabular(&data, &labels, 8, &cfg, 0).unwrap();
        let opt = g.optimal_values(GAMMA);
        for s in 0..36 {
            let (r, c) = g.cell(s);
            let v = t.value(&[r as f32, c as f32]).unwrap();
            assert!((v - opt[s]).abs() < 0.05, "state {s}: {v} vs {}", opt[s]);
        }
        // One action evaluates the behaviour policy: far below optimal at the start.
        let one = tabular(&data, &vec![0; data.len()], 1, &cfg, 0).unwrap();
        assert!(one.value(&[0.0, 0.0]).unwrap() < opt[0] - 0.1);
    }

    #[test]
    fn deep_variants_learn_the_grid() {
        let g = GridWorld::default();
        let data = g.generate(1000, 0, 0.0);
        let labels = gt_labels(&data);
        let cfg = DqnConfig {
            steps: 3000,
            checkpoints: 3,
            gamma: 0.95,
            ..Default::default()
        };
        let probe = [0.0f32, 0.0, 4.0, 4.0, 2.0, 2.0];
        for variant in [QKind::Dqn, QKind::Bcq, QKind::Cql] {
            let net = dqn(
                &data,
                &labels,
                8,
                &cfg,
                variant,
                Some(&probe),
                0,
                &Device::Cpu,
            )
            .unwrap();
            let v = net.values(&probe, &Device::Cpu).unwrap();
            assert!(v.iter().all(|x| x.is_finite()), "{variant:?} {v:?}");
            assert!(v[1] > v[0], "{variant:?}: V(4,4) > V(0,0) fails: {v:?}");
            // BCQ only bootstraps through actions the data makes likely: in the interior
            // those lead away from the goal, so its V(2,2) may stay low.
            if variant != QKind::Bcq {
                assert!(
                    v[1] > v[2] && v[2] > v[0],
                    "{variant:?}: V(4,4) > V(2,2) > V(0,0) fails: {v:?}"
                );
            }
            assert_eq!(net.checkpoints.len(), 3);
            assert_eq!(net.imitation.is_some(), variant == QKind::Bcq);
        }
        assert!(dqn(
            &data,
            &labels,
            8,
            &cfg,
            QKind::Tabular,
            None,
            0,
            &Device::Cpu
        )
        .is_err());
    }

    /// A chain of frames (a square on one row, left or right, reward at column 7): the
    /// convolutional DQN ranks the columns by their distance to the reward, and the same
    /// seed gives the same network.
    #[test]
    fn conv_dqn_learns_a_chain_of_frames() {
        let data = crate::conv::moving_squares(1500, 32, true, 0);
        let labels = gt_labels(&data);
        let cfg = DqnConfig {
            hidden: vec![32],
            gamma: 0.9,
            lr: 1e-3,
            batch_size: 32,
            steps: 1500,
            target_update: 100,
            checkpoints: 2,
            conv: ConvConfig {
                channels: vec![8, 8],
            },
            ..Default::default()
        };
        // One frame per column: the first transition starting there.
        let d = data.obs_dim();
        let probe: Vec<f32> = (0..7)
            .flat_map(|col| {
                let i = (0..data.len())
                    .find(|&i| {
                        let row = data.obs_row(i);
                        row[..d / 3].iter().position(|&v| v > 200.0) == Some(14 * 32 + 2 + 3 * col)
                    })
                    .unwrap();
                data.obs_row(i).into_owned()
            })
            .collect();
        let dev = Device::Cpu;
        let net = dqn(&data, &labels, 2, &cfg, QKind::Dqn, Some(&probe), 0, &dev).unwrap();
        assert!(net.net.is_conv());
        assert_eq!(net.mean.len(), 3);
        let v = net.values(&probe, &dev).unwrap();
        let cols: Vec<f64> = (0..7).map(|c| c as f64).collect();
        let rho = crate::eval::spearman(&cols, &v.iter().map(|&x| x as f64).collect::<Vec<_>>());
        assert!(rho > 0.9, "V by column {v:?}");
        assert!(v[6] > 0.6 && v[0] < v[6], "{v:?}");
        let again = dqn(&data, &labels, 2, &cfg, QKind::Dqn, Some(&probe), 0, &dev).unwrap();
        assert_eq!(again.values(&probe, &dev).unwrap(), v);
        let all: Vec<usize> = (0..data.len()).collect();
        let from_store = net.values_of(&data, &all[..50], &dev).unwrap();
        let raw: Vec<f32> = (0..50).flat_map(|i| data.obs_row(i).into_owned()).collect();
        assert_eq!(from_store, net.values(&raw, &dev).unwrap());
        assert_eq!(net.checkpoints.len(), 2);
    }

    /// `laq-qnet` files read back to the same values (BCQ's imitation network included),
    /// and are told apart from other files.
    #[test]
    fn qnet_files_round_trip() {
        let data = crate::conv::moving_squares(200, 32, true, 1);
        let labels = gt_labels(&data);
        let cfg = DqnConfig {
            hidden: vec![16],
            steps: 30,
            conv: ConvConfig {
                channels: vec![4, 8],
            },
            ..Default::default()
        };
        let dev = Device::Cpu;
        let raw: Vec<f32> = (0..20).flat_map(|i| data.obs_row(i).into_owned()).collect();
        for variant in [QKind::Dqn, QKind::Bcq] {
            let net = dqn(&data, &labels, 2, &cfg, variant, None, 0, &dev).unwrap();
            let mut info = BTreeMap::new();
            info.insert("labels".to_string(), "gt".to_string());
            let bytes = net.to_bytes(0.9, &info).unwrap();
            assert!(is_qnet_file(&bytes));
            let (back, gamma) = QNetwork::from_bytes(&bytes, &dev).unwrap();
            assert!((gamma - 0.9).abs() < 1e-6);
            assert_eq!(back.obs_shape, vec![3, 32, 32]);
            assert_eq!(back.imitation.is_some(), variant == QKind::Bcq);
            assert_eq!(
                back.values(&raw, &dev).unwrap(),
                net.values(&raw, &dev).unwrap()
            );
        }
        assert!(!is_qnet_file(b"not a file"));
        let e = QNetwork::from_bytes(b"garbage", &dev).unwrap_err();
        assert!(format!("{e:#}").contains("safetensors"), "{e:#}");
    }

    #[test]
    fn out_of_range_labels_are_errors() {
        let data = GridWorld::default().generate(5, 0, 0.0);
        let e = tabular(&data, &vec![9; data.len()], 8, &TabularConfig::default(), 0).unwrap_err();
        assert!(e.to_string().contains("out of range"));
    }
}
