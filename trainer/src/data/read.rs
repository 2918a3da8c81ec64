//! One way in for every command that takes a dataset: the dataset format (`.npz`,
//! `.safetensors`), D4RL-style HDF5 files, Minari and LeRobot dataset directories (imported
//! as they are read), with the rewards the user chooses when the logs hold none.

use super::import::video::ImageSize;
use super::import::{self, ImportOptions, Source};
use super::{following, read_arrays, Dataset};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// How a dataset is read: saved in a run's `config.toml`, so that a resumed or repeated run
/// reads its data the same way.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadOptions {
    /// Keys of a dict observation to flatten, in this order (HDF5 sources; `None`: every
    /// key, sorted), or the features of a LeRobot dataset side by side (`None`:
    /// `observation.state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obs_keys: Option<Vec<String>>,
    /// Where the rewards come from.
    #[serde(default)]
    pub reward: RewardSource,
    /// Height and width camera frames are stored at (`None`: the video's size, shrunk to
    /// 96 pixels on its longer side when larger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_size: Option<ImageSize>,
}

/// The metadata keys under which an exported model records how its observations were
/// read (where a run set them), so that `laq predict` and `laq export --data` read
/// another dataset the same way without the flags again.
const OBS_KEYS: &str = "obs_keys";
const IMAGE_SIZE: &str = "image_size";

impl ReadOptions {
    /// Records the reading of observations (`--obs-keys`, `--image-size`) in a model's
    /// free-text metadata; nothing where the defaults read them. Rewards are not
    /// recorded: V does not read them.
    ///
    /// ```
    /// use laq::data::read::ReadOptions;
    /// use std::collections::BTreeMap;
    ///
    /// let read = ReadOptions {
    ///     obs_keys: Some(vec!["image".into(), "direction".into()]),
    ///     ..Default::default()
    /// };
    /// let mut info = BTreeMap::new();
    /// read.record(&mut info);
    /// assert_eq!(info["obs_keys"], "image,direction");
    /// assert_eq!(ReadOptions::recorded(&info).unwrap(), read);
    /// ```
    pub fn record(&self, info: &mut std::collections::BTreeMap<String, String>) {
        if let Some(keys) = &self.obs_keys {
            info.insert(OBS_KEYS.into(), keys.join(","));
        }
        if let Some(size) = self.image_size {
            info.insert(IMAGE_SIZE.into(), size.to_string());
        }
    }

    /// The reading a model's metadata records (the defaults where it records none).
    pub fn recorded(info: &std::collections::BTreeMap<String, String>) -> Result<Self> {
        let image_size = info
            .get(IMAGE_SIZE)
            .map(|s| s.parse::<ImageSize>())
            .transpose()
            .map_err(|e| anyhow::anyhow!("metadata `{IMAGE_SIZE}`: {e}"))?;
        Ok(ReadOptions {
            obs_keys: info
                .get(OBS_KEYS)
                .map(|k| k.split(',').map(str::to_string).collect()),
            image_size,
            ..Default::default()
        })
    }

    /// These options, with the model's recorded reading where the command line left it
    /// to the defaults; says what it took from the model, and where the command line
    /// reads otherwise than the model was trained.
    pub fn or_recorded(&self, recorded: &ReadOptions, model: &Path) -> ReadOptions {
        let m = model.display();
        let mut read = self.clone();
        match (&self.obs_keys, &recorded.obs_keys) {
            (None, Some(keys)) => {
                log::info!("{m} was trained on --obs-keys {}: read so", keys.join(","));
                read.obs_keys = Some(keys.clone());
            }
            (Some(given), Some(keys)) if given != keys => log::warn!(
                "{m} was trained on --obs-keys {}; reading --obs-keys {} as asked",
                keys.join(","),
                given.join(",")
            ),
            (Some(given), None) => log::warn!(
                "{m} was trained on the observations read by default; reading --obs-keys {} \
                 as asked",
                given.join(",")
            ),
            _ => {}
        }
        match (self.image_size, recorded.image_size) {
            (None, Some(size)) => {
                log::info!("{m} was trained on --image-size {size}: read so");
                read.image_size = Some(size);
            }
            (Some(given), Some(size)) if given != size => log::warn!(
                "{m} was trained on --image-size {size}; reading --image-size {given} as asked"
            ),
            _ => {}
        }
        read
    }
}

