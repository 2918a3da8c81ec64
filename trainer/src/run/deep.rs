//! Deep Q-learning of a labelled run: its Q-functions (an ensemble's members or two
//! seeds, trained side by side), the checkpoint and Q-function the checks prefer, the
//! exported V (fitted within the bound of the data's ways where it is a fit), again along
//! the trajectories where one-step targets fall short, and the agreement of Q-learning
//! on each half of the trajectories.

use super::config::{TrainConfig, ValueHead, Ways};
use super::record::{Candidate, Retargeted};
use super::train::{
    final_max_return, finish, near_max_shown, q_view, value_is_a_return, FIT_STATES,
};
use super::trust::{self, Evidence, Trust};
use crate::data::{paths, Dataset};
use crate::export::ValueModel;
use crate::stages::checkpoint::Checkpointer;
use crate::stages::labels::Labelled;
use crate::stages::qlearn::{self, DqnInputs, QKind, QNetwork};
use anyhow::{Context, Result};
use candle_core::Device;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// What deep Q-learning gave a run: the exported V's learning, its settings and verdict.
pub(super) struct DeepRun {
    pub(super) learned: Learned,
    /// The settings that trained it (those of a second Q-learning along the trajectories
    /// where that one was exported).
    pub(super) config: TrainConfig,
    pub(super) retargeted: Option<Retargeted>,
    pub(super) trust: Trust,
    pub(super) timings: Vec<(String, f64)>,
}

/// The ways through `data` as deep Q-learning with `cfg` sees it (`cfg.ignored_values`
/// held at zero), judged once for a run ([`TrainConfig::judged_ways`]); where they are
/// dropped, the log says why.
pub(super) fn judge_ways(data: &Dataset, cfg: &TrainConfig) -> Ways {
    match cfg.ignored_values.is_empty() {
        true => told(cfg.judged_ways(data)),
        false => told(cfg.judged_ways(&data.ignoring(&cfg.ignored_values))),
    }
}

/// `ways`, the log saying why where they were dropped.
fn told(ways: Ways) -> Ways {
    if let Ways::Dropped(a) = ways {
        log::info!(
            "no ways through the data: joined where states lie near, they rank the steps of \
             its own rewarded trajectories at {a:.2} (corrected for the data, as \
             trajectory_ranking is; below {}), so a state does not reach the states near it \
             as a step does (a body that must swing to climb)",
            paths::MIN_TRAJECTORY_AGREEMENT
        );
    }
    ways
}

/// Deep Q-learning of a labelled run with `cfg`: on the data with `cfg.ignored_values`
/// held at zero, again along the trajectories where one-step targets fall short
/// (`retry_along_trajectories`), judged by the checks (`halves_agree` too); the exported
/// networks read the ignored values as zero whatever a state holds there. `ways` are
/// those [`judge_ways`] found for `data` and `cfg`, or `None` to find them here.
#[allow(clippy::too_many_arguments)]
pub(super) fn deep_run(
    data: &Dataset,
    labelled: &Labelled,
    kept: Option<&(Vec<usize>, Vec<u32>)>,
    (variant, info): (QKind, &BTreeMap<String, String>),
    cfg: &TrainConfig,
    ways: Option<&Ways>,
    device: &Device,
    ckpt: Option<&mut Checkpointer>,
) -> Result<DeepRun> {
    let zeroed;
    let data = match cfg.ignored_values.is_empty() {
        true => data,
        false => {
            zeroed = data.ignoring(&cfg.ignored_values);
            &zeroed
        }
    };
    let t = Instant::now();
    let judged;
    let ways = match ways {
        Some(w) => w,
        None => {
            judged = told(cfg.judged_ways(data));
            &judged
        }
    };
    let (subset, qlabels, qk) = q_view(data, labelled, kept, cfg);
    let qdata = subset.as_ref().unwrap_or(data);
    let mut timings = vec![];
    // The data's ways: evidence for the trust checks, and the bound of Q-learning,
    // the same for each Q-learning of the run.
    let traced = trust::Traced::with_ways(data, ways.kept().cloned());
    timings.push(("ways through the data".into(), t.elapsed().as_secs_f64()));
    let deep = Deep {
        data,
        subset: subset.as_ref().filter(|_| kept.is_some()),
        qdata,
        qlabels: &qlabels,
        qk,
        labelled,
        variant,
        info,
        traced: &traced,
    };
    let first = deep.learn(cfg, device, ckpt)?;
    timings.extend(first.timings.iter().cloned());
    // One-step targets whose V stays below the data's own returns: the run learns
    // again along the trajectories (or, without the retry, says to: `advice`).
    let short = cfg.dqn.lambda == 0.0
        && first
            .trust
            .failed()
            .any(|c| c.name == trust::BELOW_DATA_RETURNS);
    let (learned, config, retargeted) = if short && cfg.retry_along_trajectories {
        let along = cfg.along_trajectories(data);
        log::info!(
            "one-step targets left V below the data's own returns: Q-learning \
             again along the data's trajectories (`dqn.lambda = 1`, \
             `dqn.target_update = {}`, `dqn.gamma = {}`)",
            along.dqn.target_update,
            along.dqn.gamma
        );
        let second = deep.learn(&along, device, None)?;
        let exported = trust::preferred(&second.trust, &first.trust);
        let record = retargeted(&first.trust, &second.trust, &along, exported);
        log::info!("{record}");
        timings.extend(
            second
                .timings
                .iter()
                .map(|(k, v)| (format!("again: {k}"), *v)),
        );
        match exported {
            true => (second, along, Some(record)),
            false => (first, cfg.clone(), Some(record)),
        }
    } else {
        (first, cfg.clone(), None)
    };
    let mut trust = learned.trust.clone();
    if config.halves_agree && !data.is_image() {
        let t = Instant::now();
        if let Some(check) = deep.halves_agree(&config, device)? {
            log::info!("{}: {:.3}", check.name, check.value);
            trust = trust.with(check);
        }
        timings.push((
            "trust: Q-learning on each half of the trajectories".into(),
            t.elapsed().as_secs_f64(),
        ));
    }
    let mut learned = learned;
    for &j in &cfg.ignored_values {
        // Trained on zeros there, so a zero scale changes no value the checks saw.
        learned.model.mean[j] = 0.0;
        learned.model.scale[j] = 0.0;
        learned.qnet.mean[j] = 0.0;
        learned.qnet.std[j] = f32::INFINITY;
    }
    Ok(DeepRun {
        learned,
        config,
        retargeted,
        trust,
        timings,
    })
}

