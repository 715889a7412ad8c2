//! One update of DQN: gradient steps on minibatches drawn uniformly from the
//! replay memory, each against one-step targets from the target network
//! ([`TargetNetwork`]), through the same update engine (and the same
//! global-norm clipping, Adam and non-finite guard) as PPO, with
//! [`Loss::Q`].

use super::replay::{Replay, Transitions};
use super::target_network::TargetNetwork;
use super::targets::td_targets;
use crate::data::{Loss, Minibatch, UpdateData};
use crate::engine::EngineError;
use crate::trainer::Trainer;
use crate::trajectory::BatchActions;

/// What an update's gradient steps need.
#[derive(Debug, Clone)]
pub struct QSettings {
    pub batch_size: usize,
    pub gradient_steps: usize,
    pub gamma: f64,
    pub huber_delta: f64,
    pub learning_rate: f64,
    pub max_grad_norm: f64,
    /// Actions of the Q-head.
    pub actions: usize,
}

/// Means over an update's gradient steps.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct QStats {
    /// The Huber loss of `Q(s, a) - y`.
    pub td_loss: f64,
    /// The taken actions' Q-values.
    pub q_mean: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub learning_rate: f64,
    pub gradient_steps: usize,
    /// Steps skipped for a non-finite loss or gradient.
    pub non_finite_steps: usize,
}

/// `s.gradient_steps` Q-learning steps on minibatches of `replay` (none
/// when it holds fewer than a minibatch), their one-step targets from
/// `target`.
pub fn q_update(
    trainer: &mut Trainer,
    target: &TargetNetwork,
    replay: &Replay,
    s: &QSettings,
) -> Result<QStats, EngineError> {
    let mut stats = QStats {
        learning_rate: s.learning_rate,
        ..QStats::default()
    };
    if replay.len() < s.batch_size.max(1) {
        return Ok(stats);
    }
    let idx: Vec<usize> = (0..s.batch_size).collect();
    let zeros = vec![0.0f32; s.batch_size];
    let mut drawn = Transitions::default();
    for _ in 0..s.gradient_steps {
        replay.sample(s.batch_size, &mut trainer.rng, &mut drawn);
        let next_q = target.heads(trainer, &drawn.next_obs);
        let targets = td_targets(
            &drawn.rewards,
            &drawn.terminated,
            &next_q,
            s.actions,
            s.gamma,
        );
        let data = UpdateData {
            obs_dim: drawn.obs.len() / s.batch_size,
            observations: std::mem::take(&mut drawn.obs).into(),
            actions: BatchActions::Discrete(std::mem::take(&mut drawn.actions)),
            masks: None,
            old_log_probs: zeros.clone(),
            advantages: zeros.clone(),
            returns: targets,
            old_values: zeros.clone(),
            weights: None,
            sequences: None,
        };
        let mb = Minibatch {
            data: &data,
            sequences: &[],
            states: &sebulba_fused::PolicyState::default(),
            idx: &idx,
            adv: &zeros,
            noise: &[],
            lr: s.learning_rate,
            max_grad_norm: s.max_grad_norm,
            loss: Loss::Q {
                huber_delta: s.huber_delta,
            },
        };
        let step = trainer.engine.step(&mb)?;
        if step.non_finite {
            stats.non_finite_steps += 1;
            continue;
        }
        stats.td_loss += step.terms.value_loss;
        stats.q_mean += step.terms.q_mean;
        stats.grad_norm += step.grad_norm;
        stats.gradient_steps += 1;
    }
    let k = stats.gradient_steps.max(1) as f64;
    stats.td_loss /= k;
    stats.q_mean /= k;
    stats.grad_norm /= k;
    Ok(stats)
}
