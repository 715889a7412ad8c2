//! One model replica on one device: builds its shard of a minibatch, computes
//! the shard's share of the loss, and (with several replicas) sums gradients
//! with its peers through burn-collective's all-reduce before an optimizer step
//! that is then identical on every replica.

use super::adam;
use super::clip_global_norm;
use super::losses::{MbActions, MinibatchTensors, ppo_losses, q_losses};
use crate::data::Loss;
use crate::data::{LossTerms, Minibatch, StepStats, UpdateData};
use crate::engine::{EngineError, TrainState};
use crate::trajectory::BatchActions;
use burn::module::AutodiffModule;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Bool, ElementConversion, Int, Tensor, TensorData, TensorPrimitive};
use burn_collective::{PeerId, ReduceOperation};
use burn_optim::adaptor::OptimizerAdaptor;
use burn_optim::{Adam, AdamConfig, GradientsParams, Optimizer};
use sebulba_core::distribution::ActionDist;
use sebulba_core::model::flat::{read_params, write_params};
use sebulba_core::model::{ActorCritic, RunningMeanStd};
use sebulba_fused::net::Layout;

/// What one replica works on in one minibatch step.
pub struct Shard<'a> {
    pub data: &'a UpdateData,
    /// Sample indices of this shard.
    pub idx: &'a [usize],
    /// Advantages for `idx` (normalised per minibatch when asked).
    pub adv: &'a [f32],
    /// `[idx.len() * action_dim]` standard-normal draws (continuous actions).
    pub noise: &'a [f32],
    /// Samples in the loss in the whole minibatch (all shards).
    pub minibatch: usize,
    /// For a network with memory, which of the data's sequences `idx`
    /// holds (its rows time-major over them); empty: rows.
    pub sequences: &'a [usize],
    /// The states the sequences start from, indexed as `sequences`.
    pub states: &'a sebulba_fused::PolicyState,
}

pub struct Replica<B: AutodiffBackend> {
    model: Option<ActorCritic<B>>,
    optim: OptimizerAdaptor<Adam, ActorCritic<B>, B>,
    adam_eps: f32,
    device: B::Device,
    /// This replica's id in the collective; `None` with a single replica.
    peer: Option<PeerId>,
    /// The current update's observations on this device
    /// ([`Self::hold_observations`]).
    held: Option<HeldObservations<B>>,
}

/// An update's observations, widened once, on a replica's device, and the
/// address of the `UpdateData` they came from: the update borrows that data
/// from `hold_observations` to `release_observations`, so the address names
/// it for as long as they are held.
struct HeldObservations<B: Backend> {
    data: usize,
    obs: Tensor<B, 2>,
}

/// Adam's state for every parameter of the model, as burn keeps it (a map
/// from parameter id to an adaptor record).
pub type AdamRecord<B> =
    <OptimizerAdaptor<Adam, ActorCritic<B>, B> as Optimizer<ActorCritic<B>, B>>::Record;

impl<B: AutodiffBackend> Replica<B> {
    /// The parameters and Adam's moments in `layout`'s order.
    pub fn save_state(&self, layout: &Layout) -> Result<TrainState, EngineError> {
        let model = self.model();
        let params = read_params(layout, model).map_err(record("parameters"))?;
        let (m1, m2, time) =
            adam::read_adam(layout, model, self.optim.to_record()).map_err(record("Adam state"))?;
        Ok(TrainState {
            params,
            m1,
            m2,
            time,
        })
    }

    /// Replaces the parameters (keeping their ids) and Adam's state.
    pub fn load_state(&mut self, layout: &Layout, state: &TrainState) -> Result<(), EngineError> {
        let model = self.model.as_mut().ok_or(EngineError::State {
            what: "model",
            reason: "lost in a failed step".into(),
        })?;
        // Moments as long as the parameters, everything finite and in range;
        // then parameters as many as the model's: checked before anything is
        // written.
        state
            .check(state.params.len())
            .map_err(record("the learner's state"))?;
        write_params(layout, &state.params, model).map_err(record("parameters"))?;
        let adam = adam::write_adam(layout, model, &state.m1, &state.m2, state.time)
            .map_err(record("Adam state"))?;
        self.set_optim_record(adam);
        Ok(())
    }

    pub fn new(
        model: ActorCritic<B>,
        adam_eps: f64,
        device: B::Device,
        peer: Option<PeerId>,
    ) -> Self {
        let adam_eps = adam_eps as f32;
        Self {
            model: Some(model),
            optim: AdamConfig::new().with_epsilon(adam_eps).init(),
            adam_eps,
            device,
            peer,
            held: None,
        }
    }

