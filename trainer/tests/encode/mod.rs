#![allow(dead_code)]
//! Small videos for the tests: frames of a coloured square on grey, encoded as AV1 (rav1e)
//! or H.264 (openh264) and written into MP4 files by a minimal muxer.

/// The square's colour and the background's.
pub const SQUARE: [u8; 3] = [210, 60, 40];
pub const BACKGROUND: [u8; 3] = [60, 60, 60];
/// The square's side in pixels.
pub const SIDE: usize = 8;

/// An RGB frame `h` x `w`, interleaved, with the square's top left corner at (`x`, `y`).
pub fn scene(h: usize, w: usize, x: usize, y: usize) -> Vec<u8> {
    let mut rgb = Vec::with_capacity(h * w * 3);
    for r in 0..h {
        for c in 0..w {
            let inside = (x..x + SIDE).contains(&c) && (y..y + SIDE).contains(&r);
            rgb.extend_from_slice(if inside { &SQUARE } else { &BACKGROUND });
        }
    }
    rgb
}

/// Where the square lies in a stored frame `[3, H, W]`: the centre of the pixels closer to
/// its colour than to the background's, and their mean colour.
pub fn find_square(frame: &[u8], h: usize, w: usize) -> Option<((f64, f64), [f64; 3])> {
    let (mut n, mut sx, mut sy, mut sum) = (0.0, 0.0, 0.0, [0.0; 3]);
    for r in 0..h {
        for c in 0..w {
            let px: Vec<f64> = (0..3)
                .map(|k| f64::from(frame[k * h * w + r * w + c]))
                .collect();
            let d = |t: [u8; 3]| -> f64 { (0..3).map(|k| (px[k] - f64::from(t[k])).powi(2)).sum() };
            if d(SQUARE) < d(BACKGROUND) {
                n += 1.0;
                sx += c as f64;
                sy += r as f64;
                for k in 0..3 {
                    sum[k] += px[k];
                }
            }
        }
    }
    (n > 0.0).then(|| ((sx / n, sy / n), sum.map(|s| s / n)))
}

/// BT.601 limited range 4:2:0 planes of an interleaved RGB frame.
fn yuv420(rgb: &[u8], h: usize, w: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let px = |r: usize, c: usize| {
        let p = &rgb[(r * w + c) * 3..];
        (f64::from(p[0]), f64::from(p[1]), f64::from(p[2]))
    };
    let mut y = vec![0; h * w];
    for r in 0..h {
        for c in 0..w {
            let (rr, g, b) = px(r, c);
            y[r * w + c] = (16.0 + 0.257 * rr + 0.504 * g + 0.098 * b).round() as u8;
        }
    }
    let (ch, cw) = (h.div_ceil(2), w.div_ceil(2));
    let (mut u, mut v) = (vec![0; ch * cw], vec![0; ch * cw]);
    for r in 0..ch {
        for c in 0..cw {
            let (rr, g, b) = px((2 * r).min(h - 1), (2 * c).min(w - 1));
            u[r * cw + c] = (128.0 - 0.148 * rr - 0.291 * g + 0.439 * b).round() as u8;
            v[r * cw + c] = (128.0 + 0.439 * rr - 0.368 * g - 0.071 * b).round() as u8;
        }
    }
    (y, u, v)
}

/// A coded track: its samples and what its sample entry carries.
pub struct Coded {
    pub samples: Vec<Vec<u8>>,
    /// `av01` or `avc1`.
    pub format: [u8; 4],
    /// The `av1C` or `avcC` box body.
    pub config: Vec<u8>,
    pub h: usize,
    pub w: usize,
}

