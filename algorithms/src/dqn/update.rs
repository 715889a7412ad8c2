//! A DQN run's update: the batches taken go into the replay memory, then
//! `dqn.replay_ratio` gradient steps per transition taken in (once
//! `dqn.learning_starts` env steps are in, and the memory holds a minibatch:
//! steps due before that are not taken), the weights copied into the target
//! network at the first update at or past each multiple of
//! `dqn.target_update_interval` env steps (before that update's steps, as
//! Stable-Baselines3 copies during collection). The replay memory and the
//! target network are not checkpointed: a resumed run starts with an empty
//! memory, the resumed weights as its target, and waits `learning_starts`
//! env steps again before its first gradient step.

use super::replay::Replay;
use super::target_network::TargetNetwork;
use super::train::{QSettings, QStats};
use crate::engine::EngineError;
use crate::prepare::{Normalizers, Prepared, bookkeeping, fold_obs_stats};
use crate::trainer::Trainer;
use crate::trajectory::Trajectory;
use sebulba_core::config::{Algorithm, DqnConfig, RunConfig};
use sebulba_core::distribution::epsilon_at;
use sebulba_core::model::ModelSpec;
use serde::Serialize;

/// The exploration rate a DQN run publishes with its weights after
/// `env_steps` env steps; `None` for other algorithms.
pub fn epsilon(c: &RunConfig, env_steps: u64) -> Option<f32> {
    (c.run.algorithm == Algorithm::Dqn).then(|| {
        let q = &c.dqn;
        let e = epsilon_at(
            env_steps,
            c.run.total_steps,
            q.epsilon_start,
            q.epsilon_end,
            q.exploration_fraction,
        );
        e as f32
    })
}

/// What a DQN update adds to its metrics line.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct DqnStats {
    #[serde(flatten)]
    pub q: QStats,
    /// Transitions taken into the replay memory by this update (the line's
    /// `samples`).
    #[serde(skip)]
    pub samples: usize,
    /// Transitions the memory holds after it.
    pub replay_size: usize,
    /// Copies into the target network so far (this run segment).
    pub target_updates: u64,
    /// The exploration rate published with the new weights.
    pub epsilon: f64,
}

/// A DQN learner's state between updates, beside the weights.
pub struct DqnLearner {
    replay: Replay,
    /// The weights as they were at the last copy.
    target: TargetNetwork,
    /// Gradient steps due but not yet taken (below 1).
    owed: f64,
    /// `env_steps / target_update_interval` at the last target copy.
    synced_at: u64,
    /// The run's env steps from which gradient steps are taken.
    learning_from: u64,
    target_updates: u64,
    obs_dim: usize,
    /// Actions of the Q-head.
    actions: usize,
}

impl DqnLearner {
    /// Bytes the replay memory holds.
    pub fn replay_bytes(&self) -> usize {
        self.replay.bytes()
    }

    /// Bytes the target network holds.
    pub fn target_bytes(&self) -> usize {
        self.target.bytes()
    }

    /// The target network as last copied.
    pub fn target(&self) -> &TargetNetwork {
        &self.target
    }

    /// An empty memory at the run's `env_steps` (a resumed run's count);
    /// `trainer`'s current weights become the target network.
    pub fn new(
        cfg: &DqnConfig,
        spec: &ModelSpec,
        env_steps: u64,
        trainer: &Trainer,
    ) -> Result<Self, EngineError> {
        Ok(Self {
            replay: Replay::new(cfg.buffer_size, spec.obs_dim),
            target: TargetNetwork::of(trainer)?,
            owed: 0.0,
            synced_at: env_steps / cfg.target_update_interval.max(1),
            learning_from: env_steps.saturating_add(cfg.learning_starts),
            target_updates: 0,
            obs_dim: spec.obs_dim,
            actions: spec.head_dim(),
        })
    }

    /// Takes `batches` (acted at or before `version`) in and trains on the
    /// memory; `env_steps` is the run's count with them.
    pub fn train(
        &mut self,
        batches: &[Trajectory],
        version: u64,
        env_steps: u64,
        trainer: &mut Trainer,
        norms: &mut Normalizers,
        cfg: &RunConfig,
    ) -> Result<(Prepared, DqnStats), EngineError> {
        let q = &cfg.dqn;
        let samples: usize = batches.iter().map(|b| self.replay.push_batch(b)).sum();
        let due = env_steps / q.target_update_interval.max(1);
        if due > self.synced_at {
            self.target = TargetNetwork::of(trainer)?;
            self.synced_at = due;
            self.target_updates += 1;
        }
        let mut steps = 0;
        if env_steps >= self.learning_from {
            self.owed += q.replay_ratio * samples as f64;
            steps = self.owed.floor() as usize;
            self.owed -= steps as f64;
        }
        let settings = QSettings {
            batch_size: q.batch_size,
            gradient_steps: steps,
            gamma: q.gamma,
            huber_delta: q.huber_delta,
            learning_rate: q.learning_rate,
            max_grad_norm: q.max_grad_norm,
            actions: self.actions,
        };
        let stats = super::train::q_update(trainer, &self.target, &self.replay, &settings)?;
        fold_obs_stats(batches, trainer, norms, self.obs_dim);
        let stats = DqnStats {
            q: stats,
            samples,
            replay_size: self.replay.len(),
            target_updates: self.target_updates,
            epsilon: epsilon(cfg, env_steps).map_or(0.0, f64::from),
        };
        Ok((bookkeeping(batches, version, self.obs_dim), stats))
    }
}
