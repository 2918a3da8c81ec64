//! Datasets of `(s, s', r)` transitions: reading, validating and writing the documented
//! format (`docs/dataset-format.md`), as `.npz` or `.safetensors`.

use anyhow::{bail, Context, Result};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

/// Element types that may appear in a dataset file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    Bool,
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F16,
    F32,
    F64,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    fn is_integer(self) -> bool {
        !matches!(self, DType::F16 | DType::F32 | DType::F64)
    }

    fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::U64 => "u64",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }
}

/// One named array as stored in a file: little-endian bytes, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct RawArray {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl RawArray {
    pub fn from_f32(shape: Vec<usize>, values: &[f32]) -> Self {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        RawArray {
            dtype: DType::F32,
            shape,
            bytes,
        }
    }

    pub fn from_i64(shape: Vec<usize>, values: &[i64]) -> Self {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        RawArray {
            dtype: DType::I64,
            shape,
            bytes,
        }
    }

    pub fn from_u8(shape: Vec<usize>, values: Vec<u8>) -> Self {
        RawArray {
            dtype: DType::U8,
            shape,
            bytes: values,
        }
    }

    pub fn from_bool(shape: Vec<usize>, values: &[bool]) -> Self {
        let bytes = values.iter().map(|&v| v as u8).collect();
        RawArray {
            dtype: DType::Bool,
            shape,
            bytes,
        }
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check_size(&self, key: &str) -> Result<()> {
        let want = self.len() * self.dtype.size();
        if self.bytes.len() != want {
            bail!(
                "key `{key}`: shape {:?} of {} needs {want} bytes, the file holds {}",
                self.shape,
                self.dtype.name(),
                self.bytes.len()
            );
        }
        Ok(())
    }

    /// Every element as f64, whatever the stored type.
    pub fn to_f64(&self) -> Vec<f64> {
        let b = &self.bytes;
        let n = self.len();
        let mut out = Vec::with_capacity(n);
        macro_rules! conv {
            ($t:ty, $w:expr) => {
                for c in b.chunks_exact($w) {
                    out.push(<$t>::from_le_bytes(c.try_into().unwrap_or_default()) as f64);
                }
            };
        }
        match self.dtype {
            DType::Bool | DType::U8 => out.extend(b.iter().map(|&x| x as f64)),
            DType::I8 => out.extend(b.iter().map(|&x| x as i8 as f64)),
            DType::U16 => conv!(u16, 2),
            DType::I16 => conv!(i16, 2),
            DType::U32 => conv!(u32, 4),
            DType::I32 => conv!(i32, 4),
            DType::U64 => conv!(u64, 8),
            DType::I64 => conv!(i64, 8),
            DType::F16 => {
                for c in b.chunks_exact(2) {
                    out.push(f16_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64);
                }
            }
            DType::F32 => conv!(f32, 4),
            DType::F64 => conv!(f64, 8),
        }
        out
    }

    pub fn to_f32(&self) -> Vec<f32> {
        if self.dtype == DType::F32 {
            return self
                .bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
        }
        self.to_f64().into_iter().map(|v| v as f32).collect()
    }
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) & 1) as u32;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign << 31,
        (0, f) => {
            // Subnormal: renormalise.
            let mut e = 127 - 15 + 1;
            let mut f = f;
            while f & 0x400 == 0 {
                f <<= 1;
                e -= 1;
            }
            (sign << 31) | ((e as u32) << 23) | ((f & 0x3ff) << 13)
        }
        (0x1f, f) => (sign << 31) | (0xff << 23) | (f << 13),
        (e, f) => (sign << 31) | ((e + 127 - 15) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}

/// How observations are stored, on disk and in memory. Images are usually whole numbers in
/// 0..=255: as u8 they take a quarter of the space, and reading gives back the same values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ObsStorage {
    #[default]
    F32,
    U8,
}

/// Every u8 value as f32, so that u8 observations can be read through `&f32` like f32 ones.
static U8_AS_F32: [f32; 256] = {
    let mut t = [0f32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i as f32;
        i += 1;
    }
    t
};

