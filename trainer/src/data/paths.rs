//! The fewest steps to a reward through the data: a witness of V that no Q-learning
//! made.
//!
//! Each of the data's transitions is a step from its state to its next state; where
//! states recur (a grid world's cells, the frames of a rendered lattice of poses),
//! trajectories meet at them; where they never recur (continuous states),
//! a state may continue from any of its [`NEIGHBOURS`] nearest states within [`REACH`]
//! median steps, and every step and jump costs its length at the data's fast pace
//! ([`PACE`]; a transition at most one step), each dimension measured in units of its
//! own step. The fewest steps from a state to a rewarded transition over that graph is
//! the shortest way the data shows, stitched from many trajectories: it follows
//! corridors and walls (no transition crosses a wall, and a wall is wider than a jump),
//! and ranks states much like the true shortest way on every maze measured
//! (docs/trust.md). Frames that never recur jump where their pixels lie near
//! ([`fewest_steps`] with `near_frames`), where that follows the data's own trajectories;
//! a run holds the ways through continuous states to the same bar
//! (`run::trust::ways_agreement`): a body that cannot move to the states beside it (a
//! car that must swing to climb) has none. Jumps that chain move a state anywhere near;
//! [`Steps::stepped`] are the ways where a step of the data follows each jump, so that a
//! state goes on only as the data does from a state near it: a pendulum that must swing
//! to rise follows those.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::data::contexts;
use crate::data::dedup::StateIds;
use crate::data::{Dataset, Observations};
use crate::util::neighbours::KdTree;
use crate::util::stats;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The nearest states each state may continue from.
pub const NEIGHBOURS: usize = 10;

/// How far a state may jump to a near one, in median steps of the data (Euclidean
/// distance, each dimension in units of its own step, or of its spread without a pace).
pub const REACH: f32 = 2.0;

/// The data's fast pace by default (`ways_pace` in `config.toml`), as a percentile of the
/// lengths of its transitions (Euclidean distance, each dimension in units of its own
/// step: the root mean square of its change over the transitions): with continuous states
/// a step of the ways costs its length at that pace, at most one. A controller better than
/// the data's could cover the same ways at the pace the data shows it can move, not at the
/// pace of whichever controller happened to wander there (slowly turning round, say); the
/// highest lengths are left out, as a collision's rebound can be many times longer than
/// any step the body takes by itself.
pub const PACE: f64 = 95.0;

/// Distance evaluations per nearest-state query at most, and in all (times the state's
/// length): a second or two of arithmetic.
const QUERY_BUDGET: usize = 2000;
const WORK: usize = 4_000_000_000;

/// The longest state that may jump to near ones: beyond it states are frames or other
/// high-dimensional readings, where Euclidean distance says little of nearness; their
/// ways exist where they recur exactly, and for frames where near ([`fewest_steps`]).
pub const MAX_STATE_LEN: usize = 64;

/// The step of a dimension that no transition changes within an episode, as a share of
/// its spread: states that differ in it by a millionth of its spread lie farther apart than
/// a jump reaches.
pub const CONTEXT_STEP: f32 = 1e-6;

/// Whether `data`'s states are frames or longer than [`MAX_STATE_LEN`], which never jump
/// to near ones by themselves: their ways exist where they recur (frames: see also
/// [`fewest_steps`] with `near_frames`).
pub fn never_jump(data: &Dataset) -> bool {
    data.is_image() || data.obs_dim() > MAX_STATE_LEN
}

/// The fewest steps to a rewarded transition through the data, from each row's state and
/// from its next state (module docs); infinite where the data shows no way, and for a
/// next state the source did not hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Steps {
    /// From row `i`'s state.
    pub state: Vec<f64>,
    /// From row `i`'s next state.
    pub next: Vec<f64>,
    /// Whether the ways jump between states that lie near one another (states that never
    /// recur), rather than only meet where states recur.
    pub joined: bool,
    /// From row `i`'s state, where the ways jump between continuous states: the fewest
    /// steps when a jump must be followed by a transition of the data, so that a state
    /// goes on only as the data goes on from a state near it, never from jump to jump.
    /// Jumps that chain move a state anywhere near, as a point mass can (a maze); a body
    /// that cannot (a pendulum whose motor cannot hold it halfway up, which gathers
    /// energy swing by swing) goes on only as its data does, and these steps follow it
    /// (docs/trust.md, "Ways a swinging body takes"). `None` where states recur (no
    /// jumps) and for frames.
    pub stepped: Option<Vec<f64>>,
    /// Of the rows whose state has a way and is not itself rewarded, the share whose way
    /// ends at another reward than the one the row's own trajectory reaches next
    /// ([`Dataset::continues`]): how far the ways stitch the data's trajectories (or the
    /// passes of one long log) together. Where each episode has its own goal (a context
    /// no jump crosses), each way is its own trajectory's, nearly 0.
    pub stitched: f64,
}

/// The least share of the ways that end at another reward than their own trajectory's
/// next ([`Steps::stitched`]) for the ways to bound V ([`Steps::stitch`]). A bound says
/// that no controller reaches a reward faster than the data's fastest way; that holds
/// where the ways are stitched from many trajectories (a maze with one goal: 0.43-1.00 of
/// them end elsewhere than their own trajectory's next reward). Where each episode has
/// its own goal, a context no jump crosses, each way is its own trajectory's
/// (0.00-0.014): a controller's own path then bounds V by what that controller did, and
/// held V far from the truth where the controller was poor (docs/trust.md, "Ways that
/// stitch the trajectories").
pub const MIN_STITCHED: f64 = 0.1;

