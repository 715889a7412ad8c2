//! The network under training on its engine: what PPO's and DQN's updates
//! step, what the learner publishes and checkpoints. Built once for a run
//! (`Trainer::for_run`: the fused engine where it applies, else burn).

use crate::engine::burn::initial_state;
use crate::engine::{EngineChoice, EngineError, ObsNorm, Steps, TrainState, UpdateEngine};
use crate::trajectory::BatchActions;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_core::config::{Algorithm, RunConfig};
use sebulba_core::distribution::{ActionDist, log_softmax_row, tanh_normal_log_prob};
use sebulba_core::model::{ModelSpec, RunningMeanStd};
use sebulba_core::weights::WeightsError;
use sebulba_fused::Batching;

/// The trainer's part of a checkpoint: the parameters and Adam's state, and a
/// seed for the shuffles and noise from here on.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainerState {
    pub state: TrainState,
    pub rng_seed: u64,
}

/// The model, its optimizer state on an engine, and the RNG of the shuffles
/// and the entropy noise.
pub struct Trainer {
    pub(crate) engine: Box<dyn UpdateEngine>,
    pub(crate) dist: ActionDist,
    pub(crate) rng: StdRng,
    /// How minibatches are cut: the network's ([`Self::batching`]).
    pub(crate) batching: Batching,
    spec: ModelSpec,
}

impl Trainer {
    /// The network in `state` on `choice`'s engine, stepping Adam with
    /// epsilon `adam_eps`; `seed` drives the minibatch shuffles and the
    /// entropy noise.
    pub fn new(
        spec: &ModelSpec,
        state: &TrainState,
        choice: &EngineChoice,
        adam_eps: f64,
        seed: u64,
    ) -> Result<Self, EngineError> {
        Ok(Self {
            engine: choice.build(spec, state, adam_eps)?,
            dist: spec.dist(),
            rng: StdRng::seed_from_u64(seed ^ 0x5eb0_15ba),
            batching: spec.arch().batching(),
            spec: spec.clone(),
        })
    }

    /// A fresh network (initialised from `seed`) on `choice`'s engine,
    /// stepping Adam with epsilon `adam_eps`.
    pub fn fresh(
        spec: &ModelSpec,
        adam_eps: f64,
        seed: u64,
        choice: &EngineChoice,
    ) -> Result<Self, EngineError> {
        Self::new(spec, &initial_state(spec, seed), choice, adam_eps, seed)
    }

    /// The trainer a run asks for: a fresh network from `run.seed` on the
    /// engine of `learner.engine`, `learner.devices` and `learner.threads`
    /// ([`EngineChoice::for_run`]).
    pub fn for_run(spec: &ModelSpec, cfg: &RunConfig) -> Result<Self, EngineError> {
        // DQN's steps step Adam by its own section's settings.
        let adam_eps = match cfg.run.algorithm {
            Algorithm::Dqn => cfg.dqn.adam_eps,
            _ => cfg.ppo.adam_eps,
        };
        let choice = EngineChoice::for_run(spec, cfg)?;
        let seed = cfg.run.seed;
        Self::new(spec, &initial_state(spec, seed), &choice, adam_eps, seed)
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
        self.engine.safetensors()
    }

    /// Bytes the engine holds for training ([`UpdateEngine::memory_bytes`]).
    pub fn memory_bytes(&self) -> u64 {
        self.engine.memory_bytes()
    }

    /// Threads a minibatch step may use.
    pub fn threads(&self) -> usize {
        self.engine.threads()
    }

    /// Devices a minibatch is sharded over.
    pub fn devices(&self) -> usize {
        self.engine.devices()
    }

    /// The parameters and Adam's state now (see [`Self::save_state`] for a
    /// checkpoint's).
    pub fn state(&self) -> Result<TrainState, EngineError> {
        self.engine.save()
    }

    /// Every replica's state (one per device; identical unless something is wrong).
    pub fn replica_states(&self) -> Result<Vec<TrainState>, EngineError> {
        self.engine.replica_states()
    }

    /// State values of the rows of `steps` ([`UpdateEngine::values`]).
    pub fn values(&mut self, steps: &Steps<'_>) -> Vec<f32> {
        self.engine.values(steps)
    }

