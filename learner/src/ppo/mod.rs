//! The PPO update on one device: epochs x shuffled minibatches of the loss in
//! [`losses`], gradients clipped by their global norm ([`clip`]), Adam; the
//! clip range may be annealed and a target KL may end the update early.

mod clip;
mod losses;
mod replica;

pub use clip::clip_global_norm;
pub use losses::{Losses, MbActions, Minibatch, ppo_losses};
pub use replica::{CollectiveFailure, Replica, Shard, ShardStats};

use crate::fused::{Fused, Unsupported, burn_io};
use crate::validate::BatchActions;
use burn::module::Module;
use burn::tensor::backend::AutodiffBackend;
use burn_collective::{CollectiveConfig, PeerId};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sebulba_core::config::{AdvantageNorm, PpoConfig};
use sebulba_core::distribution::ActionDist;
use sebulba_core::model::fast::{ObsScaler, params};
use sebulba_core::model::{ActorCritic, ModelSpec, RunningMeanStd};

/// Flat training data of one update (N samples); advantages already normalised
/// when `adv_norm = update`.
#[derive(Debug, Clone)]
pub struct UpdateData {
    pub obs_dim: usize,
    /// `[N * obs_dim]`
    pub observations: Vec<f32>,
    pub actions: BatchActions,
    /// `[N * n]` allowed actions, when the env has masks.
    pub masks: Option<Vec<u8>>,
    pub old_log_probs: Vec<f32>,
    pub advantages: Vec<f32>,
    pub returns: Vec<f32>,
    /// The critic's values the returns were computed with.
    pub old_values: Vec<f32>,
}

impl UpdateData {
    pub fn len(&self) -> usize {
        self.old_log_probs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.old_log_probs.is_empty()
    }
}

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
}

