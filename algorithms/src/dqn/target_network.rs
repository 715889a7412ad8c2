//! DQN's target network: the parameters (in layout order) and the
//! observation normaliser as they were at the last sync, kept by the DQN
//! learner and read through the engine's [`Trainer::heads_with`]. The
//! engines hold no target of their own: it is the rule's state, so an
//! engine serves every algorithm through the same methods.

use crate::engine::{EngineError, ObsNorm, Steps};
use crate::trainer::Trainer;

/// A copy of the network, frozen between syncs.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetNetwork {
    params: Vec<f32>,
    norm: Option<ObsNorm>,
}

impl TargetNetwork {
    /// `trainer`'s network now: its parameters and its normaliser.
    pub fn of(trainer: &Trainer) -> Result<Self, EngineError> {
        Ok(Self {
            params: trainer.state()?.params,
            norm: trainer.obs_norm()?,
        })
    }

    /// Policy-head outputs (DQN's Q-values) of observation rows `obs`
    /// (a replay memory's draws, each read on its own) under this network,
    /// computed on `trainer`'s engine.
    pub fn heads(&self, trainer: &mut Trainer, obs: &[f32]) -> Vec<f32> {
        trainer.heads_with(&self.params, self.norm.as_ref(), &Steps::rows(obs))
    }

    /// Bytes its parameters hold.
    pub fn bytes(&self) -> usize {
        self.params.capacity() * 4
    }
}
