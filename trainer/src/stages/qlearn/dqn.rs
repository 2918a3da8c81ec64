//! Deep Q-learning on labelled transitions: Double DQN and its offline variants (discrete
//! BCQ, CQL), and expectile value learning (IQL), with one-step or lambda-return targets.

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
    /// `Dqn`, `Bcq`, `Cql` or `Iql`.
    pub variant: QKind,
    /// Raw states whose V is recorded, and the networks kept, at `cfg.checkpoints` evenly
    /// spaced steps (for model selection).
    pub probe: Option<&'a [f32]>,
    /// The most each transition's next state can be worth ([`path_bound`]): with
    /// lambda-return targets, every bootstrap is clipped to it.
    pub bound: Option<&'a [f32]>,
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
    ckpt: Option<&mut Checkpointer>,
) -> Result<QNetwork> {
    dqn_group(inputs, cfg, &[seed], device, ckpt)?
        .pop()
        .context("deep Q-learning trained no network")
}

/// One Q-function of a group, with everything its training carries.
struct Member {
    vm: VarMap,
    online: Nets,
    tvm: VarMap,
    target: Nets,
    opt: Adam,
    rng: ChaCha8Rng,
    curve: TenthCurve,
    targets: Vec<f32>,
    snapshots: Vec<(usize, Vec<f32>)>,
    kept: Vec<(VarMap, Nets)>,
}

/// The checkpoint keys of member `m`: the first member's are unprefixed.
fn member_key(m: usize, key: &str) -> String {
    match m {
        0 => key.to_string(),
        m => format!("m{m}.{key}"),
    }
}

