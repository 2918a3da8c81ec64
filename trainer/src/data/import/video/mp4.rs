//! MP4 files (the ISO base media file format), read as far as decoding their first video
//! track needs: its sample table, its codec configuration (`av1C`, `avcC`), its colour
//! description (`colr`) and its edit list. The samples stay in the file and are read one
//! at a time, so a long video decodes in little memory.
//!
//! Written here rather than taken from a crate: it is a few hundred lines, and every count
//! and offset of a damaged file must become an error naming the box, never a panic nor an
//! allocation the size of a corrupt count.

use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The codec of a video track, with what its decoder needs before the first sample.
#[derive(Clone, Debug)]
pub enum Codec {
    /// `av01`: the OBUs of `av1C` (usually the sequence header, which key frames repeat).
    Av1 { config_obus: Vec<u8> },
    /// `avc1`/`avc3`: samples are NAL units, each after its length in `length_size`
    /// bytes; `parameter_sets` are the SPS and PPS of `avcC`.
    H264 {
        length_size: usize,
        parameter_sets: Vec<Vec<u8>>,
    },
}

impl Codec {
    pub fn name(&self) -> &'static str {
        match self {
            Codec::Av1 { .. } => "AV1",
            Codec::H264 { .. } => "H.264",
        }
    }
}

/// The `nclx` colour description of a `colr` box: how YUV becomes RGB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Colour {
    /// The matrix coefficients code of ITU-T H.273 (1: BT.709, 5 and 6: BT.601, ...).
    pub matrix: u16,
    pub full_range: bool,
}

/// One sample (a coded frame) in the file.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub offset: u64,
    pub size: u32,
    /// Presentation time in the track's timescale, before the edit list.
    pub time: i64,
}

/// The first video track of a file.
#[derive(Clone, Debug)]
pub struct Track {
    pub codec: Codec,
    pub width: usize,
    pub height: usize,
    pub timescale: u32,
    /// In decode order.
    pub samples: Vec<Sample>,
    pub colour: Option<Colour>,
    /// Seconds added to each sample's time: the edit list's leading empty edits, less
    /// the media time its first edit starts at.
    pub start: f64,
}

impl Track {
    /// Each sample's presentation time in seconds, in decode order.
    pub fn seconds(&self) -> Vec<f64> {
        let scale = f64::from(self.timescale);
        self.samples
            .iter()
            .map(|s| self.start + s.time as f64 / scale)
            .collect()
    }
}

/// An open MP4 file and its video track.
pub struct Mp4 {
    file: File,
    pub track: Track,
}

impl Mp4 {
    /// Opens `path` and reads its video track's tables.
    pub fn open(path: &Path) -> Result<Mp4> {
        let at = path.display();
        let mut file = File::open(path).with_context(|| format!("cannot read {at}"))?;
        let track = track(&mut file).with_context(|| at.to_string())?;
        Ok(Mp4 { file, track })
    }

    /// The bytes of sample `i` (in decode order), into `buf`.
    pub fn read_sample(&mut self, i: usize, buf: &mut Vec<u8>) -> Result<()> {
        let s = self.track.samples[i];
        buf.resize(s.size as usize, 0);
        self.file
            .seek(SeekFrom::Start(s.offset))
            .and_then(|_| self.file.read_exact(buf))
            .map_err(|e| anyhow!("sample {i}: cannot read its {} bytes ({e})", s.size))
    }
}

/// The boxes a file of the format may start with; anything else is not an MP4 file.
const FIRST_BOXES: [&[u8; 4]; 10] = [
    b"ftyp", b"styp", b"moov", b"mdat", b"free", b"skip", b"wide", b"pdin", b"uuid", b"sidx",
];

fn name(t: &[u8]) -> String {
    String::from_utf8_lossy(t).into_owned()
}

