//! The caller's scratch buffer.

use core::ops::{Deref, DerefMut};

/// A fixed-size scratch buffer for evaluation, usable wherever `&mut [f32]` scratch is
/// asked for. `N` must be at least [`Model::scratch_len`](crate::Model::scratch_len), i.e.
/// `input_dim + max_i(in_i + out_i)` over the layers of a fully connected model (an
/// image model adds its patch buffer and feature maps, see [`Model::scratch_len`](crate::Model::scratch_len)).
///
/// ```
/// use laq_runtime::Scratch;
///
/// // A 2-64-64-8 MLP needs 2 + max(2 + 64, 64 + 64, 64 + 8) = 130.
/// let mut scratch = Scratch::<130>::new();
/// assert_eq!(scratch.len(), 130);
/// scratch[0] = 1.0;
/// ```
#[derive(Clone, Debug)]
pub struct Scratch<const N: usize> {
    buf: [f32; N],
}

impl<const N: usize> Scratch<N> {
    /// A zeroed buffer (usable in `static`s and `const`s).
    ///
    /// ```
    /// static mut SCRATCH: laq_runtime::Scratch<64> = laq_runtime::Scratch::new();
    /// ```
    pub const fn new() -> Self {
        Self { buf: [0.0; N] }
    }
}

impl<const N: usize> Default for Scratch<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Deref for Scratch<N> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.buf
    }
}

impl<const N: usize> DerefMut for Scratch<N> {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf
    }
}
