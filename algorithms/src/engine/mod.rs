//! The seam between the update loops and whatever computes a minibatch step.
//! Two engines implement [`UpdateEngine`]:
//!
//! - [`burn::BurnEngine`]: burn's autodiff on one or more devices (CPU or
//!   CUDA), each minibatch sharded over the replicas with a gradient all-reduce;
//! - [`fused::FusedEngine`]: the fused CPU engine (`sebulba-fused`'s network
//!   on flat buffers, with the PPO and DQN loss gradients written out here).
//!
//! Both save and load a [`TrainState`] (the parameters and Adam's moments in
//! the fused layout's order), so a checkpoint written by either resumes on the
//! other; burn converts at its own edge. Nothing outside [`burn`] knows burn's
//! backends: which one runs is [`EngineChoice`], a value chosen once.

pub mod burn;
pub mod fused;
pub mod threads;

pub use sebulba_fused::{ObsNorm, Steps, TrainState};

use crate::data::{Minibatch, StepStats, UpdateData};
use fused::FusedEngine;
use sebulba_core::config::RunConfig;
use sebulba_core::devices::LearnerDevices;
use sebulba_core::model::{ModelSpec, RunningMeanStd};
use sebulba_core::weights::WeightsError;
use threads::{auto_threads, cores};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("field `learner.devices`: needs at least one device")]
    NoDevices,
    #[error("field `learner.devices`: {0}")]
    Devices(String),
    #[error("registering learner replica {peer} with burn-collective: {reason}")]
    Register { peer: usize, reason: String },
    #[error("gradient all-reduce failed: {0}")]
    Collective(String),
    #[error("field `learner.engine`: the fused engine does not cover {0}")]
    Unsupported(String),
    /// A state that cannot be saved or loaded (a checkpoint's, or burn's
    /// conversion of it).
    #[error("{what}: {reason}")]
    State { what: &'static str, reason: String },
}

/// Which engine takes the steps, and on what.
#[derive(Clone, Debug, PartialEq)]
pub enum EngineChoice {
    /// burn's autodiff, one replica per device.
    Burn(LearnerDevices),
    /// The fused CPU engine, its steps spread over up to `threads` threads.
    Fused { threads: usize },
}

impl EngineChoice {
    /// burn on one CPU device.
    pub const fn cpu() -> Self {
        EngineChoice::Burn(LearnerDevices::Cpu(1))
    }

    /// What a run's `learner.engine`, `learner.devices` and
    /// `learner.threads` ask for: the fused engine where it applies (`auto`)
    /// or is asked for, else burn; `learner.devices = ["auto"]` resolved as
    /// [`sebulba_core::device_choice::choose`] says.
    pub fn for_run(spec: &ModelSpec, cfg: &RunConfig) -> Result<Self, EngineError> {
        let l = &cfg.learner;
        let devices = sebulba_core::device_choice::choose(
            &l.devices,
            l.engine,
            &cfg.network,
            sebulba_core::devices::cuda_devices,
        )
        .devices;
        if !l.engine.use_fused(&devices, &cfg.network) {
            let devices = LearnerDevices::parse(&devices).map_err(EngineError::Devices)?;
            return Ok(EngineChoice::Burn(devices));
        }
        let rows = match cfg.run.algorithm {
            sebulba_core::config::Algorithm::Dqn => cfg.dqn.batch_size,
            _ => cfg.samples_per_update() / cfg.ppo.minibatches.max(1),
        };
        // More threads than cores only time-slice, and each holds a
        // gradient buffer of the network's size: capped at the cores.
        let threads = match l.threads {
            0 => auto_threads(spec, rows),
            n => n.min(cores()),
        };
        Ok(EngineChoice::Fused { threads })
    }

    /// The engine for `spec`, starting from `state`, stepping Adam with
    /// epsilon `adam_eps`.
    pub fn build(
        &self,
        spec: &ModelSpec,
        state: &TrainState,
        adam_eps: f64,
    ) -> Result<Box<dyn UpdateEngine>, EngineError> {
        match self {
            EngineChoice::Burn(devices) => burn::build(spec, state, adam_eps, devices),
            EngineChoice::Fused { threads } => {
                Ok(Box::new(FusedEngine::new(spec, state, *threads, adam_eps)?))
            }
        }
    }
}

