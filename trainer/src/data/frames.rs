//! Frames stored the way other tools store them, read as the `[C, H, W]` frames laq
//! trains on: grey frames without a channel axis (`[H, W]`), channels-last frames (`[H, W,
//! C]`: numpy images, PIL, gymnasium's Atari observations) and stacks of frames (`[T, C,
//! H, W]` or `[T, H, W, C]`, channels `T * C`, frame by frame).

/// Sides below which a two-dimensional observation is a matrix of values rather than a grey
/// frame, and a four-dimensional one a tensor rather than a stack of frames.
const MIN_FRAME_SIDE: usize = 16;

/// Rows (height) above which a frame 1, 3 or 4 values wide is taken for a channels-last
/// one: a channels-first frame of more than 16 channels that narrow is not an image any
/// camera makes (colour stacks of 4 RGB frames have 12 channels).
const MIN_CHANNELS_LAST_HEIGHT: usize = 17;

/// How one stored observation maps to the `[C, H, W]` frame laq reads, where it is not
/// stored that way already.
///
/// ```
/// use laq::data::frames::FrameLayout;
///
/// // Four grey 84x84 frames stacked channels-last, as an Atari wrapper keeps them.
/// let l = FrameLayout::of(&[84, 84, 4], false).unwrap();
/// assert_eq!(l.shape(), [4, 84, 84]);
/// assert!(l.moves_values());
/// // Grey frames without a channel axis: u8 values (pixels) of at least 16 a side.
/// assert_eq!(FrameLayout::of(&[84, 84], true).unwrap().shape(), [1, 84, 84]);
/// // A matrix of floats, and frames already `[C, H, W]`, are read as they are.
/// assert!(FrameLayout::of(&[84, 84], false).is_none());
/// assert!(FrameLayout::of(&[4, 84, 84], true).is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLayout {
    /// Frames in a stack (1 for one frame).
    frames: usize,
    /// Channels of each frame.
    channels: usize,
    height: usize,
    width: usize,
    /// Whether each frame's channels come last (`[H, W, C]`), so values move.
    channels_last: bool,
}

impl FrameLayout {
    /// The layout of observations of shape `shape` (one row), where it is a frame not
    /// stored as `[C, H, W]`; `None` for vectors and for frames read as they are.
    /// `pixels`: the values are u8, so a large `[H, W]` is a grey frame.
    pub fn of(shape: &[usize], pixels: bool) -> Option<Self> {
        let last = |s: &[usize]| {
            let &[h, w, c] = s else { return false };
            h >= MIN_CHANNELS_LAST_HEIGHT && matches!(c, 1 | 3 | 4) && w > c
        };
        let layout = |frames, channels, height, width, channels_last| FrameLayout {
            frames,
            channels,
            height,
            width,
            channels_last,
        };
        match *shape {
            [h, w] if pixels && h >= MIN_FRAME_SIDE && w >= MIN_FRAME_SIDE => {
                Some(layout(1, 1, h, w, false))
            }
            [h, w, c] if last(shape) => Some(layout(1, c, h, w, true)),
            [t, h, w, c] if last(&shape[1..]) => Some(layout(t, c, h, w, true)),
            [t, c, h, w] if h >= MIN_FRAME_SIDE && w >= MIN_FRAME_SIDE => {
                Some(layout(t, c, h, w, false))
            }
            _ => None,
        }
    }

    /// The frame as laq reads it: `[C, H, W]`, the stack's frames one after the other.
    pub fn shape(&self) -> [usize; 3] {
        [self.frames * self.channels, self.height, self.width]
    }

    /// Frames in the stack (1 for one frame) and channels of each: `[T, C]` of a stored
    /// `[T, C, H, W]` or `[T, H, W, C]`.
    ///
    /// ```
    /// use laq::data::frames::FrameLayout;
    ///
    /// assert_eq!(FrameLayout::of(&[4, 84, 84, 3], false).unwrap().stack(), [4, 3]);
    /// assert_eq!(FrameLayout::of(&[84, 84], true).unwrap().stack(), [1, 1]);
    /// ```
    pub fn stack(&self) -> [usize; 2] {
        [self.frames, self.channels]
    }

    /// Whether reading moves values (channels-last frames), rather than only naming the axes.
    pub fn moves_values(&self) -> bool {
        self.channels_last
    }

