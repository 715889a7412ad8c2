//! The PPO update, CleanRL-shaped: epochs of shuffled minibatches, each one a
//! step of the update engine (see [`crate::engine`]), with the statistics
//! averaged over the steps taken. The clip range may be annealed and a target
//! KL may end the update early. Minibatch advantage normalisation and the
//! entropy-estimate noise are drawn here, once per minibatch, so they do not
//! depend on the engine or the number of devices.

use crate::batch::BatchActions;
use crate::data::{Loss, Minibatch, StepStats, UpdateData, normalize};
use crate::engine::burn::{BurnEngine, Replica};
use crate::engine::fused::FusedEngine;
use crate::engine::{EngineError, EngineState, UpdateEngine};
use burn::tensor::backend::AutodiffBackend;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sebulba_core::config::{AdvantageNorm, Algorithm, PpoConfig, RunConfig};
use sebulba_core::distribution::{ActionDist, log_softmax_row, tanh_normal_log_prob};
use sebulba_core::model::{ActorCritic, ModelSpec, RunningMeanStd};
use sebulba_core::weights::WeightsError;

/// Averages over the minibatch steps of one update.
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
    /// The ratio clip range used (after annealing).
    pub clip_coef: f64,
    /// Optimizer steps taken (epochs x minibatches unless stopped early).
    pub minibatch_steps: usize,
    /// A step's approximate KL exceeded `target_kl`, ending the update.
    pub early_stopped: bool,
    /// Steps skipped because the loss or the gradient was not finite (not in
    /// `minibatch_steps` nor in the means).
    pub non_finite_steps: usize,
}

impl PpoStats {
    fn add(&mut self, s: &StepStats) {
        self.policy_loss += s.policy_loss;
        self.value_loss += s.value_loss;
        self.entropy += s.entropy;
        self.approx_kl += s.approx_kl;
        self.clip_fraction += s.clip_fraction;
        self.grad_norm += s.grad_norm;
        self.minibatch_steps += 1;
    }

    fn into_means(mut self, lr: f64, clip: f64) -> Self {
        let k = self.minibatch_steps.max(1) as f64;
        for x in [
            &mut self.policy_loss,
            &mut self.value_loss,
            &mut self.entropy,
            &mut self.approx_kl,
            &mut self.clip_fraction,
            &mut self.grad_norm,
        ] {
            *x /= k;
        }
        (self.learning_rate, self.clip_coef) = (lr, clip);
        self
    }
}

/// PPO's part of a checkpoint: the engine's records and a seed for the
/// shuffles and noise from here on.
#[derive(Clone, PartialEq)]
pub struct PpoState {
    pub engine: EngineState,
    pub rng_seed: u64,
}

pub struct Ppo<B: AutodiffBackend> {
    pub(crate) engine: Box<dyn UpdateEngine<B>>,
    dist: ActionDist,
    pub(crate) rng: StdRng,
    spec: ModelSpec,
}

/// The multiply-adds of a minibatch's forward pass from which `learner.threads
/// = 0` splits it over every core: below it the hand-over between threads
/// (tens of microseconds a step) eats what a second core saves, and in local
/// mode the actors want that core. CartPole's CleanRL settings (128 rows of a
/// 64x64 network, 1.2M) run faster on one thread end to end; Big Two's
/// preset (512 rows of 256x256, 380M) gains from two.
pub const AUTO_SPLIT_MACS: usize = 8_000_000;

/// Threads for the fused engine when `learner.threads` is 0: every core this
/// process may use when a minibatch of `rows` rows is worth splitting, else one.
pub fn auto_threads(spec: &ModelSpec, rows: usize) -> usize {
    // A row's forward pass multiplies each weight once.
    let weights = sebulba_core::model::fused::net::Layout::new(spec).len;
    if rows.saturating_mul(weights) < AUTO_SPLIT_MACS {
        return 1;
    }
    cores()
}

