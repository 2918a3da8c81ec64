//! Camera features of dtype `video`: each row's frame from the MP4 file in which
//! `meta/episodes/` places its episode, found by time.
//!
//! In v3.0 several episodes follow one another in one MP4 file; the episodes' table gives,
//! per camera, the file (`videos/<key>/chunk_index`, `file_index`) and where the episode
//! starts in it (`from_timestamp`). A row's frame is the one shown at `from_timestamp` plus
//! the row's `timestamp`: the nearest frame, which must lie within half a frame period.

use super::{parquet_files, read_files, Column, Info, INFO};
use crate::data::import::video::{ImageSize, Video};
use anyhow::{anyhow, bail, Result};
use std::collections::BTreeMap;
use std::path::{Component, Path};

const EPISODES: &str = "meta/episodes";

/// The frames of a camera, one per row.
pub(super) struct CameraFrames {
    /// `[3, H, W]` per row, in the rows' order.
    pub pixels: Vec<u8>,
    pub shape: Vec<usize>,
    pub notes: Vec<String>,
}

/// What the rows say about their place in time.
pub(super) struct Rows<'a> {
    pub episode: &'a [u64],
    pub frame: &'a [u64],
    /// Seconds from the episode's start (`timestamp`).
    pub time: &'a [f64],
}

/// Where an episode lies in the videos of a camera.
#[derive(Clone, Copy, Debug)]
struct Segment {
    chunk: u64,
    file: u64,
    from: f64,
    to: f64,
}

/// Each episode's segment in the videos of camera `key`, from the tables of
/// `meta/episodes/`.
fn segments(dir: &Path, key: &str) -> Result<BTreeMap<u64, Segment>> {
    let root = dir.join(EPISODES);
    let mut files = vec![];
    if root.is_dir() {
        parquet_files(&root, Path::new(""), &mut files)?;
    }
    if files.is_empty() {
        bail!(
            "{}: no Parquet files; they give each episode's place in the videos of `{key}`",
            root.display()
        );
    }
    let names = [
        "episode_index".to_string(),
        format!("videos/{key}/chunk_index"),
        format!("videos/{key}/file_index"),
        format!("videos/{key}/from_timestamp"),
        format!("videos/{key}/to_timestamp"),
    ];
    let columns: Vec<Column> = names
        .iter()
        .map(|n| Column {
            name: n.clone(),
            width: 1,
            shape: vec![1],
        })
        .collect();
    let table = read_files(&files, &columns)?;
    let mut out = BTreeMap::new();
    for r in 0..table.file.len() {
        let at = table.files[table.file[r] as usize].display();
        let whole = |c: usize| -> Result<u64> {
            let x = table.cols[c][r];
            if x >= 0.0 && x.fract() == 0.0 {
                Ok(x as u64)
            } else {
                bail!(
                    "{at}: key `{}` is {x} in a row, expected a whole number",
                    names[c]
                )
            }
        };
        let episode = whole(0)?;
        let s = Segment {
            chunk: whole(1)?,
            file: whole(2)?,
            from: table.cols[3][r],
            to: table.cols[4][r],
        };
        if !(s.from >= 0.0 && s.to > s.from) {
            bail!(
                "{at}: episode {episode}: `{}` is {} and `{}` is {}, expected 0 <= from < to",
                names[3],
                s.from,
                names[4],
                s.to
            );
        }
        if out.insert(episode, s).is_some() {
            bail!("{at}: episode {episode} is listed twice");
        }
    }
    Ok(out)
}

