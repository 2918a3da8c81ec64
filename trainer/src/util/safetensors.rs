//! The one safetensors writer of the trainer: datasets, models, Q-networks and checkpoints
//! all go through [`to_bytes`], which writes a canonical header (keys sorted), so that the
//! same content always gives the same bytes.

use anyhow::{Context, Result};
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

/// One named tensor to write: element type, shape and little-endian bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry<'a> {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub bytes: Cow<'a, [u8]>,
}

impl Entry<'static> {
    /// An f32 tensor.
    pub fn f32(name: impl Into<String>, shape: Vec<usize>, values: &[f32]) -> Self {
        Entry {
            name: name.into(),
            dtype: Dtype::F32,
            shape,
            bytes: f32_bytes(values).into(),
        }
    }

    /// A u32 tensor.
    pub fn u32(name: impl Into<String>, shape: Vec<usize>, values: &[u32]) -> Self {
        Entry {
            name: name.into(),
            dtype: Dtype::U32,
            shape,
            bytes: values
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect::<Vec<u8>>()
                .into(),
        }
    }
}

/// Little-endian bytes of f32 values.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// f32 values of little-endian bytes (a trailing partial value is ignored).
pub fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The file's bytes: `tensors` and string `metadata` (none if empty).
///
/// ```
/// use laq::util::safetensors::{to_bytes, Entry};
/// let a = to_bytes(&[Entry::f32("w", vec![2], &[1.0, 2.0])], &[("k".into(), "v".into())].into())?;
/// let b = to_bytes(&[Entry::f32("w", vec![2], &[1.0, 2.0])], &[("k".into(), "v".into())].into())?;
/// assert_eq!(a, b);
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn to_bytes(tensors: &[Entry<'_>], metadata: &BTreeMap<String, String>) -> Result<Vec<u8>> {
    let views = tensors
        .iter()
        .map(|t| {
            let v = TensorView::new(t.dtype, t.shape.clone(), &t.bytes)
                .with_context(|| format!("tensor `{}`", t.name))?;
            Ok((t.name.clone(), v))
        })
        .collect::<Result<Vec<_>>>()?;
    let meta = (!metadata.is_empty()).then(|| {
        metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<HashMap<_, _>>()
    });
    canonical_header(&safetensors::serialize(views, meta)?)
}

/// Rewrites a safetensors header with sorted keys: the reference writer emits its
/// metadata map in hash order, which would make identical files differ byte-wise.
fn canonical_header(bytes: &[u8]) -> Result<Vec<u8>> {
    let n = u64::from_le_bytes(bytes.get(..8).context("short file")?.try_into()?) as usize;
    let header: serde_json::Value =
        serde_json::from_slice(bytes.get(8..8 + n).context("short header")?)?;
    let mut text = serde_json::to_vec(&header)?;
    text.resize(text.len().next_multiple_of(8), b' ');
    let mut out = Vec::with_capacity(8 + text.len() + bytes.len() - 8 - n);
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(&text);
    out.extend_from_slice(&bytes[8 + n..]);
    Ok(out)
}
