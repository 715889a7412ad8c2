//! Turning an update's batches into training data: observation-normaliser and
//! reward-scale statistics first, then values of every observation (T+1 rows
//! per batch plus the final observations) in one forward pass, GAE per batch,
//! and advantages normalised once over the whole update.

use crate::gae;
use crate::ppo::{Ppo, UpdateData};
use crate::reward_scale::RewardScaler;
use crate::summary::Lag;
use crate::validate::{BatchActions, DecodedBatch};
use burn::tensor::backend::AutodiffBackend;
use sebulba_core::config::{AdvantageNorm, RunConfig};
use sebulba_core::model::RunningMeanStd;

/// Statistics the learner carries from update to update.
pub struct Normalizers {
    /// Observation mean/var, when `network.obs_norm` is on.
    pub obs: Option<RunningMeanStd>,
    /// Discounted-return std, when `ppo.scale_rewards` is on.
    pub rewards: Option<RewardScaler>,
}

impl Normalizers {
    pub fn new(cfg: &RunConfig, obs_dim: usize) -> Self {
        Self {
            obs: cfg.network.obs_norm.then(|| RunningMeanStd::new(obs_dim)),
            rewards: cfg
                .ppo
                .scale_rewards
                .then(|| RewardScaler::new(cfg.ppo.gamma)),
        }
    }
}

/// What `prepare` learned beside the training data.
pub struct Prepared {
    pub data: UpdateData,
    pub explained_variance: f64,
    pub lag: Lag,
    pub episode_returns: Vec<f64>,
    pub episode_lengths: Vec<u32>,
    /// The factor rewards were multiplied by (1 without reward scaling).
    pub reward_scale: f32,
}

pub fn prepare<B: AutodiffBackend>(
    batches: &[DecodedBatch],
    version: u64,
    ppo: &mut Ppo<B>,
    norms: &mut Normalizers,
    cfg: &RunConfig,
    obs_dim: usize,
) -> Prepared {
    let d = obs_dim;
    // Normaliser statistics from this update's observations, set before any
    // value or gradient is computed, so the whole update sees one normalisation.
    if let Some(stats) = &mut norms.obs {
        for b in batches {
            stats.update(&b.observations[..b.num_steps * b.num_envs * d]);
        }
        ppo.set_obs_stats(stats);
    }
    let reward_scale = match &mut norms.rewards {
        Some(s) => {
            for b in batches {
                s.observe(
                    &b.actor_id,
                    b.num_envs,
                    &b.rewards,
                    &b.terminated,
                    &b.truncated,
                );
            }
            s.factor()
        }
        None => 1.0,
    };

    // One forward pass over every observation row and every final observation.
    let mut all_obs = Vec::new();
    for b in batches {
        all_obs.extend_from_slice(&b.observations);
    }
    for b in batches {
        all_obs.extend_from_slice(&b.final_observations);
    }
    let values = ppo.values(&all_obs);

    let n: usize = batches.iter().map(|b| b.num_steps * b.num_envs).sum();
    let mut observations = Vec::with_capacity(n * d);
    let mut advantages = vec![0.0f32; n];
    let mut returns = vec![0.0f32; n];
    let mut old_values = Vec::with_capacity(n);
    let mut old_log_probs = Vec::with_capacity(n);
    let mut discrete = Vec::new();
    let mut continuous = Vec::new();
    let mask_width = batches.iter().find_map(|b| {
        b.action_masks
            .as_ref()
            .map(|m| m.len() / (b.num_steps * b.num_envs).max(1))
    });
    let any_masks = mask_width.is_some();
    let mut masks = Vec::new();
    let mut fin_off: usize = batches.iter().map(|b| b.observations.len() / d).sum();
    let (mut obs_off, mut out_off) = (0usize, 0usize);
    let mut episode_returns = Vec::new();
    let mut episode_lengths = Vec::new();
    let mut lags = Vec::with_capacity(batches.len());
    let mut scaled = Vec::new();
    for b in batches {
        let te = b.num_steps * b.num_envs;
        let v = &values[obs_off..obs_off + te + b.num_envs];
        let mut final_values = vec![0.0f32; te];
        for (i, _) in b.truncated.iter().enumerate().filter(|(_, t)| **t == 1) {
            final_values[i] = values[fin_off];
            fin_off += 1;
        }
        scaled.clear();
        scaled.extend(b.rewards.iter().map(|&r| r * reward_scale));
        let input = gae::GaeInput {
            num_steps: b.num_steps,
            num_envs: b.num_envs,
            rewards: &scaled,
            terminated: &b.terminated,
            truncated: &b.truncated,
            values: v,
            final_values: &final_values,
        };
        gae::compute_gae(
            &input,
            cfg.ppo.gamma,
            cfg.ppo.gae_lambda,
            &mut advantages[out_off..out_off + te],
            &mut returns[out_off..out_off + te],
        );
        old_values.extend_from_slice(&v[..te]);
        observations.extend_from_slice(&b.observations[..te * d]);
        match &b.actions {
            BatchActions::Discrete(a) => discrete.extend_from_slice(a),
            BatchActions::Continuous(a) => continuous.extend_from_slice(a),
        }
        if any_masks {
            match &b.action_masks {
                Some(m) => masks.extend_from_slice(m),
                // A batch without masks allows every action.
                None => masks.extend(std::iter::repeat_n(1u8, te * mask_width.unwrap_or(0))),
            }
        }
        old_log_probs.extend_from_slice(&b.log_probs);
        episode_returns.extend_from_slice(&b.episode_returns);
        episode_lengths.extend_from_slice(&b.episode_lengths);
        lags.push(version.saturating_sub(b.policy_version));
        obs_off += (b.num_steps + 1) * b.num_envs;
        out_off += te;
    }
    let explained_variance = explained_variance(&old_values, &returns);
    if cfg.ppo.adv_norm == AdvantageNorm::Update {
        normalize(&mut advantages);
    }
    let actions = if continuous.is_empty() {
        BatchActions::Discrete(discrete)
    } else {
        BatchActions::Continuous(continuous)
    };
    let lag = Lag {
        min: lags.iter().copied().min().unwrap_or(0),
        mean: lags.iter().sum::<u64>() as f64 / lags.len().max(1) as f64,
        max: lags.iter().copied().max().unwrap_or(0),
    };
    Prepared {
        data: UpdateData {
            obs_dim: d,
            observations,
            actions,
            masks: any_masks.then_some(masks),
            old_log_probs,
            advantages,
            returns,
            old_values,
        },
        explained_variance,
        lag,
        episode_returns,
        episode_lengths,
        reward_scale,
    }
}

