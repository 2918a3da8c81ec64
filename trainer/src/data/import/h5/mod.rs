//! The HDF5 side of the import, through `hdf5-reader`, a decoder of the file format written
//! in Rust.

use super::{ImportOptions, Imported, Source};
use crate::data::following::Following;
use crate::data::frames::FrameLayout;
use crate::data::{Actions, DType, Dataset, Observations, RawArray};
use anyhow::{anyhow, bail, Context, Result};
use hdf5_reader::error::Error as H5Error;
use hdf5_reader::group::Group;
use hdf5_reader::{ByteOrder, Datatype, Hdf5File, OpenOptions, StringSize, VarLenKind};
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
        Source::Robomimic => robomimic(&h5, opts),
        _ => d4rl(&h5, opts),
    };
    let mut imported =
        res.with_context(|| format!("cannot import {} as {}", file.display(), source.name()))?;
    // Rows left out are reported by the caller: `read` warns, `laq convert` prints them.
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

/// The root group of the file; it keeps the file open.
fn open(path: &Path) -> Result<Group> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    let unreadable =
        |why: String| anyhow!("{} is not a readable HDF5 file ({why})", path.display());
    let options = OpenOptions::default().with_filter_registry(lzf::registry());
    let f = Hdf5File::open_with_options(path, options).map_err(|e| unreadable(e.to_string()))?;
    // Refused as the HDF5 library refuses it: a file shorter than its superblock records
    // was cut short (an interrupted download), and arrays past the cut are lost.
    let sb = f.superblock();
    let end = sb.base_address.saturating_add(sb.eof_address);
    if len < end {
        return Err(unreadable(format!(
            "truncated: {len} bytes, where the file records {end}"
        )));
    }
    f.root_group().map_err(|e| unreadable(e.to_string()))
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
        "{}: a directory without data/main_data.hdf5, so not a Minari dataset (nor a \
         LeRobot dataset: no meta/info.json)",
        path.display()
    )
}

fn detect(path: &Path) -> Result<Source> {
    if path.is_dir() {
        return Ok(Source::Minari);
    }
    let f = open(path)?;
    let cannot = || format!("cannot read {}", path.display());
    if kind(&f, "observations", "observations")
        .with_context(cannot)?
        .is_some()
    {
        return Ok(Source::D4rl);
    }
    let names = keys_of(&f).with_context(cannot)?;
    if names.iter().any(|n| episode_index(n).is_some()) {
        return Ok(Source::Minari);
    }
    if kind(&f, "data", "data").with_context(cannot)? == Some(Kind::Group) {
        let demos = keys_of(&group(&f, "data", "data")?).with_context(cannot)?;
        if demos.iter().any(|n| demo_index(n).is_some()) {
            return Ok(Source::Robomimic);
        }
    }
    bail!(
        "{}: neither a D4RL file (`observations` at the root), a Minari file \
         (`episode_N` groups) nor a robomimic file (`data/demo_N` groups); keys present: \
         {names:?}",
        path.display()
    )
}

fn episode_index(name: &str) -> Option<u64> {
    name.strip_prefix("episode_")?.parse().ok()
}

fn demo_index(name: &str) -> Option<u64> {
    name.strip_prefix("demo_")?.parse().ok()
}

/// What a key of a group names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Array,
    Group,
}

/// What `name` (a path relative to `g`) is, `None` where the file has nothing there (or
/// something neither an array nor a group, such as a named datatype); `key` is its path
/// in the file, for messages.
fn kind(g: &Group, name: &str, key: &str) -> Result<Option<Kind>> {
    let Some((parent, leaf)) = parent(g, name, key)? else {
        return Ok(None);
    };
    let unreadable = |e: H5Error| anyhow!("key `{key}`: cannot open ({e})");
    // By name rather than from a listing of the group: a Minari file has one group per
    // episode, and listing the root once per episode would cost the square of their count.
    match parent.group(leaf) {
        Ok(_) => return Ok(Some(Kind::Group)),
        Err(H5Error::GroupNotFound(_)) => {}
        Err(e) => return Err(unreadable(e)),
    }
    match parent.dataset(leaf) {
        Ok(_) => Ok(Some(Kind::Array)),
        Err(H5Error::DatasetNotFound(_)) => Ok(None),
        Err(e) => Err(unreadable(e)),
    }
}

/// The group holding the last component of `path` (relative to `g`) and that component;
/// `None` when a group on the way is missing.
fn parent<'a>(g: &Group, path: &'a str, key: &str) -> Result<Option<(Group, &'a str)>> {
    let (dirs, leaf) = match path.rsplit_once('/') {
        Some((dirs, leaf)) => (Some(dirs), leaf),
        None => (None, path),
    };
    let mut at = g.clone();
    for part in dirs.into_iter().flat_map(|d| d.split('/')) {
        at = match at.group(part) {
            Ok(next) => next,
            Err(H5Error::GroupNotFound(_)) => return Ok(None),
            Err(e) => bail!("key `{key}`: cannot open ({e})"),
        };
    }
    Ok(Some((at, leaf)))
}