/// AV1 by rav1e at its fastest, one temporal unit per frame.
pub fn av1(frames: &[Vec<u8>], h: usize, w: usize) -> Coded {
    let mut enc = rav1e::EncoderConfig::with_speed_preset(10);
    enc.width = w;
    enc.height = h;
    enc.low_latency = true;
    enc.min_key_frame_interval = 0;
    enc.max_key_frame_interval = 30;
    let cfg = rav1e::Config::new()
        .with_encoder_config(enc)
        .with_threads(1);
    let mut ctx: rav1e::Context<u8> = cfg.new_context().unwrap();
    let mut samples = vec![];
    for rgb in frames {
        let (y, u, v) = yuv420(rgb, h, w);
        let mut f = ctx.new_frame();
        f.planes[0].copy_from_raw_u8(&y, w, 1);
        f.planes[1].copy_from_raw_u8(&u, w.div_ceil(2), 1);
        f.planes[2].copy_from_raw_u8(&v, w.div_ceil(2), 1);
        ctx.send_frame(f).unwrap();
        while let Ok(p) = ctx.receive_packet() {
            samples.push(p.data);
        }
    }
    ctx.flush();
    loop {
        match ctx.receive_packet() {
            Ok(p) => samples.push(p.data),
            Err(rav1e::EncoderStatus::Encoded) => {}
            Err(rav1e::EncoderStatus::LimitReached) => break,
            Err(e) => panic!("rav1e: {e:?}"),
        }
    }
    assert_eq!(samples.len(), frames.len());
    Coded {
        samples,
        format: *b"av01",
        config: ctx.container_sequence_header(),
        h,
        w,
    }
}

