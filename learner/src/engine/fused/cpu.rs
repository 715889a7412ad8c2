//! The fused engine's arithmetic on flat f32 buffers: a minibatch's forward
//! pass (core's [`net`]), the PPO loss gradients per sample ([`super::heads`]),
//! the backward pass ([`super::backward`]), global-norm clipping and Adam. No
//! burn here: [`super::FusedEngine`] keeps the burn model in step.

use super::backward::{self, Grads};
use super::heads;
use crate::batch::BatchActions;
use crate::data::{Minibatch, StepStats, UpdateData};
use sebulba_core::distribution::ActionDist;
use sebulba_core::model::ModelSpec;
use sebulba_core::model::fused::ObsScaler;
use sebulba_core::model::fused::net::{self, Layout, Work};

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
    grad_work: Grads,
    d_logp: Vec<f64>,
    d_ent: Vec<f64>,
    zeros: Vec<f32>,
}

impl Fused {
    /// An engine with zero parameters and no Adam state: load them with
    /// [`Fused::set_params`] and [`Fused::set_adam`].
    pub fn new(spec: &ModelSpec) -> Self {
        let layout = Layout::new(spec);
        let n = layout.len;
        let width = layout.head_dim;
        Self {
            layout,
            dist: spec.dist(),
            params: vec![0.0; n],
            grads: vec![0.0; n],
            m1: vec![0.0; n],
            m2: vec![0.0; n],
            time: 0,
            scaler: None,
            work: Work::default(),
            grad_work: Grads::default(),
            d_logp: vec![0.0; width],
            d_ent: vec![0.0; width],
            zeros: vec![0.0; width],
        }
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
        self.load_rows(obs);
        net::value_forward(&self.layout, &self.params, &mut self.work);
        self.work.value.clone()
    }

    /// Policy-head outputs of the observation rows `obs`.
    pub fn heads(&mut self, obs: &[f32]) -> Vec<f32> {
        self.load_rows(obs);
        net::policy_forward(&self.layout, &self.params, &mut self.work);
        self.work.head.clone()
    }

    /// Fills `work.x` with the (normalised) rows of `obs`.
    fn load_rows(&mut self, obs: &[f32]) {
        let d = self.layout.obs_dim;
        let rows = obs.len() / d;
        self.work.resize(&self.layout, rows);
        self.work.x.copy_from_slice(&obs[..rows * d]);
        if let Some(s) = &self.scaler {
            self.work.x.chunks_exact_mut(d).for_each(|row| s.apply(row));
        }
    }

    /// One minibatch step: the loss of the samples `mb.idx`, its gradient,
    /// global-norm clipping and an Adam step at `mb.lr`; no step when the
    /// approximate KL is past `target_kl`. The same contract as a single burn
    /// replica's step.
    pub fn step(&mut self, mb: &Minibatch<'_>) -> StepStats {
        let cfg = mb.cfg;
        self.gather_obs(mb.data, mb.idx);
        net::forward(&self.layout, &self.params, &mut self.work);
        self.grad_work.resize(&self.layout, mb.idx.len());
        let inv_m = 1.0 / mb.idx.len() as f64;
        let mut sums = StepStats::default();
        let mut clipped = 0usize;
        for (k, &i) in mb.idx.iter().enumerate() {
            let (eval, t) = self.sample_terms(mb, k, i);
            sums.policy_loss += t.policy;
            sums.value_loss += t.value;
            sums.entropy += eval.entropy;
            sums.approx_kl += t.approx_kl;
            clipped += usize::from(t.clipped);
            // total = policy - ent_coef * entropy + vf_coef * value, each a mean.
            let hd = self.layout.head_dim;
            let d_head = &mut self.grad_work.d_head[k * hd..(k + 1) * hd];
            for ((g, &dl), &de) in d_head.iter_mut().zip(&self.d_logp).zip(&self.d_ent) {
                *g = ((t.d_logp * dl - cfg.ent_coef * de) * inv_m) as f32;
            }
            self.grad_work.d_value[k] = (cfg.vf_coef * t.d_value * inv_m) as f32;
        }
        let approx_kl = sums.approx_kl * inv_m;
        if cfg.target_kl > 0.0 && approx_kl > cfg.target_kl {
            return StepStats {
                approx_kl,
                ..Default::default()
            };
        }
        backward::backward(
            &self.layout,
            &self.params,
            &mut self.grads,
            &self.work,
            &mut self.grad_work,
        );
        let grad_norm = self.clip_grads(cfg.max_grad_norm);
        let loss = sums.policy_loss + sums.value_loss + sums.entropy;
        if !grad_norm.is_finite() || !loss.is_finite() {
            return StepStats::skipped_non_finite();
        }
        self.adam_step(mb.lr, cfg.adam_eps as f32);
        StepStats {
            policy_loss: sums.policy_loss * inv_m,
            value_loss: sums.value_loss * inv_m,
            entropy: sums.entropy * inv_m,
            approx_kl,
            clip_fraction: clipped as f64 * inv_m,
            grad_norm,
            stepped: true,
            non_finite: false,
        }
    }

    /// Sample `i` (row `k` of the minibatch): its log-probability and entropy
    /// with their gradients (into `d_logp`, `d_ent`) and its PPO loss terms.
    fn sample_terms(
        &mut self,
        mb: &Minibatch<'_>,
        k: usize,
        i: usize,
    ) -> (heads::Eval, heads::Terms) {
        let (data, cfg) = (mb.data, mb.cfg);
        let hd = self.layout.head_dim;
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
                let eps = match mb.noise.get(k * w..(k + 1) * w) {
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
        let terms = heads::ppo_terms(
            eval.logp,
            data.old_log_probs[i] as f64,
            mb.adv[k] as f64,
            self.work.value[k] as f64,
            data.returns[i] as f64,
            data.old_values[i] as f64,
            mb.clip,
            cfg.clip_value_loss.then_some(cfg.value_clip_coef),
        );
        (eval, terms)
    }

    /// Scales the gradients to global norm `max_norm` when above it (as
    /// [`crate::engine::burn::clip_global_norm`]); returns the norm before.
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