/// What deep Q-learning works on: the data, its labels, and what Q-learning sees of them.
#[derive(Clone, Copy)]
struct Deep<'a> {
    data: &'a Dataset,
    /// The rows of the most used labels, where Q-learning keeps only those.
    subset: Option<&'a Dataset>,
    qdata: &'a Dataset,
    qlabels: &'a [u32],
    qk: usize,
    labelled: &'a Labelled,
    variant: QKind,
    info: &'a BTreeMap<String, String>,
    /// The data's ways ([`trust::Traced`]), measured once for every Q-learning of a run.
    traced: &'a trust::Traced,
}

/// One deep Q-learning of a run, judged by the checks.
pub(super) struct Learned {
    pub(super) model: ValueModel,
    /// The exported network: the Q-function the checks prefer, or the fit of a mean.
    pub(super) qnet: QNetwork,
    pub(super) err: Option<f64>,
    pub(super) bounded: Option<usize>,
    /// Where the settings bound V by the data's ways and the ways do not stitch its
    /// trajectories ([`paths::Steps::stitch`]): the share that do.
    pub(super) unstitched: Option<f64>,
    pub(super) q_loss: Vec<f32>,
    pub(super) timings: Vec<(String, f64)>,
    pub(super) trust: Trust,
    pub(super) candidates: Vec<Candidate>,
}

