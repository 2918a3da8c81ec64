//! Camera videos: the video track of an MP4 file, AV1 or H.264, decoded to RGB frames
//! `[3, H, W]` of the size a dataset stores them at.
//!
//! The decoders bind no system library. AV1 (LeRobot's default) is decoded by rav1d, the
//! Rust port of dav1d, without its assembly and for 8-bit video (cargo feature `av1`);
//! H.264 by openh264, whose C++ sources are compiled with the crate (cargo feature
//! `h264`). The MP4 container is read by `mp4`, here.
//!
//! Frames come out of the decoders in display order, the order of the samples'
//! presentation times; a decoder that gives another number of frames than the file has
//! samples is an error.

// Without a decoder, what only decoders use is left unused.
#![cfg_attr(not(all(feature = "av1", feature = "h264")), allow(dead_code))]

#[cfg(feature = "av1")]
mod av1;
pub mod folder;
#[cfg(feature = "h264")]
mod h264;
mod mp4;
pub mod resize;
mod yuv;

pub use resize::ImageSize;

use super::guard::guarded;
use anyhow::{anyhow, bail, Context, Result};
use mp4::{Codec, Mp4};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use yuv::{Matrix, Picture};

/// File extensions taken for videos in a folder.
pub const EXTENSIONS: [&str; 3] = ["mp4", "m4v", "mov"];

/// An open video file.
pub struct Video {
    path: PathBuf,
    mp4: Mp4,
    /// Presentation times in seconds, in display order.
    times: Vec<f64>,
}

/// Frames decoded from a video.
pub struct Decoded {
    /// The frames asked for, `[3, H, W]` each, one after the other.
    pub pixels: Vec<u8>,
    /// How YUV became RGB (`BT.601`, ...).
    pub matrix: &'static str,
}

impl Video {
    /// Opens `path` and reads its tables (no frame is decoded yet).
    pub fn open(path: &Path) -> Result<Video> {
        let mp4 = Mp4::open(path)?;
        let mut times = mp4.track.seconds();
        times.sort_by(f64::total_cmp);
        Ok(Video {
            path: path.to_path_buf(),
            mp4,
            times,
        })
    }

    /// `AV1` or `H.264`.
    pub fn codec(&self) -> &'static str {
        self.mp4.track.codec.name()
    }

    /// Height and width of the frames, as the file describes them.
    pub fn size(&self) -> (usize, usize) {
        (self.mp4.track.height, self.mp4.track.width)
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// Presentation times of the frames in seconds, in display order.
    pub fn times(&self) -> &[f64] {
        &self.times
    }

    /// Decodes the frames `wanted` (indices in display order, increasing) at `size`.
    /// Decoding stops after the last frame wanted.
    pub fn decode(&mut self, wanted: &[usize], size: ImageSize) -> Result<Decoded> {
        let at = self.path.display().to_string();
        let codec = self.codec();
        guarded(|| self.decode_inner(wanted, size))
            .map_err(|why| {
                anyhow!("{at}: the {codec} decoder failed on it ({why}); a damaged file?")
            })?
            .with_context(|| at.clone())
    }

    fn decode_inner(&mut self, wanted: &[usize], size: ImageSize) -> Result<Decoded> {
        let n = self.mp4.track.samples.len();
        let (h, w) = self.size();
        let mut dec = Decoder::new(&self.mp4.track.codec, self.mp4.track.colour)?;
        let mut pixels = Vec::with_capacity(wanted.len() * 3 * size.h * size.w);
        // Frames out, and frames of `wanted` kept: read by the loop below while the
        // closure that counts them is alive.
        let (k, next) = (Cell::new(0usize), Cell::new(0usize));
        let (mut rgb, mut matrix) = (vec![], None);
        let mut on_picture = |p: &Picture, m: Matrix| -> Result<()> {
            let kk = k.get();
            if (p.height, p.width) != (h, w) {
                bail!(
                    "frame {kk} is {}x{} pixels, where the file gives {h}x{w} (a video whose size \
                     changes is not read)",
                    p.height,
                    p.width
                );
            }
            if wanted.get(next.get()) == Some(&kk) {
                yuv::to_rgb(p, m, &mut rgb);
                resize::resize(&rgb, 3, h, w, size, &mut pixels);
                matrix.get_or_insert(m.describe());
                next.set(next.get() + 1);
            }
            k.set(kk + 1);
            Ok(())
        };
        let mut buf = vec![];
        let mut all = true;
        for i in 0..n {
            if next.get() == wanted.len() {
                all = false;
                break;
            }
            self.mp4.read_sample(i, &mut buf)?;
            dec.send(&buf, &mut on_picture)
                .with_context(|| format!("sample {i} of {n}"))?;
        }
        if all {
            dec.finish(&mut on_picture)
                .with_context(|| format!("the end of the stream ({n} samples)"))?;
            if k.get() != n {
                bail!(
                    "the decoder gave {} frames, where the file holds {n} samples",
                    k.get()
                );
            }
        }
        if let Some(&missing) = wanted.get(next.get()) {
            bail!("frame {missing} asked for, but the file holds {n} frames");
        }
        Ok(Decoded {
            pixels,
            matrix: matrix.unwrap_or("none"),
        })
    }
}

/// The decoder of a track's codec.
enum Decoder {
    #[cfg(feature = "av1")]
    Av1(av1::Av1),
    #[cfg(feature = "h264")]
    H264(h264::H264),
}

type OnPicture<'a> = dyn FnMut(&Picture, Matrix) -> Result<()> + 'a;

impl Decoder {
    #[allow(unused_variables)]
    fn new(codec: &Codec, colour: Option<mp4::Colour>) -> Result<Decoder> {
        match codec {
            #[cfg(feature = "av1")]
            Codec::Av1 { config_obus } => Ok(Decoder::Av1(av1::Av1::new(config_obus, colour)?)),
            #[cfg(feature = "h264")]
            Codec::H264 {
                length_size,
                parameter_sets,
            } => Ok(Decoder::H264(h264::H264::new(
                *length_size,
                parameter_sets,
                colour,
            )?)),
            #[allow(unreachable_patterns)]
            other => bail!(
                "the video is {}, and this laq was built without the cargo feature `{}` that \
                 decodes it",
                other.name(),
                match other {
                    Codec::Av1 { .. } => "av1",
                    Codec::H264 { .. } => "h264",
                }
            ),
        }
    }

    #[allow(unused_variables)]
    fn send(&mut self, sample: &[u8], out: &mut OnPicture) -> Result<()> {
        match *self {
            #[cfg(feature = "av1")]
            Decoder::Av1(ref mut d) => d.send(sample, out),
            #[cfg(feature = "h264")]
            Decoder::H264(ref mut d) => d.send(sample, out),
        }
    }

    #[allow(unused_variables)]
    fn finish(&mut self, out: &mut OnPicture) -> Result<()> {
        match *self {
            #[cfg(feature = "av1")]
            Decoder::Av1(ref mut d) => d.finish(out),
            #[cfg(feature = "h264")]
            Decoder::H264(ref mut d) => d.finish(out),
        }
    }
}
