//! A torso: Linear layers with an activation and optional LayerNorm placed before
//! or after it.

use crate::config::{Activation, Init, LayerNormPlacement};
use burn::module::{Initializer, Module, Param};
use burn::nn::{LayerNorm, LayerNormConfig, Linear};
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
        Init::Orthogonal => Initializer::Orthogonal { gain }.init([d_in, d_out], device),
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

#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    pub layers: Vec<Linear<B>>,
    /// One per layer when LayerNorm is on, else empty.
    pub norms: Vec<LayerNorm<B>>,
    #[module(skip)]
    pub activation: Activation,
    #[module(skip)]
    pub placement: LayerNormPlacement,
}

impl<B: Backend> Mlp<B> {
    pub fn new(
        d_in: usize,
        hidden: &[usize],
        activation: Activation,
        placement: LayerNormPlacement,
        init: Init,
        device: &B::Device,
    ) -> Self {
        let gain = std::f64::consts::SQRT_2;
        let mut layers = Vec::with_capacity(hidden.len());
        let mut norms = Vec::new();
        let mut width = d_in;
        for &h in hidden {
            layers.push(linear(width, h, init, gain, None, device));
            if placement != LayerNormPlacement::None {
                norms.push(LayerNormConfig::new(h).init(device));
            }
            width = h;
        }
        Self {
            layers,
            norms,
            activation,
            placement,
        }
    }

    fn act(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        match self.activation {
            Activation::Tanh => x.tanh(),
            Activation::Relu => activation::relu(x),
        }
    }

    pub fn forward(&self, mut x: Tensor<B, 2>) -> Tensor<B, 2> {
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
