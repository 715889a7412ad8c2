//! The network under training on its engine: what PPO's and DQN's updates
//! step, what the learner publishes and checkpoints. Built once for a run
//! (`Trainer::for_run`: the fused engine where it applies, else burn).

use crate::engine::burn::{BurnEngine, Replica};
use crate::engine::fused::FusedEngine;
use crate::engine::threads::{auto_threads, cores};
use crate::engine::{EngineError, EngineState, UpdateEngine};
use crate::trajectory::BatchActions;
use burn::tensor::backend::AutodiffBackend;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_core::config::{Algorithm, PpoConfig, RunConfig};
use sebulba_core::distribution::{ActionDist, log_softmax_row, tanh_normal_log_prob};
use sebulba_core::model::{ActorCritic, ModelSpec, RunningMeanStd};
use sebulba_core::weights::WeightsError;

/// The trainer's part of a checkpoint: the engine's records and a seed for
/// the shuffles and noise from here on.
#[derive(Clone, PartialEq)]
pub struct TrainerState {
    pub engine: EngineState,
    pub rng_seed: u64,
}

/// The model, its optimizer state on an engine, and the RNG of the shuffles
/// and the entropy noise.
pub struct Trainer<B: AutodiffBackend> {
    pub(crate) engine: Box<dyn UpdateEngine<B>>,
    pub(crate) dist: ActionDist,
    pub(crate) rng: StdRng,
    spec: ModelSpec,
}

impl<B: AutodiffBackend> Trainer<B> {
    /// A fresh model (backend RNG seeded with `seed`) on the burn engine over
    /// `devices`.
    pub fn new(
        spec: &ModelSpec,
        cfg: &PpoConfig,
        seed: u64,
        devices: Vec<B::Device>,
    ) -> Result<Self, EngineError> {
        let first = devices.first().ok_or(EngineError::NoDevices)?.clone();
        B::seed(&first, seed);
        let model = spec.init::<B>(&first);
        Self::with_model(spec, model, cfg, seed, devices)
    }

    /// `model` on the burn engine over `devices`. `seed` drives the minibatch
    /// shuffles and the entropy noise.
    pub fn with_model(
        spec: &ModelSpec,
        model: ActorCritic<B>,
        cfg: &PpoConfig,
        seed: u64,
        devices: Vec<B::Device>,
    ) -> Result<Self, EngineError> {
        Ok(Self {
            engine: Box::new(BurnEngine::new(spec, model, cfg, devices)?),
            dist: spec.dist(),
            rng: StdRng::seed_from_u64(seed ^ 0x5eb0_15ba),
            spec: spec.clone(),
        })
    }

    /// The trainer a run's `learner.engine` and `learner.devices` ask for: the
    /// fused engine where it applies (`auto`) or is asked for, else burn.
    pub fn for_run(
        spec: &ModelSpec,
        cfg: &RunConfig,
        devices: Vec<B::Device>,
    ) -> Result<Self, EngineError> {
        // DQN's steps clip and step Adam by its own section's settings.
        let dqn = cfg.run.algorithm == Algorithm::Dqn;
        let optimizer = PpoConfig {
            adam_eps: if dqn {
                cfg.dqn.adam_eps
            } else {
                cfg.ppo.adam_eps
            },
            ..cfg.ppo.clone()
        };
        let mut trainer = Self::new(spec, &optimizer, cfg.run.seed, devices)?;
        let net = &cfg.network;
        if cfg.learner.engine.use_fused(&cfg.learner.devices, net) {
            let rows = if dqn {
                cfg.dqn.batch_size
            } else {
                cfg.samples_per_update() / cfg.ppo.minibatches.max(1)
            };
            // More threads than cores only time-slice, and each holds a
            // gradient buffer of the network's size: capped at the cores.
            let threads = match cfg.learner.threads {
                0 => auto_threads(spec, rows),
                n => n.min(cores()),
            };
            trainer.use_fused(threads)?;
        }
        Ok(trainer)
    }

    /// Switches to the fused CPU engine, starting from the current parameters
    /// and Adam state, its steps spread over up to `threads` threads.
    pub fn use_fused(&mut self, threads: usize) -> Result<(), EngineError> {
        FusedEngine::<B>::check(&self.spec, self.engine.replicas().len())?;
        let home = self.engine.replicas()[0].fork_single();
        self.engine = Box::new(FusedEngine::new(&self.spec, home, threads)?);
        Ok(())
    }

