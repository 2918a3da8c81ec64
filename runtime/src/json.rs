//! A small, allocation-free scanner for the JSON header of a safetensors file.
//!
//! It accepts exactly the shape of a safetensors header: one top-level object whose
//! values are either tensor descriptions (`{"dtype": .., "shape": [..], "data_offsets":
//! [b, e]}`) or, under the key `__metadata__`, an object of string values. It checks the
//! complete JSON syntax of that shape (strings, escapes, integers, whitespace) and
//! reports each entry to a callback, so the loader can walk the header several times
//! without storing it.

use crate::format::same;
use crate::slots::{slot_of, unknown};
use crate::Error;

/// Element types the format uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dtype {
    F32,
    I8,
    I32,
    /// Any other dtype string (always rejected by the loader).
    Other,
}

impl Dtype {
    pub(crate) const fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::I8 | Dtype::Other => 1,
        }
    }
}

/// One tensor description from the header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TensorInfo {
    pub(crate) dtype: Dtype,
    /// Number of dimensions (only shapes of rank <= 2 are stored; more is rejected).
    pub(crate) rank: usize,
    pub(crate) shape: [u32; 2],
    pub(crate) begin: u32,
    pub(crate) end: u32,
}

/// A JSON string as it appears in the header, escapes still in place.
///
/// The runtime compares strings byte for byte without decoding escapes: a tensor name
/// or a metadata key/value the format defines must be written plainly (as writers do
/// for these ASCII strings). An escaped spelling does not match: an escaped tensor
/// name is an unknown tensor, an escaped `format` a missing one. Escapes are still
/// checked for valid JSON syntax everywhere.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawStr<'h> {
    raw: &'h [u8],
}

impl<'h> RawStr<'h> {
    /// The raw bytes between the quotes.
    pub(crate) fn bytes(self) -> &'h [u8] {
        self.raw
    }

    /// Whether the string is exactly `expected`.
    pub(crate) fn is(self, expected: &str) -> bool {
        same(self.raw, expected.as_bytes())
    }
}

/// Whether `bytes` is valid UTF-8, deciding exactly as `core::str::from_utf8` does
/// (no overlong forms, no surrogates, nothing above U+10FFFF), without its 256-byte
/// lookup table.
pub(crate) fn is_utf8(bytes: &[u8]) -> bool {
    let mut rest = bytes;
    while let Some((&lead, tail)) = rest.split_first() {
        rest = tail;
        if lead < 0x80 {
            continue;
        }
        // Continuation bytes and the smallest code point this length may encode.
        let (n, min) = match lead {
            0xC2..=0xDF => (1, 0x80),
            0xE0..=0xEF => (2, 0x800),
            0xF0..=0xF4 => (3, 0x1_0000),
            _ => return false,
        };
        let mut cp = u32::from(lead) & (0x3F >> n);
        for _ in 0..n {
            match rest.split_first() {
                Some((&c, tail)) if c & 0xC0 == 0x80 => {
                    cp = (cp << 6) | u32::from(c & 0x3F);
                    rest = tail;
                }
                _ => return false,
            }
        }
        if cp < min || (0xD800..=0xDFFF).contains(&cp) || cp > 0x10_FFFF {
            return false;
        }
    }
    true
}

/// One entry of the header, reported to the walker's callback.
pub(crate) enum Entry<'h> {
    /// A `__metadata__` key/value pair.
    Meta(RawStr<'h>, RawStr<'h>),
    /// A tensor in a known slot.
    Tensor(usize, TensorInfo),
}

struct Scanner<'h> {
    bytes: &'h [u8],
    pos: usize,
}