    /// Copies `data`'s observations to this replica's device, widened to
    /// f32, for the minibatches of one update to gather their rows from
    /// there: one copy an update rather than one a minibatch step.
    pub fn hold_observations(&mut self, data: &UpdateData) {
        self.held = None;
        let (n, d) = (data.len(), data.obs_dim);
        let mut all = Vec::with_capacity(n * d);
        data.observations.extend_f32(0..n * d, &mut all);
        let obs = Tensor::from_data(TensorData::new(all, [n, d]), &self.device);
        self.held = Some(HeldObservations {
            data: std::ptr::from_ref(data) as usize,
            obs,
        });
    }

    /// Frees what [`Self::hold_observations`] copied.
    pub fn release_observations(&mut self) {
        self.held = None;
    }

    /// The shard's observation rows: gathered on the device from the held
    /// observations of this update, else copied from the host.
    fn observation_rows(&self, s: &Shard<'_>) -> Tensor<B, 2> {
        let (data, idx, dev) = (s.data, s.idx, &self.device);
        let (m, d) = (idx.len(), data.obs_dim);
        if let Some(h) = self
            .held
            .as_ref()
            .filter(|h| h.data == std::ptr::from_ref(data) as usize)
        {
            let rows: Vec<i64> = idx.iter().map(|&i| i as i64).collect();
            let rows = Tensor::<B, 1, Int>::from_data(TensorData::new(rows, [m]), dev);
            return h.obs.clone().select(0, rows);
        }
        let mut obs = Vec::with_capacity(m * d);
        for &i in idx {
            data.observations.extend_f32(i * d..(i + 1) * d, &mut obs);
        }
        Tensor::from_data(TensorData::new(obs, [m, d]), dev)
    }

    pub fn model(&self) -> &ActorCritic<B> {
        self.model
            .as_ref()
            .expect("model is only taken during a step")
    }

    pub fn device(&self) -> &B::Device {
        &self.device
    }

    /// Replaces Adam's state.
    fn set_optim_record(&mut self, record: AdamRecord<B>) {
        let fresh = AdamConfig::new().with_epsilon(self.adam_eps).init();
        let optim = std::mem::replace(&mut self.optim, fresh);
        self.optim = optim.load_record(record);
    }

    pub fn set_obs_stats(&mut self, stats: &RunningMeanStd) {
        if let Some(m) = self.model.as_mut() {
            m.set_obs_stats(stats);
        }
    }

    pub fn inference_model(&self) -> ActorCritic<B::InnerBackend> {
        self.model().valid()
    }

    /// The shard as tensors on this replica's device (the one copy it makes).
    pub fn minibatch(&self, s: &Shard<'_>, dist: &ActionDist) -> MinibatchTensors<B> {
        let (data, idx) = (s.data, s.idx);
        let m = idx.len();
        let dev = &self.device;
        let f1 = |v: Vec<f32>| Tensor::<B, 1>::from_data(TensorData::new(v, [m]), dev);
        let gather = |v: &[f32]| idx.iter().map(|&i| v[i]).collect::<Vec<f32>>();
        let (actions, noise) = match &data.actions {
            BatchActions::Discrete(a) => (
                MbActions::Discrete(Tensor::<B, 1, Int>::from_data(
                    TensorData::new(idx.iter().map(|&i| a[i] as i64).collect::<Vec<_>>(), [m]),
                    dev,
                )),
                None,
            ),
            BatchActions::Continuous(a) => {
                let w = dist.action_width();
                let mut u = Vec::with_capacity(m * w);
                for &i in idx {
                    u.extend_from_slice(&a[i * w..(i + 1) * w]);
                }
                (
                    MbActions::Continuous(Tensor::from_data(TensorData::new(u, [m, w]), dev)),
                    Some(Tensor::from_data(
                        TensorData::new(s.noise.to_vec(), [m, w]),
                        dev,
                    )),
                )
            }
        };
        let valid = data.masks.as_ref().map(|masks| {
            let n = masks.len() / data.len().max(1);
            let mut v = Vec::with_capacity(m * n);
            for &i in idx {
                v.extend(masks[i * n..(i + 1) * n].iter().map(|&x| x != 0));
            }
            Tensor::<B, 2, Bool>::from_data(TensorData::new(v, [m, n]), dev)
        });
        let seq = (!s.sequences.is_empty()).then(|| self.sequence_of(s));
        let trained = data
            .sequences
            .as_ref()
            .and_then(|q| q.seats.as_ref())
            .map(|_| {
                let w: Vec<f32> = idx
                    .iter()
                    .map(|&i| f32::from(u8::from(data.trains(i))))
                    .collect();
                (f1(w), data.trained_in(idx))
            });
        MinibatchTensors {
            trained,
            seq,
            obs: self.observation_rows(s),
            actions,
            valid,
            old_logp: f1(gather(&data.old_log_probs)),
            adv: f1(s.adv.to_vec()),
            ret: f1(gather(&data.returns)),
            old_values: f1(gather(&data.old_values)),
            noise,
        }
    }

