//! The PPO update on one device: clipped surrogate, value loss
//! `0.5 * vf_coef * mean((V - R)^2)`, entropy bonus, gradient clipping by the
//! global norm over all parameters together, Adam; epochs x shuffled minibatches.

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Int, Tensor, TensorData};
use burn_optim::adaptor::OptimizerAdaptor;
use burn_optim::{Adam, AdamConfig, GradientsParams, Optimizer};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use sebulba_core::config::PpoConfig;
use sebulba_core::distribution::categorical_logp_entropy;
use sebulba_core::model::{ActorCritic, ModelSpec};

/// Flat training data of one update (N samples), advantages already normalised.
#[derive(Debug, Default, Clone)]
pub struct UpdateData {
    pub obs_dim: usize,
    /// `[N * obs_dim]`
    pub observations: Vec<f32>,
    pub actions: Vec<i32>,
    pub old_log_probs: Vec<f32>,
    pub advantages: Vec<f32>,
    pub returns: Vec<f32>,
}

impl UpdateData {
    pub fn len(&self) -> usize {
        self.actions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

/// Averages over all minibatch steps of one update.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct PpoStats {
    pub policy_loss: f64,
    pub value_loss: f64,
    pub entropy: f64,
    pub approx_kl: f64,
    pub clip_fraction: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub learning_rate: f64,
}

pub struct Ppo<B: AutodiffBackend> {
    model: Option<ActorCritic<B>>,
    optim: OptimizerAdaptor<Adam, ActorCritic<B>, B>,
    device: B::Device,
    rng: StdRng,
}

impl<B: AutodiffBackend> Ppo<B> {
    /// A fresh model (backend RNG seeded with `seed`) and Adam.
    pub fn new(spec: &ModelSpec, cfg: &PpoConfig, seed: u64, device: B::Device) -> Self {
        B::seed(&device, seed);
        let model = spec.init::<B>(&device);
        let optim = AdamConfig::new().with_epsilon(cfg.adam_eps as f32).init();
        Self {
            model: Some(model),
            optim,
            device,
            rng: StdRng::seed_from_u64(seed ^ 0x5eb0_15ba),
        }
    }

    pub fn model(&self) -> &ActorCritic<B> {
        self.model
            .as_ref()
            .expect("model is only taken during a step")
    }

    /// The model without autodiff, for value estimates and publishing.
    pub fn inference_model(&self) -> ActorCritic<B::InnerBackend> {
        self.model().valid()
    }

    pub fn device(&self) -> &B::Device {
        &self.device
    }

    /// Epochs x minibatches of PPO over `data` at learning rate `lr`.
    pub fn update(&mut self, data: &UpdateData, cfg: &PpoConfig, lr: f64) -> PpoStats {
        let n = data.len();
        let mb_size = n / cfg.minibatches;
        let mut order: Vec<usize> = (0..n).collect();
        let mut sum = PpoStats::default();
        let mut steps = 0usize;
        for _ in 0..cfg.epochs {
            order.shuffle(&mut self.rng);
            for mb in order.chunks_exact(mb_size).take(cfg.minibatches) {
                let s = self.minibatch_step(data, mb, cfg, lr);
                sum.policy_loss += s.policy_loss;
                sum.value_loss += s.value_loss;
                sum.entropy += s.entropy;
                sum.approx_kl += s.approx_kl;
                sum.clip_fraction += s.clip_fraction;
                sum.grad_norm += s.grad_norm;
                steps += 1;
            }
        }
        let k = steps.max(1) as f64;
        PpoStats {
            policy_loss: sum.policy_loss / k,
            value_loss: sum.value_loss / k,
            entropy: sum.entropy / k,
            approx_kl: sum.approx_kl / k,
            clip_fraction: sum.clip_fraction / k,
            grad_norm: sum.grad_norm / k,
            learning_rate: lr,
        }
    }

