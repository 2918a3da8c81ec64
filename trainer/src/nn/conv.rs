//! Convolutional networks for image observations `[C, H, W]`.
//!
//! Inside the networks images are channels-last, `[B, H * W, C]`: a convolution is then a
//! gather of each output pixel's input patch followed by one matrix product, one node of
//! the graph on the CPU ([`super::ops::patch_dense`]; elsewhere candle's `index_select`,
//! whose backward pass is a scatter-add, then the product), and the transposed
//! convolutions of the decoders are a matrix product per pixel followed by a depth-to-space
//! reshuffle. On one CPU core this is several times faster than candle's `conv2d` /
//! `conv_transpose2d`, whose weight gradients and transposed forward pass are direct loops.

use crate::data::Observations;
use anyhow::{bail, Result};
use candle_core::Tensor;
use candle_nn::{Linear, VarBuilder};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Which network a stage builds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    /// Convolutional for image observations `[C, H, W]`, fully connected otherwise.
    #[default]
    Auto,
    /// Fully connected on the flattened observation.
    Mlp,
    /// Convolutional (needs `[C, H, W]` observations).
    Conv,
}

impl Arch {
    /// Whether the network for observations of `shape` is convolutional.
    pub fn is_conv(self, shape: &[usize]) -> Result<bool> {
        match self {
            Arch::Auto => Ok(shape.len() == 3),
            Arch::Mlp => Ok(false),
            Arch::Conv if shape.len() == 3 => Ok(true),
            Arch::Conv => bail!(
                "arch `conv` needs image observations of shape [C, H, W]; this dataset's \
                 observations have shape {shape:?}"
            ),
        }
    }
}

/// The convolutional trunk shared by the forward model and the Q-network.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConvConfig {
    /// Output channels of the encoder's 4x4 stride-2 convolutions, each halving the height
    /// and width (the forward model's decoder mirrors them with 2x2 stride-2 transposed
    /// convolutions).
    pub channels: Vec<usize>,
}

impl Default for ConvConfig {
    /// Three layers, 16-32-32 channels: a 32x32 frame becomes a 4x4x32 feature map.
    fn default() -> Self {
        ConvConfig {
            channels: vec![16, 32, 32],
        }
    }
}

/// Channels, height and width of an image observation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageShape {
    pub c: usize,
    pub h: usize,
    pub w: usize,
}

impl ImageShape {
    /// The shape `[C, H, W]`, checked against an encoder of `layers` stride-2 layers: each
    /// halves H and W, rounding down (any size works), and at least one pixel must be left.
    pub fn new(shape: &[usize], layers: usize) -> Result<Self> {
        let &[c, h, w] = shape else {
            bail!("a convolutional network needs observations of shape [C, H, W], got {shape:?}");
        };
        if layers == 0 {
            bail!("`conv.channels` is empty: the encoder needs at least one layer");
        }
        if layers > laq_runtime::MAX_CONV_LAYERS {
            bail!(
                "`conv.channels` has {layers} layers; the runtime evaluates at most {}",
                laq_runtime::MAX_CONV_LAYERS
            );
        }
        if c == 0 || layers >= usize::BITS as usize || (h >> layers) == 0 || (w >> layers) == 0 {
            bail!(
                "images of {h}x{w} pixels are too small for {layers} stride-2 layers (each \
                 halves the height and width): shorten `conv.channels`"
            );
        }
        Ok(ImageShape { c, h, w })
    }

    /// Height and width after `i` stride-2 layers.
    pub fn level(&self, i: usize) -> (usize, usize) {
        (self.h >> i, self.w >> i)
    }