/// PPO's part of a checkpoint.
#[derive(Clone, PartialEq)]
pub struct PpoState {
    /// burn record (bytes) of the model, parameter ids included.
    pub model: Vec<u8>,
    /// burn record (bytes) of Adam's state, keyed by those ids.
    pub optim: Vec<u8>,
    pub rng_seed: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum PpoError {
    #[error("field `learner.devices`: needs at least one device")]
    NoDevices,
    #[error("registering learner replica {peer} with burn-collective: {reason}")]
    Register { peer: usize, reason: String },
    #[error(transparent)]
    Collective(#[from] CollectiveFailure),
}

/// PPO over D replicas of the model, one per device. Each minibatch is split
/// into D contiguous shards; every replica runs its shard concurrently, the
/// gradients are summed by all-reduce, and every replica takes the same Adam
/// step, so the replicas never drift. With one device there is no collective.
pub struct Ppo<B: AutodiffBackend> {
    replicas: Vec<Replica<B>>,
    dist: ActionDist,
    rng: StdRng,
    spec: ModelSpec,
    /// The fused CPU engine, when on: it takes the steps, and replica 0 holds
    /// its parameters (after every update) and Adam state (when saved).
    fused: Option<Fused>,
}

impl<B: AutodiffBackend> Ppo<B> {
    /// A fresh model (backend RNG seeded with `seed`) on the first device, copied
    /// to the others (same parameter ids, which the all-reduce pairs up by).
    pub fn new(
        spec: &ModelSpec,
        cfg: &PpoConfig,
        seed: u64,
        devices: Vec<B::Device>,
    ) -> Result<Self, PpoError> {
        let first = devices.first().ok_or(PpoError::NoDevices)?.clone();
        B::seed(&first, seed);
        let model = spec.init::<B>(&first);
        Self::with_model(spec, model, cfg, seed, devices)
    }

    /// Replicas of `model` (on the first device) on every device. `seed` drives
    /// the minibatch shuffles and the entropy noise.
    pub fn with_model(
        spec: &ModelSpec,
        model: ActorCritic<B>,
        cfg: &PpoConfig,
        seed: u64,
        devices: Vec<B::Device>,
    ) -> Result<Self, PpoError> {
        if devices.is_empty() {
            return Err(PpoError::NoDevices);
        }
        let d = devices.len();
        if d > 1 {
            // One collective per backend per process: forget any earlier run's.
            burn_collective::reset_collective::<B::InnerBackend>();
            let config = CollectiveConfig::default().with_num_devices(d);
            // Registration is a barrier: every peer registers from its own thread.
            std::thread::scope(|scope| {
                let handles: Vec<_> = devices
                    .iter()
                    .enumerate()
                    .map(|(i, dev)| {
                        // The inner backend shares the autodiff backend's device type.
                        let (dev, config) = (dev.clone(), config.clone());
                        scope.spawn(move || {
                            burn_collective::register::<B::InnerBackend>(
                                PeerId::from(i),
                                dev,
                                config,
                            )
                            .map_err(|e| PpoError::Register {
                                peer: i,
                                reason: format!("{e:?}"),
                            })
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(PpoError::Register {
                                peer: usize::MAX,
                                reason: "registration thread panicked".into(),
                            })
                        })
                    })
                    .collect::<Result<Vec<()>, PpoError>>()
            })?;
        }
        let replicas = devices
            .into_iter()
            .enumerate()
            .map(|(i, dev)| {
                let peer = (d > 1).then(|| PeerId::from(i));
                Replica::new(model.clone().fork(&dev), cfg, dev, peer)
            })
            .collect();
        Ok(Self {
            replicas,
            dist: spec.dist(),
            rng: StdRng::seed_from_u64(seed ^ 0x5eb0_15ba),
            spec: spec.clone(),
            fused: None,
        })
    }

    /// Switches to the fused CPU engine (see [`crate::fused`]), starting from
    /// replica 0's parameters and Adam state.
    pub fn use_fused(&mut self) -> Result<(), Unsupported> {
        Fused::check(&self.spec, self.replicas.len())?;
        let mut fused = Fused::new(&self.spec)?;
        Self::load_fused(&mut fused, &self.replicas[0]).map_err(Unsupported)?;
        self.fused = Some(fused);
        Ok(())
    }

    /// The fused engine, when on.
    pub fn fused_engine(&self) -> Option<&Fused> {
        self.fused.as_ref()
    }

    /// Which engine takes the steps: `fused` or `burn`.
    pub fn engine(&self) -> &'static str {
        if self.fused.is_some() {
            "fused"
        } else {
            "burn"
        }
    }

    fn load_fused(fused: &mut Fused, replica: &Replica<B>) -> Result<(), String> {
        let model = replica.model();
        fused.set_scaler(ObsScaler::of_model(model)?);
        fused.set_params(params::read_params(fused.layout(), model)?);
        let (m1, m2, time) = burn_io::read_adam(fused.layout(), model, replica.optim_record())?;
        fused.set_adam(m1, m2, time);
        Ok(())
    }

    /// Replica 0's model: the one that is published (all are identical).
    pub fn model(&self) -> &ActorCritic<B> {
        self.replicas[0].model()
    }

    /// Every replica (for tests that check they stay identical).
    pub fn replicas(&self) -> &[Replica<B>] {
        &self.replicas
    }

    /// The model without autodiff, for value estimates and publishing.
    pub fn inference_model(&self) -> ActorCritic<B::InnerBackend> {
        self.replicas[0].inference_model()
    }

    pub fn device(&self) -> &B::Device {
        self.replicas[0].device()
    }

    /// What a checkpoint keeps of PPO: replica 0's model and Adam state (all
    /// replicas are identical) and a seed for the shuffles and noise from here
    /// on. The RNG is re-seeded with it, so a run resumed from this point and
    /// one that never stopped draw the same minibatches.
    pub fn save_state(&mut self) -> Result<PpoState, String> {
        if let Some(f) = &self.fused {
            let (m1, m2, time) = f.adam();
            let r = &mut self.replicas[0];
            let record = burn_io::write_adam(f.layout(), r.model(), m1, m2, time)?;
            r.set_optim_record(record);
        }
        let (model, optim) = self.replicas[0].save_state()?;
        let rng_seed: u64 = self.rng.random();
        self.rng = StdRng::seed_from_u64(rng_seed);
        Ok(PpoState {
            model,
            optim,
            rng_seed,
        })
    }

    /// Restores a [`PpoState`] on every replica.
    pub fn load_state(&mut self, state: &PpoState) -> Result<(), String> {
        for r in &mut self.replicas {
            r.load_state(&state.model, &state.optim)?;
        }
        if let Some(f) = &mut self.fused {
            Self::load_fused(f, &self.replicas[0])?;
        }
        self.rng = StdRng::seed_from_u64(state.rng_seed);
        Ok(())
    }

    /// Sets the observation normaliser's statistics on every replica (before SGD).
    pub fn set_obs_stats(&mut self, stats: &RunningMeanStd) {
        for r in &mut self.replicas {
            r.set_obs_stats(stats);
        }
        let net = &self.spec.network;
        if let Some(f) = &mut self.fused
            && net.obs_norm
        {
            let (mean, var) = (stats.mean_f32(), stats.var_f32());
            f.set_scaler(Some(ObsScaler::new(&mean, &var, net.obs_clip)));
        }
    }

    /// State values of observation rows `obs` (`[rows * obs_dim]`) under the
    /// current parameters.
    pub fn values(&mut self, obs: &[f32]) -> Vec<f32> {
        if let Some(f) = &mut self.fused {
            return f.values(obs);
        }
        let d = self.spec.obs_dim;
        let rows = obs.len() / d;
        self.inference_model()
            .value(burn::tensor::Tensor::from_data(
                burn::tensor::TensorData::new(obs[..rows * d].to_vec(), [rows, d]),
                self.device(),
            ))
            .into_data()
            .to_vec()
            .unwrap_or_else(|_| vec![0.0; rows])
    }

    /// Epochs x minibatches of PPO over `data` at learning rate `lr` and ratio
    /// clip range `clip`.
    pub fn update(
        &mut self,
        data: &UpdateData,
        cfg: &PpoConfig,
        lr: f64,
        clip: f64,
    ) -> Result<PpoStats, PpoError> {
        let n = data.len();
        let mb_size = n / cfg.minibatches;
        let mut order: Vec<usize> = (0..n).collect();
        let mut sum = PpoStats::default();
        let mut steps = 0usize;
        let mut early_stopped = false;
        let width = self.dist.action_width();
        let continuous = matches!(self.dist, ActionDist::TanhNormal { .. });
        let mut adv = Vec::with_capacity(mb_size);
        let mut noise = Vec::new();
        'epochs: for _ in 0..cfg.epochs {
            order.shuffle(&mut self.rng);
            for mb in order.chunks_exact(mb_size).take(cfg.minibatches) {
                // Minibatch statistics and noise are drawn here, once, so they
                // are global and do not depend on the number of devices.
                adv.clear();
                adv.extend(mb.iter().map(|&i| data.advantages[i]));
                if cfg.adv_norm == AdvantageNorm::Minibatch {
                    crate::prepare::normalize(&mut adv);
                }
                noise.clear();
                if continuous {
                    noise.extend((0..mb.len() * width).map(|_| {
                        let z: f32 = self.rng.sample(rand_distr::StandardNormal);
                        z
                    }));
                }
                let shards = self.step_all(data, mb, &adv, &noise, cfg, lr, clip)?;
                if shards.iter().any(|s| !s.stepped) {
                    early_stopped = true;
                    break 'epochs;
                }
                for s in &shards {
                    sum.policy_loss += s.policy_loss;
                    sum.value_loss += s.value_loss;
                    sum.entropy += s.entropy;
                    sum.approx_kl += s.approx_kl;
                    sum.clip_fraction += s.clip_fraction;
                }
                sum.grad_norm += shards[0].grad_norm;
                steps += 1;
            }
        }
        if let Some(f) = &self.fused {
            params::write_params(f.layout(), f.params(), self.replicas[0].model_mut());
        }
        let k = steps.max(1) as f64;
        Ok(PpoStats {
            policy_loss: sum.policy_loss / k,
            value_loss: sum.value_loss / k,
            entropy: sum.entropy / k,
            approx_kl: sum.approx_kl / k,
            clip_fraction: sum.clip_fraction / k,
            grad_norm: sum.grad_norm / k,
            learning_rate: lr,
            clip_coef: clip,
            minibatch_steps: steps,
            early_stopped,
        })
    }

