//! Supervised fits of networks to given targets: a Q table distilled into an MLP for
//! export, and BCQ's V fitted by a network the runtime can evaluate.

use super::*;
use crate::util::stats::TenthCurve;

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
    let d = table.index.width();
    if d == 0 || table.index.is_empty() {
        bail!("cannot distill an empty table");
    }
    let raw = table.index.rows();
    let y: Vec<f32> = table.q.iter().map(|&v| v as f32).collect();
    fit(raw, d, &y, table.num_actions, cfg, seed, device)
}

/// Rows per step of a fit on many states: each step takes a random minibatch of this many
/// rows. A full batch of 20,000 states made BCQ's export fit take 2 minutes on one core
/// against seconds for Q-learning itself; a Q table of a grid (hundreds of states) is
/// still fitted on all of its rows at every step.
const FIT_ROWS: usize = 2048;

/// Fits an MLP from raw states `[n * d]` to targets `[n * k]` by Adam on all rows, or on
/// random minibatches of `FIT_ROWS` when there are more (the learning rate drops x0.1
/// for the last third). Returns the network and its largest
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
    fit_head(raw, d, y_host, (k, None), cfg, seed, device)
}

/// Fits V(s) = 1 - ||phi(s)||_2 (the paper's appendix) to values `[n]` in [0, 1]: `phi`
/// is an MLP with `features` outputs, so V is high only where the features are near zero,
/// and states unlike the data (random features) get low values.
pub fn fit_one_norm(
    raw: &[f32],
    d: usize,
    v: &[f32],
    features: usize,
    cfg: &DistillConfig,
    seed: u64,
    device: &Device,
) -> Result<(QNetwork, f64)> {
    fit_head(raw, d, v, (features, Some(())), cfg, seed, device)
}

/// [`fit`] with `outputs` network outputs; with the one-norm flag, the prediction is
/// 1 - ||outputs||_2 against targets `[n]`.
fn fit_head(
    raw: &[f32],
    d: usize,
    y_host: &[f32],
    (outputs, one_norm): (usize, Option<()>),
    cfg: &DistillConfig,
    seed: u64,
    device: &Device,
) -> Result<(QNetwork, f64)> {
    let n = raw.len() / d;
    let k = if one_norm.is_some() { 1 } else { outputs };
    if n == 0 || y_host.len() != n * k || outputs == 0 {
        bail!("fit needs targets [{n}, {k}] for {n} states");
    }
    let (mean, std) = crate::util::stats::column_stats(raw, d);
    let x = Tensor::from_vec(
        crate::util::stats::standardise(raw, &mean, &std),
        (n, d),
        device,
    )?;
    let y = Tensor::from_slice(y_host, (n, k), device)?;
    let num_actions = outputs;
    let predict = |mlp: &Mlp, x: &Tensor| -> candle_core::Result<Tensor> {
        let out = mlp.forward(x)?;
        match one_norm {
            None => Ok(out),
            Some(()) => 1.0 - out.sqr()?.sum_keepdim(1)?.sqrt()?,
        }
    };
    let mut dims = vec![d];
    dims.extend(&cfg.hidden);
    dims.push(num_actions);
    let (vm, vb) = nn::new_varmap(device);
    let mlp = Mlp::new(vb, &dims)?;
    nn::init_vars(&vm, seed ^ 0x6469_7374)?;
    let mut opt = Adam::for_varmap(&vm, AdamConfig::new(cfg.lr, 0.0))?;
    let mut curve = TenthCurve::new(cfg.steps);
    let bar = progress::bar(cfg.steps as u64, "exporting Q table");
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6669_7462);
    let mut rows = vec![0u32; FIT_ROWS.min(n)];
    for step in 0..cfg.steps {
        opt.set_learning_rate(cfg.lr * if step * 3 >= cfg.steps * 2 { 0.1 } else { 1.0 });
        let loss = if n <= FIT_ROWS {
            (predict(&mlp, &x)? - &y)?
        } else {
            for r in rows.iter_mut() {
                *r = rng.random_range(0..n) as u32;
            }
            let at = Tensor::from_slice(&rows, rows.len(), device)?;
            (predict(&mlp, &x.index_select(&at, 0)?)? - y.index_select(&at, 0)?)?
        }
        .sqr()?
        .mean_all()?;
        curve.push(step, loss.to_scalar::<f32>()? as f64);
        opt.backward_step(&loss)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let pred: Vec<f32> = predict(&mlp, &x)?.flatten_all()?.to_vec1()?;
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
            loss_curve: curve.means,
            imitation: None,
            value: None,
            checkpoints: vec![],
            snapshots: vec![],
        },
        max_err,
    ))
}

/// Rows per minibatch when fitting a convolutional network.
const FIT_BATCH: usize = 64;

/// Fits a convolutional network with one output to values `target` of the observations
/// `idx` of `data` (images), for export: a V that the format's max-Q head cannot express
/// (BCQ's, a max over the actions its imitation network allows; an ensemble's mean) is
/// fitted itself. The fitted network has `net`'s input standardisation, `channels` in its
/// encoder and `cfg.hidden` after it; minibatch Adam (the learning rate drops x0.1 for the
/// last third). Returns the network and its largest absolute error on those observations.
#[allow(clippy::too_many_arguments)]
pub fn fit_image(
    net: &QNetwork,
    data: &Dataset,
    idx: &[usize],
    target: &[f32],
    channels: &[usize],
    cfg: &DistillConfig,
    seed: u64,
    device: &Device,
) -> Result<(QNetwork, f64)> {
    if idx.is_empty() || target.len() != idx.len() {
        bail!(
            "fitting V needs one value per observation ({} for {})",
            target.len(),
            idx.len()
        );
    }
    let shape = ImageShape::new(&data.obs_shape, channels.len())?;
    let norm = ChannelNorm::new(net.mean.clone(), net.std.clone());
    let d = shape.len();
    let (vm, vb) = nn::new_varmap(device);
    let model = QModel::new(vb, d, Some((shape, channels)), &cfg.hidden, 1)?;
    nn::init_vars(&vm, seed ^ 0x6669_7469)?;
    let mut opt = Adam::for_varmap(&vm, AdamConfig::new(cfg.lr, 0.0))?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6669_7462);
    let bs = FIT_BATCH.min(idx.len());
    let (mut x, mut y) = (vec![0f32; bs * d], vec![0f32; bs]);
    let mut curve = TenthCurve::new(cfg.steps);
    let bar = progress::bar(cfg.steps as u64, "fitting V for export");
    for step in 0..cfg.steps {
        opt.set_learning_rate(cfg.lr * if step * 3 >= cfg.steps * 2 { 0.1 } else { 1.0 });
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
        curve.push(step, loss.to_scalar::<f32>()? as f64);
        opt.backward_step(&loss)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let fitted = QNetwork {
        net: model,
        mean: net.mean.clone(),
        std: net.std.clone(),
        obs_shape: data.obs_shape.clone(),
        loss_curve: curve.means,
        imitation: None,
        value: None,
        checkpoints: vec![],
        snapshots: vec![],
    };
    let pred = fitted.values_of(data, idx, device)?;
    let max_err = pred
        .iter()
        .zip(target)
        .map(|(p, t)| (p - t).abs() as f64)
        .fold(0.0, f64::max);
    Ok((fitted, max_err))
}