/// Finds `moov` among the top-level boxes and reads the video track it describes.
fn track(file: &mut File) -> Result<Track> {
    let len = file.metadata().context("cannot read")?.len();
    if len == 0 {
        bail!("an empty file, not an MP4 file");
    }
    let (mut pos, mut moov, mut fragmented) = (0u64, None, false);
    while pos < len {
        let mut head = [0u8; 16];
        let avail = (len - pos).min(16) as usize;
        file.seek(SeekFrom::Start(pos))
            .and_then(|_| file.read_exact(&mut head[..avail]))
            .context("cannot read")?;
        let typ: [u8; 4] = head[4..8].try_into().unwrap();
        if pos == 0 && (avail < 8 || !FIRST_BOXES.contains(&&typ)) {
            bail!("not an MP4 file (it does not start with an `ftyp` box or another MP4 box)");
        }
        if avail < 8 {
            bail!("cut short: {avail} bytes at byte {pos} are too few for a box header");
        }
        let (size, header) = match u32::from_be_bytes(head[..4].try_into().unwrap()) {
            0 => (len - pos, 8),
            1 if avail < 16 => bail!(
                "cut short: the header of box `{}` at byte {pos}",
                name(&typ)
            ),
            1 => (u64::from_be_bytes(head[8..16].try_into().unwrap()), 16),
            s => (u64::from(s), 8),
        };
        if size < header {
            bail!(
                "box `{}` at byte {pos} has size {size}, less than its header: a damaged file",
                name(&typ)
            );
        }
        if size > len - pos {
            bail!(
                "cut short: box `{}` at byte {pos} runs to byte {}, past the end of the file \
                 ({len} bytes)",
                name(&typ),
                pos + size
            );
        }
        match &typ {
            b"moov" if moov.is_none() => {
                let mut body = vec![0u8; (size - header) as usize];
                file.seek(SeekFrom::Start(pos + header))
                    .and_then(|_| file.read_exact(&mut body))
                    .context("cannot read")?;
                moov = Some(body);
            }
            b"moof" => fragmented = true,
            _ => {}
        }
        pos += size;
    }
    let Some(moov) = moov else {
        if fragmented {
            bail!("a fragmented MP4 file (`moof` boxes): not read; remux it into one index (ffmpeg -i IN -c copy OUT.mp4)");
        }
        bail!(
            "no `moov` box (the index of the samples): the file is cut short, or its writer \
             did not finish it"
        );
    };
    let track = video_track(&moov)?;
    for (i, s) in track.samples.iter().enumerate() {
        let end = s.offset + u64::from(s.size);
        if end > len {
            bail!(
                "cut short: sample {i} lies at bytes {}..{end}, past the end of the file ({len} \
                 bytes)",
                s.offset
            );
        }
    }
    Ok(track)
}

/// Reads big-endian fields from a box body; running out is an error naming the box.
struct Fields<'a> {
    data: &'a [u8],
    pos: usize,
    path: &'a str,
}

impl<'a> Fields<'a> {
    fn new(data: &'a [u8], path: &'a str) -> Self {
        Fields { data, pos: 0, path }
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            bail!("box `{}` is cut short", self.path);
        };
        let b = &self.data[self.pos..end];
        self.pos = end;
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.bytes(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.bytes(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.bytes(8)?.try_into().unwrap()))
    }
    fn rest(&self) -> usize {
        self.data.len() - self.pos
    }
    /// A table of `count` entries of `size` bytes, checked to fit the box before anything
    /// is allocated for it.
    fn table(&mut self, count: u32, size: usize) -> Result<Fields<'a>> {
        let n = (count as usize).checked_mul(size);
        match n {
            Some(n) if n <= self.rest() => Ok(Fields::new(self.bytes(n)?, self.path)),
            _ => bail!(
                "box `{}` lists {count} entries, more than its {} bytes hold: a damaged file",
                self.path,
                self.data.len()
            ),
        }
    }
}

/// The child boxes of a box body, in order.
fn children<'a>(body: &'a [u8], path: &str) -> Result<Vec<([u8; 4], &'a [u8])>> {
    let mut out = vec![];
    let mut pos = 0usize;
    while pos < body.len() {
        let rest = &body[pos..];
        if rest.len() < 8 {
            bail!("box `{path}` ends in {} stray bytes", rest.len());
        }
        let typ: [u8; 4] = rest[4..8].try_into().unwrap();
        let (size, header) = match u32::from_be_bytes(rest[..4].try_into().unwrap()) {
            0 => (rest.len(), 8),
            1 if rest.len() < 16 => bail!("box `{path}/{}` is cut short", name(&typ)),
            1 => (
                usize::try_from(u64::from_be_bytes(rest[8..16].try_into().unwrap()))
                    .unwrap_or(usize::MAX),
                16,
            ),
            s => (s as usize, 8),
        };
        if size < header || size > rest.len() {
            bail!(
                "box `{path}/{}` has size {size}, where {} bytes are left in its parent: a \
                 damaged file",
                name(&typ),
                rest.len()
            );
        }
        out.push((typ, &rest[header..size]));
        pos += size;
    }
    Ok(out)
}