impl<'h> Scanner<'h> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn bump(&mut self) {
        self.pos = self.pos.saturating_add(1);
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.bump();
        }
    }

    /// Skips whitespace, then consumes `c` if it comes next.
    #[inline(never)]
    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.bump();
            true
        } else {
            false
        }
    }

    #[inline(never)]
    fn expect(&mut self, c: u8) -> Result<(), Error> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(Error::InvalidJson)
        }
    }

    #[inline(never)]
    fn string(&mut self) -> Result<RawStr<'h>, Error> {
        self.expect(b'"')?;
        let start = self.pos;
        loop {
            match self.peek() {
                None => return Err(Error::InvalidJson),
                Some(b'"') => {
                    let raw = self.bytes.get(start..self.pos).ok_or(Error::InvalidJson)?;
                    self.bump();
                    return Ok(RawStr { raw });
                }
                Some(b'\\') => {
                    self.bump();
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.bump(),
                        Some(b'u') => {
                            self.bump();
                            for _ in 0..4 {
                                if !self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                                    return Err(Error::InvalidJson);
                                }
                                self.bump();
                            }
                        }
                        _ => return Err(Error::InvalidJson),
                    }
                }
                Some(c) if c < 0x20 => return Err(Error::InvalidJson),
                Some(_) => self.bump(),
            }
        }
    }

    /// A non-negative JSON integer (no sign, fraction or exponent). Values that do not
    /// fit in a `u32` saturate to `u32::MAX`; the range checks of the loader reject them
    /// (the data section of a file is always shorter than that).
    fn uint(&mut self) -> Result<u32, Error> {
        self.skip_ws();
        let first = self.peek().ok_or(Error::InvalidJson)?;
        if !first.is_ascii_digit() {
            return Err(Error::InvalidJson);
        }
        let mut v = 0u32;
        let mut digits = 0usize;
        while let Some(c) = self.peek().filter(u8::is_ascii_digit) {
            v = v.saturating_mul(10).saturating_add(u32::from(c & 0x0f));
            digits = digits.saturating_add(1);
            self.bump();
        }
        // JSON forbids leading zeros; a fraction or exponent would not be an integer.
        if (first == b'0' && digits > 1) || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return Err(Error::InvalidJson);
        }
        Ok(v)
    }

    /// `[` uint, ... `]`, storing up to `N` values; returns the number of values.
    fn uint_array(&mut self, out: &mut [u32; 2]) -> Result<usize, Error> {
        self.expect(b'[')?;
        let mut n = 0usize;
        if self.eat(b']') {
            return Ok(0);
        }
        loop {
            let v = self.uint()?;
            if let Some(slot) = out.get_mut(n) {
                *slot = v;
            }
            n = n.saturating_add(1);
            if self.eat(b']') {
                return Ok(n);
            }
            self.expect(b',')?;
        }
    }

    /// `{ "key": value, ... }`: calls `value` after each key and its colon.
    #[inline(never)]
    fn object(
        &mut self,
        value: &mut dyn FnMut(&mut Self, RawStr<'h>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.expect(b'{')?;
        if self.eat(b'}') {
            return Ok(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            value(self, key)?;
            if self.eat(b'}') {
                return Ok(());
            }
            self.expect(b',')?;
        }
    }

    /// `{"dtype": .., "shape": [..], "data_offsets": [b, e]}` (each key once).
    fn tensor_info(&mut self) -> Result<TensorInfo, Error> {
        let mut dtype = None;
        let mut shape = None;
        let mut offsets = None;
        self.object(&mut |s, key| {
            let done = if key.is("dtype") && dtype.is_none() {
                let d = s.string()?;
                dtype = Some(if d.is("F32") {
                    Dtype::F32
                } else if d.is("I8") {
                    Dtype::I8
                } else if d.is("I32") {
                    Dtype::I32
                } else {
                    Dtype::Other
                });
                true
            } else if key.is("shape") && shape.is_none() {
                let mut dims = [0u32; 2];
                let rank = s.uint_array(&mut dims)?;
                shape = Some((rank, dims));
                true
            } else if key.is("data_offsets") && offsets.is_none() {
                let mut pair = [0u32; 2];
                let n = s.uint_array(&mut pair)?;
                offsets = Some(pair);
                n == 2
            } else {
                false
            };
            if done {
                Ok(())
            } else {
                Err(Error::InvalidJson)
            }
        })?;
        match (dtype, shape, offsets) {
            (Some(dtype), Some((rank, shape)), Some([begin, end])) => Ok(TensorInfo {
                dtype,
                rank,
                shape,
                begin,
                end,
            }),
            _ => Err(Error::InvalidJson),
        }
    }
}

/// Walks a whole header, checking its syntax and reporting every entry to `f`.
///
/// Unknown tensor names fail with [`Error::UnknownTensor`]; a repeated tensor name or a
/// second `__metadata__` with [`Error::DuplicateTensor`]. (`f` is a trait object so the
/// scanner exists once in the binary, however many passes use it.)
pub(crate) fn walk<'h, F: FnMut(Entry<'h>) -> Result<(), Error>>(
    header: &'h [u8],
    mut f: F,
) -> Result<(), Error> {
    walk_dyn(header, &mut f)
}

/// Receives the entries from [`walk`]. A one-method trait rather than `dyn FnMut`,
/// whose vtable would also hold a `call_once` shim: a second copy of the closure on
/// the target.
trait Visit<'h> {
    fn visit(&mut self, entry: Entry<'h>) -> Result<(), Error>;
}

impl<'h, F: FnMut(Entry<'h>) -> Result<(), Error>> Visit<'h> for F {
    fn visit(&mut self, entry: Entry<'h>) -> Result<(), Error> {
        self(entry)
    }
}