/// The NAL units of an Annex B stream.
fn nal_units(stream: &[u8]) -> Vec<&[u8]> {
    let mut starts = vec![];
    let mut i = 0;
    while i + 3 <= stream.len() {
        if stream[i..i + 3] == [0, 0, 1] {
            starts.push(i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    let mut out = vec![];
    for (k, &s) in starts.iter().enumerate() {
        let mut end = starts.get(k + 1).map_or(stream.len(), |&n| n - 3);
        while end > s && stream[end - 1] == 0 {
            end -= 1;
        }
        out.push(&stream[s..end]);
    }
    out
}

/// H.264 by openh264 (constrained baseline), as MP4 wants it: NAL units after their
/// 4-byte lengths, the SPS and PPS in `avcC`.
pub fn h264(frames: &[Vec<u8>], h: usize, w: usize) -> Coded {
    use openh264::encoder::{Encoder, EncoderConfig};
    use openh264::formats::YUVBuffer;
    let api = openh264::OpenH264API::from_source();
    let mut enc = Encoder::with_api_config(api, EncoderConfig::new()).unwrap();
    let (mut sps, mut pps, mut samples) = (None, None, vec![]);
    for rgb in frames {
        let (mut y, u, v) = yuv420(rgb, h, w);
        y.extend(u);
        y.extend(v);
        let stream = enc.encode(&YUVBuffer::from_vec(y, w, h)).unwrap().to_vec();
        let mut sample = vec![];
        for nal in nal_units(&stream) {
            match nal[0] & 0x1f {
                7 => sps = Some(nal.to_vec()),
                8 => pps = Some(nal.to_vec()),
                _ => {
                    sample.extend_from_slice(&(nal.len() as u32).to_be_bytes());
                    sample.extend_from_slice(nal);
                }
            }
        }
        samples.push(sample);
    }
    let (sps, pps) = (sps.unwrap(), pps.unwrap());
    let mut config = vec![1, sps[1], sps[2], sps[3], 0xff, 0xe1];
    config.extend_from_slice(&(sps.len() as u16).to_be_bytes());
    config.extend_from_slice(&sps);
    config.push(1);
    config.extend_from_slice(&(pps.len() as u16).to_be_bytes());
    config.extend_from_slice(&pps);
    Coded {
        samples,
        format: *b"avc1",
        config,
        h,
        w,
    }
}

fn mp4_box(typ: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut b = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    b.extend_from_slice(typ);
    b.extend_from_slice(body);
    b
}

fn full_box(typ: &[u8; 4], version_flags: u32, body: &[u8]) -> Vec<u8> {
    let mut b = version_flags.to_be_bytes().to_vec();
    b.extend_from_slice(body);
    mp4_box(typ, &b)
}

const UNITY: [u32; 9] = [0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x4000_0000];

/// An MP4 file of one video track at `fps` frames per second, its index (`moov`) before
/// the samples, as `ffmpeg -movflags +faststart` writes.
pub fn mp4(c: &Coded, fps: u32) -> Vec<u8> {
    let scale = 90_000u32;
    let delta = scale / fps;
    let n = c.samples.len() as u32;
    let be = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_be_bytes());
    let ftyp = mp4_box(b"ftyp", b"isom\x00\x00\x02\x00isomiso2mp41");
    let moov = |data_offset: u32| {
        let mut mvhd = vec![];
        for x in [0, 0, 1000, n * 1000 / fps, 0x10000] {
            be(&mut mvhd, x);
        }
        mvhd.extend_from_slice(&[1, 0, 0, 0]);
        mvhd.extend_from_slice(&[0; 8]);
        for x in UNITY {
            be(&mut mvhd, x);
        }
        mvhd.extend_from_slice(&[0; 24]);
        be(&mut mvhd, 2);
        let mut tkhd = vec![];
        for x in [0, 0, 1, 0, n * 1000 / fps, 0, 0, 0, 0] {
            be(&mut tkhd, x);
        }
        for x in UNITY {
            be(&mut tkhd, x);
        }
        be(&mut tkhd, (c.w as u32) << 16);
        be(&mut tkhd, (c.h as u32) << 16);
        let mut mdhd = vec![];
        for x in [0, 0, scale, n * delta] {
            be(&mut mdhd, x);
        }
        mdhd.extend_from_slice(&[0x55, 0xc4, 0, 0]);
        let mut hdlr = vec![0; 4];
        hdlr.extend_from_slice(b"vide");
        hdlr.extend_from_slice(&[0; 12]);
        hdlr.extend_from_slice(b"VideoHandler\0");
        let mut entry = vec![0, 0, 0, 0, 0, 0, 0, 1];
        entry.extend_from_slice(&[0; 16]);
        entry.extend_from_slice(&(c.w as u16).to_be_bytes());
        entry.extend_from_slice(&(c.h as u16).to_be_bytes());
        for x in [0x48_0000, 0x48_0000, 0] {
            be(&mut entry, x);
        }
        entry.extend_from_slice(&[0, 1]);
        entry.extend_from_slice(&[0; 32]);
        entry.extend_from_slice(&[0, 0x18, 0xff, 0xff]);
        let config_type = if &c.format == b"av01" {
            b"av1C"
        } else {
            b"avcC"
        };
        entry.extend(mp4_box(config_type, &c.config));
        let mut stsd = vec![];
        be(&mut stsd, 1);
        stsd.extend(mp4_box(&c.format, &entry));
        let mut stts = vec![];
        for x in [1, n, delta] {
            be(&mut stts, x);
        }
        let mut stsc = vec![];
        for x in [1, 1, n, 1] {
            be(&mut stsc, x);
        }
        let mut stsz = vec![];
        for x in [0, n] {
            be(&mut stsz, x);
        }
        for s in &c.samples {
            be(&mut stsz, s.len() as u32);
        }
        let mut stco = vec![];
        for x in [1, data_offset] {
            be(&mut stco, x);
        }
        let stbl = [
            full_box(b"stsd", 0, &stsd),
            full_box(b"stts", 0, &stts),
            full_box(b"stsc", 0, &stsc),
            full_box(b"stsz", 0, &stsz),
            full_box(b"stco", 0, &stco),
        ]
        .concat();
        let dref = full_box(
            b"dref",
            0,
            &[&1u32.to_be_bytes()[..], &full_box(b"url ", 1, &[])].concat(),
        );
        let minf = [
            full_box(b"vmhd", 1, &[0; 8]),
            mp4_box(b"dinf", &dref),
            mp4_box(b"stbl", &stbl),
        ]
        .concat();
        let mdia = [
            full_box(b"mdhd", 0, &mdhd),
            full_box(b"hdlr", 0, &hdlr),
            mp4_box(b"minf", &minf),
        ]
        .concat();
        let trak = [full_box(b"tkhd", 3, &tkhd), mp4_box(b"mdia", &mdia)].concat();
        mp4_box(
            b"moov",
            &[full_box(b"mvhd", 0, &mvhd), mp4_box(b"trak", &trak)].concat(),
        )
    };
    let len = moov(0).len();
    let offset = (ftyp.len() + len + 8) as u32;
    let mdat = mp4_box(b"mdat", &c.samples.concat());
    [ftyp, moov(offset), mdat].concat()
}
