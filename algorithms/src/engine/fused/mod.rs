//! The fused CPU engine: PPO's and DQN's loss gradients written out by hand
//! ([`heads`]) on `sebulba-fused`'s network over flat f32 buffers, for one
//! CPU device. burn's autodiff on ndarray spends most of a small network's
//! update in per-operation overhead (graph nodes, allocations, an f64 libm tanh
//! per element); here a minibatch step is a handful of matrix products and
//! loops with no allocation. Every gradient is checked against burn's autodiff
//! in the tests.
//!
//! A minibatch step is spread over `learner.threads` threads ([`shard`]): each
//! takes a contiguous share of the rows and the gradients are added, the
//! CPU's counterpart of burn's replicas and all-reduce, without copies of the
//! parameters.
//!
//! What it covers: MLP torsos (separate or shared, tanh or relu, no LayerNorm),
//! observation normalisation, categorical (masked) and tanh-normal heads, on a
//! single CPU device. Anything else runs on burn.

mod cpu;
mod heads;
mod shard;
mod team;

pub use cpu::{Fused, MIN_SHARD_ROWS};

use super::{EngineError, Steps, TrainState, UpdateEngine, rows_of};
use crate::data::{Minibatch, StepStats};
use sebulba_core::model::{ModelSpec, RunningMeanStd};
use sebulba_core::weights::{WeightsError, flat};
use sebulba_fused::ObsNorm;

pub struct FusedEngine {
    cpu: Fused,
    spec: ModelSpec,
}

impl FusedEngine {
    /// Whether the fused engine covers `spec` on `devices` devices.
    pub fn check(spec: &ModelSpec, devices: usize) -> Result<(), EngineError> {
        if devices != 1 {
            return Err(EngineError::Unsupported(format!(
                "{devices} devices (it runs on one CPU device)"
            )));
        }
        if !spec.network.fused_covers() {
            return Err(EngineError::Unsupported(
                "LayerNorm (`network.layer_norm`)".into(),
            ));
        }
        Ok(())
    }

    /// The engine starting from `state`, stepping on up to `threads` threads
    /// with Adam's epsilon `adam_eps`. A normalising network starts with the
    /// identity statistics (mean 0, variance 1), as burn's model does.
    pub fn new(
        spec: &ModelSpec,
        state: &TrainState,
        threads: usize,
        adam_eps: f64,
    ) -> Result<Self, EngineError> {
        Self::check(spec, 1)?;
        let mut cpu = Fused::new(spec, threads, adam_eps);
        cpu.load(state).map_err(|reason| EngineError::State {
            what: "the fused engine's state",
            reason,
        })?;
        let d = spec.obs_dim;
        let net = &spec.network;
        cpu.set_norm(
            net.obs_norm
                .then(|| ObsNorm::new(vec![0.0; d], vec![1.0; d], net.obs_clip)),
        );
        Ok(Self {
            cpu,
            spec: spec.clone(),
        })
    }

    /// The flat buffers (for tests that compare them with burn's).
    pub fn cpu(&self) -> &Fused {
        &self.cpu
    }
}

impl UpdateEngine for FusedEngine {
    fn name(&self) -> &'static str {
        "fused"
    }

    fn threads(&self) -> usize {
        self.cpu.threads()
    }

    fn memory_bytes(&self) -> u64 {
        self.cpu.bytes() as u64
    }

    // A network without memory reads every row on its own.
    fn values(&mut self, steps: &Steps<'_>) -> Vec<f32> {
        match steps.sequence {
            Some(seq) if seq.state.width() > 0 => self.cpu.values_in(steps.obs, &seq),
            _ => self.cpu.values(rows_of(steps)),
        }
    }

    fn states_after(&mut self, steps: &Steps<'_>, rows: &[usize]) -> Vec<f32> {
        match steps.sequence {
            Some(seq) if seq.state.width() > 0 => self.cpu.states_in(steps.obs, &seq, rows),
            _ => Vec::new(),
        }
    }

    fn heads(&mut self, steps: &Steps<'_>) -> Vec<f32> {
        match steps.sequence {
            Some(seq) if seq.state.width() > 0 => self.cpu.heads_in(steps.obs, &seq),
            _ => self.cpu.heads(rows_of(steps)),
        }
    }

    fn heads_with(
        &mut self,
        params: &[f32],
        norm: Option<&ObsNorm>,
        steps: &Steps<'_>,
    ) -> Vec<f32> {
        self.cpu.heads_with(params, norm, rows_of(steps))
    }

    fn obs_norm(&self) -> Result<Option<ObsNorm>, EngineError> {
        Ok(self.cpu.norm().cloned())
    }

    fn set_obs_stats(&mut self, stats: &RunningMeanStd) {
        let net = &self.spec.network;
        if net.obs_norm {
            let norm = ObsNorm::new(stats.mean_f32(), stats.var_f32(), net.obs_clip);
            self.cpu.set_norm(Some(norm));
        }
    }

    /// Straight from the flat buffers: the file burn would write of the same
    /// parameters, without building it from burn's tensors.
    fn safetensors(&self) -> Result<Vec<u8>, WeightsError> {
        flat::to_safetensors(&self.spec, self.cpu.params(), self.cpu.norm())
    }

    fn step(&mut self, mb: &Minibatch<'_>) -> Result<StepStats, EngineError> {
        Ok(self.cpu.step(mb))
    }

    fn save(&self) -> Result<TrainState, EngineError> {
        Ok(self.cpu.state().clone())
    }

    fn load(&mut self, state: &TrainState) -> Result<(), EngineError> {
        self.cpu.load(state).map_err(|reason| EngineError::State {
            what: "the fused engine's state",
            reason,
        })
    }
}

#[cfg(test)]
mod tests;