impl Steps {
    /// Whether these ways stitch the data's trajectories enough to bound V
    /// ([`MIN_STITCHED`]).
    ///
    /// ```
    /// use laq::data::{paths, Dataset};
    /// // Two walks down a line, in steps of 1 and of 0.5: the first reaches the reward at
    /// // 0, the second stops at 4.8; its way jumps to the first's states beside it and
    /// // ends at the first's reward.
    /// let walk = |from: f32, step: f32| -> Vec<f32> {
    ///     (0..10).map(|k| from - step * k as f32).collect()
    /// };
    /// let (first, second) = (walk(9.0, 1.0), walk(9.3, 0.5));
    /// let next = [walk(8.0, 1.0), walk(8.8, 0.5)].concat();
    /// let d = Dataset {
    ///     obs_shape: vec![1],
    ///     observations: [first, second].concat().into(),
    ///     next_observations: next.into(),
    ///     rewards: (0..20).map(|i| f32::from(u8::from(i == 9))).collect(),
    ///     terminals: (0..20).map(|i| i == 9).collect(),
    ///     timeouts: Some((0..20).map(|i| i == 19).collect()),
    ///     next_missing: None,
    ///     actions: None,
    /// };
    /// let ways = paths::fewest_steps(&d, Some(paths::PACE), false).unwrap();
    /// // 10 of the 19 rows with a way (the rewarded one aside) are the second walk's.
    /// assert!((ways.stitched - 10.0 / 19.0).abs() < 1e-9 && ways.stitch());
    /// ```
    pub fn stitch(&self) -> bool {
        self.stitched >= MIN_STITCHED
    }
}

/// Values a frame is projected onto to find the frames near it ([`fewest_steps`] with `near_frames`):
/// random projections keep distances between frames to within about an eighth (the
/// spread of a squared distance over 32 random directions is a quarter of it).
pub const FRAME_PROJECTION: usize = 32;

/// The least Spearman between the steps of ways through frames joined where near and the
/// steps the data's own rewarded trajectories take from the same rows
/// ([`fewest_steps`] with `near_frames`), the same for ways through continuous states
/// corrected for the data (`run::trust::ways_agreement`), and the `trajectory_ranking`
/// check's threshold for V (`run::trust`): one bar for all. Ways that
/// rank the data's own trajectories worse are not the scene's ways (frames of Atari's
/// Freeway, near where their cars are: 0.07-0.09); on mazes drawn as frames they rank them
/// at 0.46-0.69, as the ways through the same mazes' continuous states do (0.50-0.71).
pub const MIN_TRAJECTORY_AGREEMENT: f64 = 0.3;

/// The fewest steps to a reward through frames that never recur, joined where they lie
/// near one another as continuous states are: each frame is projected onto
/// [`FRAME_PROJECTION`] random directions of its pixels (the same for every run), where
/// nearness is measured, and ways run through those projections. Pixels keep their own
/// units (a pixel that barely changes is not magnified into a dimension of its own), so
/// two frames are near when their pixels are: that says where one body moves in an
/// otherwise still scene (a ball over a maze floor), and little where much else moves
/// (the cars of Atari's Freeway), which the ways then show by ranking the data's own
/// rewarded trajectories badly; below [`MIN_TRAJECTORY_AGREEMENT`] they are dropped, as
/// where a jump reaches anywhere ([`jumps_reach_anywhere`]).
fn through_near_frames(data: &Dataset, pace: Option<f64>) -> Option<Steps> {
    let near = projected(data);
    if let Some(far) = jumps_reach_anywhere(&near) {
        log::info!(
            "no ways through the frames: a jump of {} median steps reaches {far:.1} times \
             the distance between two frames drawn at random, so nearness in pixels says \
             nothing of where a step leads",
            REACH
        );
        return None;
    }
    // Frames' ways were measured joined jump to jump only ("Near frames").
    let steps = ways(&near, pace, false, false)?;
    let agreement = trajectory_agreement(data, &steps).unwrap_or(f64::NAN);
    if agreement >= MIN_TRAJECTORY_AGREEMENT {
        Some(steps)
    } else {
        log::info!(
            "no ways through the frames: joined where near, they rank the steps of the \
             data's own rewarded trajectories at Spearman {agreement:.2} (below \
             {MIN_TRAJECTORY_AGREEMENT}), so nearness in pixels is not nearness in the scene"
        );
        None
    }
}

/// Spearman between the fewest `steps` from each row with a way and the steps the data's
/// own rewarded trajectories take from it ([`Dataset::steps_to_reward`]); `None` with
/// fewer than 20 such rows. Ways that follow the data rank its own trajectories much as
/// the trajectories themselves allow.
///
/// ```
/// use laq::data::{paths, Dataset};
/// // One walk down a line to the reward: its ways are its own steps.
/// let obs: Vec<f32> = (1..=30).rev().map(|x| x as f32).collect();
/// let d = Dataset {
///     obs_shape: vec![1],
///     next_observations: obs.iter().map(|x| x - 1.0).collect::<Vec<_>>().into(),
///     observations: obs.clone().into(),
///     rewards: obs.iter().map(|&x| f32::from(u8::from(x == 1.0))).collect(),
///     terminals: obs.iter().map(|&x| x == 1.0).collect(),
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let ways = paths::fewest_steps(&d, Some(paths::PACE), false).unwrap();
/// assert_eq!(paths::trajectory_agreement(&d, &ways), Some(1.0));
/// ```
pub fn trajectory_agreement(data: &Dataset, steps: &Steps) -> Option<f64> {
    let (ways, own): (Vec<f64>, Vec<f64>) = data
        .steps_to_reward()
        .into_iter()
        .filter(|&(i, _)| steps.state[i].is_finite())
        .map(|(i, k)| (steps.state[i], k as f64))
        .unzip();
    (ways.len() >= 20).then(|| stats::spearman(&ways, &own))
}