/// Where a dataset's rewards come from (`--reward`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RewardSource {
    /// An array of the file (`rewards` by default; another key, such as a success flag).
    Key(String),
    /// 1 on the last transition of each episode, which becomes terminal; 0 elsewhere (the
    /// "a demonstration ends in success" convention).
    EpisodeEnd,
    /// 1 on the transitions a CSV file lists as `episode,step` pairs (0-based, episodes
    /// in file order); 0 elsewhere.
    Csv(PathBuf),
}

impl Default for RewardSource {
    fn default() -> Self {
        RewardSource::Key("rewards".into())
    }
}

impl FromStr for RewardSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "" => Err("an empty reward source; give a key, `episode-end` or a .csv file".into()),
            "episode-end" => Ok(RewardSource::EpisodeEnd),
            s if s.ends_with(".csv") => Ok(RewardSource::Csv(PathBuf::from(s))),
            s => Ok(RewardSource::Key(s.into())),
        }
    }
}

impl fmt::Display for RewardSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RewardSource::Key(k) => f.write_str(k),
            RewardSource::EpisodeEnd => f.write_str("episode-end"),
            RewardSource::Csv(p) => write!(f, "{}", p.display()),
        }
    }
}

impl Serialize for RewardSource {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for RewardSource {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// A dataset as read, with what reading it did.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub data: Dataset,
    /// `dataset format`, `D4RL`, `Minari` or `LeRobot`.
    pub source: &'static str,
    /// Rows of the source left out (counted, never silently), and why.
    pub dropped: usize,
    pub dropped_why: Option<String>,
    /// Assumptions made and parts of the source left out.
    pub notes: Vec<String>,
}

impl Loaded {
    /// How many rows of the source were left out and why, where any were.
    pub fn dropped_line(&self) -> Option<String> {
        let why = self.dropped_why.as_ref()?;
        Some(format!("{} rows left out: {why}", self.dropped))
    }

