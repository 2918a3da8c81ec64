//! H.264 through openh264, whose C++ sources are compiled with the crate (without its
//! assembly when no `nasm` is found): no system library.

use super::mp4::Colour;
use super::yuv::{Layout, Matrix, Picture};
use anyhow::{anyhow, bail, Result};
use openh264::decoder::{DecodedYUV, Decoder, DecoderConfig, Flush};
use openh264::formats::YUVSource;
use openh264::OpenH264API;

pub struct H264 {
    decoder: Decoder,
    length_size: usize,
    /// SPS and PPS from `avcC` in Annex B form, sent with the first sample.
    header: Vec<u8>,
    matrix: Matrix,
    /// A sample in Annex B form.
    buf: Vec<u8>,
}

const START: [u8; 4] = [0, 0, 0, 1];

impl H264 {
    pub fn new(
        length_size: usize,
        parameter_sets: &[Vec<u8>],
        colour: Option<Colour>,
    ) -> Result<Self> {
        // No flush after each sample: frames shown in another order than decoded (B
        // frames) come out in display order, the last ones from `finish`.
        let config = DecoderConfig::new().flush_after_decode(Flush::NoFlush);
        let decoder = Decoder::with_api_config(OpenH264API::from_source(), config)
            .map_err(|e| anyhow!("the H.264 decoder cannot start ({e})"))?;
        let mut header = vec![];
        for p in parameter_sets {
            header.extend_from_slice(&START);
            header.extend_from_slice(p);
        }
        // openh264 does not say what the stream's VUI says; the container's `colr` does,
        // when the writer knew.
        let matrix = colour.map_or(Matrix::from_code(2, false), |c| {
            Matrix::from_code(c.matrix, c.full_range)
        });
        Ok(H264 {
            decoder,
            length_size,
            header,
            matrix,
            buf: vec![],
        })
    }

    /// Decodes one sample (length-prefixed NAL units), handing the picture that comes out,
    /// if any, to `out`.
    pub fn send(
        &mut self,
        sample: &[u8],
        out: &mut dyn FnMut(&Picture, Matrix) -> Result<()>,
    ) -> Result<()> {
        self.buf.clear();
        self.buf.append(&mut self.header);
        let mut rest = sample;
        while !rest.is_empty() {
            if rest.len() < self.length_size {
                bail!("a NAL unit's length is cut short");
            }
            let (len, body) = rest.split_at(self.length_size);
            let n = len.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b));
            if n > body.len() {
                bail!(
                    "a NAL unit of {n} bytes runs past the sample's end ({} bytes left)",
                    body.len()
                );
            }
            self.buf.extend_from_slice(&START);
            self.buf.extend_from_slice(&body[..n]);
            rest = &body[n..];
        }
        let matrix = self.matrix;
        match self.decoder.decode(&self.buf) {
            Ok(Some(yuv)) => hand(&yuv, matrix, out),
            Ok(None) => Ok(()),
            Err(e) => bail!("the H.264 stream cannot be decoded ({e})"),
        }
    }

    /// The pictures still inside the decoder, once every sample is sent.
    pub fn finish(&mut self, out: &mut dyn FnMut(&Picture, Matrix) -> Result<()>) -> Result<()> {
        let matrix = self.matrix;
        let rest = self
            .decoder
            .flush_remaining()
            .map_err(|e| anyhow!("the H.264 stream cannot be decoded ({e})"))?;
        for yuv in &rest {
            hand(yuv, matrix, out)?;
        }
        Ok(())
    }
}

fn hand(
    yuv: &DecodedYUV,
    matrix: Matrix,
    out: &mut dyn FnMut(&Picture, Matrix) -> Result<()>,
) -> Result<()> {
    let (w, h) = yuv.dimensions();
    let (ys, us, vs) = yuv.strides();
    let (y, u, v) = (yuv.y(), yuv.u(), yuv.v());
    // openh264 decodes 4:2:0 only; the slices are checked rather than trusted.
    if w == 0 || h == 0 {
        bail!("the H.264 decoder gave a picture of {w}x{h} pixels");
    }
    let ch = h.div_ceil(2);
    if us != vs
        || ys < w
        || y.len() < ys * (h - 1) + w
        || u.len() < us * (ch - 1) + w.div_ceil(2)
        || v.len() < vs * (ch - 1) + w.div_ceil(2)
    {
        bail!("the H.264 decoder gave a picture of unexpected layout");
    }
    let p = Picture {
        width: w,
        height: h,
        layout: Layout::I420,
        y,
        y_stride: ys,
        u,
        v,
        uv_stride: us,
    };
    out(&p, matrix)
}