fn child<'a>(kids: &[([u8; 4], &'a [u8])], typ: &[u8; 4], path: &str) -> Result<&'a [u8]> {
    kids.iter()
        .find(|(t, _)| t == typ)
        .map(|(_, b)| *b)
        .ok_or_else(|| anyhow!("box `{path}` has no `{}` box", name(typ)))
}

/// The timescale of an `mvhd` or `mdhd` box.
fn timescale(body: &[u8], path: &str) -> Result<u32> {
    let mut f = Fields::new(body, path);
    let version = f.u8()?;
    f.bytes(3)?;
    f.bytes(if version == 1 { 16 } else { 8 })?;
    let t = f.u32()?;
    if t == 0 {
        bail!("box `{path}` gives a timescale of 0");
    }
    Ok(t)
}

/// The first track whose handler is `vide`.
fn video_track(moov: &[u8]) -> Result<Track> {
    let kids = children(moov, "moov")?;
    let movie_scale = timescale(child(&kids, b"mvhd", "moov")?, "moov/mvhd")?;
    let mut handlers = vec![];
    for (t, trak) in &kids {
        if t != b"trak" {
            continue;
        }
        let tk = children(trak, "moov/trak")?;
        let mdia = children(child(&tk, b"mdia", "moov/trak")?, "moov/trak/mdia")?;
        let hdlr = child(&mdia, b"hdlr", "moov/trak/mdia")?;
        let handler = Fields::new(hdlr, "moov/trak/mdia/hdlr").bytes(12)?[8..12].to_vec();
        if handler != b"vide" {
            handlers.push(name(&handler));
            continue;
        }
        let edts = tk.iter().find(|(t, _)| t == b"edts").map(|(_, b)| *b);
        return track_of(&mdia, edts, movie_scale);
    }
    if handlers.is_empty() {
        bail!("no track: an MP4 file without video");
    }
    bail!("no video track (tracks: {})", handlers.join(", "));
}

