//! The loader's limits: the largest files and networks it accepts.

/// The largest JSON header [`Model::new_checked`](crate::Model::new_checked) accepts, in bytes (64 KiB).
///
/// A header of the format needs about 80 bytes per tensor plus the metadata; the
/// reference safetensors parser allows 100 MB, far too much to scan on a
/// microcontroller.
///
/// ```
/// assert_eq!(laq_runtime::MAX_HEADER_LEN, 65536);
/// ```
pub const MAX_HEADER_LEN: usize = 64 * 1024;

/// The most linear layers a model may have (`num_layers` is `1..=MAX_LAYERS`).
///
/// ```
/// assert_eq!(laq_runtime::MAX_LAYERS, 16);
/// ```
pub const MAX_LAYERS: usize = 16;

/// The largest state dimension of a fully connected model (`input_dim` is
/// `1..=MAX_INPUT_DIM`): room for a grid world's symbolic map flattened with the vectors
/// beside it (MiniGrid's whole 19 x 19 x 3 grid and its heading: 1,084 values). An image
/// model's state is its image, bounded by [`MAX_IMAGE_SIDE`] and [`MAX_CHANNELS`] instead.
///
/// ```
/// assert_eq!(laq_runtime::MAX_INPUT_DIM, 4096);
/// ```
pub const MAX_INPUT_DIM: usize = 4096;

/// The most convolutional layers an image model may have (`num_conv` is
/// `1..=MAX_CONV_LAYERS`).
///
/// ```
/// assert_eq!(laq_runtime::MAX_CONV_LAYERS, 4);
/// ```
pub const MAX_CONV_LAYERS: usize = 4;

/// The largest height and width of an image model's input, in pixels.
///
/// ```
/// assert_eq!(laq_runtime::MAX_IMAGE_SIDE, 256);
/// ```
pub const MAX_IMAGE_SIDE: usize = 256;

/// The most channels of an image or of a convolution's output.
///
/// ```
/// assert_eq!(laq_runtime::MAX_CHANNELS, 256);
/// ```
pub const MAX_CHANNELS: usize = 256;
