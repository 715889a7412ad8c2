//! The `[ppo]` section: PPO's losses, its epochs and minibatches, and how
//! a network with memory's env sequences are cut for them (`bptt`,
//! `refresh_states`).

use serde::{Deserialize, Serialize};

/// Over what advantages are normalised to zero mean and unit std.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdvantageNorm {
    /// Once over the whole update batch (default; global across devices).
    Update,
    /// Per minibatch, as some implementations do.
    Minibatch,
    Off,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PpoConfig {
    pub gamma: f64,
    pub gae_lambda: f64,
    pub clip_coef: f64,
    /// Linearly anneal `clip_coef` to 0 over `total_steps` (default false).
    pub anneal_clip: bool,
    pub vf_coef: f64,
    /// Clip the value loss: `max((V-R)^2, (V_old + clip(V-V_old, +-value_clip_coef) - R)^2)`
    /// (default false).
    pub clip_value_loss: bool,
    /// Trust region of the clipped value loss (default 0.2).
    pub value_clip_coef: f64,
    pub ent_coef: f64,
    /// Continuous actions: use the plain Gaussian entropy instead of the squashed
    /// distribution's (default false).
    pub gaussian_entropy: bool,
    pub learning_rate: f64,
    /// Linearly anneal the learning rate to 0 over `total_steps` (default true).
    pub anneal_lr: bool,
    pub epochs: usize,
    pub minibatches: usize,
    /// Stop an update's remaining minibatch steps once the approximate KL of a
    /// step exceeds this; 0 turns it off (default 0).
    pub target_kl: f64,
    /// `update` (default), `minibatch` or `off`.
    pub adv_norm: AdvantageNorm,
    /// Divide rewards by the running std of the discounted return, as
    /// Gymnasium's `NormalizeReward` (default false).
    pub scale_rewards: bool,
    /// Clip the gradient by its global norm (all parameters together).
    pub max_grad_norm: f64,
    pub adam_eps: f64,
    /// Correction for batches acted by an older policy version: `off`
    /// (default; GAE against the acting policy) or `vtrace`.
    #[serde(default)]
    pub lag_correction: LagCorrection,
    /// V-trace's truncation of the importance weight in the temporal
    /// differences and the advantage (rho-bar, default 1).
    #[serde(default = "one")]
    pub vtrace_rho_clip: f64,
    /// V-trace's truncation of the trace-cutting weights (c-bar, default 1).
    #[serde(default = "one")]
    pub vtrace_c_clip: f64,
    /// A network with memory: steps of back-propagation through time, the
    /// length of the env sequences a minibatch is made of (Sample
    /// Factory's recurrence). 0 (default): each env's whole rollout, as
    /// CleanRL's `ppo_atari_lstm.py`. Otherwise a divisor of
    /// `env.rollout_length`; each chunk starts from its env's state after
    /// the step before it, computed by the learner (see `refresh_states`).
    #[serde(default)]
    pub bptt: usize,
    /// With `bptt` chunks: recompute the chunks' starting states with the
    /// current weights before every epoch, not only once at the update's
    /// start (R2D2's "stored state" against a burn-in; Sample Factory's
    /// recomputed states). Default false.
    #[serde(default)]
    pub refresh_states: bool,
}

impl PpoConfig {
    /// Steps per env sequence a minibatch is made of, for rollouts of
    /// `rollout_length` steps.
    pub fn sequence_steps(&self, rollout_length: usize) -> usize {
        match self.bptt {
            0 => rollout_length,
            n => n.min(rollout_length),
        }
    }
}

fn one() -> f64 {
    1.0
}

/// How the learner treats a batch acted by an older version than the one
/// it trains (policy lag).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LagCorrection {
    /// GAE and the PPO ratio against the acting policy, whatever its age.
    #[default]
    Off,
    /// V-trace (Espeholt et al. 2018) with lambda: values targets and
    /// advantages of lagged batches from importance weights between the
    /// current policy and the acting one, truncated at `vtrace_rho_clip` and
    /// `vtrace_c_clip`; the PPO ratio is then centred on the current policy
    /// (decoupled PPO, Hilton et al. 2021) and the truncated weight scales the
    /// advantage. On batches of the current version it is plain GAE.
    Vtrace,
}