/// The rows of `steps` as a network without memory reads them: each on its
/// own, whatever sequence they form (every network both engines build today;
/// a state of any width but 0 is a caller's bug).
pub(crate) fn rows_of<'a>(steps: &Steps<'a>) -> &'a [f32] {
    debug_assert!(
        steps.sequence.is_none_or(|s| s.state.width() == 0),
        "a state for a network without memory"
    );
    steps.obs
}

/// What the update loops ask of an engine.
pub trait UpdateEngine: Send {
    /// `burn` or `fused`.
    fn name(&self) -> &'static str;
    /// Threads a minibatch step may use (burn's own pool aside).
    fn threads(&self) -> usize {
        1
    }
    /// Devices a minibatch is sharded over (burn's replicas).
    fn devices(&self) -> usize {
        1
    }
    /// Bytes the engine holds for training (host memory on a CPU device).
    /// By default an estimate from the parameter count: per replica the
    /// parameters, Adam's two moments and a gradient (burn's activations,
    /// freed after each step, are not in it).
    fn memory_bytes(&self) -> u64 {
        self.save().map_or(0, |s| {
            let floats = 2 * s.params.len() + s.m1.len() + s.m2.len();
            (floats * 4 * self.devices()) as u64
        })
    }
    /// State values of the rows of `steps` (`[rows]`): a network with
    /// memory reads its sequence in time order from its initial state, as
    /// the actors stepped it.
    fn values(&mut self, steps: &Steps<'_>) -> Vec<f32>;
    /// Each env's state after the rows `rows` of `steps`' sequence
    /// (`[rows.len() * state_width]`; empty for a network without memory),
    /// under the current weights: where chunks of `ppo.bptt` steps start.
    fn states_after(&mut self, steps: &Steps<'_>, rows: &[usize]) -> Vec<f32>;
    /// Policy-head outputs of the rows of `steps` (`[rows * head_dim]`):
    /// the current policy, for V-trace's importance weights.
    fn heads(&mut self, steps: &Steps<'_>) -> Vec<f32>;
    /// Policy-head outputs of the rows of `steps` under other parameters:
    /// `params` in layout order (a [`TrainState`]'s) and the normaliser
    /// `norm`, leaving the network under training as it is. A copy kept
    /// apart from it (DQN's target network) is read this way; the one who
    /// keeps the copy owns it, not the engine.
    fn heads_with(&mut self, params: &[f32], norm: Option<&ObsNorm>, steps: &Steps<'_>)
    -> Vec<f32>;
    /// The observation normaliser as the network applies it now (`None`
    /// for a network without one): what a copy of the network needs
    /// beside its parameters.
    fn obs_norm(&self) -> Result<Option<ObsNorm>, EngineError>;
    /// The observation normaliser's statistics for the coming update.
    fn set_obs_stats(&mut self, stats: &RunningMeanStd);
    /// The current weights as safetensors bytes (what is published).
    fn safetensors(&self) -> Result<Vec<u8>, WeightsError>;
    /// An update's epochs over `data` begin: an engine on a GPU copies the
    /// observations there once (widened to f32), and every minibatch step
    /// until [`Self::end_update`] gathers its rows there instead of copying
    /// them from the host again.
    fn begin_update(&mut self, _data: &UpdateData) {}
    /// The update is over: what [`Self::begin_update`] copied is freed.
    fn end_update(&mut self) {}
    /// One minibatch step: loss, gradient, global-norm clipping and an Adam
    /// step, unless the approximate KL is past `target_kl` (`stepped` false).
    fn step(&mut self, mb: &Minibatch<'_>) -> Result<StepStats, EngineError>;
    /// The parameters and Adam's state.
    fn save(&self) -> Result<TrainState, EngineError>;
    /// Replaces the parameters and Adam's state (the observation statistics
    /// are [`Self::set_obs_stats`]'s).
    fn load(&mut self, state: &TrainState) -> Result<(), EngineError>;
    /// Every replica's state (one per device), for checks that they never
    /// drift apart.
    fn replica_states(&self) -> Result<Vec<TrainState>, EngineError> {
        Ok(vec![self.save()?])
    }
}