    /// What reading did, for people: the source, rows left out, rows without a next
    /// observation, notes. Empty for a file of the dataset format read as it is.
    pub fn report_lines(&self) -> Vec<String> {
        let mut out = vec![];
        if self.source != "dataset format" {
            out.push(format!("read as {}", self.source));
        }
        out.extend(self.dropped_line());
        let missing = self.data.missing_next_count();
        if missing > 0 {
            out.push(format!(
                "{missing} terminal rows without a next observation, kept (their value is \
                 their reward; mining leaves them out)"
            ));
        }
        out.extend(self.notes.iter().cloned());
        out
    }
}

/// Whether `path` is an HDF5 source (a file, or a Minari directory), from its extension
/// or, failing that, its first bytes; an error for anything laq does not read.
fn is_hdf5(path: &Path) -> Result<bool> {
    if path.is_dir() {
        return Ok(true);
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some("npz" | "safetensors") => return Ok(false),
        Some("hdf5" | "h5" | "hdf") => return Ok(true),
        _ => {}
    }
    let mut head = [0u8; 8];
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let got = f.read(&mut head).unwrap_or(0);
    if got == 8 && head == *b"\x89HDF\r\n\x1a\n" {
        return Ok(true);
    }
    bail!(
        "{}: unknown file type; laq reads `.npz` and `.safetensors` datasets, D4RL-style \
         `.hdf5`/`.h5` files, Minari and LeRobot dataset directories",
        path.display()
    )
}

/// Keys of the dataset format that stay in the dataset when the rewards are taken from
/// them.
const KEPT: [&str; 3] = ["terminals", "timeouts", "next_missing"];

/// Reads the dataset at `path` in any supported format, as `opts` says. Rows left out
/// are logged here, once, as a warning ([`Loaded::dropped_line`]).
pub fn read(path: &Path, opts: &ReadOptions) -> Result<Loaded> {
    let loaded = read_source(path, opts)?;
    if let Some(line) = loaded.dropped_line() {
        log::warn!("{}: {line}", path.display());
    }
    Ok(loaded)
}

fn read_source(path: &Path, opts: &ReadOptions) -> Result<Loaded> {
    if import::lerobot::is_lerobot(path) {
        return read_lerobot(path, opts);
    }
    if opts.image_size.is_some() {
        bail!(
            "{}: --image-size applies to the cameras of LeRobot datasets (and to `laq convert \
             --from video`); this source is not one",
            path.display()
        );
    }
    let mut loaded = if is_hdf5(path)? {
        let imported = import::import(path, Source::Auto, &import_options(opts))?;
        let dropped_why = (imported.dropped > 0).then(|| {
            "the last row of an episode that ends without a terminal: the file holds no next \
             observation for it"
                .to_string()
        });
        Loaded {
            source: imported.source.name(),
            dropped: imported.dropped,
            dropped_why,
            notes: imported.notes,
            data: imported.data,
        }
    } else {
        if opts.obs_keys.is_some() {
            bail!(
                "{}: --obs-keys applies to HDF5 sources and LeRobot datasets; this file holds \
                 one observation array",
                path.display()
            );
        }
        let mut arrays = read_arrays(path)?;
        if let RewardSource::Key(k) = &opts.reward {
            if k != "rewards" {
                // A key the dataset needs as well (`terminals`, say) is copied, not taken.
                let r = match arrays.get(k) {
                    Some(a) if KEPT.contains(&k.as_str()) => Some(a.clone()),
                    _ => arrays.remove(k),
                };
                let Some(r) = r else {
                    bail!(
                        "{}: no key `{k}` to take the rewards from (keys present: {:?})",
                        path.display(),
                        arrays.keys().collect::<Vec<_>>()
                    );
                };
                arrays.insert("rewards".into(), r);
            }
        }
        let followed = following::next_from_rows(&mut arrays)
            .with_context(|| format!("invalid dataset {}", path.display()))?;
        let data = Dataset::from_arrays(arrays)
            .with_context(|| format!("invalid dataset {}", path.display()))?;
        match followed {
            None => Loaded {
                data,
                source: "dataset format",
                dropped: 0,
                dropped_why: None,
                notes: vec![],
            },
            Some(f) => {
                let dropped = f.dropped();
                Loaded {
                    data,
                    source: "dataset format",
                    dropped,
                    dropped_why: (dropped > 0).then(|| {
                        "the last row of an episode that ends without a terminal: the file \
                         holds no next observation for it"
                            .to_string()
                    }),
                    notes: vec![format!(
                        "no `next_observations`: each row's next observation is the row \
                         after it in its episode ({} episodes, ending at terminals, timeouts \
                         and the last row)",
                        f.episodes
                    )],
                }
            }
        }
    };
    if let Some(note) = derive_rewards(&mut loaded.data, &opts.reward)? {
        loaded.notes.push(note);
    }
    Ok(loaded)
}

/// A LeRobot dataset directory, whose CSV rewards name episodes by `episode_index` and
/// steps by `frame_index`: the numbers LeRobot's own tools show.
fn read_lerobot(path: &Path, opts: &ReadOptions) -> Result<Loaded> {
    let mut lr = import::lerobot::read(
        path,
        opts.obs_keys.as_deref(),
        &opts.reward,
        opts.image_size,
    )?;
    let note = match &opts.reward {
        RewardSource::Csv(csv) => {
            let n = csv_rewards(&mut lr.data, csv, Some(&lr.ids))?;
            Some(format!(
                "rewards: 1 on the {n} transitions {} lists (episode_index, frame_index), 0 \
                 elsewhere",
                csv.display()
            ))
        }
        r => derive_rewards(&mut lr.data, r)?,
    };
    lr.notes.extend(note);
    let (first, last) = lr
        .ids
        .iter()
        .fold((u64::MAX, 0), |(a, b), &(e, _)| (a.min(e), b.max(e)));
    lr.notes.insert(
        0,
        format!(
            "{} transitions from {} episodes (episode_index {first}..={last})",
            lr.data.len(),
            lr.episodes
        ),
    );
    let dropped_why = (lr.dropped > 0).then(|| {
        "the last frame of an episode that ends without `next.done` (a timeout): the \
         dataset holds no next observation for it"
            .to_string()
    });
    Ok(Loaded {
        data: lr.data,
        source: "LeRobot",
        dropped: lr.dropped,
        dropped_why,
        notes: lr.notes,
    })
}

/// The import options that read an HDF5 source as `opts` says.
pub fn import_options(opts: &ReadOptions) -> ImportOptions {
    ImportOptions {
        obs_keys: opts.obs_keys.clone(),
        rewards: match &opts.reward {
            RewardSource::Key(k) => Some(k.clone()),
            _ => None,
        },
    }
}

/// Replaces the rewards of `d` when `reward` derives them (`episode-end`, a CSV); says
/// what it did. A key is read with the file, so it changes nothing here.
pub fn derive_rewards(d: &mut Dataset, reward: &RewardSource) -> Result<Option<String>> {
    Ok(match reward {
        RewardSource::Key(_) => None,
        RewardSource::EpisodeEnd => {
            let n = episode_end_rewards(d);
            Some(format!(
                "rewards: 1 on the last transition of each of the {n} episodes (now terminal), \
                 0 elsewhere"
            ))
        }
        RewardSource::Csv(csv) => {
            let n = csv_rewards(d, csv, None)?;
            Some(format!(
                "rewards: 1 on the {n} transitions {} lists, 0 elsewhere",
                csv.display()
            ))
        }
    })
}

/// 1 and terminal on each episode's last transition, 0 elsewhere; returns the episodes.
fn episode_end_rewards(d: &mut Dataset) -> usize {
    let ends = d.episode_ends();
    for (i, &e) in ends.iter().enumerate() {
        d.rewards[i] = if e { 1.0 } else { 0.0 };
        if e {
            d.terminals[i] = true;
            if let Some(t) = d.timeouts.as_mut() {
                t[i] = false;
            }
        }
    }
    ends.iter().filter(|&&e| e).count()
}

/// Rewards from a CSV of `episode,step` pairs (a header line is allowed); returns the
/// transitions rewarded. Each pair must name a transition of the data: by position
/// (episodes in file order, steps from 0), or by the source's own `ids` of each row.
fn csv_rewards(d: &mut Dataset, csv: &Path, ids: Option<&[(u64, u64)]>) -> Result<usize> {
    let text =
        std::fs::read_to_string(csv).with_context(|| format!("cannot read {}", csv.display()))?;
    // Row of each episode's first transition.
    let mut starts = vec![0usize];
    for (i, &e) in d.episode_ends().iter().enumerate() {
        if e && i + 1 < d.len() {
            starts.push(i + 1);
        }
    }
    let len_of = |ep: usize| starts.get(ep + 1).copied().unwrap_or(d.len()) - starts[ep];
    let row_of: Option<HashMap<(u64, u64), usize>> =
        ids.map(|ids| ids.iter().enumerate().map(|(i, &id)| (id, i)).collect());
    let mut rewarded = vec![false; d.len()];
    for (line_no, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || (line_no == 0 && line.chars().any(|c| c.is_alphabetic())) {
            continue;
        }
        let at = || format!("{} line {}", csv.display(), line_no + 1);
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [ep, step] = fields[..] else {
            bail!("{}: expected `episode,step`, got `{line}`", at());
        };
        let (Ok(ep), Ok(step)) = (ep.parse::<usize>(), step.parse::<usize>()) else {
            bail!("{}: `{line}` is not two whole numbers", at());
        };
        if let Some(rows) = &row_of {
            let Some(&i) = rows.get(&(ep as u64, step as u64)) else {
                bail!(
                    "{}: episode {ep}, frame {step} is not a transition of the data (no such \
                     frame, or the last frame of an episode cut by a timeout)",
                    at()
                );
            };
            rewarded[i] = true;
            continue;
        }
        if ep >= starts.len() {
            bail!(
                "{}: episode {ep}, but the data holds {} episodes",
                at(),
                starts.len()
            );
        }
        if step >= len_of(ep) {
            bail!(
                "{}: step {step} of episode {ep}, which has {} transitions",
                at(),
                len_of(ep)
            );
        }
        rewarded[starts[ep] + step] = true;
    }
    for (r, &x) in d.rewards.iter_mut().zip(&rewarded) {
        *r = if x { 1.0 } else { 0.0 };
    }
    Ok(rewarded.iter().filter(|&&x| x).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a model records of its reading fills what the command line leaves to the
    /// defaults, and nothing else; a record that does not parse is named.
    #[test]
    fn a_model_s_reading_fills_what_the_command_line_leaves() {
        let trained = ReadOptions {
            obs_keys: Some(vec!["observation.images.top".into()]),
            image_size: Some("16x24".parse().unwrap()),
            reward: RewardSource::EpisodeEnd,
        };
        let mut info = std::collections::BTreeMap::new();
        trained.record(&mut info);
        assert_eq!(info["image_size"], "16x24");
        assert_eq!(info.len(), 2, "rewards are not recorded: {info:?}");
        let recorded = ReadOptions::recorded(&info).unwrap();
        let model = Path::new("m.safetensors");
        let read = ReadOptions::default().or_recorded(&recorded, model);
        assert_eq!(
            (&read.obs_keys, read.image_size),
            (&trained.obs_keys, trained.image_size)
        );
        assert_eq!(read.reward, RewardSource::default());
        let given = ReadOptions {
            obs_keys: Some(vec!["observation.images.wrist".into()]),
            ..Default::default()
        };
        let read = given.or_recorded(&recorded, model);
        assert_eq!(read.obs_keys, given.obs_keys);
        assert_eq!(read.image_size, trained.image_size);
        let none = std::collections::BTreeMap::new();
        assert_eq!(
            ReadOptions::recorded(&none).unwrap(),
            ReadOptions::default()
        );
        info.insert("image_size".into(), "large".into());
        let e = ReadOptions::recorded(&info).unwrap_err().to_string();
        assert!(e.contains("`image_size`"), "{e}");
    }

    /// Two episodes along a line, the first cut by a timeout, the second ending the file.
    fn line() -> Dataset {
        let obs: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let next: Vec<f32> = (1..7).map(|i| i as f32).collect();
        Dataset {
            obs_shape: vec![1],
            observations: obs.into(),
            next_observations: next.into(),
            rewards: vec![0.0; 6],
            terminals: vec![false; 6],
            timeouts: Some(vec![false, false, true, false, false, false]),
            next_missing: None,
            actions: None,
        }
    }

    #[test]
    fn reward_sources_parse_and_print() {
        for s in ["rewards", "success", "episode-end", "labels/ok.csv"] {
            assert_eq!(s.parse::<RewardSource>().unwrap().to_string(), s);
        }
        assert_eq!(
            "episode-end".parse::<RewardSource>().unwrap(),
            RewardSource::EpisodeEnd
        );
        assert!("".parse::<RewardSource>().is_err());
        let opts = ReadOptions {
            obs_keys: None,
            reward: RewardSource::EpisodeEnd,
            image_size: None,
        };
        let text = toml::to_string(&opts).unwrap();
        assert_eq!(toml::from_str::<ReadOptions>(&text).unwrap(), opts);
        let opts = ReadOptions {
            image_size: Some("72x96".parse().unwrap()),
            ..opts
        };
        let text = toml::to_string(&opts).unwrap();
        assert!(text.contains("image_size = \"72x96\""), "{text}");
        assert_eq!(toml::from_str::<ReadOptions>(&text).unwrap(), opts);
        assert_eq!(
            toml::from_str::<ReadOptions>("").unwrap(),
            ReadOptions::default()
        );
    }

    #[test]
    fn episode_end_rewards_the_last_row_of_each_episode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        line().save(&p).unwrap();
        let opts = ReadOptions {
            reward: RewardSource::EpisodeEnd,
            ..Default::default()
        };
        let l = read(&p, &opts).unwrap();
        assert_eq!(l.data.rewards, vec![0., 0., 1., 0., 0., 1.]);
        assert_eq!(
            l.data.terminals,
            vec![false, false, true, false, false, true]
        );
        assert_eq!(l.data.timeouts, Some(vec![false; 6]));
        assert!(l.notes[0].contains("2 episodes"), "{:?}", l.notes);
    }

    #[test]
    fn csv_rewards_name_episode_and_step() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        line().save(&p).unwrap();
        let csv = dir.path().join("r.csv");
        std::fs::write(&csv, "episode,step\n1,2\n0,0\n").unwrap();
        let opts = ReadOptions {
            reward: RewardSource::Csv(csv.clone()),
            ..Default::default()
        };
        let l = read(&p, &opts).unwrap();
        assert_eq!(l.data.rewards, vec![1., 0., 0., 0., 0., 1.]);
        for (text, needle) in [
            ("0,3\n", "step 3 of episode 0, which has 3"),
            ("2,0\n", "episode 2, but the data holds 2"),
            ("0;1\n", "line 1: expected `episode,step`"),
            ("a,b\n1,x\n", "line 2: `1,x` is not two whole numbers"),
        ] {
            std::fs::write(&csv, text).unwrap();
            let e = format!("{:#}", read(&p, &opts).unwrap_err());
            assert!(e.contains(needle) && e.contains("r.csv"), "{e}");
        }
    }