/// Where a jump ([`REACH`] median steps, Euclidean) is at least as long as the median
/// distance between two of `data`'s states drawn at random, that ratio: there nearness
/// joins unrelated states (pixels saturate: two frames of a small body are as far apart
/// one step away as across the scene). Frames of point-mass mazes measure 0.19-0.53, of
/// Freeway 0.86, our 84x84 navigation stacks 1.40.
fn jumps_reach_anywhere(data: &Dataset) -> Option<f64> {
    let n = data.len();
    let next_of = |i: usize| data.next_observations.row(i, data.obs_dim());
    let missing = |i: usize| data.next_missing.as_ref().is_some_and(|m| m[i]);
    let steps: Vec<f64> = (0..n)
        .filter(|&i| !missing(i))
        .map(|i| distance2(data.obs(i), &next_of(i)).sqrt() as f64)
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(0x7061_6972);
    let pairs: Vec<f64> = (0..4096.min(n * n))
        .map(|_| {
            let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
            distance2(data.obs(a), data.obs(b)).sqrt() as f64
        })
        .collect();
    let ratio = REACH as f64 * stats::percentile(&steps, 50.0) / stats::percentile(&pairs, 50.0);
    (ratio >= 1.0 || ratio.is_nan()).then_some(ratio)
}

/// `data` with each frame and next frame projected onto [`FRAME_PROJECTION`] directions
/// of random signs, drawn from a fixed seed.
fn projected(data: &Dataset) -> Dataset {
    let d = data.obs_dim();
    let mut rng = ChaCha8Rng::seed_from_u64(0x6e65_6172);
    let scale = 1.0 / (d as f32).sqrt();
    let w: Vec<f32> = (0..d * FRAME_PROJECTION)
        .map(|_| if rng.random::<bool>() { scale } else { -scale })
        .collect();
    let project = |o| project_rows(o, data.len(), d, &w);
    Dataset {
        obs_shape: vec![FRAME_PROJECTION],
        observations: project(&data.observations).into(),
        next_observations: project(&data.next_observations).into(),
        rewards: data.rewards.clone(),
        terminals: data.terminals.clone(),
        timeouts: data.timeouts.clone(),
        next_missing: data.next_missing.clone(),
        actions: None,
    }
}

/// Rows `0..n` of `d` values of `o`, each projected onto the [`FRAME_PROJECTION`]
/// directions `w` holds value by value (`w[j * FRAME_PROJECTION + k]` weighs value `j`
/// in direction `k`), in blocks of rows and tiles of values, so that each tile of `w` is
/// read once per block rather than once per row (a frame stack of 84x84x12 makes `w`
/// 11 MB), and each value updates all directions at once (vectorised).
fn project_rows(o: &Observations, n: usize, d: usize, w: &[f32]) -> Vec<f32> {
    const ROWS: usize = 64;
    const TILE: usize = 2048;
    const P: usize = FRAME_PROJECTION;
    let mut out = vec![0f32; n * P];
    let mut block = vec![0f32; ROWS * d];
    for start in (0..n).step_by(ROWS) {
        let rows = ROWS.min(n - start);
        for r in 0..rows {
            block[r * d..(r + 1) * d].copy_from_slice(&o.row(start + r, d));
        }
        let acc = &mut out[start * P..(start + rows) * P];
        for t in (0..d).step_by(TILE) {
            let end = (t + TILE).min(d);
            let tile = &w[t * P..end * P];
            for (r, acc) in acc.chunks_exact_mut(P).enumerate() {
                let x = &block[r * d + t..r * d + end];
                for (&x, w) in x.iter().zip(tile.chunks_exact(P)) {
                    for (a, &w) in acc.iter_mut().zip(w) {
                        *a += x * w;
                    }
                }
            }
        }
    }
    out
}

