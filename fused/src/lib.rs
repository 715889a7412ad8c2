//! The fused engine's network: the actor-critic on flat f32 buffers, written
//! out by hand for CPU. burn's ndarray backend spends most of a small
//! network's time in per-operation overhead (tensor handles, allocations, an
//! f64 libm tanh per element), while here a pass is a few matrix products and
//! loops over reused buffers.
//!
//! This crate knows no burn and no RL algorithm: [`Arch`] says what the
//! network is (each torso a sequence of typed [`Block`]s, the one
//! description everything else derives from), [`block`] is the seam every
//! block type implements (its shapes, parameters, forward and backward),
//! [`net::Layout`] where each parameter lives in the flat vector,
//! [`net`] and [`backward`] are the passes, [`adam`] the optimizer step and
//! [`TrainState`] what a learner keeps (the parameters and Adam's moments in
//! layout order). [`file`] writes and reads the published file straight
//! from the flat vector, [`FusedPolicy`] acts with it. [`conv`] is the
//! convolution (forward and backward) and [`pool`] the max-pool, the
//! kernels under their blocks; [`tensors`] lists every parameter tensor in
//! burn's (and, for images, PyTorch's) order. The
//! PPO and DQN loss gradients that drive the backward pass live with the
//! algorithms (`sebulba_algorithms::engine::fused`); burn converts to and
//! from the flat vector at its own edge (`sebulba_core::model::flat`).
//!
//! [`PolicyState`] is what a policy remembers per env between steps (empty
//! for a network without memory) and [`Batching`] how an update's data is
//! cut for it, both derived from [`Arch`].
//!
//! Covered: torsos of convolutions, max-pools, residual blocks and dense
//! layers (separate or shared, tanh or relu) without LayerNorm, with or
//! without observation normalisation.

mod activation;
pub mod adam;
mod arch;
pub mod backward;
pub mod block;
pub mod conv;
pub mod file;
pub mod kernels;
mod memory;
pub mod net;
mod obs_norm;
mod param_tensor;
mod places;
mod policy;
pub mod pool;
pub mod sparse_head;
pub mod sparse_input;
pub mod tensors;

pub use adam::TrainState;
pub use arch::{
    Activation, Arch, Block, BlockError, Cell, ConvLayer, Core, Shape, Stack, torso_blocks,
};
pub use memory::{Batching, PolicyState, Seats, Sequence, Steps};
pub use obs_norm::{OBS_NORM_EPS, ObsNorm};
pub use policy::FusedPolicy;

/// Weights that cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    #[error("safetensors: {0}")]
    Store(String),
    #[error("weights do not fit the model: {0}")]
    Mismatch(String),
    #[error("weights contain a non-finite value in `{0}`")]
    NonFinite(String),
}