    /// D4RL's layout saved as arrays: no `next_observations`, so each row's next
    /// observation is the next row of its episode; the last row of an episode cut
    /// without a terminal is left out and counted.
    #[test]
    fn arrays_without_next_observations_take_the_next_row_of_their_episode() {
        use super::super::{Actions, RawArray};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        // Episodes: rows 0-2 (terminal), 3-4 (cut by a timeout), 5-6 (the file's end).
        let flag = |v: &[u8]| RawArray::from_u8(vec![7], v.to_vec());
        let mut arrays = std::collections::BTreeMap::from([
            (
                "observations".to_string(),
                RawArray::from_u8(vec![7, 1], (0..7).collect()),
            ),
            (
                "rewards".into(),
                RawArray::from_f32(vec![7], &[0., 0., 1., 0., 0., 0., 0.]),
            ),
            ("terminals".into(), flag(&[0, 0, 1, 0, 0, 0, 0])),
            ("timeouts".into(), flag(&[0, 0, 0, 0, 1, 0, 0])),
            (
                "actions".into(),
                RawArray::from_i64(vec![7], &[10, 11, 12, 13, 14, 15, 16]),
            ),
        ]);
        super::super::write_arrays(&p, &arrays).unwrap();
        let l = read(&p, &ReadOptions::default()).unwrap();
        let d = &l.data;
        assert_eq!(d.observations.to_f32()[..], [0., 1., 2., 3., 5.]);
        assert_eq!(d.next_observations.to_f32()[..], [1., 2., 2., 4., 6.]);
        assert_eq!(d.rewards, [0., 0., 1., 0., 0.]);
        assert_eq!(d.terminals, [false, false, true, false, false]);
        assert_eq!(d.timeouts, Some(vec![false, false, false, true, true]));
        assert_eq!(d.next_missing, Some(vec![false, false, true, false, false]));
        assert_eq!(d.actions, Some(Actions::Discrete(vec![10, 11, 12, 13, 15])));
        assert_eq!(l.dropped, 2);
        let report = l.report_lines().join("\n");
        assert!(
            report.contains("2 rows left out") && report.contains("3 episodes"),
            "{report}"
        );
        // What cannot be read that way is named.
        arrays.insert("next_missing".into(), flag(&[0; 7]));
        super::super::write_arrays(&p, &arrays).unwrap();
        let e = format!("{:#}", read(&p, &ReadOptions::default()).unwrap_err());
        assert!(e.contains("next_missing") && e.contains("d.npz"), "{e}");
        arrays.remove("next_missing");
        arrays.remove("terminals");
        super::super::write_arrays(&p, &arrays).unwrap();
        let e = format!("{:#}", read(&p, &ReadOptions::default()).unwrap_err());
        assert!(e.contains("`next_observations` and `terminals`"), "{e}");
    }

