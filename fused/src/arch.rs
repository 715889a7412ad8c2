//! What the network is, in the fused engine's terms: enough to place every
//! parameter ([`crate::net::Layout`]) and run the passes.

use serde::{Deserialize, Serialize};

/// A hidden layer's nonlinearity (`network.activation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    Tanh,
    Relu,
}

impl Activation {
    pub fn as_str(self) -> &'static str {
        match self {
            Activation::Tanh => "tanh",
            Activation::Relu => "relu",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "tanh" => Some(Activation::Tanh),
            "relu" => Some(Activation::Relu),
            _ => None,
        }
    }
}

/// The actor-critic network: torso(s) of dense layers, a policy head of
/// `head_dim` outputs and a value head.
#[derive(Clone, Debug, PartialEq)]
pub struct Arch {
    pub obs_dim: usize,
    pub head_dim: usize,
    /// Hidden widths, input side first.
    pub hidden: Vec<usize>,
    /// One torso for both heads (else the critic has its own).
    pub shared_torso: bool,
    pub activation: Activation,
    /// Whether the network normalises observations (`obs_norm.*` tensors).
    pub obs_norm: bool,
    /// The normaliser's clip (`network.obs_clip`).
    pub obs_clip: f64,
}
