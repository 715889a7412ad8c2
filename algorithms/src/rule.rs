//! The update rule a run trains with, chosen once from `run.algorithm`: the
//! learner's update loop calls [`UpdateRule::train`] and records its
//! [`UpdateStats`] without asking which rule it holds.

use crate::dqn::{DqnLearner, DqnStats};
use crate::engine::EngineError;
use crate::ppo::{self, PpoStats, Schedule};
use crate::prepare::{Normalizers, Prepared};
use crate::trainer::Trainer;
use crate::trajectory::Trajectory;
use sebulba_core::config::{Algorithm, RunConfig};
use sebulba_core::model::ModelSpec;
use serde::Serialize;

/// PPO, or DQN with the replay memory and target schedule it keeps between
/// updates.
pub enum UpdateRule {
    Ppo,
    Dqn(Box<DqnLearner>),
}

/// Where the run stands as an update starts.
#[derive(Debug, Clone, Copy)]
pub struct UpdateAt {
    /// The version the update trains (the newest published).
    pub version: u64,
    /// Env steps with this update's batches (what DQN schedules by).
    pub env_steps: u64,
    /// The run's budget spent before this update's batches
    /// ([`RunConfig::budget_used`]: steps or time, whichever is further
    /// along): what PPO anneals by.
    pub budget_used: f64,
}

impl UpdateRule {
    /// Bytes the rule keeps between updates: DQN's replay memory; nothing
    /// for PPO.
    pub fn memory_bytes(&self) -> u64 {
        match self {
            UpdateRule::Ppo => 0,
            UpdateRule::Dqn(d) => d.replay_bytes() as u64,
        }
    }

    /// Bytes of the copies of the weights the rule keeps: DQN's target
    /// network; nothing for PPO.
    pub fn target_bytes(&self) -> u64 {
        match self {
            UpdateRule::Ppo => 0,
            UpdateRule::Dqn(d) => d.target_bytes() as u64,
        }
    }

    /// The run's rule, starting at `env_steps` (a resumed run's count); a DQN
    /// run's target network starts as `trainer`'s current weights.
    pub fn for_run(
        cfg: &RunConfig,
        spec: &ModelSpec,
        env_steps: u64,
        trainer: &Trainer,
    ) -> Result<Self, EngineError> {
        Ok(match cfg.run.algorithm {
            Algorithm::Ppo => UpdateRule::Ppo,
            Algorithm::Dqn => {
                let dqn = DqnLearner::new(&cfg.dqn, spec, env_steps, trainer)?;
                UpdateRule::Dqn(Box::new(dqn))
            }
        })
    }

    /// One update on `batches`: PPO with the learning rate and clip range
    /// annealed linearly to 0 over the step budget when asked, or DQN's.
    pub fn train(
        &mut self,
        batches: &[Trajectory],
        at: UpdateAt,
        trainer: &mut Trainer,
        norms: &mut Normalizers,
        cfg: &RunConfig,
    ) -> Result<(Prepared, UpdateStats), EngineError> {
        match self {
            UpdateRule::Ppo => {
                let remaining = (1.0 - at.budget_used).max(0.0);
                let anneal = |on: bool, x: f64| if on { x * remaining } else { x };
                let schedule = Schedule {
                    lr: anneal(cfg.ppo.anneal_lr, cfg.ppo.learning_rate),
                    clip: anneal(cfg.ppo.anneal_clip, cfg.ppo.clip_coef),
                };
                let obs_dim = trainer.obs_dim();
                let (prepared, stats) =
                    ppo::train(batches, at.version, trainer, norms, cfg, obs_dim, schedule)?;
                Ok((prepared, UpdateStats::Ppo(stats)))
            }
            UpdateRule::Dqn(dqn) => {
                let (prepared, stats) = tracing::info_span!("dqn").in_scope(|| {
                    dqn.train(batches, at.version, at.env_steps, trainer, norms, cfg)
                })?;
                Ok((prepared, UpdateStats::Dqn(stats)))
            }
        }
    }
}

/// An update's statistics, by rule (their keys go into the metrics line as
/// they are).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(untagged)]
pub enum UpdateStats {
    Ppo(PpoStats),
    Dqn(DqnStats),
}

impl UpdateStats {
    /// Optimizer steps taken.
    pub fn steps(&self) -> usize {
        match self {
            UpdateStats::Ppo(s) => s.minibatch_steps,
            UpdateStats::Dqn(s) => s.q.gradient_steps,
        }
    }

    /// Steps skipped for a non-finite loss or gradient.
    pub fn non_finite_steps(&self) -> usize {
        match self {
            UpdateStats::Ppo(s) => s.non_finite_steps,
            UpdateStats::Dqn(s) => s.q.non_finite_steps,
        }
    }

    /// The samples the update took in: PPO's prepared rows in the loss, DQN's
    /// transitions into the memory.
    pub fn samples(&self, prepared: &Prepared) -> usize {
        match self {
            UpdateStats::Ppo(_) => prepared.data.len() - prepared.data.len_out_of_loss(),
            UpdateStats::Dqn(s) => s.samples,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PPO's schedule is linear in the steps done before the update, and off
    /// when annealing is off.
    #[test]
    fn ppo_anneals_by_the_steps_before_the_update() {
        let mut cfg = RunConfig::preset("CartPole-v1").expect("preset");
        (cfg.ppo.anneal_lr, cfg.ppo.anneal_clip) = (true, false);
        let env = sebulba_envs::env_spec("CartPole-v1").expect("env");
        let spec = ModelSpec::new(&env, &cfg.network).expect("spec");
        let mut trainer = Trainer::fresh(
            &spec,
            cfg.ppo.adam_eps,
            1,
            &crate::engine::EngineChoice::cpu(),
        )
        .expect("trainer");
        let mut rule = UpdateRule::for_run(&cfg, &spec, 0, &trainer).expect("rule");
        assert!(matches!(rule, UpdateRule::Ppo));
        let batch = crate::TrajectoryBuilder::new(64, 8, spec.obs_dim)
            .discrete((0..512).map(|i| i % 2).collect())
            .log_probs(vec![0.5f32.ln(); 512])
            .rewards(vec![1.0; 512])
            .build();
        let mut norms = Normalizers::new(&cfg, spec.obs_dim);
        let at = UpdateAt {
            version: 0,
            env_steps: cfg.run.total_steps / 4 + 512,
            budget_used: cfg.budget_used(cfg.run.total_steps / 4, 0.0),
        };
        let (_, stats) = rule
            .train(&[batch], at, &mut trainer, &mut norms, &cfg)
            .expect("update");
        let UpdateStats::Ppo(s) = stats else {
            panic!("PPO gave {stats:?}")
        };
        assert!((s.learning_rate - 0.75 * cfg.ppo.learning_rate).abs() < 1e-12);
        assert_eq!(s.clip_coef, cfg.ppo.clip_coef);
        assert_eq!(stats.steps(), cfg.ppo.epochs * cfg.ppo.minibatches);
    }
}
