//! The PPO loss of one minibatch: clipped surrogate, value loss (optionally
//! clipped, with the max of the two errors), entropy bonus; plus the approximate
//! KL and clip fraction for the metrics.

use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Bool, Int, Tensor};
use sebulba_core::config::PpoConfig;
use sebulba_core::distribution::{ActionDist, categorical_logp_entropy, tanh_normal_logp_entropy};
use sebulba_core::model::{ActorCritic, Sequence};

/// The actions of a minibatch as tensors.
pub enum MbActions<B: Backend> {
    /// `[M]` indices.
    Discrete(Tensor<B, 1, Int>),
    /// `[M, dim]` pre-tanh samples.
    Continuous(Tensor<B, 2>),
}

/// One minibatch, on the device.
pub struct MinibatchTensors<B: Backend> {
    /// The rows as env sequences, for a network with memory.
    pub seq: Option<Sequence<B>>,
    pub obs: Tensor<B, 2>,
    pub actions: MbActions<B>,
    /// `[M, n]` allowed actions, when the env has masks.
    pub valid: Option<Tensor<B, 2, Bool>>,
    pub old_logp: Tensor<B, 1>,
    pub adv: Tensor<B, 1>,
    pub ret: Tensor<B, 1>,
    /// The values the returns were computed with (for value clipping).
    pub old_values: Tensor<B, 1>,
    /// `[M, dim]` standard-normal draws for the squashed entropy estimate.
    pub noise: Option<Tensor<B, 2>>,
    /// `[M]` 1 for the samples in the loss, 0 for a game's moves by others
    /// (read for their seats' sequences only), and how many are in it;
    /// `None`: every sample.
    pub trained: Option<(Tensor<B, 1>, usize)>,
}

/// The mean over the samples in the loss.
fn mean_of<B: Backend>(x: Tensor<B, 1>, trained: Option<&(Tensor<B, 1>, usize)>) -> Tensor<B, 1> {
    match trained {
        None => x.mean(),
        Some((w, n)) => (x * w.clone()).sum().div_scalar((*n).max(1) as f64),
    }
}

/// The loss terms of one minibatch; `total` carries the graph.
pub struct Losses<B: AutodiffBackend> {
    pub total: Tensor<B, 1>,
    pub policy: Tensor<B::InnerBackend, 1>,
    pub value: Tensor<B::InnerBackend, 1>,
    pub entropy: Tensor<B::InnerBackend, 1>,
    pub approx_kl: Tensor<B::InnerBackend, 1>,
    pub clip_fraction: Tensor<B::InnerBackend, 1>,
    /// Q-learning: the mean Q-value of the taken actions (0 for PPO).
    pub q_mean: Tensor<B::InnerBackend, 1>,
}

/// `total = policy - ent_coef * entropy + vf_coef * value`, where
/// `value = 0.5 * mean((V - R)^2)`, or with `clip_value_loss`
/// `0.5 * mean(max((V - R)^2, (V_old + clip(V - V_old, +-eps_v) - R)^2))`.
/// `clip` is the (possibly annealed) ratio clip range.
pub fn ppo_losses<B: AutodiffBackend>(
    model: &ActorCritic<B>,
    mb: MinibatchTensors<B>,
    dist: &ActionDist,
    cfg: &PpoConfig,
    clip: f64,
) -> Losses<B> {
    let (head, v) = model.policy_value_in(mb.obs, mb.seq.as_ref());
    let (logp, entropy) = match (dist, mb.actions) {
        (ActionDist::Categorical { .. }, MbActions::Discrete(a)) => {
            categorical_logp_entropy(head, a, mb.valid)
        }
        (
            ActionDist::TanhNormal {
                squash, min_std, ..
            },
            MbActions::Continuous(u),
        ) => {
            let noise = mb.noise.unwrap_or_else(|| u.zeros_like());
            tanh_normal_logp_entropy(head, u, noise, *min_std, squash, cfg.gaussian_entropy)
        }
        _ => unreachable!("minibatch actions are built from the same distribution"),
    };
    // Per-minibatch normalisation, when asked, happened on the whole minibatch
    // before it was sharded across devices (so its statistics are global).
    let adv = mb.adv;
    let trained = mb.trained.as_ref();
    let trained_in = mb.trained.as_ref().map(|(w, n)| (w.clone().inner(), *n));
    let mean = |x: Tensor<B, 1>| mean_of(x, trained);
    let mean_in = |x: Tensor<B::InnerBackend, 1>| mean_of(x, trained_in.as_ref());
    let log_ratio = logp - mb.old_logp;
    let ratio = log_ratio.clone().exp();
    let pg1 = -adv.clone() * ratio.clone();
    let pg2 = -adv * ratio.clone().clamp(1.0 - clip, 1.0 + clip);
    let policy = mean(pg1.max_pair(pg2));
    let err = (v.clone() - mb.ret.clone()).powi_scalar(2);
    let value_err = if cfg.clip_value_loss {
        let eps = cfg.value_clip_coef;
        let clipped = mb.old_values.clone() + (v - mb.old_values).clamp(-eps, eps);
        err.max_pair((clipped - mb.ret).powi_scalar(2))
    } else {
        err
    };
    let value = mean(value_err) * 0.5;
    let entropy = mean(entropy);
    let total = policy.clone() - entropy.clone() * cfg.ent_coef + value.clone() * cfg.vf_coef;
    // Schulman's low-variance KL estimator: E[(r - 1) - ln r].
    let ratio_in = ratio.inner();
    let approx_kl = mean_in((ratio_in.clone() - 1.0) - log_ratio.inner());
    let clip_fraction = mean_in((ratio_in - 1.0).abs().greater_elem(clip).float());
    Losses {
        total,
        q_mean: approx_kl.zeros_like(),
        policy: policy.inner(),
        value: value.inner(),
        entropy: entropy.inner(),
        approx_kl,
        clip_fraction,
    }
}

/// DQN's loss: the policy head's outputs read as Q-values, the mean Huber
/// loss (threshold `delta`) of `Q(s, a) - y` with the targets `y` in `ret`.
/// The value head is not in the loss.
pub fn q_losses<B: AutodiffBackend>(
    model: &ActorCritic<B>,
    mb: MinibatchTensors<B>,
    delta: f64,
) -> Losses<B> {
    let head = model.policy(mb.obs);
    let [n, _] = head.dims();
    let MbActions::Discrete(a) = mb.actions else {
        unreachable!("Q-learning runs on discrete actions only (config)");
    };
    let q = head.gather(1, a.reshape([n, 1])).reshape([n]);
    let err = q.clone() - mb.ret;
    let abs = err.clone().abs();
    let linear = (abs.clone() - 0.5 * delta) * delta;
    let huber = (err.powi_scalar(2) * 0.5).mask_where(abs.greater_elem(delta), linear);
    let value = huber.mean();
    let zero = value.clone().inner().zeros_like();
    Losses {
        total: value.clone(),
        policy: zero.clone(),
        value: value.inner(),
        entropy: zero.clone(),
        approx_kl: zero.clone(),
        clip_fraction: zero,
        q_mean: q.inner().mean(),
    }
}