/// [`dqn`] for one Q-function per seed, trained step by step together. With lambda-return
/// targets (`cfg.lambda > 0`), each member's bootstrap at a target copy is the next
/// member's target Q at the label its own target Q prefers (Double DQN across members):
/// a maximum over the noisy estimates of near-equal labels is biased upwards by a part
/// of their noise at every copy, and an estimate from another network is not (one
/// member alone takes its own maximum; IQL's V takes none and stays its own). Each
/// member's minibatches follow its own seed, so a group of one is [`dqn`] with that seed.
pub fn dqn_group(
    inputs: &DqnInputs<'_>,
    cfg: &DqnConfig,
    seeds: &[u64],
    device: &Device,
    mut ckpt: Option<&mut Checkpointer>,
) -> Result<Vec<QNetwork>> {
    let DqnInputs {
        data,
        labels,
        num_actions,
        variant,
        probe,
        bound,
    } = *inputs;
    if !matches!(variant, QKind::Dqn | QKind::Bcq | QKind::Cql | QKind::Iql) {
        bail!("deep Q-learning variant must be dqn, bcq, cql or iql");
    }
    if !(0.0..=1.0).contains(&cfg.lambda) {
        bail!("dqn.lambda must be in [0, 1], got {}", cfg.lambda);
    }
    if !(cfg.expectile > 0.0 && cfg.expectile < 1.0) {
        bail!("dqn.expectile must be in (0, 1), got {}", cfg.expectile);
    }
    if seeds.is_empty() {
        bail!("deep Q-learning needs at least one seed");
    }
    check_labels(labels, num_actions, data.len())?;
    let n = data.len();
    if bound.is_some_and(|b| b.len() != n) {
        bail!("a bound for each of the {n} transitions is needed");
    }
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
    let build = |vb: VarBuilder| -> Result<Nets> {
        let q = QModel::new(vb.pp("q"), d, image_ref, &cfg.hidden, num_actions)?;
        let imitation = match variant {
            QKind::Bcq => Some((
                QModel::new(vb.pp("imitation"), d, image_ref, &cfg.hidden, num_actions)?,
                cfg.bcq_threshold as f32,
            )),
            _ => None,
        };
        let value = match variant {
            QKind::Iql => Some(QModel::new(vb.pp("v"), d, image_ref, &cfg.hidden, 1)?),
            _ => None,
        };
        Ok(Nets {
            q,
            imitation,
            value,
        })
    };
    let mut members = vec![];
    for &seed in seeds {
        let (vm, vb) = nn::new_varmap(device);
        let online = build(vb)?;
        nn::init_vars(&vm, seed)?;
        let (tvm, tvb) = nn::new_varmap(device);
        let target = build(tvb)?;
        nn::copy_vars(&vm, &tvm)?;
        let opt = Adam::for_varmap(&vm, AdamConfig::new(cfg.lr, 0.0))?;
        members.push(Member {
            vm,
            online,
            tvm,
            target,
            opt,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x6471_6e00),
            curve: TenthCurve::new(cfg.steps),
            targets: vec![],
            snapshots: vec![],
            kept: vec![],
        });
    }
    // Q-learning runs in its own units (`DqnConfig::return_scale`); every value leaves
    // this function in the data's.
    let (lo, hi) = return_bounds(data, cfg.gamma);
    let scale = cfg.reward_factor((lo, hi));
    let (lo, hi) = (lo * scale, hi * scale);
    let rewards: Vec<f32> = data.rewards.iter().map(|&r| r * scale).collect();
    let bound: Option<Vec<f32>> = bound.map(|b| b.iter().map(|&u| u * scale).collect());
    // The conservative term's gradient does not grow with the scale of Q, the TD term's
    // does: `cql_alpha` weighs it against returns of at most 1, and in units where they
    // reach `return_scale` it weighs that much more.
    let cql_alpha = match variant {
        QKind::Cql if cfg.return_scale > 0.0 => (cfg.cql_alpha * cfg.return_scale) as f32,
        QKind::Cql => cfg.cql_alpha as f32,
        _ => 0.0,
    };
    let network = |nets: &Nets| QNetwork {
        net: nets.q.clone(),
        mean: mean.clone(),
        std: std.clone(),
        obs_shape: data.obs_shape.clone(),
        loss_curve: vec![],
        imitation: nets.imitation.clone(),
        value: nets.value.clone(),
        checkpoints: vec![],
        snapshots: vec![],
    };
    // V of the probe states in the data's units.
    let probed = |nets: &Nets, p: &[f32]| -> Result<Vec<f32>> {
        let v = network(nets).values(p, device)?;
        Ok(v.into_iter().map(|v| v / scale).collect())
    };
    // Networks of their own, for a copy of the online ones kept at a checkpoint.
    let fresh = || -> Result<(VarMap, Nets)> {
        let (svm, svb) = nn::new_varmap(device);
        Ok((svm, build(svb)?))
    };
    // Lambda-returns: targets of every transition, recomputed from the target networks.
    let traces = (cfg.lambda > 0.0).then(|| Traces::of(data, scale));
    let refresh = |members: &mut [Member]| -> Result<()> {
        let Some(t) = &traces else {
            return Ok(());
        };
        let g = members.len();
        for m in 0..g {
            let own = network(&members[m].target);
            let boot = if g == 1 {
                bootstrap_values(&own, None, &inputs, device)?
            } else {
                let next = network(&members[(m + 1) % g].target);
                bootstrap_values(&own, Some(&next), &inputs, device)?
            };
            members[m].targets = t.returns(
                data,
                &boot,
                bound.as_deref(),
                cfg.gamma as f32,
                cfg.lambda as f32,
                (lo, hi),
            );
        }
        Ok(())
    };
    let every = (cfg.steps / cfg.checkpoints.max(1)).max(1);
    let bs = cfg.batch_size.min(n).max(1);
    let (mut bs_s, mut bs_s2) = (vec![0f32; bs * d], vec![0f32; bs * d]);
    let mut bs_a = vec![0u32; bs];
    let (mut bs_r, mut bs_t) = (vec![0f32; bs], vec![false; bs]);
    let mut bs_y = vec![0f32; bs];
    let bar = progress::bar(cfg.steps as u64, "Q-learning");
    let mut first = 0;
    if let Some(st) = ckpt.as_deref_mut().and_then(|c| c.resumed(STAGE)) {
        first = st.step()? as usize;
        for (m, mb) in members.iter_mut().enumerate() {
            let key = |k: &str| member_key(m, k);
            st.load_adam(&key("adam"), &mut mb.opt)?;
            st.load_vars(&key("target"), &mb.tvm)?;
            mb.rng = st.get_rng(&key("rng"))?;
            let p: Progress = st.record(&key("progress"))?;
            mb.curve = p.curve;
            for (i, at) in p.snapshot_steps.into_iter().enumerate() {
                let (svm, nets) = fresh()?;
                st.load_vars(&key(&format!("kept.{i}")), &svm)?;
                // The probe's V follows from the kept networks, as when it was first taken.
                if let Some(p) = probe {
                    mb.snapshots.push((at, probed(&nets, p)?));
                }
                mb.kept.push((svm, nets));
            }
        }
        bar.set_position(first as u64);
    }
    refresh(&mut members)?;
    for step in first..cfg.steps {
        if step > 0 && step % cfg.target_update.max(1) == 0 {
            for mb in &members {
                nn::copy_vars(&mb.vm, &mb.tvm)?;
            }
            refresh(&mut members)?;
        }
        for mb in members.iter_mut() {
            for j in 0..bs {
                let i = mb.rng.random_range(0..n);
                inputs.fill(i, false, &mut bs_s[j * d..(j + 1) * d]);
                if traces.is_none() {
                    inputs.fill(i, true, &mut bs_s2[j * d..(j + 1) * d]);
                }
                bs_a[j] = labels[i];
                bs_r[j] = rewards[i];
                bs_t[j] = data.terminals[i];
                if let Some(&y) = mb.targets.get(i) {
                    bs_y[j] = y;
                }
            }
            let batch = Batch {
                s: &bs_s,
                s2: &bs_s2,
                a: &bs_a,
                r: &bs_r,
                terminal: &bs_t,
                targets: traces.as_ref().map(|_| bs_y.as_slice()),
            };
            let (online, target) = (&mb.online, &mb.target);
            let loss = match &online.value {
                Some(v) => iql_step(
                    (&online.q, v),
                    (&target.q, target.value.as_ref().unwrap_or(v)),
                    &mut mb.opt,
                    &batch,
                    cfg.gamma as f32,
                    (lo, hi),
                    cfg.expectile as f32,
                    device,
                )?,
                None => {
                    let losses = Losses {
                        imitation: online.imitation.as_ref().map(|(m, t)| (m, *t)),
                        cql_alpha,
                    };
                    dqn_step(
                        &online.q,
                        &target.q,
                        &mut mb.opt,
                        &batch,
                        cfg.gamma as f32,
                        (lo, hi),
                        &losses,
                        device,
                    )?
                }
            } as f64
                / f64::from(scale * scale);
            if let Some(mean) = mb.curve.push(step, loss) {
                log::debug!("Q-learning step {}: mean TD loss {mean:.4e}", step + 1);
                bar.set_message(format!("TD loss {mean:.2e}"));
            }
            if let Some(p) = probe {
                if (step + 1) % every == 0 {
                    mb.snapshots.push((step + 1, probed(&mb.online, p)?));
                    let (svm, nets) = fresh()?;
                    nn::copy_vars(&mb.vm, &svm)?;
                    mb.kept.push((svm, nets));
                }
            }
        }
        bar.inc(1);
        if let Some(c) = ckpt.as_deref_mut() {
            let done = (step + 1) as u64;
            if step + 1 < cfg.steps && c.due(STAGE, done) {
                let mut st = State::default();
                for (m, mb) in members.iter().enumerate() {
                    let key = |k: &str| member_key(m, k);
                    st.put_adam(&key("adam"), &mb.opt)?;
                    st.put_vars(&key("target"), &mb.tvm)?;
                    st.put_rng(&key("rng"), &mb.rng)?;
                    let progress = Progress {
                        curve: mb.curve.clone(),
                        snapshot_steps: mb.snapshots.iter().map(|(s, _)| *s).collect(),
                    };
                    st.set_record(&key("progress"), &progress)?;
                    for (i, (svm, _)) in mb.kept.iter().enumerate() {
                        st.put_vars(&key(&format!("kept.{i}")), svm)?;
                    }
                }
                c.save(STAGE, done, st)?;
            }
        }
    }
    bar.finish_and_clear();
    let unscaled = |nets: &Nets| -> Result<QNetwork> { Ok(network(&nets.in_units(1.0 / scale)?)) };
    members
        .into_iter()
        .map(|mb| {
            let mut out = unscaled(&mb.online)?;
            out.loss_curve = mb.curve.means;
            out.checkpoints = mb.snapshots;
            out.snapshots = mb
                .kept
                .iter()
                .map(|(_, nets)| unscaled(nets))
                .collect::<Result<_>>()?;
            Ok(out)
        })
        .collect()
}

