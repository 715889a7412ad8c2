//! What the network is, in the fused engine's terms: enough to place every
//! parameter ([`crate::net::Layout`]) and run the passes.

use crate::conv::Conv;
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

/// One convolution layer of a torso's stem (`network.conv`): `channels`
/// filters of `kernel x kernel`, moved `stride` at a time over the input,
/// with `padding` zeros on every side (0: VALID). Followed by the network's
/// activation, like a dense layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvLayer {
    pub channels: usize,
    pub kernel: usize,
    #[serde(default = "one")]
    pub stride: usize,
    #[serde(default)]
    pub padding: usize,
}

fn one() -> usize {
    1
}

/// The actor-critic network: torso(s) of an optional convolution stem then
/// dense layers, a policy head of `head_dim` outputs and a value head.
#[derive(Clone, Debug, PartialEq)]
pub struct Arch {
    pub obs_dim: usize,
    pub head_dim: usize,
    /// The observation as an image `[H, W, C]` (channels last, `obs_dim =
    /// H * W * C`), which a convolution stem reads; `None`: a flat vector.
    pub image: Option<[usize; 3]>,
    /// Each torso's convolution layers, input side first, before its dense
    /// layers (empty: an MLP).
    pub conv: Vec<ConvLayer>,
    /// Hidden widths, input side first.
    pub hidden: Vec<usize>,
    /// One torso for both heads (else the critic has its own).
    pub shared_torso: bool,
    pub activation: Activation,
    /// Whether the network normalises observations (`obs_norm.*` tensors).
    pub obs_norm: bool,
    /// The normaliser's clip (`network.obs_clip`).
    pub obs_clip: f64,
    /// What observations are multiplied by before the first layer when the
    /// network does not normalise them: 1/255 for an Atari frame's bytes, 1
    /// for everything already on a unit scale.
    pub input_scale: f32,
}

impl Arch {
    /// The convolution stem's layers with their input shapes, input side
    /// first; refused when there is a stem but no image to read, or a layer
    /// that does not fit its input. Every network is checked with this
    /// before [`crate::net::Layout::new`] places it.
    pub fn stem(&self) -> Result<Vec<Conv>, String> {
        if self.conv.is_empty() {
            return Ok(Vec::new());
        }
        let Some([h, w, c]) = self.image else {
            return Err(format!(
                "a convolution stem needs an image observation (H, W, C); this one is a flat vector of {}",
                self.obs_dim
            ));
        };
        if h * w * c != self.obs_dim {
            return Err(format!(
                "the image {h}x{w}x{c} does not hold the {} observation values",
                self.obs_dim
            ));
        }
        let (mut h, mut w, mut c_in) = (h, w, c);
        let mut stem = Vec::with_capacity(self.conv.len());
        for (i, l) in self.conv.iter().enumerate() {
            let layer = Conv {
                h,
                w,
                c_in,
                c_out: l.channels,
                kh: l.kernel,
                kw: l.kernel,
                stride: l.stride,
                pad: l.padding,
            };
            layer.check().map_err(|e| format!("layer {i}: {e}"))?;
            (h, w, c_in) = (layer.out_h(), layer.out_w(), layer.c_out);
            stem.push(layer);
        }
        Ok(stem)
    }
}