/// The fewest steps from every row's state and next state to a rewarded transition (a
/// reward above [`Dataset::reward_baseline`]) through the data; where states never
/// recur, with a `pace` (a percentile, such as [`PACE`]) each step and jump costs its
/// length at the data's pace (each dimension in units of its own step), without one each
/// transition is a step and each jump its length in median steps (each dimension
/// standardised by its spread). Images and states longer than [`MAX_STATE_LEN`] never
/// jump (no distance between frames means nearness): `None` for them unless their states
/// recur (at most half as many distinct states as transitions), or, with `near_frames`,
/// for frames that never recur, joined where near ([`FRAME_PROJECTION`], the second
/// example); `None` too for data without a rewarded row, where no ways are found, or
/// where every state with a way is as far as every other (nothing to rank).
///
/// ```
/// use laq::data::Dataset;
/// // Two trajectories on a line: 0 -> 1 -> 2 (rewarded at 2) and 5 -> 4 -> 3, which
/// // never reaches the reward itself but comes within one step of the first.
/// let d = Dataset {
///     obs_shape: vec![1],
///     observations: vec![0.0, 1.0, 2.0, 5.0, 4.0].into(),
///     next_observations: vec![1.0, 2.0, 3.0, 4.0, 3.0].into(),
///     rewards: vec![0.0, 0.0, 1.0, 0.0, 0.0],
///     terminals: vec![false, false, true, false, false],
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// let steps = laq::data::paths::fewest_steps(&d, Some(laq::data::paths::PACE), false).unwrap();
/// let round = |s: &[f64]| -> Vec<f64> { s.iter().map(|s| (s * 1e4).round() / 1e4).collect() };
/// // From 4 the way goes on to 3, then jumps to the near state 2 (as long as a step).
/// assert_eq!(round(&steps.state), [2.0, 1.0, 0.0, 3.0, 2.0]);
/// // The terminal state 3 leads nowhere by itself: it jumps to 2, as from 4.
/// assert_eq!(round(&steps.next), [1.0, 0.0, 1.0, 2.0, 1.0]);
/// ```
///
/// ```
/// use laq::data::{paths, Dataset};
/// // A dot three pixels wide on a row of 32, rewarded on reaching the left end: four
/// // walks leftwards in half-pixel steps, each an eighth of a pixel from the others (no
/// // frame recurs), and one rightwards that never reaches the reward.
/// let frame = |x: f32| -> Vec<f32> {
///     (0..32).map(|p| 255.0 * (-((p as f32 - x) / 1.5).powi(2)).exp()).collect()
/// };
/// let (mut obs, mut next, mut rew) = (vec![], vec![], vec![]);
/// for k in 0..4 {
///     let off = k as f32 / 8.0;
///     for s in (1..56).rev() {
///         let x = 2.0 + s as f32 / 2.0 - off;
///         obs.extend(frame(x));
///         next.extend(frame(x - 0.5));
///         rew.push(if s == 1 { 1.0 } else { 0.0 });
///     }
/// }
/// for s in 1..55 {
///     let x = 2.0 + s as f32 / 2.0 + 0.06;
///     obs.extend(frame(x));
///     next.extend(frame(x + 0.5));
///     rew.push(0.0);
/// }
/// let d = Dataset {
///     obs_shape: vec![1, 1, 32],
///     observations: obs.into(),
///     next_observations: next.into(),
///     terminals: rew.iter().map(|&r| r > 0.0).collect(),
///     rewards: rew,
///     timeouts: None,
///     next_missing: None,
///     actions: None,
/// };
/// assert!(paths::fewest_steps(&d, Some(paths::PACE), false).is_none());
/// let steps = paths::fewest_steps(&d, Some(paths::PACE), true).unwrap();
/// // The rightward walk's frames lie near the leftward walks': the farther right, the
/// // more steps to the reward.
/// let right = &steps.state[4 * 55..];
/// assert!(right.iter().all(|s| s.is_finite()));
/// assert!(right.windows(2).all(|w| w[0] < w[1]), "{right:?}");
/// ```
pub fn fewest_steps(data: &Dataset, pace: Option<f64>, near_frames: bool) -> Option<Steps> {
    ways(data, pace, near_frames, true)
}

/// [`fewest_steps`], with [`Steps::stepped`] found only where `stepped` asks for them.
fn ways(data: &Dataset, pace: Option<f64>, near_frames: bool, stepped: bool) -> Option<Steps> {
    let n = data.len();
    let d = data.obs_dim();
    let baseline = data.reward_baseline();
    if d == 0 || !data.rewards.iter().any(|&r| r > baseline) {
        return None;
    }
    let ids = StateIds::of(data);
    let (at, next, m) = (&ids.state, &ids.next, ids.len());
    // States that recur join trajectories by themselves (a grid world's cells, the frames
    // of a rendered lattice of poses): near states there are other cells, maybe behind a
    // wall, never the same place; there every transition is one step. Frames that never
    // recur have ways only where nearness in their pixels holds.
    let recur = 2 * m <= n;
    if never_jump(data) && !recur {
        return (near_frames && data.is_image())
            .then(|| through_near_frames(data, pace))
            .flatten();
    }
    // For each state, the states that reach it and at what cost: `(from, cost)` in
    // `into[to]` says `from` is at most `cost` plus `to`'s steps away.
    let mut into: Vec<Vec<(u32, f32)>> = vec![vec![]; m];
    let costs = match recur {
        false => jumps(data, &ids.rows(data), at, next, pace, &mut into),
        true => None,
    };
    // The edges into each state before its transitions': its jumps.
    let jumped: Vec<usize> = into.iter().map(Vec::len).collect();
    for i in (0..n).filter(|&i| !data.terminals[i]) {
        if let Some(j) = next[i] {
            let cost = costs.as_ref().map_or(1.0, |c| c[i]);
            into[j].push((at[i] as u32, cost));
        }
    }
    // `end[s]`: the rewarded row where state `s`'s way ends.
    let mut dist = vec![f64::INFINITY; m];
    let mut end = vec![0usize; m];
    for i in 0..n {
        if data.rewards[i] > baseline && dist[at[i]] > 0.0 {
            dist[at[i]] = 0.0;
            end[at[i]] = i;
        }
    }
    backwards(
        &mut dist,
        |node, edge| into[node].iter().for_each(|&(f, c)| edge(f as usize, c)),
        |from, node| end[from] = end[node],
    );
    // A jump, then a transition: state `s` is node `s`, the same state bound to take
    // one of its own transitions next is node `m + s`.
    let stepped = (stepped && !recur).then(|| {
        let mut dist = vec![f64::INFINITY; 2 * m];
        for i in (0..n).filter(|&i| data.rewards[i] > baseline) {
            (dist[at[i]], dist[m + at[i]]) = (0.0, 0.0);
        }
        let edges = |node: usize, edge: &mut dyn FnMut(usize, f32)| match node.checked_sub(m) {
            Some(s) => {
                edge(s, 0.0);
                into[s][..jumped[s]]
                    .iter()
                    .for_each(|&(f, c)| edge(f as usize, c));
            }
            None => (into[node][jumped[node]..].iter()).for_each(|&(f, c)| edge(m + f as usize, c)),
        };
        backwards(&mut dist, edges, |_, _| {});
        at.iter().map(|&a| dist[a]).collect()
    });
    // The rewarded row each row's own trajectory reaches first: as many rows on as steps.
    let mut own = vec![None; n];
    for (i, k) in data.steps_to_reward() {
        own[i] = Some(i + k);
    }
    let (mut ways, mut across) = (0usize, 0usize);
    for i in (0..n).filter(|&i| dist[at[i]].is_finite() && dist[at[i]] > 0.0) {
        ways += 1;
        across += usize::from(own[i] != Some(end[at[i]]));
    }
    let state: Vec<f64> = at.iter().map(|&a| dist[a]).collect();
    let mut finite = state.iter().filter(|s| s.is_finite());
    let first = *finite.next()?;
    finite.any(|&s| s != first).then(|| Steps {
        next: next
            .iter()
            .map(|j| j.map_or(f64::INFINITY, |j| dist[j]))
            .collect(),
        state,
        joined: !recur,
        stepped,
        stitched: across as f64 / ways.max(1) as f64,
    })
}

