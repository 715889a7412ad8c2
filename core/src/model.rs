//! The actor-critic policy: separate actor and critic MLP torsos, a policy head
//! whose output a [`crate::distribution::ActionDist`] interprets, and a value head.
//! Orthogonal init with the PPO literature's gains (sqrt(2) hidden, 0.01 policy
//! head, 1.0 value head) and zero biases.

use crate::config::{Activation, NetworkConfig};
use crate::env::{ActionSpace, EnvSpec};
use burn::module::{Initializer, Module, Param};
use burn::nn::Linear;
use burn::tensor::activation;
use burn::tensor::{Tensor, backend::Backend};
use serde::{Deserialize, Serialize};

/// Everything needed to build the network: what the weights' shapes follow from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub obs_dim: usize,
    pub action_space: ActionSpace,
    pub network: NetworkConfig,
}

impl ModelSpec {
    pub fn new(env: &EnvSpec, network: &NetworkConfig) -> Self {
        Self {
            obs_dim: env.obs_dim,
            action_space: env.action_space.clone(),
            network: network.clone(),
        }
    }

    /// Width of the policy head's output (logits for a categorical head).
    pub fn head_dim(&self) -> usize {
        crate::distribution::head_dim(&self.action_space)
    }

    /// A freshly initialised model. Burn's init draws from the backend's global RNG,
    /// so the caller seeds it (`B::seed`) for reproducible runs.
    pub fn init<B: Backend>(&self, device: &B::Device) -> ActorCritic<B> {
        let hidden_gain = std::f64::consts::SQRT_2;
        ActorCritic {
            actor: Mlp::new(self.obs_dim, &self.network.hidden, hidden_gain, device),
            critic: Mlp::new(self.obs_dim, &self.network.hidden, hidden_gain, device),
            policy_head: linear(last_width(self), self.head_dim(), 0.01, device),
            value_head: linear(last_width(self), 1, 1.0, device),
            activation: self.network.activation,
        }
    }
}

fn last_width(spec: &ModelSpec) -> usize {
    spec.network.hidden.last().copied().unwrap_or(spec.obs_dim)
}

/// A linear layer with orthogonal weights of the given gain and a zero bias.
fn linear<B: Backend>(d_in: usize, d_out: usize, gain: f64, device: &B::Device) -> Linear<B> {
    Linear {
        weight: Initializer::Orthogonal { gain }.init([d_in, d_out], device),
        bias: Some(Param::from_tensor(Tensor::zeros([d_out], device))),
    }
}

#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    pub layers: Vec<Linear<B>>,
}

impl<B: Backend> Mlp<B> {
    fn new(d_in: usize, hidden: &[usize], gain: f64, device: &B::Device) -> Self {
        let mut layers = Vec::with_capacity(hidden.len());
        let mut width = d_in;
        for &h in hidden {
            layers.push(linear(width, h, gain, device));
            width = h;
        }
        Self { layers }
    }

    fn forward(&self, mut x: Tensor<B, 2>, act: Activation) -> Tensor<B, 2> {
        for layer in &self.layers {
            x = layer.forward(x);
            x = match act {
                Activation::Tanh => x.tanh(),
                Activation::Relu => activation::relu(x),
            };
        }
        x
    }
}

#[derive(Module, Debug)]
pub struct ActorCritic<B: Backend> {
    pub actor: Mlp<B>,
    pub critic: Mlp<B>,
    pub policy_head: Linear<B>,
    pub value_head: Linear<B>,
    #[module(skip)]
    pub activation: Activation,
}

impl<B: Backend> ActorCritic<B> {
    /// Raw policy-head output `[N, head_dim]` for observations `[N, obs_dim]`.
    pub fn policy(&self, obs: Tensor<B, 2>) -> Tensor<B, 2> {
        self.policy_head
            .forward(self.actor.forward(obs, self.activation))
    }

    /// State values `[N]` for observations `[N, obs_dim]`.
    pub fn value(&self, obs: Tensor<B, 2>) -> Tensor<B, 1> {
        let v = self
            .value_head
            .forward(self.critic.forward(obs, self.activation));
        let n = v.dims()[0];
        v.reshape([n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;
    use burn::tensor::TensorData;

    fn spec() -> ModelSpec {
        ModelSpec {
            obs_dim: 4,
            action_space: ActionSpace::Discrete { n: 2 },
            network: NetworkConfig {
                hidden: vec![64, 64],
                activation: Activation::Tanh,
            },
        }
    }

    #[test]
    fn shapes_and_init_gains() {
        let dev = Default::default();
        let m = spec().init::<CpuBackend>(&dev);
        let obs =
            Tensor::<CpuBackend, 2>::from_data(TensorData::new(vec![0.1f32; 12], [3, 4]), &dev);
        assert_eq!(m.policy(obs.clone()).dims(), [3, 2]);
        assert_eq!(m.value(obs).dims(), [3]);
        // Orthogonal [64, 64] with gain sqrt(2): W^T W = 2 I.
        let w = m.actor.layers[1].weight.val();
        let wtw: Vec<f32> = w
            .clone()
            .transpose()
            .matmul(w)
            .into_data()
            .to_vec()
            .unwrap();
        for i in 0..64 {
            for j in 0..64 {
                let want = if i == j { 2.0 } else { 0.0 };
                assert!(
                    (wtw[i * 64 + j] - want).abs() < 1e-4,
                    "({i},{j}) = {}",
                    wtw[i * 64 + j]
                );
            }
        }
        // Policy head gain 0.01: columns have norm 0.01, so initial logits are near zero.
        let h: Vec<f32> = m.policy_head.weight.val().into_data().to_vec().unwrap();
        let col0: f32 = (0..64).map(|r| h[r * 2] * h[r * 2]).sum::<f32>().sqrt();
        assert!((col0 - 0.01).abs() < 1e-5, "{col0}");
        let b: Vec<f32> = m
            .value_head
            .bias
            .as_ref()
            .unwrap()
            .val()
            .into_data()
            .to_vec()
            .unwrap();
        assert_eq!(b, vec![0.0]);
    }
}