    fn minibatch_step(
        &mut self,
        data: &UpdateData,
        idx: &[usize],
        cfg: &PpoConfig,
        lr: f64,
    ) -> PpoStats {
        let m = idx.len();
        let d = data.obs_dim;
        let mut obs = Vec::with_capacity(m * d);
        for &i in idx {
            obs.extend_from_slice(&data.observations[i * d..(i + 1) * d]);
        }
        let gather = |v: &[f32]| idx.iter().map(|&i| v[i]).collect::<Vec<f32>>();
        let dev = &self.device;
        let obs = Tensor::<B, 2>::from_data(TensorData::new(obs, [m, d]), dev);
        let actions = Tensor::<B, 1, Int>::from_data(
            TensorData::new(
                idx.iter()
                    .map(|&i| data.actions[i] as i64)
                    .collect::<Vec<_>>(),
                [m],
            ),
            dev,
        );
        let old_logp =
            Tensor::<B, 1>::from_data(TensorData::new(gather(&data.old_log_probs), [m]), dev);
        let adv = Tensor::<B, 1>::from_data(TensorData::new(gather(&data.advantages), [m]), dev);
        let ret = Tensor::<B, 1>::from_data(TensorData::new(gather(&data.returns), [m]), dev);

        let model = self.model.take().expect("model present between steps");
        let losses = ppo_losses(&model, obs, actions, old_logp, adv, ret, cfg);
        let grads = losses.total.backward();
        let mut grads = GradientsParams::from_grads(grads, &model);
        let grad_norm = clip_global_norm(&model, &mut grads, cfg.max_grad_norm);
        self.model = Some(self.optim.step(lr, model, grads));
        PpoStats {
            policy_loss: scalar(losses.policy),
            value_loss: scalar(losses.value),
            entropy: scalar(losses.entropy),
            approx_kl: scalar(losses.approx_kl),
            clip_fraction: scalar(losses.clip_fraction),
            grad_norm,
            learning_rate: lr,
        }
    }
}

fn scalar<B: Backend>(t: Tensor<B, 1>) -> f64 {
    t.into_scalar().elem::<f64>()
}

/// The loss terms of one minibatch; `total` carries the graph.
pub struct Losses<B: AutodiffBackend> {
    pub total: Tensor<B, 1>,
    pub policy: Tensor<B::InnerBackend, 1>,
    pub value: Tensor<B::InnerBackend, 1>,
    pub entropy: Tensor<B::InnerBackend, 1>,
    pub approx_kl: Tensor<B::InnerBackend, 1>,
    pub clip_fraction: Tensor<B::InnerBackend, 1>,
}

/// PPO losses for one minibatch: `total = policy - ent_coef * entropy + vf_coef * value`
/// with `value = 0.5 * mean((V - R)^2)`.
pub fn ppo_losses<B: AutodiffBackend>(
    model: &ActorCritic<B>,
    obs: Tensor<B, 2>,
    actions: Tensor<B, 1, Int>,
    old_logp: Tensor<B, 1>,
    adv: Tensor<B, 1>,
    ret: Tensor<B, 1>,
    cfg: &PpoConfig,
) -> Losses<B> {
    let logits = model.policy(obs.clone());
    let (logp, entropy) = categorical_logp_entropy(logits, actions);
    let log_ratio = logp - old_logp;
    let ratio = log_ratio.clone().exp();
    let clip = cfg.clip_coef;
    let pg1 = -adv.clone() * ratio.clone();
    let pg2 = -adv * ratio.clone().clamp(1.0 - clip, 1.0 + clip);
    let policy = pg1.max_pair(pg2).mean();
    let v = model.value(obs);
    let value = (v - ret).powi_scalar(2).mean() * 0.5;
    let entropy = entropy.mean();
    let total = policy.clone() - entropy.clone() * cfg.ent_coef + value.clone() * cfg.vf_coef;
    // Schulman's low-variance KL estimator: E[(r - 1) - ln r].
    let ratio_in = ratio.inner();
    let approx_kl = ((ratio_in.clone() - 1.0) - log_ratio.inner()).mean();
    let clip_fraction = (ratio_in - 1.0).abs().greater_elem(clip).float().mean();
    Losses {
        total,
        policy: policy.inner(),
        value: value.inner(),
        entropy: entropy.inner(),
        approx_kl,
        clip_fraction,
    }
}

/// Scales all gradients together so their global L2 norm is at most `max_norm`
/// (per-parameter clipping would distort the direction). Returns the norm before.
pub fn clip_global_norm<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    grads: &mut GradientsParams,
    max_norm: f64,
) -> f64 {
    struct SumSq<'a, B: AutodiffBackend> {
        grads: &'a GradientsParams,
        total: Option<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for SumSq<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
                let s = g.powi_scalar(2).sum();
                self.total = Some(match self.total.take() {
                    Some(t) => t + s,
                    None => s,
                });
            }
        }
    }
    struct Scale<'a> {
        grads: &'a mut GradientsParams,
        factor: f64,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Scale<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
                self.grads
                    .register::<B::InnerBackend, D>(param.id, g * self.factor);
            }
        }
    }
    let mut sum = SumSq::<B> { grads, total: None };
    model.visit(&mut sum);
    let norm = sum
        .total
        .map(|t| t.into_scalar().elem::<f64>().sqrt())
        .unwrap_or(0.0);
    if norm > max_norm && norm.is_finite() {
        let factor = max_norm / (norm + 1e-6);
        model.visit(&mut Scale { grads, factor });
    }
    norm
}

#[cfg(test)]
mod tests;