/// Dijkstra backwards from the nodes at 0 in `dist`: `edges(node, edge)` calls
/// `edge(from, cost)` for each edge into `node`, and `improved(from, node)` hears of each
/// way from `from` that now runs through `node`. Steps are non-negative, and the bits of
/// non-negative floats order like the floats.
fn backwards(
    dist: &mut [f64],
    edges: impl Fn(usize, &mut dyn FnMut(usize, f32)),
    mut improved: impl FnMut(usize, usize),
) {
    let mut heap: BinaryHeap<_> = (0..dist.len())
        .filter(|&s| dist[s] == 0.0)
        .map(|s| Reverse((0f64.to_bits(), s)))
        .collect();
    while let Some(Reverse((bits, node))) = heap.pop() {
        let s = f64::from_bits(bits);
        if s > dist[node] {
            continue;
        }
        edges(node, &mut |from, cost| {
            let t = s + cost as f64;
            if t < dist[from] {
                dist[from] = t;
                improved(from, node);
                heap.push(Reverse((t.to_bits(), from)));
            }
        });
    }
}

/// Edges from every state to its nearest states within [`REACH`] median steps, each
/// costing its length at the data's `pace` (in median steps without one), never across a
/// context ([`contexts::dims`]); returns what each row's own transition costs at that pace
/// (its length, at most one step), or `None` without a pace or where the data's
/// transitions have no length (each costs a step).
fn jumps(
    data: &Dataset,
    states: &[f32],
    at: &[usize],
    next: &[Option<usize>],
    pace: Option<f64>,
    into: &mut [Vec<(u32, f32)>],
) -> Option<Vec<f32>> {
    let d = data.obs_dim();
    let m = into.len();
    let obs = data.observations.to_f32();
    let (mean, std) = stats::column_stats(&obs, d);
    // Without a pace, standardised by the observations' spread, so every dimension weighs
    // alike; with one, each dimension in units of its own step, so that a step along any
    // of them is as long: a velocity, which swings round within a few steps, weighs less
    // than the position it moves, which takes many.
    let scale = match pace {
        None => (std.iter().zip(contexts::dims(data)))
            .map(|(&s, context)| if context { s * CONTEXT_STEP } else { s })
            .collect(),
        Some(_) => step_scale(data, &obs, &std),
    };
    let points = stats::standardise(states, &mean, &scale);
    let point = |i: usize| &points[i * d..(i + 1) * d];
    let length: Vec<Option<f32>> = (0..data.len())
        .map(|i| next[i].map(|j| distance2(point(at[i]), point(j)).sqrt()))
        .collect();
    let lengths: Vec<f64> = length.iter().flatten().map(|&l| l as f64).collect();
    let step = stats::percentile(&lengths, 50.0) as f32;
    let fast = pace.map_or(step, |p| stats::percentile(&lengths, p) as f32);
    if !(step > 0.0 && fast.is_finite()) {
        return None;
    }
    let tree = KdTree::new(&points, d);
    let radius2 = (REACH * step).powi(2);
    let budget = (WORK / (m * d).max(1)).clamp(NEIGHBOURS + 1, QUERY_BUDGET);
    for a in 0..m {
        for (d2, b) in tree.nearest(point(a), NEIGHBOURS + 1, radius2, budget) {
            if b != a {
                into[b].push((a as u32, d2.sqrt() / fast));
            }
        }
    }
    pace.map(|_| {
        length
            .iter()
            .map(|l| l.map_or(1.0, |l| (l / fast).min(1.0)))
            .collect()
    })
}

/// Each dimension's root mean square change over the data's transitions (those with a
/// next state; `obs` are its observations); a context ([`contexts::dims`]: a dimension no
/// transition changes within an episode, such as the goal of a Minari PointMaze episode)
/// has a step of [`CONTEXT_STEP`] times its `spread`, so jumps do not cross it.
fn step_scale(data: &Dataset, obs: &[f32], spread: &[f32]) -> Vec<f32> {
    let d = spread.len();
    let next = data.next_observations.to_f32();
    let missing = |i: usize| data.next_missing.as_ref().is_some_and(|m| m[i]);
    let mut sum = vec![0f64; d];
    let mut n = 0usize;
    for (i, (a, b)) in obs.chunks(d).zip(next.chunks(d)).enumerate() {
        if missing(i) {
            continue;
        }
        n += 1;
        for (j, (x, y)) in a.iter().zip(b).enumerate() {
            sum[j] += ((y - x) as f64).powi(2);
        }
    }
    sum.iter()
        .zip(spread)
        .zip(contexts::dims(data))
        .map(
            |((s, &spread), context)| match (s / n.max(1) as f64).sqrt() as f32 {
                r if r > 1e-6 && !context => r,
                // Unchanged within every episode (a goal, a task, a setting of the episode):
                // no way the data shows joins states that differ in it, however near they
                // lie in the other dimensions, so any difference is more steps than a jump
                // takes.
                _ => spread * CONTEXT_STEP,
            },
        )
        .collect()
}

