//! The burn engine: one model replica per device. Each minibatch is split into
//! D contiguous shards; every replica runs its shard concurrently, the
//! gradients are summed by all-reduce, and every replica takes the same Adam
//! step, so the replicas never drift. With one device there is no collective.

mod clip;
mod losses;
mod replica;

pub use clip::clip_global_norm;
pub use losses::{Losses, MbActions, MinibatchTensors, ppo_losses};
pub use replica::{AdamRecord, Replica, Shard};

use super::{EngineError, EngineState, UpdateEngine};
use crate::data::{Minibatch, StepStats};
use burn::module::Module;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_collective::{CollectiveConfig, PeerId};
use sebulba_core::config::PpoConfig;
use sebulba_core::distribution::ActionDist;
use sebulba_core::model::{ActorCritic, ModelSpec, RunningMeanStd};

pub struct BurnEngine<B: AutodiffBackend> {
    replicas: Vec<Replica<B>>,
    dist: ActionDist,
    obs_dim: usize,
    /// DQN's target network (with its observation statistics) at the last sync.
    target: Option<ActorCritic<B::InnerBackend>>,
}

impl<B: AutodiffBackend> BurnEngine<B> {
    /// Replicas of `model` (on the first device) on every device, with the
    /// same parameter ids, which the all-reduce pairs gradients up by.
    pub fn new(
        spec: &ModelSpec,
        model: ActorCritic<B>,
        cfg: &PpoConfig,
        devices: Vec<B::Device>,
    ) -> Result<Self, EngineError> {
        if devices.is_empty() {
            return Err(EngineError::NoDevices);
        }
        let d = devices.len();
        if d > 1 {
            register_collective::<B>(&devices)?;
        }
        let replicas = devices
            .into_iter()
            .enumerate()
            .map(|(i, dev)| {
                let peer = (d > 1).then(|| PeerId::from(i));
                Replica::new(model.clone().fork(&dev), cfg.adam_eps, dev, peer)
            })
            .collect();
        Ok(Self {
            replicas,
            dist: spec.dist(),
            obs_dim: spec.obs_dim,
            target: None,
        })
    }

    /// Observation rows `obs` as a tensor on the first replica's device.
    fn rows(&self, obs: &[f32]) -> Tensor<B::InnerBackend, 2> {
        let rows = obs.len() / self.obs_dim;
        let data = TensorData::new(obs[..rows * self.obs_dim].to_vec(), [rows, self.obs_dim]);
        Tensor::from_data(data, self.replicas[0].device())
    }

    /// Width of the policy head.
    fn head_dim(&self) -> usize {
        match &self.dist {
            ActionDist::Categorical { n } => *n,
            ActionDist::TanhNormal { dim, .. } => 2 * dim,
        }
    }
}

/// One collective per backend per process: forgets any earlier run's, then
/// registers every peer, each from its own thread (registration is a barrier).
fn register_collective<B: AutodiffBackend>(devices: &[B::Device]) -> Result<(), EngineError> {
    burn_collective::reset_collective::<B::InnerBackend>();
    let config = CollectiveConfig::default().with_num_devices(devices.len());
    std::thread::scope(|scope| {
        let handles: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(i, dev)| {
                // The inner backend shares the autodiff backend's device type.
                let (dev, config) = (dev.clone(), config.clone());
                scope.spawn(move || {
                    burn_collective::register::<B::InnerBackend>(PeerId::from(i), dev, config)
                        .map_err(|e| EngineError::Register {
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
                    Err(EngineError::Register {
                        peer: usize::MAX,
                        reason: "registration thread panicked".into(),
                    })
                })
            })
            .collect::<Result<Vec<()>, EngineError>>()
    })?;
    Ok(())
}

impl<B: AutodiffBackend> UpdateEngine<B> for BurnEngine<B> {
    fn name(&self) -> &'static str {
        "burn"
    }

    fn values(&mut self, obs: &[f32]) -> Vec<f32> {
        let rows = obs.len() / self.obs_dim;
        let r = &self.replicas[0];
        r.inference_model()
            .value(self.rows(obs))
            .into_data()
            .to_vec()
            .unwrap_or_else(|_| vec![0.0; rows])
    }

    fn heads(&mut self, obs: &[f32]) -> Vec<f32> {
        let rows = obs.len() / self.obs_dim;
        let r = &self.replicas[0];
        r.inference_model()
            .policy(self.rows(obs))
            .into_data()
            .to_vec()
            .unwrap_or_else(|_| vec![0.0; rows * self.head_dim()])
    }

    fn sync_target(&mut self) {
        self.target = Some(self.replicas[0].inference_model());
    }

    fn target_heads(&mut self, obs: &[f32]) -> Vec<f32> {
        let Some(target) = &self.target else {
            return self.heads(obs);
        };
        let rows = obs.len() / self.obs_dim;
        target
            .policy(self.rows(obs))
            .into_data()
            .to_vec()
            .unwrap_or_else(|_| vec![0.0; rows * self.head_dim()])
    }

    fn set_obs_stats(&mut self, stats: &RunningMeanStd) {
        for r in &mut self.replicas {
            r.set_obs_stats(stats);
        }
    }

    /// Every replica steps on its contiguous shard `[i*m/d, (i+1)*m/d)`,
    /// concurrently when there are several; their shares add up.
    fn step(&mut self, mb: &Minibatch<'_>) -> Result<StepStats, EngineError> {
        let d = self.replicas.len();
        let m = mb.idx.len();
        let width = self.dist.action_width();
        let dist = &self.dist;
        let shard = |i: usize| {
            let (a, b) = (i * m / d, (i + 1) * m / d);
            Shard {
                data: mb.data,
                idx: &mb.idx[a..b],
                adv: &mb.adv[a..b],
                noise: mb.noise.get(a * width..b * width).unwrap_or(&[]),
                minibatch: m,
            }
        };
        let shares: Vec<Result<StepStats, EngineError>> = if d == 1 {
            vec![self.replicas[0].step(&shard(0), dist, mb.cfg, mb.lr, mb.clip, mb.loss)]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = self
                    .replicas
                    .iter_mut()
                    .enumerate()
                    .map(|(i, r)| {
                        let s = shard(i);
                        scope.spawn(move || r.step(&s, dist, mb.cfg, mb.lr, mb.clip, mb.loss))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(EngineError::Collective("a replica panicked".into()))
                        })
                    })
                    .collect()
            })
        };
        let shares = shares.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(sum_shares(&shares))
    }

    fn finish_update(&mut self) {}

    fn save(&mut self) -> Result<EngineState, EngineError> {
        self.replicas[0].save_state()
    }

    fn load(&mut self, state: &EngineState) -> Result<(), EngineError> {
        self.replicas
            .iter_mut()
            .try_for_each(|r| r.load_state(state))
    }

    fn replicas(&self) -> &[Replica<B>] {
        &self.replicas
    }
}

/// The whole minibatch's figures from the replicas' weighted shares; the
/// gradient norm is the all-reduced one every replica saw.
fn sum_shares(shares: &[StepStats]) -> StepStats {
    let mut s = StepStats {
        grad_norm: shares[0].grad_norm,
        stepped: shares.iter().all(|s| s.stepped),
        non_finite: shares.iter().any(|s| s.non_finite),
        ..Default::default()
    };
    for x in shares {
        s.terms.add(&x.terms);
    }
    s
}

#[cfg(test)]
pub(crate) mod tests;