fn walk_dyn<'h>(header: &'h [u8], f: &mut dyn Visit<'h>) -> Result<(), Error> {
    let mut s = Scanner {
        bytes: header,
        pos: 0,
    };
    let mut seen: u64 = 0;
    let mut seen_metadata = false;
    s.object(&mut |s, key| {
        if key.is("__metadata__") {
            if seen_metadata {
                return Err(Error::DuplicateTensor);
            }
            seen_metadata = true;
            s.object(&mut |s, key| {
                let value = s.string()?;
                f.visit(Entry::Meta(key, value))
            })
        } else {
            let slot = slot_of(key.bytes()).ok_or_else(|| unknown(key.bytes()))?;
            let bit = 1u64 << slot;
            if seen & bit != 0 {
                return Err(Error::DuplicateTensor);
            }
            seen |= bit;
            let info = s.tensor_info()?;
            f.visit(Entry::Tensor(slot, info))
        }
    })?;
    s.skip_ws();
    if s.pos == header.len() {
        Ok(())
    } else {
        Err(Error::InvalidJson)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_matches_core() {
        let agree = |b: &[u8]| {
            assert_eq!(is_utf8(b), core::str::from_utf8(b).is_ok(), "{b:02x?}");
        };
        // Every sequence of up to three bytes, then four-byte sequences around the
        // boundaries of the four-byte forms.
        agree(b"");
        for a in 0..=255u8 {
            agree(&[a]);
            for b in 0..=255u8 {
                agree(&[a, b]);
                if a >= 0xC0 {
                    for c in 0..=255u8 {
                        agree(&[a, b, c]);
                    }
                }
            }
        }
        for a in 0xEF..=0xF8u8 {
            for b in 0..=255u8 {
                for c in [0x00, 0x7F, 0x80, 0xBF, 0xC0] {
                    for d in [0x41, 0x80, 0xBF, 0xC0] {
                        agree(&[a, b, c, d]);
                        agree(&[b'x', a, b, c, d, b'y']);
                    }
                }
            }
        }
        agree("value \u{e9}\u{20ac}\u{10348}\u{10ffff}".as_bytes());
    }

    #[test]
    fn strings_compare_raw() {
        assert!(RawStr { raw: b"input" }.is("input"));
        assert!(!RawStr {
            raw: br"i\u006eput"
        }
        .is("input"));
    }

    fn count(header: &str) -> Result<usize, Error> {
        let mut n = 0;
        walk(header.as_bytes(), &mut |_| {
            n += 1;
            Ok(())
        })?;
        Ok(n)
    }

    #[test]
    fn syntax() {
        assert_eq!(count("{}"), Ok(0));
        assert_eq!(count("  { }  "), Ok(0));
        assert_eq!(
            count(
                r#"{"__metadata__":{"a":"b","c":"d"},"input.mean":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#
            ),
            Ok(3)
        );
        for bad in [
            "",
            "{",
            "{}x",
            "[]",
            r#"{"input.mean":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},}"#,
            r#"{"input.mean":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}"#,
            r#"{"input.mean":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}}"#,
            r#"{"input.mean":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}"#,
            r#"{"input.mean":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}}"#,
            r#"{"input.mean":{"dtype":"F32","shape":[2]}}"#,
            r#"{"input.mean":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}"#,
            r#"{"input.mean":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
            r#"{"__metadata__":{"a":1}}"#,
            "{\"__metadata__\":{\"a\":\"\x01\"}}",
            r#"{"__metadata__":{"a":"\x"}}"#,
            r#"{"__metadata__":{"a":"\u12"}}"#,
        ] {
            assert_eq!(count(bad), Err(Error::InvalidJson), "{bad}");
        }
        assert_eq!(
            count(r#"{"inputs.mean":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#),
            Err(Error::UnknownTensor)
        );
        assert_eq!(
            count(r#"{"__metadata__":{},"__metadata__":{}}"#),
            Err(Error::DuplicateTensor)
        );
    }
}