impl Deep<'_> {
    /// Trains the Q-functions of `cfg` and builds the exported model from them: an
    /// ensemble's mean at the checkpoint the checks prefer, or of two seeds the one they
    /// prefer.
    fn learn(
        &self,
        cfg: &TrainConfig,
        device: &Device,
        ckpt: Option<&mut Checkpointer>,
    ) -> Result<Learned> {
        let Deep {
            data,
            subset,
            qdata,
            qlabels,
            qk,
            labelled,
            variant,
            info,
            traced,
        } = *self;
        let mut info = info.clone();
        let mut timings = vec![];
        let t = Instant::now();
        let name = variant.name();
        let probe = probe_states(qdata);
        let bound = match (subset, cfg.path_bound && cfg.dqn.lambda > 0.0) {
            (_, false) => None,
            (None, true) => bootstrap_bound(qdata, traced.paths.as_ref(), cfg),
            (Some(d), true) => bootstrap_bound(qdata, cfg.ways(d).as_ref(), cfg),
        };
        timings.push(("bound of the bootstraps".into(), t.elapsed().as_secs_f64()));
        let t = Instant::now();
        let inputs = DqnInputs {
            data: qdata,
            labels: qlabels,
            num_actions: qk,
            variant,
            probe: Some(&probe),
            bound: bound.as_deref(),
        };
        let members = match (cfg.ensemble, cfg.second_seed) {
            (0, _) => anyhow::bail!("`ensemble` must be at least 1"),
            (1, true) => 2,
            (k, _) => k,
        };
        let groups = member_groups(cfg, members).len();
        let jobs = crate::util::parallel::jobs(device).min(groups);
        let nets = train_members(&inputs, cfg, members, jobs, device, ckpt)?;
        timings.push((
            match members {
                1 => format!("Q-learning ({name})"),
                k if groups < k => {
                    format!("Q-learning ({name}, {k} seeds in {groups} halves, {jobs} at a time)")
                }
                k => format!("Q-learning ({name}, {k} seeds, {jobs} at a time)"),
            },
            t.elapsed().as_secs_f64(),
        ));
        info.insert("q".to_string(), name.to_string());
        let t = Instant::now();
        let all: Vec<usize> = (0..data.len()).collect();
        let max_return = qlearn::return_bounds(data, cfg.dqn.gamma).1 as f64;
        let returns = trust::data_returns(data, cfg.dqn.gamma);
        let shown_near_max = near_max_shown(&returns, traced, cfg.dqn.gamma, max_return);
        let judge = |values: &[f32],
                     pair: Option<(&[f32], &[f32])>,
                     judged: &[usize],
                     at: Option<usize>,
                     max_return| {
            let last = last_snapshots(&nets, judged, at);
            trust::assess(&Evidence {
                data,
                labels: &labelled.labels,
                num_actions: labelled.num_actions,
                values,
                pair,
                last_snapshots: last.as_ref().map(|(a, b)| (a.as_slice(), b.as_slice())),
                max_return,
                shown_near_max,
                returns: value_is_a_return(cfg).then_some(returns.as_slice()),
                traced,
            })
        };
        let values_of = |net: &QNetwork| net.values_of(data, &all, device);
        // Seconds spent fitting V for export, which the trust checks' time excludes.
        let mut exporting = 0.0;
        // States whose fitted V was lowered to the bound.
        let mut bounded = None;
        // Every fitted V keeps within the bound of the data's ways.
        let mut fit = |v: &[f32]| -> Result<(QNetwork, ValueModel, f64)> {
            let t = Instant::now();
            let mut target = v.to_vec();
            bounded = fit_within_bound(&mut target, traced, cfg, max_return);
            let (fitted, err) = fit_v(&nets[0], data, &target, cfg, device)?;
            let model = ValueModel::from_qnetwork(&fitted, cfg.dqn.gamma, info.clone())?;
            let secs = t.elapsed().as_secs_f64();
            timings.push(("export (fit one network to V)".into(), secs));
            exporting += secs;
            Ok((fitted, model, err))
        };
        // An ensemble's exported V is a network fitted to its members' mean.
        let mut fitted_mean = None;
        // What the exported V is compared with: another seed's V, or (an ensemble) the
        // means of its two halves.
        let mut candidates = vec![];
        let mut chosen_at = None;
        let (model, err, values, judged, agreement): (_, _, _, Vec<usize>, _) = if cfg.ensemble >= 2
        {
            let judged: Vec<usize> = (0..members).collect();
            // Further target updates can inflate V, or let it leak through walls
            // (docs/trust.md): the checkpoint whose mean V the checks prefer
            // (`Trust::merit`) is exported, the later one on ties.
            let count = nets.iter().map(|n| n.snapshots.len()).min().unwrap_or(0);
            let mut best: Option<(usize, Trust, Vec<Vec<f32>>)> = None;
            for c in 0..count {
                let member_values = nets
                    .iter()
                    .map(|n| values_of(&n.snapshots[c]))
                    .collect::<Result<Vec<_>>>()?;
                let (a, b) = member_values.split_at(members / 2);
                let (a, b) = (mean_of(a), mean_of(b));
                let mean = mean_of(&member_values);
                let t = judge(&mean, Some((&a, &b)), &judged, Some(c), max_return);
                candidates.push(Candidate {
                    step: nets[0].checkpoints[c].0,
                    checks_passed: t.passed(),
                    checks_failed: t.failed().count(),
                    path_ranking: t.value(trust::PATH_RANKING),
                    trajectory_ranking: t.value(trust::TRAJECTORY_RANKING),
                    chosen: false,
                });
                if best.as_ref().is_none_or(|(_, b, _)| t.merit() >= b.merit()) {
                    best = Some((c, t, member_values));
                }
            }
            let member_values = match best {
                Some((c, _, values)) => {
                    candidates[c].chosen = true;
                    chosen_at = Some(c);
                    log::info!(
                        "the checks prefer V at step {} of {}",
                        candidates[c].step,
                        cfg.dqn.steps
                    );
                    values
                }
                None => nets.iter().map(values_of).collect::<Result<Vec<_>>>()?,
            };
            let (a, b) = member_values.split_at(members / 2);
            let halves = (mean_of(a), mean_of(b));
            let target = mean_of(&member_values);
            let (net, model, err) = fit(&target)?;
            fitted_mean = Some(net);
            let values = model.values_of(data, device)?;
            log::info!(
                "the mean V of {members} Q-functions fitted by one network: largest \
                     error {err:.2e}, ranking of the data's states as the mean's at \
                     Spearman {:.3}",
                crate::util::stats::spearman(&as_f64(&values), &as_f64(&target))
            );
            (model, Some(err), values, judged, Agreement::Halves(halves))
        } else {
            let first = &nets[0];
            let (model, err) = if first.imitation.is_some() {
                // BCQ's V is a max over the actions its imitation network allows,
                // which the format's max-Q head cannot express: V itself is fitted.
                let (_, model, err) = fit(&values_of(first)?)?;
                (model, Some(err))
            } else {
                (
                    ValueModel::from_qnetwork(first, cfg.dqn.gamma, info.clone())?,
                    None,
                )
            };
            let values = model.values_of(data, device)?;
            match (nets.get(1), err) {
                // Oracle-free selection between the two Q-functions: the one whose
                // V the checks prefer is exported (BCQ's exported V is a fitted
                // network, which only the first gets).
                (Some(second), None) => {
                    let other = values_of(second)?;
                    let pair = Some((values.as_slice(), other.as_slice()));
                    let keep = judge(&values, pair, &[0], None, max_return);
                    let pair = Some((other.as_slice(), values.as_slice()));
                    let swap = judge(&other, pair, &[1], None, max_return);
                    if trust::preferred(&swap, &keep) {
                        let info = model.info.clone();
                        let model = ValueModel::from_qnetwork(second, cfg.dqn.gamma, info)?;
                        (model, None, other, vec![1], Agreement::Other(values))
                    } else {
                        (model, None, values, vec![0], Agreement::Other(other))
                    }
                }
                (Some(second), err) => {
                    let other = values_of(second)?;
                    (model, err, values, vec![0], Agreement::Other(other))
                }
                (None, err) => (model, err, values, vec![0], Agreement::None),
            }
        };
        let (mut model, values) = if cfg.head != ValueHead::MaxQ || cfg.density.enabled {
            let model = finish(model, data, cfg, device)?;
            let values = model.values_of(data, device)?;
            (model, values)
        } else {
            (model, values)
        };
        let pair = match &agreement {
            Agreement::None => None,
            Agreement::Other(other) => Some((values.as_slice(), other.as_slice())),
            Agreement::Halves((a, b)) => Some((a.as_slice(), b.as_slice())),
        };
        let final_max = final_max_return(cfg, max_return);
        let mut trust = judge(&values, pair, &judged, chosen_at, final_max);
        if let Some(c) = chosen_at {
            let failed: Vec<usize> = candidates.iter().map(|k| k.checks_failed).collect();
            trust = trust.with(trust::choice_holds(&failed, c));
        }
        timings.push(("trust checks".into(), t.elapsed().as_secs_f64() - exporting));
        let seeds: Vec<String> = judged
            .iter()
            .map(|&j| member_seed(cfg.seed, j).to_string())
            .collect();
        model.info.insert("q_seed".to_string(), seeds.join(","));
        let exported = nets
            .into_iter()
            .nth(judged.first().copied().unwrap_or(0))
            .context("no Q-function was trained")?;
        let unstitched = (traced.paths.as_ref())
            .filter(|s| cfg.path_bound && cfg.dqn.lambda > 0.0 && !s.stitch())
            .map(|s| s.stitched);
        Ok(Learned {
            model,
            q_loss: exported.loss_curve.clone(),
            qnet: fitted_mean.unwrap_or(exported),
            err,
            bounded,
            unstitched,
            timings,
            trust,
            candidates,
        })
    }

    /// The [`trust::halves_agree`] check of a run's Q-learning `cfg`: one Q-function on
    /// each half of [`trajectory_halves`], both trained as the run's own are (the same
    /// steps, each half's own ways bounding its bootstraps), V over all the data's states.
    /// `None` where the data is too short to halve or a half holds no reward.
    fn halves_agree(&self, cfg: &TrainConfig, device: &Device) -> Result<Option<trust::Check>> {
        let Some((halves, pieces)) = trajectory_halves(self.qdata) else {
            return Ok(None);
        };
        let cost = self.traced.baseline;
        let rewarded = |rows: &Vec<usize>| {
            rows.iter()
                .any(|&i| trust::rewarded(self.qdata.rewards[i], cost))
        };
        if !halves.iter().all(rewarded) {
            return Ok(None);
        }
        let all: Vec<usize> = (0..self.data.len()).collect();
        let m = cfg.halves_members.max(1);
        let seeds: Vec<u64> = (0..2 * m).map(|j| member_seed(cfg.seed, j)).collect();
        let learn = |h: &usize| -> Result<Vec<f32>> {
            let rows = &halves[*h];
            let part = self.qdata.select(rows);
            let labels: Vec<u32> = rows.iter().map(|&i| self.qlabels[i]).collect();
            let bound = match cfg.path_bound && cfg.dqn.lambda > 0.0 {
                true => bootstrap_bound(&part, cfg.ways(&part).as_ref(), cfg),
                false => None,
            };
            let inputs = DqnInputs {
                data: &part,
                labels: &labels,
                num_actions: self.qk,
                variant: self.variant,
                probe: None,
                bound: bound.as_deref(),
            };
            // Half 0 keeps the seeds it had with one member (0, then 2, 4, ...), half 1 too
            // (1, 3, ...).
            let own: Vec<u64> = (0..m).map(|j| seeds[2 * j + *h]).collect();
            let nets = crate::util::progress::hidden(|| {
                qlearn::dqn_group(&inputs, &cfg.dqn, &own, device, None)
            })?;
            anyhow::ensure!(!nets.is_empty(), "no Q-function was trained");
            let values = (nets.iter())
                .map(|net| net.values_of(self.data, &all, device))
                .collect::<Result<Vec<_>>>()?;
            Ok(mean_of(&values))
        };
        let jobs = crate::util::parallel::jobs(device).min(2);
        let values = crate::util::parallel::map(&[0, 1], jobs, learn)?;
        let rho = crate::util::stats::spearman(&as_f64(&values[0]), &as_f64(&values[1]));
        Ok(Some(trust::halves_agree(
            rho,
            pieces,
            &crate::data::contexts::goals(self.data),
        )))
    }
}

