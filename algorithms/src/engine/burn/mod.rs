//! The burn engine: one model replica per device. Each minibatch is split into
//! D contiguous shards; every replica runs its shard concurrently, the
//! gradients are summed by all-reduce, and every replica takes the same Adam
//! step, so the replicas never drift. With one device there is no collective.
//!
//! burn's backends stop here: [`build`] picks the backend of the devices, and
//! the engine converts the learner's [`TrainState`] into its model and Adam
//! record ([`adam`], `sebulba_core::model::flat`) and back.

pub mod adam;
mod clip;
mod losses;
mod replica;
mod sequences;

pub use clip::clip_global_norm;
pub use losses::{Losses, MbActions, MinibatchTensors, ppo_losses};
pub use replica::{AdamRecord, Replica, Shard};

use super::{EngineError, ObsNorm, Steps, TrainState, UpdateEngine, rows_of};
use crate::data::{Minibatch, StepStats, UpdateData};
use burn::module::Module;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};
use burn_collective::{CollectiveConfig, PeerId};
use sebulba_core::devices::LearnerDevices;
use sebulba_core::distribution::ActionDist;
use sebulba_core::model::flat::{obs_norm, read_params, write_params};
use sebulba_core::model::{ActorCritic, ModelSpec, RunningMeanStd};
use sebulba_core::weights::{WeightsError, to_safetensors};
use sebulba_fused::net::Layout;

/// A fresh network's parameters: burn's initialisation on CPU with its RNG
/// seeded by `seed` (the same seed, the same weights, whichever engine and
/// devices then train them).
pub fn initial_state(spec: &ModelSpec, seed: u64) -> TrainState {
    type Cpu = sebulba_core::CpuAutodiff;
    let device = Default::default();
    Cpu::seed(&device, seed);
    let model = spec.init::<Cpu>(&device);
    state_of_model(spec, &model).expect("a fresh model has the layout of its own spec")
}

/// A burn model's parameters as a state before any step.
pub fn state_of_model<B: Backend>(
    spec: &ModelSpec,
    model: &ActorCritic<B>,
) -> Result<TrainState, String> {
    Ok(TrainState::new(read_params(
        &Layout::new(&spec.arch()),
        model,
    )?))
}

/// The burn engine on `devices`' backend: CPU replicas, or CUDA devices
/// (with the `cuda` feature).
pub fn build(
    spec: &ModelSpec,
    state: &TrainState,
    adam_eps: f64,
    devices: &LearnerDevices,
) -> Result<Box<dyn UpdateEngine>, EngineError> {
    match devices {
        LearnerDevices::Cpu(n) => Ok(Box::new(BurnEngine::<sebulba_core::CpuAutodiff>::new(
            spec,
            state,
            adam_eps,
            vec![Default::default(); *n],
        )?)),
        #[cfg(feature = "cuda")]
        LearnerDevices::Cuda(ids) => {
            cuda_answers(ids)?;
            cuda_engine(spec, state, adam_eps, ids)
        }
        #[cfg(not(feature = "cuda"))]
        LearnerDevices::Cuda(_) => Err(EngineError::Devices(
            "cuda devices need a binary built with `--features cuda`".into(),
        )),
    }
}

/// Every device in `ids` is there, asked of the driver before burn-cuda is:
/// a missing library or device is one clear error, not a panic in a kernel.
#[cfg(feature = "cuda")]
fn cuda_answers(ids: &[usize]) -> Result<(), EngineError> {
    let n = sebulba_core::devices::cuda_devices().map_err(EngineError::Devices)?;
    match ids.iter().find(|&&i| i >= n) {
        Some(i) => Err(EngineError::Devices(format!(
            "cuda:{i}: the CUDA driver reports {n} device(s)"
        ))),
        None => Ok(()),
    }
}

#[cfg(feature = "cuda")]
fn cuda_engine(
    spec: &ModelSpec,
    state: &TrainState,
    adam_eps: f64,
    ids: &[usize],
) -> Result<Box<dyn UpdateEngine>, EngineError> {
    Ok(Box::new(
        BurnEngine::<burn::backend::Autodiff<sebulba_core::CudaBackend>>::new(
            spec,
            state,
            adam_eps,
            ids.iter().map(|&i| burn_cuda::CudaDevice::new(i)).collect(),
        )?
        .holding_observations(),
    ))
}

pub struct BurnEngine<B: AutodiffBackend> {
    replicas: Vec<Replica<B>>,
    spec: ModelSpec,
    layout: Layout,
    dist: ActionDist,
    obs_dim: usize,
    /// The last network [`UpdateEngine::heads_with`] was asked about, kept
    /// while it is asked about the same one (DQN's target, between syncs).
    scratch: Option<Scratch<B::InnerBackend>>,
    /// Whether an update's observations are copied to the devices once
    /// (`begin_update`): on a GPU, where a copy per minibatch step would
    /// cross the bus four times an update; not on the CPU, where it would
    /// only duplicate the batch in memory.
    hold_observations: bool,
}

