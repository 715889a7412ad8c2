//! What the network is, in the fused engine's terms: each torso a sequence
//! of typed blocks ([`Block`]), then the two heads. Everything else derives
//! from this one description: each block placed ([`crate::block`]), where
//! each parameter lives ([`crate::net::Layout`]), the passes, the published
//! file's tensors ([`crate::tensors`]), and burn's module
//! (`sebulba_core::model`).

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

/// One stack of the IMPALA ResNet (Espeholt et al. 2018; `network.stacks`):
/// a 3x3 convolution to `channels` (padding 1), a 3x3 max-pool with stride
/// 2 (padding 1), then `blocks` residual blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stack {
    pub channels: usize,
    #[serde(default = "two")]
    pub blocks: usize,
}

fn two() -> usize {
    2
}

/// A recurrent core's cell (`network.core`): PyTorch's `nn.LSTM` (gates
/// i, f, g, o) or `nn.GRU` (gates r, z, n).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cell {
    Lstm,
    Gru,
}

impl Cell {
    pub fn as_str(self) -> &'static str {
        match self {
            Cell::Lstm => "lstm",
            Cell::Gru => "gru",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "lstm" => Some(Cell::Lstm),
            "gru" => Some(Cell::Gru),
            _ => None,
        }
    }

    /// Gates per hidden unit: the rows of PyTorch's `weight_ih_l0` are
    /// `gates * size`.
    pub fn gates(self) -> usize {
        match self {
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }

    /// Vectors of `size` floats it carries from step to step: `h` and `c`
    /// for an LSTM, `h` for a GRU.
    pub fn carried(self) -> usize {
        match self {
            Cell::Lstm => 2,
            Cell::Gru => 1,
        }
    }
}

/// A recurrent core of `size` hidden units after a torso's other blocks
/// (`network.core`, `network.core_size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Core {
    pub cell: Cell,
    pub size: usize,
}

/// One block of a torso, input side first. Serialised tagged by `kind`
/// (`{"kind": "dense", "width": 64}`): how an export describes the network
/// to another framework (`sebulba export`'s `network.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Block {
    /// A convolution, then the network's activation when `activate`.
    Conv { layer: ConvLayer, activate: bool },
    /// Each channel's largest value in every `kernel x kernel` window, moved
    /// `stride` at a time; the `padding` on every side never wins.
    MaxPool {
        kernel: usize,
        stride: usize,
        padding: usize,
    },
    /// `x + conv(act(conv(act(x))))`, both convolutions 3x3 with padding 1
    /// and as many channels as `x`.
    Residual,
    /// The network's activation alone.
    Activate,
    /// A dense layer of `width` outputs, then the activation; it reads an
    /// image flattened.
    Dense { width: usize },
    /// A recurrent core: its output is its hidden state `h`, carried to the
    /// env's next step with (an LSTM) its cell `c`; it reads an image
    /// flattened.
    Recurrent(Core),
}

impl Block {
    /// Its name in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Block::Conv { .. } => "a convolution",
            Block::MaxPool { .. } => "a max-pool",
            Block::Residual => "a residual block",
            Block::Activate => "the activation",
            Block::Dense { .. } => "a dense layer",
            Block::Recurrent(Core {
                cell: Cell::Lstm, ..
            }) => "an LSTM core",
            Block::Recurrent(Core {
                cell: Cell::Gru, ..
            }) => "a GRU core",
        }
    }

    /// Floats the block keeps per env from one step to the next: a
    /// recurrent core's carried vectors, nothing for the others.
    pub fn state_width(&self) -> usize {
        match self {
            Block::Conv { .. }
            | Block::MaxPool { .. }
            | Block::Residual
            | Block::Activate
            | Block::Dense { .. } => 0,
            Block::Recurrent(core) => core.cell.carried() * core.size,
        }
    }
}

/// A torso's blocks from the configuration's three lists: the convolution
/// stem (`network.conv`, each layer followed by the activation), the IMPALA
/// stacks (`network.stacks`, followed by the activation as the IMPALA
/// network's ReLU before its dense layer), then the dense layers
/// (`network.hidden`), then the recurrent core when there is one
/// (`network.core`).
pub fn torso_blocks(
    conv: &[ConvLayer],
    stacks: &[Stack],
    hidden: &[usize],
    core: Option<Core>,
) -> Vec<Block> {
    let mut blocks: Vec<Block> = conv
        .iter()
        .map(|&layer| Block::Conv {
            layer,
            activate: true,
        })
        .collect();
    for s in stacks {
        let layer = ConvLayer {
            channels: s.channels,
            kernel: 3,
            stride: 1,
            padding: 1,
        };
        blocks.push(Block::Conv {
            layer,
            activate: false,
        });
        blocks.push(Block::MaxPool {
            kernel: 3,
            stride: 2,
            padding: 1,
        });
        blocks.extend(std::iter::repeat_n(Block::Residual, s.blocks));
    }
    if !stacks.is_empty() {
        blocks.push(Block::Activate);
    }
    blocks.extend(hidden.iter().map(|&width| Block::Dense { width }));
    blocks.extend(core.map(Block::Recurrent));
    blocks
}

/// What a block reads or writes per sample: an image `[H, W, C]` (channels
/// last) or a flat vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Image([usize; 3]),
    Flat(usize),
}

impl Shape {
    /// Floats per sample.
    pub fn len(&self) -> usize {
        match *self {
            Shape::Image([h, w, c]) => h * w * c,
            Shape::Flat(n) => n,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The image, when it is one.
    pub fn image(&self) -> Option<[usize; 3]> {
        match *self {
            Shape::Image(i) => Some(i),
            Shape::Flat(_) => None,
        }
    }
}

/// The actor-critic network: torso(s) of blocks, a policy head of
/// `head_dim` outputs and a value head.
#[derive(Clone, Debug, PartialEq)]
pub struct Arch {
    pub obs_dim: usize,
    pub head_dim: usize,
    /// The observation as an image `[H, W, C]` (channels last, `obs_dim =
    /// H * W * C`), which a convolution reads; `None`: a flat vector.
    pub image: Option<[usize; 3]>,
    /// Each torso's blocks, input side first ([`torso_blocks`]).
    pub torso: Vec<Block>,
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
    /// The observation's shape: the env's image, else a flat vector.
    pub fn input(&self) -> Shape {
        match self.image {
            Some(i) => Shape::Image(i),
            None => Shape::Flat(self.obs_dim),
        }
    }
}

/// A torso block that does not fit what it reads.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{reason}")]
pub struct BlockError {
    /// Its index in [`Arch::torso`].
    pub block: usize,
    pub reason: String,
}
