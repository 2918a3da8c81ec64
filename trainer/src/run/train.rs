//! One run of the pipeline on a dataset: labels, Q-learning, the exportable value model.

use super::config::{TrainConfig, ValueHead, Ways};
use super::deep::{deep_run, judge_ways, member_seed};
use super::record::{AnotherSeed, Candidate, ContextsLeftOut, NoiseIgnored, Retargeted};
use super::trust::{self, Evidence, Trust};
use crate::data::cost::CostToEnd;
use crate::data::Dataset;
use crate::export::ValueModel;
use crate::stages::checkpoint::{Checkpointer, State};
use crate::stages::labels::{self, Labelled};
use crate::stages::moved;
use crate::stages::qlearn::{self, QKind, QNetwork, Table};
use anyhow::Result;
use candle_core::Device;
use std::collections::BTreeMap;
use std::time::Instant;

/// Everything a run produced.
pub struct Trained {
    pub labelled: Labelled,
    /// Where the log pays a cost per step until its episodes end: V was learned, judged
    /// and exported as the value above paying it for ever ([`CostToEnd`]).
    pub cost_to_end: Option<CostToEnd>,
    /// Rows on which the log cuts an episode at its reward and Q-learning ended it
    /// ([`TrainConfig::ends_at_reward_cuts`]), where it did.
    pub reward_cuts_ended: Option<usize>,
    /// The Q-learning that ran: what `auto` resolved to (a table, IQL or DQN).
    pub q_used: QKind,
    /// Whether `auto` resolved to IQL because the data shows no ways a body can take
    /// ([`TrainConfig::learns_without_ways`]).
    pub iql_without_ways: bool,
    pub table: Option<Table>,
    /// The runtime's model (`value.safetensors`).
    pub model: ValueModel,
    /// The deep Q-network (DQN, BCQ, CQL, IQL) behind the exported V: of two from different
    /// seeds, the one the checks prefer, as trained; of an ensemble, the network fitted to
    /// its members' mean V (the exported one; `q_loss` is its first member's).
    pub qnet: Option<QNetwork>,
    pub distill_max_abs_error: Option<f64>,
    /// States whose V the export fit took at the bound instead (`fit_bound`), where it
    /// was applied.
    pub fit_bounded: Option<usize>,
    /// Where the settings bound V by the data's ways and the ways do not stitch its
    /// trajectories, so none bound it: the share of the ways that end at another reward
    /// than their own trajectory's next.
    pub ways_stitched: Option<f64>,
    pub q_loss: Vec<f32>,
    /// Transitions Q-learning used (fewer than the data with `top_actions`).
    pub q_transitions: usize,
    /// Seconds spent in each stage, in order.
    pub timings: Vec<(String, f64)>,
    /// The oracle-free verdict on V.
    pub trust: Trust,
    /// For mined labels: `1 - forward-model loss / loss of K clusters of s' alone`.
    pub forward_model_gain: Option<f64>,
    /// An ensemble's checkpoints as the checks judged them (empty otherwise).
    pub q_checkpoints: Vec<Candidate>,
    /// The settings that trained the exported V: the run's own, or those of its second
    /// Q-learning along the data's trajectories (`retargeted`).
    pub config: TrainConfig,
    /// Where one-step targets left V below the data's returns and Q-learning ran again
    /// along the trajectories (`retry_along_trajectories`): both verdicts, and which V
    /// was exported.
    pub retargeted: Option<Retargeted>,
    /// Where V was doubtful while some values were noise to every label, and Q-learning
    /// ran again ignoring them (`retry_ignoring_noise`): both verdicts, and which V was
    /// exported.
    pub noise_ignored: Option<NoiseIgnored>,
    /// How far the labels move each value of a vector state
    /// ([`moved::moved_by_labels`]), where deep Q-learning measured it
    /// (`retry_ignoring_unmoved`).
    pub labels_move: Option<Vec<Option<f32>>>,
    /// The values no label moves that are contexts ([`crate::data::contexts::dims`]: a
    /// goal), left read.
    pub unmoved_contexts: Vec<usize>,
    /// Rows left out of mining and Q-learning because they change a context
    /// ([`crate::data::contexts::carried`]), and the dimensions that are contexts.
    pub contexts: Option<ContextsLeftOut>,
    /// Where V was doubtful by the checks that say its training depends on chance alone
    /// and the run went again from another seed (`retry_with_another_seed`): both
    /// verdicts, and which seed's V was exported.
    pub another_seed: Option<AnotherSeed>,
}

/// Labels the data, learns Q, and builds the exportable value model. With `ckpt`, every
/// stage saves its state through it, and a resumed run skips finished stages and ends with
/// the same model as an uninterrupted one.
///
/// Rows that change a context ([`crate::data::contexts::carried`]) are no step of the
/// task: the rest is trained on, and those rows take the most used label. A log that
/// pays a cost per step until its episodes end is learned, judged and exported as the
/// value above paying that cost for ever ([`CostToEnd`]; `Trained::cost_to_end`); the
/// data is then copied with those rewards.
pub fn train(
    data: &Dataset,
    cfg: &TrainConfig,
    device: &Device,
    ckpt: Option<&mut Checkpointer>,
) -> Result<Trained> {
    crate::export::fits_runtime(&data.obs_shape)?;
    let gamma = match learns_a_table(cfg, data) {
        true => cfg.tabular.gamma,
        false => cfg.dqn.gamma,
    };
    let Some(cost) = CostToEnd::of(data, gamma) else {
        return train_contexts(data, cfg, device, ckpt);
    };
    log::info!("rewards: {cost}");
    let mut tr = train_contexts(&cost.apply(data), cfg, device, ckpt)?;
    tr.model.cost_per_step = Some(cost.cost);
    tr.cost_to_end = Some(cost);
    Ok(tr)
}

/// [`train`] on rewards Q-learning learns from as they are.
fn train_contexts(
    data: &Dataset,
    cfg: &TrainConfig,
    device: &Device,
    ckpt: Option<&mut Checkpointer>,
) -> Result<Trained> {
    let Some((left_out, carried)) = ContextsLeftOut::of(data) else {
        return train_rows(data, cfg, device, ckpt);
    };
    log::info!("{left_out}");
    let mut is_carried = vec![false; data.len()];
    for &i in &carried {
        is_carried[i] = true;
    }
    let kept: Vec<usize> = (0..data.len()).filter(|&i| !is_carried[i]).collect();
    let mut tr = train_rows(&data.select(&kept), cfg, device, ckpt)?;
    let common = labels::most_used(&tr.labelled.labels, tr.labelled.num_actions);
    let mut all = vec![common; data.len()];
    for (&i, &l) in kept.iter().zip(&tr.labelled.labels) {
        all[i] = l;
    }
    tr.labelled.labels = all;
    tr.contexts = Some(left_out);
    Ok(tr)
}

/// [`train_seed`], and where its V is doubtful by the checks that say its training
/// depends on chance alone ([`Trust::unsteady`]), the same again from another seed
/// (`retry_with_another_seed`), whose V is exported where it is trusted.
fn train_rows(
    data: &Dataset,
    cfg: &TrainConfig,
    device: &Device,
    ckpt: Option<&mut Checkpointer>,
) -> Result<Trained> {
    cfg.check_for(data)?;
    let t = Instant::now();
    let plan = Plan::of(data, cfg);
    let judged = t.elapsed().as_secs_f64();
    if plan.without_ways {
        log::info!(
            "Q-learning by IQL: with no ways through the data to bound its bootstraps, \
             DQN's maximum over labels that no state like the one bootstrapped shows would \
             go unchecked (`iql_without_ways`)"
        );
    }
    let first = train_seed(data, cfg, &plan, device, ckpt)?;
    let mut tr = with_another_seed(first, cfg, |other| {
        crate::util::progress::labelled("another seed", || {
            train_seed(data, other, &plan, device, None)
        })
    })?;
    tr.timings
        .insert(0, ("judging the ways through the data".into(), judged));
    super::advice::advise(data, &tr.config, tr.q_used, &mut tr.trust);
    Ok(tr)
}

/// What a run judges of its data once, the same for every seed it trains from: the ways
/// through the data, and the Q-learning it takes ([`q_for`]).
struct Plan {
    ways: Ways,
    q: QKind,
    /// `auto` took IQL because the data shows no ways a body can take
    /// ([`TrainConfig::learns_without_ways`]).
    without_ways: bool,
}

impl Plan {
    fn of(data: &Dataset, cfg: &TrainConfig) -> Plan {
        let ways = judge_ways(data, cfg);
        let (q, without_ways) = q_for(cfg, data, &ways);
        Plan {
            ways,
            q,
            without_ways,
        }
    }
}