    /// One minibatch step on every replica, concurrently when there are several.
    #[allow(clippy::too_many_arguments)]
    fn step_all(
        &mut self,
        data: &UpdateData,
        mb: &[usize],
        adv: &[f32],
        noise: &[f32],
        cfg: &PpoConfig,
        lr: f64,
        clip: f64,
    ) -> Result<Vec<ShardStats>, PpoError> {
        if let Some(f) = &mut self.fused {
            return Ok(vec![f.step(data, mb, adv, noise, cfg, lr, clip)]);
        }
        let d = self.replicas.len();
        let width = self.dist.action_width();
        let dist = &self.dist;
        // Contiguous shards: replica i takes [i*m/d, (i+1)*m/d).
        let bounds: Vec<(usize, usize)> = (0..d)
            .map(|i| (i * mb.len() / d, (i + 1) * mb.len() / d))
            .collect();
        let shard = |(a, b): (usize, usize)| Shard {
            data,
            idx: &mb[a..b],
            adv: &adv[a..b],
            noise: if noise.is_empty() {
                &[]
            } else {
                &noise[a * width..b * width]
            },
            minibatch: mb.len(),
        };
        if d == 1 {
            return Ok(vec![self.replicas[0].step(
                &shard(bounds[0]),
                dist,
                cfg,
                lr,
                clip,
            )?]);
        }
        let results: Vec<Result<ShardStats, CollectiveFailure>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .replicas
                .iter_mut()
                .zip(&bounds)
                .map(|(r, &b)| {
                    let s = shard(b);
                    scope.spawn(move || r.step(&s, dist, cfg, lr, clip))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(CollectiveFailure("a replica panicked".into())))
                })
                .collect()
        });
        Ok(results.into_iter().collect::<Result<Vec<_>, _>>()?)
    }
}

/// Switches `ppo` to the fused engine when `learner.engine` asks for it (or,
/// with `auto`, where it applies).
pub fn use_configured_engine<B: AutodiffBackend>(
    ppo: &mut Ppo<B>,
    cfg: &sebulba_core::config::RunConfig,
) -> Result<(), Unsupported> {
    if cfg
        .learner
        .engine
        .use_fused(&cfg.learner.devices, &cfg.network)
    {
        ppo.use_fused()?;
    }
    Ok(())
}

/// burn-collective keeps one collective per backend per process: tests that
/// build several replicas take turns.
#[cfg(test)]
pub(crate) static COLLECTIVE_TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests;
