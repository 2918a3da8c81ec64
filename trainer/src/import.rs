//! Importing robotics datasets: D4RL-style HDF5 files and Minari datasets become
//! transition files in the [dataset format](crate::data) (`laq convert`).
//!
//! HDF5 is read through `hdf5-metno`, the maintained Rust binding of the reference HDF5 C
//! library (Debian package `libhdf5-dev`). D4RL and Minari files are written by h5py, with
//! chunked and gzip-compressed datasets, version-0 superblocks, booleans stored as
//! FALSE/TRUE enums, and whatever layout a user's own export chose. The C library reads all
//! of it, with every standard filter; the pure-Rust readers implement parts of the format,
//! so a file that opens in Python could fail here for reasons the user cannot see. The
//! binding also writes files, which the tests use to build D4RL- and Minari-shaped inputs.
//!
//! The binding sits behind the default cargo feature `hdf5`: a machine without the C
//! library can still build everything else with `--no-default-features`, and
//! `laq convert` then says what is missing.

use crate::data::Dataset;
use anyhow::{bail, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Layout of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Source {
    /// Minari for a directory or a file of `episode_N` groups; D4RL for a file with
    /// `observations` at its root.
    Auto,
    /// One HDF5 file with `observations`, `actions`, `rewards`, `terminals` and `timeouts`
    /// at its root.
    D4rl,
    /// A Minari dataset directory (or its `data/main_data.hdf5`) of `episode_N` groups.
    Minari,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Auto => "auto",
            Source::D4rl => "D4RL",
            Source::Minari => "Minari",
        }
    }
}

/// Choices of an import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Keys of a dict observation space to flatten into each observation, in this order;
    /// `None` takes every key in sorted order.
    pub obs_keys: Option<Vec<String>>,
}

/// A dataset read from a D4RL or Minari file, with what the conversion did to it.
#[derive(Clone, Debug)]
pub struct Imported {
    pub data: Dataset,
    /// `D4rl` or `Minari`, never `Auto`.
    pub source: Source,
    /// The HDF5 file that was read.
    pub file: PathBuf,
    /// Episodes in the file.
    pub episodes: usize,
    /// Rows left out because the file holds no next observation for them: the last row of
    /// every episode of a D4RL file without `next_observations`.
    pub dropped: usize,
    /// How many of the dropped rows were terminal (their reward and end are lost).
    pub dropped_terminals: usize,
    /// Keys of a dict observation flattened into each observation, in order; empty when
    /// observations are one array.
    pub obs_keys: Vec<String>,
    /// Assumptions made and parts of the file left out.
    pub notes: Vec<String>,
}

impl Imported {
    /// A few lines for people: what was read, what was kept and what was dropped.
    pub fn summary(&self) -> String {
        let d = &self.data;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "read {} ({}): {} transitions from {} episodes",
            self.file.display(),
            self.source.name(),
            d.len(),
            self.episodes
        );
        let _ = write!(s, "  observations: shape {:?}", d.obs_shape);
        if !self.obs_keys.is_empty() {
            let _ = write!(s, " from keys {}", self.obs_keys.join(", "));
        }
        s.push('\n');
        let acts = match &d.actions {
            Some(crate::data::Actions::Discrete(_)) => "discrete".to_string(),
            Some(crate::data::Actions::Continuous { dim, .. }) => {
                format!("continuous, {dim} per step")
            }
            None => "none".to_string(),
        };
        let _ = writeln!(s, "  actions: {acts}");
        let terminals = d.terminals.iter().filter(|&&t| t).count();
        let timeouts = d
            .timeouts
            .as_ref()
            .map_or(0, |t| t.iter().filter(|&&t| t).count());
        let _ = writeln!(s, "  terminals: {terminals}, timeouts: {timeouts}");
        if self.dropped == 0 {
            let _ = writeln!(s, "  dropped rows: none");
        } else {
            let _ = write!(
                s,
                "  dropped rows: {} (the last row of each episode: the file holds no next \
                 observation for it)",
                self.dropped
            );
            if self.dropped_terminals > 0 {
                let _ = write!(
                    s,
                    "; {} of them terminal, whose rewards and episode ends are lost",
                    self.dropped_terminals
                );
            }
            s.push('\n');
        }
        for n in &self.notes {
            let _ = writeln!(s, "  note: {n}");
        }
        s
    }
}

/// Reads a D4RL-style HDF5 file or a Minari dataset into transitions.
///
/// Errors name the file, the key and the problem: a missing key, a wrong rank, lengths
/// that differ between arrays, NaN or infinite values (with the row), empty episodes,
/// unsupported element types.
pub fn import(path: &Path, source: Source, opts: &ImportOptions) -> Result<Imported> {
    #[cfg(feature = "hdf5")]
    {
        h5::import(path, source, opts)
    }
    #[cfg(not(feature = "hdf5"))]
    {
        let _ = (source, opts);
        bail!(
            "cannot import {}: this laq was built without HDF5 support; rebuild with the \
             default feature `hdf5` (it needs the HDF5 C library, Debian package libhdf5-dev)",
            path.display()
        )
    }
}

/// [`import`], then writes the dataset to `out` (`.npz` or `.safetensors`) whole or not at
/// all.
pub fn convert(input: &Path, source: Source, opts: &ImportOptions, out: &Path) -> Result<Imported> {
    // Refused before reading: a large input should not be read only to find out that the
    // output cannot be written.
    if !matches!(
        out.extension().and_then(|e| e.to_str()),
        Some("npz" | "safetensors")
    ) {
        bail!(
            "{}: unknown output type; use a `.npz` or `.safetensors` file",
            out.display()
        );
    }
    let imported = import(input, source, opts)?;
    imported.data.save(out)?;
    Ok(imported)
}

#[cfg(feature = "hdf5")]
mod h5 {
    use super::{ImportOptions, Imported, Source};
    use crate::data::{Actions, DType, Dataset, RawArray};
    use anyhow::{anyhow, bail, Context, Result};
    use hdf5::types::{FloatSize, IntSize, TypeDescriptor as TD};
    use hdf5::{Group, LocationType};
    use hdf5_metno as hdf5;
    use std::path::{Path, PathBuf};