/// The keys of `g`, sorted, as the HDF5 library lists them by name.
fn keys_of(g: &Group) -> Result<Vec<String>> {
    let (groups, arrays) = g
        .member_names()
        .map_err(|e| anyhow!("cannot list the keys of `{}` ({e})", g.name()))?;
    let mut keys: Vec<String> = groups.into_iter().chain(arrays).collect();
    keys.sort();
    Ok(keys)
}

/// The group `name` of `g`; `key` is its path in the file, for messages.
fn group(g: &Group, name: &str, key: &str) -> Result<Group> {
    let (parent, leaf) = parent(g, name, key)?.ok_or_else(|| anyhow!("missing key `{key}`"))?;
    parent
        .group(leaf)
        .map_err(|e| anyhow!("key `{key}`: cannot open ({e})"))
}

/// The array `name` of `g`; `key` is its path in the file, for messages.
fn array(g: &Group, name: &str, key: &str) -> Result<RawArray> {
    match kind(g, name, key)? {
        Some(Kind::Array) => {}
        Some(Kind::Group) => bail!("key `{key}`: a group, expected an array"),
        None => bail!("missing key `{key}` (keys present: {:?})", keys_of(g)?),
    }
    let (parent, leaf) = parent(g, name, key)?.ok_or_else(|| anyhow!("missing key `{key}`"))?;
    let ds = parent
        .dataset(leaf)
        .map_err(|e| anyhow!("key `{key}`: cannot open ({e})"))?;
    read(&ds, key)
}

fn read(ds: &hdf5_reader::Dataset, key: &str) -> Result<RawArray> {
    let t = ds.dtype();
    let (dtype, order) = element(t).ok_or_else(|| {
        anyhow!(
            "key `{key}`: dtype {} not supported (numbers or booleans only)",
            type_name(t)
        )
    })?;
    let shape = ds
        .shape()
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| anyhow!("key `{key}`: shape {:?} too large", ds.shape()))?;
    let len = shape
        .iter()
        .try_fold(dtype.size() as u64, |n, &d| n.checked_mul(d as u64));
    crate::util::memory::ensure_fits(
        &format!("`{key}`"),
        &format!("{shape:?} {}", dtype.name()),
        len.unwrap_or(u64::MAX),
    )?;
    // The elements as stored, in the file's byte order, after the filters.
    let mut bytes = ds.read_raw_bytes().map_err(|e| {
        // Compressors outside HDF5's own set that h5py's plugins add (Blosc, bitshuffle,
        // Zstandard, ...) need their C libraries; LZF is read.
        let hint = if e.to_string().contains("unsupported filter") {
            ": a compression this reader lacks; write the arrays again with \
             compression=\"gzip\" or \"lzf\", or none"
        } else {
            ""
        };
        anyhow!("key `{key}`: cannot read ({e}){hint}")
    })?;
    if order == ByteOrder::BigEndian {
        for x in bytes.chunks_exact_mut(dtype.size()) {
            x.reverse();
        }
    }
    let a = RawArray {
        dtype,
        shape,
        bytes,
    };
    a.check_size(key)?;
    Ok(a)
}

/// The type an HDF5 element type is read as, and its byte order in the file; `None` for
/// types that hold no number.
fn element(t: &Datatype) -> Option<(DType, ByteOrder)> {
    Some(match *t {
        Datatype::FloatingPoint { size, byte_order } => {
            let d = match size {
                2 => DType::F16,
                4 => DType::F32,
                8 => DType::F64,
                _ => return None,
            };
            (d, byte_order)
        }
        Datatype::FixedPoint {
            size,
            signed,
            byte_order,
        } => {
            let d = match (size, signed) {
                (1, true) => DType::I8,
                (2, true) => DType::I16,
                (4, true) => DType::I32,
                (8, true) => DType::I64,
                (1, false) => DType::U8,
                (2, false) => DType::U16,
                (4, false) => DType::U32,
                (8, false) => DType::U64,
                _ => return None,
            };
            (d, byte_order)
        }
        Datatype::Enum { .. } if is_bool(t) => (DType::Bool, ByteOrder::LittleEndian),
        _ => return None,
    })
}