fn track_of(mdia: &[([u8; 4], &[u8])], edts: Option<&[u8]>, movie_scale: u32) -> Result<Track> {
    let scale = timescale(child(mdia, b"mdhd", "mdia")?, "mdia/mdhd")?;
    let minf = children(child(mdia, b"minf", "mdia")?, "mdia/minf")?;
    const STBL: &str = "mdia/minf/stbl";
    let stbl = children(child(&minf, b"stbl", "mdia/minf")?, STBL)?;
    let (codec, width, height, colour) = sample_entry(child(&stbl, b"stsd", STBL)?)?;

    // Sample sizes.
    let path = "mdia/minf/stbl/stsz";
    let Ok(stsz) = child(&stbl, b"stsz", STBL) else {
        if stbl.iter().any(|(t, _)| t == b"stz2") {
            bail!("compact sample sizes (`stz2`) are not read");
        }
        bail!("box `{STBL}` has no `stsz` box");
    };
    let mut f = Fields::new(stsz, path);
    f.bytes(4)?;
    let (fixed, count) = (f.u32()?, f.u32()?);
    let mut sizes = if fixed == 0 {
        Some(f.table(count, 4)?)
    } else {
        None
    };

    // Decode times.
    let path = "mdia/minf/stbl/stts";
    let mut f = Fields::new(child(&stbl, b"stts", STBL)?, path);
    f.bytes(4)?;
    let n = f.u32()?;
    let mut stts = f.table(n, 8)?;
    let mut runs = vec![];
    let mut total = 0u64;
    for _ in 0..n {
        let (c, d) = (stts.u32()?, stts.u32()?);
        total += u64::from(c);
        runs.push((c, d));
    }
    if total != u64::from(count) {
        bail!("box `{path}` gives times to {total} samples, where `stsz` lists {count}");
    }

    // Composition offsets (frames shown in another order than decoded).
    let mut offsets = vec![];
    if let Some((_, ctts)) = stbl.iter().find(|(t, _)| t == b"ctts") {
        let path = "mdia/minf/stbl/ctts";
        let mut f = Fields::new(ctts, path);
        f.bytes(4)?;
        let n = f.u32()?;
        let mut t = f.table(n, 8)?;
        let mut total = 0u64;
        for _ in 0..n {
            // Signed in version 1; writers put negative offsets in version 0 too, which
            // readers take as signed alike.
            let (c, o) = (t.u32()?, t.u32()? as i32);
            total += u64::from(c);
            offsets.push((c, i64::from(o)));
        }
        if total != u64::from(count) {
            bail!("box `{path}` gives offsets to {total} samples, where `stsz` lists {count}");
        }
    }

    // Chunk offsets.
    let chunks: Vec<u64> = if let Ok(stco) = child(&stbl, b"stco", STBL) {
        let mut f = Fields::new(stco, "mdia/minf/stbl/stco");
        f.bytes(4)?;
        let n = f.u32()?;
        let mut t = f.table(n, 4)?;
        (0..n)
            .map(|_| t.u32().map(u64::from))
            .collect::<Result<_>>()?
    } else {
        let Ok(co64) = child(&stbl, b"co64", STBL) else {
            bail!("box `{STBL}` has neither `stco` nor `co64` (chunk offsets)");
        };
        let mut f = Fields::new(co64, "mdia/minf/stbl/co64");
        f.bytes(4)?;
        let n = f.u32()?;
        let mut t = f.table(n, 8)?;
        (0..n).map(|_| t.u64()).collect::<Result<_>>()?
    };

    // Samples to chunks.
    let path = "mdia/minf/stbl/stsc";
    let mut f = Fields::new(child(&stbl, b"stsc", STBL)?, path);
    f.bytes(4)?;
    let n = f.u32()?;
    let mut t = f.table(n, 12)?;
    let mut stsc = vec![];
    for _ in 0..n {
        let (first, per) = (t.u32()?, t.u32()?);
        t.u32()?;
        stsc.push((first, per));
    }

    let mut samples: Vec<Sample> = vec![];
    let (mut run, mut left) = (0usize, runs.first().map_or(0, |r| r.0));
    let (mut orun, mut oleft) = (0usize, offsets.first().map_or(0, |r: &(u32, i64)| r.0));
    let mut dts = 0i64;
    for (k, &(first, per)) in stsc.iter().enumerate() {
        let last = match stsc.get(k + 1) {
            Some(&(next, _)) if next > first => next - 1,
            Some(_) => bail!("box `{path}`: its first chunks do not increase"),
            None => chunks.len() as u32,
        };
        if first == 0 || last as usize > chunks.len() {
            bail!(
                "box `{path}` names chunk {}, where `stco` lists {}",
                if first == 0 { first } else { last },
                chunks.len()
            );
        }
        for c in first..=last {
            let mut offset = chunks[c as usize - 1];
            for _ in 0..per {
                if samples.len() == count as usize {
                    bail!("box `{path}` places more samples than `stsz` lists ({count})");
                }
                let size = match &mut sizes {
                    Some(s) => s.u32()?,
                    None => fixed,
                };
                while left == 0 {
                    run += 1;
                    left = runs[run].0;
                }
                left -= 1;
                let mut time = dts;
                if !offsets.is_empty() {
                    while oleft == 0 {
                        orun += 1;
                        oleft = offsets[orun].0;
                    }
                    oleft -= 1;
                    time = time.saturating_add(offsets[orun].1);
                }
                samples.push(Sample { offset, size, time });
                dts = dts.saturating_add(i64::from(runs[run].1));
                offset = offset.saturating_add(u64::from(size));
            }
        }
    }
    if samples.len() != count as usize {
        bail!(
            "box `{path}` places {} samples, where `stsz` lists {count}",
            samples.len()
        );
    }
    if samples.is_empty() {
        bail!("the video track has no frames");
    }
    let start = match edts {
        Some(e) => edit_start(e, scale, movie_scale)?,
        None => 0.0,
    };
    Ok(Track {
        codec,
        width,
        height,
        timescale: scale,
        samples,
        colour,
        start,
    })
}

/// Where the edit list places media time 0, in seconds: after its leading empty edits,
/// less the media time of its first edit (ffmpeg's reading of a simple edit list).
fn edit_start(edts: &[u8], scale: u32, movie_scale: u32) -> Result<f64> {
    let kids = children(edts, "edts")?;
    let Some((_, elst)) = kids.iter().find(|(t, _)| t == b"elst") else {
        return Ok(0.0);
    };
    let mut f = Fields::new(elst, "edts/elst");
    let version = f.u8()?;
    f.bytes(3)?;
    let n = f.u32()?;
    let mut t = f.table(n, if version == 1 { 20 } else { 12 })?;
    let mut delay = 0.0;
    for _ in 0..n {
        let (duration, media_time) = if version == 1 {
            (t.u64()?, t.u64()? as i64)
        } else {
            (u64::from(t.u32()?), i64::from(t.u32()? as i32))
        };
        t.u32()?;
        if media_time == -1 {
            delay += duration as f64 / f64::from(movie_scale);
            continue;
        }
        return Ok(delay - media_time as f64 / f64::from(scale));
    }
    Ok(delay)
}

