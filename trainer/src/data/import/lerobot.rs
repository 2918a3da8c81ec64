//! LeRobot dataset directories (format v3.0), read as they are.
//!
//! A v3.0 dataset describes itself in `meta/info.json` (its features with their dtype and
//! shape, and where its files lie) and keeps its frames in Parquet files under `data/`,
//! many episodes to a file; cameras are MP4 files under `videos/`. Each row is a frame and
//! names its episode (`episode_index`) and its place in it (`frame_index`), so the
//! per-episode tables of `meta/episodes/` are not needed to rebuild the episodes; they are
//! read for a camera, to find each episode in the videos (`camera`).
//!
//! Parquet is read by the `parquet` crate through its column readers, without its Arrow
//! layer, whose crates laq would compile for nothing it needs; Snappy, LeRobot's
//! compression, is built in (zstd would compile a C library). Videos are decoded by
//! [`crate::data::import::video`].

mod camera;

use super::guard::guarded;
use super::video::ImageSize;
use crate::data::read::RewardSource;
use crate::data::{Actions, Dataset};
use anyhow::{anyhow, bail, Context, Result};
use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::data_type::DataType;
use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The one version of the layout read here: v2.x keeps one file per episode and other
/// paths, and a later version may change either.
pub const VERSION: &str = "v3.0";

const INFO: &str = "meta/info.json";
const STATE: &str = "observation.state";
const REWARD: &str = "next.reward";
const DONE: &str = "next.done";
const ACTION: &str = "action";
const EPISODE: &str = "episode_index";
const FRAME: &str = "frame_index";
const TIMESTAMP: &str = "timestamp";
const DEFAULT_DATA_PATH: &str = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet";
const DEFAULT_VIDEO_PATH: &str =
    "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4";

/// Whether `path` is a LeRobot dataset directory (of any version: a wrong version is
/// answered by [`read`] with the version found).
pub fn is_lerobot(path: &Path) -> bool {
    path.is_dir() && path.join(INFO).is_file()
}

/// A LeRobot dataset as transitions.
#[derive(Clone, Debug)]
pub struct LeRobot {
    pub data: Dataset,
    pub episodes: usize,
    /// Last frames of episodes that end without `next.done` (timeouts): no next
    /// observation, so no transition.
    pub dropped: usize,
    /// Per transition, its episode (`episode_index`) and frame (`frame_index`).
    pub ids: Vec<(u64, u64)>,
    pub notes: Vec<String>,
}

/// One feature of `meta/info.json`.
#[derive(Clone, Debug)]
struct Feature {
    dtype: String,
    shape: Vec<usize>,
}

impl Feature {
    fn width(&self) -> usize {
        self.shape.iter().product()
    }
    fn numeric(&self) -> bool {
        matches!(
            self.dtype.as_str(),
            "float16"
                | "float32"
                | "float64"
                | "int8"
                | "int16"
                | "int32"
                | "int64"
                | "uint8"
                | "uint16"
                | "uint32"
                | "uint64"
                | "bool"
        )
    }
    fn integer(&self) -> bool {
        self.dtype.starts_with("int") || self.dtype.starts_with("uint")
    }
    fn camera(&self) -> bool {
        matches!(self.dtype.as_str(), "video" | "image")
    }
}

/// What `meta/info.json` says that laq uses.
struct Info {
    features: BTreeMap<String, Feature>,
    /// Features whose description laq cannot read, with the error to give if one is
    /// used: a feature laq does not use (a new kind, another tool's) must not stop the
    /// reading.
    broken: BTreeMap<String, String>,
    data_path: String,
    video_path: String,
    /// Frames per second, when given.
    fps: Option<f64>,
    total_frames: Option<u64>,
}

impl Info {
    /// The feature `name`, `None` if the dataset has none; an error if its description
    /// cannot be read.
    fn feature(&self, name: &str) -> Result<Option<&Feature>> {
        if let Some(why) = self.broken.get(name) {
            bail!("{why}");
        }
        Ok(self.features.get(name))
    }
}