/// Pieces a trajectory is cut into at the least: a log of one long trajectory still
/// halves into many pieces, so that neither half holds one stretch of time.
const HALF_PIECES: usize = 20;

/// The data's rows in two halves by trajectory: the pieces of its trajectories (where a
/// row does not continue into the next, [`Dataset::continues`]; a trajectory longer than
/// a [`HALF_PIECES`]th of the data cut into pieces that long), every other piece in
/// each half; and the number of pieces. `None` for fewer than `2 * HALF_PIECES` rows.
pub(super) fn trajectory_halves(data: &Dataset) -> Option<([Vec<usize>; 2], usize)> {
    let n = data.len();
    if n < 2 * HALF_PIECES {
        return None;
    }
    let longest = n.div_ceil(HALF_PIECES);
    let mut halves = [vec![], vec![]];
    let (mut piece, mut len) = (0, 0);
    for i in 0..n {
        halves[piece % 2].push(i);
        len += 1;
        if !data.continues(i) || len >= longest {
            piece += 1;
            len = 0;
        }
    }
    Some((halves, piece + usize::from(len > 0)))
}

/// Probe states whose V deep Q-learning records at each checkpoint.
const PROBE_STATES: usize = 2000;

/// About [`PROBE_STATES`] evenly spaced observations of `data`, raw and row-major: whose
/// V every checkpoint records, for the convergence check.
pub(super) fn probe_states(data: &Dataset) -> Vec<f32> {
    (0..data.len())
        .step_by((data.len() / PROBE_STATES).max(1))
        .flat_map(|i| data.obs_row(i).into_owned())
        .collect()
}

