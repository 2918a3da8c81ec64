//! Owned loading (feature `alloc`).

use alloc::vec::Vec;

use crate::validate::Layout;
use crate::{Error, Model};

/// A validated model that owns its bytes (feature `alloc`).
///
/// Validation happens once in [`OwnedModel::from_vec`]; [`OwnedModel::model`] then
/// returns the zero-copy view without checking again.
///
/// ```
/// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
/// use laq_runtime::OwnedModel;
///
/// let owned = OwnedModel::from_vec(bytes.to_vec())?;
/// let mut scratch = vec![0.0; owned.model().scratch_len()];
/// let v = owned.model().value(&[1.0, 2.0], &mut scratch)?;
/// assert!(v.is_finite());
/// # Ok::<(), laq_runtime::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct OwnedModel {
    bytes: Vec<u8>,
    layout: Layout,
}

impl OwnedModel {
    /// Validates `bytes` (as [`Model::new_checked`]) and keeps them.
    ///
    /// ```
    /// use laq_runtime::{Error, OwnedModel};
    ///
    /// assert_eq!(OwnedModel::from_vec(vec![1, 2, 3]).err(), Some(Error::Truncated));
    /// ```
    pub fn from_vec(bytes: Vec<u8>) -> Result<Self, Error> {
        let mut layout = Layout::EMPTY;
        layout.check(&bytes)?;
        Ok(OwnedModel { bytes, layout })
    }

    /// The checked view of the model.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let owned = laq_runtime::OwnedModel::from_vec(bytes.to_vec())?;
    /// assert_eq!(owned.model().input_dim(), 2);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn model(&self) -> Model<'_> {
        Model::from_layout(&self.bytes, self.layout)
    }

    /// The file's bytes.
    ///
    /// ```
    /// # let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.safetensors"));
    /// let owned = laq_runtime::OwnedModel::from_vec(bytes.to_vec())?;
    /// assert_eq!(owned.into_bytes(), bytes.to_vec());
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}