/// Observations of all transitions, flattened row-major, in the type they were stored in.
///
/// Image datasets (u8 `[N, C, H, W]` on disk) stay u8 in memory, a quarter of the f32
/// size: the default navigation data at 64x64 takes 2.2 GB instead of 8.7 GB. Values are
/// the stored whole numbers (0..=255) whatever the storage; models convert a batch to f32
/// only when they draw it. Equality compares values, not storage.
#[derive(Clone, Debug)]
pub enum Observations {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

impl Default for Observations {
    fn default() -> Self {
        Observations::F32(vec![])
    }
}

impl From<Vec<f32>> for Observations {
    fn from(v: Vec<f32>) -> Self {
        Observations::F32(v)
    }
}

impl From<Vec<u8>> for Observations {
    fn from(v: Vec<u8>) -> Self {
        Observations::U8(v)
    }
}

impl Observations {
    /// Number of values (transitions times the observation size).
    pub fn len(&self) -> usize {
        match self {
            Observations::F32(v) => v.len(),
            Observations::U8(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn storage(&self) -> ObsStorage {
        match self {
            Observations::F32(_) => ObsStorage::F32,
            Observations::U8(_) => ObsStorage::U8,
        }
    }

    /// Bytes the values take in memory.
    pub fn memory_bytes(&self) -> usize {
        match self {
            Observations::F32(v) => v.len() * 4,
            Observations::U8(v) => v.len(),
        }
    }

    /// Value `j` of the flattened array.
    pub fn get(&self, j: usize) -> f32 {
        self[j]
    }

    pub fn iter(&self) -> ObsIter<'_> {
        match self {
            Observations::F32(v) => ObsIter::F32(v.iter()),
            Observations::U8(v) => ObsIter::U8(v.iter()),
        }
    }

    /// The f32 values, when stored as f32.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            Observations::F32(v) => Some(v),
            Observations::U8(_) => None,
        }
    }

    /// The u8 values, when stored as u8.
    pub fn as_u8(&self) -> Option<&[u8]> {
        match self {
            Observations::F32(_) => None,
            Observations::U8(v) => Some(v),
        }
    }

    /// All values as f32: borrowed when stored as f32, converted (4x the memory) otherwise.
    pub fn to_f32(&self) -> Cow<'_, [f32]> {
        match self {
            Observations::F32(v) => Cow::Borrowed(v),
            Observations::U8(v) => Cow::Owned(v.iter().map(|&x| x as f32).collect()),
        }
    }

    /// Row `i` of `d` values as f32 (borrowed when stored as f32).
    pub fn row(&self, i: usize, d: usize) -> Cow<'_, [f32]> {
        match self {
            Observations::F32(v) => Cow::Borrowed(&v[i * d..(i + 1) * d]),
            Observations::U8(v) => {
                Cow::Owned(v[i * d..(i + 1) * d].iter().map(|&x| x as f32).collect())
            }
        }
    }

    /// Rows `idx` as one store of the same type.
    fn select(&self, idx: &[usize], d: usize) -> Observations {
        match self {
            Observations::F32(v) => Observations::F32(
                idx.iter()
                    .flat_map(|&i| &v[i * d..(i + 1) * d])
                    .copied()
                    .collect(),
            ),
            Observations::U8(v) => Observations::U8(
                idx.iter()
                    .flat_map(|&i| &v[i * d..(i + 1) * d])
                    .copied()
                    .collect(),
            ),
        }
    }
}

impl std::ops::Index<usize> for Observations {
    type Output = f32;

    fn index(&self, j: usize) -> &f32 {
        match self {
            Observations::F32(v) => &v[j],
            Observations::U8(v) => &U8_AS_F32[v[j] as usize],
        }
    }
}

impl PartialEq for Observations {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Observations::F32(a), Observations::F32(b)) => a == b,
            (Observations::U8(a), Observations::U8(b)) => a == b,
            _ => self.len() == other.len() && self.iter().eq(other.iter()),
        }
    }
}

