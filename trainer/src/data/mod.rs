//! Datasets of `(s, s', r)` transitions: reading, validating and writing the documented
//! format (`docs/dataset-format.md`), as `.npz` or `.safetensors`.

pub mod array;
pub mod contexts;
pub mod cost;
pub mod dedup;
pub mod files;
pub mod following;
pub mod frames;
pub mod import;
pub mod observations;
pub mod paths;
pub mod read;

#[cfg(test)]
use array::f16_to_f32;
pub use array::{DType, RawArray};
pub use files::{read_arrays, write_arrays};
pub use observations::{ObsIter, ObsStorage, Observations};

use anyhow::{bail, Context, Result};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

/// Reward cuts a log must show before it counts as cutting its episodes at their rewards
/// ([`Dataset::cut_at_rewards`]).
pub const REWARD_CUTS_MIN: usize = 20;

/// Ground-truth actions, kept only for evaluation and the ground-truth reference.
#[derive(Clone, Debug, PartialEq)]
pub enum Actions {
    Discrete(Vec<i64>),
    Continuous { dim: usize, values: Vec<f32> },
}

impl Actions {
    /// The actions of rows `idx`, in that order.
    pub fn select(&self, idx: &[usize]) -> Actions {
        match self {
            Actions::Discrete(a) => Actions::Discrete(idx.iter().map(|&i| a[i]).collect()),
            Actions::Continuous { dim, values } => Actions::Continuous {
                dim: *dim,
                values: idx
                    .iter()
                    .flat_map(|&i| row_of(values, *dim, i))
                    .copied()
                    .collect(),
            },
        }
    }
}

/// A validated set of transitions. Observations are flattened row-major, as f32 or, when
/// the file stores them as u8 (images), as u8 (see [`Observations`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// Shape of one observation (e.g. `[2]`, or `[C, H, W]` for images).
    pub obs_shape: Vec<usize>,
    pub observations: Observations,
    pub next_observations: Observations,
    pub rewards: Vec<f32>,
    pub terminals: Vec<bool>,
    pub timeouts: Option<Vec<bool>>,
    /// Terminal rows whose next observation the source did not hold (a D4RL file without
    /// `next_observations` ends each episode on such a row, often the rewarded one). Their
    /// `next_observations` row repeats the observation; Q-learning never reads it (no
    /// bootstrap past a terminal) and mining leaves these rows out.
    pub next_missing: Option<Vec<bool>>,
    pub actions: Option<Actions>,
}

impl Dataset {
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// FNV-1a over the dataset's arrays: a fingerprint that tells whether a resumed run reads
    /// the same data, stable across platforms and versions.
    pub fn fingerprint(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h ^= b as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        for d in &self.obs_shape {
            eat(&(*d as u64).to_le_bytes());
        }
        for obs in [&self.observations, &self.next_observations] {
            match obs.as_u8() {
                // The bytes of each u8's f32, looked up: the same bytes as converting
                // each value, at a fraction of the cost on frames.
                Some(v) => {
                    static AS_F32: [[u8; 4]; 256] = {
                        let mut t = [[0u8; 4]; 256];
                        let mut i = 0;
                        while i < 256 {
                            t[i] = (i as f32).to_le_bytes();
                            i += 1;
                        }
                        t
                    };
                    for &x in v {
                        eat(&AS_F32[x as usize]);
                    }
                }
                None => obs.iter().for_each(|v| eat(&v.to_le_bytes())),
            }
        }
        for v in &self.rewards {
            eat(&v.to_le_bytes());
        }
        for &t in &self.terminals {
            eat(&[t as u8]);
        }
        for &t in self.next_missing.iter().flatten() {
            eat(&[t as u8]);
        }
        format!("{h:016x}")
    }

    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// Number of f32 values in one observation.
    pub fn obs_dim(&self) -> usize {
        self.obs_shape.iter().product()
    }

    /// Observation `i` of a dataset stored as f32 (vector states).
    ///
    /// # Panics
    /// When the observations are stored as u8; [`Dataset::obs_row`] takes either storage.
    pub fn obs(&self, i: usize) -> &[f32] {
        let d = self.obs_dim();
        match &self.observations {
            Observations::F32(v) => &v[i * d..(i + 1) * d],
            Observations::U8(_) => panic!("Dataset::obs on u8 observations; use obs_row"),
        }
    }

    /// Next observation `i` of a dataset stored as f32 (see [`Dataset::obs`]).
    ///
    /// # Panics
    /// When the observations are stored as u8; [`Dataset::next_obs_row`] takes either.
    pub fn next_obs(&self, i: usize) -> &[f32] {
        let d = self.obs_dim();
        match &self.next_observations {
            Observations::F32(v) => &v[i * d..(i + 1) * d],
            Observations::U8(_) => panic!("Dataset::next_obs on u8 observations; use next_obs_row"),
        }
    }

