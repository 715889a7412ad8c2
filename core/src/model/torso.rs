//! A torso: an optional convolution stem, then Linear layers, each with the
//! activation, the Linear layers with optional LayerNorm placed before or
//! after it. Observations arrive as rows `[N, H * W * C]` (channels last, as
//! envs give them); the stem runs on burn's NCHW tensors and its output is
//! flattened channels first, as PyTorch's CNNs do, so its tensors have
//! PyTorch's shapes and order (the fused layout converts at
//! [`crate::model::flat`] and in the file).

use crate::config::{Activation, ConvLayer, Init, LayerNormPlacement};
use burn::module::{Initializer, Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, PaddingConfig2d};
use burn::tensor::activation;
use burn::tensor::{Tensor, TensorData, backend::Backend};

/// A linear layer with weights from `init` (orthogonal with `gain`, or LeCun
/// uniform `U(+-sqrt(3 / fan_in))`) and the given bias (zeros when `None`).
pub fn linear<B: Backend>(
    d_in: usize,
    d_out: usize,
    init: Init,
    gain: f64,
    bias: Option<Vec<f32>>,
    device: &B::Device,
) -> Linear<B> {
    let weight = match init {
        Init::Orthogonal => super::orthogonal::orthogonal([d_in, d_out], gain, device),
        // Kaiming-uniform with gain 1 is sqrt(3) / sqrt(fan_in): LeCun uniform.
        Init::LecunUniform => Initializer::KaimingUniform {
            gain: 1.0,
            fan_out_only: false,
        }
        .init_with([d_in, d_out], Some(d_in), Some(d_out), device),
    };
    let bias = bias.unwrap_or_else(|| vec![0.0; d_out]);
    Linear {
        weight,
        bias: Some(Param::from_tensor(Tensor::from_data(
            TensorData::new(bias, [d_out]),
            device,
        ))),
    }
}

/// A convolution layer with weights from `init` (orthogonal with gain
/// sqrt(2) over each filter's `c_in * kh * kw` taps, as PyTorch's
/// `orthogonal_`, or LeCun uniform over that fan-in) and a zero bias.
fn conv<B: Backend>(c_in: usize, l: &ConvLayer, init: Init, device: &B::Device) -> Conv2d<B> {
    let p = l.padding;
    let initializer = match init {
        // Replaced below before it is drawn (burn draws on first use).
        Init::Orthogonal => Initializer::Zeros,
        Init::LecunUniform => Initializer::KaimingUniform {
            gain: 1.0,
            fan_out_only: false,
        },
    };
    let mut c = Conv2dConfig::new([c_in, l.channels], [l.kernel, l.kernel])
        .with_stride([l.stride, l.stride])
        .with_padding(PaddingConfig2d::Explicit(p, p, p, p))
        .with_initializer(initializer)
        .init(device);
    if init == Init::Orthogonal {
        let shape = [l.channels, c_in, l.kernel, l.kernel];
        c.weight = super::orthogonal::orthogonal(shape, std::f64::consts::SQRT_2, device);
    }
    c.bias = Some(Param::from_tensor(Tensor::zeros([l.channels], device)));
    c
}

/// What a torso is made of.
pub struct TorsoSpec<'a> {
    /// The observation as an image `[H, W, C]` (needed by a stem).
    pub image: Option<[usize; 3]>,
    pub conv: &'a [ConvLayer],
    /// The stem's output width per sample (the observation's without a stem).
    pub stem_width: usize,
    pub hidden: &'a [usize],
}

#[derive(Module, Debug)]
pub struct Torso<B: Backend> {
    /// The convolution stem (empty for an MLP).
    pub conv: Vec<Conv2d<B>>,
    pub layers: Vec<Linear<B>>,
    /// One per layer when LayerNorm is on, else empty.
    pub norms: Vec<LayerNorm<B>>,
    #[module(skip)]
    pub activation: Activation,
    #[module(skip)]
    pub placement: LayerNormPlacement,
    /// The image a stem reads (`None` without one).
    #[module(skip)]
    pub image: Option<[usize; 3]>,
}

impl<B: Backend> Torso<B> {
    pub fn new(
        spec: &TorsoSpec<'_>,
        activation: Activation,
        placement: LayerNormPlacement,
        init: Init,
        device: &B::Device,
    ) -> Self {
        let gain = std::f64::consts::SQRT_2;
        let mut c_in = spec.image.map_or(0, |[_, _, c]| c);
        let conv = spec
            .conv
            .iter()
            .map(|l| {
                let layer = conv(c_in, l, init, device);
                c_in = l.channels;
                layer
            })
            .collect();
        let mut layers = Vec::with_capacity(spec.hidden.len());
        let mut norms = Vec::new();
        let mut width = spec.stem_width;
        for &h in spec.hidden {
            layers.push(linear(width, h, init, gain, None, device));
            if placement != LayerNormPlacement::None {
                norms.push(LayerNormConfig::new(h).init(device));
            }
            width = h;
        }
        Self {
            conv,
            layers,
            norms,
            activation,
            placement,
            image: spec.image.filter(|_| !spec.conv.is_empty()),
        }
    }

    fn act<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        match self.activation {
            Activation::Tanh => x.tanh(),
            Activation::Relu => activation::relu(x),
        }
    }

    /// The stem over rows `[N, H * W * C]`, flattened channels first:
    /// `[N, C' * H' * W']` (the rows themselves without a stem).
    fn stem(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let Some([h, w, c]) = self.image else {
            return x;
        };
        let n = x.dims()[0];
        let mut y = x.reshape([n, h, w, c]).permute([0, 3, 1, 2]);
        for layer in &self.conv {
            y = self.act(layer.forward(y));
        }
        let [_, c, h, w] = y.dims();
        y.reshape([n, c * h * w])
    }

    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let mut x = self.stem(x);
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x);
            x = match (self.placement, self.norms.get(i)) {
                (LayerNormPlacement::Pre, Some(n)) => self.act(n.forward(x)),
                (LayerNormPlacement::Post, Some(n)) => n.forward(self.act(x)),
                _ => self.act(x),
            };
        }
        x
    }
}
