//! Array files: `.npz` (numpy, read array by array) and `.safetensors` (read whole), written
//! atomically.

use super::array::{DType, RawArray};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

enum Format {
    Npz,
    Safetensors,
}

fn format_of(path: &Path) -> Result<Format> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("npz") => Ok(Format::Npz),
        Some("safetensors") => Ok(Format::Safetensors),
        _ => bail!(
            "{}: unknown file type; use a `.npz` or `.safetensors` file",
            path.display()
        ),
    }
}

/// Reads every array of a `.npz` or `.safetensors` file.
pub fn read_arrays(path: &Path) -> Result<BTreeMap<String, RawArray>> {
    let cannot_read = || format!("cannot read {}", path.display());
    let res = match format_of(path)? {
        // Read from the file, array by array: holding the whole file as well as its
        // arrays would take twice the memory of the data.
        Format::Npz => read_npz(std::io::BufReader::new(
            std::fs::File::open(path).with_context(cannot_read)?,
        )),
        Format::Safetensors => {
            // Read whole, then copied array by array: twice the file at the peak.
            let len = std::fs::metadata(path).with_context(cannot_read)?.len();
            match crate::util::memory::ensure_fits(
                "the file",
                "a .safetensors file, read whole and then copied",
                len.saturating_mul(2),
            ) {
                Ok(()) => read_safetensors(&std::fs::read(path).with_context(cannot_read)?),
                Err(e) => Err(e),
            }
        }
    };
    res.with_context(|| format!("cannot read {}", path.display()))
}

/// Writes arrays atomically (temporary file, then rename).
pub fn write_arrays(path: &Path, arrays: &BTreeMap<String, RawArray>) -> Result<()> {
    let bytes = match format_of(path)? {
        Format::Npz => npz_bytes(arrays)?,
        Format::Safetensors => {
            let entries: Vec<_> = arrays
                .iter()
                .map(|(k, a)| crate::util::safetensors::Entry {
                    name: k.clone(),
                    dtype: st_dtype(a.dtype),
                    shape: a.shape.clone(),
                    bytes: (&a.bytes[..]).into(),
                })
                .collect();
            crate::util::safetensors::to_bytes(&entries, &BTreeMap::new())?
        }
    };
    crate::util::io::write_atomic(path, &bytes)
}

fn st_dtype(d: DType) -> safetensors::Dtype {
    use safetensors::Dtype as S;
    match d {
        DType::Bool => S::BOOL,
        DType::U8 => S::U8,
        DType::I8 => S::I8,
        DType::U16 => S::U16,
        DType::I16 => S::I16,
        DType::U32 => S::U32,
        DType::I32 => S::I32,
        DType::U64 => S::U64,
        DType::I64 => S::I64,
        DType::F16 => S::F16,
        DType::F32 => S::F32,
        DType::F64 => S::F64,
    }
}

fn read_safetensors(bytes: &[u8]) -> Result<BTreeMap<String, RawArray>> {
    use safetensors::Dtype as S;
    let st =
        safetensors::SafeTensors::deserialize(bytes).context("not a valid safetensors file")?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let dtype = match view.dtype() {
            S::BOOL => DType::Bool,
            S::U8 => DType::U8,
            S::I8 => DType::I8,
            S::U16 => DType::U16,
            S::I16 => DType::I16,
            S::U32 => DType::U32,
            S::I32 => DType::I32,
            S::U64 => DType::U64,
            S::I64 => DType::I64,
            S::F16 => DType::F16,
            S::F32 => DType::F32,
            S::F64 => DType::F64,
            other => bail!("key `{name}`: dtype {other:?} not supported"),
        };
        out.insert(
            name,
            RawArray {
                dtype,
                shape: view.shape().to_vec(),
                bytes: view.data().to_vec(),
            },
        );
    }
    Ok(out)
}

fn read_npz<R: Read + std::io::Seek>(reader: R) -> Result<BTreeMap<String, RawArray>> {
    let mut zip = zip::ZipArchive::new(reader).context("not a valid .npz (zip) file")?;
    if zip.has_duplicate_names() {
        bail!("the archive holds a name more than once; which one is meant cannot be told");
    }
    // All at once first, from the archive's directory: refused before reading, rather
    // than after the arrays that fit.
    let mut total = 0u64;
    for i in 0..zip.len() {
        total = total.saturating_add(zip.by_index_raw(i)?.size());
    }
    crate::util::memory::ensure_fits(
        &format!("the archive's {} arrays", zip.len()),
        "uncompressed",
        total,
    )?;
    let mut out = BTreeMap::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i)?;
        let name = f.name()?.to_string();
        crate::util::memory::ensure_fits(
            &format!("`{}`", name.strip_suffix(".npy").unwrap_or(&name)),
            "an array of the archive, uncompressed",
            f.size(),
        )?;
        // The size is the archive's own claim: a corrupt one may ask for more memory than
        // there is, which is an error here rather than an abort.
        let mut buf = Vec::new();
        usize::try_from(f.size())
            .ok()
            .and_then(|n| buf.try_reserve_exact(n).ok())
            .with_context(|| {
                format!(
                    "`{name}` claims {} bytes, more than this machine can hold",
                    f.size()
                )
            })?;
        f.read_to_end(&mut buf)
            .with_context(|| format!("cannot decompress `{name}`"))?;
        let key = name.strip_suffix(".npy").unwrap_or(&name).to_string();
        let arr = npy_of(buf).with_context(|| format!("key `{key}`"))?;
        // An archive may hold a name twice; which one is meant cannot be told.
        if out.contains_key(&key) {
            bail!("key `{key}` appears more than once in the archive");
        }
        out.insert(key, arr);
    }
    Ok(out)
}

