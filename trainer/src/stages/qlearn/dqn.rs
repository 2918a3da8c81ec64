//! Double DQN and its offline variants (discrete BCQ, CQL) on labelled transitions.

use super::*;
use crate::util::stats::TenthCurve;

/// Whether label `a` passes BCQ's filter: p(a) / max p >= threshold, from logits.
pub(super) fn bcq_allowed(logits: &[f32], a: usize, threshold: f32) -> bool {
    let top = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    (logits[a] - top).exp() >= threshold
}

/// What deep Q-learning learns from.
#[derive(Clone, Copy)]
pub struct DqnInputs<'a> {
    pub data: &'a Dataset,
    /// The label of every transition, below `num_actions`.
    pub labels: &'a [u32],
    pub num_actions: usize,
    /// `Dqn`, `Bcq` or `Cql`.
    pub variant: QKind,
    /// Raw states whose V is recorded at `cfg.checkpoints` evenly spaced steps (for model
    /// selection studies).
    pub probe: Option<&'a [f32]>,
}

/// Running sums and snapshot steps, as a checkpoint keeps them.
#[derive(Serialize, Deserialize)]
struct Progress {
    curve: TenthCurve,
    snapshot_steps: Vec<usize>,
}

/// The checkpoint stage name of deep Q-learning.
const STAGE: &str = "q-learning";

/// Double DQN with a target network, standardised inputs, 0.5 * MSE loss and targets
/// clamped to the possible range of returns, or its BCQ / CQL variant. With `ckpt`, the
/// stage saves its state through it and continues from a resumed one.
pub fn dqn(
    inputs: &DqnInputs<'_>,
    cfg: &DqnConfig,
    seed: u64,
    device: &Device,
    mut ckpt: Option<&mut Checkpointer>,
) -> Result<QNetwork> {
    let DqnInputs {
        data,
        labels,
        num_actions,
        variant,
        probe,
    } = *inputs;
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
    let mut opt = Adam::for_varmap(&vm, AdamConfig::new(cfg.lr, 0.0))?;
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
    let mut curve = TenthCurve::new(cfg.steps);
    let bar = progress::bar(cfg.steps as u64, "Q-learning");
    let mut first = 0;
    if let Some(st) = ckpt.as_deref_mut().and_then(|c| c.resumed(STAGE)) {
        first = st.step()? as usize;
        st.load_adam("adam", &mut opt)?;
        st.load_vars("target", &tvm)?;
        rng = st.get_rng("rng")?;
        let p: Progress = st.record("progress")?;
        curve = p.curve;
        for (i, at) in p.snapshot_steps.into_iter().enumerate() {
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
        let loss = dqn_step(
            &net,
            &target,
            &mut opt,
            &batch,
            cfg.gamma as f32,
            (lo, hi),
            &losses,
            device,
        )? as f64;
        if let Some(mean) = curve.push(step, loss) {
            log::debug!("Q-learning step {}: mean TD loss {mean:.4e}", step + 1);
            bar.set_message(format!("TD loss {mean:.2e}"));
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
                st.put_adam("adam", &opt)?;
                st.put_vars("target", &tvm)?;
                st.put_rng("rng", &rng)?;
                let progress = Progress {
                    curve: curve.clone(),
                    snapshot_steps: snapshots.iter().map(|(s, _)| *s).collect(),
                };
                st.set_record("progress", &progress)?;
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
        loss_curve: curve.means,
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