    /// Observation `i` as f32, whatever the storage (borrowed when stored as f32).
    pub fn obs_row(&self, i: usize) -> Cow<'_, [f32]> {
        self.observations.row(i, self.obs_dim())
    }

    /// Next observation `i` as f32, whatever the storage.
    pub fn next_obs_row(&self, i: usize) -> Cow<'_, [f32]> {
        self.next_observations.row(i, self.obs_dim())
    }

    /// Whether row `i + 1` continues row `i`'s trajectory: it starts where row `i` ended,
    /// and no terminal or timeout lies between them.
    pub fn continues(&self, i: usize) -> bool {
        i + 1 < self.len()
            && !self.terminals[i]
            && !self.timeouts.as_ref().is_some_and(|t| t[i])
            && self.next_obs_row(i) == self.obs_row(i + 1)
    }

    /// The reward most steps carry where it is a cost: below 0 and on at least half of the
    /// rows (-1 a step up to 0 at the goal, say); 0 otherwise. A row is rewarded where its
    /// reward is above it, so a cost per step leads to the goal as 0 a step and 1 at the
    /// goal do, and a penalty below it (a crash) leads nowhere.
    ///
    /// ```
    /// use laq::data::Dataset;
    /// let mut d = Dataset {
    ///     obs_shape: vec![1],
    ///     observations: vec![0.0, 1.0, 2.0].into(),
    ///     next_observations: vec![1.0, 2.0, 3.0].into(),
    ///     rewards: vec![-1.0, -1.0, 0.0],
    ///     terminals: vec![false, false, true],
    ///     timeouts: None,
    ///     next_missing: None,
    ///     actions: None,
    /// };
    /// assert_eq!(d.reward_baseline(), -1.0);
    /// assert_eq!(d.steps_to_reward(), [(2, 0), (1, 1), (0, 2)]);
    /// d.rewards = vec![0.0, -1.0, 1.0];
    /// assert_eq!(d.reward_baseline(), 0.0);
    /// ```
    pub fn reward_baseline(&self) -> f32 {
        let n = self.rewards.len();
        let mut r = self.rewards.clone();
        if n == 0 {
            return 0.0;
        }
        let (_, &mut median, _) = r.select_nth_unstable_by(n / 2, f32::total_cmp);
        let at = self.rewards.iter().filter(|&&x| x == median).count();
        if median < 0.0 && at * 2 >= n {
            median
        } else {
            0.0
        }
    }

    /// Rows whose trajectory reaches a reward (a reward above [`Dataset::reward_baseline`],
    /// at this row or later), with the number of steps to it, last row first.
    ///
    /// ```
    /// use laq::data::{Actions, Dataset};
    /// let d = Dataset {
    ///     obs_shape: vec![1],
    ///     observations: vec![0.0, 1.0, 2.0, 7.0].into(),
    ///     next_observations: vec![1.0, 2.0, 3.0, 8.0].into(),
    ///     rewards: vec![0.0, 0.0, 1.0, 0.0],
    ///     terminals: vec![false, false, true, false],
    ///     timeouts: None,
    ///     next_missing: None,
    ///     actions: None,
    /// };
    /// assert_eq!(d.steps_to_reward(), [(2, 0), (1, 1), (0, 2)]);
    /// ```
    pub fn steps_to_reward(&self) -> Vec<(usize, usize)> {
        let baseline = self.reward_baseline();
        let mut next: Option<usize> = None;
        let mut out = vec![];
        for i in (0..self.len()).rev() {
            next = if self.rewards[i] > baseline {
                Some(0)
            } else if self.continues(i) {
                next.map(|k| k + 1)
            } else {
                None
            };
            if let Some(k) = next {
                out.push((i, k));
            }
        }
        out
    }

    /// Rows on which the log cuts an episode at its reward: a reward above
    /// [`Dataset::reward_baseline`] on a row that is not terminal and that the next row
    /// does not go on from ([`Dataset::continues`]: a timeout, or a break). Minari's
    /// goal-reaching data record each goal reached as a timeout and go on from there with
    /// another; a recording that changes the goal on the row after each reward breaks there
    /// once that row, which carries the last goal, is left out ([`crate::data::contexts`]).
    ///
    /// ```
    /// use laq::data::Dataset;
    /// let d = Dataset {
    ///     obs_shape: vec![1],
    ///     observations: vec![0.0, 1.0, 2.0, 3.0, 5.0, 6.0].into(),
    ///     next_observations: vec![1.0, 2.0, 3.0, 4.0, 6.0, 7.0].into(),
    ///     rewards: vec![0.0, 1.0, 0.0, 1.0, 1.0, 0.0],
    ///     terminals: vec![false, false, false, false, true, false],
    ///     timeouts: Some(vec![false, true, true, false, false, false]),
    ///     next_missing: None,
    ///     actions: None,
    /// };
    /// // Row 1 is cut on its reward, row 3 breaks there (row 4 starts elsewhere); row 2
    /// // is cut without a reward, row 4 ends on its reward as a terminal.
    /// assert_eq!(d.reward_cuts(), [1, 3]);
    /// ```
    pub fn reward_cuts(&self) -> Vec<usize> {
        let baseline = self.reward_baseline();
        (0..self.len())
            .filter(|&i| self.rewards[i] > baseline && !self.terminals[i] && !self.continues(i))
            .collect()
    }

    /// The rows on which the log cuts its episodes at their rewards
    /// ([`Dataset::reward_cuts`]), where it does so as a rule: at least
    /// [`REWARD_CUTS_MIN`] such rows, at least half of its rewarded rows, and rows that hold
    /// trajectories ([`Dataset::holds_trajectories`]: in a replay buffer every rewarded
    /// row is a cut). None otherwise: a log that cuts an episode on a reward now and then,
    /// at a fixed length or where its recorder lost a row, goes on as recorded.
    ///
    /// ```
    /// use laq::data::Dataset;
    /// // Episodes of four steps, each cut on its reward at the fourth.
    /// let n = 100;
    /// let mut d = Dataset {
    ///     obs_shape: vec![1],
    ///     observations: (0..n).map(|i| (i % 4) as f32).collect::<Vec<f32>>().into(),
    ///     next_observations: (0..n).map(|i| (i % 4 + 1) as f32).collect::<Vec<f32>>().into(),
    ///     rewards: (0..n).map(|i| (i % 4 == 3) as u8 as f32).collect(),
    ///     terminals: vec![false; n],
    ///     timeouts: Some((0..n).map(|i| i % 4 == 3).collect()),
    ///     next_missing: None,
    ///     actions: None,
    /// };
    /// assert_eq!(d.cut_at_rewards().len(), 25);
    /// // Rewarded on the two rows before each cut too: most rewards lie within episodes.
    /// d.rewards = (0..n).map(|i| (i % 4 >= 1) as u8 as f32).collect();
    /// assert_eq!(d.reward_cuts().len(), 25);
    /// assert!(d.cut_at_rewards().is_empty());
    /// ```
    pub fn cut_at_rewards(&self) -> Vec<usize> {
        let cuts = self.reward_cuts();
        let baseline = self.reward_baseline();
        let rewarded = self.rewards.iter().filter(|&&r| r > baseline).count();
        match cuts.len() >= REWARD_CUTS_MIN && 2 * cuts.len() >= rewarded {
            true if self.holds_trajectories() => cuts,
            _ => vec![],
        }
    }

    /// Whether the rows hold trajectories: at least [`contexts::MIN_CONTINUING`] of them
    /// go on into the next ([`Dataset::continues`]); not a replay buffer of independent
    /// transitions, in which every row is cut.
    pub fn holds_trajectories(&self) -> bool {
        let continuing = (0..self.len()).filter(|&i| self.continues(i)).count();
        continuing as f64 >= contexts::MIN_CONTINUING * self.len() as f64
    }

    /// Whether observations are images `[C, H, W]`.
    pub fn is_image(&self) -> bool {
        self.obs_shape.len() == 3
    }

    /// Bytes the observations and next observations take in memory.
    pub fn obs_memory_bytes(&self) -> usize {
        self.observations.memory_bytes() + self.next_observations.memory_bytes()
    }

    /// The transitions at `idx`, in that order.
    pub fn select(&self, idx: &[usize]) -> Dataset {
        let d = self.obs_dim();
        Dataset {
            obs_shape: self.obs_shape.clone(),
            observations: self.observations.select(idx, d),
            next_observations: self.next_observations.select(idx, d),
            rewards: idx.iter().map(|&i| self.rewards[i]).collect(),
            terminals: idx.iter().map(|&i| self.terminals[i]).collect(),
            timeouts: self
                .timeouts
                .as_ref()
                .map(|t| idx.iter().map(|&i| t[i]).collect()),
            next_missing: self
                .next_missing
                .as_ref()
                .map(|t| idx.iter().map(|&i| t[i]).collect()),
            actions: self.actions.as_ref().map(|a| a.select(idx)),
        }
    }

    /// The same transitions with the state values `values` held at zero, before and after
    /// each step: what a run that ignores them learns from (`ignored_values`).
    ///
    /// ```
    /// use laq::data::Dataset;
    /// let d = Dataset {
    ///     obs_shape: vec![3],
    ///     observations: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0].into(),
    ///     next_observations: vec![2.0, 3.0, 4.0, 5.0, 6.0, 7.0].into(),
    ///     rewards: vec![0.0, 1.0],
    ///     terminals: vec![false, true],
    ///     timeouts: None,
    ///     next_missing: None,
    ///     actions: None,
    /// };
    /// let z = d.ignoring(&[1]);
    /// assert_eq!(z.observations.to_f32().as_ref(), &[1.0, 0.0, 3.0, 4.0, 0.0, 6.0]);
    /// assert_eq!(z.next_observations.to_f32().as_ref(), &[2.0, 0.0, 4.0, 5.0, 0.0, 7.0]);
    /// ```
    pub fn ignoring(&self, values: &[usize]) -> Dataset {
        let d = self.obs_dim();
        let zero = |o: &Observations| -> Observations {
            let mut o = o.clone();
            match &mut o {
                Observations::F32(v) => v
                    .chunks_exact_mut(d)
                    .for_each(|row| values.iter().for_each(|&j| row[j] = 0.0)),
                Observations::U8(v) => v
                    .chunks_exact_mut(d)
                    .for_each(|row| values.iter().for_each(|&j| row[j] = 0)),
            }
            o
        };
        Dataset {
            obs_shape: self.obs_shape.clone(),
            observations: zero(&self.observations),
            next_observations: zero(&self.next_observations),
            rewards: self.rewards.clone(),
            terminals: self.terminals.clone(),
            timeouts: self.timeouts.clone(),
            next_missing: self.next_missing.clone(),
            actions: self.actions.clone(),
        }
    }

    /// Rows whose next observation is known: all but the [`Dataset::next_missing`] ones.
    pub fn rows_with_next(&self) -> Vec<usize> {
        match &self.next_missing {
            Some(m) => (0..self.len()).filter(|&i| !m[i]).collect(),
            None => (0..self.len()).collect(),
        }
    }

    /// How many rows have no next observation.
    pub fn missing_next_count(&self) -> usize {
        self.next_missing
            .as_ref()
            .map_or(0, |m| m.iter().filter(|&&x| x).count())
    }

    /// Discrete ground-truth actions, or a clear error naming what is missing.
    pub fn discrete_actions(&self, why: &str) -> Result<&[i64]> {
        match &self.actions {
            Some(Actions::Discrete(a)) => Ok(a),
            Some(Actions::Continuous { .. }) => {
                bail!("{why} needs discrete ground-truth `actions`, but this dataset's are continuous")
            }
            None => bail!(
                "{why} needs ground-truth `actions` in the dataset, and this dataset has none \
                 (labels `latent`, `single`, `cluster` and `cluster-diff` work without them)"
            ),
        }
    }

    /// Reads and validates a dataset in any format laq reads (see [`read::read`]), with
    /// the file's own rewards.
    pub fn load(path: &Path) -> Result<Self> {
        Ok(read::read(path, &read::ReadOptions::default())?.data)
    }

    /// Where each episode ends: at a terminal, at a timeout, and at the last row.
    pub fn episode_ends(&self) -> Vec<bool> {
        (0..self.len())
            .map(|i| {
                self.terminals[i]
                    || self.timeouts.as_ref().is_some_and(|t| t[i])
                    || i + 1 == self.len()
            })
            .collect()
    }

    /// Validates named arrays against the dataset format; frames stored channels-last,
    /// grey or stacked are read as `[C, H, W]` ([`frames::FrameLayout`]).
    pub fn from_arrays(mut arrays: BTreeMap<String, RawArray>) -> Result<Self> {
        const KNOWN: [&str; 8] = [
            "observations",
            "next_observations",
            "rewards",
            "terminals",
            "timeouts",
            "next_missing",
            "actions",
            "infos",
        ];
        for (k, a) in &arrays {
            a.check_size(k)?;
        }
        let unknown: Vec<_> = arrays
            .keys()
            .filter(|k| !KNOWN.contains(&k.as_str()))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            bail!("unknown keys {unknown:?}; allowed: {KNOWN:?}");
        }
        let have: Vec<_> = arrays.keys().cloned().collect();
        let mut required = |k: &str| {
            arrays
                .remove(k)
                .with_context(|| format!("missing key `{k}` (keys present: {have:?})"))
        };
        let obs = required("observations")?;
        let next = required("next_observations")?;
        let rewards = required("rewards")?;
        let terminals = required("terminals")?;
        let take = |arrays: &mut BTreeMap<String, RawArray>, k: &str| arrays.remove(k);

        if obs.shape.len() < 2 {
            bail!(
                "key `observations`: expected shape [N, ...] with at least 2 dimensions, got {:?}",
                obs.shape
            );
        }
        let n = obs.shape[0];
        if n == 0 {
            bail!("the dataset holds no transitions (N = 0)");
        }
        if obs.shape[1..].contains(&0) {
            bail!(
                "key `observations`: shape {:?} has a dimension of 0, so its rows hold no \
                 values",
                obs.shape
            );
        }
        if next.shape != obs.shape {
            bail!(
                "key `next_observations`: shape {:?} differs from `observations` {:?}",
                next.shape,
                obs.shape
            );
        }
        // Frames stored as other tools store them are read as `[C, H, W]`.
        let (obs, next) = match frames::FrameLayout::of(&obs.shape[1..], obs.dtype == DType::U8) {
            Some(layout) => {
                log::info!(
                    "observations of shape {:?}: {}, read as frames of {:?}",
                    obs.shape,
                    layout.describe(),
                    layout.shape()
                );
                let read_as = |mut a: RawArray| {
                    layout.reorder_bytes(&mut a.bytes, a.dtype.size());
                    a.shape.truncate(1);
                    a.shape.extend(layout.shape());
                    a
                };
                (read_as(obs), read_as(next))
            }
            None => (obs, next),
        };
        let check_n = |k: &str, a: &RawArray| -> Result<()> {
            if a.shape.first() != Some(&n) {
                bail!("key `{k}`: shape {:?} does not start with N = {n}", a.shape);
            }
            Ok(())
        };
        check_n("rewards", &rewards)?;
        if rewards.shape.len() != 1 {
            bail!(
                "key `rewards`: expected shape [{n}], got {:?}",
                rewards.shape
            );
        }
        let flags = |k: &str, a: &RawArray| -> Result<Vec<bool>> {
            check_n(k, a)?;
            if a.shape.len() != 1 {
                bail!("key `{k}`: expected shape [{n}], got {:?}", a.shape);
            }
            a.flags(k)
        };
        let terminals = flags("terminals", &terminals)?;
        let timeouts = match take(&mut arrays, "timeouts") {
            Some(a) => Some(flags("timeouts", &a)?),
            None => None,
        };
        let next_missing = match take(&mut arrays, "next_missing") {
            Some(a) => Some(flags("next_missing", &a)?),
            None => None,
        };
        if let Some(i) = next_missing
            .iter()
            .flatten()
            .zip(&terminals)
            .position(|(&m, &t)| m && !t)
        {
            bail!(
                "key `next_missing`: row {i} has no next observation but is not terminal; \
                 Q-learning would bootstrap from a next observation that does not exist"
            );
        }
        let actions = match take(&mut arrays, "actions") {
            None => None,
            Some(a) => {
                check_n("actions", &a)?;
                match (a.shape.len(), a.dtype.is_integer()) {
                    (1, true) => {
                        let v: Vec<i64> = a.to_f64().into_iter().map(|x| x as i64).collect();
                        if let Some(i) = v.iter().position(|&x| x < 0) {
                            bail!("key `actions`: row {i} is negative ({})", v[i]);
                        }
                        Some(Actions::Discrete(v))
                    }
                    (1, false) | (2, false) => {
                        let dim = a.shape.get(1).copied().unwrap_or(1);
                        let values = a.to_f32();
                        if let Some(i) = values.iter().position(|x| !x.is_finite()) {
                            bail!("key `actions`: element {i} is not finite ({})", values[i]);
                        }
                        Some(Actions::Continuous { dim, values })
                    }
                    _ => bail!(
                        "key `actions`: expected [N] integers or [N, A] floats, got {:?} of {}",
                        a.shape,
                        a.dtype.name()
                    ),
                }
            }
        };
        let obs_shape = obs.shape[1..].to_vec();
        // u8 observations (images) stay u8: converting them would take 4x the memory.
        let (observations, next_observations) = if obs.dtype == DType::U8 && next.dtype == DType::U8
        {
            (Observations::U8(obs.bytes), Observations::U8(next.bytes))
        } else {
            (
                Observations::F32(read_f32("observations", &obs)),
                Observations::F32(read_f32("next_observations", &next)),
            )
        };
        let rewards = rewards.to_f32();
        for (k, v) in [
            ("observations", observations.as_f32()),
            ("next_observations", next_observations.as_f32()),
            ("rewards", Some(rewards.as_slice())),
        ] {
            let Some(v) = v else { continue };
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                let row = i / (v.len() / n).max(1);
                // f64 values beyond f32's range read as infinite too.
                let why = if v[i].is_infinite() {
                    ", or a value beyond f32's range of 3.4e38"
                } else {
                    ""
                };
                bail!(
                    "key `{k}`: row {row} holds a non-finite value ({}{why})",
                    v[i]
                );
            }
        }
        Ok(Dataset {
            obs_shape,
            observations,
            next_observations,
            rewards,
            terminals,
            timeouts,
            next_missing,
            actions,
        })
    }

    /// The dataset as named arrays, observations in their in-memory storage (f32, or u8
    /// for data read from u8).
    pub fn to_arrays(&self) -> BTreeMap<String, RawArray> {
        let n = self.len();
        let mut shape = vec![n];
        shape.extend(&self.obs_shape);
        let mut m = self.arrays_without_obs();
        for (k, v) in [
            ("observations", &self.observations),
            ("next_observations", &self.next_observations),
        ] {
            let a = match v {
                Observations::F32(v) => RawArray::from_f32(shape.clone(), v),
                Observations::U8(v) => RawArray::from_u8(shape.clone(), v.clone()),
            };
            m.insert(k.into(), a);
        }
        m
    }

    /// The dataset as named arrays with observations stored as `obs`. `ObsStorage::U8`
    /// refuses (naming the key and row) any observation that is not a whole number in
    /// 0..=255, so storing never changes a value.
    pub fn to_arrays_as(&self, obs: ObsStorage) -> Result<BTreeMap<String, RawArray>> {
        if obs == self.observations.storage() && obs == self.next_observations.storage() {
            return Ok(self.to_arrays());
        }
        let n = self.len();
        let mut shape = vec![n];
        shape.extend(&self.obs_shape);
        let d = self.obs_dim().max(1);
        let mut m = self.arrays_without_obs();
        for (k, v) in [
            ("observations", &self.observations),
            ("next_observations", &self.next_observations),
        ] {
            if obs == ObsStorage::F32 {
                m.insert(k.into(), RawArray::from_f32(shape.clone(), &v.to_f32()));
                continue;
            }
            if let Observations::U8(b) = v {
                m.insert(k.into(), RawArray::from_u8(shape.clone(), b.clone()));
                continue;
            }
            let bytes = v
                .iter()
                .enumerate()
                .map(|(i, &x)| {
                    if (0.0..=255.0).contains(&x) && x.fract() == 0.0 {
                        Ok(x as u8)
                    } else {
                        bail!(
                            "key `{k}`: row {} holds {x}, which u8 storage cannot keep \
                             (whole numbers 0..=255 only)",
                            i / d
                        )
                    }
                })
                .collect::<Result<Vec<u8>>>()?;
            m.insert(k.into(), RawArray::from_u8(shape.clone(), bytes));
        }
        Ok(m)
    }

    fn arrays_without_obs(&self) -> BTreeMap<String, RawArray> {
        let n = self.len();
        let mut m = BTreeMap::new();
        m.insert("rewards".into(), RawArray::from_f32(vec![n], &self.rewards));
        m.insert(
            "terminals".into(),
            RawArray::from_bool(vec![n], &self.terminals),
        );
        if let Some(t) = &self.timeouts {
            m.insert("timeouts".into(), RawArray::from_bool(vec![n], t));
        }
        if let Some(t) = &self.next_missing {
            m.insert("next_missing".into(), RawArray::from_bool(vec![n], t));
        }
        match &self.actions {
            Some(Actions::Discrete(a)) => {
                m.insert("actions".into(), RawArray::from_i64(vec![n], a));
            }
            Some(Actions::Continuous { dim, values }) => {
                m.insert("actions".into(), RawArray::from_f32(vec![n, *dim], values));
            }
            None => {}
        }
        m
    }

    /// Writes the dataset; the format follows the extension (`.npz` or `.safetensors`).
    pub fn save(&self, path: &Path) -> Result<()> {
        write_arrays(path, &self.to_arrays())
    }

    /// `save` with observations stored as `obs` (see `to_arrays_as`).
    pub fn save_as(&self, path: &Path, obs: ObsStorage) -> Result<()> {
        write_arrays(path, &self.to_arrays_as(obs)?)
    }
}