    pub(super) fn import(path: &Path, source: Source, opts: &ImportOptions) -> Result<Imported> {
        let source = match source {
            Source::Auto => detect(path)?,
            s => s,
        };
        let file = match source {
            Source::Minari => minari_file(path)?,
            _ => path.to_path_buf(),
        };
        let h5 = open(&file)?;
        let res = match source {
            Source::Minari => minari(&h5, opts),
            _ => d4rl(&h5, opts),
        };
        let mut imported =
            res.with_context(|| format!("cannot import {} as {}", file.display(), source.name()))?;
        if imported.dropped_terminals > 0 {
            log::warn!(
                "{}: {} terminal rows have no next observation in the file and are dropped, \
                 with their rewards",
                file.display(),
                imported.dropped_terminals
            );
        }
        // The same checks `Dataset::load` makes, so that the file written is one that loads.
        imported.data = Dataset::from_arrays(imported.data.to_arrays()).with_context(|| {
            format!(
                "cannot import {}: the converted data is invalid",
                file.display()
            )
        })?;
        imported.file = file;
        Ok(imported)
    }

    fn open(path: &Path) -> Result<hdf5::File> {
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        hdf5::File::open(path)
            .map_err(|e| anyhow!("{} is not a readable HDF5 file ({e})", path.display()))
    }

    /// `DIR/data/main_data.hdf5` (Minari's layout) or `DIR/main_data.hdf5` for a directory.
    fn minari_file(path: &Path) -> Result<PathBuf> {
        if !path.is_dir() {
            return Ok(path.to_path_buf());
        }
        for f in [
            path.join("data").join("main_data.hdf5"),
            path.join("main_data.hdf5"),
        ] {
            if f.is_file() {
                return Ok(f);
            }
        }
        bail!(
            "{}: a directory without data/main_data.hdf5, so not a Minari dataset",
            path.display()
        )
    }

    fn detect(path: &Path) -> Result<Source> {
        if path.is_dir() {
            return Ok(Source::Minari);
        }
        let f = open(path)?;
        if f.link_exists("observations") {
            return Ok(Source::D4rl);
        }
        let names = f.member_names().unwrap_or_default();
        if names.iter().any(|n| episode_index(n).is_some()) {
            return Ok(Source::Minari);
        }
        bail!(
            "{}: neither a D4RL file (`observations` at the root) nor a Minari file \
             (`episode_N` groups); keys present: {names:?}",
            path.display()
        )
    }

    fn episode_index(name: &str) -> Option<u64> {
        name.strip_prefix("episode_")?.parse().ok()
    }

    fn kind(g: &Group, name: &str) -> Option<LocationType> {
        if g.link_exists(name) {
            g.loc_type_by_name(name).ok()
        } else {
            None
        }
    }

    fn keys_of(g: &Group) -> Vec<String> {
        g.member_names().unwrap_or_default()
    }

    /// The array `name` of `g`; `key` is its path in the file, for messages.
    fn array(g: &Group, name: &str, key: &str) -> Result<RawArray> {
        match kind(g, name) {
            Some(LocationType::Dataset) => {}
            Some(_) => bail!("key `{key}`: a group, expected an array"),
            None => bail!("missing key `{key}` (keys present: {:?})", keys_of(g)),
        }
        let ds = g
            .dataset(name)
            .map_err(|e| anyhow!("key `{key}`: cannot open ({e})"))?;
        read(&ds, key)
    }

    fn read(ds: &hdf5::Dataset, key: &str) -> Result<RawArray> {
        let td = ds
            .dtype()
            .and_then(|t| t.to_descriptor())
            .map_err(|e| anyhow!("key `{key}`: unsupported dtype ({e})"))?;
        let shape = ds.shape();
        macro_rules! read_as {
            ($t:ty, $dt:expr) => {{
                let v: Vec<$t> = ds
                    .read_raw::<$t>()
                    .map_err(|e| anyhow!("key `{key}`: cannot read ({e})"))?;
                RawArray {
                    dtype: $dt,
                    shape,
                    bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                }
            }};
        }
        Ok(match td {
            TD::Float(FloatSize::U8) => read_as!(f64, DType::F64),
            TD::Float(_) => read_as!(f32, DType::F32),
            TD::Integer(IntSize::U1) => read_as!(i8, DType::I8),
            TD::Integer(IntSize::U2) => read_as!(i16, DType::I16),
            TD::Integer(IntSize::U4) => read_as!(i32, DType::I32),
            TD::Integer(IntSize::U8) => read_as!(i64, DType::I64),
            TD::Unsigned(IntSize::U1) => read_as!(u8, DType::U8),
            TD::Unsigned(IntSize::U2) => read_as!(u16, DType::U16),
            TD::Unsigned(IntSize::U4) => read_as!(u32, DType::U32),
            TD::Unsigned(IntSize::U8) => read_as!(u64, DType::U64),
            TD::Boolean => {
                let v: Vec<bool> = ds
                    .read_raw::<bool>()
                    .map_err(|e| anyhow!("key `{key}`: cannot read ({e})"))?;
                RawArray::from_bool(shape, &v)
            }
            other => bail!("key `{key}`: dtype {other} not supported (numbers or booleans only)"),
        })
    }

    fn rows(a: &RawArray) -> usize {
        a.shape.first().copied().unwrap_or(0)
    }

    fn check_rows(a: &RawArray, key: &str, n: usize, why: &str) -> Result<()> {
        if a.shape.is_empty() {
            bail!("key `{key}`: a scalar, expected {n} rows");
        }
        if rows(a) != n {
            bail!("key `{key}`: {} rows, expected {n} ({why})", rows(a));
        }
        Ok(())
    }

