//! Observations in memory: f32, or u8 for images (a quarter of the space).

use std::borrow::Cow;

/// How observations are stored, on disk and in memory. Images are usually whole numbers in
/// 0..=255: as u8 they take a quarter of the space, and reading gives back the same values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ObsStorage {
    #[default]
    F32,
    U8,
}

/// Every u8 value as f32, so that u8 observations can be read through `&f32` like f32 ones.
static U8_AS_F32: [f32; 256] = {
    let mut t = [0f32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i as f32;
        i += 1;
    }
    t
};

/// Observations of all transitions, flattened row-major, in the type they were stored in.
///
/// Image datasets (u8 `[N, C, H, W]` on disk) stay u8 in memory, a quarter of the f32
/// size: the default navigation data at 64x64 takes 2.2 GB instead of 8.7 GB. Values are
/// the stored whole numbers (0..=255) whatever the storage; models convert a batch to f32
/// only when they draw it. Equality compares values, not storage.
#[derive(Clone, Debug)]
pub enum Observations {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

impl Default for Observations {
    fn default() -> Self {
        Observations::F32(vec![])
    }
}

impl From<Vec<f32>> for Observations {
    fn from(v: Vec<f32>) -> Self {
        Observations::F32(v)
    }
}

impl From<Vec<u8>> for Observations {
    fn from(v: Vec<u8>) -> Self {
        Observations::U8(v)
    }
}

impl Observations {
    /// Number of values (transitions times the observation size).
    pub fn len(&self) -> usize {
        match self {
            Observations::F32(v) => v.len(),
            Observations::U8(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn storage(&self) -> ObsStorage {
        match self {
            Observations::F32(_) => ObsStorage::F32,
            Observations::U8(_) => ObsStorage::U8,
        }
    }

    /// Bytes the values take in memory.
    pub fn memory_bytes(&self) -> usize {
        match self {
            Observations::F32(v) => v.len() * 4,
            Observations::U8(v) => v.len(),
        }
    }

    /// Value `j` of the flattened array.
    pub fn get(&self, j: usize) -> f32 {
        self[j]
    }

    pub fn iter(&self) -> ObsIter<'_> {
        match self {
            Observations::F32(v) => ObsIter::F32(v.iter()),
            Observations::U8(v) => ObsIter::U8(v.iter()),
        }
    }

    /// The f32 values, when stored as f32.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            Observations::F32(v) => Some(v),
            Observations::U8(_) => None,
        }
    }

    /// The u8 values, when stored as u8.
    pub fn as_u8(&self) -> Option<&[u8]> {
        match self {
            Observations::F32(_) => None,
            Observations::U8(v) => Some(v),
        }
    }

    /// All values as f32: borrowed when stored as f32, converted (4x the memory) otherwise.
    pub fn to_f32(&self) -> Cow<'_, [f32]> {
        match self {
            Observations::F32(v) => Cow::Borrowed(v),
            Observations::U8(v) => Cow::Owned(v.iter().map(|&x| x as f32).collect()),
        }
    }

    /// Row `i` of `d` values as f32 (borrowed when stored as f32).
    pub fn row(&self, i: usize, d: usize) -> Cow<'_, [f32]> {
        match self {
            Observations::F32(v) => Cow::Borrowed(&v[i * d..(i + 1) * d]),
            Observations::U8(v) => {
                Cow::Owned(v[i * d..(i + 1) * d].iter().map(|&x| x as f32).collect())
            }
        }
    }

    /// `parts` one after the other: u8 where every part is u8, f32 otherwise.
    pub(crate) fn concat(parts: &[Observations]) -> Observations {
        let bytes: Option<Vec<&[u8]>> = parts.iter().map(|p| p.as_u8()).collect();
        match bytes {
            Some(b) if !b.is_empty() => Observations::U8(b.concat()),
            _ => Observations::F32(parts.iter().flat_map(|p| p.iter()).copied().collect()),
        }
    }

    /// Rows `idx` as one store of the same type.
    pub(crate) fn select(&self, idx: &[usize], d: usize) -> Observations {
        match self {
            Observations::F32(v) => Observations::F32(
                idx.iter()
                    .flat_map(|&i| &v[i * d..(i + 1) * d])
                    .copied()
                    .collect(),
            ),
            Observations::U8(v) => Observations::U8(
                idx.iter()
                    .flat_map(|&i| &v[i * d..(i + 1) * d])
                    .copied()
                    .collect(),
            ),
        }
    }
}

impl std::ops::Index<usize> for Observations {
    type Output = f32;

    fn index(&self, j: usize) -> &f32 {
        match self {
            Observations::F32(v) => &v[j],
            Observations::U8(v) => &U8_AS_F32[v[j] as usize],
        }
    }
}

impl PartialEq for Observations {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Observations::F32(a), Observations::F32(b)) => a == b,
            (Observations::U8(a), Observations::U8(b)) => a == b,
            _ => self.len() == other.len() && self.iter().eq(other.iter()),
        }
    }
}

impl PartialEq<Vec<f32>> for Observations {
    fn eq(&self, other: &Vec<f32>) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<[f32]> for Observations {
    fn eq(&self, other: &[f32]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

/// Iterator over [`Observations`] values as `&f32`, whatever the storage.
pub enum ObsIter<'a> {
    F32(std::slice::Iter<'a, f32>),
    U8(std::slice::Iter<'a, u8>),
}

impl<'a> Iterator for ObsIter<'a> {
    type Item = &'a f32;

    fn next(&mut self) -> Option<&'a f32> {
        match self {
            ObsIter::F32(it) => it.next(),
            ObsIter::U8(it) => it.next().map(|&x| &U8_AS_F32[x as usize]),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            ObsIter::F32(it) => it.size_hint(),
            ObsIter::U8(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for ObsIter<'_> {}

impl<'a> IntoIterator for &'a Observations {
    type Item = &'a f32;
    type IntoIter = ObsIter<'a>;

    fn into_iter(self) -> ObsIter<'a> {
        self.iter()
    }
}
