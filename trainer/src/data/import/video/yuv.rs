//! Decoded pictures (8-bit YUV planes) to RGB.

/// How chroma is subsampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Monochrome: no chroma planes.
    I400,
    I420,
    I422,
    I444,
}

/// A decoded 8-bit picture, borrowed from its decoder.
pub struct Picture<'a> {
    pub width: usize,
    pub height: usize,
    pub layout: Layout,
    pub y: &'a [u8],
    pub y_stride: usize,
    pub u: &'a [u8],
    pub v: &'a [u8],
    pub uv_stride: usize,
}

/// The YUV to RGB conversion: the luma weights of red and blue, and the range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Matrix {
    kr: f32,
    kb: f32,
    full_range: bool,
    /// Code 0 of H.273: the planes hold G, B, R.
    identity: bool,
    name: &'static str,
}

impl Matrix {
    /// The matrix an H.273 matrix coefficients code names. Unspecified and unknown codes
    /// take BT.601, which decoders (ffmpeg's among them) assume for video of this size.
    pub fn from_code(code: u16, full_range: bool) -> Self {
        let (kr, kb, name) = match code {
            0 => (0.299, 0.114, "RGB planes"),
            1 => (0.2126, 0.0722, "BT.709"),
            4 => (0.30, 0.11, "FCC"),
            7 => (0.212, 0.087, "SMPTE 240M"),
            9 | 10 => (0.2627, 0.0593, "BT.2020"),
            _ => (0.299, 0.114, "BT.601"),
        };
        Matrix {
            kr,
            kb,
            full_range,
            identity: code == 0,
            name,
        }
    }

    /// What the matrix is, for the notes.
    pub fn describe(&self) -> &'static str {
        self.name
    }
}

/// `p` as RGB, planar `[3, H, W]`, into `out`. Chroma is taken from the sample that covers
/// each pixel: the frames are then averaged down, which smooths it further.
pub fn to_rgb(p: &Picture, m: Matrix, out: &mut Vec<u8>) {
    let (w, h) = (p.width, p.height);
    out.clear();
    out.resize(3 * w * h, 0);
    let (sx, sy) = match p.layout {
        Layout::I420 => (1, 1),
        Layout::I422 => (1, 0),
        Layout::I444 | Layout::I400 => (0, 0),
    };
    let (ys, yo, cs) = if m.full_range {
        (1.0f32, 0.0f32, 1.0f32)
    } else {
        (255.0 / 219.0, 16.0, 255.0 / 224.0)
    };
    let kg = 1.0 - m.kr - m.kb;
    let (r_v, b_u) = (2.0 * (1.0 - m.kr), 2.0 * (1.0 - m.kb));
    let (g_u, g_v) = (b_u * m.kb / kg, r_v * m.kr / kg);
    let clamp = |x: f32| x.round().clamp(0.0, 255.0) as u8;
    let (r_plane, rest) = out.split_at_mut(w * h);
    let (g_plane, b_plane) = rest.split_at_mut(w * h);
    for row in 0..h {
        let yrow = &p.y[row * p.y_stride..row * p.y_stride + w];
        let crow = (row >> sy) * p.uv_stride;
        for col in 0..w {
            let i = row * w + col;
            if p.layout == Layout::I400 {
                let g = clamp((f32::from(yrow[col]) - yo) * ys);
                (r_plane[i], g_plane[i], b_plane[i]) = (g, g, g);
                continue;
            }
            let c = crow + (col >> sx);
            let (y, u, v) = (yrow[col], p.u[c], p.v[c]);
            if m.identity {
                let f = |x: u8| clamp((f32::from(x) - yo) * ys);
                (r_plane[i], g_plane[i], b_plane[i]) = (f(v), f(y), f(u));
                continue;
            }
            let y = (f32::from(y) - yo) * ys;
            let u = (f32::from(u) - 128.0) * cs;
            let v = (f32::from(v) - 128.0) * cs;
            r_plane[i] = clamp(y + r_v * v);
            g_plane[i] = clamp(y - g_u * u - g_v * v);
            b_plane[i] = clamp(y + b_u * u);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pixel through the conversion.
    fn pixel(y: u8, u: u8, v: u8, m: Matrix) -> [u8; 3] {
        let p = Picture {
            width: 1,
            height: 1,
            layout: Layout::I444,
            y: &[y],
            y_stride: 1,
            u: &[u],
            v: &[v],
            uv_stride: 1,
        };
        let mut out = vec![];
        to_rgb(&p, m, &mut out);
        [out[0], out[1], out[2]]
    }

    #[test]
    fn bt601_limited_range_gives_back_the_primaries() {
        let m = Matrix::from_code(2, false);
        assert_eq!(pixel(16, 128, 128, m), [0, 0, 0]);
        assert_eq!(pixel(235, 128, 128, m), [255, 255, 255]);
        // Red, green and blue as BT.601 limited range codes them.
        // (Codes are whole numbers, so a primary comes back within a step.)
        let near = |got: [u8; 3], want: [u8; 3]| {
            assert!(
                got.iter().zip(want).all(|(&g, w)| g.abs_diff(w) <= 2),
                "{got:?} for {want:?}"
            );
        };
        near(pixel(81, 90, 240, m), [255, 0, 0]);
        near(pixel(145, 54, 34, m), [0, 255, 0]);
        near(pixel(41, 240, 110, m), [0, 0, 255]);
    }

    #[test]
    fn full_range_and_bt709() {
        let m = Matrix::from_code(1, true);
        assert_eq!(m.describe(), "BT.709");
        assert_eq!(pixel(0, 128, 128, m), [0, 0, 0]);
        assert_eq!(pixel(255, 128, 128, m), [255, 255, 255]);
        let r = pixel(54, 99, 255, m);
        assert!(r[0] >= 253 && r[1] <= 2 && r[2] <= 2, "{r:?}");
    }
}