    /// Each env's state after rows `rows` of `steps`' sequence
    /// ([`UpdateEngine::states_after`]).
    pub fn states_after(&mut self, steps: &Steps<'_>, rows: &[usize]) -> Vec<f32> {
        self.engine.states_after(steps, rows)
    }

    /// Policy-head outputs of the rows of `steps` (`[rows * head_dim]`).
    pub fn heads(&mut self, steps: &Steps<'_>) -> Vec<f32> {
        self.engine.heads(steps)
    }

    /// Policy-head outputs of the rows of `steps` under other parameters
    /// and normaliser ([`UpdateEngine::heads_with`]): a copy of the network
    /// that its keeper holds apart, such as DQN's target network.
    pub fn heads_with(
        &mut self,
        params: &[f32],
        norm: Option<&ObsNorm>,
        steps: &Steps<'_>,
    ) -> Vec<f32> {
        self.engine.heads_with(params, norm, steps)
    }

    /// How an update's data is cut for this network (`Arch::batching`).
    pub fn batching(&self) -> Batching {
        self.batching
    }

    /// The observation normaliser as the network applies it now
    /// ([`UpdateEngine::obs_norm`]).
    pub fn obs_norm(&self) -> Result<Option<ObsNorm>, EngineError> {
        self.engine.obs_norm()
    }

    /// The current policy's log-probabilities of `actions` at the rows of
    /// `steps` (`masks`: `[rows * n]` allowed actions, for discrete actions).
    pub fn log_probs(
        &mut self,
        steps: &Steps<'_>,
        actions: &BatchActions,
        masks: Option<&[u8]>,
    ) -> Vec<f32> {
        let heads = self.engine.heads(steps);
        let rows = steps.obs.len() / self.spec.obs_dim;
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
    pub fn checkpoint_state(&mut self) -> Result<TrainerState, EngineError> {
        let state = self.engine.save()?;
        let rng_seed: u64 = self.rng.random();
        self.rng = StdRng::seed_from_u64(rng_seed);
        Ok(TrainerState { state, rng_seed })
    }

    /// Restores a [`TrainerState`] (the observation statistics are
    /// [`Self::set_obs_stats`]'s). A state that passed its checksums may still
    /// hold what no learner writes: another network's size or non-finite
    /// values are refused, and the trainer is left as it was.
    pub fn load_state(&mut self, state: &TrainerState) -> Result<(), EngineError> {
        let len = sebulba_core::model::flat::state_len(&self.spec);
        state
            .state
            .check(len)
            .map_err(|reason| EngineError::State {
                what: "checkpoint",
                reason,
            })?;
        self.engine.load(&state.state)?;
        self.rng = StdRng::seed_from_u64(state.rng_seed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sebulba_core::config::NetworkConfig;
    use sebulba_envs::ActionSpace;

    #[test]
    fn the_fused_engines_memory_counts_its_state_gradients_and_activations() {
        let spec = ModelSpec {
            input_scale: 1.0,
            obs_dim: 4,
            image: None,
            action_space: ActionSpace::Discrete { n: 2 },
            network: NetworkConfig {
                hidden: vec![64, 64],
                ..Default::default()
            },
        };
        let choice = EngineChoice::Fused { threads: 2 };
        let mut t = Trainer::fresh(&spec, 1e-5, 1, &choice).unwrap();
        let params = t.state().unwrap().params.len() as u64;
        // Parameters, Adam's two moments and a gradient per thread.
        let before = t.memory_bytes();
        assert!(
            before >= (3 + 2) * params * 4,
            "{before} for {params} parameters"
        );
        // The values of 1,000 rows size the activations: the input and two
        // hidden layers' outputs at least.
        let _ = t.values(&Steps::rows(&vec![0.5; 1000 * 4]));
        let after = t.memory_bytes();
        assert!(
            after >= before + 1000 * (4 + 64 + 64) * 4,
            "{before} -> {after}"
        );
        // The burn engine's estimate: per replica two copies of the
        // parameters and Adam's two moments.
        let burn = Trainer::fresh(&spec, 1e-5, 1, &EngineChoice::cpu()).unwrap();
        assert_eq!(burn.memory_bytes(), 4 * params * 4);
    }
}