/// The networks one variant trains: Q, and BCQ's imitation or IQL's value network.
struct Nets {
    q: QModel,
    imitation: Option<(QModel, f32)>,
    value: Option<QModel>,
}

impl Nets {
    /// These networks with every value multiplied by `factor` (the imitation network's
    /// logits are not values).
    fn in_units(&self, factor: f32) -> Result<Nets> {
        Ok(Nets {
            q: self.q.scaled(factor)?,
            imitation: self.imitation.clone(),
            value: self.value.as_ref().map(|v| v.scaled(factor)).transpose()?,
        })
    }
}

/// Which transition continues each one in the data: row `i + 1`, when it starts where
/// row `i` ended and no terminal or timeout lies between them; and the factor of the
/// units Q-learning learns in.
struct Traces {
    continues: Vec<bool>,
    scale: f32,
}

impl Traces {
    fn of(data: &Dataset, scale: f32) -> Self {
        let n = data.len();
        let continues = (0..n).map(|i| data.continues(i)).collect();
        Traces { continues, scale }
    }

    /// Lambda-returns of every transition: G_i = r_i + gamma * [(1 - lambda) B_i +
    /// lambda G_{i+1}] along the data's trajectories, G_i = r_i + gamma B_i where a
    /// trajectory breaks, r_i at a terminal (the data's reward in Q-learning's units);
    /// `boot` holds B_i, the value of row i's next observation, clipped to `bound`. Each
    /// G is clamped to the possible returns.
    fn returns(
        &self,
        data: &Dataset,
        boot: &[f32],
        bound: Option<&[f32]>,
        gamma: f32,
        lambda: f32,
        (lo, hi): (f32, f32),
    ) -> Vec<f32> {
        let n = data.len();
        let mut g = vec![0f32; n];
        for i in (0..n).rev() {
            let b = bound.map_or(boot[i], |u| boot[i].min(u[i]));
            let tail = if data.terminals[i] {
                0.0
            } else if self.continues[i] {
                // The data's continuation counts only where it beats the bootstrap: a
                // realised return is a lower bound of what the state is worth, and a
                // behaviour that wanders off a reward must not drag V below the best
                // action's value.
                (1.0 - lambda) * b + lambda * b.max(g[i + 1])
            } else {
                b
            };
            g[i] = (data.rewards[i] * self.scale + gamma * tail).clamp(lo, hi);
        }
        g
    }
}

