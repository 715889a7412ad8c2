//! The fused engine's arithmetic on flat f32 buffers: a minibatch's forward
//! pass (core's [`net`]), the PPO loss gradients per sample ([`super::heads`]),
//! the backward pass ([`super::backward`]), global-norm clipping and Adam. No
//! burn here: [`super::FusedEngine`] keeps the burn model in step.

use super::shard::{Shard, StepInputs};
use crate::data::{LossTerms, Minibatch, StepStats};
use sebulba_core::distribution::ActionDist;
use sebulba_core::model::ModelSpec;
use sebulba_core::model::fused::ObsScaler;
use sebulba_core::model::fused::kernels::wide;
use sebulba_core::model::fused::net::{self, Layout};

/// Adam's hyper-parameters: burn's defaults, with the run's epsilon.
const BETA_1: f32 = 0.9;
const BETA_2: f32 = 0.999;

/// The fewest minibatch rows worth a thread of their own: below this the
/// hand-over costs more than the rows' arithmetic saves.
pub const MIN_SHARD_ROWS: usize = 32;

pub struct Fused {
    layout: Layout,
    dist: ActionDist,
    /// Parameters and Adam's moments, in layout order.
    params: Vec<f32>,
    m1: Vec<f32>,
    m2: Vec<f32>,
    /// Adam steps taken.
    time: usize,
    /// Observation normaliser, when on.
    scaler: Option<ObsScaler>,
    /// One per thread; the first one's gradient is the step's (the others'
    /// are added into it).
    shards: Vec<Shard>,
    /// The threads beyond the caller's (`None`: one thread).
    pool: Option<rayon::ThreadPool>,
}