    /// Floats in one observation row.
    pub fn obs_dim(&self) -> usize {
        self.spec.obs_dim
    }

    /// Which engine takes the steps: `fused` or `burn`.
    pub fn engine(&self) -> &'static str {
        self.engine.name()
    }

    /// The current weights as safetensors bytes: what is published.
    pub fn safetensors(&self) -> Result<Vec<u8>, WeightsError> {
        self.engine.safetensors(&self.spec)
    }

    /// Threads a minibatch step may use.
    pub fn threads(&self) -> usize {
        self.engine.threads()
    }

    /// The published model (the first replica's; all are identical).
    pub fn model(&self) -> &ActorCritic<B> {
        self.engine.replicas()[0].model()
    }

    /// Every replica (for tests that check they stay identical).
    pub fn replicas(&self) -> &[Replica<B>] {
        self.engine.replicas()
    }

    /// The model without autodiff, for publishing.
    pub fn inference_model(&self) -> ActorCritic<B::InnerBackend> {
        self.engine.replicas()[0].inference_model()
    }

    /// State values of observation rows `obs` (`[rows * obs_dim]`).
    pub fn values(&mut self, obs: &[f32]) -> Vec<f32> {
        self.engine.values(obs)
    }

    /// The current policy's log-probabilities of `actions` at observation rows
    /// `obs` (`masks`: `[rows * n]` allowed actions, for discrete actions).
    pub fn log_probs(
        &mut self,
        obs: &[f32],
        actions: &BatchActions,
        masks: Option<&[u8]>,
    ) -> Vec<f32> {
        let heads = self.engine.heads(obs);
        let rows = obs.len() / self.spec.obs_dim;
        let width = heads.len() / rows.max(1);
        let head = |i: usize| &heads[i * width..(i + 1) * width];
        match (&self.dist, actions) {
            (ActionDist::Categorical { n }, BatchActions::Discrete(a)) => {
                let mut row = vec![0.0f32; *n];
                (0..rows)
                    .map(|i| {
                        let valid = masks.map(|m| &m[i * n..(i + 1) * n]);
                        log_softmax_row(head(i), valid, &mut row);
                        row.get(a[i] as usize).copied().unwrap_or(f32::NEG_INFINITY)
                    })
                    .collect()
            }
            (
                ActionDist::TanhNormal {
                    dim,
                    squash,
                    min_std,
                },
                BatchActions::Continuous(u),
            ) => (0..rows)
                .map(|i| {
                    tanh_normal_log_prob(head(i), &u[i * dim..(i + 1) * dim], *min_std, squash)
                })
                .collect(),
            // Validation gives every batch the run's kind of action.
            _ => vec![f32::NAN; rows],
        }
    }

    /// Sets the observation normaliser's statistics (after SGD: they go out
    /// with the new weights; see `update::step`).
    pub fn set_obs_stats(&mut self, stats: &RunningMeanStd) {
        self.engine.set_obs_stats(stats);
    }

    /// What a checkpoint keeps of the trainer. The RNG is re-seeded with the saved
    /// seed, so a run resumed from this point and one that never stopped draw
    /// the same minibatches.
    pub fn save_state(&mut self) -> Result<TrainerState, EngineError> {
        let engine = self.engine.save()?;
        let rng_seed: u64 = self.rng.random();
        self.rng = StdRng::seed_from_u64(rng_seed);
        Ok(TrainerState { engine, rng_seed })
    }

    /// Restores a [`TrainerState`]. A state that passed its checksums may still
    /// hold what no learner writes: non-finite weights are refused.
    pub fn load_state(&mut self, state: &TrainerState) -> Result<(), EngineError> {
        self.engine.load(&state.engine)?;
        sebulba_core::weights::check_finite(self.model()).map_err(|e| EngineError::Record {
            what: "model",
            reason: e.to_string(),
        })?;
        self.rng = StdRng::seed_from_u64(state.rng_seed);
        Ok(())
    }

    /// Makes the current parameters the target network's.
    pub fn sync_target(&mut self) {
        self.engine.sync_target();
    }

    /// Policy-head outputs of `obs` under the target network.
    pub fn target_heads(&mut self, obs: &[f32]) -> Vec<f32> {
        self.engine.target_heads(obs)
    }
}
