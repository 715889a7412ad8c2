//! The fused CPU engine: PPO's forward pass, loss gradients and Adam written
//! out by hand over flat f32 buffers, for one CPU device. burn's autodiff on
//! ndarray spends most of a small network's update in per-operation overhead
//! (graph nodes, allocations, an f64 libm tanh per element); here a minibatch
//! step is a handful of matrix products and loops with no allocation. Every
//! gradient is checked against burn's autodiff in the tests, and the burn model
//! and Adam state are kept in step (see [`burn_io`]), so publishing and
//! checkpoints are the same whichever engine ran.
//!
//! What it covers: MLP torsos (separate or shared, tanh or relu, no LayerNorm),
//! observation normalisation, categorical (masked) and tanh-normal heads, on a
//! single CPU device. Anything else runs on burn.

pub mod burn_io;
mod heads;

use crate::ppo::{ShardStats, UpdateData};
use crate::validate::BatchActions;
use sebulba_core::config::PpoConfig;
use sebulba_core::distribution::ActionDist;
use sebulba_core::model::ModelSpec;
use sebulba_core::model::fast::net::{self, Layout, Work};
use sebulba_core::model::fast::{ObsScaler, covers};

/// Why a run cannot use the fused engine.
#[derive(Debug, thiserror::Error)]
#[error("the fused engine does not cover {0}")]
pub struct Unsupported(pub String);

/// Adam's hyper-parameters: burn's defaults, with the run's epsilon.
const BETA_1: f32 = 0.9;
const BETA_2: f32 = 0.999;

pub struct Fused {
    layout: Layout,
    dist: ActionDist,
    /// Parameters, gradients and Adam's moments, all in layout order.
    params: Vec<f32>,
    grads: Vec<f32>,
    m1: Vec<f32>,
    m2: Vec<f32>,
    /// Adam steps taken.
    time: usize,
    /// Observation normaliser, when on.
    scaler: Option<ObsScaler>,
    work: Work,
    d_logp: Vec<f64>,
    d_ent: Vec<f64>,
    zeros: Vec<f32>,
}

impl Fused {
    /// Whether the fused engine covers `spec` on `devices` CPU devices.
    pub fn check(spec: &ModelSpec, devices: usize) -> Result<(), Unsupported> {
        if devices != 1 {
            return Err(Unsupported(format!(
                "{devices} devices (it runs on one CPU device)"
            )));
        }
        if !covers(&spec.network) {
            return Err(Unsupported("LayerNorm (`network.layer_norm`)".into()));
        }
        Ok(())
    }