/// The most each bootstrap of deep Q-learning on `qdata` may be, from its ways through
/// the data ([`qlearn::path_bound`]); none without ways, or where they do not stitch its
/// trajectories ([`paths::Steps::stitch`]): where each way is its own trajectory's (each
/// episode with its own goal), it bounds only what that trajectory's controller did.
pub(super) fn bootstrap_bound(
    qdata: &Dataset,
    steps: Option<&paths::Steps>,
    cfg: &TrainConfig,
) -> Option<Vec<f32>> {
    let steps = steps?;
    if !steps.stitch() {
        log::info!(
            "no bound from the ways through the data: {:.0}% of them end at another reward \
             than their own trajectory's next (below {:.0}%), so each is its own \
             trajectory's, and the best controller may be faster",
            100.0 * steps.stitched,
            100.0 * paths::MIN_STITCHED
        );
        return None;
    }
    let with_way = steps.next.iter().filter(|k| k.is_finite()).count();
    log::info!(
        "bootstraps bounded by the ways through the data ({with_way} of {} next states have \
         one)",
        steps.next.len()
    );
    let max_return = qlearn::return_bounds(qdata, cfg.dqn.gamma).1;
    Some(qlearn::path_bound(
        &steps.next,
        cfg.dqn.gamma,
        max_return,
        qdata.reward_baseline(),
    ))
}