    /// One value per step: shape [n], or [n, 1] as some exporters write columns.
    fn check_per_step(a: &RawArray, key: &str, n: usize, why: &str) -> Result<()> {
        check_rows(a, key, n, why)?;
        if !(a.shape.len() == 1 || a.shape.len() == 2 && a.shape[1] == 1) {
            bail!(
                "key `{key}`: shape {:?}, expected [{n}] (one value per step)",
                a.shape
            );
        }
        Ok(())
    }

    /// The values as f32, refusing NaN, infinities and values beyond f32's range.
    fn finite_f32(a: &RawArray, key: &str) -> Result<Vec<f32>> {
        let per_row = a.shape.iter().skip(1).product::<usize>().max(1);
        if a.dtype == DType::F32 {
            // No widening: observation arrays are the bulk of a file.
            let v = a.to_f32();
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                bail!(
                    "key `{key}`: row {} holds a non-finite value ({})",
                    i / per_row,
                    v[i]
                );
            }
            return Ok(v);
        }
        let wide = a.to_f64();
        let mut out = Vec::with_capacity(wide.len());
        for (i, &x) in wide.iter().enumerate() {
            let y = x as f32;
            if !x.is_finite() {
                bail!(
                    "key `{key}`: row {} holds a non-finite value ({x})",
                    i / per_row
                );
            }
            if !y.is_finite() {
                bail!(
                    "key `{key}`: row {} holds {x}, beyond the range of f32",
                    i / per_row
                );
            }
            out.push(y);
        }
        Ok(out)
    }

    fn flags(a: &RawArray, key: &str, n: usize, why: &str) -> Result<Vec<bool>> {
        check_per_step(a, key, n, why)?;
        a.to_f64()
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                0.0 => Ok(false),
                1.0 => Ok(true),
                x => bail!("key `{key}`: row {i} is {x}, expected 0 or 1"),
            })
            .collect()
    }

    fn rewards(a: &RawArray, key: &str, n: usize, why: &str) -> Result<Vec<f32>> {
        check_per_step(a, key, n, why)?;
        finite_f32(a, key)
    }

    /// Integers are discrete actions ([n] or [n, 1]); anything else becomes a vector of
    /// floats per step.
    fn actions(a: &RawArray, key: &str, n: usize, why: &str) -> Result<Actions> {
        check_rows(a, key, n, why)?;
        let integer = !matches!(a.dtype, DType::F16 | DType::F32 | DType::F64);
        let dim: usize = a.shape[1..].iter().product();
        if integer && dim == 1 && a.shape.len() <= 2 {
            let v = a.to_f64();
            if let Some(i) = v.iter().position(|&x| x < 0.0) {
                bail!("key `{key}`: row {i} is negative ({})", v[i]);
            }
            return Ok(Actions::Discrete(v.into_iter().map(|x| x as i64).collect()));
        }
        if a.shape.len() > 2 {
            bail!(
                "key `{key}`: shape {:?}, expected [{n}] or [{n}, A]",
                a.shape
            );
        }
        Ok(Actions::Continuous {
            dim,
            values: finite_f32(a, key)?,
        })
    }

    fn describe(a: &Actions) -> String {
        match a {
            Actions::Discrete(_) => "discrete".into(),
            Actions::Continuous { dim, .. } => format!("continuous with {dim} per step"),
        }
    }

    /// Observations from one array, or from the arrays of a group (a dict observation
    /// space) flattened side by side per row.
    struct Obs {
        rows: usize,
        shape: Vec<usize>,
        values: Vec<f32>,
        keys: Vec<String>,
    }

    impl Obs {
        fn width(&self) -> usize {
            self.shape.iter().product()
        }
        fn row(&self, i: usize) -> &[f32] {
            let w = self.width();
            &self.values[i * w..(i + 1) * w]
        }
    }

    /// Every array under `g`, as paths relative to it, sorted.
    fn leaves(g: &Group, prefix: &str, out: &mut Vec<String>) -> Result<()> {
        for m in g.member_names()? {
            match g.loc_type_by_name(&m)? {
                LocationType::Dataset => out.push(format!("{prefix}{m}")),
                LocationType::Group => leaves(&g.group(&m)?, &format!("{prefix}{m}/"), out)?,
                _ => {}
            }
        }
        out.sort();
        Ok(())
    }

    fn observations(g: &Group, key: &str, name: &str, pick: Option<&[String]>) -> Result<Obs> {
        match kind(g, name) {
            None => bail!("missing key `{key}` (keys present: {:?})", keys_of(g)),
            Some(LocationType::Group) => {}
            Some(_) => {
                if pick.is_some() {
                    bail!(
                        "key `{key}` is one array, so there are no keys to pick with \
                         --obs-keys (they select arrays of a dict observation group)"
                    );
                }
                let a = array(g, name, key)?;
                if a.shape.is_empty() {
                    bail!("key `{key}`: a scalar, expected shape [N, ...]");
                }
                // A scalar per step (a discrete observation space) is a vector of one.
                let shape = match a.shape.len() {
                    1 => vec![1],
                    _ => a.shape[1..].to_vec(),
                };
                if shape.contains(&0) {
                    bail!("key `{key}`: shape {:?} holds no value per row", a.shape);
                }
                return Ok(Obs {
                    rows: rows(&a),
                    shape,
                    values: finite_f32(&a, key)?,
                    keys: vec![],
                });
            }
        }
        let grp = g
            .group(name)
            .map_err(|e| anyhow!("key `{key}`: cannot open ({e})"))?;
        let mut all = vec![];
        leaves(&grp, "", &mut all).map_err(|e| anyhow!("key `{key}`: cannot list ({e})"))?;
        if all.is_empty() {
            bail!("key `{key}`: an empty group");
        }
        let keys = match pick {
            None => all,
            Some(p) => {
                if p.is_empty() {
                    bail!(
                        "--obs-keys names no key; keys of `{key}`: {}",
                        all.join(", ")
                    );
                }
                for (i, k) in p.iter().enumerate() {
                    if !all.contains(k) {
                        bail!(
                            "key `{key}/{k}` not found (--obs-keys); keys of `{key}`: {}",
                            all.join(", ")
                        );
                    }
                    if p[..i].contains(k) {
                        bail!("--obs-keys names `{k}` twice");
                    }
                }
                p.to_vec()
            }
        };
        let mut parts: Vec<(usize, Vec<f32>)> = vec![];
        let mut n = None;
        for k in &keys {
            let full = format!("{key}/{k}");
            let a = array(&grp, k, &full)?;
            if a.shape.is_empty() {
                bail!("key `{full}`: a scalar, expected shape [N, ...]");
            }
            match n {
                None => n = Some((rows(&a), full.clone())),
                Some((m, ref first)) if m != rows(&a) => {
                    bail!("key `{full}`: {} rows, `{first}` has {m}", rows(&a))
                }
                _ => {}
            }
            let w = a.shape[1..].iter().product::<usize>();
            parts.push((w, finite_f32(&a, &full)?));
        }
        let rows = n.map_or(0, |(m, _)| m);
        let width: usize = parts.iter().map(|p| p.0).sum();
        if width == 0 {
            bail!("key `{key}`: its arrays hold no value per row");
        }
        let mut values = Vec::with_capacity(rows * width);
        for r in 0..rows {
            for (w, v) in &parts {
                values.extend_from_slice(&v[r * w..(r + 1) * w]);
            }
        }
        Ok(Obs {
            rows,
            shape: vec![width],
            values,
            keys,
        })
    }

    /// Root datasets `observations`, `actions`, `rewards`, `terminals`, `timeouts`, and
    /// `next_observations` when the file has them.
    fn d4rl(f: &hdf5::File, opts: &ImportOptions) -> Result<Imported> {
        let pick = opts.obs_keys.as_deref();
        let mut notes = vec![];
        let obs = observations(f, "observations", "observations", pick)?;
        let n = obs.rows;
        if n == 0 {
            bail!("key `observations`: no rows");
        }
        let why = "the rows of `observations`";
        let rewards = rewards(&array(f, "rewards", "rewards")?, "rewards", n, why)?;
        let mut flag = |name: &str, assumed: &str| -> Result<Vec<bool>> {
            if f.link_exists(name) {
                flags(&array(f, name, name)?, name, n, why)
            } else {
                notes.push(format!("no `{name}`: {assumed}"));
                Ok(vec![false; n])
            }
        };
        let terminals = flag(
            "terminals",
            "assumed that no episode ends in a terminal state",
        )?;
        let timeouts = flag(
            "timeouts",
            "assumed that episodes end only at terminals and at the end of the file",
        )?;
        let actions = match kind(f, "actions") {
            Some(LocationType::Dataset) => Some(actions(
                &array(f, "actions", "actions")?,
                "actions",
                n,
                why,
            )?),
            Some(_) => {
                notes.push("`actions` is a group (a dict action space): left out".into());
                None
            }
            None => {
                notes.push(
                    "no `actions`: label sources and metrics that need ground truth will say so"
                        .into(),
                );
                None
            }
        };
        let next = if f.link_exists("next_observations") {
            let nx = observations(f, "next_observations", "next_observations", pick)?;
            if nx.rows != n {
                bail!(
                    "key `next_observations`: {} rows, expected {n} ({why})",
                    nx.rows
                );
            }
            if nx.shape != obs.shape || nx.keys != obs.keys {
                bail!(
                    "key `next_observations`: shape {:?} per row (keys {:?}), `observations` \
                     has {:?} (keys {:?})",
                    nx.shape,
                    nx.keys,
                    obs.shape,
                    obs.keys
                );
            }
            Some(nx)
        } else {
            None
        };
        const KNOWN: [&str; 7] = [
            "observations",
            "next_observations",
            "actions",
            "rewards",
            "terminals",
            "timeouts",
            "infos",
        ];
        let other: Vec<String> = keys_of(f)
            .into_iter()
            .filter(|k| !KNOWN.contains(&k.as_str()))
            .collect();
        if !other.is_empty() {
            notes.push(format!("left out: {}", other.join(", ")));
        }

        // An episode ends at a terminal, at a timeout, and at the last row of the file.
        let ends: Vec<bool> = (0..n)
            .map(|i| terminals[i] || timeouts[i] || i + 1 == n)
            .collect();
        let episodes = ends.iter().filter(|&&e| e).count();
        let (next_observations, terminals, timeouts, keep, dropped_terminals) = match next {
            Some(nx) => {
                // The file's last row ends an episode too: marked as cut, so the episode
                // structure stays visible in our format.
                let touts = (0..n)
                    .map(|i| timeouts[i] || (i + 1 == n && !terminals[i]))
                    .collect();
                (nx.values, terminals, touts, (0..n).collect::<Vec<_>>(), 0)
            }
            None => {
                // No row may take its next observation from another episode, so the last
                // row of each episode has none and is left out below.
                let next = (0..n)
                    .flat_map(|i| obs.row((i + 1).min(n - 1)))
                    .copied()
                    .collect();
                // The last kept row of an episode is where the kept episode is cut.
                let touts = (0..n).map(|i| i + 1 < n && ends[i + 1]).collect();
                let keep: Vec<usize> = (0..n).filter(|&i| !ends[i]).collect();
                let dropped_terminals = terminals.iter().filter(|&&t| t).count();
                (next, vec![false; n], touts, keep, dropped_terminals)
            }
        };
        if keep.is_empty() {
            bail!(
                "no transition left: every episode is a single row, and without \
                 `next_observations` a row needs the next one of its episode"
            );
        }
        let dropped = n - keep.len();
        let all = Dataset {
            obs_shape: obs.shape,
            observations: obs.values.into(),
            next_observations: next_observations.into(),
            rewards,
            terminals,
            timeouts: Some(timeouts),
            actions,
        };
        let data = if dropped == 0 { all } else { all.select(&keep) };
        Ok(Imported {
            data,
            source: Source::D4rl,
            file: PathBuf::new(),
            episodes,
            dropped,
            dropped_terminals,
            obs_keys: obs.keys,
            notes,
        })
    }

    /// Groups `episode_N`, each with `observations` [T + 1, ...] (an array or a group),
    /// `actions` [T, ...], `rewards`, `terminations` and `truncations` [T].
    fn minari(f: &hdf5::File, opts: &ImportOptions) -> Result<Imported> {
        let pick = opts.obs_keys.as_deref();
        let mut names: Vec<(u64, String)> = keys_of(f)
            .into_iter()
            .filter_map(|n| Some((episode_index(&n)?, n)))
            .collect();
        names.sort();
        if names.is_empty() {
            bail!("no `episode_N` groups (keys present: {:?})", keys_of(f));
        }
        let mut notes = vec![];
        let mut shape: Option<(Vec<usize>, Vec<String>, String)> = None;
        let (mut o, mut nx, mut r, mut term, mut tout) = (vec![], vec![], vec![], vec![], vec![]);
        // `Err(reason)` once some episode has no usable actions: all are then left out.
        let mut acts: Result<Option<Actions>, String> = Ok(None);
        let mut unended = 0;
        for (_, name) in &names {
            let g = match kind(f, name) {
                Some(LocationType::Group) => f
                    .group(name)
                    .map_err(|e| anyhow!("key `{name}`: cannot open ({e})"))?,
                _ => bail!("key `{name}`: not a group"),
            };
            let key = |k: &str| format!("{name}/{k}");
            let rew = array(&g, "rewards", &key("rewards"))?;
            if rew.shape.is_empty() || rows(&rew) == 0 {
                bail!("key `{name}`: an empty episode (no steps in `{name}/rewards`)");
            }
            let t = rows(&rew);
            let why = format!("the steps of `{name}/rewards`");
            let rew = rewards(&rew, &key("rewards"), t, &why)?;
            let te = flags(
                &array(&g, "terminations", &key("terminations"))?,
                &key("terminations"),
                t,
                &why,
            )?;
            let mut tr = flags(
                &array(&g, "truncations", &key("truncations"))?,
                &key("truncations"),
                t,
                &why,
            )?;
            let obs = observations(&g, &key("observations"), "observations", pick)?;
            if obs.rows != t + 1 {
                bail!(
                    "key `{}`: {} rows, expected {} (one more than the {t} steps of `{}`)",
                    key("observations"),
                    obs.rows,
                    t + 1,
                    key("rewards")
                );
            }
            match &shape {
                None => shape = Some((obs.shape.clone(), obs.keys.clone(), name.clone())),
                Some((s, k, first)) if *s != obs.shape || *k != obs.keys => bail!(
                    "key `{}`: shape {:?} per row (keys {:?}), `{first}` has {s:?} (keys {k:?})",
                    key("observations"),
                    obs.shape,
                    obs.keys
                ),
                _ => {}
            }
            for s in 0..t {
                o.extend_from_slice(obs.row(s));
                nx.extend_from_slice(obs.row(s + 1));
            }
            // An episode that stops without either flag was cut by the recording.
            if !te[t - 1] && !tr[t - 1] {
                tr[t - 1] = true;
                unended += 1;
            }
            r.extend(rew);
            term.extend(te);
            tout.extend(tr);
            acts = match (acts, kind(&g, "actions")) {
                (Err(why), _) => Err(why),
                (Ok(_), None) => Err(format!("`{name}` has no `actions`")),
                (Ok(_), Some(LocationType::Group)) => Err(format!(
                    "`{}` is a group (a dict action space)",
                    key("actions")
                )),
                (Ok(prev), Some(_)) => {
                    let a = actions(
                        &array(&g, "actions", &key("actions"))?,
                        &key("actions"),
                        t,
                        &why,
                    )?;
                    Ok(Some(match (prev, a) {
                        (None, a) => a,
                        (Some(Actions::Discrete(mut p)), Actions::Discrete(v)) => {
                            p.extend(v);
                            Actions::Discrete(p)
                        }
                        (
                            Some(Actions::Continuous { dim, mut values }),
                            Actions::Continuous { dim: d2, values: v },
                        ) if dim == d2 => {
                            values.extend(v);
                            Actions::Continuous { dim, values }
                        }
                        (Some(p), a) => bail!(
                            "key `{}`: {}, the episodes before have {}",
                            key("actions"),
                            describe(&a),
                            describe(&p)
                        ),
                    }))
                }
            };
        }
        let actions = match acts {
            Ok(a) => a,
            Err(why) => {
                notes.push(format!("{why}: actions left out"));
                None
            }
        };
        if unended > 0 {
            notes.push(format!(
                "{unended} episodes stop with neither termination nor truncation: their last \
                 step is marked as a timeout"
            ));
        }
        let (obs_shape, keys, _) = shape.unwrap_or_default();
        let data = Dataset {
            obs_shape,
            observations: o.into(),
            next_observations: nx.into(),
            rewards: r,
            terminals: term,
            timeouts: Some(tout),
            actions,
        };
        Ok(Imported {
            data,
            source: Source::Minari,
            file: PathBuf::new(),
            episodes: names.len(),
            dropped: 0,
            dropped_terminals: 0,
            obs_keys: keys,
            notes,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::import::{convert, import, ImportOptions, Source};
        use hdf5::H5Type;

        fn put<T: H5Type>(g: &Group, name: &str, shape: &[usize], v: &[T]) {
            g.new_dataset::<T>()
                .shape(shape.to_vec())
                .create(name)
                .unwrap()
                .write_raw(v)
                .unwrap();
        }

        /// Chunked and gzip-compressed, as D4RL's files store their arrays.
        fn put_gz<T: H5Type>(g: &Group, name: &str, shape: &[usize], v: &[T]) {
            let mut chunk = shape.to_vec();
            chunk[0] = chunk[0].div_ceil(3);
            g.new_dataset::<T>()
                .chunk(chunk)
                .deflate(4)
                .shape(shape.to_vec())
                .create(name)
                .unwrap()
                .write_raw(v)
                .unwrap();
        }

        fn err(path: &Path, source: Source, opts: &ImportOptions) -> String {
            format!("{:#}", import(path, source, opts).unwrap_err())
        }

        /// 7 rows in three episodes: rows 0-2 (timeout at 2), 3-4 (terminal at 4), 5-6
        /// (the end of the file). Observation row i is [i, 10 i, 100 i].
        fn d4rl_file(path: &Path, next: bool) {
            let f = hdf5::File::create(path).unwrap();
            let obs: Vec<f32> = (0..7)
                .flat_map(|i| [i as f32, 10.0 * i as f32, 100.0 * i as f32])
                .collect();
            put_gz(&f, "observations", &[7, 3], &obs);
            if next {
                let nx: Vec<f32> = obs.iter().map(|x| x + 0.5).collect();
                put_gz(&f, "next_observations", &[7, 3], &nx);
            }
            let act: Vec<f64> = (0..14).map(|i| i as f64 * 0.25).collect();
            put(&f, "actions", &[7, 2], &act);
            let rew: Vec<f64> = (0..7).map(|i| i as f64 + 0.125).collect();
            put_gz(&f, "rewards", &[7], &rew);
            let term = [false, false, false, false, true, false, false];
            put(&f, "terminals", &[7], &term);
            put(&f, "timeouts", &[7], &[0u8, 0, 1, 0, 0, 0, 0]);
            put(&f.create_group("infos").unwrap(), "qpos", &[7], &[0f32; 7]);
        }

        #[test]
        fn d4rl_fixture_is_chunked_and_compressed() {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("d.hdf5");
            d4rl_file(&p, false);
            let f = hdf5::File::open(&p).unwrap();
            let ds = f.dataset("observations").unwrap();
            assert_eq!(ds.chunk(), Some(vec![3, 3]));
            // Superblock version 0, as h5py writes by default.
            assert_eq!(std::fs::read(&p).unwrap()[8], 0);
            assert!(ds
                .filters()
                .iter()
                .any(|x| matches!(x, hdf5::filters::Filter::Deflate(4))));
        }

        #[test]
        fn d4rl_import_respects_episode_boundaries() {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("d.hdf5");
            d4rl_file(&p, false);
            let imp = import(&p, Source::Auto, &ImportOptions::default()).unwrap();
            assert_eq!(imp.source, Source::D4rl);
            let d = &imp.data;
            // Kept: rows 0, 1, 3, 5; the last row of each episode has no next observation.
            assert_eq!((d.len(), imp.episodes, imp.dropped), (4, 3, 3));
            assert_eq!(imp.dropped_terminals, 1);
            let row = |i: usize| [i as f32, 10.0 * i as f32, 100.0 * i as f32];
            for (k, i) in [0usize, 1, 3, 5].into_iter().enumerate() {
                assert_eq!(d.obs(k), row(i));
                assert_eq!(
                    d.next_obs(k),
                    row(i + 1),
                    "transition {k} crosses an episode"
                );
                assert_eq!(d.rewards[k], i as f32 + 0.125);
            }
            assert_eq!(d.terminals, vec![false; 4]);
            assert_eq!(d.timeouts, Some(vec![false, true, true, true]));
            assert_eq!(
                d.actions,
                Some(Actions::Continuous {
                    dim: 2,
                    values: vec![0.0, 0.25, 0.5, 0.75, 1.5, 1.75, 2.5, 2.75],
                })
            );
            let s = imp.summary();
            assert!(
                s.contains("dropped rows: 3") && s.contains("1 of them terminal"),
                "{s}"
            );
        }

        #[test]
        fn d4rl_next_observations_are_used_when_present() {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("d.hdf5");
            d4rl_file(&p, true);
            let imp = import(&p, Source::D4rl, &ImportOptions::default()).unwrap();
            let d = &imp.data;
            assert_eq!((d.len(), imp.dropped, imp.episodes), (7, 0, 3));
            for i in 0..7 {
                let x = i as f32;
                assert_eq!(d.obs(i), [x, 10.0 * x, 100.0 * x]);
                assert_eq!(d.next_obs(i), [x + 0.5, 10.0 * x + 0.5, 100.0 * x + 0.5]);
            }
            assert_eq!(
                d.terminals,
                vec![false, false, false, false, true, false, false]
            );
            // The file's own timeout, and its last row, which ends the last episode.
            assert_eq!(
                d.timeouts,
                Some(vec![false, false, true, false, false, false, true])
            );
        }

        #[test]
        fn d4rl_without_flags_says_what_it_assumes() {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("d.hdf5");
            {
                let f = hdf5::File::create(&p).unwrap();
                put(&f, "observations", &[4], &[0u8, 1, 2, 3]);
                put(&f, "rewards", &[4, 1], &[0f32, 0.0, 0.0, 1.0]);
                put(&f, "actions", &[4], &[2i32, 0, 1, 1]);
            }
            let imp = import(&p, Source::D4rl, &ImportOptions::default()).unwrap();
            let d = &imp.data;
            assert_eq!((d.len(), imp.episodes, imp.dropped), (3, 1, 1));
            assert_eq!(d.obs_shape, vec![1]);
            assert_eq!(d.next_observations, vec![1.0, 2.0, 3.0]);
            assert_eq!(d.actions, Some(Actions::Discrete(vec![2, 0, 1])));
            let notes = imp.notes.join("\n");
            assert!(
                notes.contains("no `terminals`") && notes.contains("no `timeouts`"),
                "{notes}"
            );
        }

        /// Two episodes (3 and 2 steps) with a dict observation: `observation` [T + 1, 2],
        /// `achieved_goal` [T + 1, 1], `goal/desired` [T + 1, 2] (nested), in
        /// data/main_data.hdf5, written in the newest file format (the D4RL fixture has the
        /// oldest).
        fn minari_dir(dir: &Path) -> PathBuf {
            std::fs::create_dir_all(dir.join("data")).unwrap();
            let p = dir.join("data").join("main_data.hdf5");
            let f = hdf5::File::with_options()
                .with_fapl(|a| a.libver_latest())
                .create(&p)
                .unwrap();
            for (e, t) in [(0usize, 3usize), (1, 2)] {
                let g = f.create_group(&format!("episode_{e}")).unwrap();
                let base = 100.0 * e as f64;
                let o = g.create_group("observations").unwrap();
                let obs: Vec<f64> = (0..=t)
                    .flat_map(|s| [base + s as f64, -(s as f64)])
                    .collect();
                put_gz(&o, "observation", &[t + 1, 2], &obs);
                let ach: Vec<f32> = (0..=t).map(|s| (base + s as f64) as f32 + 0.5).collect();
                put(&o, "achieved_goal", &[t + 1, 1], &ach);
                let goal = o.create_group("goal").unwrap();
                put(&goal, "desired", &[t + 1, 2], &vec![7f32; 2 * (t + 1)]);
                put(&g, "actions", &[t], &(0..t as i64).collect::<Vec<_>>());
                put(&g, "rewards", &[t], &vec![1f64; t]);
                let mut te = vec![false; t];
                te[t - 1] = e == 0;
                put(&g, "terminations", &[t], &te);
                let mut tr = vec![false; t];
                tr[t - 1] = e == 1;
                put(&g, "truncations", &[t], &tr);
            }
            p
        }

        #[test]
        fn minari_episodes_and_dict_observations() {
            let dir = tempfile::tempdir().unwrap();
            let p = minari_dir(dir.path());
            assert!(std::fs::read(&p).unwrap()[8] >= 2, "not a new superblock");
            let imp = import(dir.path(), Source::Auto, &ImportOptions::default()).unwrap();
            assert_eq!((imp.source, imp.file.clone()), (Source::Minari, p.clone()));
            assert_eq!(
                imp.obs_keys,
                ["achieved_goal", "goal/desired", "observation"]
            );
            let d = &imp.data;
            assert_eq!((d.len(), imp.episodes, imp.dropped), (5, 2, 0));
            assert_eq!(d.obs_shape, vec![5]);
            let row = |e: usize, s: usize| {
                let x = (100 * e + s) as f32;
                [x + 0.5, 7.0, 7.0, x, -(s as f32)]
            };
            let steps = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)];
            for (k, &(e, s)) in steps.iter().enumerate() {
                assert_eq!(d.obs(k), row(e, s));
                assert_eq!(d.next_obs(k), row(e, s + 1), "transition {k}");
            }
            assert_eq!(d.terminals, vec![false, false, true, false, false]);
            assert_eq!(d.timeouts, Some(vec![false, false, false, false, true]));
            assert_eq!(d.actions, Some(Actions::Discrete(vec![0, 1, 2, 0, 1])));

            // The user's keys, in the user's order; the file itself works too.
            let opts = ImportOptions {
                obs_keys: Some(vec!["observation".into(), "achieved_goal".into()]),
            };
            let imp = import(&p, Source::Minari, &opts).unwrap();
            assert_eq!(imp.data.obs_shape, vec![3]);
            assert_eq!(imp.data.obs(4), [101.0, -1.0, 101.5]);
            assert_eq!(imp.data.next_obs(4), [102.0, -2.0, 102.5]);
        }

        #[test]
        fn episodes_are_read_in_numeric_order() {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("m.hdf5");
            {
                let f = hdf5::File::create(&p).unwrap();
                for e in [10usize, 2] {
                    let g = f.create_group(&format!("episode_{e}")).unwrap();
                    put(&g, "observations", &[2, 1], &[e as f32, e as f32 + 1.0]);
                    put(&g, "rewards", &[1], &[0f32]);
                    put(&g, "terminations", &[1], &[false]);
                    put(&g, "truncations", &[1], &[false]);
                }
            }
            let imp = import(&p, Source::Auto, &ImportOptions::default()).unwrap();
            assert_eq!(imp.data.observations, vec![2.0, 10.0]);
            // Neither flag: cut by the recording, and said so.
            assert_eq!(imp.data.timeouts, Some(vec![true, true]));
            assert!(
                imp.notes.iter().any(|n| n.contains("2 episodes stop")),
                "{:?}",
                imp.notes
            );
            assert!(imp.notes.iter().any(|n| n.contains("actions left out")));
        }

        #[test]
        fn d4rl_errors_name_the_file_and_key() {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("bad.hdf5");
            let write = |f: &dyn Fn(&hdf5::File)| {
                let _ = std::fs::remove_file(&p);
                let h = hdf5::File::create(&p).unwrap();
                put(
                    &h,
                    "observations",
                    &[3, 2],
                    &[0f32, 1.0, 2.0, 3.0, 4.0, 5.0],
                );
                f(&h);
            };
            let o = ImportOptions::default();
            let check = |e: String, want: &[&str]| {
                assert!(e.contains("bad.hdf5"), "{e}");
                for w in want {
                    assert!(e.contains(w), "`{w}` not in: {e}");
                }
            };

            write(&|_| {});
            check(err(&p, Source::D4rl, &o), &["missing key `rewards`"]);
            write(&|h| put(h, "rewards", &[2], &[0f32, 1.0]));
            check(
                err(&p, Source::D4rl, &o),
                &["`rewards`", "2 rows, expected 3"],
            );
            write(&|h| put(h, "rewards", &[3, 2], &[0f32; 6]));
            check(err(&p, Source::D4rl, &o), &["`rewards`", "shape [3, 2]"]);
            write(&|h| put(h, "rewards", &[3], &[0f32, f32::NAN, 0.0]));
            check(
                err(&p, Source::D4rl, &o),
                &["`rewards`", "row 1", "non-finite"],
            );
            write(&|h| {
                put(h, "rewards", &[3], &[0f32; 3]);
                put(h, "terminals", &[3], &[0f32, 0.5, 0.0]);
            });
            check(err(&p, Source::D4rl, &o), &["`terminals`", "row 1 is 0.5"]);
            write(&|h| {
                put(h, "rewards", &[3], &[0f32; 3]);
                put(h, "actions", &[3, 1], &[0f64, f64::INFINITY, 0.0]);
            });
            check(
                err(&p, Source::D4rl, &o),
                &["`actions`", "row 1", "non-finite"],
            );
            write(&|h| {
                put(h, "rewards", &[3], &[0f32; 3]);
                put(h, "next_observations", &[3, 3], &[0f32; 9]);
            });
            check(
                err(&p, Source::D4rl, &o),
                &["`next_observations`", "shape [3]"],
            );
            write(&|h| {
                let s: Vec<hdf5::types::FixedAscii<4>> = (0..3)
                    .map(|_| hdf5::types::FixedAscii::from_ascii(b"abc").unwrap())
                    .collect();
                put(h, "rewards", &[3], &s);
            });
            check(err(&p, Source::D4rl, &o), &["`rewards`", "not supported"]);
            write(&|h| {
                put(h, "rewards", &[3], &[0f32; 3]);
                put(h, "timeouts", &[3], &[true; 3]);
            });
            check(err(&p, Source::D4rl, &o), &["no transition left"]);
            write(&|h| put(h, "rewards", &[3], &[0f32; 3]));
            let pick = ImportOptions {
                obs_keys: Some(vec!["a".into()]),
            };
            check(
                err(&p, Source::D4rl, &pick),
                &["`observations` is one array"],
            );

            // NaN in an observation, with its row.
            let _ = std::fs::remove_file(&p);
            {
                let h = hdf5::File::create(&p).unwrap();
                put_gz(
                    &h,
                    "observations",
                    &[3, 2],
                    &[0f64, 1.0, 2.0, 3.0, f64::NAN, 5.0],
                );
                put(&h, "rewards", &[3], &[0f32; 3]);
            }
            check(
                err(&p, Source::Auto, &o),
                &["`observations`", "row 2", "NaN"],
            );

            // Not HDF5 at all, or not there.
            std::fs::write(&p, b"not an hdf5 file").unwrap();
            check(err(&p, Source::D4rl, &o), &["not a readable HDF5 file"]);
            let gone = dir.path().join("gone.hdf5");
            let e = err(&gone, Source::Auto, &o);
            assert!(e.contains("gone.hdf5"), "{e}");
        }

        #[test]
        fn minari_errors_name_the_episode_and_key() {
            let o = ImportOptions::default();
            let broken = |f: &dyn Fn(&hdf5::File)| {
                let dir = tempfile::tempdir().unwrap();
                let p = minari_dir(dir.path());
                f(&hdf5::File::open_rw(&p).unwrap());
                let e = err(dir.path(), Source::Minari, &o);
                assert!(e.contains("main_data.hdf5"), "{e}");
                e
            };
            let e = broken(&|f| f.unlink("episode_1/truncations").unwrap());
            assert!(e.contains("missing key `episode_1/truncations`"), "{e}");
            let e = broken(&|f| {
                f.unlink("episode_1/rewards").unwrap();
                put(&f.group("episode_1").unwrap(), "rewards", &[3], &[0f32; 3]);
            });
            assert!(
                e.contains("`episode_1/terminations`: 2 rows, expected 3"),
                "{e}"
            );
            let e = broken(&|f| {
                f.unlink("episode_1/observations/achieved_goal").unwrap();
                let g = f.group("episode_1/observations").unwrap();
                put(&g, "achieved_goal", &[3, 1], &[0f32, f32::NAN, 0.0]);
            });
            assert!(
                e.contains("`episode_1/observations/achieved_goal`: row 1 holds a non-finite"),
                "{e}"
            );
            let e = broken(&|f| {
                let g = f.create_group("episode_2").unwrap();
                put(&g, "observations", &[1, 2], &[0f32; 2]);
                for k in ["rewards", "terminations", "truncations"] {
                    put(&g, k, &[0], &[0f32; 0]);
                }
            });
            assert!(e.contains("`episode_2`: an empty episode"), "{e}");
            let e = broken(&|f| {
                f.unlink("episode_0/observations/achieved_goal").unwrap();
            });
            assert!(
                e.contains("`episode_1/observations`") && e.contains("episode_0"),
                "{e}"
            );

            let dir = tempfile::tempdir().unwrap();
            minari_dir(dir.path());
            let pick = ImportOptions {
                obs_keys: Some(vec!["observation".into(), "velocity".into()]),
            };
            let e = err(dir.path(), Source::Auto, &pick);
            assert!(
                e.contains("`episode_0/observations/velocity` not found")
                    && e.contains("achieved_goal, goal/desired, observation"),
                "{e}"
            );
            let empty = dir.path().join("empty");
            std::fs::create_dir(&empty).unwrap();
            let e = err(&empty, Source::Minari, &o);
            assert!(e.contains("without data/main_data.hdf5"), "{e}");
        }

        #[test]
        fn convert_writes_whole_files_only() {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("d.hdf5");
            d4rl_file(&p, false);
            let o = ImportOptions::default();
            for name in ["d.npz", "d.safetensors"] {
                let out = dir.path().join(name);
                let imp = convert(&p, Source::Auto, &o, &out).unwrap();
                assert_eq!(Dataset::load(&out).unwrap(), imp.data);
            }
            // Episode ends survive: `laq inspect` finds no transition out of time order.
            let (_, j) = crate::inspect::inspect(&dir.path().join("d.npz"), None).unwrap();
            assert_eq!(j["episodes"]["count"], 3, "{j}");
            let problems = j["problems"].as_array().unwrap();
            assert!(
                !problems
                    .iter()
                    .any(|p| p.as_str().unwrap().contains("next observation")),
                "{j}"
            );

            // A failed conversion leaves nothing behind.
            let bad = dir.path().join("bad.hdf5");
            std::fs::write(&bad, b"junk").unwrap();
            let out = dir.path().join("bad.npz");
            assert!(convert(&bad, Source::D4rl, &o, &out).is_err());
            assert!(convert(&p, Source::D4rl, &o, &dir.path().join("d.csv")).is_err());
            let mut left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            left.sort();
            assert_eq!(left, ["bad.hdf5", "d.hdf5", "d.npz", "d.safetensors"]);
        }
    }
}
