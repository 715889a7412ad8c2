//! Where every parameter lives in the flat vector, block by block: the
//! [`crate::Arch`]'s description placed.

use crate::arch::{Shape, Shaped};
use crate::conv::{Conv, ConvAt};
use crate::pool::Pool;
use crate::{Activation, Arch, ObsNorm};

/// One linear layer's place in the parameter vector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dense {
    /// Offset of the `[d_in, d_out]` weight.
    pub w: usize,
    /// Offset of the `[d_out]` bias.
    pub b: usize,
    pub d_in: usize,
    pub d_out: usize,
}

/// The policy head's place in the parameter vector: a linear layer whose
/// weight is stored an action per row (`[d_out, d_in]`, the transpose of a
/// [`Dense`] weight), so that a game's mostly masked head reads and writes
/// the contiguous rows of its allowed actions alone
/// ([`crate::sparse_head`]). burn's and the file's `[d_in, d_out]` order is
/// restored at their edges ([`crate::tensors`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Head {
    /// Offset of the `[d_out, d_in]` weight.
    pub w: usize,
    /// Offset of the `[d_out]` bias.
    pub b: usize,
    pub d_in: usize,
    pub d_out: usize,
}

impl Head {
    /// Its offsets and sizes as a [`Dense`] has them (the weight's order
    /// differs: only for listing where the values are).
    pub fn as_dense(&self) -> Dense {
        let Head { w, b, d_in, d_out } = *self;
        Dense { w, b, d_in, d_out }
    }
}

/// One block placed: its parameters' offsets and its shapes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BlockAt {
    Conv {
        at: ConvAt,
        activate: bool,
    },
    MaxPool(Pool),
    /// `x + conv1(act(conv0(act(x))))`.
    Residual {
        conv0: ConvAt,
        conv1: ConvAt,
    },
    Activate(Shape),
    /// `input`: what it reads (an image is read flattened).
    Dense {
        at: Dense,
        input: Shape,
    },
}

impl BlockAt {
    /// Floats per sample it writes.
    pub fn out_len(&self) -> usize {
        match self {
            BlockAt::Conv { at, .. } => at.conv.out_len(),
            BlockAt::MaxPool(p) => p.out_len(),
            BlockAt::Residual { conv1, .. } => conv1.conv.out_len(),
            BlockAt::Activate(s) => s.len(),
            BlockAt::Dense { at, .. } => at.d_out,
        }
    }

    /// Floats per sample it reads.
    pub fn in_len(&self) -> usize {
        match self {
            BlockAt::Conv { at, .. } => at.conv.in_len(),
            BlockAt::MaxPool(p) => p.in_len(),
            BlockAt::Residual { conv0, .. } => conv0.conv.in_len(),
            BlockAt::Activate(s) => s.len(),
            BlockAt::Dense { at, .. } => at.d_in,
        }
    }

    /// Floats per sample it keeps besides its output for the way back: a
    /// residual block's two activations.
    pub fn inner_len(&self) -> usize {
        match self {
            BlockAt::Residual { conv0, .. } => 2 * conv0.conv.in_len(),
            _ => 0,
        }
    }
}

/// A torso: its blocks in order, and the shape it hands the heads.
#[derive(Clone, Debug, PartialEq)]
pub struct Torso {
    pub blocks: Vec<BlockAt>,
    pub output: Shape,
}

impl Torso {
    /// Floats per sample of its output (the heads' input).
    pub fn width(&self) -> usize {
        self.output.len()
    }

    /// Whether its first block is a dense layer reading the observations
    /// (which may then be read as their nonzero entries).
    pub fn reads_flat_input(&self) -> bool {
        matches!(self.blocks.first(), Some(BlockAt::Dense { .. }))
    }
}

/// Where every parameter is, for one [`Arch`]: the actor torso, the critic
/// torso (unless shared), the policy head, the value head; each block's
/// weights then biases, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub obs_dim: usize,
    pub head_dim: usize,
    pub actor: Torso,
    /// `None`: the critic shares the actor's torso.
    pub critic: Option<Torso>,
    pub policy: Head,
    pub value: Dense,
    pub activation: Activation,
    /// [`Arch::input_scale`].
    pub input_scale: f32,
    /// Total parameter count.
    pub len: usize,
}