/// V of every transition's next observation under `net` (max over Q, BCQ's allowed
/// maximum, or IQL's V), in chunks converted from the store; with `judge`, the label
/// `net` prefers is valued by `judge`'s Q instead (Double DQN).
fn bootstrap_values(
    net: &QNetwork,
    judge: Option<&QNetwork>,
    inputs: &Inputs,
    device: &Device,
) -> Result<Vec<f32>> {
    let (n, d) = (inputs.len(), inputs.dim());
    let mut out = Vec::with_capacity(n);
    let chunk = ((1 << 20) / d.max(1)).clamp(1, 8192);
    let mut x = vec![];
    for start in (0..n).step_by(chunk) {
        let end = (start + chunk).min(n);
        x.resize((end - start) * d, 0.0);
        for i in start..end {
            inputs.fill(i, true, &mut x[(i - start) * d..(i - start + 1) * d]);
        }
        let x = std::mem::take(&mut x);
        out.extend(match judge {
            None => net.values_standardised(x, device)?,
            Some(judge) => net.values_judged_by(judge, x, device)?,
        });
    }
    Ok(out)
}

/// A minibatch of standardised transitions, row-major.
pub struct Batch<'a> {
    pub s: &'a [f32],
    pub s2: &'a [f32],
    pub a: &'a [u32],
    pub r: &'a [f32],
    pub terminal: &'a [bool],
    /// Precomputed targets (lambda-returns), in place of one-step bootstraps.
    pub targets: Option<&'a [f32]>,
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
    // Precomputed (lambda-return) targets need no pass over the next states.
    let y: Vec<f32> = match b.targets {
        Some(t) => t.to_vec(),
        None => one_step_targets(net, target, b, gamma, (lo, hi), extra, device)?,
    };
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

/// Double-DQN targets r + gamma Q_target(s', argmax_a Q(s', a)), the argmax over BCQ's
/// allowed labels when it has an imitation network; r at a terminal; clamped to the
/// possible returns.
fn one_step_targets(
    net: &QModel,
    target: &QModel,
    b: &Batch,
    gamma: f32,
    (lo, hi): (f32, f32),
    extra: &Losses,
    device: &Device,
) -> Result<Vec<f32>> {
    let bs = b.a.len();
    let d = b.s2.len() / bs;
    let s2 = Tensor::from_slice(b.s2, (bs, d), device)?;
    let online_next: Vec<f32> = net.forward(&s2)?.flatten_all()?.to_vec1()?;
    let target_next: Vec<f32> = target.forward(&s2)?.flatten_all()?.to_vec1()?;
    let k = online_next.len() / bs;
    let logits_next: Option<Vec<f32>> = match extra.imitation {
        Some((m, _)) => Some(m.forward(&s2)?.flatten_all()?.to_vec1()?),
        None => None,
    };
    Ok((0..bs)
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
        .collect())
}