    /// The shard's sequences as the model reads them: their starts and
    /// the states they start from.
    fn sequence_of(&self, s: &Shard<'_>) -> sebulba_core::model::Sequence<B> {
        let seqs = s
            .data
            .sequences
            .as_ref()
            .expect("a minibatch of sequences is cut from data that keeps them");
        let starts: Vec<u8> = s.idx.iter().map(|&i| seqs.starts[i]).collect();
        let mut state = Vec::new();
        for &q in s.sequences {
            state.extend_from_slice(s.states.row(q));
        }
        let initial =
            sebulba_fused::PolicyState::from_values(s.states.width(), s.sequences.len(), state)
                .expect("one state per sequence");
        let movers: Vec<u8> = match &seqs.seats {
            Some(g) => s.idx.iter().map(|&i| g.movers[i]).collect(),
            None => Vec::new(),
        };
        let host = sebulba_fused::Sequence {
            steps: s.idx.len() / s.sequences.len(),
            envs: s.sequences.len(),
            starts: &starts,
            state: &initial,
            continues: &[],
            seats: seqs.seats_of(&movers),
        };
        super::sequences::on_device(&host, &self.device)
    }

    /// One minibatch step on this replica's shard. Every replica of the update
    /// calls this together: the target-KL decision and the gradients are
    /// all-reduced, so all replicas step (or stop) identically.
    pub fn step(
        &mut self,
        shard: &Shard<'_>,
        dist: &ActionDist,
        step: &Minibatch<'_>,
    ) -> Result<StepStats, EngineError> {
        // The shard's share of the minibatch's samples in the loss.
        let weight = shard.data.trained_in(shard.idx) as f64 / shard.minibatch.max(1) as f64;
        let mb = self.minibatch(shard, dist);
        let model = self.model.take().expect("model present between steps");
        let losses = match step.loss {
            Loss::Ppo { cfg, clip } => ppo_losses(&model, mb, dist, cfg, clip),
            Loss::Q { huber_delta } => q_losses(&model, mb, huber_delta),
        };
        let target_kl = step.loss.target_kl();
        let inner_device = losses.approx_kl.device();
        let local_kl = scalar(losses.approx_kl) * weight;
        let approx_kl = match self.peer {
            Some(peer) if target_kl > 0.0 => {
                sum_scalar::<B::InnerBackend>(peer, local_kl, &inner_device)?
            }
            _ => local_kl,
        };
        if target_kl > 0.0 && approx_kl > target_kl {
            self.model = Some(model);
            let terms = LossTerms {
                approx_kl: local_kl,
                ..Default::default()
            };
            return Ok(StepStats {
                terms,
                ..Default::default()
            });
        }
        let grads = (losses.total * weight).backward();
        let mut grads = GradientsParams::from_grads(grads, &model);
        if let Some(peer) = self.peer {
            grads = grads
                .all_reduce::<B::InnerBackend>(peer, ReduceOperation::Sum)
                .map_err(|e| EngineError::Collective(format!("{e:?}")))?;
        }
        let grad_norm = clip_global_norm(&model, &mut grads, step.max_grad_norm);
        // The norm is the all-reduced one, so every replica skips together.
        if !grad_norm.is_finite() {
            self.model = Some(model);
            return Ok(StepStats::skipped_non_finite());
        }
        self.model = Some(self.optim.step(step.lr, model, grads));
        let terms = LossTerms {
            policy_loss: scalar(losses.policy) * weight,
            value_loss: scalar(losses.value) * weight,
            entropy: scalar(losses.entropy) * weight,
            approx_kl: local_kl,
            clip_fraction: scalar(losses.clip_fraction) * weight,
            q_mean: scalar(losses.q_mean) * weight,
        };
        Ok(StepStats {
            terms,
            grad_norm,
            stepped: true,
            non_finite: false,
        })
    }
}

/// Sum of one number over all replicas.
fn sum_scalar<I: Backend>(peer: PeerId, x: f64, device: &I::Device) -> Result<f64, EngineError> {
    let t = Tensor::<I, 1>::from_data(TensorData::new(vec![x as f32], [1]), device);
    let summed =
        burn_collective::all_reduce::<I>(peer, t.into_primitive().tensor(), ReduceOperation::Sum)
            .map_err(|e| EngineError::Collective(format!("{e:?}")))?;
    Ok(scalar(Tensor::<I, 1>::from_primitive(
        TensorPrimitive::Float(summed),
    )))
}

fn record(what: &'static str) -> impl Fn(String) -> EngineError {
    move |reason| EngineError::State { what, reason }
}

pub(crate) fn scalar<B: Backend>(t: Tensor<B, 1>) -> f64 {
    t.into_scalar().elem::<f64>()
}