/// The seed of Q-function `j` of a run: the run's own seed for the first.
pub(super) fn member_seed(seed: u64, j: usize) -> u64 {
    seed ^ 0x5ec0_0d5e_u64.wrapping_mul(j as u64)
}

/// The Q-functions of a run that train together ([`qlearn::dqn_group`]): with
/// `cfg.cross_bootstrap`, each half of an ensemble (the halves the agreement check
/// compares stay independent); otherwise, and for a second seed, each one alone.
fn member_groups(cfg: &TrainConfig, members: usize) -> Vec<Vec<usize>> {
    if cfg.cross_bootstrap && cfg.ensemble >= 2 {
        let half = members / 2;
        [(0..half).collect(), (half..members).collect()]
            .into_iter()
            .filter(|g: &Vec<usize>| !g.is_empty())
            .collect()
    } else {
        (0..members).map(|j| vec![j]).collect()
    }
}

/// Deep Q-learning of `members` Q-functions on the same inputs, from the seeds
/// [`member_seed`], in the groups of [`member_groups`], `jobs` groups at a time; the
/// first group shows its progress and saves it through `ckpt`, the others run without
/// (a resumed run trains them again, to the same result).
fn train_members(
    inputs: &DqnInputs<'_>,
    cfg: &TrainConfig,
    members: usize,
    jobs: usize,
    device: &Device,
    ckpt: Option<&mut Checkpointer>,
) -> Result<Vec<QNetwork>> {
    let groups = member_groups(cfg, members);
    let seeds = |g: &[usize]| -> Vec<u64> { g.iter().map(|&j| member_seed(cfg.seed, j)).collect() };
    let next = AtomicUsize::new(1);
    let slots: Vec<Mutex<Option<Result<Vec<QNetwork>>>>> =
        groups.iter().map(|_| Mutex::new(None)).collect();
    let rest = || loop {
        let g = next.fetch_add(1, Ordering::Relaxed);
        if g >= groups.len() {
            break;
        }
        let r = crate::util::progress::hidden(|| {
            qlearn::dqn_group(inputs, &cfg.dqn, &seeds(&groups[g]), device, None)
        });
        for j in &groups[g] {
            log::info!("Q-function {} of {members} trained", j + 1);
        }
        if let Ok(mut slot) = slots[g].lock() {
            *slot = Some(r);
        }
    };
    let first = std::thread::scope(|scope| {
        for _ in 1..jobs.min(groups.len()) {
            scope.spawn(rest);
        }
        let first = qlearn::dqn_group(inputs, &cfg.dqn, &seeds(&groups[0]), device, ckpt);
        if first.is_ok() && groups.len() > 1 {
            for j in &groups[0] {
                log::info!("Q-function {} of {members} trained", j + 1);
            }
        }
        rest();
        first
    });
    let mut nets: Vec<Option<QNetwork>> = (0..members).map(|_| None).collect();
    for (j, net) in groups[0].iter().zip(first?) {
        nets[*j] = Some(net);
    }
    for (g, slot) in slots.into_iter().enumerate().skip(1) {
        let trained = slot
            .into_inner()
            .ok()
            .flatten()
            .with_context(|| format!("Q-functions {} did not finish", numbers(&groups[g])))?
            .with_context(|| format!("Q-functions {} of {members}", numbers(&groups[g])))?;
        for (j, net) in groups[g].iter().zip(trained) {
            nets[*j] = Some(net);
        }
    }
    nets.into_iter()
        .enumerate()
        .map(|(j, n)| {
            n.with_context(|| format!("Q-function {} of {members} was not trained", j + 1))
        })
        .collect()
}

/// Q-function indices as messages number them (from 1), e.g. "3, 4".
fn numbers(group: &[usize]) -> String {
    let n: Vec<String> = group.iter().map(|j| (j + 1).to_string()).collect();
    n.join(", ")
}

/// What the exported V is compared with by the agreement check.
enum Agreement {
    None,
    /// V of the other Q-function (two seeds).
    Other(Vec<f32>),
    /// The means of the ensemble's two halves.
    Halves((Vec<f32>, Vec<f32>)),
}

