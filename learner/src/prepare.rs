//! Turning an update's batches into training data: reward-scale statistics
//! first; then, batch by batch, the values of its T+1
//! observation rows and its final observations in one forward pass and GAE
//! over that batch's slices; last, advantages normalised once over the whole
//! update. The observation statistics the values use are the ones the actors
//! acted with; [`fold_obs_stats`] moves them on after SGD (`update::step`).

use crate::batch::{BatchActions, DecodedBatch};
use crate::data::{UpdateData, normalize};
use crate::gae;
use crate::ppo::Ppo;
use crate::reward_scale::RewardScaler;
use crate::summary::Lag;
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
            rewards: cfg.ppo.scale_rewards.then(RewardScaler::default),
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
    let reward_scale = observe_rewards(batches, norms);
    let n: usize = batches.iter().map(|b| b.num_steps * b.num_envs).sum();
    let mut out = Collected::with_capacity(n, obs_dim, batches);
    let mut lags = Vec::with_capacity(batches.len());
    for b in batches {
        out.push(b, ppo, reward_scale, cfg);
        lags.push(version.saturating_sub(b.policy_version));
    }
    let mut data = out.data;
    let explained_variance = explained_variance(&data.old_values, &data.returns);
    if cfg.ppo.adv_norm == AdvantageNorm::Update {
        normalize(&mut data.advantages);
    }
    Prepared {
        data,
        explained_variance,
        lag: Lag {
            min: lags.iter().copied().min().unwrap_or(0),
            mean: lags.iter().sum::<u64>() as f64 / lags.len().max(1) as f64,
            max: lags.iter().copied().max().unwrap_or(0),
        },
        episode_returns: out.episode_returns,
        episode_lengths: out.episode_lengths,
        reward_scale,
    }
}

/// Folds the update's observations into the normaliser's statistics and sets
/// them on the model: after SGD, so the update itself sees the statistics its
/// batches were acted with, and the new weights carry the new ones.
pub fn fold_obs_stats<B: AutodiffBackend>(
    batches: &[DecodedBatch],
    ppo: &mut Ppo<B>,
    norms: &mut Normalizers,
    d: usize,
) {
    if let Some(stats) = &mut norms.obs {
        for b in batches {
            stats.update(&b.observations[..b.num_steps * b.num_envs * d]);
        }
        ppo.set_obs_stats(stats);
    }
}

/// Folds the update's discounted returns into the reward scale; returns the
/// reward factor.
fn observe_rewards(batches: &[DecodedBatch], norms: &mut Normalizers) -> f32 {
    match &mut norms.rewards {
        Some(s) => {
            for b in batches {
                s.observe(&b.discounted_returns);
            }
            s.factor()
        }
        None => 1.0,
    }
}

/// The update's training data, batch after batch.
struct Collected {
    data: UpdateData,
    /// Mask width, when any batch has masks (a batch without allows every action).
    mask_width: Option<usize>,
    episode_returns: Vec<f64>,
    episode_lengths: Vec<u32>,
}

impl Collected {
    fn with_capacity(n: usize, obs_dim: usize, batches: &[DecodedBatch]) -> Self {
        let mask_width = batches.iter().find_map(|b| {
            b.action_masks
                .as_ref()
                .map(|m| m.len() / (b.num_steps * b.num_envs).max(1))
        });
        let continuous = matches!(
            batches.first().map(|b| &b.actions),
            Some(BatchActions::Continuous(_))
        );
        Self {
            data: UpdateData {
                obs_dim,
                observations: Vec::with_capacity(n * obs_dim),
                actions: if continuous {
                    BatchActions::Continuous(Vec::new())
                } else {
                    BatchActions::Discrete(Vec::with_capacity(n))
                },
                masks: mask_width.map(|w| Vec::with_capacity(n * w)),
                old_log_probs: Vec::with_capacity(n),
                advantages: Vec::with_capacity(n),
                returns: Vec::with_capacity(n),
                old_values: Vec::with_capacity(n),
            },
            mask_width,
            episode_returns: Vec::new(),
            episode_lengths: Vec::new(),
        }
    }