/// `first`, the run from `cfg`; where `cfg.retry_with_another_seed` and its V is doubtful
/// by the checks that say its training depends on chance alone, the run `again` gives
/// from another seed ([`another_seed`]) is exported if its V is trusted. Either way the
/// run returned records both verdicts and both runs' timings.
fn with_another_seed(
    first: Trained,
    cfg: &TrainConfig,
    again: impl FnOnce(&TrainConfig) -> Result<Trained>,
) -> Result<Trained> {
    if !(cfg.retry_with_another_seed && first.trust.unsteady()) {
        return Ok(first);
    }
    let other = TrainConfig {
        seed: another_seed(cfg.seed),
        ..cfg.clone()
    };
    log::info!(
        "V is doubtful by {} alone, which say that its training depends on chance: the \
         run goes again from seed {}",
        first.trust.failed_names().join(", "),
        other.seed
    );
    let again = again(&other)?;
    let record = AnotherSeed {
        first_seed: cfg.seed,
        first: first.trust.verdict,
        first_failed: first.trust.failed_names(),
        seed: other.seed,
        again: again.trust.verdict,
        again_failed: again.trust.failed_names(),
        exported_again: again.trust.verdict == trust::Verdict::Trusted,
    };
    log::info!("{record}");
    let mut times = first.timings.clone();
    times.extend((again.timings.iter()).map(|(k, v)| (format!("another seed: {k}"), *v)));
    let mut out = match record.exported_again {
        true => again,
        false => first,
    };
    out.timings = times;
    out.another_seed = Some(record);
    Ok(out)
}

/// The seed a run goes again from ([`train_rows`]): far from the seeds users count
/// through and from those of the run's own Q-functions ([`member_seed`]), and within
/// TOML's integers (`config.toml`) wherever the run's own seed is.
fn another_seed(seed: u64) -> u64 {
    seed ^ 0x5eed_0000_0000
}