fn distance2(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// States a turn round [`one_way_ring`].
    pub(crate) const RING: usize = 40;

    /// A body that only ever turns one way round a ring of [`RING`] steps of length 1,
    /// rewarded on coming round to angle 0: three passes a third of a step apart, each
    /// starting one step past 0, the first rewarded on its step onto 0 (row `RING - 2`).
    pub(crate) fn one_way_ring() -> Dataset {
        let step = std::f32::consts::TAU / RING as f32;
        let radius = 0.5 / (step / 2.0).sin();
        let at = |a: f32| [radius * a.cos(), radius * a.sin()];
        let (mut obs, mut next, mut rew) = (vec![], vec![], vec![]);
        for pass in 0..3 {
            let off = pass as f32 / 3.0;
            for k in 1..=RING {
                let a = (k as f32 + off) * step;
                obs.push(at(a));
                next.push(at(a + step));
                rew.push(if pass == 0 && k == RING - 1 { 1.0 } else { 0.0 });
            }
        }
        dataset(obs, next, rew)
    }

    fn dataset(obs: Vec<[f32; 2]>, next: Vec<[f32; 2]>, rewards: Vec<f32>) -> Dataset {
        Dataset {
            obs_shape: vec![2],
            observations: obs.concat().into(),
            next_observations: next.concat().into(),
            terminals: rewards.iter().map(|&r| r > 0.0).collect(),
            rewards,
            timeouts: None,
            next_missing: None,
            actions: None,
        }
    }

    /// A walker in a room split by a wall along x = 0 (a door at the top, y = 9): the
    /// reward is at the bottom of the left side. The right side's bottom lies near the
    /// reward in the plane, but its way goes up to the door and down again.
    fn walled_room() -> Dataset {
        let (mut obs, mut next, mut rew) = (vec![], vec![], vec![]);
        let mut walk = |from: [f32; 2], to: [f32; 2], steps: usize, rewarded_at_end: bool| {
            for s in 0..steps {
                let f = |k: usize| {
                    let t = k as f32 / steps as f32;
                    [
                        from[0] + t * (to[0] - from[0]),
                        from[1] + t * (to[1] - from[1]),
                    ]
                };
                obs.push(f(s));
                next.push(f(s + 1));
                rew.push(if rewarded_at_end && s + 1 == steps {
                    1.0
                } else {
                    0.0
                });
            }
        };
        // Many passes so that states lie near one another: down the left side to the
        // reward, up the right side to the door, through the door.
        for k in 0..20 {
            let x = 0.5 + 0.02 * k as f32;
            walk([-x, 9.0], [-x, 0.0], 90, true);
            walk([x, 0.0], [x, 9.0], 90, false);
            walk([x, 9.0], [-x, 9.0], 20, false);
        }
        dataset(obs, next, rew)
    }

    #[test]
    fn the_way_goes_round_the_wall() {
        let data = walled_room();
        let steps = fewest_steps(&data, Some(PACE), false).unwrap().state;
        let near = |x: f32, y: f32| {
            (0..data.len())
                .min_by(|&a, &b| {
                    let d = |i: usize| {
                        let o = data.obs(i);
                        (o[0] - x).powi(2) + (o[1] - y).powi(2)
                    };
                    d(a).total_cmp(&d(b))
                })
                .unwrap()
        };
        let (left_bottom, right_bottom, right_top) =
            (near(-0.6, 0.2), near(0.6, 0.2), near(0.6, 8.8));
        assert!(steps[left_bottom] < 5.0, "{}", steps[left_bottom]);
        // The right side's bottom is farther than its top: its way leads up to the door,
        // 88 steps that cost about a third of a step each (in units of each dimension's
        // own step, the walks through the door, the data's fast pace, are about three times
        // as long as the walks up and down).
        let up = steps[right_bottom] - steps[right_top];
        assert!(up > 25.0, "{up}");
        assert!(steps.iter().all(|s| s.is_finite()));
    }

    #[test]
    fn ways_within_each_episode_bound_nothing() {
        // Twenty walks down a line towards a reward at its end; the odd ones stop halfway.
        // With one goal the halfway walks' ways run on along the others to their rewards;
        // with a goal of its own in each episode (a context no jump crosses) every way is
        // its own walk's, and the halfway walks have none.
        for own_goals in [false, true] {
            let (mut obs, mut next, mut rew, mut ends) = (vec![], vec![], vec![], vec![]);
            for k in 0..20 {
                let goal = if own_goals { k as f32 } else { 0.0 };
                let len = if k % 2 == 0 { 100 } else { 50 };
                let x = |s: usize| 10.0 - 0.1 * s as f32 + 0.003 * k as f32;
                for s in 0..len {
                    obs.push([x(s), goal]);
                    next.push([x(s + 1), goal]);
                    rew.push(if s == 99 { 1.0 } else { 0.0 });
                    ends.push(s + 1 == len);
                }
            }
            let mut data = dataset(obs, next, rew);
            data.timeouts = Some(ends);
            let ways = fewest_steps(&data, Some(PACE), false).unwrap();
            if own_goals {
                assert_eq!(ways.stitched, 0.0);
                assert!(!ways.stitch());
            } else {
                assert!(ways.stitched >= 0.25 && ways.stitch(), "{}", ways.stitched);
            }
        }
        // One log that never ends: down the line to the reward, which does not end it,
        // back up, and halfway down again. The second pass's ways end at the first
        // pass's reward, of the same trajectory but not the one it reaches next (none).
        let xs: Vec<f32> = (0..100)
            .map(|s| 10.0 - 0.1 * s as f32)
            .chain((0..100).map(|s| 0.1 * s as f32 + 0.003))
            .chain((0..50).map(|s| 10.0 - 0.1 * s as f32 + 0.006))
            .collect();
        let n = xs.len();
        let obs: Vec<[f32; 2]> = xs.iter().map(|&x| [x, 0.0]).collect();
        let mut next: Vec<[f32; 2]> = obs[1..].to_vec();
        next.push([xs[n - 1] - 0.1, 0.0]);
        let rew: Vec<f32> = (0..n).map(|i| f32::from(u8::from(i == 99))).collect();
        let mut data = dataset(obs, next, rew);
        data.terminals = vec![false; n];
        let ways = fewest_steps(&data, Some(PACE), false).unwrap();
        assert!(ways.stitched >= 0.25 && ways.stitch(), "{}", ways.stitched);
    }

    /// Episodes whose goal is part of the state (a dimension no transition within an
    /// episode changes), as in Minari's PointMaze data: the even episodes walk down a
    /// corridor to a reward at its bottom, the odd ones up to a reward at its top, each
    /// episode's goal a little apart from another's; each begins where the last ended, its
    /// first observation showing the last one's goal (as Minari records it) or its own. A
    /// state's way is its own goal's, not the reward of a neighbouring goal a step away.
    #[test]
    fn jumps_do_not_cross_a_goal() {
        for recorded_late in [false, true] {
            let (mut obs, mut next, mut rew) = (vec![], vec![], vec![]);
            for k in 0..20 {
                // Goals in two groups far apart, taken in turns: where the first
                // observation shows the last goal, the goal's change at an episode's start
                // is as large as those of a Minari maze's random goals.
                let g = |k: usize| 0.01 * k as f32 + 5.0 * ((k / 2) % 2) as f32;
                let at = |s: usize| match k % 2 {
                    0 => 10.0 - 0.1 * s as f32,
                    _ => 0.1 * s as f32,
                };
                for s in 0..100 {
                    let shown = match (recorded_late, s, k) {
                        (true, 0, 1..) => g(k - 1),
                        _ => g(k),
                    };
                    obs.push([at(s), shown]);
                    next.push([at(s + 1), g(k)]);
                    rew.push(if s == 99 { 1.0 } else { 0.0 });
                }
            }
            let data = dataset(obs, next, rew);
            for pace in [Some(PACE), None] {
                let steps = fewest_steps(&data, pace, false).unwrap().state;
                // The second state of an even episode (at the top) is its whole walk from
                // its reward; the top of the corridor is one step from the odd episodes'
                // reward.
                for k in [0, 2, 10, 18] {
                    let s = steps[100 * k + 1];
                    assert!(s > 95.0, "episode {k} ({recorded_late}, {pace:?}): {s}");
                }
                for k in [1, 3, 19] {
                    let s = steps[100 * k + 99];
                    assert!(s < 1.5, "episode {k} ({recorded_late}, {pace:?}): {s}");
                }
            }
        }
    }

    #[test]
    fn recurring_states_join_without_jumps() {
        // A corridor of cells 0..5 walked both ways, the reward on entering cell 0; cell
        // 9 sits beside cell 0 in the plane but is only ever reached from cell 4.
        let cell = |c: f32| [c, 0.0];
        let (mut obs, mut next, mut rew) = (vec![], vec![], vec![]);
        for _ in 0..3 {
            for c in (1..5).rev() {
                obs.push(cell(c as f32));
                next.push(cell(c as f32 - 1.0));
                rew.push(if c == 1 { 1.0 } else { 0.0 });
            }
            obs.push(cell(4.0));
            next.push([0.0, 1.0]);
            rew.push(0.0);
            obs.push([0.0, 1.0]);
            next.push(cell(4.0));
            rew.push(0.0);
        }
        let data = dataset(obs, next, rew);
        let steps = fewest_steps(&data, Some(PACE), false).unwrap().state;
        // Cell 4 is 3 steps from the rewarded step out of cell 1; the state beside cell 0
        // is 4 (through cell 4), however near cell 0 it lies.
        assert_eq!(steps[0], 3.0);
        assert_eq!(steps[5], 4.0);
    }

    /// Frames of a rendered lattice of poses recur: their ways are counted through the
    /// frames they share; frames that never recur have none.
    #[test]
    fn frames_that_recur_have_ways_and_others_none() {
        // 1x2x2 frames: frame c shows cell c of a corridor walked towards cell 0 three
        // times, the reward on entering it.
        let frame = |c: u8| [c, 0, 0, 255 - c];
        let (mut obs, mut next, mut rew) = (vec![], vec![], vec![]);
        for _ in 0..3 {
            for c in (1..5u8).rev() {
                obs.extend(frame(c));
                next.extend(frame(c - 1));
                rew.push(if c == 1 { 1.0 } else { 0.0 });
            }
        }
        let frames = |obs: Vec<u8>, next: Vec<u8>, rewards: Vec<f32>| Dataset {
            obs_shape: vec![1, 2, 2],
            observations: obs.into(),
            next_observations: next.into(),
            terminals: rewards.iter().map(|&r| r > 0.0).collect(),
            rewards,
            timeouts: None,
            next_missing: None,
            actions: None,
        };
        let data = frames(obs.clone(), next.clone(), rew.clone());
        assert!(data.is_image());
        let steps = fewest_steps(&data, Some(PACE), false).unwrap();
        assert_eq!(steps.state[..4], [3.0, 2.0, 1.0, 0.0]);
        assert_eq!(steps.next[..3], [2.0, 1.0, 0.0]);
        // Once through, every frame appears once: no ways (they would only be the data's
        // own trajectory), as for any frames that never recur.
        let once = frames(obs[..16].to_vec(), next[..16].to_vec(), rew[..4].to_vec());
        assert_eq!(fewest_steps(&once, Some(PACE), false), None);
    }

    /// Frames of a dot walking to a reward, `width` pixels wide and `stride` pixels a
    /// step, beside a clock hand of brightness `clock` that turns with time.
    fn dot_walks(width: f32, stride: f32, clock: f32) -> Dataset {
        const W: usize = 48;
        let blob = |x: f32, a: f32, width: f32| -> Vec<f32> {
            (0..W)
                .map(|p| a * (-((p as f32 - x) / width).powi(2)).exp())
                .collect()
        };
        let frame = |x: f32, t: usize| -> Vec<f32> {
            let mut f = blob(x, 30.0, width);
            f.extend(blob((t % W) as f32, clock, 4.0));
            f
        };
        let (mut obs, mut next, mut rew) = (vec![], vec![], vec![]);
        let mut t = 0;
        let steps = (44.0 / stride) as usize;
        for k in 0..16 {
            let off = k as f32 * stride / 16.0;
            for s in (1..=steps).rev() {
                let x = 2.0 + s as f32 * stride - off;
                obs.extend(frame(x, t));
                next.extend(frame(x - stride, t + 1));
                rew.push(if s == 1 { 1.0 } else { 0.0 });
                t += 1 + k % 3;
            }
        }
        Dataset {
            obs_shape: vec![1, 2, W],
            observations: obs.into(),
            next_observations: next.into(),
            terminals: rew.iter().map(|&r| r > 0.0).collect(),
            rewards: rew,
            timeouts: None,
            next_missing: None,
            actions: None,
        }
    }

    /// Near frames join into ways where a dot moves less than its width a step in a still
    /// scene; a bright clock hand beside it makes frames near where the clock shows the
    /// same time, wherever the dot is, and the ways, which rank the walks' own steps
    /// badly, are dropped; a dot that moves more than its width a step is as far from
    /// where it was as from anywhere, and its frames make no ways.
    #[test]
    fn near_frames_join_only_where_nearness_follows_the_trajectories() {
        let still = fewest_steps(&dot_walks(1.5, 0.5, 0.0), Some(PACE), true).unwrap();
        assert!(still.state[0] > still.state[44], "{:?}", &still.state[..88]);
        let clock = dot_walks(1.5, 0.5, 255.0);
        assert_eq!(jumps_reach_anywhere(&projected(&clock)), None);
        assert_eq!(fewest_steps(&clock, Some(PACE), true), None);
        let fast = dot_walks(0.7, 2.0, 0.0);
        assert!(jumps_reach_anywhere(&projected(&fast)).is_some());
        assert_eq!(fewest_steps(&fast, Some(PACE), true), None);
    }

    /// On [`one_way_ring`], just past the reward the states lie near those just before
    /// it, yet the body goes the whole way round.
    #[test]
    fn a_step_after_each_jump_goes_the_way_the_body_turns() {
        let n = RING;
        let ways = fewest_steps(&one_way_ring(), Some(PACE), false).unwrap();
        let stepped = ways.stepped.clone().unwrap();
        for (s, c) in stepped.iter().zip(&ways.state) {
            assert!(
                s >= c,
                "{s} < {c}: a step after each jump is one way of the many"
            );
        }
        // Two steps before the rewarded one, both go on as the body turns (2 steps; a
        // jump to the next pass saves a little); three steps past 0, jumps that chain go
        // back against its turning as fast as it turns (4), a step after each jump the
        // whole way round (36).
        let (before, past) = (n - 4, 2);
        assert!((stepped[before] - 2.0).abs() < 0.01, "{}", stepped[before]);
        assert!(
            (ways.state[before] - 2.0).abs() < 0.01,
            "{}",
            ways.state[before]
        );
        assert!(ways.state[past] < 4.01, "{}", ways.state[past]);
        assert!(stepped[past] > 35.0, "{}", stepped[past]);
    }

    #[test]
    fn slow_stretches_cost_their_length() {
        // The reward at 0 on a line, reached from 10 in steps of 1 and from -10 in steps
        // of 1/4 (a slow controller on that side): both ends are as far from it.
        let (mut obs, mut next, mut rew) = (vec![], vec![], vec![]);
        for k in 0..5 {
            let y = 0.1 * k as f32;
            for (from, steps) in [(10.0f32, 10), (-10.0, 40)] {
                let at = |s: usize| [from - from * s as f32 / steps as f32, y];
                for s in 0..steps {
                    obs.push(at(s));
                    next.push(at(s + 1));
                    rew.push(if s + 1 == steps { 1.0 } else { 0.0 });
                }
            }
        }
        let data = dataset(obs, next, rew);
        let steps = fewest_steps(&data, Some(PACE), false).unwrap().state;
        let (fast, slow) = (steps[0], steps[10]);
        assert_eq!((data.obs(0)[0], data.obs(10)[0]), (10.0, -10.0));
        // 9 steps to the rewarded one from either end, though the slow end takes 39.
        assert!((fast - 9.0).abs() < 1e-3, "{fast}");
        assert!((slow - 9.75).abs() < 1e-3, "{slow}");
        // Without a pace, transitions are counted.
        let counted = fewest_steps(&data, None, false).unwrap().state;
        assert_eq!((counted[0], counted[10]), (9.0, 39.0));
    }

    #[test]
    fn no_reward_or_long_states_give_nothing() {
        let mut data = walled_room();
        data.rewards.iter_mut().for_each(|r| *r = 0.0);
        assert!(fewest_steps(&data, Some(PACE), false).is_none());
        // The same walks with each state repeated to 66 values: too long for distances.
        let data = walled_room();
        let widen = |x: &[f32]| -> Vec<f32> { x.iter().flat_map(|&v| [v; 33]).collect() };
        let wide = Dataset {
            obs_shape: vec![66],
            observations: widen(&data.observations.to_f32()).into(),
            next_observations: widen(&data.next_observations.to_f32()).into(),
            ..data
        };
        assert!(fewest_steps(&wide, Some(PACE), false).is_none());
    }
}