    pub fn len(&self) -> usize {
        self.c * self.h * self.w
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Per-channel standardisation, applied while an image is copied from its stored
/// `[C, H, W]` layout to the networks' channels-last one.
#[derive(Clone, Debug)]
pub struct ChannelNorm {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
    /// Standardised value of every u8 in every channel: `[C * 256]`.
    table: Vec<f32>,
}

impl ChannelNorm {
    pub fn new(mean: Vec<f32>, std: Vec<f32>) -> Self {
        let table = mean
            .iter()
            .zip(&std)
            .flat_map(|(&m, &s)| (0..256).map(move |v| (v as f32 - m) / s))
            .collect();
        ChannelNorm { mean, std, table }
    }

    /// Mean and standard deviation of each channel over every observation (one pass, no
    /// copy of the store); a channel with no spread gets std 1.
    pub fn of(obs: &Observations, shape: ImageShape) -> Self {
        let plane = shape.h * shape.w;
        let mut sum = vec![0f64; shape.c];
        let mut sq = vec![0f64; shape.c];
        let mut add = |j: usize, v: f64| {
            let c = (j / plane) % shape.c;
            sum[c] += v;
            sq[c] += v * v;
        };
        match obs {
            Observations::F32(v) => v.iter().enumerate().for_each(|(j, &x)| add(j, x as f64)),
            Observations::U8(v) => v.iter().enumerate().for_each(|(j, &x)| add(j, x as f64)),
        }
        let n = (obs.len() / shape.len().max(1) * plane).max(1) as f64;
        let mean: Vec<f32> = sum.iter().map(|s| (s / n) as f32).collect();
        let std = sum
            .iter()
            .zip(&sq)
            .map(|(s, q)| {
                let m = s / n;
                let sd = (q / n - m * m).max(0.0).sqrt();
                if sd > 1e-6 {
                    sd as f32
                } else {
                    1.0
                }
            })
            .collect();
        ChannelNorm::new(mean, std)
    }

    /// Row `i` of `obs`, standardised and channels-last, into `out` (`shape.len()` values).
    pub fn fill(&self, obs: &Observations, i: usize, shape: ImageShape, out: &mut [f32]) {
        let d = shape.len();
        let plane = shape.h * shape.w;
        let c_n = shape.c;
        match obs {
            Observations::U8(v) => {
                let row = &v[i * d..(i + 1) * d];
                for c in 0..c_n {
                    let t = &self.table[c * 256..(c + 1) * 256];
                    let src = &row[c * plane..(c + 1) * plane];
                    for (p, &x) in src.iter().enumerate() {
                        out[p * c_n + c] = t[x as usize];
                    }
                }
            }
            Observations::F32(v) => self.fill_raw(&v[i * d..(i + 1) * d], shape, out),
        }
    }

    /// One raw `[C, H, W]` observation, standardised and channels-last, into `out`.
    pub fn fill_raw(&self, row: &[f32], shape: ImageShape, out: &mut [f32]) {
        let plane = shape.h * shape.w;
        let c_n = shape.c;
        for c in 0..c_n {
            let (m, s) = (self.mean[c], self.std[c]);
            for (p, &x) in row[c * plane..(c + 1) * plane].iter().enumerate() {
                out[p * c_n + c] = (x - m) / s;
            }
        }
    }
}

/// A convolution on channels-last maps: every output pixel's `k x k` patch is gathered
/// (zero outside the image) and multiplied by one `[out, k * k * in]` weight matrix.
#[derive(Clone, Debug)]
pub struct Conv {
    linear: Linear,
    /// Flattened-pixel index of every patch element; `h * w` points at an appended zero.
    idx: Tensor,
    /// The same indices as runs, for [`super::ops::patch_dense`].
    patches: Arc<super::ops::Patches>,
    cin: usize,
    pub out_hw: (usize, usize),
}

impl Conv {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        vb: VarBuilder,
        cin: usize,
        cout: usize,
        k: usize,
        stride: usize,
        pad: usize,
        (h, w): (usize, usize),
    ) -> Result<Self> {
        if h + 2 * pad < k || w + 2 * pad < k || stride == 0 {
            bail!("a {k}x{k} convolution does not fit a {h}x{w} map");
        }
        let ho = (h + 2 * pad - k) / stride + 1;
        let wo = (w + 2 * pad - k) / stride + 1;
        let zero = (h * w) as u32;
        let mut idx = Vec::with_capacity(ho * wo * k * k);
        for oy in 0..ho {
            for ox in 0..wo {
                for ky in 0..k {
                    for kx in 0..k {
                        let y = (oy * stride + ky) as isize - pad as isize;
                        let x = (ox * stride + kx) as isize - pad as isize;
                        let inside = y >= 0 && x >= 0 && (y as usize) < h && (x as usize) < w;
                        idx.push(if inside {
                            (y as usize * w + x as usize) as u32
                        } else {
                            zero
                        });
                    }
                }
            }
        }
        let n = idx.len();
        let patches = Arc::new(super::ops::Patches::new(&idx, h * w));
        let idx = Tensor::from_vec(idx, n, vb.device())?;
        Ok(Conv {
            linear: candle_nn::linear(k * k * cin, cout, vb)?,
            idx,
            patches,
            cin,
            out_hw: (ho, wo),
        })
    }

    /// `[B, h * w, in]` to `[B, ho * wo, out]`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.apply(x, false)
    }

