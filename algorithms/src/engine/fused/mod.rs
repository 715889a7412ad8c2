//! The fused CPU engine: PPO's forward pass, loss gradients and Adam written
//! out by hand over flat f32 buffers, for one CPU device. burn's autodiff on
//! ndarray spends most of a small network's update in per-operation overhead
//! (graph nodes, allocations, an f64 libm tanh per element); here a minibatch
//! step is a handful of matrix products and loops with no allocation. Every
//! gradient is checked against burn's autodiff in the tests.
//!
//! The engine keeps a burn replica beside the flat buffers: parameters are
//! written into its model after every update (what is published), and Adam's
//! moments into its optimizer record when a checkpoint is saved
//! ([`burn_io`]), so publishing and checkpoints are the same whichever engine
//! ran.
//!
//! A minibatch step is spread over `learner.threads` threads ([`shard`]): each
//! takes a contiguous share of the rows and the gradients are added, the
//! CPU's counterpart of burn's replicas and all-reduce, without copies of the
//! parameters.
//!
//! What it covers: MLP torsos (separate or shared, tanh or relu, no LayerNorm),
//! observation normalisation, categorical (masked) and tanh-normal heads, on a
//! single CPU device. Anything else runs on burn.

mod backward;
pub mod burn_io;
mod cpu;
mod heads;
mod shard;

pub use cpu::{Fused, MIN_SHARD_ROWS};

use super::burn::Replica;
use super::{EngineError, EngineState, UpdateEngine};
use crate::data::{Minibatch, StepStats};
use burn::tensor::backend::AutodiffBackend;
use sebulba_core::model::fused::{ObsScaler, params};
use sebulba_core::model::{ModelSpec, RunningMeanStd};
use sebulba_core::weights::WeightsError;
use sebulba_core::weights::flat::{self, ObsStats};

pub struct FusedEngine<B: AutodiffBackend> {
    cpu: Fused,
    /// Holds the burn model (after every update) and Adam state (when saved).
    home: Replica<B>,
    spec: ModelSpec,
    /// The normaliser's statistics, as the burn model holds them (published
    /// with the weights); `None` without a normaliser.
    obs: Option<ObsStats>,
    /// DQN's target network: parameters and normaliser at the last sync.
    target: Option<(Vec<f32>, Option<ObsScaler>)>,
}

impl<B: AutodiffBackend> FusedEngine<B> {
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

    /// The engine starting from `home`'s parameters and Adam state, stepping
    /// on up to `threads` threads.
    pub fn new(spec: &ModelSpec, home: Replica<B>, threads: usize) -> Result<Self, EngineError> {
        Self::check(spec, 1)?;
        let mut engine = Self {
            cpu: Fused::new(spec, threads),
            home,
            spec: spec.clone(),
            obs: None,
            target: None,
        };
        engine.load_from_home()?;
        Ok(engine)
    }

    /// The flat buffers (for tests that compare them with burn's).
    pub fn cpu(&self) -> &Fused {
        &self.cpu
    }

    /// Copies the burn model's parameters, normaliser and Adam state in.
    fn load_from_home(&mut self) -> Result<(), EngineError> {
        let obs =
            ObsStats::of_model(self.home.model()).map_err(record("observation normaliser"))?;
        self.set_obs(obs);
        let (model, f) = (self.home.model(), &mut self.cpu);
        f.set_params(params::read_params(f.layout(), model).map_err(record("parameters"))?);
        let (m1, m2, time) = burn_io::read_adam(f.layout(), model, self.home.optim_record())
            .map_err(record("Adam state"))?;
        f.set_adam(m1, m2, time);
        Ok(())
    }

    /// The normaliser's statistics (`None`: the network has none), and the
    /// scaler the steps apply from them.
    fn set_obs(&mut self, obs: Option<ObsStats>) {
        let clip = self.spec.network.obs_clip;
        let scaler = obs.as_ref().map(|s| ObsScaler::new(&s.mean, &s.var, clip));
        self.cpu.set_scaler(scaler);
        self.obs = obs;
    }
}

fn record(what: &'static str) -> impl Fn(String) -> EngineError {
    move |reason| EngineError::Record { what, reason }
}

impl<B: AutodiffBackend> UpdateEngine<B> for FusedEngine<B> {
    fn name(&self) -> &'static str {
        "fused"
    }

    fn threads(&self) -> usize {
        self.cpu.threads()
    }

    fn values(&mut self, obs: &[f32]) -> Vec<f32> {
        self.cpu.values(obs)
    }

    fn heads(&mut self, obs: &[f32]) -> Vec<f32> {
        self.cpu.heads(obs)
    }

    fn sync_target(&mut self) {
        let f = &self.cpu;
        self.target = Some((f.params().to_vec(), f.scaler().cloned()));
    }

    fn target_heads(&mut self, obs: &[f32]) -> Vec<f32> {
        match &self.target {
            Some((params, scaler)) => self.cpu.heads_with(params, scaler.as_ref(), obs),
            None => self.cpu.heads(obs),
        }
    }

    fn set_obs_stats(&mut self, stats: &RunningMeanStd) {
        self.home.set_obs_stats(stats);
        if self.spec.network.obs_norm {
            self.set_obs(Some(ObsStats {
                mean: stats.mean_f32(),
                var: stats.var_f32(),
            }));
        }
    }

    /// Straight from the flat buffers: the file burn would write of the same
    /// parameters, without building it from burn's tensors.
    fn safetensors(&self, spec: &ModelSpec) -> Result<Vec<u8>, WeightsError> {
        let f = &self.cpu;
        flat::to_safetensors(spec, f.layout(), f.params(), self.obs.as_ref())
    }

    fn step(&mut self, mb: &Minibatch<'_>) -> Result<StepStats, EngineError> {
        Ok(self.cpu.step(mb))
    }

    fn finish_update(&mut self) {
        let f = &self.cpu;
        params::write_params(f.layout(), f.params(), self.home.model_mut());
    }

    fn save(&mut self) -> Result<EngineState, EngineError> {
        let f = &self.cpu;
        let (m1, m2, time) = f.adam();
        let record = burn_io::write_adam(f.layout(), self.home.model(), m1, m2, time)
            .map_err(record("Adam state"))?;
        self.home.set_optim_record(record);
        self.home.save_state()
    }

    fn load(&mut self, state: &EngineState) -> Result<(), EngineError> {
        self.home.load_state(state)?;
        self.load_from_home()
    }

    fn replicas(&self) -> &[Replica<B>] {
        std::slice::from_ref(&self.home)
    }
}

#[cfg(test)]
mod tests;