/// Parses one `.npy` payload (format versions 1-3, little-endian or single-byte dtypes, C order).
pub fn parse_npy(buf: &[u8]) -> Result<RawArray> {
    let (dtype, shape, start) = npy_header(buf)?;
    sized(RawArray {
        dtype,
        shape,
        bytes: buf[start..].to_vec(),
    })
}

/// [`parse_npy`] of a payload it may keep: the values stay where they are read, with no
/// second copy of the array.
fn npy_of(mut buf: Vec<u8>) -> Result<RawArray> {
    let (dtype, shape, start) = npy_header(&buf)?;
    buf.drain(..start);
    sized(RawArray {
        dtype,
        shape,
        bytes: buf,
    })
}

/// The array itself, or an error where its bytes do not fill its shape.
fn sized(arr: RawArray) -> Result<RawArray> {
    match arr.size_mismatch() {
        Some(why) => bail!("{why}"),
        None => Ok(arr),
    }
}

/// The dtype, the shape and where the values start, of a `.npy` payload.
fn npy_header(buf: &[u8]) -> Result<(DType, Vec<usize>, usize)> {
    if buf.len() < 10 || &buf[..6] != b"\x93NUMPY" {
        bail!("not a .npy array (bad magic)");
    }
    let major = buf[6];
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([buf[8], buf[9]]) as usize, 10),
        2 | 3 => {
            if buf.len() < 12 {
                bail!("truncated .npy header");
            }
            (
                u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize,
                12,
            )
        }
        v => bail!(".npy format version {v} not supported"),
    };
    let header = buf
        .get(start..start + hlen)
        .context("truncated .npy header")?;
    let header = std::str::from_utf8(header).context(".npy header is not text")?;
    let field = |name: &str| -> Result<&str> {
        let pat = format!("'{name}':");
        let i = header
            .find(&pat)
            .with_context(|| format!(".npy header lacks `{name}`"))?;
        Ok(header[i + pat.len()..].trim_start())
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|s| s.split('\'').next())
        .context(".npy header: bad descr")?;
    if field("fortran_order")?.starts_with("True") {
        bail!("Fortran-ordered arrays are not supported; save with C order");
    }
    let shape_txt = field("shape")?;
    let shape_txt = shape_txt
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .context(".npy header: bad shape")?;
    let shape = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .with_context(|| format!(".npy header: bad dimension `{s}`"))
        })
        .collect::<Result<Vec<_>>>()?;
    let (endian, code) = descr.split_at(1);
    if endian == ">" && !matches!(code, "u1" | "i1" | "b1") {
        bail!("big-endian dtype `{descr}` not supported");
    }
    let dtype = match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "u2" => DType::U16,
        "i2" => DType::I16,
        "u4" => DType::U32,
        "i4" => DType::I32,
        "u8" => DType::U64,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => bail!("dtype `{descr}` not supported"),
    };
    Ok((dtype, shape, start + hlen))
}

pub fn npy_bytes(a: &RawArray) -> Vec<u8> {
    let descr = match a.dtype {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::U16 => "<u2",
        DType::I16 => "<i2",
        DType::U32 => "<u4",
        DType::I32 => "<i4",
        DType::U64 => "<u8",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
    };
    let shape = match a.shape.len() {
        1 => format!("({},)", a.shape[0]),
        _ => format!(
            "({})",
            a.shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // numpy pads the header so the data starts on a 64-byte boundary.
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + a.bytes.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&a.bytes);
    out
}

fn npz_bytes(arrays: &BTreeMap<String, RawArray>) -> Result<Vec<u8>> {
    let mut cursor = std::io::Cursor::new(Vec::new());
    {
        let mut zw = zip::ZipWriter::new(&mut cursor);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(true);
        for (k, a) in arrays {
            zw.start_file(format!("{k}.npy"), opts)?;
            zw.write_all(&npy_bytes(a))?;
        }
        zw.finish()?;
    }
    Ok(cursor.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header whose shape's product overflows (here to 0, matching no bytes) is refused,
    /// in a `.npy` and in an archive, naming the key.
    #[test]
    fn shapes_beyond_addressing_are_refused() {
        let huge = RawArray {
            dtype: DType::U8,
            shape: vec![1 << 62, 8],
            bytes: vec![],
        };
        let e = parse_npy(&npy_bytes(&huge)).unwrap_err().to_string();
        assert!(e.contains("more values than can be addressed"), "{e}");
        let arrays = BTreeMap::from([("observations".to_string(), huge)]);
        let bytes = npz_bytes(&arrays).unwrap();
        let e = format!("{:#}", read_npz(std::io::Cursor::new(bytes)).unwrap_err());
        assert!(
            e.contains("`observations`") && e.contains("can be addressed"),
            "{e}"
        );
    }

    /// A key an archive holds twice, by one name or as `rewards.npy` and `rewards`, is
    /// refused: which one is meant cannot be told.
    #[test]
    fn a_key_held_twice_is_refused() {
        let a = RawArray::from_f32(vec![2], &[0.0, 1.0]);
        let mut cursor = std::io::Cursor::new(Vec::new());
        {
            let mut zw = zip::ZipWriter::new(&mut cursor);
            let opts = zip::write::SimpleFileOptions::default();
            for name in ["rewards.npy", "rewards"] {
                zw.start_file(name, opts).unwrap();
                zw.write_all(&npy_bytes(&a)).unwrap();
            }
            zw.finish().unwrap();
        }
        let e = read_npz(std::io::Cursor::new(cursor.get_ref()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`rewards`") && e.contains("more than once"),
            "{e}"
        );
    }
}