    /// [`Conv::forward`], then a ReLU when `relu`.
    pub fn apply(&self, x: &Tensor, relu: bool) -> candle_core::Result<Tensor> {
        if let Some(y) = super::ops::patch_dense(&self.linear, x, &self.patches, relu)? {
            return Ok(y);
        }
        self.apply_gathered(x, relu)
    }

    /// [`Conv::apply`] as candle's operations: the map padded with a zero pixel, its
    /// patches gathered by `index_select`, then [`super::ops::dense`].
    fn apply_gathered(&self, x: &Tensor, relu: bool) -> candle_core::Result<Tensor> {
        let (b, _, c) = x.dims3()?;
        let zero = Tensor::zeros((b, 1, c), x.dtype(), x.device())?;
        let padded = Tensor::cat(&[x, &zero], 1)?;
        let (ho, wo) = self.out_hw;
        let cols = padded.index_select(&self.idx, 1)?.reshape((
            b,
            ho * wo,
            self.idx.dim(0)? / (ho * wo) * self.cin,
        ))?;
        super::ops::dense(&self.linear, &cols, relu)
    }
}

/// A 2x2 stride-2 transposed convolution on channels-last maps: each input pixel becomes a
/// 2x2 block of output pixels through one `[4 * out, in]` matrix (then depth-to-space).
/// When the map it mirrors had an odd side (the encoder rounded it down), the missing last
/// row or column is zeros.
#[derive(Clone, Debug)]
pub struct Up {
    linear: Linear,
    cout: usize,
    in_hw: (usize, usize),
    out_hw: (usize, usize),
}

impl Up {
    /// From `in_hw` to `out_hw`, which is `2 * in_hw` or one more on a side.
    pub fn new(
        vb: VarBuilder,
        cin: usize,
        cout: usize,
        in_hw: (usize, usize),
        out_hw: (usize, usize),
    ) -> Result<Self> {
        let fits = |i: usize, o: usize| o == 2 * i || o == 2 * i + 1;
        if !fits(in_hw.0, out_hw.0) || !fits(in_hw.1, out_hw.1) {
            bail!("a 2x upsampling cannot map {in_hw:?} to {out_hw:?}");
        }
        Ok(Up {
            linear: candle_nn::linear(cin, 4 * cout, vb)?,
            cout,
            in_hw,
            out_hw,
        })
    }

    /// `[B, h * w, in]` to `[B, out_h * out_w, out]`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let b = x.dim(0)?;
        let (h, w) = self.in_hw;
        // Outputs of pixel (i, j) are ordered (row parity, column parity, channel); moving
        // the row parity in front of j puts every output row in place.
        let y = super::ops::linear(&self.linear, x)?
            .reshape((b * h, w, 2, 2 * self.cout))?
            .transpose(1, 2)?
            .contiguous()?;
        let (ho, wo) = self.out_hw;
        if (ho, wo) == (2 * h, 2 * w) {
            return y.reshape((b, 4 * h * w, self.cout));
        }
        y.reshape((b, 2 * h, 2 * w, self.cout))?
            .pad_with_zeros(1, 0, ho - 2 * h)?
            .pad_with_zeros(2, 0, wo - 2 * w)?
            .reshape((b, ho * wo, self.cout))
    }
}

/// Stride-2 4x4 convolutions with ReLU after each: `[B, H * W, C]` to
/// `[B, (H / 2^L) * (W / 2^L), channels[L - 1]]`.
#[derive(Clone, Debug)]
pub struct Encoder {
    layers: Vec<Conv>,
    pub out_hw: (usize, usize),
    pub out_channels: usize,
}

impl Encoder {
    pub fn new(vb: VarBuilder, shape: ImageShape, channels: &[usize]) -> Result<Self> {
        if channels.contains(&0) {
            bail!("`conv.channels` {channels:?}: every layer needs at least one channel");
        }
        let mut layers = vec![];
        let (mut hw, mut cin) = ((shape.h, shape.w), shape.c);
        for (i, &cout) in channels.iter().enumerate() {
            let l = Conv::new(vb.pp(i.to_string()), cin, cout, 4, 2, 1, hw)?;
            hw = l.out_hw;
            cin = cout;
            layers.push(l);
        }
        Ok(Encoder {
            layers,
            out_hw: hw,
            out_channels: cin,
        })
    }

    /// Features of standardised channels-last rows `[B, H * W * C]`.
    pub fn forward(&self, x: &Tensor, shape: ImageShape) -> candle_core::Result<Tensor> {
        let b = x.dim(0)?;
        let mut h = x.reshape((b, shape.h * shape.w, shape.c))?;
        for l in &self.layers {
            h = l.apply(&h, true)?;
        }
        Ok(h)
    }