    /// Values and GAE of batch `b`, appended with its samples.
    fn push<B: AutodiffBackend>(
        &mut self,
        b: &DecodedBatch,
        ppo: &mut Ppo<B>,
        reward_scale: f32,
        cfg: &RunConfig,
    ) {
        let te = b.num_steps * b.num_envs;
        let d = self.data.obs_dim;
        // One forward pass: the T+1 rows, then the final observations.
        let rows = [b.observations.as_slice(), &b.final_observations].concat();
        let values = ppo.values(&rows);
        let (v, finals) = values.split_at(te + b.num_envs);
        let mut final_values = vec![0.0f32; te];
        let truncated = b.truncated.iter().enumerate().filter(|(_, t)| **t == 1);
        for ((i, _), &fv) in truncated.zip(finals) {
            final_values[i] = fv;
        }
        let scaled: Vec<f32> = b.rewards.iter().map(|&r| r * reward_scale).collect();
        let input = gae::GaeInput {
            num_steps: b.num_steps,
            num_envs: b.num_envs,
            rewards: &scaled,
            terminated: &b.terminated,
            truncated: &b.truncated,
            values: v,
            final_values: &final_values,
        };
        let (mut adv, mut ret) = (vec![0.0f32; te], vec![0.0f32; te]);
        gae::compute_gae(
            &input,
            cfg.ppo.gamma,
            cfg.ppo.gae_lambda,
            &mut adv,
            &mut ret,
        );
        let out = &mut self.data;
        out.advantages.extend_from_slice(&adv);
        out.returns.extend_from_slice(&ret);
        out.old_values.extend_from_slice(&v[..te]);
        out.observations
            .extend_from_slice(&b.observations[..te * d]);
        match (&mut out.actions, &b.actions) {
            (BatchActions::Discrete(all), BatchActions::Discrete(a)) => all.extend_from_slice(a),
            (BatchActions::Continuous(all), BatchActions::Continuous(a)) => {
                all.extend_from_slice(a)
            }
            _ => unreachable!("every batch of a run has the run's action space"),
        }
        if let (Some(all), Some(w)) = (&mut out.masks, self.mask_width) {
            match &b.action_masks {
                Some(m) => all.extend_from_slice(m),
                None => all.extend(std::iter::repeat_n(1u8, te * w)),
            }
        }
        out.old_log_probs.extend_from_slice(&b.log_probs);
        self.episode_returns.extend_from_slice(&b.episode_returns);
        self.episode_lengths.extend_from_slice(&b.episode_lengths);
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
    use burn::module::Param;
    use burn::tensor::{Tensor, TensorData};
    use sebulba_core::CpuAutodiff;
    use sebulba_core::model::{ActorCritic, ModelSpec};

    #[test]
    fn explained_variance_of_perfect_and_constant_critics() {
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
            discounted_returns: vec![],
            episode_returns: vec![],
            episode_lengths: vec![],
            ack_to: None,
            trace: Default::default(),
        }
    }

    /// A CartPole model whose value is `tanh(obs[0])`: one-unit critic
    /// torso reading the first feature, value head 1 x that, no biases.
    fn tanh_critic(spec: &ModelSpec) -> ActorCritic<CpuAutodiff> {
        let dev = Default::default();
        let mut m = spec.init::<CpuAutodiff>(&dev);
        let critic = m.critic.as_mut().expect("separate critic");
        let t = |v: Vec<f32>, shape: [usize; 2]| {
            Param::from_tensor(Tensor::from_data(TensorData::new(v, shape), &dev))
        };
        let zero = |p: &Param<Tensor<CpuAutodiff, 1>>| Param::from_tensor(p.val().zeros_like());
        critic.layers[0].weight = t(vec![1.0, 0.0, 0.0, 0.0], [4, 1]);
        critic.layers[0].bias = critic.layers[0].bias.as_ref().map(zero);
        m.value_head.weight = t(vec![1.0], [1, 1]);
        m.value_head.bias = m.value_head.bias.as_ref().map(zero);
        m
    }

