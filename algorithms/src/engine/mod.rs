//! The seam between the PPO loop and whatever computes a minibatch step. Two
//! engines implement [`UpdateEngine`]:
//!
//! - [`burn::BurnEngine`]: burn's autodiff on one or more devices (CPU or
//!   CUDA), each minibatch sharded over the replicas with a gradient all-reduce;
//! - [`fused::FusedEngine`]: the fused CPU engine, the forward pass, loss
//!   gradients and Adam written out by hand over flat buffers (one CPU device).
//!
//! Both keep a burn model as the source of the weights (what is published and
//! checkpointed), so a checkpoint written by either resumes on the other.

pub mod burn;
pub mod fused;
pub mod threads;

use crate::data::{Minibatch, StepStats};
use ::burn::tensor::backend::AutodiffBackend;
use burn::Replica;
use sebulba_core::model::{ModelSpec, RunningMeanStd};
use sebulba_core::weights::{WeightsError, to_safetensors};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("field `learner.devices`: needs at least one device")]
    NoDevices,
    #[error("registering learner replica {peer} with burn-collective: {reason}")]
    Register { peer: usize, reason: String },
    #[error("gradient all-reduce failed: {0}")]
    Collective(String),
    #[error("field `learner.engine`: the fused engine does not cover {0}")]
    Unsupported(String),
    #[error("{what}: {reason}")]
    Record { what: &'static str, reason: String },
}

/// An engine's part of a checkpoint: burn records (bytes) of the model, whose
/// parameter ids key Adam's state, and of Adam's state.
#[derive(Clone, PartialEq)]
pub struct EngineState {
    pub model: Vec<u8>,
    pub optim: Vec<u8>,
}

/// What the PPO loop asks of an engine.
pub trait UpdateEngine<B: AutodiffBackend>: Send {
    /// `burn` or `fused`.
    fn name(&self) -> &'static str;
    /// Threads a minibatch step may use (burn's own pool aside).
    fn threads(&self) -> usize {
        1
    }
    /// State values of observation rows `obs` (`[rows * obs_dim]`).
    fn values(&mut self, obs: &[f32]) -> Vec<f32>;
    /// Policy-head outputs of observation rows `obs` (`[rows * head_dim]`):
    /// the current policy, for V-trace's importance weights.
    fn heads(&mut self, obs: &[f32]) -> Vec<f32>;
    /// Keeps the current parameters (and observation statistics) as DQN's
    /// target network.
    fn sync_target(&mut self);
    /// Policy-head outputs of observation rows `obs` under the target
    /// network (the current parameters until the first [`Self::sync_target`]).
    fn target_heads(&mut self, obs: &[f32]) -> Vec<f32>;
    /// The observation normaliser's statistics for the coming update.
    fn set_obs_stats(&mut self, stats: &RunningMeanStd);
    /// The current weights as safetensors bytes (what is published).
    fn safetensors(&self, spec: &ModelSpec) -> Result<Vec<u8>, WeightsError> {
        to_safetensors(&self.replicas()[0].inference_model(), spec)
    }
    /// One minibatch step: loss, gradient, global-norm clipping and an Adam
    /// step, unless the approximate KL is past `target_kl` (`stepped` false).
    fn step(&mut self, mb: &Minibatch<'_>) -> Result<StepStats, EngineError>;
    /// After an update's last step: brings the burn model up to date.
    fn finish_update(&mut self);
    fn save(&mut self) -> Result<EngineState, EngineError>;
    fn load(&mut self, state: &EngineState) -> Result<(), EngineError>;
    /// The replicas holding the burn model (identical; the first is published).
    fn replicas(&self) -> &[Replica<B>];
}