/// Hands out consecutive places in the flat vector.
struct Places(usize);

impl Places {
    fn dense(&mut self, d_in: usize, d_out: usize) -> Dense {
        let d = Dense {
            w: self.0,
            b: self.0 + d_in * d_out,
            d_in,
            d_out,
        };
        self.0 += d_in * d_out + d_out;
        d
    }

    fn conv(&mut self, conv: Conv) -> ConvAt {
        let Dense { w, b, .. } = self.dense(conv.patch(), conv.c_out);
        ConvAt { conv, w, b }
    }

    fn torso(&mut self, shapes: &[Shaped], input: Shape) -> Torso {
        let blocks = shapes
            .iter()
            .map(|s| match *s {
                Shaped::Conv { conv, activate } => BlockAt::Conv {
                    at: self.conv(conv),
                    activate,
                },
                Shaped::MaxPool(p) => BlockAt::MaxPool(p),
                Shaped::Residual(conv) => BlockAt::Residual {
                    conv0: self.conv(conv),
                    conv1: self.conv(conv),
                },
                Shaped::Activate(s) => BlockAt::Activate(s),
                Shaped::Dense { input, d_out } => BlockAt::Dense {
                    at: self.dense(input.len(), d_out),
                    input,
                },
            })
            .collect();
        let output = shapes.last().map_or(input, Shaped::output);
        Torso { blocks, output }
    }
}

impl Layout {
    /// The layout of `arch`, which [`Arch::shapes`] has accepted (every
    /// network a run, an actor or a file names is checked first).
    pub fn new(arch: &Arch) -> Self {
        let shapes = arch
            .shapes()
            .unwrap_or_else(|e| panic!("an unchecked network reached the layout: {e}"));
        let mut places = Places(0);
        let actor = places.torso(&shapes, arch.input());
        let critic = (!arch.shared_torso).then(|| places.torso(&shapes, arch.input()));
        let width = actor.width();
        let Dense { w, b, d_in, d_out } = places.dense(width, arch.head_dim);
        let policy = Head { w, b, d_in, d_out };
        let value = places.dense(width, 1);
        Self {
            obs_dim: arch.obs_dim,
            head_dim: arch.head_dim,
            actor,
            critic,
            policy,
            value,
            activation: arch.activation,
            input_scale: arch.input_scale,
            len: places.0,
        }
    }

    /// An observation row as the torsos read it, in place: normalised when
    /// the network normalises (`norm`), else scaled by the input scale.
    pub fn input_row(&self, norm: Option<&ObsNorm>, row: &mut [f32]) {
        match norm {
            Some(n) => n.apply(row),
            None if self.input_scale != 1.0 => {
                row.iter_mut().for_each(|x| *x *= self.input_scale);
            }
            None => {}
        }
    }

    /// The torsos' output width (the heads' input).
    pub fn width(&self) -> usize {
        self.policy.d_in
    }

    /// The torsos.
    pub fn torsos(&self) -> impl Iterator<Item = &Torso> {
        std::iter::once(&self.actor).chain(&self.critic)
    }

    /// The widest activation (or its gradient) of any block, per sample.
    pub fn widest(&self) -> usize {
        self.torsos()
            .flat_map(|t| t.blocks.iter().flat_map(|b| [b.in_len(), b.out_len()]))
            .chain([self.obs_dim, self.head_dim])
            .max()
            .unwrap_or(1)
    }

    /// Floats per sample a forward pass keeps: every block's output and
    /// inner activations, the heads' outputs.
    pub fn floats_per_sample(&self) -> usize {
        let kept: usize = self
            .torsos()
            .flat_map(|t| &t.blocks)
            .map(|b| b.out_len() + b.inner_len())
            .sum();
        kept + self.obs_dim + self.head_dim + 1
    }
}
