//! Where every parameter lives in the flat vector: the [`crate::Arch`]'s
//! description placed, torso by torso ([`crate::block`]), then the heads.

use crate::ObsNorm;
use crate::arch::{Activation, Arch, BlockError};
use crate::block::Torso;
use crate::places::{Dense, Places};

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
    /// Floats of each env's state: every block's that carries one, the
    /// actor torso's first ([`Arch::state_width`]).
    pub state_width: usize,
    /// Total parameter count.
    pub len: usize,
}

impl Layout {
    /// The layout of `arch`, which [`Layout::try_new`] has accepted (every
    /// network a run, an actor or a file names is checked first).
    pub fn new(arch: &Arch) -> Self {
        Self::try_new(arch)
            .unwrap_or_else(|e| panic!("an unchecked network reached the layout: {e}"))
    }

    /// The layout of `arch`; refused when an image block has no image to
    /// read, or a block does not fit its input.
    pub fn try_new(arch: &Arch) -> Result<Self, BlockError> {
        let (mut places, mut state) = (Places(0), 0);
        let actor = Torso::place(arch, &mut places, &mut state)?;
        let critic = match arch.shared_torso {
            true => None,
            false => Some(Torso::place(arch, &mut places, &mut state)?),
        };
        let width = actor.width();
        let Dense { w, b, d_in, d_out } = places.dense(width, arch.head_dim);
        let policy = Head { w, b, d_in, d_out };
        let value = places.dense(width, 1);
        Ok(Self {
            obs_dim: arch.obs_dim,
            head_dim: arch.head_dim,
            actor,
            critic,
            policy,
            value,
            activation: arch.activation,
            input_scale: arch.input_scale,
            state_width: state,
            len: places.0,
        })
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

    /// Multiply-adds of one sample's forward pass: every torso block's
    /// matrix products, then the heads'. A game's sparse first layer and
    /// masked head do less (`sparse_input`, `sparse_head`); this counts
    /// them dense.
    pub fn forward_macs(&self) -> usize {
        let torsos: usize = self.torsos().map(Torso::macs).sum();
        torsos + self.policy.d_in * self.policy.d_out + self.value.d_in * self.value.d_out
    }

    /// Floating-point operations of one sample's gradient, two per
    /// multiply-add: the forward products, then each again for its
    /// weights' gradient and for its input's, but for a torso's first
    /// block, whose input (the observations) wants no gradient.
    pub fn gradient_flops(&self) -> usize {
        let first: usize = self
            .torsos()
            .filter_map(|t| t.blocks.first())
            .map(|b| b.macs())
            .sum();
        2 * (3 * self.forward_macs() - first)
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

#[cfg(test)]
mod tests;
