//! The multi-layer perceptron of every fully connected network: forward models, Q-networks,
//! fitted value networks and the exported model evaluated on the host.

use anyhow::{bail, Context, Result};
use candle_core::Tensor;
use candle_nn::{Linear, Module, VarBuilder};

/// A ReLU multi-layer perceptron: `dims[0] -> dims[1] -> ... -> dims[L]`, no activation
/// after the last layer. Layers are named `layers.{i}` (the export format's names).
///
/// ```
/// use candle_nn::Module;
/// let (_vm, vb) = laq::nn::new_varmap(&candle_core::Device::Cpu);
/// let mlp = laq::nn::Mlp::new(vb, &[2, 8, 3])?;
/// let x = candle_core::Tensor::zeros((4, 2), candle_core::DType::F32, &candle_core::Device::Cpu)?;
/// assert_eq!(mlp.forward(&x)?.dims(), &[4, 3]);
/// # Ok::<(), anyhow::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Mlp {
    pub layers: Vec<Linear>,
}

impl Mlp {
    /// Fresh layers under `vb` (initialise them with [`super::init_vars`]).
    pub fn new(vb: VarBuilder, dims: &[usize]) -> Result<Self> {
        if dims.len() < 2 {
            bail!("an MLP needs at least an input and an output size, got {dims:?}");
        }
        let layers = dims
            .windows(2)
            .enumerate()
            .map(|(i, w)| candle_nn::linear(w[0], w[1], vb.pp(format!("layers.{i}"))))
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Mlp { layers })
    }

    /// Layers from given weights `[out, in]` and biases `[out]` (e.g. an exported model's).
    pub fn from_layers(layers: Vec<(Tensor, Tensor)>) -> Self {
        Mlp {
            layers: layers
                .into_iter()
                .map(|(w, b)| Linear::new(w, Some(b)))
                .collect(),
        }
    }

    /// The forward pass of `[n, in]` inputs with each layer's weight passed through
    /// `weight` first: int8 calibration rounds them there, with the gradient passed
    /// straight through.
    pub fn forward_with(
        &self,
        x: &Tensor,
        weight: impl Fn(&Tensor) -> candle_core::Result<Tensor>,
    ) -> candle_core::Result<Tensor> {
        let mut h = x.clone();
        let last = self.layers.len() - 1;
        for (i, l) in self.layers.iter().enumerate() {
            h = h.matmul(&weight(l.weight())?.t()?)?;
            if let Some(b) = l.bias() {
                h = super::ops::add_bias(&h, b)?;
            }
            if i < last {
                h = super::ops::relu(&h)?;
            }
        }
        Ok(h)
    }

    /// The forward pass with a ReLU after the last layer too (an encoder whose output feeds
    /// another layer).
    pub fn forward_relu(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.layers
            .iter()
            .try_fold(x.clone(), |h, l| super::ops::dense(l, &h, true))
    }

    /// Weights `[out, in]` and biases `[out]` of every layer, as host vectors.
    pub fn to_host(&self) -> Result<Vec<(Vec<usize>, Vec<f32>, Vec<f32>)>> {
        self.layers
            .iter()
            .map(|l| {
                let w = l.weight();
                let b = l.bias().context("layer without bias")?;
                Ok((w.dims().to_vec(), w.flatten_all()?.to_vec1()?, b.to_vec1()?))
            })
            .collect()
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let mut h = x.clone();
        let last = self.layers.len() - 1;
        for (i, l) in self.layers.iter().enumerate() {
            h = super::ops::dense(l, &h, i < last)?;
        }
        Ok(h)
    }
}