/// h5py's booleans: an enum over one-byte integers with FALSE = 0 and TRUE = 1.
fn is_bool(t: &Datatype) -> bool {
    let Datatype::Enum { base, members } = t else {
        return false;
    };
    let one_byte = matches!(**base, Datatype::FixedPoint { size: 1, .. });
    let mut values: Vec<(&str, &[u8])> = members
        .iter()
        .map(|m| (m.name.as_str(), m.value.as_slice()))
        .collect();
    values.sort();
    one_byte && values == [("FALSE", &[0u8][..]), ("TRUE", &[1u8][..])]
}

/// An element type in words, for messages.
fn type_name(t: &Datatype) -> String {
    match t {
        Datatype::FixedPoint { size, signed, .. } => {
            format!(
                "{}{}",
                if *signed { "i" } else { "u" },
                8 * u32::from(*size)
            )
        }
        Datatype::FloatingPoint { size, .. } => format!("f{}", 8 * u32::from(*size)),
        Datatype::String {
            size: StringSize::Fixed(n),
            ..
        } => format!("string (fixed length {n})"),
        Datatype::String { .. }
        | Datatype::VarLen {
            kind: VarLenKind::String,
            ..
        } => "string (variable length)".into(),
        Datatype::VarLen { .. } => "variable-length sequence".into(),
        Datatype::Compound { .. } => "compound".into(),
        Datatype::Array { .. } => "array".into(),
        Datatype::Enum { .. } => "enum".into(),
        Datatype::Opaque { .. } => "opaque".into(),
        Datatype::Reference { .. } => "reference".into(),
        Datatype::Bitfield { .. } => "bitfield".into(),
    }
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
    if let Some(why) = crate::data::inexact(key, a, &wide) {
        log::warn!("{why}");
    }
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
    a.flags(key)
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

/// The actions of episodes read one after another: every episode's, or none once one
/// episode has none that can be used (`Err` says why: all are then left out).
struct EpisodeActions(Result<Option<Actions>, String>);

impl Default for EpisodeActions {
    fn default() -> Self {
        EpisodeActions(Ok(None))
    }
}

impl EpisodeActions {
    /// Adds the `actions` of the episode group `g` (`at` in the file) of `t` steps; an
    /// episode's actions of another kind than the ones before are an error.
    fn add(&mut self, g: &Group, at: &str, t: usize, why: &str) -> Result<()> {
        let prev = match &mut self.0 {
            Err(_) => return Ok(()),
            Ok(prev) => prev.take(),
        };
        let key = format!("{at}/actions");
        self.0 = match kind(g, "actions", &key)? {
            None => Err(format!("`{at}` has no `actions`")),
            Some(Kind::Group) => Err(format!("`{key}` is a group (a dict action space)")),
            Some(Kind::Array) => {
                let a = actions(&array(g, "actions", &key)?, &key, t, why)?;
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
                        "key `{key}`: {}, the episodes before have {}",
                        describe(&a),
                        describe(&p)
                    ),
                }))
            }
        };
        Ok(())
    }

    /// The actions, or none with a note in `notes` saying why.
    fn finish(self, notes: &mut Vec<String>) -> Option<Actions> {
        match self.0 {
            Ok(a) => a,
            Err(why) => {
                notes.push(format!("{why}: actions left out"));
                None
            }
        }
    }
}

fn describe(a: &Actions) -> String {
    match a {
        Actions::Discrete(_) => "discrete".into(),
        Actions::Continuous { dim, .. } => format!("continuous with {dim} per step"),
    }
}

/// Observations from one array, or from the arrays of a group (a dict observation
/// space). One array keeps its shape per row, and u8 (frames) stays u8, as the dataset
/// format keeps it; so does the one array of a group that holds or is picked down to one
/// (a camera alone); several arrays are flattened side by side per row, as f32.
struct Obs {
    rows: usize,
    shape: Vec<usize>,
    values: Observations,
    keys: Vec<String>,
    /// What the user should know of how they were read (frames flattened with others).
    note: Option<String>,
}

impl Obs {
    fn width(&self) -> usize {
        self.shape.iter().product()
    }
    /// Rows `idx`, in that order.
    fn rows(&self, idx: impl IntoIterator<Item = usize>) -> Observations {
        let idx: Vec<usize> = idx.into_iter().collect();
        self.values.select(&idx, self.width())
    }

    /// One array `a` (at `key`) as observations, picked as `keys`.
    fn of_array(a: RawArray, key: &str, keys: Vec<String>) -> Result<Obs> {
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
        let rows = rows(&a);
        let values = match a.dtype {
            DType::U8 => Observations::U8(a.bytes),
            _ => Observations::F32(finite_f32(&a, key)?),
        };
        Ok(Obs {
            rows,
            shape,
            values,
            keys,
            note: None,
        })
    }
}