/// `video_path` of `meta/info.json` with its placeholders filled: `{video_key}`,
/// `{chunk_index}` and `{file_index}`, the last two with an optional width
/// (`{chunk_index:03d}`).
fn video_path(template: &str, key: &str, chunk: u64, file: u64) -> Result<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            bail!("key `video_path` is `{template}`, whose `{{` is never closed");
        };
        let field = &rest[open + 1..open + close];
        let (name, spec) = field.split_once(':').unwrap_or((field, ""));
        let number = match name {
            "video_key" if spec.is_empty() => {
                out.push_str(key);
                None
            }
            "chunk_index" => Some(chunk),
            "file_index" => Some(file),
            _ => bail!(
                "key `video_path` is `{template}`, with the placeholder `{{{field}}}`, which laq \
                 does not know (it fills video_key, chunk_index and file_index)"
            ),
        };
        if let Some(n) = number {
            let digits = spec.strip_suffix('d').unwrap_or(spec);
            let width: usize = match digits.trim_start_matches('0') {
                "" => 0,
                w => w.parse().map_err(|_| {
                    anyhow!("key `video_path` is `{template}`: `{{{field}}}` is not a width")
                })?,
            };
            out.push_str(&format!("{n:0width$}"));
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    let p = Path::new(&out);
    if p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        bail!("key `video_path` is `{template}`, which leads out of the dataset directory");
    }
    Ok(out)
}

/// The index of the time in `times` (increasing) nearest to `t`.
fn nearest(times: &[f64], t: f64) -> usize {
    let i = times.partition_point(|&x| x < t);
    if i == 0 {
        return 0;
    }
    if i == times.len() || t - times[i - 1] <= times[i] - t {
        return i - 1;
    }
    i
}

/// The frame of camera `key` for each row, at `size` (default: [`ImageSize::default_for`]
/// the first video).
pub(super) fn frames(
    dir: &Path,
    info: &Info,
    key: &str,
    rows: &Rows,
    size: Option<ImageSize>,
) -> Result<CameraFrames> {
    let info_at = dir.join(INFO).display().to_string();
    let segs = segments(dir, key)?;
    let episodes_at = dir.join(EPISODES).display().to_string();
    // The rows of each video file, in the files' order.
    let mut by_file: BTreeMap<(u64, u64), Vec<usize>> = BTreeMap::new();
    for (i, e) in rows.episode.iter().enumerate() {
        let Some(s) = segs.get(e) else {
            bail!(
                "{episodes_at}: episode {e} is not listed, so its place in the videos of \
                 `{key}` is unknown"
            );
        };
        by_file.entry((s.chunk, s.file)).or_default().push(i);
    }
    let (mut size, mut first) = (size, None);
    let mut frame_len = 0;
    let mut pixels = vec![];
    let mut slot = vec![usize::MAX; rows.episode.len()];
    let (mut decoded, mut unused, mut shared) = (0usize, 0usize, 0usize);
    let mut matrices = vec![];
    for (&(chunk, file), members) in &by_file {
        let rel = video_path(&info.video_path, key, chunk, file)
            .map_err(|e| anyhow!("{info_at}: {e}"))?;
        let path = dir.join(&rel);
        if !path.is_file() {
            bail!(
                "{}: no such file; it holds the frames of `{key}` for episodes {} (from key \
                 `video_path` of {info_at} and the chunk and file of {episodes_at})",
                path.display(),
                crate::util::runs(members.iter().map(|&i| rows.episode[i]), "..=")
            );
        }
        let mut video = Video::open(&path)?;
        let (h, w) = video.size();
        let to = *size.get_or_insert_with(|| ImageSize::default_for(h, w));
        first.get_or_insert((video.codec(), h, w));
        frame_len = 3 * to.h * to.w;
        let times = video.times().to_vec();
        // Half a frame period: the nearest frame is then the one the row was recorded
        // with, and a row whose frame is missing finds none.
        let period = match info.fps {
            Some(f) => 1.0 / f,
            None => median_gap(&times),
        };
        let tol = period / 2.0;
        let mut want = vec![];
        for &i in members {
            let s = segs[&rows.episode[i]];
            let t = s.from + rows.time[i];
            let k = nearest(&times, t);
            if (times[k] - t).abs() > tol {
                bail!(
                    "{}: no frame at {t:.3} s for episode {} frame {} (its timestamp {:.3} s \
                     after the episode's from_timestamp {:.3} s); the nearest is at {:.3} s, \
                     and the file holds {} frames from {:.3} s to {:.3} s: the video and the \
                     data disagree",
                    path.display(),
                    rows.episode[i],
                    rows.frame[i],
                    rows.time[i],
                    s.from,
                    times[k],
                    times.len(),
                    times[0],
                    times[times.len() - 1]
                );
            }
            want.push((k, i));
        }
        want.sort_unstable();
        let mut ks: Vec<usize> = want.iter().map(|&(k, _)| k).collect();
        let before = ks.len();
        ks.dedup();
        shared += before - ks.len();
        // Frames of the episodes' segments that no row takes.
        let mut eps: Vec<u64> = members.iter().map(|&i| rows.episode[i]).collect();
        eps.sort_unstable();
        eps.dedup();
        let in_segments = times
            .iter()
            .filter(|&&t| {
                eps.iter()
                    .any(|e| t >= segs[e].from - tol && t < segs[e].to - tol)
            })
            .count();
        unused += in_segments.saturating_sub(ks.len());
        let d = video.decode(&ks, to)?;
        matrices.push(d.matrix);
        decoded += ks.len();
        let base = pixels.len() / frame_len.max(1);
        pixels.extend_from_slice(&d.pixels);
        let mut j = 0;
        for (n, &(k, i)) in want.iter().enumerate() {
            if n > 0 && want[n - 1].0 != k {
                j += 1;
            }
            slot[i] = base + j;
        }
    }
    let (Some(size), Some((codec, h, w))) = (size, first) else {
        bail!("{}: no rows, so no frame of `{key}`", dir.display());
    };
    let mut out = Vec::with_capacity(slot.len() * frame_len);
    for &s in &slot {
        out.extend_from_slice(&pixels[s * frame_len..(s + 1) * frame_len]);
    }
    matrices.sort_unstable();
    matrices.dedup();
    let mut notes = vec![format!(
        "observations: camera `{key}` ({codec}, {w}x{h} frames, {} to RGB) stored at \
         {}x{} (height x width){}",
        matrices.join("/"),
        size.h,
        size.w,
        if (size.h, size.w) == (h, w) {
            String::new()
        } else if size.h < h && size.w < w {
            ", averaged over areas".into()
        } else {
            ", resized".into()
        }
    )];
    notes.push(format!(
        "{decoded} frames decoded from {} video files of `{key}`",
        by_file.len()
    ));
    if unused > 0 {
        notes.push(format!(
            "{unused} video frames of `{key}` inside the episodes match no row: left out \
             (the video holds more frames than the data rows)"
        ));
    }
    if shared > 0 {
        notes.push(format!(
            "{shared} rows of `{key}` take the same frame as another row of their episode"
        ));
    }
    Ok(CameraFrames {
        pixels: out,
        shape: vec![3, size.h, size.w],
        notes,
    })
}

