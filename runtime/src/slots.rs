//! Tensor slots: every tensor the format defines has a fixed index into the loader's
//! tables (offsets, presence masks), so a model needs no names once it is loaded.

use crate::format;
use crate::Error;

pub(crate) const SLOT_INPUT_MEAN: usize = 0;
pub(crate) const SLOT_INPUT_SCALE: usize = 1;
pub(crate) const SLOT_DENSITY_WEIGHTS: usize = 2;
pub(crate) const SLOT_DENSITY_MEANS: usize = 3;
pub(crate) const SLOT_DENSITY_VARIANCES: usize = 4;
pub(crate) const SLOT_DENSITY_DIMS: usize = 5;
/// `layers.{i}.weight` is `SLOT_LAYERS + 3 * i`, `.scale` `+ 1`, `.bias` `+ 2`.
pub(crate) const SLOT_LAYERS: usize = 6;
/// `conv.{i}.weight` is `SLOT_CONV + 2 * i`, `.bias` `+ 1` (convolutions have f32
/// weights only, so no scale slot: every slot must fit the loader's 64-bit masks).
pub(crate) const SLOT_CONV: usize = SLOT_LAYERS + 3 * crate::MAX_LAYERS;
/// Without `images` there are no convolution slots: the model's offset table and the
/// loader's loops over the slots stay as small as fully connected files need.
#[cfg(feature = "images")]
pub(crate) const SLOTS: usize = SLOT_CONV + 2 * crate::MAX_CONV_LAYERS;
#[cfg(not(feature = "images"))]
pub(crate) const SLOTS: usize = SLOT_CONV;
const _: () = assert!(SLOTS <= 64);

/// The bit of `slot` in the loader's 64-bit masks.
pub(crate) const fn bit(slot: usize) -> u64 {
    1u64 << slot
}

pub(crate) const fn weight_slot(layer: usize) -> usize {
    SLOT_LAYERS + 3 * layer
}

pub(crate) const fn scale_slot(layer: usize) -> usize {
    SLOT_LAYERS + 3 * layer + 1
}

pub(crate) const fn bias_slot(layer: usize) -> usize {
    SLOT_LAYERS + 3 * layer + 2
}

#[cfg(feature = "images")]
pub(crate) const fn conv_weight_slot(layer: usize) -> usize {
    SLOT_CONV + 2 * layer
}

#[cfg(feature = "images")]
pub(crate) const fn conv_bias_slot(layer: usize) -> usize {
    SLOT_CONV + 2 * layer + 1
}

/// Maps a tensor name to its slot, or `None` if the format does not define it (nor,
/// without `images`, a convolution's tensor: this build has no slots for them).
pub(crate) fn slot_of(name: &[u8]) -> Option<usize> {
    format::parse_name(
        name,
        cfg!(feature = "images"),
        // The fixed names come in slot order (`input.mean` is slot 0, ...).
        Some,
        |layer, part| Some(weight_slot(layer) + part),
        |layer, bias| Some(SLOT_CONV + 2 * layer + usize::from(bias)),
    )
}

/// The error for a tensor name the format does not define.
#[cfg(feature = "images")]
pub(crate) fn unknown(_name: &[u8]) -> Error {
    Error::UnknownTensor
}

/// Without `images` a convolution's tensor marks an image model, which this build
/// does not read (cheaper than parsing the names only to refuse the file later).
#[cfg(not(feature = "images"))]
pub(crate) fn unknown(name: &[u8]) -> Error {
    if format::is_conv(name) {
        Error::UnsupportedFormat
    } else {
        Error::UnknownTensor
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::TensorName;

    #[test]
    fn slots() {
        assert_eq!(slot_of(b"layers.0.weight"), Some(SLOT_LAYERS));
        assert_eq!(slot_of(b"layers.15.bias"), Some(SLOT_LAYERS + 47));
        assert_eq!(slot_of(b"layers.16.bias"), None);
        assert_eq!(slot_of(b"layers.01.bias"), None);
        assert_eq!(slot_of(b"layers..bias"), None);
        assert_eq!(slot_of(b"layers.1.weights"), None);
        assert_eq!(slot_of(b"input.mean"), Some(SLOT_INPUT_MEAN));
        assert_eq!(slot_of(b"input.scale"), Some(SLOT_INPUT_SCALE));
        assert_eq!(slot_of(b"density.weights"), Some(SLOT_DENSITY_WEIGHTS));
        assert_eq!(slot_of(b"density.means"), Some(SLOT_DENSITY_MEANS));
        assert_eq!(slot_of(b"density.variances"), Some(SLOT_DENSITY_VARIANCES));
        assert_eq!(slot_of(b"density.dims"), Some(SLOT_DENSITY_DIMS));
        assert_eq!(slot_of(b"layers.3.scale"), Some(scale_slot(3)));
        assert_eq!(slot_of(b"layers.3.bias"), Some(bias_slot(3)));
        assert_eq!(slot_of(b"conv.4.bias"), None);
        assert_eq!(slot_of(b"conv.0.scale"), None);
        assert_eq!(slot_of(b"conv.10.weight"), None);
        assert_eq!(slot_of(b"conv..weight"), None);
        assert_eq!(SLOT_CONV, 54);
    }

    #[test]
    fn every_slot_has_one_name() {
        use std::string::ToString;
        let mut seen = 0u64;
        for i in 0..=u8::MAX {
            for name in [
                TensorName::LayerWeight(i),
                TensorName::LayerScale(i),
                TensorName::LayerBias(i),
                TensorName::ConvWeight(i),
                TensorName::ConvBias(i),
            ] {
                if let Some(slot) = slot_of(name.to_string().as_bytes()) {
                    assert_eq!(seen & bit(slot), 0, "{name}");
                    seen |= bit(slot);
                }
            }
        }
        for name in [
            TensorName::InputMean,
            TensorName::InputScale,
            TensorName::DensityWeights,
            TensorName::DensityMeans,
            TensorName::DensityVariances,
            TensorName::DensityDims,
        ] {
            let slot = slot_of(name.to_string().as_bytes()).unwrap();
            assert_eq!(seen & bit(slot), 0, "{name}");
            seen |= bit(slot);
        }
        assert_eq!(seen, u64::MAX >> (64 - SLOTS));
    }

    #[cfg(feature = "images")]
    #[test]
    fn conv_slots() {
        assert_eq!(slot_of(b"conv.0.weight"), Some(SLOT_CONV));
        assert_eq!(slot_of(b"conv.3.bias"), Some(SLOT_CONV + 7));
        assert_eq!(slot_of(b"conv.2.weight"), Some(conv_weight_slot(2)));
        assert_eq!(slot_of(b"conv.2.bias"), Some(conv_bias_slot(2)));
        assert_eq!(unknown(b"conv.4.bias"), Error::UnknownTensor);
        assert_eq!(SLOTS, 62);
    }

    #[cfg(not(feature = "images"))]
    #[test]
    fn conv_names_mark_image_models() {
        assert_eq!(slot_of(b"conv.0.weight"), None);
        assert_eq!(unknown(b"conv.0.weight"), Error::UnsupportedFormat);
        assert_eq!(unknown(b"conv.4.bias"), Error::UnsupportedFormat);
        assert_eq!(unknown(b"conv"), Error::UnknownTensor);
        assert_eq!(unknown(b"layers.16.bias"), Error::UnknownTensor);
        assert_eq!(SLOTS, SLOT_CONV);
    }
}