/// `note` and then `more`, as one note.
fn joined(note: Option<String>, more: String) -> Option<String> {
    Some(match note {
        Some(n) => format!("{n}; {more}"),
        None => more,
    })
}

/// What an array of a dict observation is to its default reading, from its header alone.
enum Member {
    /// No number or boolean (text, a compound): its element type in words.
    Text(String),
    /// A camera's frames: a row's shape as stored.
    Camera(Vec<usize>),
    /// Numbers: how many a row holds.
    Values(usize),
}

/// The array `name` of `g` (`key` in the file) as a [`Member`].
fn member(g: &Group, name: &str, key: &str) -> Result<Member> {
    let (parent, leaf) = parent(g, name, key)?.ok_or_else(|| anyhow!("missing key `{key}`"))?;
    let ds = parent
        .dataset(leaf)
        .map_err(|e| anyhow!("key `{key}`: cannot open ({e})"))?;
    let row: Vec<usize> = ds.shape().iter().skip(1).map(|&d| d as usize).collect();
    Ok(match element(ds.dtype()) {
        None => Member::Text(type_name(ds.dtype())),
        Some((DType::U8, _)) if frame_of(&row).is_some() => Member::Camera(row),
        Some(_) => Member::Values(row.iter().product()),
    })
}

/// Where the array `name` of `g` (`key` in the file) holds frames ([`frame_of`]): a row's
/// shape as stored, and as read, `[C, H, W]`. Only its header is read.
fn frame_shape(g: &Group, name: &str, key: &str) -> Result<Option<(Vec<usize>, [usize; 3])>> {
    Ok(match member(g, name, key)? {
        Member::Camera(row) => frame_of(&row).map(|chw| (row, chw)),
        Member::Text(_) | Member::Values(_) => None,
    })
}

/// A row of u8 values of shape `row`, as laq reads it where it is a frame: `[C, H, W]`
/// from any layout [`FrameLayout`] reads, or as it is; `None` for anything else.
fn frame_of(row: &[usize]) -> Option<[usize; 3]> {
    match FrameLayout::of(row, true) {
        Some(layout) => Some(layout.shape()),
        None => match *row {
            [c, h, w] => Some([c, h, w]),
            _ => None,
        },
    }
}

/// Cameras picked together: the arrays `keys` of the group `grp` (at `key` in the file,
/// named `name` in its episode), whose frames are `chw` as read, of one height and width.
/// Their frames side by side along the channels, `[C1 + C2 + ..., H, W]`, u8, as a stack
/// of frames is read.
fn stacked_cameras(
    grp: &Group,
    (key, name): (&str, &str),
    keys: &[String],
    chw: &[[usize; 3]],
) -> Result<Obs> {
    let mut parts = vec![];
    let mut n = None;
    for (k, &[c, h, w]) in keys.iter().zip(chw) {
        let full = format!("{key}/{k}");
        let mut a = array(grp, k, &full)?;
        same_rows(&mut n, &a, &full)?;
        if let Some(layout) = FrameLayout::of(&a.shape[1..], true) {
            layout.reorder_bytes(&mut a.bytes, 1);
        }
        parts.push((c * h * w, a.bytes));
    }
    let rows = n.map_or(0, |(m, _)| m);
    let [_, h, w] = chw[0];
    let channels: usize = chw.iter().map(|f| f[0]).sum();
    Ok(Obs {
        rows,
        shape: vec![channels, h, w],
        values: Observations::U8(side_by_side(&parts, rows)),
        keys: keys.to_vec(),
        note: Some(format!(
            "`{name}`: the frames of {} side by side along the channels, [{channels}, {h}, {w}]",
            keys.join(", ")
        )),
    })
}

/// Checks that the array `a` (at `key`) has as many rows as the first of its group, which
/// `first` records.
fn same_rows(first: &mut Option<(usize, String)>, a: &RawArray, key: &str) -> Result<()> {
    match first {
        None => *first = Some((rows(a), key.to_string())),
        Some((m, at)) if *m != rows(a) => bail!("key `{key}`: {} rows, `{at}` has {m}", rows(a)),
        _ => {}
    }
    Ok(())
}

/// The rows of `parts` (each `(values per row, values)`) side by side: row 0 of each, then
/// row 1 of each, ...
fn side_by_side<T: Copy>(parts: &[(usize, Vec<T>)], rows: usize) -> Vec<T> {
    let width: usize = parts.iter().map(|p| p.0).sum();
    let mut values = Vec::with_capacity(rows * width);
    for r in 0..rows {
        for (w, v) in parts {
            values.extend_from_slice(&v[r * w..(r + 1) * w]);
        }
    }
    values
}

