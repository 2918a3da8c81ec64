//! Frames to the size a dataset stores: averaged over the area each stored pixel covers
//! when shrinking, bilinear when enlarging.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The largest side a frame keeps by default: a camera's 640x480 becomes 96x72, which the
/// default convolutional network (three stride-2 layers) takes, where full frames would
/// take 40 times the memory and time.
pub const DEFAULT_SIDE: usize = 96;

/// Height and width of stored frames (`--image-size HxW`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageSize {
    pub h: usize,
    pub w: usize,
}

impl ImageSize {
    /// The size frames of `h` x `w` are stored at without `--image-size`: as they are when
    /// their longer side is at most [`DEFAULT_SIDE`], else shrunk to it with their aspect
    /// ratio.
    pub fn default_for(h: usize, w: usize) -> ImageSize {
        let long = h.max(w);
        if long <= DEFAULT_SIDE {
            return ImageSize { h, w };
        }
        let side = |x: usize| ((x * DEFAULT_SIDE + long / 2) / long).max(1);
        ImageSize {
            h: side(h),
            w: side(w),
        }
    }
}

impl fmt::Display for ImageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.h, self.w)
    }
}

impl FromStr for ImageSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}`: expected HEIGHTxWIDTH in pixels, such as 64x64 or 72x96");
        let (h, w) = s.split_once(['x', 'X']).ok_or_else(bad)?;
        let (Ok(h), Ok(w)) = (h.trim().parse::<usize>(), w.trim().parse::<usize>()) else {
            return Err(bad());
        };
        if h == 0 || w == 0 || h > 4096 || w > 4096 {
            return Err(format!("`{s}`: each side must be 1 to 4096 pixels"));
        }
        Ok(ImageSize { h, w })
    }
}

impl Serialize for ImageSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ImageSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// For each output pixel along one axis, the first input pixel it reads and the weights of
/// the pixels from there (summing to 1).
fn weights(n_in: usize, n_out: usize) -> Vec<(usize, Vec<f32>)> {
    let scale = n_in as f64 / n_out as f64;
    (0..n_out)
        .map(|o| {
            if n_in == n_out {
                return (o, vec![1.0]);
            }
            if n_out < n_in {
                // The input interval [o * scale, (o + 1) * scale), each pixel weighted by
                // the part of it that lies inside.
                let (a, b) = (o as f64 * scale, (o + 1) as f64 * scale);
                let first = a.floor() as usize;
                let last = (b.ceil() as usize).min(n_in);
                let w = (first..last)
                    .map(|i| ((b.min(i as f64 + 1.0) - a.max(i as f64)) / scale) as f32)
                    .collect();
                return (first, w);
            }
            // Bilinear between the two input pixels whose centres surround this one's.
            let c = ((o as f64 + 0.5) * scale - 0.5).clamp(0.0, (n_in - 1) as f64);
            let i = (c.floor() as usize).min(n_in.saturating_sub(2));
            let t = (c - i as f64) as f32;
            if n_in == 1 {
                (0, vec![1.0])
            } else {
                (i, vec![1.0 - t, t])
            }
        })
        .collect()
}

/// Resizes planar `[c, h, w]` u8 pixels to `[c, to.h, to.w]`, appended to `out`.
pub fn resize(src: &[u8], c: usize, h: usize, w: usize, to: ImageSize, out: &mut Vec<u8>) {
    if (h, w) == (to.h, to.w) {
        out.extend_from_slice(&src[..c * h * w]);
        return;
    }
    let (wx, wy) = (weights(w, to.w), weights(h, to.h));
    let mut rows = vec![0f32; h * to.w];
    for plane in src.chunks_exact(h * w).take(c) {
        for y in 0..h {
            let line = &plane[y * w..(y + 1) * w];
            for (x, (first, ws)) in wx.iter().enumerate() {
                rows[y * to.w + x] = ws
                    .iter()
                    .enumerate()
                    .map(|(k, &f)| f * f32::from(line[first + k]))
                    .sum();
            }
        }
        for (first, ws) in &wy {
            for x in 0..to.w {
                let v: f32 = ws
                    .iter()
                    .enumerate()
                    .map(|(k, &f)| f * rows[(first + k) * to.w + x])
                    .sum();
                out.push(v.round().clamp(0.0, 255.0) as u8);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_print_and_default() {
        let s: ImageSize = "72x96".parse().unwrap();
        assert_eq!((s.h, s.w), (72, 96));
        assert_eq!(s.to_string(), "72x96");
        for bad in ["72", "x96", "0x5", "a x b", "5000x5"] {
            assert!(bad.parse::<ImageSize>().is_err(), "{bad}");
        }
        assert_eq!(ImageSize::default_for(480, 640), ImageSize { h: 72, w: 96 });
        assert_eq!(ImageSize::default_for(32, 48), ImageSize { h: 32, w: 48 });
        assert_eq!(
            ImageSize::default_for(1080, 1920),
            ImageSize { h: 54, w: 96 }
        );
        assert_eq!(ImageSize::default_for(2000, 1), ImageSize { h: 96, w: 1 });
    }

    #[test]
    fn shrinking_averages_areas_and_keeps_a_flat_image() {
        // A 4x6 plane of two halves, halved to 2x3: each output averages a 2x2 block.
        let src: Vec<u8> = (0..24).map(|i| if i % 6 < 3 { 10 } else { 200 }).collect();
        let mut out = vec![];
        resize(&src, 1, 4, 6, ImageSize { h: 2, w: 3 }, &mut out);
        assert_eq!(out, vec![10, 105, 200, 10, 105, 200]);
        // Any size of a flat image stays flat.
        let flat = vec![77u8; 3 * 7 * 5];
        for (h, w) in [(3, 2), (7, 5), (11, 13), (1, 1)] {
            let mut out = vec![];
            resize(&flat, 3, 7, 5, ImageSize { h, w }, &mut out);
            assert_eq!(out.len(), 3 * h * w);
            assert!(out.iter().all(|&v| v == 77), "{h}x{w}: {out:?}");
        }
    }

    #[test]
    fn enlarging_is_bilinear() {
        let mut out = vec![];
        resize(&[0, 100], 1, 1, 2, ImageSize { h: 1, w: 4 }, &mut out);
        assert_eq!(out, vec![0, 25, 75, 100]);
    }
}