fn info(dir: &Path) -> Result<Info> {
    let file = dir.join(INFO);
    let at = file.display();
    let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {at}"))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| anyhow!("{at}: not valid JSON ({e})"))?;
    let Some(root) = v.as_object() else {
        bail!("{at}: expected a JSON object");
    };
    let version = match root.get("codebase_version") {
        None => bail!("{at}: missing key `codebase_version`"),
        Some(Value::String(s)) => s.as_str(),
        Some(other) => bail!("{at}: key `codebase_version` is {other}, expected a string"),
    };
    if version != VERSION {
        bail!(
            "{at}: key `codebase_version` is `{version}`; laq reads LeRobot datasets of \
             version {VERSION} (LeRobot converts older ones to it)"
        );
    }
    let Some(feats) = root.get("features") else {
        bail!("{at}: missing key `features`");
    };
    let Some(feats) = feats.as_object() else {
        bail!("{at}: key `features` is not an object");
    };
    let (mut features, mut broken) = (BTreeMap::new(), BTreeMap::new());
    for (name, f) in feats {
        match feature(f, name) {
            Ok(f) => {
                features.insert(name.clone(), f);
            }
            Err(why) => {
                broken.insert(name.clone(), format!("{at}: {why}"));
            }
        }
    }
    let data_path = match root.get("data_path") {
        None => DEFAULT_DATA_PATH.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => bail!("{at}: key `data_path` is {other}, expected a string"),
    };
    let video_path = match root.get("video_path") {
        None | Some(Value::Null) => DEFAULT_VIDEO_PATH.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => bail!("{at}: key `video_path` is {other}, expected a string"),
    };
    let fps = match root.get("fps") {
        None | Some(Value::Null) => None,
        Some(f) => match f.as_f64() {
            Some(f) if f > 0.0 && f.is_finite() => Some(f),
            _ => bail!("{at}: key `fps` is {f}, expected a positive number"),
        },
    };
    let total_frames =
        match root.get("total_frames") {
            None => None,
            Some(t) => Some(t.as_u64().ok_or_else(|| {
                anyhow!("{at}: key `total_frames` is {t}, expected a whole number")
            })?),
        };
    Ok(Info {
        features,
        broken,
        data_path,
        video_path,
        fps,
        total_frames,
    })
}

/// One feature's description: `dtype` and `shape`.
fn feature(f: &Value, name: &str) -> Result<Feature> {
    let key = |k: &str| format!("features.{name}.{k}");
    let dtype = match f.get("dtype") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => bail!("key `{}` is not a string", key("dtype")),
        None => bail!("missing key `{}`", key("dtype")),
    };
    let shape = match f.get("shape") {
        Some(Value::Array(dims)) => dims
            .iter()
            .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| {
                anyhow!(
                    "key `{}` is {}, expected a list of whole numbers",
                    key("shape"),
                    f["shape"]
                )
            })?,
        Some(other) => bail!(
            "key `{}` is {other}, expected a list of whole numbers",
            key("shape")
        ),
        None => bail!("missing key `{}`", key("shape")),
    };
    Ok(Feature { dtype, shape })
}

/// The directory under which `data_path` places the Parquet files: its part before the
/// first placeholder.
fn data_root(dir: &Path, data_path: &str) -> Result<PathBuf> {
    let fixed = &data_path[..data_path.find('{').unwrap_or(data_path.len())];
    let root = fixed.rsplit_once('/').map_or("", |(d, _)| d);
    let rel = Path::new(root);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        bail!(
            "{}: key `data_path` is `{data_path}`, which leads out of the dataset directory",
            dir.join(INFO).display()
        );
    }
    Ok(dir.join(rel))
}

/// Every `.parquet` file under `root`, sorted, but for those under `skip` (the tables of
/// `meta/`, should `data_path` place the data at the top of the dataset). Links to
/// directories are not followed, so that a link cycle cannot hold the walk; links to
/// files (as in the Hugging Face cache) are taken.
fn parquet_files(root: &Path, skip: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        std::fs::read_dir(root).with_context(|| format!("cannot list {}", root.display()))?;
    let cannot = || format!("cannot list {}", root.display());
    for e in entries {
        let e = e.with_context(cannot)?;
        let p = e.path();
        if e.file_type().with_context(cannot)?.is_dir() {
            if p != skip {
                parquet_files(&p, skip, out)?;
            }
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p);
        }
    }
    out.sort();
    Ok(())
}