impl PartialEq<Vec<f32>> for Observations {
    fn eq(&self, other: &Vec<f32>) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<[f32]> for Observations {
    fn eq(&self, other: &[f32]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

/// Iterator over [`Observations`] values as `&f32`, whatever the storage.
pub enum ObsIter<'a> {
    F32(std::slice::Iter<'a, f32>),
    U8(std::slice::Iter<'a, u8>),
}

impl<'a> Iterator for ObsIter<'a> {
    type Item = &'a f32;

    fn next(&mut self) -> Option<&'a f32> {
        match self {
            ObsIter::F32(it) => it.next(),
            ObsIter::U8(it) => it.next().map(|&x| &U8_AS_F32[x as usize]),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            ObsIter::F32(it) => it.size_hint(),
            ObsIter::U8(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for ObsIter<'_> {}

impl<'a> IntoIterator for &'a Observations {
    type Item = &'a f32;
    type IntoIter = ObsIter<'a>;

    fn into_iter(self) -> ObsIter<'a> {
        self.iter()
    }
}

/// Ground-truth actions, kept only for evaluation and the ground-truth reference.
#[derive(Clone, Debug, PartialEq)]
pub enum Actions {
    Discrete(Vec<i64>),
    Continuous { dim: usize, values: Vec<f32> },
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
    pub actions: Option<Actions>,
}

impl Dataset {
    pub fn len(&self) -> usize {
        self.rewards.len()
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
            actions: match &self.actions {
                Some(Actions::Discrete(a)) => {
                    Some(Actions::Discrete(idx.iter().map(|&i| a[i]).collect()))
                }
                Some(Actions::Continuous { dim, values }) => Some(Actions::Continuous {
                    dim: *dim,
                    values: idx
                        .iter()
                        .flat_map(|&i| row_of(values, *dim, i))
                        .copied()
                        .collect(),
                }),
                None => None,
            },
        }
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

    /// Reads and validates a `.npz` or `.safetensors` dataset.
    pub fn load(path: &Path) -> Result<Self> {
        let arrays = read_arrays(path)?;
        Self::from_arrays(arrays).with_context(|| format!("invalid dataset {}", path.display()))
    }

    /// Validates named arrays against the dataset format.
    pub fn from_arrays(mut arrays: BTreeMap<String, RawArray>) -> Result<Self> {
        const KNOWN: [&str; 7] = [
            "observations",
            "next_observations",
            "rewards",
            "terminals",
            "timeouts",
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
        if next.shape != obs.shape {
            bail!(
                "key `next_observations`: shape {:?} differs from `observations` {:?}",
                next.shape,
                obs.shape
            );
        }
        for (k, a) in [("observations", &obs), ("next_observations", &next)] {
            if !matches!(a.dtype, DType::F32 | DType::F64 | DType::F16 | DType::U8) {
                bail!(
                    "key `{k}`: dtype {} not supported (use f32, or u8 for images)",
                    a.dtype.name()
                );
            }
        }
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
            a.to_f64()
                .into_iter()
                .enumerate()
                .map(|(i, v)| match v {
                    0.0 => Ok(false),
                    1.0 => Ok(true),
                    x => bail!("key `{k}`: row {i} is {x}, expected 0 or 1"),
                })
                .collect()
        };
        let terminals = flags("terminals", &terminals)?;
        let timeouts = match take(&mut arrays, "timeouts") {
            Some(a) => Some(flags("timeouts", &a)?),
            None => None,
        };
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
                Observations::F32(obs.to_f32()),
                Observations::F32(next.to_f32()),
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
                bail!("key `{k}`: row {row} holds a non-finite value ({})", v[i]);
            }
        }
        Ok(Dataset {
            obs_shape,
            observations,
            next_observations,
            rewards,
            terminals,
            timeouts,
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

enum Format {
    Npz,
    Safetensors,
}

fn format_of(path: &Path) -> Result<Format> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("npz") => Ok(Format::Npz),
        Some("safetensors") => Ok(Format::Safetensors),
        _ => bail!(
            "{}: unknown file type; use a `.npz` or `.safetensors` file",
            path.display()
        ),
    }
}

/// Reads every array of a `.npz` or `.safetensors` file.
pub fn read_arrays(path: &Path) -> Result<BTreeMap<String, RawArray>> {
    let fmt = format_of(path)?;
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let res = match fmt {
        Format::Npz => read_npz(&bytes),
        Format::Safetensors => read_safetensors(&bytes),
    };
    res.with_context(|| format!("cannot parse {}", path.display()))
}

/// Writes arrays atomically (temporary file, then rename).
pub fn write_arrays(path: &Path, arrays: &BTreeMap<String, RawArray>) -> Result<()> {
    let bytes = match format_of(path)? {
        Format::Npz => npz_bytes(arrays)?,
        Format::Safetensors => {
            let views = arrays
                .iter()
                .map(|(k, a)| {
                    let v = safetensors::tensor::TensorView::new(
                        st_dtype(a.dtype),
                        a.shape.clone(),
                        &a.bytes,
                    )?;
                    Ok((k.clone(), v))
                })
                .collect::<Result<Vec<_>>>()?;
            safetensors::serialize(views, None)?
        }
    };
    crate::io::write_atomic(path, &bytes)
}

fn st_dtype(d: DType) -> safetensors::Dtype {
    use safetensors::Dtype as S;
    match d {
        DType::Bool => S::BOOL,
        DType::U8 => S::U8,
        DType::I8 => S::I8,
        DType::U16 => S::U16,
        DType::I16 => S::I16,
        DType::U32 => S::U32,
        DType::I32 => S::I32,
        DType::U64 => S::U64,
        DType::I64 => S::I64,
        DType::F16 => S::F16,
        DType::F32 => S::F32,
        DType::F64 => S::F64,
    }
}

fn read_safetensors(bytes: &[u8]) -> Result<BTreeMap<String, RawArray>> {
    use safetensors::Dtype as S;
    let st =
        safetensors::SafeTensors::deserialize(bytes).context("not a valid safetensors file")?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let dtype = match view.dtype() {
            S::BOOL => DType::Bool,
            S::U8 => DType::U8,
            S::I8 => DType::I8,
            S::U16 => DType::U16,
            S::I16 => DType::I16,
            S::U32 => DType::U32,
            S::I32 => DType::I32,
            S::U64 => DType::U64,
            S::I64 => DType::I64,
            S::F16 => DType::F16,
            S::F32 => DType::F32,
            S::F64 => DType::F64,
            other => bail!("key `{name}`: dtype {other:?} not supported"),
        };
        out.insert(
            name,
            RawArray {
                dtype,
                shape: view.shape().to_vec(),
                bytes: view.data().to_vec(),
            },
        );
    }
    Ok(out)
}

fn read_npz(bytes: &[u8]) -> Result<BTreeMap<String, RawArray>> {
    let mut zip =
        zip::ZipArchive::new(std::io::Cursor::new(bytes)).context("not a valid .npz (zip) file")?;
    let mut out = BTreeMap::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i)?;
        let name = f.name()?.to_string();
        let mut buf = Vec::with_capacity(f.size() as usize);
        f.read_to_end(&mut buf)
            .with_context(|| format!("cannot decompress `{name}`"))?;
        let key = name.strip_suffix(".npy").unwrap_or(&name).to_string();
        let arr = parse_npy(&buf).with_context(|| format!("key `{key}`"))?;
        out.insert(key, arr);
    }
    Ok(out)
}

/// Parses one `.npy` payload (format versions 1-3, little-endian or single-byte dtypes, C order).
pub fn parse_npy(buf: &[u8]) -> Result<RawArray> {
    if buf.len() < 10 || &buf[..6] != b"\x93NUMPY" {
        bail!("not a .npy array (bad magic)");
    }
    let major = buf[6];
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([buf[8], buf[9]]) as usize, 10),
        2 | 3 => {
            if buf.len() < 12 {
                bail!("truncated .npy header");
            }
            (
                u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize,
                12,
            )
        }
        v => bail!(".npy format version {v} not supported"),
    };
    let header = buf
        .get(start..start + hlen)
        .context("truncated .npy header")?;
    let header = std::str::from_utf8(header).context(".npy header is not text")?;
    let field = |name: &str| -> Result<&str> {
        let pat = format!("'{name}':");
        let i = header
            .find(&pat)
            .with_context(|| format!(".npy header lacks `{name}`"))?;
        Ok(header[i + pat.len()..].trim_start())
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|s| s.split('\'').next())
        .context(".npy header: bad descr")?;
    if field("fortran_order")?.starts_with("True") {
        bail!("Fortran-ordered arrays are not supported; save with C order");
    }
    let shape_txt = field("shape")?;
    let shape_txt = shape_txt
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .context(".npy header: bad shape")?;
    let shape = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .with_context(|| format!(".npy header: bad dimension `{s}`"))
        })
        .collect::<Result<Vec<_>>>()?;
    let (endian, code) = descr.split_at(1);
    if endian == ">" && !matches!(code, "u1" | "i1" | "b1") {
        bail!("big-endian dtype `{descr}` not supported");
    }
    let dtype = match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "u2" => DType::U16,
        "i2" => DType::I16,
        "u4" => DType::U32,
        "i4" => DType::I32,
        "u8" => DType::U64,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => bail!("dtype `{descr}` not supported"),
    };
    let data = &buf[start + hlen..];
    let arr = RawArray {
        dtype,
        shape,
        bytes: data.to_vec(),
    };
    let want = arr.len() * dtype.size();
    if data.len() != want {
        bail!(
            "data holds {} bytes, shape {:?} of {} needs {want}",
            data.len(),
            arr.shape,
            dtype.name()
        );
    }
    Ok(arr)
}

pub fn npy_bytes(a: &RawArray) -> Vec<u8> {
    let descr = match a.dtype {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::U16 => "<u2",
        DType::I16 => "<i2",
        DType::U32 => "<u4",
        DType::I32 => "<i4",
        DType::U64 => "<u8",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
    };
    let shape = match a.shape.len() {
        1 => format!("({},)", a.shape[0]),
        _ => format!(
            "({})",
            a.shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // numpy pads the header so the data starts on a 64-byte boundary.
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + a.bytes.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&a.bytes);
    out
}

fn npz_bytes(arrays: &BTreeMap<String, RawArray>) -> Result<Vec<u8>> {
    let mut cursor = std::io::Cursor::new(Vec::new());
    {
        let mut zw = zip::ZipWriter::new(&mut cursor);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(true);
        for (k, a) in arrays {
            zw.start_file(format!("{k}.npy"), opts)?;
            zw.write_all(&npy_bytes(a))?;
        }
        zw.finish()?;
    }
    Ok(cursor.into_inner())
}

fn row_of(v: &[f32], d: usize, i: usize) -> &[f32] {
    &v[i * d..(i + 1) * d]
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
            actions: Some(Actions::Discrete(vec![7, 7])),
        }
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