/// Normalises in place to zero mean and unit (population) std, over everything given.
pub fn normalize(x: &mut [f32]) {
    let n = x.len().max(1) as f64;
    let m = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / n;
    let std = var.sqrt() + 1e-8;
    for v in x.iter_mut() {
        *v = ((*v as f64 - m) / std) as f32;
    }
}

/// 1 - Var(returns - values) / Var(returns): how much of the return the critic explains.
pub fn explained_variance(values: &[f32], returns: &[f32]) -> f64 {
    let n = returns.len().max(1) as f64;
    let var = |it: &mut dyn Iterator<Item = f64>| {
        let v: Vec<f64> = it.collect();
        let m = v.iter().sum::<f64>() / n;
        v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n
    };
    let var_ret = var(&mut returns.iter().map(|&r| r as f64));
    if var_ret == 0.0 {
        return f64::NAN;
    }
    1.0 - var(&mut returns.iter().zip(values).map(|(&r, &v)| (r - v) as f64)) / var_ret
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_and_explained_variance() {
        let mut x = [1.0f32, 2.0, 3.0, 4.0];
        normalize(&mut x);
        // mean 2.5, population std sqrt(1.25) = 1.118034
        assert!(
            (x[0] + 1.341_640_8).abs() < 1e-5 && (x[3] - 1.341_640_8).abs() < 1e-5,
            "{x:?}"
        );
        assert!((explained_variance(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]) - 1.0).abs() < 1e-12);
        // values 0: ev = 0
        assert!(explained_variance(&[0.0, 0.0, 0.0], &[1.0, 2.0, 3.0]).abs() < 1e-12);
    }

    fn batch(actor: &str, seed: u32) -> DecodedBatch {
        let (t, e, d) = (8usize, 3usize, 4usize);
        let f = |k: usize, m: u32| -> Vec<f32> {
            (0..k)
                .map(|i| (((i as u32 * 31 + seed * 17 + m) % 23) as f32 - 11.0) / 7.0)
                .collect()
        };
        let mut truncated = vec![0u8; t * e];
        truncated[5] = 1;
        let mut terminated = vec![0u8; t * e];
        terminated[13] = 1;
        DecodedBatch {
            actor_id: actor.into(),
            sequence: 0,
            policy_version: 0,
            num_steps: t,
            num_envs: e,
            observations: f((t + 1) * e * d, 1),
            actions: BatchActions::Discrete((0..t * e).map(|i| (i % 2) as i32).collect()),
            action_masks: None,
            log_probs: vec![-0.69; t * e],
            rewards: f(t * e, 2),
            terminated,
            truncated,
            final_observations: f(d, 3),
            episode_returns: vec![],
            episode_lengths: vec![],
            ack_to: None,
            trace: Default::default(),
        }
    }

    #[test]
    fn advantage_statistics_are_global_whatever_the_device_count() {
        let _turn = crate::ppo::COLLECTIVE_TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut cfg = RunConfig::preset("CartPole-v1").unwrap();
        cfg.network.obs_norm = true;
        cfg.ppo.scale_rewards = true;
        let spec = sebulba_core::model::ModelSpec::new(
            &sebulba_core::env::env_spec("CartPole-v1").unwrap(),
            &cfg.network,
        );
        let batches = [batch("a", 1), batch("b", 2)];
        let dev = burn::tensor::Device::<sebulba_core::CpuAutodiff>::default();
        // One initial model for both (burn's init RNG is shared with parallel tests).
        let init = spec.init::<sebulba_core::CpuAutodiff>(&dev);
        let mut out = Vec::new();
        for devices in [vec![dev], vec![dev, dev]] {
            let mut ppo = Ppo::with_model(&spec, init.clone(), &cfg.ppo, 5, devices).unwrap();
            let mut norms = Normalizers::new(&cfg, 4);
            out.push(prepare(&batches, 0, &mut ppo, &mut norms, &cfg, 4));
        }
        burn_collective::reset_collective::<sebulba_core::CpuBackend>();
        let (one, two) = (&out[0].data, &out[1].data);
        assert_eq!(one.advantages, two.advantages);
        assert_eq!(one.returns, two.returns);
        assert_eq!(out[0].explained_variance, out[1].explained_variance);
        // Normalised once over all 48 samples of the update: mean 0, std 1.
        let n = one.advantages.len() as f64;
        let mean = one.advantages.iter().map(|&a| a as f64).sum::<f64>() / n;
        let std = (one
            .advantages
            .iter()
            .map(|&a| (a as f64 - mean).powi(2))
            .sum::<f64>()
            / n)
            .sqrt();
        assert_eq!(n, 48.0);
        assert!(
            mean.abs() < 1e-6 && (std - 1.0).abs() < 1e-6,
            "{mean} {std}"
        );
    }
}