impl<B: AutodiffBackend> BurnEngine<B> {
    /// Replicas of the network in `state` on every device, with the same
    /// parameter ids, which the all-reduce pairs gradients up by.
    pub fn new(
        spec: &ModelSpec,
        state: &TrainState,
        adam_eps: f64,
        devices: Vec<B::Device>,
    ) -> Result<Self, EngineError> {
        let first = devices.first().ok_or(EngineError::NoDevices)?.clone();
        let d = devices.len();
        if d > 1 {
            register_collective::<B>(&devices)?;
        }
        let layout = Layout::new(&spec.arch());
        // Any initial values (the cheap initialiser): the state's are written
        // over them.
        let mut shape = spec.clone();
        shape.network.init = sebulba_core::config::Init::LecunUniform;
        let model = shape.init::<B>(&first);
        let mut replicas = devices
            .into_iter()
            .enumerate()
            .map(|(i, dev)| {
                let peer = (d > 1).then(|| PeerId::from(i));
                Replica::new(model.clone().fork(&dev), adam_eps, dev, peer)
            })
            .collect::<Vec<_>>();
        for r in &mut replicas {
            r.load_state(&layout, state)?;
        }
        Ok(Self {
            replicas,
            spec: spec.clone(),
            layout,
            dist: spec.dist(),
            obs_dim: spec.obs_dim,
            scratch: None,
            hold_observations: false,
        })
    }

    /// Copies each update's observations to the devices once
    /// ([`UpdateEngine::begin_update`]).
    pub fn holding_observations(mut self) -> Self {
        self.hold_observations = true;
        self
    }

    /// Observation rows `obs` as a tensor on the first replica's device.
    fn rows(&self, obs: &[f32]) -> Tensor<B::InnerBackend, 2> {
        let rows = obs.len() / self.obs_dim;
        let data = TensorData::new(obs[..rows * self.obs_dim].to_vec(), [rows, self.obs_dim]);
        Tensor::from_data(data, self.replicas[0].device())
    }

    /// A copy of the model holding `params` and `norm`, written anew only
    /// when they differ from the last ones asked about (bit for bit).
    /// Parameters of another network are a caller's bug: a panic.
    fn scratch_with(
        &mut self,
        params: &[f32],
        norm: Option<&ObsNorm>,
    ) -> &ActorCritic<B::InnerBackend> {
        let same = |s: &Scratch<B::InnerBackend>| {
            s.norm.as_ref() == norm
                && s.params.len() == params.len()
                && s.params
                    .iter()
                    .zip(params)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
        };
        if !self.scratch.as_ref().is_some_and(same) {
            let mut model = self.replicas[0].inference_model();
            write_params(&self.layout, params, &mut model)
                .expect("heads_with: parameters of this engine's network");
            if let (Some(layer), Some(n)) = (model.obs_norm.as_mut(), norm) {
                layer.set(n.mean(), n.var());
            }
            self.scratch = Some(Scratch {
                params: params.to_vec(),
                norm: norm.cloned(),
                model,
            });
        }
        &self.scratch.as_ref().expect("written above").model
    }

    /// A network with memory's values (or heads) of the rows of `seq`.
    fn sequence_pass(
        &self,
        obs: &[f32],
        seq: &sebulba_fused::Sequence<'_>,
        heads: bool,
    ) -> Vec<f32> {
        let rows = obs.len() / self.obs_dim;
        let width = if heads { self.head_dim() } else { 1 };
        let model = self.replicas[0].inference_model();
        sequences::pass(&model, self.rows(obs), seq, heads)
            .into_data()
            .to_vec()
            .unwrap_or_else(|_| vec![0.0; rows * width])
    }

    /// Width of the policy head.
    fn head_dim(&self) -> usize {
        match &self.dist {
            ActionDist::Categorical { n } => *n,
            ActionDist::TanhNormal { dim, .. } => 2 * dim,
        }
    }
}

/// A network other than the one training, as burn's model: what
/// [`UpdateEngine::heads_with`] was last asked about.
struct Scratch<B: Backend> {
    params: Vec<f32>,
    norm: Option<ObsNorm>,
    model: ActorCritic<B>,
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

impl<B: AutodiffBackend> UpdateEngine for BurnEngine<B> {
    fn name(&self) -> &'static str {
        "burn"
    }

    fn devices(&self) -> usize {
        self.replicas.len()
    }

    fn safetensors(&self) -> Result<Vec<u8>, WeightsError> {
        to_safetensors(&self.replicas[0].inference_model(), &self.spec)
    }