    /// The input as `[B, H * W, C]` and every layer's output, finest first.
    pub fn forward_all(&self, x: &Tensor, shape: ImageShape) -> candle_core::Result<Vec<Tensor>> {
        let b = x.dim(0)?;
        let mut maps = vec![x.reshape((b, shape.h * shape.w, shape.c))?];
        for l in &self.layers {
            let h = l.apply(&maps[maps.len() - 1], true)?;
            maps.push(h);
        }
        Ok(maps)
    }

    /// Output channels of every layer.
    pub fn channels(&self) -> Vec<usize> {
        self.layers
            .iter()
            .map(|l| l.linear.weight().dims()[0])
            .collect()
    }

    /// Every parameter, named as [`Encoder::new`] names it under its builder.
    pub fn tensors(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![];
        for (i, l) in self.layers.iter().enumerate() {
            v.push((format!("{i}.weight"), l.linear.weight().clone()));
            if let Some(b) = l.linear.bias() {
                v.push((format!("{i}.bias"), b.clone()));
            }
        }
        v
    }

    /// Values in the encoder's output map.
    pub fn out_len(&self) -> usize {
        self.out_hw.0 * self.out_hw.1 * self.out_channels
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn vb_on(dev: &Device) -> (candle_nn::VarMap, VarBuilder<'static>) {
        crate::nn::new_varmap(dev)
    }

    /// The gathered-patch convolution equals candle's own `conv2d` on the same weights.
    #[test]
    fn conv_matches_candle() {
        let dev = Device::Cpu;
        let (vm, vb) = vb_on(&dev);
        let (cin, cout, h, w) = (3, 5, 8, 6);
        let conv = Conv::new(vb.pp("c"), cin, cout, 4, 2, 1, (h, w)).unwrap();
        crate::nn::init_vars(&vm, 3).unwrap();
        let x_chw = Tensor::randn(0f32, 1.0, (2, cin, h, w), &dev).unwrap();
        let x_hwc = x_chw
            .permute((0, 2, 3, 1))
            .unwrap()
            .reshape((2, h * w, cin))
            .unwrap();
        let ours = conv.forward(&x_hwc).unwrap();
        // Our weight is [out, (ky, kx, in)]; candle's is [out, in, ky, kx].
        let wt = conv
            .linear
            .weight()
            .reshape((cout, 4, 4, cin))
            .unwrap()
            .permute((0, 3, 1, 2))
            .unwrap()
            .contiguous()
            .unwrap();
        let bias = conv
            .linear
            .bias()
            .unwrap()
            .reshape((1, cout, 1, 1))
            .unwrap();
        let theirs = x_chw
            .conv2d(&wt, 1, 2, 1, 1)
            .unwrap()
            .broadcast_add(&bias)
            .unwrap()
            .permute((0, 2, 3, 1))
            .unwrap()
            .reshape((2, 4 * 3, cout))
            .unwrap();
        let diff = (ours - theirs)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(diff < 1e-4, "{diff}");
    }

    /// The convolution as one node ([`crate::nn::ops::patch_dense`]) gives the values
    /// and gradients of candle's padded copy, `index_select` and [`crate::nn::ops::dense`],
    /// bit for bit: two layers, with and without a ReLU, on odd and even sizes, with the
    /// input a variable or not.
    #[test]
    fn one_node_matches_the_gathered_patches_bit_for_bit() {
        let dev = Device::Cpu;
        let bits = |t: &Tensor| -> Vec<u32> {
            let v: Vec<f32> = t.flatten_all().unwrap().to_vec1().unwrap();
            v.iter().map(|v| v.to_bits()).collect()
        };
        for (batch, cin, (h, w), relu, input_var, seed) in [
            (1, 1, (4, 4), true, false, 1),
            (3, 3, (8, 6), true, true, 2),
            (2, 4, (7, 9), false, true, 3),
            (5, 2, (16, 16), true, false, 4),
            (2, 3, (13, 10), true, true, 5),
        ] {
            let (vm, vb) = vb_on(&dev);
            let c1 = Conv::new(vb.pp("a"), cin, 6, 4, 2, 1, (h, w)).unwrap();
            let c2 = Conv::new(vb.pp("b"), 6, 5, 4, 2, 1, c1.out_hw).unwrap();
            crate::nn::init_vars(&vm, seed).unwrap();
            let x = candle_core::Var::from_tensor(
                &Tensor::randn(0f32, 1.0, (batch, h * w, cin), &dev).unwrap(),
            )
            .unwrap();
            let xt = if input_var {
                x.as_tensor().clone()
            } else {
                x.as_tensor().detach()
            };
            let loss = |y: Tensor| y.sqr().unwrap().sum_all().unwrap();
            let ours = c2.apply(&c1.apply(&xt, relu).unwrap(), relu).unwrap();
            let theirs = c2
                .apply_gathered(&c1.apply_gathered(&xt, relu).unwrap(), relu)
                .unwrap();
            assert_eq!(ours.dims(), theirs.dims());
            assert_eq!(bits(&ours), bits(&theirs), "{batch}x{cin}x{h}x{w}");
            let (g1, g2) = (
                loss(ours).backward().unwrap(),
                loss(theirs).backward().unwrap(),
            );
            let mut vars: Vec<Tensor> = vm
                .all_vars()
                .iter()
                .map(|v| v.as_tensor().clone())
                .collect();
            if input_var {
                vars.push(x.as_tensor().clone());
            } else {
                assert!(g1.get(x.as_tensor()).is_none());
            }
            for v in &vars {
                assert_eq!(
                    bits(g1.get(v).unwrap()),
                    bits(g2.get(v).unwrap()),
                    "gradient of {:?} at {batch}x{cin}x{h}x{w}",
                    v.dims()
                );
            }
        }
    }

    /// Each input pixel's 2x2 output block lands at (2i + a, 2j + b).
    #[test]
    fn up_places_blocks() {
        let dev = Device::Cpu;
        let (_vm, vb) = vb_on(&dev);
        let up = Up::new(vb, 1, 1, (2, 3), (4, 6)).unwrap();
        // Identity-like weights: output (a, b) of a pixel is its value + 10a + 20b; the
        // bias carries the offsets and the weight copies the input.
        let w = Tensor::new(&[[1f32], [1.], [1.], [1.]], &dev).unwrap();
        let bias = Tensor::new(&[0f32, 20., 10., 30.], &dev).unwrap();
        let up = Up {
            linear: Linear::new(w, Some(bias)),
            ..up
        };
        let x = Tensor::new(&[[[0f32], [100.], [200.], [300.], [400.], [500.]]], &dev).unwrap();
        let y: Vec<f32> = up
            .forward(&x)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(y.len(), 24);
        for i in 0..2 {
            for j in 0..3 {
                for a in 0..2 {
                    for b in 0..2 {
                        let v = y[(2 * i + a) * 6 + 2 * j + b];
                        let want = (i * 3 + j) as f32 * 100.0 + 10.0 * a as f32 + 20.0 * b as f32;
                        assert_eq!(v, want, "({i},{j}) parity ({a},{b})");
                    }
                }
            }
        }
    }

    #[test]
    fn shapes_and_norms() {
        assert!(ImageShape::new(&[3, 32, 32], 3).is_ok());
        // Any size works: each layer rounds down (84 -> 42 -> 21 -> 10).
        assert_eq!(ImageShape::new(&[4, 84, 84], 3).unwrap().level(3), (10, 10));
        assert_eq!(
            ImageShape::new(&[3, 210, 160], 4).unwrap().level(4),
            (13, 10)
        );
        let e = ImageShape::new(&[3, 7, 32], 3).unwrap_err().to_string();
        assert!(e.contains("too small"), "{e}");
        assert!(ImageShape::new(&[4], 1).is_err());
        assert!(Arch::Conv.is_conv(&[4]).is_err());
        assert!(Arch::Auto.is_conv(&[3, 8, 8]).unwrap());
        assert!(!Arch::Mlp.is_conv(&[3, 8, 8]).unwrap());

        let shape = ImageShape { c: 2, h: 1, w: 2 };
        // Two observations; channel 0 holds 0 and 2, channel 1 holds 10 and 30.
        let obs: Observations = vec![0u8, 2, 10, 30, 2, 0, 30, 10].into();
        let norm = ChannelNorm::of(&obs, shape);
        assert_eq!(norm.mean, vec![1.0, 20.0]);
        assert_eq!(norm.std, vec![1.0, 10.0]);
        let mut out = vec![0.0; 4];
        norm.fill(&obs, 0, shape, &mut out);
        // Channels-last: pixel 0 (c0, c1), pixel 1 (c0, c1).
        assert_eq!(out, vec![-1.0, -1.0, 1.0, 1.0]);
        let f: Observations = obs.to_f32().into_owned().into();
        let mut out2 = vec![0.0; 4];
        norm.fill(&f, 0, shape, &mut out2);
        assert_eq!(out, out2);
    }
}
