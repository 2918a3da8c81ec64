//! AV1 through rav1d, the Rust port of dav1d, built without its assembly (no assembler is
//! needed) and for 8-bit video only.
//!
//! rav1d's interface is dav1d's C one; the unsafe code here is its calls, each with what
//! the call requires, behind a decoder that owns its context and its pictures.

use super::mp4::Colour;
use super::yuv::{Layout, Matrix, Picture};
use anyhow::{bail, Result};
use rav1d::include::dav1d::data::Dav1dData;
use rav1d::include::dav1d::dav1d::{Dav1dContext, Dav1dSettings};
use rav1d::include::dav1d::picture::Dav1dPicture;
use rav1d::src::lib as dav1d;
use std::ptr::NonNull;

/// dav1d's "try again" code: send or take the other way first.
const EAGAIN: i32 = -11;

pub struct Av1 {
    ctx: Option<Dav1dContext>,
    /// The `av1C` OBUs, sent before the first sample.
    config: Vec<u8>,
    /// The colour description of the container, for streams that give none.
    colour: Option<Colour>,
}

impl Av1 {
    pub fn new(config_obus: &[u8], colour: Option<Colour>) -> Result<Self> {
        let mut s = std::mem::MaybeUninit::<Dav1dSettings>::uninit();
        // SAFETY: `dav1d_default_settings` writes every field of the settings it is given.
        let mut s = unsafe {
            dav1d::dav1d_default_settings(NonNull::new(s.as_mut_ptr()).unwrap());
            s.assume_init()
        };
        // No logger: a damaged stream is reported once, as an error, not on stderr. The
        // logger's type is not public; it is a cookie and a function pointer, both
        // optional, for which all bits zero is `None`.
        // SAFETY: zeroes are a valid value of both of the logger's fields.
        unsafe {
            std::ptr::write_bytes(
                std::ptr::addr_of_mut!(s.logger).cast::<u8>(),
                0,
                std::mem::size_of_val(&s.logger),
            );
        }
        // The highest spatial layer only: one picture per sample.
        s.all_layers = 0;
        let mut ctx = None;
        // SAFETY: both pointers are valid for the call; `ctx` receives the context.
        let r = unsafe {
            dav1d::dav1d_open(Some(NonNull::from(&mut ctx)), Some(NonNull::from(&mut s)))
        };
        if r.0 != 0 || ctx.is_none() {
            bail!("the AV1 decoder cannot start (code {})", r.0);
        }
        Ok(Av1 {
            ctx,
            config: config_obus.to_vec(),
            colour,
        })
    }