    #[test]
    fn rewards_from_another_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        let mut arrays = line().to_arrays();
        arrays.remove("rewards");
        arrays.insert(
            "success".into(),
            super::super::RawArray::from_f32(vec![6], &[0., 0., 0., 0., 0., 1.]),
        );
        super::super::write_arrays(&p, &arrays).unwrap();
        let e = format!("{:#}", read(&p, &ReadOptions::default()).unwrap_err());
        assert!(e.contains("success") || e.contains("rewards"), "{e}");
        let opts = ReadOptions {
            reward: RewardSource::Key("success".into()),
            ..Default::default()
        };
        assert_eq!(read(&p, &opts).unwrap().data.rewards[5], 1.0);
        let opts = ReadOptions {
            reward: RewardSource::Key("nope".into()),
            ..Default::default()
        };
        let e = format!("{:#}", read(&p, &opts).unwrap_err());
        assert!(e.contains("no key `nope`") && e.contains("d.npz"), "{e}");
    }

    #[test]
    fn unknown_files_are_refused_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.bin");
        std::fs::write(&p, b"not a dataset").unwrap();
        let e = format!("{:#}", read(&p, &ReadOptions::default()).unwrap_err());
        assert!(
            e.contains("unknown file type") && e.contains("d.bin"),
            "{e}"
        );
        assert!(e.contains(".hdf5") && e.contains("Minari"), "{e}");
    }
}
