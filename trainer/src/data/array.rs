//! Raw arrays as files hold them: an element type, a shape and little-endian bytes.

use anyhow::{bail, Result};

/// Element types that may appear in a dataset file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    Bool,
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F16,
    F32,
    F64,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    pub(crate) fn is_integer(self) -> bool {
        !matches!(self, DType::F16 | DType::F32 | DType::F64)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::U64 => "u64",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }
}

/// One named array as stored in a file: little-endian bytes, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct RawArray {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl RawArray {
    pub fn from_f32(shape: Vec<usize>, values: &[f32]) -> Self {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        RawArray {
            dtype: DType::F32,
            shape,
            bytes,
        }
    }

    pub fn from_i64(shape: Vec<usize>, values: &[i64]) -> Self {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        RawArray {
            dtype: DType::I64,
            shape,
            bytes,
        }
    }

    pub fn from_u8(shape: Vec<usize>, values: Vec<u8>) -> Self {
        RawArray {
            dtype: DType::U8,
            shape,
            bytes: values,
        }
    }

    pub fn from_bool(shape: Vec<usize>, values: &[bool]) -> Self {
        let bytes = values.iter().map(|&v| v as u8).collect();
        RawArray {
            dtype: DType::Bool,
            shape,
            bytes,
        }
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the shape's values take, or `None` where that overflows: a file's header
    /// may claim any shape, and a product that wraps round could match the bytes held.
    ///
    /// ```
    /// use laq::data::{DType, RawArray};
    /// let a = RawArray { dtype: DType::F32, shape: vec![2, 3], bytes: vec![0; 24] };
    /// assert_eq!(a.bytes_needed(), Some(24));
    /// let huge = RawArray { dtype: DType::U8, shape: vec![1 << 62, 8], bytes: vec![] };
    /// assert_eq!(huge.bytes_needed(), None);
    /// ```
    pub fn bytes_needed(&self) -> Option<usize> {
        self.shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))?
            .checked_mul(self.dtype.size())
    }

    /// Why the bytes held do not fill the shape, where they do not (the shape may also
    /// overflow: [`RawArray::bytes_needed`]).
    pub(crate) fn size_mismatch(&self) -> Option<String> {
        let (shape, dtype) = (&self.shape, self.dtype.name());
        match self.bytes_needed() {
            None => Some(format!(
                "shape {shape:?} of {dtype} holds more values than can be addressed"
            )),
            Some(want) if want != self.bytes.len() => Some(format!(
                "shape {shape:?} of {dtype} needs {want} bytes, the file holds {}",
                self.bytes.len()
            )),
            Some(_) => None,
        }
    }

    pub(crate) fn check_size(&self, key: &str) -> Result<()> {
        match self.size_mismatch() {
            Some(why) => bail!("key `{key}`: {why}"),
            None => Ok(()),
        }
    }

    /// Every element as a flag, 0 or 1 (bools, integers or floats); any other value is an
    /// error naming `key` and the row.
    pub(crate) fn flags(&self, key: &str) -> Result<Vec<bool>> {
        self.to_f64()
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                0.0 => Ok(false),
                1.0 => Ok(true),
                x => bail!("key `{key}`: row {i} is {x}, expected 0 or 1"),
            })
            .collect()
    }

    /// Every element as f64, whatever the stored type.
    pub fn to_f64(&self) -> Vec<f64> {
        let b = &self.bytes;
        let n = self.len();
        let mut out = Vec::with_capacity(n);
        macro_rules! conv {
            ($t:ty, $w:expr) => {
                for c in b.chunks_exact($w) {
                    out.push(<$t>::from_le_bytes(c.try_into().unwrap_or_default()) as f64);
                }
            };
        }
        match self.dtype {
            DType::Bool | DType::U8 => out.extend(b.iter().map(|&x| x as f64)),
            DType::I8 => out.extend(b.iter().map(|&x| x as i8 as f64)),
            DType::U16 => conv!(u16, 2),
            DType::I16 => conv!(i16, 2),
            DType::U32 => conv!(u32, 4),
            DType::I32 => conv!(i32, 4),
            DType::U64 => conv!(u64, 8),
            DType::I64 => conv!(i64, 8),
            DType::F16 => {
                for c in b.chunks_exact(2) {
                    out.push(f16_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64);
                }
            }
            DType::F32 => conv!(f32, 4),
            DType::F64 => conv!(f64, 8),
        }
        out
    }

    pub fn to_f32(&self) -> Vec<f32> {
        if self.dtype == DType::F32 {
            return self
                .bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
        }
        self.to_f64().into_iter().map(|v| v as f32).collect()
    }
}

pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) & 1) as u32;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign << 31,
        (0, f) => {
            // Subnormal: renormalise.
            let mut e = 127 - 15 + 1;
            let mut f = f;
            while f & 0x400 == 0 {
                f <<= 1;
                e -= 1;
            }
            (sign << 31) | ((e as u32) << 23) | ((f & 0x3ff) << 13)
        }
        (0x1f, f) => (sign << 31) | (0xff << 23) | (f << 13),
        (e, f) => (sign << 31) | ((e + 127 - 15) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}