/// The cores this process may use.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl<B: AutodiffBackend> Ppo<B> {
    /// A fresh model (backend RNG seeded with `seed`) on the burn engine over
    /// `devices`.
    pub fn new(
        spec: &ModelSpec,
        cfg: &PpoConfig,
        seed: u64,
        devices: Vec<B::Device>,
    ) -> Result<Self, EngineError> {
        let first = devices.first().ok_or(EngineError::NoDevices)?.clone();
        B::seed(&first, seed);
        let model = spec.init::<B>(&first);
        Self::with_model(spec, model, cfg, seed, devices)
    }

    /// `model` on the burn engine over `devices`. `seed` drives the minibatch
    /// shuffles and the entropy noise.
    pub fn with_model(
        spec: &ModelSpec,
        model: ActorCritic<B>,
        cfg: &PpoConfig,
        seed: u64,
        devices: Vec<B::Device>,
    ) -> Result<Self, EngineError> {
        Ok(Self {
            engine: Box::new(BurnEngine::new(spec, model, cfg, devices)?),
            dist: spec.dist(),
            rng: StdRng::seed_from_u64(seed ^ 0x5eb0_15ba),
            spec: spec.clone(),
        })
    }

    /// The PPO a run's `learner.engine` and `learner.devices` ask for: the
    /// fused engine where it applies (`auto`) or is asked for, else burn.
    pub fn for_run(
        spec: &ModelSpec,
        cfg: &RunConfig,
        devices: Vec<B::Device>,
    ) -> Result<Self, EngineError> {
        // DQN's steps clip and step Adam by its own section's settings.
        let dqn = cfg.run.algorithm == Algorithm::Dqn;
        let optimizer = PpoConfig {
            adam_eps: if dqn {
                cfg.dqn.adam_eps
            } else {
                cfg.ppo.adam_eps
            },
            ..cfg.ppo.clone()
        };
        let mut ppo = Self::new(spec, &optimizer, cfg.run.seed, devices)?;
        let net = &cfg.network;
        if cfg.learner.engine.use_fused(&cfg.learner.devices, net) {
            let rows = if dqn {
                cfg.dqn.batch_size
            } else {
                cfg.samples_per_update() / cfg.ppo.minibatches.max(1)
            };
            // More threads than cores only time-slice, and each holds a
            // gradient buffer of the network's size: capped at the cores.
            let threads = match cfg.learner.threads {
                0 => auto_threads(spec, rows),
                n => n.min(cores()),
            };
            ppo.use_fused(threads)?;
        }
        Ok(ppo)
    }

    /// Switches to the fused CPU engine, starting from the current parameters
    /// and Adam state, its steps spread over up to `threads` threads.
    pub fn use_fused(&mut self, threads: usize) -> Result<(), EngineError> {
        FusedEngine::<B>::check(&self.spec, self.engine.replicas().len())?;
        let home = self.engine.replicas()[0].fork_single();
        self.engine = Box::new(FusedEngine::new(&self.spec, home, threads)?);
        Ok(())
    }

    /// Which engine takes the steps: `fused` or `burn`.
    pub fn engine(&self) -> &'static str {
        self.engine.name()
    }

    /// The current weights as safetensors bytes: what is published.
    pub fn safetensors(&self) -> Result<Vec<u8>, WeightsError> {
        self.engine.safetensors(&self.spec)
    }

    /// Threads a minibatch step may use.
    pub fn threads(&self) -> usize {
        self.engine.threads()
    }

    /// The published model (the first replica's; all are identical).
    pub fn model(&self) -> &ActorCritic<B> {
        self.engine.replicas()[0].model()
    }

    /// Every replica (for tests that check they stay identical).
    pub fn replicas(&self) -> &[Replica<B>] {
        self.engine.replicas()
    }

    /// The model without autodiff, for publishing.
    pub fn inference_model(&self) -> ActorCritic<B::InnerBackend> {
        self.engine.replicas()[0].inference_model()
    }

    /// State values of observation rows `obs` (`[rows * obs_dim]`).
    pub fn values(&mut self, obs: &[f32]) -> Vec<f32> {
        self.engine.values(obs)
    }

    /// The current policy's log-probabilities of `actions` at observation rows
    /// `obs` (`masks`: `[rows * n]` allowed actions, for discrete actions).
    pub fn log_probs(
        &mut self,
        obs: &[f32],
        actions: &BatchActions,
        masks: Option<&[u8]>,
    ) -> Vec<f32> {
        let heads = self.engine.heads(obs);
        let rows = obs.len() / self.spec.obs_dim;
        let width = heads.len() / rows.max(1);
        let head = |i: usize| &heads[i * width..(i + 1) * width];
        match (&self.dist, actions) {
            (ActionDist::Categorical { n }, BatchActions::Discrete(a)) => {
                let mut row = vec![0.0f32; *n];
                (0..rows)
                    .map(|i| {
                        let valid = masks.map(|m| &m[i * n..(i + 1) * n]);
                        log_softmax_row(head(i), valid, &mut row);
                        row.get(a[i] as usize).copied().unwrap_or(f32::NEG_INFINITY)
                    })
                    .collect()
            }
            (
                ActionDist::TanhNormal {
                    dim,
                    squash,
                    min_std,
                },
                BatchActions::Continuous(u),
            ) => (0..rows)
                .map(|i| {
                    tanh_normal_log_prob(head(i), &u[i * dim..(i + 1) * dim], *min_std, squash)
                })
                .collect(),
            // Validation gives every batch the run's kind of action.
            _ => vec![f32::NAN; rows],
        }
    }

    /// Sets the observation normaliser's statistics (after SGD: they go out
    /// with the new weights; see `update::step`).
    pub fn set_obs_stats(&mut self, stats: &RunningMeanStd) {
        self.engine.set_obs_stats(stats);
    }

    /// What a checkpoint keeps of PPO. The RNG is re-seeded with the saved
    /// seed, so a run resumed from this point and one that never stopped draw
    /// the same minibatches.
    pub fn save_state(&mut self) -> Result<PpoState, EngineError> {
        let engine = self.engine.save()?;
        let rng_seed: u64 = self.rng.random();
        self.rng = StdRng::seed_from_u64(rng_seed);
        Ok(PpoState { engine, rng_seed })
    }

    /// Restores a [`PpoState`]. A state that passed its checksums may still
    /// hold what no learner writes: non-finite weights are refused.
    pub fn load_state(&mut self, state: &PpoState) -> Result<(), EngineError> {
        self.engine.load(&state.engine)?;
        sebulba_core::weights::check_finite(self.model()).map_err(|e| EngineError::Record {
            what: "model",
            reason: e.to_string(),
        })?;
        self.rng = StdRng::seed_from_u64(state.rng_seed);
        Ok(())
    }

    /// Epochs x minibatches of PPO over `data` at learning rate `lr` and ratio
    /// clip range `clip`. With fewer samples than one per replica of every
    /// minibatch (a game whose moves were nearly all made by past versions)
    /// it takes no step, says so, and reports `minibatch_steps = 0`.
    pub fn update(
        &mut self,
        data: &UpdateData,
        cfg: &PpoConfig,
        lr: f64,
        clip: f64,
    ) -> Result<PpoStats, EngineError> {
        let n = data.len();
        let needed = cfg.minibatches.max(1) * self.engine.replicas().len().max(1);
        if n < needed {
            tracing::warn!(
                samples = n,
                needed,
                "too few samples for ppo.minibatches over the learner's devices: no step this update"
            );
            return Ok(PpoStats::default().into_means(lr, clip));
        }
        let mb_size = n / cfg.minibatches;
        let mut order: Vec<usize> = (0..n).collect();
        let mut stats = PpoStats::default();
        let (mut adv, mut noise) = (Vec::with_capacity(mb_size), Vec::new());
        'epochs: for _ in 0..cfg.epochs {
            order.shuffle(&mut self.rng);
            for idx in order.chunks_exact(mb_size).take(cfg.minibatches) {
                self.draw_minibatch(data, idx, cfg, &mut adv, &mut noise);
                let mb = Minibatch {
                    data,
                    idx,
                    adv: &adv,
                    noise: &noise,
                    cfg,
                    lr,
                    clip,
                    loss: Loss::Ppo,
                };
                let step = self.engine.step(&mb)?;
                if step.non_finite {
                    stats.non_finite_steps += 1;
                    continue;
                }
                if !step.stepped {
                    stats.early_stopped = true;
                    break 'epochs;
                }
                stats.add(&step);
            }
        }
        self.engine.finish_update();
        Ok(stats.into_means(lr, clip))
    }

    /// The minibatch's advantages (normalised over it when asked, then
    /// weighted) and its entropy-estimate noise (continuous actions).
    fn draw_minibatch(
        &mut self,
        data: &UpdateData,
        idx: &[usize],
        cfg: &PpoConfig,
        adv: &mut Vec<f32>,
        noise: &mut Vec<f32>,
    ) {
        adv.clear();
        adv.extend(idx.iter().map(|&i| data.advantages[i]));
        if cfg.adv_norm == AdvantageNorm::Minibatch {
            normalize(adv);
        }
        // After normalisation: a sample of weight ~0 contributes ~nothing.
        if let Some(w) = &data.weights {
            for (a, &i) in adv.iter_mut().zip(idx) {
                *a *= w[i];
            }
        }
        noise.clear();
        if matches!(self.dist, ActionDist::TanhNormal { .. }) {
            let width = self.dist.action_width();
            noise.extend((0..idx.len() * width).map(|_| {
                let z: f32 = self.rng.sample(rand_distr::StandardNormal);
                z
            }));
        }
    }
}

/// burn-collective keeps one collective per backend per process: tests that
/// build several replicas take turns.
#[cfg(test)]
pub(crate) static COLLECTIVE_TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
pub(crate) mod tests;