/// Every array under `g`, as paths relative to it, sorted. `above` holds the addresses of
/// the groups on the way down: links may lead back to one of them (in a damaged file, or
/// a hard link to an ancestor), and the walk would then never end.
fn leaves(g: &Group, prefix: &str, above: &mut Vec<u64>, out: &mut Vec<String>) -> Result<()> {
    let (groups, arrays) = g.member_names()?;
    out.extend(arrays.into_iter().map(|m| format!("{prefix}{m}")));
    above.push(g.address());
    for m in groups {
        let sub = g.group(&m)?;
        if above.contains(&sub.address()) {
            bail!("`{prefix}{m}` links back to a group above it");
        }
        leaves(&sub, &format!("{prefix}{m}/"), above, out)?;
    }
    above.pop();
    out.sort();
    Ok(())
}

fn observations(g: &Group, key: &str, name: &str, pick: Option<&[String]>) -> Result<Obs> {
    match kind(g, name, key)? {
        None => bail!("missing key `{key}` (keys present: {:?})", keys_of(g)?),
        Some(Kind::Group) => {}
        Some(_) => {
            if pick.is_some() {
                bail!(
                    "key `{key}` is one array, so there are no keys to pick with \
                     --obs-keys (they select arrays of a dict observation group)"
                );
            }
            return Obs::of_array(array(g, name, key)?, key, vec![]);
        }
    }
    let grp = group(g, name, key)?;
    let mut all = vec![];
    leaves(&grp, "", &mut vec![], &mut all)
        .map_err(|e| anyhow!("key `{key}`: cannot list ({e})"))?;
    if all.is_empty() {
        bail!("key `{key}`: an empty group");
    }
    let mut note = None;
    // Whether cameras beside vectors were left out (by default), not flattened with them.
    let mut cameras_left_out = false;
    let keys = match pick {
        // Frames beside vectors: the vectors, as a LeRobot dataset's default is its state;
        // a camera's pixels flattened into a vector beside them would train a fully
        // connected network on every pixel, in f32.
        None => {
            let mut frames = vec![];
            let mut rest = vec![];
            let mut text = vec![];
            let mut width = 0;
            for k in all {
                match member(&grp, &k, &format!("{key}/{k}"))? {
                    Member::Text(t) => text.push(format!("`{k}` ({t})")),
                    Member::Camera(shape) => frames.push((k, shape)),
                    Member::Values(n) => {
                        width += n;
                        rest.push(k);
                    }
                }
            }
            // Text (a mission, an instruction) is no input a network reads: left out,
            // and said so, where numbers are beside it.
            if frames.is_empty() && rest.is_empty() {
                bail!(
                    "key `{key}`: no array of numbers or booleans ({})",
                    text.join(", ")
                );
            }
            if !text.is_empty() {
                note = Some(format!(
                    "`{name}`: {} left out, not numbers (where it tells each episode's \
                     goal, V does not read that goal)",
                    text.join(", ")
                ));
            }
            if frames.is_empty() || rest.is_empty() {
                rest.extend(frames.into_iter().map(|(k, _)| k));
                rest.sort();
                rest
            } else if width == 1 {
                // One number a row (MiniGrid's heading) is no state beside a camera, as a
                // robot's state vector is: the frames are.
                note = joined(
                    note,
                    format!(
                        "`{name}`: `{}` (one number a row) left out beside frames, which are \
                         read; `--obs-keys {}` flattens all into one vector",
                        rest[0],
                        frames
                            .iter()
                            .map(|(k, _)| k.as_str())
                            .chain([rest[0].as_str()])
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                );
                frames.into_iter().map(|(k, _)| k).collect()
            } else {
                let named: Vec<String> = frames
                    .iter()
                    .map(|(k, shape)| format!("`{k}` ({shape:?})"))
                    .collect();
                cameras_left_out = true;
                note = joined(
                    note,
                    format!(
                        "`{name}` holds frames, left out of the observations: {}; \
                         `--obs-keys {}` trains on that camera's frames instead of the vectors",
                        named.join(", "),
                        frames[0].0
                    ),
                );
                rest
            }
        }
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
    if let [only] = keys.as_slice() {
        let full = format!("{key}/{only}");
        let obs = Obs::of_array(array(&grp, only, &full)?, &full, keys)?;
        return Ok(Obs { note, ..obs });
    }
    let mut shapes = vec![];
    for k in &keys {
        shapes.push(frame_shape(&grp, k, &format!("{key}/{k}"))?);
    }
    let chw: Option<Vec<[usize; 3]>> = shapes.iter().map(|f| f.as_ref().map(|f| f.1)).collect();
    if let Some(chw) = chw.filter(|c| c.iter().all(|f| f[1..] == c[0][1..])) {
        return stacked_cameras(&grp, (key, name), &keys, &chw);
    }
    let frames: Vec<String> = keys
        .iter()
        .zip(&shapes)
        .filter_map(|(k, f)| Some(format!("`{k}` ({:?})", f.as_ref()?.0)))
        .collect();
    let mut parts = vec![];
    let mut n = None;
    for k in &keys {
        let full = format!("{key}/{k}");
        let a = array(&grp, k, &full)?;
        if a.shape.is_empty() {
            bail!("key `{full}`: a scalar, expected shape [N, ...]");
        }
        same_rows(&mut n, &a, &full)?;
        let w = a.shape[1..].iter().product::<usize>();
        parts.push((w, finite_f32(&a, &full)?));
    }
    let rows = n.map_or(0, |(m, _)| m);
    let width: usize = parts.iter().map(|p| p.0).sum();
    if width == 0 {
        bail!("key `{key}`: its arrays hold no value per row");
    }
    let values = side_by_side(&parts, rows);
    // Frames flattened among other arrays (cameras only, or picked so) train as a vector:
    // a fully connected network on every pixel, in f32.
    if !frames.is_empty() && !cameras_left_out {
        note = joined(
            note,
            format!(
                "`{name}` holds frames, {}: flattened with its other arrays into one vector \
                 of {width} values per step; `--obs-keys` naming one camera alone trains on \
                 its frames as images",
                frames.join(", ")
            ),
        );
    }
    // Which values of the vector are which key's, in the numbering `laq inspect` shows.
    let mut at = 0;
    let dims: Vec<String> = keys
        .iter()
        .zip(&parts)
        .map(|(k, (w, _))| {
            at += w;
            match w {
                1 => format!("`{k}` {}", at - 1),
                _ => format!("`{k}` {}-{}", at - w, at - 1),
            }
        })
        .collect();
    let note = joined(note, format!("`{name}`: dims {}", dims.join(", ")));
    Ok(Obs {
        rows,
        shape: vec![width],
        values: values.into(),
        keys,
        note,
    })
}

/// Root datasets `observations`, `actions`, `rewards`, `terminals`, `timeouts`, and
/// `next_observations` when the file has them.
fn d4rl(f: &Group, opts: &ImportOptions) -> Result<Imported> {
    let pick = opts.obs_keys.as_deref();
    let mut notes = vec![];
    let obs = observations(f, "observations", "observations", pick)?;
    let n = obs.rows;
    if n == 0 {
        bail!("key `observations`: no rows");
    }
    notes.extend(obs.note.clone());
    let why = "the rows of `observations`";
    let rk = opts.rewards.as_deref().unwrap_or("rewards");
    let rewards = rewards(&array(f, rk, rk)?, rk, n, why)?;
    let mut flag = |name: &str, assumed: &str| -> Result<Vec<bool>> {
        if kind(f, name, name)?.is_some() {
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
    let actions = match kind(f, "actions", "actions")? {
        Some(Kind::Array) => Some(actions(
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
                "no `actions`: label sources and metrics that need ground truth will say so".into(),
            );
            None
        }
    };
    let next = if kind(f, "next_observations", "next_observations")?.is_some() {
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
    let other: Vec<String> = keys_of(f)?
        .into_iter()
        .filter(|k| !KNOWN.contains(&k.as_str()))
        .collect();
    if !other.is_empty() {
        notes.push(format!("left out: {}", other.join(", ")));
    }

    let (data, episodes, dropped) = match next {
        Some(nx) => {
            // The file's last row ends an episode too: marked as cut, so the episode
            // structure stays visible in our format.
            let touts = (0..n)
                .map(|i| timeouts[i] || (i + 1 == n && !terminals[i]))
                .collect();
            let data = Dataset {
                obs_shape: obs.shape,
                observations: obs.values,
                next_observations: nx.values,
                rewards,
                terminals,
                timeouts: Some(touts),
                next_missing: None,
                actions,
            };
            let episodes = data.episode_ends().into_iter().filter(|&e| e).count();
            (data, episodes, 0)
        }
        None => {
            let f = Following::of(&terminals, &timeouts).any_left()?;
            let data = Dataset {
                obs_shape: obs.shape.clone(),
                observations: obs.rows(f.keep.iter().copied()),
                next_observations: obs.rows(f.next_row.iter().copied()),
                rewards: f.keep.iter().map(|&i| rewards[i]).collect(),
                terminals: f.terminals.clone(),
                timeouts: Some(f.timeouts.clone()),
                next_missing: Some(f.missing.clone()),
                actions: actions.map(|a| a.select(&f.keep)),
            };
            (data, f.episodes, f.dropped())
        }
    };
    Ok(Imported {
        data,
        source: Source::D4rl,
        file: PathBuf::new(),
        episodes,
        dropped,
        obs_keys: obs.keys,
        notes,
    })
}

/// Groups `episode_N`, each with `observations` [T + 1, ...] (an array or a group),
/// `actions` [T, ...], `rewards`, `terminations` and `truncations` [T].
fn minari(f: &Group, opts: &ImportOptions) -> Result<Imported> {
    let pick = opts.obs_keys.as_deref();
    let mut names: Vec<(u64, String)> = keys_of(f)?
        .into_iter()
        .filter_map(|n| Some((episode_index(&n)?, n)))
        .collect();
    names.sort();
    if names.is_empty() {
        bail!("no `episode_N` groups (keys present: {:?})", keys_of(f)?);
    }
    let mut notes = vec![];
    let mut shape: Option<(Vec<usize>, Vec<String>, String)> = None;
    let (mut o, mut nx, mut r, mut term, mut tout) = (vec![], vec![], vec![], vec![], vec![]);
    let mut acts = EpisodeActions::default();
    let mut unended = 0;
    for (_, name) in &names {
        let g = match kind(f, name, name)? {
            Some(Kind::Group) => group(f, name, name)?,
            _ => bail!("key `{name}`: not a group"),
        };
        let key = |k: &str| format!("{name}/{k}");
        let rk = opts.rewards.as_deref().unwrap_or("rewards");
        let rew = array(&g, rk, &key(rk))?;
        if rew.shape.is_empty() || rows(&rew) == 0 {
            bail!("key `{name}`: an empty episode (no steps in `{name}/{rk}`)");
        }
        let t = rows(&rew);
        let why = format!("the steps of `{name}/{rk}`");
        let rew = rewards(&rew, &key(rk), t, &why)?;
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
                key(rk)
            );
        }
        match &shape {
            None => {
                shape = Some((obs.shape.clone(), obs.keys.clone(), name.clone()));
                notes.extend(obs.note.clone());
            }
            Some((s, k, first)) if *s != obs.shape || *k != obs.keys => bail!(
                "key `{}`: shape {:?} per row (keys {:?}), `{first}` has {s:?} (keys {k:?})",
                key("observations"),
                obs.shape,
                obs.keys
            ),
            _ => {}
        }
        o.push(obs.rows(0..t));
        nx.push(obs.rows(1..t + 1));
        // An episode that stops without either flag was cut by the recording.
        if !te[t - 1] && !tr[t - 1] {
            tr[t - 1] = true;
            unended += 1;
        }
        r.extend(rew);
        term.extend(te);
        tout.extend(tr);
        acts.add(&g, name, t, &why)?;
    }
    let actions = acts.finish(&mut notes);
    if unended > 0 {
        notes.push(format!(
            "{unended} episodes stop with neither termination nor truncation: their last \
             step is marked as a timeout"
        ));
    }
    let (obs_shape, keys, _) = shape.unwrap_or_default();
    let data = Dataset {
        obs_shape,
        observations: Observations::concat(&o),
        next_observations: Observations::concat(&nx),
        rewards: r,
        terminals: term,
        timeouts: Some(tout),
        next_missing: None,
        actions,
    };
    Ok(Imported {
        data,
        source: Source::Minari,
        file: PathBuf::new(),
        episodes: names.len(),
        dropped: 0,
        obs_keys: keys,
        notes,
    })
}

/// `data/demo_N` groups, read in numeric order, each with `obs` [T, ...] (an array or a
/// group), `next_obs` (the same keys, optional: without it each step's next observation is
/// the step after it in its demo), `actions` [T, A], `rewards` and `dones` [T].
fn robomimic(f: &Group, opts: &ImportOptions) -> Result<Imported> {
    let pick = opts.obs_keys.as_deref();
    let data = group(f, "data", "data")?;
    let mut names: Vec<(u64, String)> = keys_of(&data)?
        .into_iter()
        .filter_map(|n| Some((demo_index(&n)?, n)))
        .collect();
    names.sort();
    if names.is_empty() {
        bail!(
            "no `data/demo_N` groups (keys of `data`: {:?})",
            keys_of(&data)?
        );
    }
    let mut notes = vec![];
    let other: Vec<String> = keys_of(f)?.into_iter().filter(|k| k != "data").collect();
    if !other.is_empty() {
        notes.push(format!("left out: {}", other.join(", ")));
    }
    let mut first: Option<(Vec<usize>, Vec<String>, String, bool)> = None;
    let (mut o, mut nx, mut r, mut term, mut tout) = (vec![], vec![], vec![], vec![], vec![]);
    let mut acts = EpisodeActions::default();
    let mut undone = 0;
    for (_, name) in &names {
        let g = match kind(&data, name, name)? {
            Some(Kind::Group) => group(&data, name, name)?,
            _ => bail!("key `data/{name}`: not a group"),
        };
        let key = |k: &str| format!("data/{name}/{k}");
        let rk = opts.rewards.as_deref().unwrap_or("rewards");
        let rew = array(&g, rk, &key(rk))?;
        if rew.shape.is_empty() || rows(&rew) == 0 {
            bail!(
                "key `data/{name}`: an empty demo (no steps in `{}`)",
                key(rk)
            );
        }
        let t = rows(&rew);
        let why = format!("the steps of `{}`", key(rk));
        let rew = rewards(&rew, &key(rk), t, &why)?;
        let has_dones = kind(&g, "dones", &key("dones"))?.is_some();
        let done = if has_dones {
            flags(&array(&g, "dones", &key("dones"))?, &key("dones"), t, &why)?
        } else {
            vec![false; t]
        };
        let obs = observations(&g, &key("obs"), "obs", pick)?;
        if obs.rows != t {
            bail!(
                "key `{}`: {} rows, expected {t} (the steps of `{}`)",
                key("obs"),
                obs.rows,
                key(rk)
            );
        }
        let has_next = kind(&g, "next_obs", &key("next_obs"))?.is_some();
        match &first {
            None => {
                first = Some((obs.shape.clone(), obs.keys.clone(), name.clone(), has_next));
                notes.extend(obs.note.clone());
                if !has_next {
                    notes.push(
                        "no `next_obs`: each step's next observation is the step after it in \
                         its demo"
                            .into(),
                    );
                }
                if !has_dones {
                    notes.push("no `dones`: assumed that no demo ends in a terminal state".into());
                }
            }
            Some((s, k, at, next)) => {
                if *s != obs.shape || *k != obs.keys {
                    bail!(
                        "key `{}`: shape {:?} per row (keys {:?}), `data/{at}` has {s:?} \
                         (keys {k:?})",
                        key("obs"),
                        obs.shape,
                        obs.keys
                    );
                }
                if *next != has_next {
                    bail!(
                        "key `data/{name}`: {} `next_obs`, `data/{at}` {}",
                        if has_next { "has" } else { "has no" },
                        if *next { "has" } else { "has none" }
                    );
                }
            }
        }
        if has_next {
            let n2 = observations(&g, &key("next_obs"), "next_obs", pick)?;
            if n2.rows != t || n2.shape != obs.shape || n2.keys != obs.keys {
                bail!(
                    "key `{}`: {} rows of shape {:?} (keys {:?}), `{}` has {t} of {:?} (keys \
                     {:?})",
                    key("next_obs"),
                    n2.rows,
                    n2.shape,
                    n2.keys,
                    key("obs"),
                    obs.shape,
                    obs.keys
                );
            }
            nx.push(n2.values);
        }
        o.push(obs.values);
        // A demo that stops without `dones` was cut by the recording: its last step is a
        // timeout, and with no `next_obs` it has no next observation (left out, counted).
        let mut cut = vec![false; t];
        if !done[t - 1] {
            cut[t - 1] = true;
            undone += 1;
        }
        r.extend(rew);
        term.extend(done);
        tout.extend(cut);
        acts.add(&g, &format!("data/{name}"), t, &why)?;
    }
    let actions = acts.finish(&mut notes);
    if undone > 0 {
        notes.push(format!(
            "{undone} of {} demos stop without `dones`: their last step is marked as a timeout",
            names.len()
        ));
    }
    let (obs_shape, keys, _, has_next) = first.unwrap_or_default();
    let observations = Observations::concat(&o);
    let (data, dropped) = if has_next {
        let data = Dataset {
            obs_shape,
            observations,
            next_observations: Observations::concat(&nx),
            rewards: r,
            terminals: term,
            timeouts: Some(tout),
            next_missing: None,
            actions,
        };
        (data, 0)
    } else {
        let f = Following::of(&term, &tout).any_left()?;
        let width: usize = obs_shape.iter().product();
        let data = Dataset {
            observations: observations.select(&f.keep, width),
            next_observations: observations.select(&f.next_row, width),
            obs_shape,
            rewards: f.keep.iter().map(|&i| r[i]).collect(),
            terminals: f.terminals.clone(),
            timeouts: Some(f.timeouts.clone()),
            next_missing: Some(f.missing.clone()),
            actions: actions.map(|a| a.select(&f.keep)),
        };
        (data, f.dropped())
    };
    Ok(Imported {
        data,
        source: Source::Robomimic,
        file: PathBuf::new(),
        episodes: names.len(),
        dropped,
        obs_keys: keys,
        notes,
    })
}

mod lzf;
#[cfg(test)]
mod tests;