/// One run of the pipeline from `cfg.seed` as `plan` says: labels, then Q-learning
/// (tabular, or deep with its retries along the trajectories and ignoring values), judged
/// by the checks.
fn train_seed(
    data: &Dataset,
    cfg: &TrainConfig,
    plan: &Plan,
    device: &Device,
    mut ckpt: Option<&mut Checkpointer>,
) -> Result<Trained> {
    let mut timings = vec![];
    let t = Instant::now();
    let labelled = match ckpt.as_deref().map(|c| restore_labels(c.done())) {
        Some(Some(l)) => l?,
        _ => {
            let l = labels::make(
                cfg.labels,
                data,
                &cfg.mining,
                cfg.seed,
                device,
                ckpt.as_deref_mut(),
            )?;
            if let Some(c) = ckpt.as_deref_mut() {
                let mut st = State::default();
                st.put_u32("labels", l.labels.clone());
                if let Some(loss) = &l.mining_loss {
                    st.put_f32("mining_loss", loss.clone());
                }
                if let Some(explained) = &l.explained {
                    st.put_f32("explained", explained.clone());
                }
                st.set_record(
                    LABELS,
                    &LabelsDone {
                        num_actions: l.num_actions,
                    },
                )?;
                c.finish_stage(LABELS, st)?;
            }
            l
        }
    };
    timings.push((
        format!("labels ({})", cfg.labels.key()),
        t.elapsed().as_secs_f64(),
    ));
    log::info!(
        "labelled {} transitions with {} `{}` labels in {:.1} s",
        labelled.labels.len(),
        labelled.num_actions,
        cfg.labels.key(),
        t.elapsed().as_secs_f64()
    );
    // Q-learning may see a subset: the transitions of the most used labels, relabelled.
    let kept = match cfg.top_actions {
        Some(0) => anyhow::bail!("--top-actions must be at least 1"),
        Some(n) if n < labelled.num_actions => {
            Some(top_labels(&labelled.labels, labelled.num_actions, n))
        }
        _ => None,
    };
    let q_transitions = kept.as_ref().map_or(data.len(), |(idx, _)| idx.len());
    if q_transitions == 0 {
        anyhow::bail!("no transitions left for Q-learning");
    }
    let q_used = plan.q;
    let mut info = model_info(cfg);
    let gain = forward_model_gain(&labelled, data, cfg.seed)?;
    let t = Instant::now();
    let out = match q_used {
        QKind::Tabular => {
            if !data.observations.iter().all(|v| v.fract() == 0.0) {
                anyhow::bail!("`--q tabular` needs integer-valued observations; use `--q dqn`");
            }
            let (subset, qlabels, qk) = q_view(data, &labelled, kept.as_ref(), cfg);
            let qdata = subset.as_ref().unwrap_or(data);
            let table = qlearn::tabular(qdata, &qlabels, qk, &cfg.tabular, cfg.seed)?;
            timings.push(("Q-learning (tabular)".into(), t.elapsed().as_secs_f64()));
            let t = Instant::now();
            info.insert("q".to_string(), q_used.name().to_string());
            // One number a state: the table itself, through every entry; otherwise a
            // network fitted to it.
            let (model, err, loss) =
                match crate::export::table::exact(&table, cfg.tabular.gamma, info.clone()) {
                    Some(model) => {
                        timings.push((
                            "export (the table as it is)".into(),
                            t.elapsed().as_secs_f64(),
                        ));
                        let err = table_error(&table, &model, device)?;
                        (model, err, Default::default())
                    }
                    None => {
                        let (net, err) = qlearn::distill(&table, &cfg.distill, cfg.seed, device)?;
                        timings.push((
                            "export (fit MLP to table)".into(),
                            t.elapsed().as_secs_f64(),
                        ));
                        let model = ValueModel::from_qnetwork(&net, cfg.tabular.gamma, info)?;
                        (model, err, net.loss_curve)
                    }
                };
            // The fit to the table, before a one-norm head or a density gate reshape V.
            let fits = export_fits(data, &table, &model.values_of(data, device)?);
            let model = finish(model, data, cfg, device)?;
            let t = Instant::now();
            let second = match cfg.second_seed {
                true => {
                    let other = qlearn::tabular(
                        qdata,
                        &qlabels,
                        qk,
                        &cfg.tabular,
                        member_seed(cfg.seed, 1),
                    )?;
                    Some(
                        (0..data.len())
                            .map(|i| other.value(&data.obs_row(i)).unwrap_or(0.0) as f32)
                            .collect::<Vec<f32>>(),
                    )
                }
                false => None,
            };
            let values = model.values_of(data, device)?;
            let max_return = qlearn::return_bounds(data, cfg.tabular.gamma).1 as f64;
            let returns = trust::data_returns(data, cfg.tabular.gamma);
            let traced = trust::Traced::with_ways(data, plan.ways.kept().cloned());
            let trust = trust::assess(&Evidence {
                data,
                labels: &labelled.labels,
                num_actions: labelled.num_actions,
                values: &values,
                pair: second.as_deref().map(|o| (values.as_slice(), o)),
                last_snapshots: None,
                max_return: final_max_return(cfg, max_return),
                shown_near_max: near_max_shown(&returns, &traced, cfg.tabular.gamma, max_return),
                returns: value_is_a_return(cfg).then_some(returns.as_slice()),
                traced: &traced,
            });
            // What ships is the network, which the other checks judge: where it does not
            // fit the table, that is why they fail.
            let trust = trust.led_by(fits);
            timings.push(("trust checks".into(), t.elapsed().as_secs_f64()));
            Trained {
                labelled,
                cost_to_end: None,
                reward_cuts_ended: cuts_ended(cfg, data),
                iql_without_ways: false,
                q_used,
                table: Some(table),
                model,
                qnet: None,
                distill_max_abs_error: Some(err),
                fit_bounded: None,
                ways_stitched: None,
                q_loss: loss,
                q_transitions,
                timings,
                trust,
                forward_model_gain: gain,
                q_checkpoints: vec![],
                config: cfg.clone(),
                retargeted: None,
                noise_ignored: None,
                labels_move: None,
                unmoved_contexts: vec![],
                contexts: None,
                another_seed: None,
            }
        }
        variant => {
            let mut run = deep_run(
                data,
                &labelled,
                kept.as_ref(),
                (variant, &info),
                cfg,
                Some(&plan.ways),
                device,
                ckpt,
            )?;
            // Values V may lean on that no action governs: noise to every label (a clock,
            // a channel that wanders on its own) or moved by no label (a battery that
            // drains, the steps since an episode began). V may tell the trajectories
            // apart by them, or the time, rather than the place: Q-learning runs again
            // without them where V is doubtful, or where its halves agree less than two
            // seeds do beside values no label moves.
            let noise: Vec<usize> = match cfg.retry_ignoring_noise {
                true => (labelled.explained.as_deref())
                    .map(crate::stages::mining::noise_to_labels)
                    .unwrap_or_default(),
                false => vec![],
            };
            let labels_move = cfg
                .retry_ignoring_unmoved
                .then(|| moved::moved_by_labels(data, &labelled.labels, labelled.num_actions))
                .flatten();
            let unmoved = (labels_move.as_deref())
                .map(moved::unmoved_by_labels)
                .unwrap_or_default();
            let contexts = crate::data::contexts::dims(data);
            let unmoved_contexts: Vec<usize> =
                unmoved.iter().copied().filter(|&j| contexts[j]).collect();
            let (values, unmoved) = ignorable(&noise, &unmoved, &contexts, cfg);
            let doubtful = run.trust.verdict == trust::Verdict::Doubtful;
            let mut noise_ignored = None;
            if learns_again_ignoring(&run.trust, &values, &unmoved) {
                let ignoring = cfg.ignoring(&values);
                log::info!(
                    "V is {}, and no label explains or moves value {}: Q-learning again \
                     ignoring them",
                    match doubtful {
                        true => "doubtful",
                        false => "trusted with halves that agree less than two seeds do",
                    },
                    values
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                let again = deep_run(
                    data,
                    &labelled,
                    kept.as_ref(),
                    (variant, &info),
                    &ignoring,
                    None,
                    device,
                    None,
                )?;
                let exported = exports_ignoring(&run.trust, &again.trust);
                let record = NoiseIgnored {
                    unmoved: (values.iter().copied())
                        .filter(|j| unmoved.contains(j))
                        .collect(),
                    values,
                    reading: run.trust.verdict,
                    reading_failed: run.trust.failed_names(),
                    reading_halves: run.trust.value(trust::HALVES_AGREE),
                    ignoring: again.trust.verdict,
                    ignoring_failed: again.trust.failed_names(),
                    ignoring_halves: again.trust.value(trust::HALVES_AGREE),
                    exported_ignoring: exported,
                };
                log::info!("{record}");
                let timed = again
                    .timings
                    .iter()
                    .map(|(k, v)| (format!("ignoring values: {k}"), *v));
                let mut times = run.timings.clone();
                times.extend(timed);
                if exported {
                    run = again;
                }
                run.timings = times;
                noise_ignored = Some(record);
            }
            timings.extend(run.timings);
            let learned = run.learned;
            Trained {
                labelled,
                cost_to_end: None,
                reward_cuts_ended: cuts_ended(&run.config, data),
                q_used: variant,
                iql_without_ways: plan.without_ways,
                table: None,
                model: learned.model,
                q_loss: learned.q_loss,
                qnet: Some(learned.qnet),
                distill_max_abs_error: learned.err,
                fit_bounded: learned.bounded,
                ways_stitched: learned.unstitched,
                q_transitions,
                timings,
                trust: run.trust,
                forward_model_gain: gain,
                q_checkpoints: learned.candidates,
                config: run.config,
                retargeted: run.retargeted,
                noise_ignored,
                labels_move,
                unmoved_contexts,
                contexts: None,
                another_seed: None,
            }
        }
    };
    Ok(out)
}

/// How many of `data`'s episodes Q-learning with `cfg` ends at the log's reward cuts
/// ([`TrainConfig::ends_at_reward_cuts`]); `None` for none.
fn cuts_ended(cfg: &TrainConfig, data: &Dataset) -> Option<usize> {
    Some(cfg.ends_at_reward_cuts(data).len()).filter(|&n| n > 0)
}

/// The values a run may learn again without: those noise to every label (`noise`) and
/// those moved by no label (`unmoved`), less the values already ignored, those a density
/// gate reads, and contexts (a goal, a task: no transition changes them within an
/// episode, so no label moves them either, yet V must read them). Returns them all,
/// sorted, and those of them moved by no label.
fn ignorable(
    noise: &[usize],
    unmoved: &[usize],
    contexts: &[bool],
    cfg: &TrainConfig,
) -> (Vec<usize>, Vec<usize>) {
    let free = |j: &&usize| {
        !(cfg.ignored_values.contains(j)
            || cfg.density.enabled && cfg.density.dims.contains(j)
            || contexts.get(**j).copied().unwrap_or(false))
    };
    let unmoved: Vec<usize> = unmoved.iter().filter(free).copied().collect();
    let mut values: Vec<usize> = noise.iter().filter(free).copied().collect();
    values.extend(&unmoved);
    values.sort_unstable();
    values.dedup();
    (values, unmoved)
}

/// Whether a run learns again ignoring `values` (noise to every label, or moved by
/// none: `unmoved` among them): where V is doubtful, or trusted with halves that agree
/// less than two seeds do beside values no label moves (those may be what sets the
/// halves apart).
fn learns_again_ignoring(reading: &Trust, values: &[usize], unmoved: &[usize]) -> bool {
    let split = !unmoved.is_empty()
        && reading
            .value(trust::HALVES_AGREE)
            .is_some_and(|h| h < trust::SEEDS_AGREE);
    !values.is_empty() && (reading.verdict == trust::Verdict::Doubtful || split)
}

/// Whether the V that ignores some values is exported rather than the one that reads
/// them. It cannot use what they say: beside a doubtful V it is exported only where it
/// fails fewer checks, not on a tie broken by its rankings; beside a trusted one only
/// where it is trusted too and its halves agree as two seeds do (those values were
/// what set the halves apart).
fn exports_ignoring(reading: &Trust, ignoring: &Trust) -> bool {
    match reading.verdict {
        trust::Verdict::Doubtful => ignoring.failed().count() < reading.failed().count(),
        trust::Verdict::Trusted => {
            ignoring.verdict == trust::Verdict::Trusted
                && ignoring
                    .value(trust::HALVES_AGREE)
                    .is_some_and(|h| h >= trust::SEEDS_AGREE)
        }
    }
}

/// The Q-learning `cfg.q` names for `data`, whose `ways` [`judge_ways`] found; `auto`: a
/// table for integer states, IQL where Q-learning ends the episodes that the log cuts at
/// their rewards ([`TrainConfig::ends_at_reward_cuts`]) or where the data shows no ways a
/// body can take ([`TrainConfig::learns_without_ways`]: then `true` beside it), DQN
/// otherwise.
fn q_for(cfg: &TrainConfig, data: &Dataset, ways: &Ways) -> (QKind, bool) {
    match cfg.q {
        QKind::Auto if learns_a_table(cfg, data) => (QKind::Tabular, false),
        QKind::Auto if !cfg.ends_at_reward_cuts(data).is_empty() => (QKind::Iql, false),
        QKind::Auto if cfg.learns_without(ways) => (QKind::Iql, true),
        QKind::Auto => (QKind::Dqn, false),
        q => (q, false),
    }
}

/// Whether `cfg` learns `data` with a table: the discount is the table's.
fn learns_a_table(cfg: &TrainConfig, data: &Dataset) -> bool {
    match cfg.q {
        QKind::Auto => qlearn::is_tabular(data),
        q => q == QKind::Tabular,
    }
}

/// What Q-learning sees of `data`: the rows of the most used labels (`kept`, relabelled)
/// or all of them, each episode that the log cuts at its reward ended there
/// ([`TrainConfig::ends_at_reward_cuts`]); their labels, and how many labels there are.
pub(super) fn q_view(
    data: &Dataset,
    labelled: &Labelled,
    kept: Option<&(Vec<usize>, Vec<u32>)>,
    cfg: &TrainConfig,
) -> (Option<Dataset>, Vec<u32>, usize) {
    let ends = cfg.ends_at_reward_cuts(data);
    let ended = (!ends.is_empty()).then(|| {
        let mut d = data.clone();
        for i in ends {
            d.terminals[i] = true;
        }
        d
    });
    match kept {
        Some((idx, l)) => (
            Some(ended.as_ref().unwrap_or(data).select(idx)),
            l.clone(),
            cfg.top_actions.unwrap_or(0),
        ),
        None => (ended, labelled.labels.clone(), labelled.num_actions),
    }
}

/// The largest |Q of the model - Q of the table| over the table's states and actions,
/// for a model of one-number states ([`crate::export::table::exact`]).
fn table_error(table: &Table, model: &ValueModel, device: &Device) -> Result<f64> {
    use candle_nn::Module as _;
    let x: Vec<f32> = table
        .index
        .rows()
        .iter()
        .map(|&c| (c - model.mean[0]) * model.scale[0])
        .collect();
    let n = x.len();
    let q = model
        .mlp(device)?
        .forward(&candle_core::Tensor::from_vec(x, (n, 1), device)?)?
        .flatten_all()?
        .to_vec1::<f32>()?;
    Ok(q.iter()
        .zip(&table.q)
        .map(|(&a, &b)| (f64::from(a) - b).abs())
        .fold(0.0, f64::max))
}

/// [`trust::export_fits`] of the network exported for `table`, whose V of the data's
/// states is `values` (as fitted, before a one-norm head or a density gate).
fn export_fits(data: &Dataset, table: &Table, values: &[f32]) -> trust::Check {
    let learned: Vec<f64> = (0..data.len())
        .map(|i| table.value(&data.obs_row(i)).unwrap_or(0.0))
        .collect();
    // The share of the table's spread the network reproduces, not a rank correlation:
    // a table's values lie close together in places (the grid world's, within less
    // than the fit's error of 0.01), where ranks swap though the values agree.
    let mean = learned.iter().sum::<f64>() / learned.len().max(1) as f64;
    let spread: f64 = learned.iter().map(|l| (l - mean).powi(2)).sum();
    let missed: f64 = values
        .iter()
        .zip(&learned)
        .map(|(&v, l)| (f64::from(v) - l).powi(2))
        .sum();
    let explained = if spread > 0.0 {
        1.0 - missed / spread
    } else {
        1.0
    };
    let codes = (data.obs_dim() == 1).then(|| {
        let mut v: Vec<u32> = data.observations.iter().map(|x| x.to_bits()).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    });
    trust::export_fits(explained, codes)
}

/// The free-text metadata a trained model carries (the Q-learning variant is added once
/// known), so that the same settings give the same file wherever the model is built, and
/// the reading of its observations where the run set one (`ReadOptions::record`).
pub fn model_info(cfg: &TrainConfig) -> BTreeMap<String, String> {
    let mut info = BTreeMap::new();
    info.insert("labels".to_string(), cfg.labels.key().to_string());
    info.insert(
        "trainer".to_string(),
        format!("laq {}", env!("CARGO_PKG_VERSION")),
    );
    info.insert("seed".to_string(), cfg.seed.to_string());
    cfg.read.record(&mut info);
    info
}

/// States a fitted V, the one-norm head and the density gate are fitted on, at most.
pub(super) const FIT_STATES: usize = 20_000;

/// The exported model with the head and the density gate the settings ask for: the
/// one-norm head refits V (scaled into [0, 1] by the largest possible return) as
/// 1 - ||phi(s)||; the gate is fitted on the data's observations.
pub(super) fn finish(
    model: ValueModel,
    data: &Dataset,
    cfg: &TrainConfig,
    device: &Device,
) -> Result<ValueModel> {
    if cfg.head == ValueHead::MaxQ && !cfg.density.enabled {
        return Ok(model);
    }
    // Images were refused up front (`TrainConfig::check_for`).
    let d = data.obs_dim();
    let step = (data.len() / FIT_STATES).max(1);
    let states: Vec<f32> = (0..data.len())
        .step_by(step)
        .flat_map(|i| data.obs_row(i).into_owned())
        .collect();
    let mut model = model;
    if cfg.head == ValueHead::OneNorm {
        let gamma = model.gamma;
        let max_return = qlearn::return_bounds(data, gamma).1.max(f32::MIN_POSITIVE);
        let v: Vec<f32> = model
            .values_candle(&states, device)?
            .iter()
            .map(|v| (v / max_return).clamp(0.0, 1.0))
            .collect();
        let (net, err) = qlearn::fit_one_norm(
            &states,
            d,
            &v,
            ONE_NORM_FEATURES,
            &cfg.distill,
            cfg.seed,
            device,
        )?;
        log::info!("one-norm head fitted to V / {max_return}: largest error {err:.2e}");
        let info = model.info.clone();
        model = ValueModel::from_qnetwork(&net, gamma, info)?;
        model.head = crate::export::Head::OneNorm;
    }
    if cfg.density.enabled {
        // Values V ignores are held at zero here: the gate reads the others.
        let mut density = cfg.density.clone();
        if density.dims.is_empty() && !cfg.ignored_values.is_empty() {
            density.dims = (0..d).filter(|j| !cfg.ignored_values.contains(j)).collect();
        }
        let gate = crate::export::density::DensityGate::fit(&states, d, &density, cfg.seed)?;
        log::info!(
            "density gate: {} components over {} dimensions, threshold {:.3}",
            gate.weights.len(),
            gate.means.len() / gate.weights.len().max(1),
            gate.threshold
        );
        model.density = Some(gate);
    }
    Ok(model)
}

/// Whether the exported V is a discounted return (the max-Q head), which the data's own
/// returns bound from below; the one-norm head's `1 - |phi(s)|` is not.
pub(super) fn value_is_a_return(cfg: &TrainConfig) -> bool {
    cfg.head == ValueHead::MaxQ
}

/// The largest value the exported model can give: 1 with the one-norm head (V scaled into
/// [0, 1]), the largest return otherwise.
pub(super) fn final_max_return(cfg: &TrainConfig, max_return: f64) -> f64 {
    match cfg.head {
        ValueHead::OneNorm => 1.0,
        ValueHead::MaxQ => max_return,
    }
}

/// Features of the one-norm head.
const ONE_NORM_FEATURES: usize = 8;
/// [`trust::shown_near_max`] of the data's own returns and the value of its ways'
/// fewest steps.
pub(super) fn near_max_shown(
    returns: &[f64],
    traced: &trust::Traced,
    gamma: f64,
    max_return: f64,
) -> f64 {
    let ways = traced.bound(gamma, max_return);
    trust::shown_near_max(returns, ways.as_deref(), max_return)
}

/// Rows of the sample that the dynamics check clusters.
const CLUSTER_SAMPLE: usize = 4000;

/// For mined labels: `1 - m / c`, where `m` is the forward model's final loss per
/// standardised value of s' and `c` the loss of K clusters of s' alone (no state), on a
/// sample. Near 1, knowing s and the latent action explains s' far better than
/// clustering s' does: the latent actions are actions. Near 0 they are clusters of s'.
/// Reported, not a trust check: on Atari frames the labels of a coarse forward model
/// (0.05) still gave a V ranking frames by progress at 0.97 (docs/trust.md); mismatched
/// rows, what this once guarded against, are `transitions_match`'s.
fn forward_model_gain(labelled: &Labelled, data: &Dataset, seed: u64) -> Result<Option<f64>> {
    let Some(&last) = labelled.mining_loss.as_ref().and_then(|c| c.last()) else {
        return Ok(None);
    };
    // Mining saw only the rows with a next observation; the clusters see the same.
    let with_next;
    let data = if data.missing_next_count() > 0 {
        with_next = data.select(&data.rows_with_next());
        &with_next
    } else {
        data
    };
    let d = data.obs_dim().max(1);
    let inputs = match data.is_image() {
        true => {
            let shape = crate::nn::conv::ImageShape::new(&data.obs_shape, 1)
                .or_else(|_| crate::nn::conv::ImageShape::new(&data.obs_shape, 0));
            match shape {
                Ok(s) => crate::nn::inputs::Inputs::image(data, s),
                Err(_) => crate::nn::inputs::Inputs::dense(data).0,
            }
        }
        false => crate::nn::inputs::Inputs::dense(data).0,
    };
    let rows: Vec<usize> = (0..data.len())
        .step_by((data.len() / CLUSTER_SAMPLE).max(1))
        .collect();
    let mut x = vec![0f32; rows.len() * d];
    for (j, &i) in rows.iter().enumerate() {
        inputs.fill(i, true, &mut x[j * d..(j + 1) * d]);
    }
    let k = labelled.num_actions.max(1);
    let assigned = labels::kmeans(&x, d, k, 20, seed)?;
    let mut centre = vec![0f64; k * d];
    let mut count = vec![0usize; k];
    for (j, &c) in assigned.iter().enumerate() {
        count[c as usize] += 1;
        for (m, v) in centre[c as usize * d..(c as usize + 1) * d]
            .iter_mut()
            .zip(&x[j * d..(j + 1) * d])
        {
            *m += *v as f64;
        }
    }
    for c in 0..k {
        for m in &mut centre[c * d..(c + 1) * d] {
            *m /= count[c].max(1) as f64;
        }
    }
    let mut sse = 0f64;
    for (j, &c) in assigned.iter().enumerate() {
        for (m, v) in centre[c as usize * d..(c as usize + 1) * d]
            .iter()
            .zip(&x[j * d..(j + 1) * d])
        {
            sse += (*v as f64 - m).powi(2);
        }
    }
    let clusters = sse / (rows.len() * d).max(1) as f64;
    let model = last as f64 / d as f64;
    Ok(Some(if clusters > 0.0 {
        1.0 - model / clusters
    } else {
        0.0
    }))
}

/// The checkpoint stage name of labelling.
const LABELS: &str = "labels";

/// What a finished labelling stage records besides its arrays.
#[derive(serde::Serialize, serde::Deserialize)]
struct LabelsDone {
    num_actions: usize,
}

/// The labels a finished labelling stage left in a checkpoint, if it finished.
fn restore_labels(done: &State) -> Option<Result<Labelled>> {
    let rec = done.done_record::<LabelsDone>(LABELS, LABELS)?;
    Some(rec.and_then(|rec| {
        Ok(Labelled {
            labels: done.u32("done.labels")?.to_vec(),
            num_actions: rec.num_actions,
            mining_loss: done.f32("done.mining_loss").ok().map(<[f32]>::to_vec),
            explained: done.f32("done.explained").ok().map(<[f32]>::to_vec),
        })
    }))
}

/// Indices of the transitions whose label is among the `n` most used (ties: lower label
/// first), and their labels renumbered 0..n by decreasing use.
pub fn top_labels(labels: &[u32], k: usize, n: usize) -> (Vec<usize>, Vec<u32>) {
    let mut usage = vec![0usize; k];
    for &l in labels {
        usage[l as usize] += 1;
    }
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| usage[b].cmp(&usage[a]).then(a.cmp(&b)));
    let mut new = vec![u32::MAX; k];
    for (rank, &l) in order.iter().take(n).enumerate() {
        new[l] = rank as u32;
    }
    labels
        .iter()
        .enumerate()
        .filter(|(_, &l)| new[l as usize] != u32::MAX)
        .map(|(i, &l)| (i, new[l as usize]))
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::super::deep::{as_f64, bootstrap_bound, mean_of, probe_states};
    use super::*;
    use crate::stages::qlearn::DqnInputs;

    /// A verdict from its checks: (name, value, pass).
    fn judged(checks: &[(&str, f64, bool)]) -> Trust {
        let checks: Vec<trust::Check> = (checks.iter())
            .map(|&(name, value, pass)| trust::Check {
                name: name.into(),
                value,
                threshold: 0.0,
                pass,
                why: String::new(),
            })
            .collect();
        let verdict = match checks.iter().all(|c| c.pass) {
            true => trust::Verdict::Trusted,
            false => trust::Verdict::Doubtful,
        };
        Trust {
            verdict,
            checks,
            advice: vec![],
        }
    }

    /// Values already ignored, read by a density gate, or contexts (a goal) are not tried.
    #[test]
    fn goals_and_values_already_ignored_are_not_tried() {
        let mut cfg = TrainConfig::continuous();
        let contexts = [false, false, true, true, false, false, false];
        let (values, unmoved) = ignorable(&[6], &[2, 3, 4, 5], &contexts, &cfg);
        assert_eq!((values, unmoved), (vec![4, 5, 6], vec![4, 5]));
        cfg.ignored_values = vec![4];
        cfg.density.enabled = true;
        cfg.density.dims = vec![6];
        let (values, unmoved) = ignorable(&[6], &[2, 3, 4, 5], &contexts, &cfg);
        assert_eq!((values, unmoved), (vec![5], vec![5]));
    }

    /// A doubtful V learns again without the values no label explains or moves; a
    /// trusted one only where its halves agree less than two seeds do beside values no
    /// label moves, and that V is exported only where it is trusted with halves that
    /// agree as two seeds do.
    #[test]
    fn values_no_label_governs_are_ignored_where_the_checks_ask() {
        let doubtful = judged(&[("halves_agree", 0.3, false), ("path_ranking", 0.9, true)]);
        assert!(learns_again_ignoring(&doubtful, &[4], &[]));
        assert!(!learns_again_ignoring(&doubtful, &[], &[]));
        let split = judged(&[("halves_agree", 0.7, true), ("path_ranking", 0.86, true)]);
        assert!(learns_again_ignoring(&split, &[4], &[4]));
        assert!(
            !learns_again_ignoring(&split, &[4], &[]),
            "noise alone, V trusted"
        );
        let agreeing = judged(&[("halves_agree", 0.9, true)]);
        assert!(!learns_again_ignoring(&agreeing, &[4], &[4]));
        assert!(
            !learns_again_ignoring(&judged(&[]), &[4], &[4]),
            "no halves"
        );

        // Beside a doubtful V, only one that fails fewer checks.
        let as_many = judged(&[("halves_agree", 0.5, false), ("path_ranking", 0.9, true)]);
        assert!(!exports_ignoring(&doubtful, &as_many));
        assert!(exports_ignoring(&doubtful, &agreeing));
        // Beside a trusted V, only a trusted one whose halves agree as two seeds do.
        assert!(exports_ignoring(&split, &agreeing));
        let still_split = judged(&[("halves_agree", 0.8, true)]);
        assert!(!exports_ignoring(&split, &still_split));
        let worse = judged(&[("halves_agree", 0.95, true), ("path_ranking", 0.4, false)]);
        assert!(!exports_ignoring(&split, &worse));
    }

    /// 3000 U-maze transitions and continuous-state settings shrunk to seconds.
    fn small_maze() -> (Dataset, TrainConfig) {
        let data = crate::envs::maze2d::Maze::named("umaze")
            .unwrap()
            .generate(3000, 500, 3);
        let mut cfg = TrainConfig::continuous();
        cfg.mining.steps = 200;
        cfg.mining.batch_size = 64;
        cfg.dqn.steps = 300;
        cfg.dqn.target_update = 50;
        (data, cfg)
    }

    /// A run doubtful by the checks that say its training depends on chance alone goes
    /// again from another seed, whose V is exported where it is trusted (`config.toml`
    /// then holds that seed); a run trusted, doubtful by a check on V or the data, or set
    /// not to, keeps its own.
    #[test]
    fn runs_doubtful_by_chance_alone_go_again_from_another_seed() {
        let (data, cfg) = small_maze();
        let run = |c: &TrainConfig, verdict: &Trust| -> Result<Trained> {
            let mut t = train_seed(&data, c, &Plan::of(&data, c), &Device::Cpu, None)?;
            t.trust = verdict.clone();
            Ok(t)
        };
        let split = judged(&[
            ("rewards", 9.0, true),
            (trust::HALVES_AGREE, 0.3, false),
            (trust::CHOICE_HOLDS, 0.2, false),
        ]);
        let trusted = judged(&[("rewards", 9.0, true), (trust::HALVES_AGREE, 0.9, true)]);
        let wrong = judged(&[
            (trust::PATH_RANKING, 0.5, false),
            (trust::HALVES_AGREE, 0.3, false),
        ]);
        let other = TrainConfig {
            seed: another_seed(cfg.seed),
            ..cfg.clone()
        };
        let bytes = |t: &Trained| t.model.to_bytes(false).unwrap();
        let first = run(&cfg, &split).unwrap();
        let own = bytes(&first);
        let out = with_another_seed(first, &cfg, |o| run(o, &trusted)).unwrap();
        let r = out.another_seed.clone().unwrap();
        assert!(r.exported_again && r.first_failed == [trust::HALVES_AGREE, trust::CHOICE_HOLDS]);
        assert_eq!((r.first_seed, r.seed), (cfg.seed, other.seed));
        assert_eq!(out.config.seed, other.seed);
        assert_eq!(out.trust.verdict, trust::Verdict::Trusted);
        assert!(bytes(&out) == bytes(&run(&other, &trusted).unwrap()) && bytes(&out) != own);
        let labels = |k: &str| out.timings.iter().any(|(t, _)| t.as_str() == k);
        assert!(labels("labels (latent)") && labels("another seed: labels (latent)"));
        // The run directory says so, and holds the seed of the V it exports.
        let dir = tempfile::tempdir().unwrap();
        let m = crate::run::dir::write_run(dir.path(), &data, &out, "u.npz", "f", &[]).unwrap();
        assert_eq!(m.another_seed.as_ref(), Some(&r));
        let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
        let line = format!("another seed       seed {}: doubtful", cfg.seed);
        let summary = read("summary.txt");
        assert!(summary.contains(&line), "{summary}");
        assert!(read("report.md").contains("the run went again from another seed"));
        assert!(read("config.toml").contains(&format!("seed = {}\n", other.seed)));
        // Doubtful from the other seed too: the first seed's V stays.
        let first = run(&cfg, &split).unwrap();
        let out = with_another_seed(first, &cfg, |o| run(o, &split)).unwrap();
        assert!(out.another_seed.as_ref().is_some_and(|r| !r.exported_again));
        assert!(out.config.seed == cfg.seed && bytes(&out) == own);
        // Not tried.
        let never = |_: &TrainConfig| -> Result<Trained> { panic!("no other seed") };
        let off = TrainConfig {
            retry_with_another_seed: false,
            ..cfg.clone()
        };
        for (c, verdict) in [(&cfg, &trusted), (&cfg, &wrong), (&off, &split)] {
            let out = with_another_seed(run(c, verdict).unwrap(), c, never).unwrap();
            assert!(out.another_seed.is_none() && out.config.seed == c.seed);
        }
        // The other seed of any seed `config.toml` holds is one it can hold too.
        let far = TrainConfig {
            seed: another_seed(i64::MAX as u64),
            ..cfg.clone()
        };
        let text = far.to_toml().unwrap();
        assert_eq!(cfg.overlay_toml(&text).unwrap().seed, far.seed);
    }

    /// A goal appended to the maze's states, each episode's own, the first row of each
    /// episode but the first still showing the last one's (as Minari records chained
    /// episodes): those rows are left out of mining and Q-learning, counted, and take the
    /// most used label.
    #[test]
    fn rows_that_carry_the_last_goal_are_left_out() {
        let (data, cfg) = small_maze();
        let d = data.obs_dim();
        let (obs, next) = (data.observations.to_f32(), data.next_observations.to_f32());
        let (mut o, mut nx) = (vec![], vec![]);
        let mut episode = 0;
        let mut firsts = vec![];
        for i in 0..data.len() {
            if i > 0 && !data.continues(i - 1) {
                episode += 1;
                firsts.push(i);
            }
            let shown = if firsts.last() == Some(&i) {
                episode - 1
            } else {
                episode
            };
            o.extend_from_slice(&obs[i * d..(i + 1) * d]);
            o.push(shown as f32);
            nx.extend_from_slice(&next[i * d..(i + 1) * d]);
            nx.push(episode as f32);
        }
        assert!(firsts.len() >= 2);
        let goals = Dataset {
            obs_shape: vec![d + 1],
            observations: o.into(),
            next_observations: nx.into(),
            ..data.clone()
        };
        let trained = train(&goals, &cfg, &Device::Cpu, None).unwrap();
        let left_out = trained.contexts.clone().unwrap();
        assert_eq!(left_out.dims, [d]);
        assert_eq!(left_out.rows, firsts.len());
        assert_eq!(trained.labelled.labels.len(), goals.len());
        assert_eq!(trained.q_transitions, goals.len() - firsts.len());
        let common = labels::most_used(&trained.labelled.labels, trained.labelled.num_actions);
        assert!(firsts.iter().all(|&i| trained.labelled.labels[i] == common));
        // Without the carried goal, nothing is left out.
        assert!(train(&data, &cfg, &Device::Cpu, None)
            .unwrap()
            .contexts
            .is_none());
    }

    /// Rewards whose returns overflow f32 training, and settings out of range, are refused
    /// before any training, naming what is wrong.
    #[test]
    fn huge_rewards_and_bad_settings_are_refused_up_front() {
        let (mut data, cfg) = small_maze();
        let mut bad = cfg.clone();
        bad.mining.latent_actions = 0;
        let e = train(&data, &bad, &Device::Cpu, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("mining.latent_actions"), "{e}");
        let mut bad = cfg.clone();
        bad.density.enabled = true;
        bad.density.dims = vec![0, 9];
        let e = train(&data, &bad, &Device::Cpu, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("density.dims names dimension 9"), "{e}");
        data.rewards[7] = 1e38;
        let e = train(&data, &cfg, &Device::Cpu, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("scale the rewards") && e.contains("1e38"), "{e}");
    }

    /// A kill right after any checkpoint (mid-screening, mid-mining, mid-Q-learning, BCQ
    /// included) and a resume give the same model bytes as an uninterrupted run.
    #[test]
    fn resumed_runs_end_with_the_uninterrupted_model() {
        let device = Device::Cpu;
        let (data, mut cfg) = small_maze();
        cfg.q = QKind::Bcq;
        cfg.distill.steps = 50;
        let bytes = |t: &Trained| t.model.to_bytes(false).unwrap();
        let reference = bytes(&train(&data, &cfg, &device, None).unwrap());
        // Screening is 60 steps per restart (0.3 of 200), so progress 70 lies in the second
        // restart and 150 in the main phase.
        for (stage, step) in [("mining", 70), ("mining", 150), ("q-learning", 120)] {
            let dir = tempfile::tempdir().unwrap();
            let resumed = interrupted_and_resumed(&data, &cfg, stage, step, dir.path());
            assert!(bytes(&resumed) == reference, "{stage} {step}");
            // Another run's checkpoint is refused.
            let mut other = cfg.clone();
            other.seed = 9;
            let id = serde_json::json!({ "config": other });
            assert!(Checkpointer::resume(dir.path(), CHECKPOINT_EVERY, &id).is_err());
        }
    }

    /// An ensemble exports one network fitted to its members' mean V, compares its two
    /// halves for the agreement check, names every member's seed, and resumes exactly.
    #[test]
    fn ensembles_export_the_fitted_mean_and_resume_exactly() {
        let device = Device::Cpu;
        let (data, mut cfg) = small_maze();
        cfg.ensemble = 4;
        cfg.distill.steps = 300;
        let trained = train(&data, &cfg, &device, None).unwrap();
        let bytes = trained.model.to_bytes(false).unwrap();
        let m = laq_runtime::Model::new_checked(&bytes).unwrap();
        assert_eq!(m.output_dim(), 1);
        let seeds = &trained.model.info["q_seed"];
        assert_eq!(seeds.split(',').count(), 4, "{seeds}");
        assert!(trained.distill_max_abs_error.is_some());
        let agreement = trained
            .trust
            .checks
            .iter()
            .find(|c| c.name == "seed_agreement")
            .expect("the halves are compared");
        assert!(agreement.value.is_finite(), "{}", trained.trust);
        // One checkpoint of the ten is exported: of those that fail the fewest checks, the
        // one whose V ranks the data's shortest ways best, the later on ties.
        let candidates = &trained.q_checkpoints;
        assert_eq!(candidates.len(), cfg.dqn.checkpoints, "{candidates:?}");
        let chosen: Vec<usize> = (0..candidates.len())
            .filter(|&c| candidates[c].chosen)
            .collect();
        assert_eq!(chosen.len(), 1, "{candidates:?}");
        let key = |c: &Candidate| (std::cmp::Reverse(c.checks_failed), c.path_ranking.unwrap());
        let best = key(&candidates[chosen[0]]);
        assert!(candidates.iter().all(|c| key(c) <= best), "{candidates:?}");
        assert!(
            candidates[chosen[0] + 1..].iter().all(|c| key(c) < best),
            "{candidates:?}"
        );
        // The exported network ranks states like the mean of the members it was fitted to,
        // as they were at the chosen checkpoint.
        let all: Vec<usize> = (0..data.len()).collect();
        let probe = probe_states(&data);
        let bound = bootstrap_bound(&data, cfg.ways(&data).as_ref(), &cfg);
        assert!(bound.is_some(), "the maze's data show ways to the reward");
        let members: Vec<Vec<f32>> = (0..4)
            .map(|j| {
                let inputs = DqnInputs {
                    data: &data,
                    labels: &trained.labelled.labels,
                    num_actions: trained.labelled.num_actions,
                    variant: QKind::Dqn,
                    probe: Some(&probe),
                    bound: bound.as_deref(),
                };
                let seed = member_seed(cfg.seed, j);
                let net = qlearn::dqn(&inputs, &cfg.dqn, seed, &device, None).unwrap();
                let at = &net.snapshots[chosen[0]];
                at.values_of(&data, &all, &device).unwrap()
            })
            .collect();
        let exported = trained.model.values_of(&data, &device).unwrap();
        let rho = crate::util::stats::spearman(&as_f64(&exported), &as_f64(&mean_of(&members)));
        assert!(rho > 0.9, "fitted V vs the members' mean: {rho}");
        // A kill mid-Q-learning and a resume end with the same bytes.
        let dir = tempfile::tempdir().unwrap();
        let resumed = interrupted_and_resumed(&data, &cfg, "q-learning", 120, dir.path());
        assert!(resumed.model.to_bytes(false).unwrap() == bytes);
    }

    /// Checkpoints far apart: the tests interrupt at a step, not at a time.
    const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

    /// `train` interrupted at `step` of `stage` (checkpointing into `dir`), then resumed.
    fn interrupted_and_resumed(
        data: &Dataset,
        cfg: &TrainConfig,
        stage: &str,
        step: u64,
        dir: &std::path::Path,
    ) -> Trained {
        use crate::stages::checkpoint::Interrupted;
        let device = Device::Cpu;
        let id = serde_json::json!({ "config": cfg });
        let mut c = Checkpointer::new(dir, CHECKPOINT_EVERY, &id).unwrap();
        c.interrupt_at = Some((stage.to_string(), step));
        let e = train(data, cfg, &device, Some(&mut c))
            .err()
            .expect("interrupted");
        assert!(e.downcast_ref::<Interrupted>().is_some(), "{e:#}");
        let mut c = Checkpointer::resume(dir, CHECKPOINT_EVERY, &id).unwrap();
        train(data, cfg, &device, Some(&mut c)).unwrap()
    }

    /// `for_data`'s settings for `data` with small convolutional networks (4 and 8
    /// channels, a 16-unit head), 3 latent actions and `steps` of mining and of DQN.
    fn small_image_config(data: &Dataset, steps: usize, restarts: usize) -> TrainConfig {
        let mut cfg = TrainConfig::for_data(data);
        cfg.mining.latent_actions = 3;
        cfg.mining.steps = steps;
        cfg.mining.restarts = restarts;
        cfg.mining.conv.channels = vec![4, 8];
        cfg.dqn.conv.channels = vec![4, 8];
        cfg.dqn.hidden = vec![16];
        cfg.dqn.steps = steps;
        cfg.dqn.target_update = 10;
        cfg
    }

    /// An ensemble on images exports a convolutional network with one output, which the
    /// runtime evaluates like the trainer.
    #[test]
    fn image_ensembles_export_a_fitted_conv_net() {
        let device = Device::Cpu;
        let data = crate::envs::squares::moving_squares(200, 32, true, 2);
        let mut cfg = small_image_config(&data, 20, 1);
        cfg.ensemble = 2;
        cfg.distill.hidden = vec![16];
        cfg.distill.steps = 20;
        let trained = train(&data, &cfg, &device, None).unwrap();
        let bytes = trained.model.to_bytes(false).unwrap();
        let m = laq_runtime::Model::new_checked(&bytes).unwrap();
        assert_eq!((m.output_dim(), m.num_conv()), (1, 2));
        assert_eq!(trained.model.info["q_seed"].split(',').count(), 2);
        let v = trained.model.values_of(&data, &device).unwrap();
        // `qnet` is the fitted network, not a member: its V is the exported one.
        let all: Vec<usize> = (0..data.len()).collect();
        let qnet = trained
            .qnet
            .as_ref()
            .unwrap()
            .values_of(&data, &all, &device)
            .unwrap();
        for (i, (a, b)) in qnet.iter().zip(&v).enumerate() {
            assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{i}: {a} vs {b}");
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("value.safetensors");
        std::fs::write(&file, &bytes).unwrap();
        let from_runtime = crate::eval::predict::values(&file, &data).unwrap();
        for (i, (a, b)) in from_runtime.iter().zip(&v).enumerate() {
            assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{i}: {a} vs {b}");
        }
    }

    /// The convolutional path (image mining with screening restarts, then a convolutional
    /// DQN) resumes exactly too, and its run directory holds the runtime's image model,
    /// which `laq predict` scores like the exported Q-network (of the two, the one the
    /// checks prefer: here the second), and that network is `Trained::qnet`.
    #[test]
    fn image_runs_resume_exactly_and_write_a_runtime_model() {
        let device = Device::Cpu;
        let data = crate::envs::squares::moving_squares(300, 32, true, 2);
        let mut cfg = small_image_config(&data, 40, 2);
        assert_eq!(cfg.q, QKind::Auto);
        // Which of two seeds is exported, here after one Q-learning (a second one along
        // the trajectories resumes exactly too: the test below).
        cfg.retry_along_trajectories = false;
        let info = BTreeMap::new();
        let bytes = |t: &Trained| {
            let mut b = t.qnet.as_ref().unwrap().to_bytes(0.99, &info).unwrap();
            b.extend(t.model.to_bytes(false).unwrap());
            b
        };
        let whole = train(&data, &cfg, &device, None).unwrap();
        assert_eq!(whole.q_used, QKind::Dqn);
        // The second seed's Q-function is exported (`q_seed` names the seed judged).
        let second = member_seed(cfg.seed, 1).to_string();
        assert_eq!(whole.model.info.get("q_seed"), Some(&second));
        let reference = bytes(&whole);
        // Screening is 12 steps per restart, so 18 lies in the second restart.
        for (stage, step) in [("mining", 18), ("mining", 30), ("q-learning", 25)] {
            let dir = tempfile::tempdir().unwrap();
            let resumed = interrupted_and_resumed(&data, &cfg, stage, step, dir.path());
            assert_eq!(
                resumed.labelled.labels, whole.labelled.labels,
                "{stage} {step}"
            );
            assert!(bytes(&resumed) == reference, "{stage} {step}");
        }
        let dir = tempfile::tempdir().unwrap();
        let m = crate::run::dir::write_run(
            dir.path(),
            &data,
            &whole,
            "squares.npz",
            &data.fingerprint(),
            &[],
        )
        .unwrap();
        assert_eq!(m.obs_shape, [3, 32, 32]);
        assert_eq!(crate::run::record::RunMetrics::read(dir.path()).unwrap(), m);
        let run = crate::run::record::RunInfo::read(dir.path()).unwrap();
        assert_eq!(run.model_format, format!("{} 2", laq_runtime::format::NAME));
        let summary = std::fs::read_to_string(dir.path().join("summary.txt")).unwrap();
        assert!(
            summary.contains("2 convolutions on [3, 32, 32] images"),
            "{summary}"
        );
        let from_runtime =
            crate::eval::predict::values(&dir.path().join(crate::run::record::VALUE_FILE), &data)
                .unwrap();
        let trained = whole.model.values_of(&data, &device).unwrap();
        let all: Vec<usize> = (0..data.len()).collect();
        let qnet = whole.qnet.as_ref().unwrap();
        let from_qnet = qnet.values_of(&data, &all, &device).unwrap();
        for (i, ((a, b), c)) in from_runtime
            .iter()
            .zip(&trained)
            .zip(&from_qnet)
            .enumerate()
        {
            assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{i}: {a} vs {b}");
            assert!((a - c).abs() <= 1e-5 * c.abs().max(1.0), "{i}: {a} vs {c}");
        }
        // A trainer-only Q-network file is refused with a pointer to the runtime's file.
        let qnet = dir.path().join("qnet.safetensors");
        whole
            .qnet
            .as_ref()
            .unwrap()
            .save(&qnet, 0.99, &info)
            .unwrap();
        let e = crate::eval::predict::values(&qnet, &data)
            .unwrap_err()
            .to_string();
        assert!(e.contains("value.safetensors"), "{e}");
    }

    #[test]
    fn settings_round_trip_through_toml_and_reject_typos() {
        let cfg = TrainConfig::continuous();
        let text = cfg.to_toml().unwrap();
        let back = TrainConfig::default().overlay_toml(&text).unwrap();
        assert_eq!(back.to_toml().unwrap(), text);
        let part = TrainConfig::default()
            .overlay_toml("seed = 7\ntop_actions = 4\n[dqn]\nsteps = 10\n")
            .unwrap();
        assert_eq!(
            (part.seed, part.top_actions, part.dqn.steps),
            (7, Some(4), 10)
        );
        assert_eq!(part.mining.steps, TrainConfig::default().mining.steps);
        let e = TrainConfig::default()
            .overlay_toml("[dqn]\nstep = 10\n")
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("unknown setting `dqn.step`"),
            "{e:#}"
        );
        let e = TrainConfig::default()
            .overlay_toml("seed = \"x\"")
            .unwrap_err();
        assert!(format!("{e:#}").contains("wrong type"), "{e:#}");
    }

    /// A controller that dithers on its way to a near goal collects less than its data's
    /// fastest ways show: every state is three steps from the reward at most, so a V
    /// near the largest return everywhere is what the data shows, not over-estimation.
    #[test]
    fn the_ways_show_states_near_the_largest_return_that_a_dithering_controller_does_not() {
        let path = [0.0f32, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 2.0, 3.0];
        let n = path.len() - 1;
        let d = Dataset {
            obs_shape: vec![1],
            observations: path[..n].to_vec().into(),
            next_observations: path[1..].to_vec().into(),
            rewards: (0..n).map(|i| (i + 1 == n) as u8 as f32).collect(),
            terminals: (0..n).map(|i| i + 1 == n).collect(),
            timeouts: None,
            next_missing: None,
            actions: None,
        };
        let cfg = TrainConfig::continuous();
        let returns = trust::data_returns(&d, 0.99);
        // Eight steps to go from the first row: 0.99^k >= 0.95 for k <= 5 only.
        assert_eq!(trust::shown_near_max(&returns, None, 1.0), 6.0 / 9.0);
        let traced = trust::Traced::of(&d, &cfg);
        assert_eq!(near_max_shown(&returns, &traced, 0.99, 1.0), 1.0);
        // Without ways (none through unrewarded data), the returns alone.
        let unrewarded = Dataset {
            rewards: vec![0.0; n],
            ..d
        };
        let traced = trust::Traced::of(&unrewarded, &cfg);
        let returns = trust::data_returns(&unrewarded, 0.99);
        assert_eq!(near_max_shown(&returns, &traced, 0.99, 1.0), 0.0);
    }

    /// One-step targets that leave V below the data's returns train again along the
    /// trajectories; the V the checks prefer is exported, and `config.toml`'s settings
    /// give it again in one Q-learning. A run without the retry keeps its one-step V and
    /// is told what to try.
    #[test]
    fn one_step_runs_short_of_the_returns_train_again_along_the_trajectories() {
        let device = Device::Cpu;
        let (data, mut cfg) = small_maze();
        cfg.labels = crate::stages::labels::LabelSource::Single;
        cfg.dqn.lambda = 0.0;
        cfg.dqn.target_update = 150;
        let trained = train(&data, &cfg, &device, None).unwrap();
        let r = trained.retargeted.clone().expect("trained again");
        assert!(
            r.one_step_failed
                .iter()
                .any(|c| c == trust::BELOW_DATA_RETURNS),
            "{r}"
        );
        assert!(r.exported_along, "{r}");
        assert_eq!(trained.config.dqn.lambda, 1.0);
        assert_eq!(r.target_update, trained.config.dqn.target_update);
        assert!(trained
            .timings
            .iter()
            .any(|(k, _)| k.starts_with("again: ")));
        let again = train(&data, &trained.config, &device, None).unwrap();
        assert!(again.retargeted.is_none());
        let bytes = |t: &Trained| t.model.to_bytes(false).unwrap();
        assert!(bytes(&again) == bytes(&trained));
        // Killed in its first Q-learning and resumed, it ends with the same model.
        let dir = tempfile::tempdir().unwrap();
        let resumed = interrupted_and_resumed(&data, &cfg, "q-learning", 120, dir.path());
        assert!(resumed.retargeted.is_some() && bytes(&resumed) == bytes(&trained));
        cfg.retry_along_trajectories = false;
        let kept = train(&data, &cfg, &device, None).unwrap();
        assert!(kept.retargeted.is_none() && kept.config.dqn.lambda == 0.0);
        let advised = kept
            .trust
            .advice
            .iter()
            .any(|a| a.contains("`dqn.lambda = 1`"));
        assert!(advised, "{}", kept.trust);
    }

    /// Episodes of four steps on a line (between integers: no table), each cut (a timeout)
    /// on its reward at the fourth, as Minari's goal-reaching data end each goal reached.
    fn cut_at_rewards(n: usize) -> Dataset {
        Dataset {
            obs_shape: vec![1],
            observations: (0..n)
                .map(|i| (i % 4) as f32 + 0.5)
                .collect::<Vec<f32>>()
                .into(),
            next_observations: (0..n)
                .map(|i| (i % 4) as f32 + 1.5)
                .collect::<Vec<f32>>()
                .into(),
            rewards: (0..n).map(|i| f32::from(u8::from(i % 4 == 3))).collect(),
            terminals: vec![false; n],
            timeouts: Some((0..n).map(|i| i % 4 == 3).collect()),
            next_missing: None,
            actions: None,
        }
    }

    /// Where a log of vector states cuts its episodes at their rewards, Q-learning ends
    /// them there and `auto` learns by IQL; a log that cuts too few, a setting without
    /// `reward_cuts_end` and frames keep what they had.
    #[test]
    fn episodes_cut_at_their_rewards_end_there_for_q_learning() {
        let d = cut_at_rewards(100);
        let labelled = Labelled {
            labels: vec![0; d.len()],
            num_actions: 1,
            mining_loss: None,
            explained: None,
        };
        let cfg = TrainConfig::continuous();
        let (view, _, _) = q_view(&d, &labelled, None, &cfg);
        let view = view.expect("a view with the cuts ended");
        let ended: Vec<usize> = (0..d.len()).filter(|&i| view.terminals[i]).collect();
        assert_eq!(ended, d.reward_cuts());
        assert_eq!(ended.len(), 25);
        let plan = Plan::of(&d, &cfg);
        assert!(plan.q == QKind::Iql && !plan.without_ways);
        // Kept rows of the most used labels are taken from the ended view.
        let kept = (vec![2, 3, 7], vec![0, 0, 0]);
        let (some, _, _) = q_view(&d, &labelled, Some(&kept), &cfg);
        assert_eq!(some.unwrap().terminals, [false, true, true]);
        // Every row cut, as in a replay buffer of independent transitions: no trajectories.
        let mut bag = cut_at_rewards(100);
        bag.timeouts = Some(vec![true; 100]);
        assert_eq!(bag.reward_cuts().len(), 25);
        assert!(cfg.ends_at_reward_cuts(&bag).is_empty());

        let recorded = TrainConfig {
            reward_cuts_end: false,
            ..cfg.clone()
        };
        assert!(q_view(&d, &labelled, None, &recorded).0.is_none());
        assert_eq!(Plan::of(&d, &recorded).q, QKind::Dqn);
        // Fewer than 20 cuts: the log goes on as recorded.
        let few = cut_at_rewards(40);
        assert!(q_view(&few, &labelled, None, &cfg).0.is_none());
        // Fewer than half of the rewarded rows cut: rewards mostly inside episodes.
        let mut inside = cut_at_rewards(100);
        for i in (0..100).filter(|i| i % 4 == 2) {
            inside.rewards[i] = 1.0;
        }
        inside.rewards.iter_mut().take(8).for_each(|r| *r = 1.0);
        assert!(cfg.ends_at_reward_cuts(&inside).is_empty());
        let dqn = TrainConfig {
            q: QKind::Dqn,
            ..cfg
        };
        assert_eq!(Plan::of(&d, &dqn).q, QKind::Dqn);
        let mut frames = cut_at_rewards(100);
        frames.obs_shape = vec![1, 1, 1];
        let images = TrainConfig::images(&[1, 1, 1]);
        assert_eq!(Plan::of(&frames, &images).q, QKind::Dqn);
        assert!(q_view(&frames, &labelled, None, &images).0.is_none());
    }

    /// A car that must swing to climb shows no ways a body can take: `auto` learns it by
    /// IQL, a setting without `iql_without_ways` and an explicit `--q dqn` by DQN; a
    /// corridor, whose ways are kept, by DQN.
    #[test]
    fn data_without_ways_learn_by_iql() {
        let car = crate::run::trust::tests::mountain_car(20_000);
        let cfg = TrainConfig::continuous();
        let plan = Plan::of(&car, &cfg);
        assert!(plan.q == QKind::Iql && plan.without_ways);
        let before = TrainConfig {
            iql_without_ways: false,
            ..cfg.clone()
        };
        assert_eq!(Plan::of(&car, &before).q, QKind::Dqn);
        let dqn = TrainConfig {
            q: QKind::Dqn,
            ..cfg.clone()
        };
        assert_eq!(Plan::of(&car, &dqn).q, QKind::Dqn);
        let corridor = Dataset {
            obs_shape: vec![2],
            observations: (0..400)
                .flat_map(|i| [(i % 20) as f32 * 0.1, 0.5])
                .collect::<Vec<f32>>()
                .into(),
            next_observations: (0..400)
                .flat_map(|i| [(i % 20 + 1) as f32 * 0.1, 0.5])
                .collect::<Vec<f32>>()
                .into(),
            rewards: (0..400)
                .map(|i| f32::from(u8::from(i % 20 == 19)))
                .collect(),
            terminals: (0..400).map(|i| i % 20 == 19).collect(),
            timeouts: None,
            next_missing: None,
            actions: None,
        };
        assert_eq!(Plan::of(&corridor, &cfg).q, QKind::Dqn);
        // The ways judged once are those each Q-learning of the run would find: none for
        // the car, the corridor's own, and with values ignored those of the data as
        // Q-learning sees it.
        assert!(Plan::of(&car, &cfg).ways.kept().is_none());
        let plan = Plan::of(&corridor, &cfg);
        assert!(plan.ways.kept().is_some());
        assert_eq!(plan.ways.kept(), cfg.ways(&corridor).as_ref());
        let ignoring = cfg.ignoring(&[0]);
        let blind = Plan::of(&corridor, &ignoring);
        assert_eq!(
            blind.ways.kept(),
            cfg.ways(&corridor.ignoring(&[0])).as_ref()
        );
        assert_ne!(blind.ways.kept(), plan.ways.kept());
    }

    #[test]
    fn goals_are_values_set_once_an_episode_that_differ_between_them() {
        // Episodes of 10 rows along value 0, each with its own goal (value 1), beside a
        // value that never changes (value 2, as an ignored value reads) and a gripper
        // that each reset opens and the first step closes (value 3).
        let (mut obs, mut next) = (vec![], vec![]);
        for i in 0..60 {
            let goal = (i / 10) as f32;
            let open = if i % 10 == 0 { 1.0 } else { 0.0 };
            obs.extend([(i % 10) as f32, goal, 0.0, open]);
            next.extend([(i % 10 + 1) as f32, goal, 0.0, 0.0]);
        }
        let d = Dataset {
            obs_shape: vec![4],
            observations: obs.into(),
            next_observations: next.into(),
            rewards: vec![0.0; 60],
            terminals: (0..60).map(|i| i % 10 == 9).collect(),
            timeouts: None,
            next_missing: None,
            actions: None,
        };
        // The gripper is a context too (no step within an episode changes it), but it
        // shows one value on every row that changes no context.
        assert_eq!(crate::data::contexts::dims(&d), [false, true, true, true]);
        assert_eq!(crate::data::contexts::goals(&d), [1]);
        // One goal throughout: nothing sets the halves apart.
        assert!(crate::data::contexts::goals(&d.ignoring(&[1])).is_empty());
    }

    #[test]
    fn top_labels_keep_the_most_used() {
        let labels = [2, 0, 2, 1, 2, 0, 3];
        let (idx, new) = top_labels(&labels, 4, 2);
        assert_eq!(idx, vec![0, 1, 2, 4, 5]);
        assert_eq!(new, vec![0, 1, 0, 0, 1]);
    }
}
