//! The metadata the loader reads: the raw values of the keys the format defines, and
//! their parsers.

use crate::format::MetaKey;
use crate::json::RawStr;
use crate::num::{parse_f32, parse_usize};
use crate::Error;

/// Raw values of the metadata keys the format defines, indexed by [`MetaKey`].
#[derive(Default)]
pub(crate) struct Meta<'h> {
    values: [Option<RawStr<'h>>; MetaKey::ALL.len()],
}

impl<'h> Meta<'h> {
    /// Records `key`'s value; other keys than the format's are ignored, a repeated one
    /// is [`Error::DuplicateTensor`].
    pub(crate) fn set(&mut self, key: RawStr<'h>, value: RawStr<'h>) -> Result<(), Error> {
        let Some(field) = MetaKey::index(key.bytes()).and_then(|i| self.values.get_mut(i)) else {
            return Ok(());
        };
        if field.replace(value).is_some() {
            return Err(Error::DuplicateTensor);
        }
        Ok(())
    }

    /// The raw value of `key`, if the file has it.
    pub(crate) fn get(&self, key: MetaKey) -> Option<RawStr<'h>> {
        self.values.get(key as usize).copied().flatten()
    }
}

/// A decimal integer in `range`, else [`Error::InvalidMetadata`] (also if absent).
pub(crate) fn meta_usize(
    value: Option<RawStr<'_>>,
    range: core::ops::RangeInclusive<usize>,
) -> Result<usize, Error> {
    value
        .and_then(|v| parse_usize(v.bytes()))
        .filter(|v| range.contains(v))
        .ok_or(Error::InvalidMetadata)
}

/// A decimal number, else [`Error::InvalidMetadata`].
pub(crate) fn meta_f32(value: RawStr<'_>) -> Result<f32, Error> {
    parse_f32(value.bytes()).ok_or(Error::InvalidMetadata)
}

/// `input_shape`: `[C,H,W]`, spaces allowed around the numbers. One pass over the
/// bytes (a split-and-trim would cost more flash than the whole parser). Numbers
/// saturate; the caller's range checks reject them.
#[cfg(feature = "images")]
pub(crate) fn parse_shape(value: &[u8]) -> Option<[u32; 3]> {
    let [b'[', inner @ .., b']'] = value else {
        return None;
    };
    let mut shape = [0u32; 3];
    // Index of the number being read, whether it has digits, and whether a space
    // ended them.
    let (mut n, mut digits, mut ended) = (0usize, false, false);
    for &c in inner {
        match c {
            b'0'..=b'9' if !ended => {
                let dim = shape.get_mut(n)?;
                *dim = dim.saturating_mul(10).saturating_add(u32::from(c - b'0'));
                digits = true;
            }
            b',' if digits => (n, digits, ended) = (n + 1, false, false),
            b' ' => ended = digits,
            _ => return None,
        }
    }
    (n == 2 && digits).then_some(shape)
}

#[cfg(all(test, feature = "images"))]
mod tests {
    use super::parse_shape;

    #[test]
    fn input_shapes() {
        assert_eq!(parse_shape(b"[3,32,32]"), Some([3, 32, 32]));
        assert_eq!(parse_shape(b"[1,1,99999999999999]"), Some([1, 1, u32::MAX]));
        assert_eq!(parse_shape(b"[ 1 , 4,16 ]"), Some([1, 4, 16]));
        for bad in [
            &b"3,32,32"[..],
            b"[3,32]",
            b"[3,32,32,1]",
            b"[3,,32]",
            b"[,3,32,32]",
            b"[3,32,32,]",
            b"[3,3 2,32]",
            b"[3,-2,32]",
            b"[3,2.0,32]",
            b"[]",
        ] {
            assert_eq!(
                parse_shape(bad),
                None,
                "{}",
                std::string::String::from_utf8_lossy(bad)
            );
        }
    }
}
