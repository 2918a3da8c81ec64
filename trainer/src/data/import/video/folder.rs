//! A folder of videos, one episode each (`laq convert --from video`): consecutive frames
//! of a video are the transitions of its episode.

use super::{ImageSize, Video, EXTENSIONS};
use crate::data::Dataset;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// One video of the folder.
pub struct Episode {
    pub file: PathBuf,
    pub codec: &'static str,
    /// Height and width in the file.
    pub size: (usize, usize),
    pub frames: usize,
    pub matrix: &'static str,
}

/// A folder of videos as transitions, with no reward yet.
pub struct Videos {
    pub data: Dataset,
    pub episodes: Vec<Episode>,
    /// The size frames are stored at.
    pub size: ImageSize,
    /// Files of the folder that are not videos, left out.
    pub ignored: Vec<String>,
}

/// Whether `path` has a video's extension.
fn is_video(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Reads every video of `dir` in name order, each an episode cut by a timeout at its last
/// frame, at `size` (default: [`ImageSize::default_for`] the first video).
pub fn read(dir: &Path, size: Option<ImageSize>) -> Result<Videos> {
    let at = dir.display();
    if !dir.is_dir() {
        bail!("{at}: not a folder; --from video reads a folder of video files, one episode each");
    }
    let cannot = || format!("cannot list {at}");
    let mut files = vec![];
    let mut ignored = vec![];
    for e in std::fs::read_dir(dir).with_context(cannot)? {
        let p = e.with_context(cannot)?.path();
        if p.is_file() && is_video(&p) {
            files.push(p);
        } else if let Some(n) = p.file_name() {
            ignored.push(n.to_string_lossy().into_owned());
        }
    }
    files.sort();
    ignored.sort();
    if files.is_empty() {
        bail!(
            "{at}: no video files (.{}) in the folder",
            EXTENSIONS.join(", .")
        );
    }
    let mut videos = vec![];
    for f in &files {
        let v = Video::open(f)?;
        if v.len() < 2 {
            bail!(
                "{}: {} frame: an episode needs two frames to make a transition",
                f.display(),
                v.len()
            );
        }
        videos.push(v);
    }
    let size = size.unwrap_or_else(|| {
        let (h, w) = videos[0].size();
        ImageSize::default_for(h, w)
    });
    let frame = 3 * size.h * size.w;
    let transitions: usize = videos.iter().map(|v| v.len() - 1).sum();
    let (mut o, mut nx) = (
        Vec::with_capacity(transitions * frame),
        Vec::with_capacity(transitions * frame),
    );
    let mut timeouts = Vec::with_capacity(transitions);
    let mut episodes = vec![];
    for (f, mut v) in files.into_iter().zip(videos) {
        let n = v.len();
        let all: Vec<usize> = (0..n).collect();
        let d = v.decode(&all, size)?;
        o.extend_from_slice(&d.pixels[..(n - 1) * frame]);
        nx.extend_from_slice(&d.pixels[frame..]);
        timeouts.extend((0..n - 1).map(|t| t + 2 == n));
        episodes.push(Episode {
            file: f,
            codec: v.codec(),
            size: v.size(),
            frames: n,
            matrix: d.matrix,
        });
    }
    let data = Dataset {
        obs_shape: vec![3, size.h, size.w],
        observations: o.into(),
        next_observations: nx.into(),
        rewards: vec![0.0; transitions],
        terminals: vec![false; transitions],
        timeouts: Some(timeouts),
        next_missing: None,
        actions: None,
    };
    Ok(Videos {
        data,
        episodes,
        size,
        ignored,
    })
}