    // A network without memory reads every row on its own.
    fn values(&mut self, steps: &Steps<'_>) -> Vec<f32> {
        if let Some(seq) = steps.sequence.filter(|s| s.state.width() > 0) {
            return self.sequence_pass(steps.obs, &seq, false);
        }
        let obs = rows_of(steps);
        let rows = obs.len() / self.obs_dim;
        let r = &self.replicas[0];
        r.inference_model()
            .value(self.rows(obs))
            .into_data()
            .to_vec()
            .unwrap_or_else(|_| vec![0.0; rows])
    }

    fn states_after(&mut self, steps: &Steps<'_>, rows: &[usize]) -> Vec<f32> {
        let Some(seq) = steps.sequence.filter(|s| s.state.width() > 0) else {
            return Vec::new();
        };
        let in_seq = seq.steps * seq.envs * self.obs_dim;
        let model = self.replicas[0].inference_model();
        sequences::states_after(&model, self.rows(&steps.obs[..in_seq]), &seq, rows)
            .into_data()
            .to_vec()
            .unwrap_or_else(|_| vec![0.0; rows.len() * seq.state.width()])
    }

    fn heads(&mut self, steps: &Steps<'_>) -> Vec<f32> {
        if let Some(seq) = steps.sequence.filter(|s| s.state.width() > 0) {
            return self.sequence_pass(steps.obs, &seq, true);
        }
        let obs = rows_of(steps);
        let rows = obs.len() / self.obs_dim;
        let r = &self.replicas[0];
        r.inference_model()
            .policy(self.rows(obs))
            .into_data()
            .to_vec()
            .unwrap_or_else(|_| vec![0.0; rows * self.head_dim()])
    }

    fn heads_with(
        &mut self,
        params: &[f32],
        norm: Option<&ObsNorm>,
        steps: &Steps<'_>,
    ) -> Vec<f32> {
        let obs = rows_of(steps);
        let rows = obs.len() / self.obs_dim;
        let width = self.head_dim();
        let obs = self.rows(obs);
        self.scratch_with(params, norm)
            .policy(obs)
            .into_data()
            .to_vec()
            .unwrap_or_else(|_| vec![0.0; rows * width])
    }

    fn obs_norm(&self) -> Result<Option<ObsNorm>, EngineError> {
        obs_norm(self.replicas[0].model()).map_err(|reason| EngineError::State {
            what: "the observation normaliser",
            reason,
        })
    }

    fn set_obs_stats(&mut self, stats: &RunningMeanStd) {
        for r in &mut self.replicas {
            r.set_obs_stats(stats);
        }
    }

    fn begin_update(&mut self, data: &UpdateData) {
        if self.hold_observations {
            self.replicas
                .iter_mut()
                .for_each(|r| r.hold_observations(data));
        }
    }

    fn end_update(&mut self) {
        self.replicas
            .iter_mut()
            .for_each(Replica::release_observations);
    }

    /// Every replica steps on its contiguous shard `[i*m/d, (i+1)*m/d)`
    /// (for a network with memory, its share of the sequences),
    /// concurrently when there are several; their shares add up.
    fn step(&mut self, mb: &Minibatch<'_>) -> Result<StepStats, EngineError> {
        let d = self.replicas.len();
        let m = mb.idx.len();
        let in_loss = mb.data.trained_in(mb.idx);
        let width = self.dist.action_width();
        let dist = &self.dist;
        // A network with memory: each replica takes whole sequences.
        let shares = match self.layout.state_width {
            0 => Vec::new(),
            _ => sequences::shares(mb, d, width),
        };
        let shard = |i: usize| match shares.get(i) {
            Some(s) => Shard {
                data: mb.data,
                idx: &s.idx,
                adv: &s.adv,
                noise: &s.noise,
                minibatch: in_loss,
                sequences: &s.sequences,
                states: mb.states,
            },
            None => {
                let (a, b) = (i * m / d, (i + 1) * m / d);
                Shard {
                    data: mb.data,
                    idx: &mb.idx[a..b],
                    adv: &mb.adv[a..b],
                    noise: mb.noise.get(a * width..b * width).unwrap_or(&[]),
                    minibatch: in_loss,
                    sequences: &[],
                    states: mb.states,
                }
            }
        };
        let shares: Vec<Result<StepStats, EngineError>> = if d == 1 {
            vec![self.replicas[0].step(&shard(0), dist, mb)]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = self
                    .replicas
                    .iter_mut()
                    .enumerate()
                    .map(|(i, r)| {
                        let s = shard(i);
                        scope.spawn(move || r.step(&s, dist, mb))
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

    fn save(&self) -> Result<TrainState, EngineError> {
        self.replicas[0].save_state(&self.layout)
    }

    fn load(&mut self, state: &TrainState) -> Result<(), EngineError> {
        let layout = &self.layout;
        self.replicas
            .iter_mut()
            .try_for_each(|r| r.load_state(layout, state))
    }

    fn replica_states(&self) -> Result<Vec<TrainState>, EngineError> {
        let layout = &self.layout;
        self.replicas.iter().map(|r| r.save_state(layout)).collect()
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