    /// An engine with zero parameters and no Adam state: load them with
    /// [`Fused::set_params`] and [`Fused::set_adam`].
    pub fn new(spec: &ModelSpec) -> Result<Self, Unsupported> {
        Self::check(spec, 1)?;
        let layout = Layout::new(spec);
        let n = layout.len;
        let width = layout.head_dim;
        Ok(Self {
            layout,
            dist: spec.dist(),
            params: vec![0.0; n],
            grads: vec![0.0; n],
            m1: vec![0.0; n],
            m2: vec![0.0; n],
            time: 0,
            scaler: None,
            work: Work::default(),
            d_logp: vec![0.0; width],
            d_ent: vec![0.0; width],
            zeros: vec![0.0; width],
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn params(&self) -> &[f32] {
        &self.params
    }

    /// Gradients of the last step, before clipping.
    pub fn grads(&self) -> &[f32] {
        &self.grads
    }

    pub fn set_params(&mut self, p: Vec<f32>) {
        assert_eq!(p.len(), self.layout.len, "parameter count");
        self.params = p;
    }

    /// Adam's moments and step count.
    pub fn adam(&self) -> (&[f32], &[f32], usize) {
        (&self.m1, &self.m2, self.time)
    }

    pub fn set_adam(&mut self, m1: Vec<f32>, m2: Vec<f32>, time: usize) {
        assert!(m1.len() == self.layout.len && m2.len() == self.layout.len);
        (self.m1, self.m2, self.time) = (m1, m2, time);
    }

    /// The observation normaliser (`None`: off).
    pub fn set_scaler(&mut self, scaler: Option<ObsScaler>) {
        self.scaler = scaler;
    }

    /// Fills `work.x` with the (normalised) observations of `idx`.
    fn gather_obs(&mut self, data: &UpdateData, idx: &[usize]) {
        let d = data.obs_dim;
        self.work.resize(&self.layout, idx.len());
        for (row, &i) in self.work.x.chunks_exact_mut(d).zip(idx) {
            row.copy_from_slice(&data.observations[i * d..(i + 1) * d]);
            if let Some(s) = &self.scaler {
                s.apply(row);
            }
        }
    }

    /// State values of the observation rows `obs` (`[rows * obs_dim]`).
    pub fn values(&mut self, obs: &[f32]) -> Vec<f32> {
        let d = self.layout.obs_dim;
        let rows = obs.len() / d;
        self.work.resize(&self.layout, rows);
        self.work.x.copy_from_slice(&obs[..rows * d]);
        if let Some(s) = &self.scaler {
            self.work.x.chunks_exact_mut(d).for_each(|row| s.apply(row));
        }
        net::value_forward(&self.layout, &self.params, &mut self.work);
        self.work.value.clone()
    }

    /// One minibatch step: the loss of the samples `idx` (advantages `adv`,
    /// noise `noise` for the sampled entropy), its gradient, global-norm
    /// clipping and an Adam step at `lr`; no step when the approximate KL is
    /// past `cfg.target_kl`. The same contract as a single burn replica's step.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &mut self,
        data: &UpdateData,
        idx: &[usize],
        adv: &[f32],
        noise: &[f32],
        cfg: &PpoConfig,
        lr: f64,
        clip: f64,
    ) -> ShardStats {
        self.gather_obs(data, idx);
        net::forward(&self.layout, &self.params, &mut self.work);
        let m = idx.len();
        let inv_m = 1.0 / m as f64;
        let hd = self.layout.head_dim;
        let value_clip = cfg.clip_value_loss.then_some(cfg.value_clip_coef);
        let (mut policy, mut value, mut entropy, mut kl, mut clipped) = (0.0, 0.0, 0.0, 0.0, 0);
        for (k, &i) in idx.iter().enumerate() {
            let head = &self.work.head[k * hd..(k + 1) * hd];
            let eval = match (&self.dist, &data.actions) {
                (ActionDist::Categorical { .. }, BatchActions::Discrete(a)) => {
                    let mask = data.masks.as_ref().map(|mk| &mk[i * hd..(i + 1) * hd]);
                    heads::categorical(head, a[i] as usize, mask, &mut self.d_logp, &mut self.d_ent)
                }
                (
                    ActionDist::TanhNormal {
                        squash, min_std, ..
                    },
                    BatchActions::Continuous(u),
                ) => {
                    let w = hd / 2;
                    // No noise given: the entropy estimate at the mean (as burn's path).
                    let eps = match noise.get(k * w..(k + 1) * w) {
                        Some(e) => e,
                        None => &self.zeros[..w],
                    };
                    heads::tanh_normal(
                        head,
                        &u[i * w..(i + 1) * w],
                        eps,
                        *min_std as f64,
                        squash,
                        cfg.gaussian_entropy,
                        &mut self.d_logp,
                        &mut self.d_ent,
                    )
                }
                _ => unreachable!("update data is built for the run's action space"),
            };
            let t = heads::ppo_terms(
                eval.logp,
                data.old_log_probs[i] as f64,
                adv[k] as f64,
                self.work.value[k] as f64,
                data.returns[i] as f64,
                data.old_values[i] as f64,
                clip,
                value_clip,
            );
            policy += t.policy;
            value += t.value;
            entropy += eval.entropy;
            kl += t.approx_kl;
            clipped += usize::from(t.clipped);
            // total = policy - ent_coef * entropy + vf_coef * value, each a mean.
            let d_head = &mut self.work.d_head[k * hd..(k + 1) * hd];
            for ((g, &dl), &de) in d_head.iter_mut().zip(&self.d_logp).zip(&self.d_ent) {
                *g = ((t.d_logp * dl - cfg.ent_coef * de) * inv_m) as f32;
            }
            self.work.d_value[k] = (cfg.vf_coef * t.d_value * inv_m) as f32;
        }
        let approx_kl = kl * inv_m;
        if cfg.target_kl > 0.0 && approx_kl > cfg.target_kl {
            return ShardStats {
                approx_kl,
                ..Default::default()
            };
        }
        net::backward(&self.layout, &self.params, &mut self.grads, &mut self.work);
        let grad_norm = self.clip_grads(cfg.max_grad_norm);
        self.adam_step(lr, cfg.adam_eps as f32);
        ShardStats {
            policy_loss: policy * inv_m,
            value_loss: value * inv_m,
            entropy: entropy * inv_m,
            approx_kl,
            clip_fraction: clipped as f64 * inv_m,
            grad_norm,
            stepped: true,
        }
    }

    /// Scales the gradients to global norm `max_norm` when above it (as
    /// [`crate::ppo::clip_global_norm`]); returns the norm before.
    fn clip_grads(&mut self, max_norm: f64) -> f64 {
        let norm = self
            .grads
            .iter()
            .map(|&g| g as f64 * g as f64)
            .sum::<f64>()
            .sqrt();
        if norm > max_norm && norm.is_finite() {
            let factor = (max_norm / (norm + 1e-6)) as f32;
            self.grads.iter_mut().for_each(|g| *g *= factor);
        }
        norm
    }

    /// burn's Adam, term for term: `p -= lr * m * c / (sqrt(v) + eps * b2)` with
    /// `b2 = sqrt(1 - beta2^t)` and `c = b2 / (1 - beta1^t)`.
    fn adam_step(&mut self, lr: f64, eps: f32) {
        self.time += 1;
        let t = self.time as i32;
        let bc2 = (1.0 - BETA_2.powi(t)).sqrt();
        let combined = bc2 / (1.0 - BETA_1.powi(t));
        let eps = eps * bc2;
        let lr = lr as f32;
        for (((p, &g), m), v) in self
            .params
            .iter_mut()
            .zip(&self.grads)
            .zip(&mut self.m1)
            .zip(&mut self.m2)
        {
            *m = *m * BETA_1 + g * (1.0 - BETA_1);
            *v = *v * BETA_2 + g * g * (1.0 - BETA_2);
            *p -= lr * (*m * combined / (v.sqrt() + eps));
        }
    }
}

#[cfg(test)]
mod tests;