impl Fused {
    /// An engine with zero parameters and no Adam state: load them with
    /// [`Fused::set_params`] and [`Fused::set_adam`]. A minibatch step is
    /// spread over up to `threads` threads (the caller's and `threads - 1`
    /// of a pool of its own); if the pool cannot be made it runs on one,
    /// and says so.
    pub fn new(spec: &ModelSpec, threads: usize) -> Self {
        let layout = Layout::new(spec);
        let n = layout.len;
        let pool = (threads > 1)
            .then(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads - 1)
                    .thread_name(|i| format!("learner-shard-{}", i + 1))
                    .build()
                    .inspect_err(|e| {
                        tracing::warn!(threads, error = %e, "no threads for the fused engine: one thread steps")
                    })
                    .ok()
            })
            .flatten();
        let threads = pool.as_ref().map_or(1, |p| p.current_num_threads() + 1);
        Self {
            shards: (0..threads).map(|_| Shard::new(&layout)).collect(),
            layout,
            dist: spec.dist(),
            params: vec![0.0; n],
            m1: vec![0.0; n],
            m2: vec![0.0; n],
            time: 0,
            scaler: None,
            pool,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Threads a minibatch step may use.
    pub fn threads(&self) -> usize {
        self.shards.len()
    }

    pub fn params(&self) -> &[f32] {
        &self.params
    }

    /// Gradients of the last step, before clipping.
    pub fn grads(&self) -> &[f32] {
        &self.shards[0].grads
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

    /// State values of the observation rows `obs` (`[rows * obs_dim]`).
    pub fn values(&mut self, obs: &[f32]) -> Vec<f32> {
        let shard = &mut self.shards[0];
        shard.load_rows(&self.layout, self.scaler.as_ref(), obs);
        net::value_forward(&self.layout, &self.params, &mut shard.work);
        shard.work.value.clone()
    }

    /// Policy-head outputs of the observation rows `obs`.
    pub fn heads(&mut self, obs: &[f32]) -> Vec<f32> {
        let shard = &mut self.shards[0];
        policy_rows(&self.layout, &self.params, self.scaler.as_ref(), shard, obs)
    }

    /// Policy-head outputs of the observation rows `obs` under parameters
    /// `params` (in layout order) and normaliser `scaler`: DQN's target network.
    pub fn heads_with(
        &mut self,
        params: &[f32],
        scaler: Option<&ObsScaler>,
        obs: &[f32],
    ) -> Vec<f32> {
        policy_rows(&self.layout, params, scaler, &mut self.shards[0], obs)
    }

    /// The observation normaliser in use.
    pub fn scaler(&self) -> Option<&ObsScaler> {
        self.scaler.as_ref()
    }

    /// One minibatch step: the loss of the samples `mb.idx`, its gradient,
    /// global-norm clipping and an Adam step at `mb.lr`; no step when the
    /// approximate KL is past `target_kl`. The same contract as a single burn
    /// replica's step.
    pub fn step(&mut self, mb: &Minibatch<'_>) -> StepStats {
        let cfg = mb.cfg;
        let m = mb.idx.len();
        let inv_m = 1.0 / m as f64;
        let sums = self.forward_backward(mb, inv_m);
        let approx_kl = sums.approx_kl * inv_m;
        if cfg.target_kl > 0.0 && approx_kl > cfg.target_kl {
            let terms = LossTerms {
                approx_kl,
                ..Default::default()
            };
            return StepStats {
                terms,
                ..Default::default()
            };
        }
        let grad_norm = clip_grads(&mut self.shards[0].grads, cfg.max_grad_norm);
        let loss = sums.policy_loss + sums.value_loss + sums.entropy + sums.q_mean;
        if !grad_norm.is_finite() || !loss.is_finite() {
            return StepStats::skipped_non_finite();
        }
        self.adam_step(mb.lr, cfg.adam_eps as f32);
        StepStats {
            terms: LossTerms {
                approx_kl,
                ..sums.times(inv_m)
            },
            grad_norm,
            stepped: true,
            non_finite: false,
        }
    }

    /// The minibatch's summed loss terms, and its gradient in the first
    /// shard's buffer: its rows split into contiguous shards of at least
    /// [`MIN_SHARD_ROWS`], one per thread, the gradients added up after.
    fn forward_backward(&mut self, mb: &Minibatch<'_>, inv_m: f64) -> LossTerms {
        let m = mb.idx.len();
        let n = (m / MIN_SHARD_ROWS).clamp(1, self.shards.len());
        let chunk = m.div_ceil(n);
        let rows = |s: usize| s * chunk..((s + 1) * chunk).min(m);
        let shared = StepInputs {
            layout: &self.layout,
            dist: &self.dist,
            params: &self.params,
            scaler: self.scaler.as_ref(),
            mb,
            inv_m,
        };
        let (first, rest) = self.shards[..n].split_at_mut(1);
        match &self.pool {
            Some(pool) if n > 1 => pool.in_place_scope(|scope| {
                for (s, shard) in rest.iter_mut().enumerate() {
                    let shared = &shared;
                    scope.spawn(move |_| shard.run(shared, rows(s + 1)));
                }
                first[0].run(&shared, rows(0));
            }),
            _ => first[0].run(&shared, rows(0)),
        }
        let mut sums = first[0].sums;
        for shard in rest.iter() {
            sums.add(&shard.sums);
            let total = first[0].grads.iter_mut();
            total.zip(&shard.grads).for_each(|(g, &o)| *g += o);
        }
        sums
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
        let (params, grads) = (&mut self.params, &self.shards[0].grads);
        let (m1, m2) = (&mut self.m1, &mut self.m2);
        wide(
            #[inline(always)]
            || {
                let moments = m1.iter_mut().zip(m2.iter_mut());
                for ((p, &g), (m, v)) in params.iter_mut().zip(grads).zip(moments) {
                    *m = *m * BETA_1 + g * (1.0 - BETA_1);
                    *v = *v * BETA_2 + g * g * (1.0 - BETA_2);
                    *p -= lr * (*m * combined / (v.sqrt() + eps));
                }
            },
        );
    }
}

/// Scales `grads` to global norm `max_norm` when above it (as
/// [`crate::engine::burn::clip_global_norm`]); returns the norm before.
fn clip_grads(grads: &mut [f32], max_norm: f64) -> f64 {
    // Eight running sums, one per lane, not one sum whose every addition
    // waits on the last (a twelfth of a small network's step went there).
    let mut lanes = [0.0f64; 8];
    wide(
        #[inline(always)]
        || {
            for c in grads.chunks(8) {
                for (s, &g) in lanes.iter_mut().zip(c) {
                    *s += g as f64 * g as f64;
                }
            }
        },
    );
    let norm = lanes.iter().sum::<f64>().sqrt();
    if norm > max_norm && norm.is_finite() {
        let factor = (max_norm / (norm + 1e-6)) as f32;
        grads.iter_mut().for_each(|g| *g *= factor);
    }
    norm
}

/// The policy forward pass of `obs` in `shard`'s buffers.
fn policy_rows(
    layout: &Layout,
    params: &[f32],
    scaler: Option<&ObsScaler>,
    shard: &mut Shard,
    obs: &[f32],
) -> Vec<f32> {
    shard.load_rows(layout, scaler, obs);
    net::policy_forward(layout, params, &mut shard.work);
    shard.work.head.clone()
}