/// The element-wise mean of equally long value lists.
pub(super) fn mean_of(vs: &[Vec<f32>]) -> Vec<f32> {
    let n = vs.first().map_or(0, Vec::len);
    (0..n)
        .map(|i| vs.iter().map(|v| v[i]).sum::<f32>() / vs.len() as f32)
        .collect()
}

pub(super) fn as_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// V of the probe states at checkpoint `at` (default: the last) and the one before,
/// averaged over the Q-functions `judged` of `nets`.
fn last_snapshots(
    nets: &[QNetwork],
    judged: &[usize],
    at: Option<usize>,
) -> Option<(Vec<f32>, Vec<f32>)> {
    let count = judged.iter().map(|&j| nets[j].checkpoints.len()).min()?;
    let k = at.map_or(count, |c| (c + 1).min(count));
    if k < 2 {
        return None;
    }
    let at = |c: usize| -> Vec<f32> {
        let vs: Vec<Vec<f32>> = judged
            .iter()
            .map(|&j| nets[j].checkpoints[c].1.clone())
            .collect();
        mean_of(&vs)
    };
    Some((at(k - 2), at(k - 1)))
}

/// One network with one output fitted to `target`, V of every observation of `data`, for
/// export where the format's max-Q head cannot express V (BCQ's allowed maximum, an
/// ensemble's mean): a network of the kind of `like` (its input standardisation; for
/// images its convolutions) on at most [`FIT_STATES`] evenly spaced observations of all
/// the data, which is what `laq predict` scores (Q-learning may have seen fewer rows).
fn fit_v(
    like: &QNetwork,
    data: &Dataset,
    target: &[f32],
    cfg: &TrainConfig,
    device: &Device,
) -> Result<(QNetwork, f64)> {
    let idx: Vec<usize> = (0..data.len())
        .step_by((data.len() / FIT_STATES).max(1))
        .collect();
    let y: Vec<f32> = idx.iter().map(|&i| target[i]).collect();
    if like.net.is_conv() {
        let channels = &cfg.dqn.conv.channels;
        qlearn::fit_image(
            like,
            data,
            &idx,
            &y,
            channels,
            &cfg.distill,
            cfg.seed,
            device,
        )
    } else {
        let states: Vec<f32> = idx
            .iter()
            .flat_map(|&i| data.obs_row(i).into_owned())
            .collect();
        qlearn::fit(
            &states,
            data.obs_dim(),
            &y,
            1,
            &cfg.distill,
            cfg.seed,
            device,
        )
    }
}

/// The record of a run that learned Q again along the trajectories (`along`).
fn retargeted(one_step: &Trust, again: &Trust, along: &TrainConfig, exported: bool) -> Retargeted {
    Retargeted {
        one_step: one_step.verdict,
        one_step_failed: one_step.failed_names(),
        along: again.verdict,
        along_failed: again.failed_names(),
        target_update: along.dqn.target_update,
        exported_along: exported,
    }
}