    /// GAE written out independently: per env, backwards in time.
    fn reference_gae(b: &DecodedBatch, gamma: f64, lambda: f64) -> (Vec<f64>, Vec<f64>) {
        let (t_len, e_len) = (b.num_steps, b.num_envs);
        let v = |row: usize| (b.observations[row * 4] as f64).tanh();
        let (mut adv, mut values) = (vec![0.0; t_len * e_len], vec![0.0; t_len * e_len]);
        let mut finals = b.final_observations.chunks(4);
        let final_value: Vec<Option<f64>> = b
            .truncated
            .iter()
            .map(|&tr| (tr == 1).then(|| (finals.next().unwrap()[0] as f64).tanh()))
            .collect();
        for e in 0..e_len {
            let mut next = 0.0;
            for t in (0..t_len).rev() {
                let i = t * e_len + e;
                let (boot, carry) = match (b.terminated[i], final_value[i]) {
                    (1, _) => (0.0, 0.0),
                    (_, Some(fv)) => (fv, 0.0),
                    _ => (v(i + e_len), next),
                };
                next = b.rewards[i] as f64 + gamma * boot - v(i) + gamma * lambda * carry;
                adv[i] = next;
                values[i] = v(i);
            }
        }
        let ret = adv.iter().zip(&values).map(|(a, v)| a + v).collect();
        (adv, ret)
    }

    #[test]
    fn values_gae_and_normalisation_follow_an_independent_computation_in_both_engines() {
        let mut cfg = RunConfig::preset("CartPole-v1").unwrap();
        cfg.network.hidden = vec![1];
        cfg.ppo.adv_norm = AdvantageNorm::Off;
        let spec = ModelSpec::new(
            &sebulba_core::env::env_spec("CartPole-v1").unwrap(),
            &cfg.network,
        );
        let batches = [batch("a", 1), batch("b", 2)];
        let (gamma, lambda) = (cfg.ppo.gamma, cfg.ppo.gae_lambda);
        let mut want_adv = Vec::new();
        let mut want_ret = Vec::new();
        for b in &batches {
            let (a, r) = reference_gae(b, gamma, lambda);
            want_adv.extend(a);
            want_ret.extend(r);
        }
        for fused in [false, true] {
            let dev = Default::default();
            let mut ppo =
                Ppo::with_model(&spec, tanh_critic(&spec), &cfg.ppo, 5, vec![dev]).unwrap();
            if fused {
                ppo.use_fused().unwrap();
            }
            let engine = ppo.engine();
            let mut norms = Normalizers::new(&cfg, 4);
            let out = prepare(&batches, 0, &mut ppo, &mut norms, &cfg, 4);
            let close = |got: &[f32], want: &[f64]| {
                got.len() == want.len()
                    && got
                        .iter()
                        .zip(want)
                        .all(|(g, w)| (*g as f64 - w).abs() < 1e-5)
            };
            assert!(
                close(&out.data.advantages, &want_adv),
                "{engine}: {:?}",
                out.data.advantages
            );
            assert!(close(&out.data.returns, &want_ret), "{engine}");
            // Normalised once over all 48 samples of the update: mean 0, std 1.
            cfg.ppo.adv_norm = AdvantageNorm::Update;
            let mut norms = Normalizers::new(&cfg, 4);
            let normed = prepare(&batches, 0, &mut ppo, &mut norms, &cfg, 4)
                .data
                .advantages;
            cfg.ppo.adv_norm = AdvantageNorm::Off;
            let n = want_adv.len() as f64;
            let mean = want_adv.iter().sum::<f64>() / n;
            let std = (want_adv.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / n).sqrt();
            let want: Vec<f64> = want_adv.iter().map(|a| (a - mean) / std).collect();
            assert_eq!(normed.len(), 48);
            assert!(close(&normed, &want), "{engine}: {normed:?}");
        }
    }
}