fn row_of(v: &[f32], d: usize, i: usize) -> &[f32] {
    &v[i * d..(i + 1) * d]
}

/// Observations of any number type (or bool) are read as f32, as HDF5 files' are.
fn read_f32(key: &str, a: &RawArray) -> Vec<f32> {
    if a.dtype == DType::F32 {
        return a.to_f32();
    }
    let wide = a.to_f64();
    if let Some(why) = inexact(key, a, &wide) {
        log::warn!("{why}");
    }
    wide.into_iter().map(|v| v as f32).collect()
}

/// f32 holds every integer up to 2^24 exactly; larger ones (counters, timestamps) are
/// rounded, which changes what a state is, so a reader says how many of `a`'s `values`
/// (as f64) are (`None` where none is, or `a` holds no 32- or 64-bit integers).
pub(crate) fn inexact(key: &str, a: &RawArray, values: &[f64]) -> Option<String> {
    if !matches!(a.dtype, DType::I32 | DType::U32 | DType::I64 | DType::U64) {
        return None;
    }
    const EXACT: f64 = (1u32 << 24) as f64;
    let first = values.iter().position(|v| v.abs() > EXACT)?;
    let rounded = values.iter().filter(|v| v.abs() > EXACT).count();
    let per_row = values.len() / a.shape.first().copied().unwrap_or(1).max(1);
    Some(format!(
        "key `{key}`: {rounded} of its {} values ({} integers) are beyond 2^24 = 16777216, \
         where f32 cannot hold every integer, and are rounded (the first at row {}: {})",
        values.len(),
        a.dtype.name(),
        first / per_row.max(1),
        values[first]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Dataset {
        Dataset {
            obs_shape: vec![2],
            observations: vec![0., 0., 1., 1.].into(),
            next_observations: vec![1., 1., 2., 2.].into(),
            rewards: vec![0., 1.],
            terminals: vec![false, true],
            timeouts: None,
            next_missing: None,
            actions: Some(Actions::Discrete(vec![7, 7])),
        }
    }

    #[test]
    fn integer_and_bool_observations_are_read_as_numbers() {
        let ints = |dtype: DType, values: &[i64]| RawArray {
            dtype,
            shape: vec![2, 2],
            bytes: values
                .iter()
                .flat_map(|&v| match dtype {
                    DType::I64 => v.to_le_bytes().to_vec(),
                    DType::I32 => (v as i32).to_le_bytes().to_vec(),
                    _ => vec![v as u8],
                })
                .collect(),
        };
        for dtype in [DType::I64, DType::I32, DType::Bool] {
            let mut m = tiny().to_arrays();
            m.insert("observations".into(), ints(dtype, &[0, 0, 1, 1]));
            m.insert("next_observations".into(), ints(dtype, &[1, 1, 1, 0]));
            let d = Dataset::from_arrays(m).unwrap();
            assert_eq!(d.observations.as_f32(), Some(&[0., 0., 1., 1.][..]));
            assert_eq!(d.next_observations.as_f32(), Some(&[1., 1., 1., 0.][..]));
        }
        // Integers f32 cannot hold exactly are read, rounded, and said so.
        let big = ints(DType::I64, &[0, 16_777_217, -16_777_216, 1 << 40]);
        let why = inexact("observations", &big, &big.to_f64()).unwrap();
        assert!(
            why.contains("2 of its 4 values (i64 integers)") && why.contains("row 0: 16777217"),
            "{why}"
        );
        let exact = ints(DType::I32, &[0, 16_777_216, 1, 2]);
        assert_eq!(inexact("observations", &exact, &exact.to_f64()), None);
    }

    #[test]
    fn roundtrip_both_formats() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["d.npz", "d.safetensors"] {
            let p = dir.path().join(name);
            tiny().save(&p).unwrap();
            assert_eq!(Dataset::load(&p).unwrap(), tiny());
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let mut m = tiny().to_arrays();
        m.remove("rewards");
        let e = Dataset::from_arrays(m).unwrap_err().to_string();
        assert!(e.contains("missing key `rewards`"), "{e}");

        let mut m = tiny().to_arrays();
        m.insert(
            "rewards".into(),
            RawArray::from_f32(vec![2], &[0.0, f32::NAN]),
        );
        let e = format!("{:#}", Dataset::from_arrays(m).unwrap_err());
        assert!(e.contains("`rewards`") && e.contains("non-finite"), "{e}");

        // f64 rewards beyond f32's range: said so, not only "inf".
        let mut m = tiny().to_arrays();
        let huge = RawArray {
            dtype: DType::F64,
            shape: vec![2],
            bytes: [0.0f64, 1e300]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        };
        m.insert("rewards".into(), huge);
        let e = format!("{:#}", Dataset::from_arrays(m).unwrap_err());
        assert!(
            e.contains("row 1") && e.contains("beyond f32's range"),
            "{e}"
        );

        let mut m = tiny().to_arrays();
        m.insert(
            "next_observations".into(),
            RawArray::from_f32(vec![2, 3], &[0.0; 6]),
        );
        let e = Dataset::from_arrays(m).unwrap_err().to_string();
        assert!(
            e.contains("next_observations") && e.contains("differs"),
            "{e}"
        );

        let mut m = tiny().to_arrays();
        m.insert("terminals".into(), RawArray::from_f32(vec![2], &[0.0, 0.5]));
        let e = Dataset::from_arrays(m).unwrap_err().to_string();
        assert!(
            e.contains("terminals") && e.contains("expected 0 or 1"),
            "{e}"
        );

        let mut m = tiny().to_arrays();
        m.insert("rewardz".into(), RawArray::from_f32(vec![2], &[0.0, 0.0]));
        let e = Dataset::from_arrays(m).unwrap_err().to_string();
        assert!(e.contains("rewardz"), "{e}");

        // Rows of no values (a state of 0 dimensions, an image of 0 channels).
        for shape in [vec![2, 0], vec![2, 0, 4, 4]] {
            let mut m = tiny().to_arrays();
            for k in ["observations", "next_observations"] {
                m.insert(k.into(), RawArray::from_f32(shape.clone(), &[]));
            }
            let e = Dataset::from_arrays(m).unwrap_err().to_string();
            assert!(
                e.contains("observations") && e.contains("dimension of 0"),
                "{e}"
            );
        }
    }

    /// Frames stored channels-last, or grey without a channel axis, are read as `[C, H, W]`
    /// with every value where it belongs; u8 stays u8, f32 stays f32.
    #[test]
    fn frames_stored_other_ways_are_read_as_c_h_w() {
        let with_obs = |a: RawArray| {
            let mut m = tiny().to_arrays();
            m.insert("observations".into(), a.clone());
            m.insert("next_observations".into(), a);
            Dataset::from_arrays(m).unwrap()
        };
        // [N, H, W, C] u8: value (h * 32 + w) * 3 + c, wrapped to u8.
        let bytes: Vec<u8> = (0..2 * 32 * 32 * 3).map(|i| (i % 251) as u8).collect();
        let d = with_obs(RawArray {
            dtype: DType::U8,
            shape: vec![2, 32, 32, 3],
            bytes: bytes.clone(),
        });
        assert_eq!(d.obs_shape, [3, 32, 32]);
        assert!(d.is_image() && d.observations.as_u8().is_some());
        for i in 0..2 {
            let row = d.observations.row(i, 3 * 32 * 32);
            for (c, h, w) in [(0, 0, 0), (2, 0, 0), (1, 5, 7), (2, 31, 31)] {
                let stored = bytes[i * 3072 + (h * 32 + w) * 3 + c];
                assert_eq!(row[(c * 32 + h) * 32 + w], f32::from(stored));
            }
        }
        // f32 frames move the same way.
        let values: Vec<f32> = bytes.iter().map(|&b| f32::from(b) / 255.0).collect();
        let f = with_obs(RawArray::from_f32(vec![2, 32, 32, 3], &values));
        assert_eq!(f.obs_shape, [3, 32, 32]);
        assert_eq!(
            f.observations.row(1, 3072)[(2 * 32 + 31) * 32 + 31],
            values[2 * 3072 - 1]
        );
        // Grey u8 frames [N, H, W] gain a channel; the values stay in place.
        let g = with_obs(RawArray {
            dtype: DType::U8,
            shape: vec![2, 20, 16],
            bytes: bytes[..640].to_vec(),
        });
        assert_eq!(g.obs_shape, [1, 20, 16]);
        assert_eq!(g.observations.row(1, 320)[5], f32::from(bytes[325]));
        // A float matrix is a state, not a frame.
        let m = with_obs(RawArray::from_f32(vec![2, 20, 16], &values[..640]));
        assert_eq!(m.obs_shape, [20, 16]);
    }

    #[test]
    fn corrupt_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        tiny().save(&p).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        for cut in [0, 10, bytes.len() / 2, bytes.len() - 1] {
            std::fs::write(&p, &bytes[..cut]).unwrap();
            assert!(Dataset::load(&p).is_err());
        }
        let p = dir.path().join("d.safetensors");
        std::fs::write(&p, b"garbage!garbage!").unwrap();
        assert!(Dataset::load(&p).is_err());
        assert!(Dataset::load(&dir.path().join("d.csv")).is_err());
    }

    #[test]
    fn select_keeps_rows_together() {
        let d = tiny().select(&[1]);
        assert_eq!(d.observations, vec![1., 1.]);
        assert_eq!(d.next_observations, vec![2., 2.]);
        assert_eq!((d.rewards[0], d.terminals[0]), (1.0, true));
        assert_eq!(d.actions, Some(Actions::Discrete(vec![7])));
    }

    #[test]
    fn u8_observations_roundtrip_and_refuse_fractions() {
        let mut d = tiny();
        d.obs_shape = vec![1, 1, 2];
        d.observations = vec![0., 255., 17., 3.].into();
        d.next_observations = vec![1., 2., 254., 0.].into();
        let m = d.to_arrays_as(ObsStorage::U8).unwrap();
        assert_eq!(m["observations"].dtype, DType::U8);
        assert_eq!(m["observations"].shape, vec![2, 1, 1, 2]);
        assert_eq!(m["rewards"].dtype, DType::F32);
        let dir = tempfile::tempdir().unwrap();
        for name in ["d.npz", "d.safetensors"] {
            let p = dir.path().join(name);
            d.save_as(&p, ObsStorage::U8).unwrap();
            assert_eq!(
                read_arrays(&p).unwrap()["next_observations"].dtype,
                DType::U8
            );
            assert_eq!(Dataset::load(&p).unwrap(), d);
        }
        assert_eq!(d.to_arrays_as(ObsStorage::F32).unwrap(), d.to_arrays());
        for bad in [0.5, -1.0, 256.0, f32::NAN] {
            let mut e = d.clone();
            e.next_observations = vec![1., 2., 254., bad].into();
            let msg = e.to_arrays_as(ObsStorage::U8).unwrap_err().to_string();
            assert!(
                msg.contains("next_observations") && msg.contains("row 1"),
                "{msg}"
            );
        }
    }

    /// u8 observations load as u8 and stay so through selection and saving: memory is one
    /// byte per value, and the values read are the stored ones.
    /// The fingerprint is what `run.json` of every earlier run holds: its value must not
    /// move, whatever the storage it is computed from.
    #[test]
    fn the_fingerprint_is_the_same_from_u8_and_from_f32() {
        let (n, d) = (7usize, 12usize);
        let obs: Vec<u8> = (0..n * d).map(|j| (j * 37 % 256) as u8).collect();
        let next: Vec<u8> = (0..n * d).map(|j| (j * 11 % 256) as u8).collect();
        let as_f32 =
            |v: &[u8]| -> Observations { v.iter().map(|&x| x as f32).collect::<Vec<_>>().into() };
        let mut data = Dataset {
            obs_shape: vec![3, 2, 2],
            observations: obs.clone().into(),
            next_observations: next.clone().into(),
            rewards: (0..n).map(|i| i as f32 * 0.5).collect(),
            terminals: (0..n).map(|i| i % 3 == 0).collect(),
            timeouts: None,
            next_missing: Some((0..n).map(|i| i == 6).collect()),
            actions: None,
        };
        let from_u8 = data.fingerprint();
        data.observations = as_f32(&obs);
        data.next_observations = as_f32(&next);
        assert_eq!(data.fingerprint(), from_u8);
        assert_eq!(from_u8, "b9d62f37ad105723");
    }

    #[test]
    fn u8_storage_is_kept_in_memory() {
        let (n, shape) = (50usize, [3usize, 8, 8]);
        let d: usize = shape.iter().product();
        let obs: Vec<f32> = (0..n * d).map(|j| (j * 7 % 256) as f32).collect();
        let next: Vec<f32> = (0..n * d).map(|j| (j * 13 % 256) as f32).collect();
        let f = Dataset {
            obs_shape: shape.to_vec(),
            observations: obs.clone().into(),
            next_observations: next.clone().into(),
            rewards: vec![0.0; n],
            terminals: vec![false; n],
            timeouts: None,
            next_missing: None,
            actions: None,
        };
        let dir = tempfile::tempdir().unwrap();
        for name in ["d.npz", "d.safetensors"] {
            let p = dir.path().join(name);
            f.save_as(&p, ObsStorage::U8).unwrap();
            let d8 = Dataset::load(&p).unwrap();
            assert_eq!(d8.observations.storage(), ObsStorage::U8);
            assert_eq!(d8.obs_memory_bytes(), 2 * n * d);
            assert_eq!(f.obs_memory_bytes(), 8 * n * d);
            assert_eq!(d8, f);
            assert!(d8.is_image());
            assert_eq!(&*d8.obs_row(3), &obs[3 * d..4 * d]);
            assert_eq!(&*d8.next_obs_row(49), &next[49 * d..]);
            assert_eq!(d8.observations[d + 5], obs[d + 5]);
            assert_eq!(d8.observations.iter().count(), n * d);
            let s = d8.select(&[4, 1]);
            assert_eq!(s.observations.storage(), ObsStorage::U8);
            assert_eq!(&*s.obs_row(1), &obs[d..2 * d]);
            // Writing again keeps u8, so a round trip never expands the file.
            let m = d8.to_arrays();
            assert_eq!(m["observations"].dtype, DType::U8);
            assert_eq!(
                d8.to_arrays_as(ObsStorage::F32).unwrap()["observations"].dtype,
                DType::F32
            );
            assert_eq!(Dataset::from_arrays(m).unwrap(), f);
        }
    }

    #[test]
    fn f16_conversion() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
    }
}