/// Lowers each state's V in `target` to the bound of that state (the value of the fewest
/// steps to a reward through the data: [`trust::Traced::bound`]) before V is fitted for
/// export, where the run bounds its bootstraps so (`fit_bound`, `path_bound`, trajectory
/// targets) and the data shows ways. Every target Q-learning fitted keeps within the
/// bound, yet a network's V can pass it, by its smoothness across a wall: the fit takes
/// V as its targets allow. Returns how many states were lowered.
pub(super) fn fit_within_bound(
    target: &mut [f32],
    traced: &trust::Traced,
    cfg: &TrainConfig,
    max_return: f64,
) -> Option<usize> {
    if !(cfg.fit_bound && cfg.path_bound && cfg.dqn.lambda > 0.0) {
        return None;
    }
    // Ways that do not stitch were said to bound nothing where the bootstraps were.
    traced.paths.as_ref().filter(|s| s.stitch())?;
    let bound = traced.bound(cfg.dqn.gamma, max_return)?;
    let lowered = target
        .iter_mut()
        .zip(bound)
        .filter(|(v, b)| **v > *b)
        .map(|(v, b)| *v = b)
        .count();
    if lowered == 0 {
        log::info!("V within what the data's ways allow at every state");
    } else {
        log::info!(
            "V above what the data's ways allow at {lowered} of {} states: fitted at the bound",
            target.len()
        );
    }
    Some(lowered)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One trajectory of 4 steps, rewarded on its last: 3, 2, 1, 0 steps to go.
    fn line_of_four() -> Dataset {
        Dataset {
            obs_shape: vec![1],
            observations: vec![0.0, 1.0, 2.0, 3.0].into(),
            next_observations: vec![1.0, 2.0, 3.0, 4.0].into(),
            rewards: vec![0.0, 0.0, 0.0, 1.0],
            terminals: vec![false, false, false, true],
            timeouts: None,
            next_missing: None,
            actions: None,
        }
    }

    /// [`line_of_four`] and a second walk beside its first two states that stops short
    /// of the reward: its ways run on along the first walk, so the ways stitch the two.
    fn two_walks() -> Dataset {
        Dataset {
            obs_shape: vec![1],
            observations: vec![0.0, 1.0, 2.0, 3.0, 0.1, 1.1].into(),
            next_observations: vec![1.0, 2.0, 3.0, 4.0, 1.1, 2.1].into(),
            rewards: vec![0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
            terminals: vec![false, false, false, true, false, false],
            timeouts: Some(vec![false, false, false, false, false, true]),
            next_missing: None,
            actions: None,
        }
    }

    /// V fitted for export is lowered to the bound of each state where it passes it, and
    /// only where the run bounds its bootstraps and the data shows ways that stitch its
    /// trajectories.
    #[test]
    fn fitted_v_keeps_within_the_bound_of_the_ways() {
        let d = two_walks();
        let mut cfg = TrainConfig::continuous();
        cfg.dqn.gamma = 0.5;
        let traced = trust::Traced::of(&d, &cfg);
        assert!(traced.paths.as_ref().is_some_and(|w| w.stitch()));
        let learned = [0.9f32, 0.2, 0.6, 1.0, 0.0, 0.0];
        let mut v = learned;
        assert_eq!(fit_within_bound(&mut v, &traced, &cfg, 1.0), Some(2));
        // gamma^3 and gamma^1 are below what was learned there; the rest keeps its V.
        let near = |a: f32, b: f32| (a - b).abs() < 1e-6;
        assert!(
            near(v[0], 0.125) && v[1] == 0.2 && near(v[2], 0.5) && v[3..] == learned[3..],
            "{v:?}"
        );
        // One walk alone: each way is its own, the walk's own path, which bounds only
        // what its controller did.
        let one = trust::Traced::of(&line_of_four(), &cfg);
        assert!(one.paths.as_ref().is_some_and(|w| !w.stitch()));
        let mut v = [0.9f32, 0.2, 0.6, 1.0];
        assert_eq!(fit_within_bound(&mut v, &one, &cfg, 1.0), None);
        assert_eq!(v, [0.9f32, 0.2, 0.6, 1.0]);
        for off in [
            TrainConfig {
                fit_bound: false,
                ..cfg.clone()
            },
            TrainConfig {
                path_bound: false,
                ..cfg.clone()
            },
            TrainConfig {
                dqn: qlearn::DqnConfig {
                    lambda: 0.0,
                    ..cfg.dqn.clone()
                },
                ..cfg.clone()
            },
        ] {
            let mut v = learned;
            assert_eq!(fit_within_bound(&mut v, &traced, &off, 1.0), None);
            assert_eq!(v, learned);
        }
        // No rewarded trajectory: no ways, no bound.
        let unrewarded = Dataset {
            rewards: vec![0.0; 6],
            ..d
        };
        let traced = trust::Traced::of(&unrewarded, &cfg);
        let mut v = learned;
        assert_eq!(fit_within_bound(&mut v, &traced, &cfg, 1.0), None);
        assert_eq!(v, learned);
    }

    #[test]
    fn halves_alternate_pieces_of_the_trajectories() {
        // One trajectory of 100 rows, cut into pieces of a twentieth, then a terminal.
        let mut d = Dataset {
            obs_shape: vec![1],
            observations: (0..100).map(|i| i as f32).collect::<Vec<f32>>().into(),
            next_observations: (1..101).map(|i| i as f32).collect::<Vec<f32>>().into(),
            rewards: vec![0.0; 100],
            terminals: vec![false; 100],
            timeouts: None,
            next_missing: None,
            actions: None,
        };
        let (halves, pieces) = trajectory_halves(&d).unwrap();
        assert_eq!(pieces, 20);
        assert_eq!(halves[0][..6], [0, 1, 2, 3, 4, 10]);
        assert_eq!((halves[0].len(), halves[1].len()), (50, 50));
        // A trajectory ends where a row is terminal: the pieces start anew there.
        d.terminals[1] = true;
        let (halves, pieces) = trajectory_halves(&d).unwrap();
        assert_eq!(pieces, 21);
        assert_eq!(halves[0][..3], [0, 1, 7]);
        assert_eq!(halves[1][..5], [2, 3, 4, 5, 6]);
        // Too short to halve.
        assert!(trajectory_halves(&d.select(&(0..39).collect::<Vec<_>>())).is_none());
    }
}