/// The median time between frames, for a dataset that does not give its `fps`.
fn median_gap(times: &[f64]) -> f64 {
    let mut gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    if gaps.is_empty() {
        return 1.0;
    }
    gaps.sort_by(f64::total_cmp);
    gaps[gaps.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn video_path_fills_lerobots_template() {
        let t = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4";
        assert_eq!(
            video_path(t, "observation.images.top", 0, 12).unwrap(),
            "videos/observation.images.top/chunk-000/file-012.mp4"
        );
        assert_eq!(
            video_path("v/{chunk_index}/{file_index:d}.mp4", "k", 3, 1000).unwrap(),
            "v/3/1000.mp4"
        );
        for (bad, needle) in [
            (
                "videos/{episode_index}.mp4",
                "placeholder `{episode_index}`",
            ),
            ("videos/{video_key.mp4", "never closed"),
            ("../{video_key}.mp4", "leads out"),
            ("/{video_key}.mp4", "leads out"),
        ] {
            let e = video_path(bad, "k", 0, 0).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn nearest_frames_and_spans() {
        let t = [0.0, 0.1, 0.2, 0.3];
        assert_eq!(nearest(&t, -1.0), 0);
        assert_eq!(nearest(&t, 0.14), 1);
        assert_eq!(nearest(&t, 0.16), 2);
        assert_eq!(nearest(&t, 9.0), 3);
    }
}