/// One IQL step: Q(s, a) regresses on r + gamma V_target(s') (or the batch's precomputed
/// targets), and V(s) on the `expectile` of the target network's Q(s, a) over the data's
/// labels (the asymmetric squared loss |tau - 1(u < 0)| u^2, u = Q(s, a) - V(s)).
#[allow(clippy::too_many_arguments)]
pub fn iql_step(
    (q, v): (&QModel, &QModel),
    (target_q, target_v): (&QModel, &QModel),
    opt: &mut Adam,
    b: &Batch,
    gamma: f32,
    (lo, hi): (f32, f32),
    expectile: f32,
    device: &Device,
) -> Result<f32> {
    let bs = b.a.len();
    let d = b.s.len() / bs;
    let s = Tensor::from_slice(b.s, (bs, d), device)?;
    let y: Vec<f32> = match b.targets {
        Some(t) => t.to_vec(),
        None => {
            let s2 = Tensor::from_slice(b.s2, (bs, d), device)?;
            let v_next: Vec<f32> = target_v.forward(&s2)?.flatten_all()?.to_vec1()?;
            (0..bs)
                .map(|j| {
                    let boot = if b.terminal[j] {
                        0.0
                    } else {
                        gamma * v_next[j]
                    };
                    (b.r[j] + boot).clamp(lo, hi)
                })
                .collect()
        }
    };
    let y = Tensor::from_vec(y, (bs, 1), device)?;
    let a = Tensor::from_slice(b.a, (bs, 1), device)?;
    let q_sa = q.forward(&s)?.gather(&a, 1)?;
    let q_loss = ((&q_sa - y)?.sqr()?.mean_all()? * 0.5)?;
    let tq_sa = target_q.forward(&s)?.gather(&a, 1)?.detach();
    let u = (tq_sa - v.forward(&s)?)?;
    // |tau - 1(u < 0)|: tau where u >= 0, 1 - tau below.
    let below = u.lt(0f32)?.to_dtype(candle_core::DType::F32)?;
    let w = ((below * (1.0 - 2.0 * expectile as f64))? + expectile as f64)?;
    let v_loss = (w * u.sqr()?)?.mean_all()?;
    let loss = (q_loss + v_loss)?;
    let value = loss.to_scalar::<f32>()?;
    opt.backward_step(&loss)?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two trajectories: 0 -> 1 -> 2 (rewarded, terminal), then 3 -> 4 cut by a timeout.
    #[test]
    fn lambda_returns_follow_the_data() {
        let d = Dataset {
            obs_shape: vec![1],
            observations: vec![0.0, 1.0, 2.0, 3.0, 4.0].into(),
            next_observations: vec![1.0, 2.0, 9.0, 4.0, 5.0].into(),
            rewards: vec![0.0, 0.0, 1.0, 0.0, 0.0],
            terminals: vec![false, false, true, false, false],
            timeouts: Some(vec![false, false, false, false, true]),
            next_missing: None,
            actions: None,
        };
        let t = Traces::of(&d, 1.0);
        assert_eq!(t.continues, [true, true, false, true, false]);
        let boot = [0.5, 0.25, 7.0, 0.5, 0.5];
        let g = t.returns(&d, &boot, None, 0.5, 0.5, (0.0, 1.0));
        // G2 = 1 (terminal). G1: the data's continuation (1) beats the bootstrap (0.25):
        // 0.5 * (0.5 * 0.25 + 0.5 * 1). G0: the bootstrap (0.5) beats G1 (0.3125):
        // 0.5 * (0.5 * 0.5 + 0.5 * 0.5).
        assert_eq!(g[2], 1.0);
        assert!((g[1] - 0.3125).abs() < 1e-6, "{g:?}");
        assert!((g[0] - 0.25).abs() < 1e-6, "{g:?}");
        // A timeout bootstraps: G4 = 0.5 * 0.5; G3 keeps its better bootstrap.
        assert!(
            (g[4] - 0.25).abs() < 1e-6 && (g[3] - 0.25).abs() < 1e-6,
            "{g:?}"
        );
        // With lambda 0 the targets are one-step.
        let one = t.returns(&d, &boot, None, 0.5, 0.0, (0.0, 1.0));
        assert!((one[0] - 0.25).abs() < 1e-6 && (one[1] - 0.125).abs() < 1e-6);
        // A bound clips each bootstrap, never the data's own continuation: G0's bootstrap
        // 0.5 -> 0.1 leaves G1 (0.3125) the better, 0.5 * (0.5 * 0.1 + 0.5 * 0.3125); G4
        // bootstraps from 0.2 alone.
        let bound = [0.1, 1.0, 0.0, 1.0, 0.2];
        let b = t.returns(&d, &boot, Some(&bound), 0.5, 0.5, (0.0, 1.0));
        assert!((b[0] - 0.103125).abs() < 1e-6, "{b:?}");
        assert_eq!((b[1], b[2]), (g[1], g[2]));
        assert!((b[4] - 0.1).abs() < 1e-6, "{b:?}");
    }
}