    /// Decodes one sample (a temporal unit), handing each picture that comes out to `out`.
    pub fn send(
        &mut self,
        sample: &[u8],
        out: &mut dyn FnMut(&Picture, Matrix) -> Result<()>,
    ) -> Result<()> {
        let mut bytes = std::mem::take(&mut self.config);
        bytes.extend_from_slice(sample);
        if bytes.is_empty() {
            return Ok(());
        }
        // SAFETY: a zeroed `Dav1dData` is the empty value dav1d's own callers start from.
        let mut data: Dav1dData = unsafe { std::mem::zeroed() };
        // SAFETY: `data` is valid to write; dav1d allocates `bytes.len()` bytes and
        // returns them (null on failure), which are then filled.
        unsafe {
            let p = dav1d::dav1d_data_create(Some(NonNull::from(&mut data)), bytes.len());
            if p.is_null() {
                bail!(
                    "the AV1 decoder cannot take a sample of {} bytes",
                    bytes.len()
                );
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
        }
        let res = (|| {
            loop {
                // SAFETY: the context is open and `data` is dav1d's own buffer.
                let r = unsafe { dav1d::dav1d_send_data(self.ctx, Some(NonNull::from(&mut data))) };
                if r.0 != 0 && r.0 != EAGAIN {
                    bail!("the AV1 stream cannot be decoded (dav1d code {})", r.0);
                }
                self.take(out)?;
                if r.0 == 0 || data.sz == 0 {
                    return Ok(());
                }
            }
        })();
        // SAFETY: `data` came from `dav1d_data_create` and is released once.
        unsafe { dav1d::dav1d_data_unref(Some(NonNull::from(&mut data))) };
        res
    }

    /// The pictures still inside the decoder, once every sample is sent.
    pub fn finish(&mut self, out: &mut dyn FnMut(&Picture, Matrix) -> Result<()>) -> Result<()> {
        self.take(out)
    }

    /// Hands `out` every picture ready now.
    fn take(&mut self, out: &mut dyn FnMut(&Picture, Matrix) -> Result<()>) -> Result<()> {
        loop {
            // SAFETY: a zeroed picture is the empty one dav1d expects to fill.
            let mut pic: Dav1dPicture = unsafe { std::mem::zeroed() };
            // SAFETY: the context is open and `pic` valid to write.
            let r = unsafe { dav1d::dav1d_get_picture(self.ctx, Some(NonNull::from(&mut pic))) };
            if r.0 == EAGAIN {
                return Ok(());
            }
            if r.0 != 0 {
                bail!("the AV1 stream cannot be decoded (dav1d code {})", r.0);
            }
            let res = self.hand(&pic, out);
            // SAFETY: `pic` was filled by `dav1d_get_picture` and is released once.
            unsafe { dav1d::dav1d_picture_unref(Some(NonNull::from(&mut pic))) };
            res?;
        }
    }

    fn hand(
        &self,
        pic: &Dav1dPicture,
        out: &mut dyn FnMut(&Picture, Matrix) -> Result<()>,
    ) -> Result<()> {
        let (w, h) = (pic.p.w as usize, pic.p.h as usize);
        if pic.p.bpc != 8 {
            bail!(
                "the video has {} bits per sample; laq decodes 8-bit video",
                pic.p.bpc
            );
        }
        let layout = match pic.p.layout {
            0 => Layout::I400,
            1 => Layout::I420,
            2 => Layout::I422,
            _ => Layout::I444,
        };
        let (ys, cs) = (pic.stride[0], pic.stride[1]);
        let Some(y) = pic.data[0] else {
            bail!("the AV1 decoder gave a picture without pixels");
        };
        if ys < w as isize || (layout != Layout::I400 && cs <= 0) {
            bail!("the AV1 decoder gave a picture of negative or short strides");
        }
        let ch = match layout {
            Layout::I420 => h.div_ceil(2),
            _ => h,
        };
        // SAFETY: dav1d's pictures hold `stride * height` bytes for luma and
        // `stride[1] * chroma height` for each chroma plane, alive until unreferenced.
        let (yp, up, vp) = unsafe {
            let y = std::slice::from_raw_parts(y.as_ptr().cast::<u8>(), ys as usize * h);
            let chroma = |p: Option<NonNull<std::ffi::c_void>>| match p {
                Some(p) if layout != Layout::I400 => {
                    std::slice::from_raw_parts(p.as_ptr().cast::<u8>(), cs as usize * ch)
                }
                _ => &[][..],
            };
            (y, chroma(pic.data[1]), chroma(pic.data[2]))
        };
        if layout != Layout::I400 && (up.is_empty() || vp.is_empty()) {
            bail!("the AV1 decoder gave a picture without chroma");
        }
        // The stream's own colour description, unless it leaves the matrix unspecified.
        let matrix = match pic.seq_hdr {
            // SAFETY: the sequence header lives as long as the picture.
            Some(sh) => {
                let sh = unsafe { sh.as_ref() };
                match (sh.mtrx, self.colour) {
                    (2, Some(c)) => Matrix::from_code(c.matrix, c.full_range),
                    (m, _) => Matrix::from_code(m as u16, sh.color_range != 0),
                }
            }
            None => self.colour.map_or(Matrix::from_code(2, false), |c| {
                Matrix::from_code(c.matrix, c.full_range)
            }),
        };
        let p = Picture {
            width: w,
            height: h,
            layout,
            y: yp,
            y_stride: ys as usize,
            u: up,
            v: vp,
            uv_stride: cs.max(0) as usize,
        };
        out(&p, matrix)
    }
}

impl Drop for Av1 {
    fn drop(&mut self) {
        // SAFETY: the context came from `dav1d_open` and is closed once.
        unsafe { dav1d::dav1d_close(Some(NonNull::from(&mut self.ctx))) };
    }
}