/// The codec, size and colour description of the one sample entry of `stsd`.
fn sample_entry(stsd: &[u8]) -> Result<(Codec, usize, usize, Option<Colour>)> {
    let path = "mdia/minf/stbl/stsd";
    let mut f = Fields::new(stsd, path);
    f.bytes(4)?;
    let n = f.u32()?;
    if n != 1 {
        bail!("box `{path}` holds {n} sample descriptions; laq reads tracks of one");
    }
    let entries = children(&stsd[8..], path)?;
    let Some(&(fmt, body)) = entries.first() else {
        bail!("box `{path}` holds no sample description");
    };
    let entry_path = format!("{path}/{}", name(&fmt));
    let mut f = Fields::new(body, &entry_path);
    // A VisualSampleEntry: 24 reserved and predefined bytes, the size, then 50 more.
    f.bytes(24)?;
    let (width, height) = (usize::from(f.u16()?), usize::from(f.u16()?));
    f.bytes(50)?;
    if width == 0 || height == 0 {
        bail!("box `{entry_path}` gives a size of {width}x{height}");
    }
    let kids = children(&body[78..], &entry_path)?;
    let colour = match kids.iter().find(|(t, _)| t == b"colr") {
        Some((_, c)) => colour(c, &entry_path)?,
        None => None,
    };
    let codec = match &fmt {
        b"av01" => {
            let config = child(&kids, b"av1C", &entry_path)?;
            let p = format!("{entry_path}/av1C");
            let mut f = Fields::new(config, &p);
            let head = f.bytes(4)?;
            if head[0] != 0x81 {
                bail!("box `{p}` is of version {}, expected 1", head[0] & 0x7f);
            }
            if head[2] & 0x40 != 0 {
                bail!(
                    "the video is AV1 of {} bits per sample; laq decodes 8-bit video \
                     (LeRobot's default)",
                    if head[2] & 0x20 != 0 { 12 } else { 10 }
                );
            }
            Codec::Av1 {
                config_obus: config[4..].to_vec(),
            }
        }
        b"avc1" | b"avc3" => {
            let p = format!("{entry_path}/avcC");
            let mut f = Fields::new(child(&kids, b"avcC", &entry_path)?, &p);
            f.bytes(4)?;
            let length_size = usize::from(f.u8()? & 3) + 1;
            if length_size == 3 {
                bail!("box `{p}` gives NAL unit lengths of 3 bytes, which H.264 does not allow");
            }
            let mut parameter_sets = vec![];
            let sps = f.u8()? & 0x1f;
            for _ in 0..sps {
                let n = usize::from(f.u16()?);
                parameter_sets.push(f.bytes(n)?.to_vec());
            }
            let pps = f.u8()?;
            for _ in 0..pps {
                let n = usize::from(f.u16()?);
                parameter_sets.push(f.bytes(n)?.to_vec());
            }
            Codec::H264 {
                length_size,
                parameter_sets,
            }
        }
        b"hvc1" | b"hev1" => bail!(
            "the video is H.265 (`{}`); laq decodes AV1 and H.264 (re-encode it, for \
             example with ffmpeg -c:v libsvtav1)",
            name(&fmt)
        ),
        b"encv" => bail!("the video is encrypted (`encv`)"),
        other => bail!(
            "the video's codec is `{}`; laq decodes AV1 (`av01`) and H.264 (`avc1`)",
            name(other)
        ),
    };
    Ok((codec, width, height, colour))
}

/// The colour description of a `colr` box, if it is of the `nclx` (or QuickTime `nclc`)
/// kind; ICC profiles say nothing about the YUV matrix.
fn colour(body: &[u8], entry: &str) -> Result<Option<Colour>> {
    let p = format!("{entry}/colr");
    let mut f = Fields::new(body, &p);
    let kind = f.bytes(4)?;
    if kind != b"nclx" && kind != b"nclc" {
        return Ok(None);
    }
    f.bytes(4)?;
    let matrix = f.u16()?;
    let full_range = kind == b"nclx" && f.u8()? & 0x80 != 0;
    Ok(Some(Colour { matrix, full_range }))
}