    /// The stored layout in words, for the line that says how the data was read.
    pub fn describe(&self) -> &'static str {
        match (self.frames > 1, self.channels_last) {
            (false, false) => "grey frames without a channel axis, [H, W]",
            (false, true) => "frames stored channels-last, [H, W, C]",
            (true, false) => "stacks of frames, [T, C, H, W]",
            (true, true) => "stacks of channels-last frames, [T, H, W, C]",
        }
    }

    /// Values in one stored observation.
    pub fn len(&self) -> usize {
        self.frames * self.channels * self.height * self.width
    }

    /// Whether a stored observation holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One stored observation `row` in `[C, H, W]` order into `out` (both [`len`](Self::len)
    /// values).
    ///
    /// ```
    /// use laq::data::frames::FrameLayout;
    ///
    /// // One 17x4 RGB frame, channels-last: the reds come first once read.
    /// let l = FrameLayout::of(&[17, 4, 3], false).unwrap();
    /// let row: Vec<u8> = (0..l.len() as u8).collect();
    /// let mut out = vec![0; l.len()];
    /// l.to_channels_first(&row, &mut out);
    /// assert_eq!(out[..3], [0, 3, 6]);
    /// assert_eq!(out[68..71], [1, 4, 7]);
    /// ```
    pub fn to_channels_first<T: Copy>(&self, row: &[T], out: &mut [T]) {
        if !self.channels_last {
            out.copy_from_slice(row);
            return;
        }
        let (c, hw) = (self.channels, self.height * self.width);
        for (stored, read) in row.chunks_exact(c * hw).zip(out.chunks_exact_mut(c * hw)) {
            for (p, pixel) in stored.chunks_exact(c).enumerate() {
                for (k, &v) in pixel.iter().enumerate() {
                    read[k * hw + p] = v;
                }
            }
        }
    }

    /// Every row of `bytes` (little-endian values of `size` bytes each, rows of
    /// [`len`](Self::len) values) put in `[C, H, W]` order in place, one row of scratch.
    pub fn reorder_bytes(&self, bytes: &mut [u8], size: usize) {
        match size {
            1 => self.reorder::<1>(bytes),
            2 => self.reorder::<2>(bytes),
            4 => self.reorder::<4>(bytes),
            _ => self.reorder::<8>(bytes),
        }
    }

    fn reorder<const S: usize>(&self, bytes: &mut [u8]) {
        if !self.channels_last || self.is_empty() {
            return;
        }
        let n = self.len();
        let (mut stored, mut read) = (vec![[0u8; S]; n], vec![[0u8; S]; n]);
        for row in bytes.chunks_exact_mut(n * S) {
            for (v, b) in stored.iter_mut().zip(row.chunks_exact(S)) {
                v.copy_from_slice(b);
            }
            self.to_channels_first(&stored, &mut read);
            for (b, v) in row.chunks_exact_mut(S).zip(&read) {
                b.copy_from_slice(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_read_as_frames_and_nothing_else_is() {
        let of = |s: &[usize], p| FrameLayout::of(s, p).map(|l| (l.shape(), l.moves_values()));
        assert_eq!(of(&[210, 160, 3], false), Some(([3, 210, 160], true)));
        assert_eq!(of(&[84, 84, 1], true), Some(([1, 84, 84], true)));
        assert_eq!(of(&[4, 84, 84, 3], true), Some(([12, 84, 84], true)));
        assert_eq!(of(&[4, 3, 64, 64], true), Some(([12, 64, 64], false)));
        assert_eq!(of(&[64, 48], true), Some(([1, 64, 48], false)));
        // Vectors, small matrices and frames already [C, H, W] stay as they are.
        for s in [
            &[4][..],
            &[64, 48],
            &[15, 64],
            &[3, 32, 32],
            &[12, 84, 84],
            &[16, 16, 3],
            &[2, 3, 4, 5],
        ] {
            assert_eq!(of(s, s.len() != 2 || s[0] == 15), None, "{s:?}");
        }
    }

    #[test]
    fn stacks_of_channels_last_frames_are_reordered_frame_by_frame() {
        // Two frames of 17x4 with 3 channels; value = a code of (t, h, w, c).
        let l = FrameLayout::of(&[2, 17, 4, 3], true).unwrap();
        let code =
            |t: usize, h: usize, w: usize, c: usize| (t * 1000 + h * 100 + w * 10 + c) as u32;
        let mut stored = vec![];
        for t in 0..2 {
            for h in 0..17 {
                for w in 0..4 {
                    for c in 0..3 {
                        stored.push(code(t, h, w, c));
                    }
                }
            }
        }
        // Two rows, as bytes of f32-sized values, reordered in place.
        let mut bytes: Vec<u8> = stored
            .iter()
            .chain(&stored)
            .flat_map(|v| v.to_le_bytes())
            .collect();
        l.reorder_bytes(&mut bytes, 4);
        let read: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let [_, hh, ww] = l.shape();
        for row in read.chunks_exact(l.len()) {
            for t in 0..2 {
                for c in 0..3 {
                    for h in 0..hh {
                        for w in 0..ww {
                            let at = ((t * 3 + c) * hh + h) * ww + w;
                            assert_eq!(row[at], code(t, h, w, c));
                        }
                    }
                }
            }
        }
    }
}
