//! h5py's LZF filter (HDF5 filter id 32000), read without h5py: the compression h5py
//! offers beside gzip, and the one it recommends for speed, so logs written with
//! `compression="lzf"` load as they are.
//!
//! A stream is a sequence of runs, each opened by a control byte: below 32, a literal
//! run of `ctrl + 1` bytes follows; otherwise a back-reference copies
//! `(ctrl >> 5) + 2` bytes (plus a length byte when that field is 7) from
//! `((ctrl & 31) << 8) + offset byte + 1` bytes back in the output. The format of
//! liblzf's `lzf_d.c`, which h5py's filter calls.

use hdf5_reader::error::Error as H5Error;
use hdf5_reader::FilterRegistry;

/// h5py's registered id of its LZF filter.
const FILTER_LZF: u16 = 32000;

/// The filters `hdf5-reader` knows, and LZF.
pub(super) fn registry() -> FilterRegistry {
    let mut r = FilterRegistry::new();
    r.register(
        FILTER_LZF,
        Box::new(|filter, data, _| {
            // h5py stores the chunk's size in bytes third (versions before 4 stored none).
            let size = filter.client_data.get(2).map_or(0, |&s| s as usize);
            decompress(data, size).map_err(|e| H5Error::DecompressionError(format!("LZF: {e}")))
        }),
    );
    r
}

/// The bytes an LZF stream holds; `size` is the chunk's length in bytes, which the
/// stream may not exceed (0 when the file does not record it). A stream that refers
/// before its start, ends inside a run or holds more than its chunk is an error, not a
/// panic.
fn decompress(input: &[u8], size: usize) -> Result<Vec<u8>, String> {
    // At most 264 bytes from 3 of input, so the hint cannot ask for a huge allocation.
    let mut out = Vec::with_capacity(size.min(input.len().saturating_mul(88)));
    let mut i = 0;
    let take = |i: &mut usize| -> Result<u8, String> {
        let b = *input
            .get(*i)
            .ok_or_else(|| format!("stream ends inside a run at byte {}", input.len()))?;
        *i += 1;
        Ok(b)
    };
    while i < input.len() {
        let ctrl = take(&mut i)? as usize;
        if ctrl < 32 {
            let run = input
                .get(i..i + ctrl + 1)
                .ok_or_else(|| format!("literal run of {} bytes past the end", ctrl + 1))?;
            out.extend_from_slice(run);
            i += ctrl + 1;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += take(&mut i)? as usize;
            }
            let back = ((ctrl & 31) << 8) + take(&mut i)? as usize + 1;
            let start = out.len().checked_sub(back).ok_or_else(|| {
                format!("reference {back} bytes back at output byte {}", out.len())
            })?;
            // Byte by byte: the source may overlap what this copy writes.
            for k in start..start + len + 2 {
                out.push(out[k]);
            }
        }
        if size > 0 && out.len() > size {
            return Err(format!("more than the chunk's {size} bytes"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_references_decode() {
        // A literal run of 3, then 4 bytes from 3 back (the copy overlaps itself).
        let s = [2, b'a', b'b', b'c', 2 << 5, 2];
        assert_eq!(decompress(&s, 0).unwrap(), b"abcabca");
        // The longest short reference (length field 6: 8 bytes) and a long one (field 7
        // plus a length byte of 10: 19 bytes), both 1 back.
        let s = [0, b'x', 6 << 5, 0, 7 << 5, 10, 0];
        assert_eq!(decompress(&s, 28).unwrap(), vec![b'x'; 1 + 8 + 19]);
        // A far reference takes the control byte's low bits: 256 + 4 + 1 back, from a
        // start of nine literal runs of 0..32.
        let mut s = [31]
            .into_iter()
            .chain(0..32u8)
            .collect::<Vec<_>>()
            .repeat(9);
        s.extend([1 << 5 | 1, 4]);
        let out = decompress(&s, 0).unwrap();
        let from = 288 - 261;
        assert_eq!(out.len(), 291);
        assert_eq!(
            out[288..],
            [
                from as u8 % 32,
                (from + 1) as u8 % 32,
                (from + 2) as u8 % 32
            ]
        );
        assert_eq!(decompress(&[], 0).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn broken_streams_are_errors() {
        for bad in [
            &[5, 1, 2][..],         // literal past the end
            &[0, 1, 1 << 5][..],    // reference without its offset byte
            &[0, 1, 7 << 5][..],    // without its length byte
            &[0, 1, 1 << 5, 1][..], // 2 back with 1 byte written
            &[1 << 5 | 3, 0][..],   // far back at the start
        ] {
            let e = decompress(bad, 0).unwrap_err();
            assert!(!e.is_empty());
        }
        // Four bytes where the file records a chunk of three.
        let e = decompress(&[3, 1, 2, 3, 4], 3).unwrap_err();
        assert!(e.contains("3 bytes"), "{e}");
    }
}