/// What becomes the observation: state features side by side, or one camera.
enum Observed<'a> {
    State(Vec<(String, &'a Feature)>),
    Camera(String),
}

/// The features that become the observation, checked against what laq can read.
fn observed<'a>(info: &'a Info, at: &str, pick: Option<&[String]>) -> Result<Observed<'a>> {
    let states: Vec<&str> = info
        .features
        .iter()
        .filter(|(_, f)| f.numeric() && f.shape.len() == 1)
        .map(|(n, _)| n.as_str())
        .collect();
    let videos: Vec<&str> = info
        .features
        .iter()
        .filter(|(_, f)| f.dtype == "video")
        .map(|(n, _)| n.as_str())
        .collect();
    let mut readable = states.join(", ");
    if !videos.is_empty() {
        readable += &format!("; or one camera alone: {}", videos.join(", "));
    }
    let names: Vec<String> = match pick {
        Some([]) => bail!("--obs-keys names no feature; features that can be: {readable}"),
        Some(p) => p.to_vec(),
        None => vec![STATE.to_string()],
    };
    let mut out = vec![];
    let mut camera = None;
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            bail!("--obs-keys names `{name}` twice");
        }
        let Some(f) = info.feature(name)? else {
            let how = if pick.is_none() {
                "; name the features to use with --obs-keys"
            } else {
                ""
            };
            bail!("{at}: no feature `{name}`{how} (features that can be observations: {readable})");
        };
        if f.dtype == "video" {
            camera = Some(name.clone());
            continue;
        }
        if f.camera() {
            bail!(
                "{at}: feature `{name}` is a camera stored as images (dtype {}), which laq \
                 does not decode; observations can be the features {readable}",
                f.dtype
            );
        }
        if !f.numeric() {
            bail!(
                "{at}: feature `{name}` has dtype {}, expected numbers",
                f.dtype
            );
        }
        if f.shape.len() != 1 || f.shape[0] == 0 {
            bail!(
                "{at}: feature `{name}` has shape {:?}; observations are read from features \
                 of one dimension",
                f.shape
            );
        }
        out.push((name.clone(), f));
    }
    match camera {
        None => Ok(Observed::State(out)),
        Some(c) if names.len() == 1 => Ok(Observed::Camera(c)),
        Some(c) => bail!(
            "--obs-keys names the camera `{c}` with other features ({}): an observation is \
             either one camera's frames or state features side by side, not both",
            names
                .iter()
                .filter(|n| **n != c)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A column to read from every data file.
struct Column {
    name: String,
    /// Values per row: the product of the feature's shape (1 for `episode_index` and
    /// `frame_index`, which need not be listed as features).
    width: usize,
    shape: Vec<usize>,
}

/// The frames of all data files: for each column, its values row after row.
struct Frames {
    cols: Vec<Vec<f64>>,
    /// The file of each frame (an index into `files`).
    file: Vec<u32>,
    files: Vec<PathBuf>,
}

/// A leaf column's values, widened to f64.
fn read_leaf(
    r: ColumnReader,
    rows: usize,
    unsigned: bool,
    def: &mut Vec<i16>,
    rep: &mut Vec<i16>,
) -> parquet::errors::Result<Vec<f64>> {
    fn all<T: DataType>(
        mut r: ColumnReaderImpl<T>,
        rows: usize,
        def: &mut Vec<i16>,
        rep: &mut Vec<i16>,
        wide: impl Fn(&T::T) -> f64,
    ) -> parquet::errors::Result<Vec<f64>>
    where
        T::T: Clone,
    {
        let mut values: Vec<T::T> = vec![];
        let mut got = 0;
        while got < rows {
            let (records, _, _) =
                r.read_records(rows - got, Some(&mut *def), Some(&mut *rep), &mut values)?;
            if records == 0 {
                break;
            }
            got += records;
        }
        Ok(values.iter().map(wide).collect())
    }
    match r {
        ColumnReader::BoolColumnReader(r) => all(r, rows, def, rep, |&b| f64::from(u8::from(b))),
        ColumnReader::Int32ColumnReader(r) if unsigned => {
            all(r, rows, def, rep, |&x| f64::from(x as u32))
        }
        ColumnReader::Int32ColumnReader(r) => all(r, rows, def, rep, |&x| f64::from(x)),
        ColumnReader::Int64ColumnReader(r) if unsigned => {
            all(r, rows, def, rep, |&x| x as u64 as f64)
        }
        ColumnReader::Int64ColumnReader(r) => all(r, rows, def, rep, |&x| x as f64),
        ColumnReader::FloatColumnReader(r) => all(r, rows, def, rep, |&x| f64::from(x)),
        ColumnReader::DoubleColumnReader(r) => all(r, rows, def, rep, |&x| x),
        _ => unreachable!("the physical type is checked before"),
    }
}

/// Reads `columns` from the Parquet file `path` into `frames`.
///
/// Through the column readers rather than the row API: the row API asserts on levels
/// that a damaged page decodes to, where a damaged file must be an error.
/// `columns` of every row of `files`, in file order; a panic inside the Parquet decoder
/// (some damaged pages cause one) becomes an error naming the file.
fn read_files(files: &[PathBuf], columns: &[Column]) -> Result<Frames> {
    let mut frames = Frames {
        cols: vec![vec![]; columns.len()],
        file: vec![],
        files: vec![],
    };
    for f in files {
        guarded(|| read_file(f, columns, &mut frames)).map_err(|why| {
            anyhow!(
                "{}: the Parquet decoder failed on it ({why}); a damaged file?",
                f.display()
            )
        })??;
    }
    Ok(frames)
}

fn read_file(path: &Path, columns: &[Column], frames: &mut Frames) -> Result<()> {
    let at = path.display();
    let f = std::fs::File::open(path).with_context(|| format!("cannot read {at}"))?;
    let file_len = f
        .metadata()
        .with_context(|| format!("cannot read {at}"))?
        .len();
    let reader = SerializedFileReader::new(f)
        .map_err(|e| anyhow!("{at}: not a readable Parquet file ({e})"))?;
    let schema = reader.metadata().file_metadata().schema_descr();
    let top: Vec<&str> = schema
        .root_schema()
        .get_fields()
        .iter()
        .map(|t| t.name())
        .collect();
    // The leaf column holding each column's values, and whether it is unsigned.
    let mut leaves = vec![];
    for c in columns {
        let name = c.name.as_str();
        let found: Vec<usize> = (0..schema.num_columns())
            .filter(|&i| schema.column(i).path().parts().first().map(String::as_str) == Some(name))
            .collect();
        let &[leaf] = &found[..] else {
            if found.is_empty() {
                bail!("{at}: no column `{name}` (columns: {})", top.join(", "));
            }
            bail!(
                "{at}: key `{name}` is a struct of {} columns, expected numbers",
                found.len()
            );
        };
        let d = schema.column(leaf);
        if d.max_rep_level() > 1 {
            bail!("{at}: key `{name}` holds lists of lists, expected numbers or a list of them");
        }
        use parquet::basic::{ConvertedType, LogicalType, Type as Physical};
        if !matches!(
            d.physical_type(),
            Physical::BOOLEAN
                | Physical::INT32
                | Physical::INT64
                | Physical::FLOAT
                | Physical::DOUBLE
        ) {
            bail!(
                "{at}: key `{name}` holds {} values, expected numbers",
                d.physical_type()
            );
        }
        let unsigned = matches!(
            d.logical_type_ref(),
            Some(LogicalType::Integer {
                is_signed: false,
                ..
            })
        ) || matches!(
            d.converted_type(),
            ConvertedType::UINT_8
                | ConvertedType::UINT_16
                | ConvertedType::UINT_32
                | ConvertedType::UINT_64
        );
        leaves.push((leaf, d.max_def_level(), d.max_rep_level(), unsigned));
    }
    let file_no = u32::try_from(frames.files.len()).context("too many data files")?;
    frames.files.push(path.to_path_buf());
    let mut first_row = 0usize;
    let (mut def, mut rep) = (vec![], vec![]);
    for g in 0..reader.num_row_groups() {
        let rg = reader
            .get_row_group(g)
            .map_err(|e| anyhow!("{at}: row group {g}: cannot read ({e})"))?;
        let rows = usize::try_from(rg.metadata().num_rows())
            .map_err(|_| anyhow!("{at}: row group {g}: a negative row count"))?;
        for (k, (c, &(leaf, max_def, max_rep, unsigned))) in columns.iter().zip(&leaves).enumerate()
        {
            let name = &c.name;
            let cannot = |e: String| anyhow!("{at}: key `{name}`: cannot read ({e})");
            // Checked here, as the reader asserts it: a damaged footer may place a column
            // anywhere.
            let chunk = rg.metadata().column(leaf);
            let start = chunk
                .dictionary_page_offset()
                .unwrap_or(chunk.data_page_offset());
            let len = chunk.compressed_size();
            if start < 0 || len < 0 || start.saturating_add(len) as u64 > file_len {
                return Err(cannot(format!(
                    "row group {g} places it at bytes {start}..+{len}, outside the file's \
                     {file_len} bytes"
                )));
            }
            let r = rg
                .get_column_reader(leaf)
                .map_err(|e| cannot(e.to_string()))?;
            def.clear();
            rep.clear();
            let values = read_leaf(r, rows, unsigned, &mut def, &mut rep)
                .map_err(|e| cannot(e.to_string()))?;
            // Rows from the levels: a row starts at each repetition level 0, and a value
            // is present where the definition level is the highest.
            let levels = if max_def == 0 {
                values.len()
            } else {
                def.len()
            };
            // Not sized from `rows`: a damaged footer may record any number.
            let mut counts: Vec<usize> = Vec::with_capacity(levels);
            for l in 0..levels {
                if max_rep == 0 || rep.get(l).copied().unwrap_or(0) == 0 {
                    counts.push(0);
                }
                let present = max_def == 0 || def.get(l) == Some(&max_def);
                if let (true, Some(n)) = (present, counts.last_mut()) {
                    *n += 1;
                }
            }
            let total: usize = counts.iter().sum();
            if counts.len() != rows || total != values.len() {
                return Err(cannot(format!(
                    "{} rows and {} values decoded, where row group {g} records {rows} rows \
                     and its levels {total} values",
                    counts.len(),
                    values.len()
                )));
            }
            let mut v = 0;
            for (r, &n) in counts.iter().enumerate() {
                let row = first_row + r;
                if n != c.width {
                    if n == 0 {
                        bail!("{at}: row {row}: key `{name}` is null or empty");
                    }
                    bail!(
                        "{at}: row {row}: key `{name}` holds {n} values, where {INFO} gives \
                         shape {:?}",
                        c.shape
                    );
                }
                if let Some(x) = values[v..v + n].iter().find(|x| !x.is_finite()) {
                    bail!("{at}: row {row}: key `{name}` holds a non-finite value ({x})");
                }
                v += n;
            }
            frames.cols[k].extend_from_slice(&values);
        }
        frames.file.extend(std::iter::repeat_n(file_no, rows));
        first_row += rows;
    }
    Ok(())
}

/// Reads the LeRobot dataset directory `dir`: the observation from `observation.state` or
/// the features `obs_keys` names (state features side by side, or one camera's frames at
/// `image_size`), the rewards as `reward` says.
pub fn read(
    dir: &Path,
    obs_keys: Option<&[String]>,
    reward: &RewardSource,
    image_size: Option<ImageSize>,
) -> Result<LeRobot> {
    let info = info(dir)?;
    let info_at = dir.join(INFO).display().to_string();
    let (state, camera) = match observed(&info, &info_at, obs_keys)? {
        Observed::State(s) => (s, None),
        Observed::Camera(c) => (vec![], Some(c)),
    };
    if let (Some(size), None) = (image_size, &camera) {
        bail!(
            "--image-size {size} applies to a camera (a feature of dtype `video` named with \
             --obs-keys); the observations here are state features"
        );
    }
    let mut notes = vec![];

    // The ways to give rewards, for the errors that ask for them.
    let reward_options = || {
        let scalars: Vec<&str> = info
            .features
            .iter()
            .filter(|(_, f)| f.numeric() && f.width() == 1)
            .map(|(n, _)| n.as_str())
            .collect();
        format!(
            "choose where the rewards come from with --reward: `episode-end` (1 on the last \
             transition of each episode), a `.csv` file of rewarded `episode,step` pairs, or \
             a feature of one value per frame (here: {})",
            scalars.join(", ")
        )
    };
    let reward_key = match reward {
        RewardSource::Key(k) if k == "rewards" => {
            if info.feature(REWARD)?.is_none() {
                bail!(
                    "{info_at}: no rewards: the dataset has no `{REWARD}` feature; {}",
                    reward_options()
                );
            }
            Some(REWARD.to_string())
        }
        RewardSource::Key(k) => {
            let Some(f) = info.feature(k)? else {
                bail!(
                    "{info_at}: no feature `{k}` (--reward); {}",
                    reward_options()
                );
            };
            if !f.numeric() || f.width() != 1 {
                bail!(
                    "{info_at}: feature `{k}` (--reward) has dtype {} and shape {:?}, expected \
                     one number per frame",
                    f.dtype,
                    f.shape
                );
            }
            Some(k.clone())
        }
        RewardSource::EpisodeEnd | RewardSource::Csv(_) => None,
    };
    let done = match info.feature(DONE)? {
        Some(f) if f.numeric() && f.width() == 1 => true,
        Some(f) => bail!(
            "{info_at}: feature `{DONE}` has dtype {} and shape {:?}, expected one flag per \
             frame",
            f.dtype,
            f.shape
        ),
        None => {
            notes.push(format!(
                "no `{DONE}`: every episode's end is taken for a timeout"
            ));
            false
        }
    };
    let action = match info.feature(ACTION)? {
        Some(f) if f.numeric() && f.shape.len() == 1 && f.width() > 0 => Some(f),
        Some(f) => {
            notes.push(format!(
                "`{ACTION}` (dtype {}, shape {:?}) left out: actions are read when they are \
                 numbers of one dimension",
                f.dtype, f.shape
            ));
            None
        }
        None => None,
    };

    let mut columns = vec![
        Column {
            name: EPISODE.into(),
            width: 1,
            shape: vec![1],
        },
        Column {
            name: FRAME.into(),
            width: 1,
            shape: vec![1],
        },
    ];
    // A feature may serve twice (an observation and the actions, a flag and the
    // rewards): it is read once.
    let mut column = |name: &str, f: &Feature| {
        if let Some(i) = columns.iter().position(|c| c.name == name) {
            return i;
        }
        columns.push(Column {
            name: name.into(),
            width: f.width(),
            shape: f.shape.clone(),
        });
        columns.len() - 1
    };
    let state_cols: Vec<usize> = state.iter().map(|(n, f)| column(n, f)).collect();
    // A camera's frames are found by the rows' times.
    let time_col = camera.as_ref().map(|_| {
        let f = Feature {
            dtype: "float32".into(),
            shape: vec![1],
        };
        column(TIMESTAMP, &f)
    });
    let reward_col = reward_key.as_ref().map(|k| column(k, &info.features[k]));
    let done_col = done.then(|| column(DONE, &info.features[DONE]));
    let action_col = action.map(|f| column(ACTION, f));

    let root = data_root(dir, &info.data_path)?;
    let mut files = vec![];
    if root.is_dir() {
        parquet_files(&root, &dir.join("meta"), &mut files)?;
    }
    if files.is_empty() {
        bail!(
            "{}: no Parquet files (where key `data_path` of {info_at}, `{}`, places them)",
            root.display(),
            info.data_path
        );
    }
    let frames = read_files(&files, &columns)?;
    let n = frames.file.len();
    if let Some(t) = info.total_frames {
        if t != n as u64 {
            bail!(
                "{info_at}: key `total_frames` is {t}, but the Parquet files under {} hold {n} \
                 frames (a file missing or cut short?)",
                root.display()
            );
        }
    }
    if n == 0 {
        bail!("{}: the Parquet files hold no frames", root.display());
    }

    // Frames in episode order, then time order within each episode.
    let index = |c: usize, name: &str| -> Result<Vec<u64>> {
        frames.cols[c]
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                if x >= 0.0 && x.fract() == 0.0 {
                    Ok(x as u64)
                } else {
                    bail!(
                        "{}: key `{name}` is {x} in a row, expected a whole number",
                        frames.files[frames.file[i] as usize].display()
                    )
                }
            })
            .collect()
    };
    let ep = index(0, EPISODE)?;
    let fr = index(1, FRAME)?;
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (ep[i], fr[i]));
    let mut episodes: Vec<&[usize]> = vec![];
    let mut start = 0;
    for k in 1..=n {
        if k == n || ep[order[k]] != ep[order[start]] {
            episodes.push(&order[start..k]);
            start = k;
        }
    }
    for e in &episodes {
        for w in e.windows(2) {
            let (a, b) = (w[0], w[1]);
            if fr[a].checked_add(1) != Some(fr[b]) {
                let file = |i: usize| frames.files[frames.file[i] as usize].display();
                if fr[b] == fr[a] {
                    let also = if frames.file[a] == frames.file[b] {
                        String::new()
                    } else {
                        format!(" (also in {})", file(a))
                    };
                    bail!(
                        "{}: episode {}: frame {} (`{FRAME}`) appears twice{also}",
                        file(b),
                        ep[b],
                        fr[b]
                    );
                }
                bail!(
                    "{}: episode {}: frame {} (`{FRAME}`) follows frame {}: frames missing",
                    file(b),
                    ep[b],
                    fr[b],
                    fr[a]
                );
            }
        }
    }

    let (obs_shape, pixels) = match (&camera, time_col) {
        (Some(key), Some(c)) => {
            let rows = camera::Rows {
                episode: &ep,
                frame: &fr,
                time: &frames.cols[c],
            };
            let got = camera::frames(dir, &info, key, &rows, image_size)?;
            notes.extend(got.notes);
            (got.shape, Some(got.pixels))
        }
        _ => (vec![state.iter().map(|(_, f)| f.width()).sum()], None),
    };
    let frame_len: usize = obs_shape.iter().product();
    // Observation `i` onto the f32 rows of states or the u8 rows of frames.
    let obs_of = |i: usize, states: &mut Vec<f32>, images: &mut Vec<u8>| {
        if let Some(p) = &pixels {
            images.extend_from_slice(&p[i * frame_len..(i + 1) * frame_len]);
            return;
        }
        for ((_, f), &c) in state.iter().zip(&state_cols) {
            let w = f.width();
            states.extend(frames.cols[c][i * w..(i + 1) * w].iter().map(|&x| x as f32));
        }
    };
    let flag = |c: Option<usize>, i: usize| c.is_some_and(|c| frames.cols[c][i] != 0.0);
    if let Some(c) = done_col {
        if let Some(i) = (0..n).find(|&i| !matches!(frames.cols[c][i], 0.0 | 1.0)) {
            bail!(
                "{}: key `{DONE}` is {} in a row, expected true or false",
                frames.files[frames.file[i] as usize].display(),
                frames.cols[c][i]
            );
        }
    }
    let (mut o, mut nx, mut rew, mut term, mut tout, mut missing, mut ids) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut o8, mut nx8) = (vec![], vec![]);
    let mut act: Vec<f64> = vec![];
    let adim = action.map_or(0, |f| f.width());
    let (mut dropped, mut early) = (0, 0);
    for e in &episodes {
        for (t, &i) in e.iter().enumerate() {
            let last = t + 1 == e.len();
            let terminal = flag(done_col, i);
            if last && !terminal {
                // A timeout: the log stops without a next observation for this frame.
                dropped += 1;
                if let Some(p) = tout.last_mut().filter(|_| t > 0) {
                    *p = true;
                }
                continue;
            }
            if terminal && !last {
                early += 1;
            }
            obs_of(i, &mut o, &mut o8);
            obs_of(if last { i } else { e[t + 1] }, &mut nx, &mut nx8);
            let r = reward_col.map_or(0.0, |c| frames.cols[c][i] as f32);
            if !r.is_finite() {
                bail!(
                    "{}: key `{}`: episode {} frame {} holds a reward beyond the range of f32",
                    frames.files[frames.file[i] as usize].display(),
                    reward_key.as_deref().unwrap_or_default(),
                    ep[i],
                    fr[i]
                );
            }
            rew.push(r);
            term.push(terminal);
            tout.push(false);
            missing.push(last);
            ids.push((ep[i], fr[i]));
            if let Some(c) = action_col {
                act.extend_from_slice(&frames.cols[c][i * adim..(i + 1) * adim]);
            }
        }
    }
    if rew.is_empty() {
        bail!(
            "{}: no transition: every episode is a single frame that ends without `{DONE}`",
            dir.display()
        );
    }
    if early > 0 {
        notes.push(format!(
            "{early} frames have `{DONE}` before their episode's last frame: their \
             transitions are terminal, and the frames after them start new episodes"
        ));
    }
    let actions = action.map(|f| {
        if f.integer() && adim == 1 && act.iter().all(|&a| a >= 0.0) {
            Actions::Discrete(act.iter().map(|&a| a as i64).collect())
        } else {
            Actions::Continuous {
                dim: adim,
                values: act.iter().map(|&a| a as f32).collect(),
            }
        }
    });
    if camera.is_none() && (state.len() > 1 || obs_keys.is_some()) {
        notes.push(format!(
            "observations: features {} side by side",
            state
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let cameras: Vec<&str> = info
        .features
        .iter()
        .filter(|(n, f)| f.camera() && Some(*n) != camera.as_ref())
        .map(|(n, _)| n.as_str())
        .collect();
    if !cameras.is_empty() {
        notes.push(format!("cameras left out: {}", cameras.join(", ")));
    }
    let any_missing = missing.iter().any(|&m| m);
    let (observations, next_observations) = if camera.is_some() {
        (o8.into(), nx8.into())
    } else {
        (o.into(), nx.into())
    };
    let data = Dataset {
        obs_shape,
        observations,
        next_observations,
        rewards: rew,
        terminals: term,
        timeouts: Some(tout),
        next_missing: any_missing.then_some(missing),
        actions,
    };
    // The checks every dataset passes, so that a converted file is one that loads.
    let data = Dataset::from_arrays(data.to_arrays())
        .with_context(|| format!("{}: the transitions read are invalid", dir.display()))?;
    Ok(LeRobot {
        data,
        episodes: episodes.len(),
        dropped,
        ids,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_path_places_the_files_inside_the_dataset() {
        let d = Path::new("ds");
        assert_eq!(data_root(d, DEFAULT_DATA_PATH).unwrap(), d.join("data"));
        assert_eq!(
            data_root(d, "frames/{chunk_index}/part-{file_index}.parquet").unwrap(),
            d.join("frames")
        );
        assert_eq!(data_root(d, "{file_index}.parquet").unwrap(), d.join(""));
        for bad in [
            "../elsewhere/{chunk_index}.parquet",
            "/data/{file_index}.parquet",
        ] {
            let e = data_root(d, bad).unwrap_err().to_string();
            assert!(e.contains("leads out of the dataset directory"), "{e}");
        }
    }

    #[test]
    fn features_are_checked_when_used() {
        let f = |v: Value| feature(&v, "x");
        assert_eq!(
            f(serde_json::json!({"dtype": "float32", "shape": [3]}))
                .unwrap()
                .width(),
            3
        );
        for (v, needle) in [
            (
                serde_json::json!({"shape": [3]}),
                "missing key `features.x.dtype`",
            ),
            (
                serde_json::json!({"dtype": "float32"}),
                "missing key `features.x.shape`",
            ),
            (
                serde_json::json!({"dtype": "float32", "shape": [-1]}),
                "key `features.x.shape` is [-1], expected a list of whole numbers",
            ),
            (
                serde_json::json!({"dtype": 3, "shape": [1]}),
                "key `features.x.dtype` is not a string",
            ),
        ] {
            let e = f(v).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn a_directory_without_info_json_is_not_lerobot() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_lerobot(dir.path()));
        std::fs::create_dir(dir.path().join("meta")).unwrap();
        std::fs::write(dir.path().join("meta/info.json"), "{}").unwrap();
        assert!(is_lerobot(dir.path()));
        assert!(!is_lerobot(&dir.path().join("meta/info.json")));
        let e = format!(
            "{:#}",
            read(dir.path(), None, &RewardSource::default(), None).unwrap_err()
        );
        assert!(
            e.contains("info.json: missing key `codebase_version`"),
            "{e}"
        );
    }
}
