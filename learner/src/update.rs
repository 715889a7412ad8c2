//! The update loop, on its own thread: take `batches_per_update` fresh batches
//! (dropping those too far behind the current policy), value all T+1
//! observations and the final observations in one forward pass, GAE per batch,
//! normalise advantages over the whole update, run PPO, publish the new version.

use crate::accounting::Outcome;
use crate::ppo::{Ppo, PpoStats, UpdateData};
use crate::publish::Publisher;
use crate::state::{LiveStats, Shared};
use crate::summary::Lag;
use crate::validate::DecodedBatch;
use crate::{LearnerError, gae};
use burn::tensor::{Tensor, TensorData};
use sebulba_core::CpuAutodiff;
use sebulba_core::files::JsonLines;
use sebulba_core::model::ModelSpec;
use sebulba_core::policy::network_to_wire;
use sebulba_core::weights::to_safetensors;
use sebulba_proto::Weights;
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, info_span};

pub struct UpdateLoop {
    pub shared: Arc<Shared>,
    pub live: Arc<LiveStats>,
    pub ppo: Ppo<CpuAutodiff>,
    pub model_spec: ModelSpec,
    pub publisher: Publisher,
    pub rt: tokio::runtime::Handle,
    pub metrics: JsonLines,
    pub started: Instant,
}

#[derive(Debug, Clone, Copy)]
pub struct LoopOutcome {
    pub env_steps: u64,
    pub updates: u64,
    pub final_version: u64,
    /// The step budget was reached (not stopped from outside).
    pub completed: bool,
}

#[derive(Serialize)]
struct MetricsLine {
    update: u64,
    version: u64,
    env_steps: u64,
    wall_seconds: f64,
    steps_per_second: f64,
    samples: usize,
    #[serde(flatten)]
    ppo: PpoStats,
    explained_variance: f64,
    policy_lag: Lag,
    episodes: usize,
    episode_return_mean: Option<f64>,
    episode_length_mean: Option<f64>,
    update_seconds: f64,
    batches_received: u64,
    batches_used: u64,
    batches_dropped_stale: u64,
    batches_rejected: u64,
}

/// What `prepare` learned beside the training data.
struct Prepared {
    data: UpdateData,
    explained_variance: f64,
    lag: Lag,
    episode_returns: Vec<f64>,
    episode_lengths: Vec<u32>,
}

impl UpdateLoop {
    pub fn run(
        &mut self,
        mut rx: mpsc::Receiver<DecodedBatch>,
        stop: CancellationToken,
    ) -> Result<LoopOutcome, LearnerError> {
        let cfg = self.shared.config.clone();
        let k = cfg.learner.batches_per_update;
        let mut env_steps = 0u64;
        let mut updates = 0u64;
        let mut version = 0u64;
        let mut completed = false;
        self.publish(version, env_steps, false)?;
        'run: loop {
            let steps_at_start = env_steps;
            let mut batches: Vec<DecodedBatch> = Vec::with_capacity(k);
            while batches.len() < k {
                let next = self.rt.block_on(async {
                    tokio::select! {
                        b = rx.recv() => b,
                        _ = stop.cancelled() => None,
                    }
                });
                let Some(b) = next else {
                    for b in batches.drain(..) {
                        self.shared
                            .accounting
                            .dequeued(&b.actor_id, Outcome::DroppedShutdown);
                    }
                    break 'run;
                };
                env_steps += b.env_steps();
                self.live.env_steps.store(env_steps, Ordering::Relaxed);
                let lag = version.saturating_sub(b.policy_version);
                let stale = lag > cfg.learner.max_policy_lag;
                ack_taken(
                    &b,
                    version,
                    stale.then(|| {
                        format!(
                            "dropped: policy lag {lag} exceeds max_policy_lag {}",
                            cfg.learner.max_policy_lag
                        )
                    }),
                    false,
                );
                if stale {
                    debug!(actor = %b.actor_id, lag, "dropping stale batch");
                    self.shared
                        .accounting
                        .dequeued(&b.actor_id, Outcome::DroppedStale);
                    continue;
                }
                batches.push(b);
            }
            let span = info_span!(
                "update",
                update = updates + 1,
                samples = cfg.samples_per_update()
            );
            let _enter = span.enter();
            let t0 = Instant::now();
            let lr = if cfg.ppo.anneal_lr {
                cfg.ppo.learning_rate
                    * (1.0 - steps_at_start as f64 / cfg.run.total_steps as f64).max(0.0)
            } else {
                cfg.ppo.learning_rate
            };
            let prepared = self.prepare(&batches, version);
            let stats = self.ppo.update(&prepared.data, &cfg.ppo, lr);
            updates += 1;
            version += 1;
            for b in &batches {
                self.shared.accounting.dequeued(&b.actor_id, Outcome::Used);
            }
            completed = env_steps >= cfg.run.total_steps;
            if completed {
                self.shared.finished.store(true, Ordering::Release);
            }
            self.publish(version, env_steps, completed)?;
            self.live.updates.store(updates, Ordering::Relaxed);
            let ret_mean = mean(&prepared.episode_returns);
            if let Some(r) = ret_mean {
                self.live.set_last_return(r);
            }
            let wall = self.started.elapsed().as_secs_f64();
            let (counts, _) = self.shared.accounting.snapshot();
            let line = MetricsLine {
                update: updates,
                version,
                env_steps,
                wall_seconds: wall,
                steps_per_second: env_steps as f64 / wall.max(1e-9),
                samples: prepared.data.len(),
                ppo: stats,
                explained_variance: prepared.explained_variance,
                policy_lag: prepared.lag,
                episodes: prepared.episode_returns.len(),
                episode_return_mean: ret_mean,
                episode_length_mean: mean(
                    &prepared
                        .episode_lengths
                        .iter()
                        .map(|&l| l as f64)
                        .collect::<Vec<_>>(),
                ),
                update_seconds: t0.elapsed().as_secs_f64(),
                batches_received: counts.received,
                batches_used: counts.used,
                batches_dropped_stale: counts.dropped_stale,
                batches_rejected: counts.rejected,
            };
            self.metrics
                .write(&line)
                .map_err(|e| LearnerError::Io("metrics.jsonl".into(), e))?;
            if completed {
                info!(env_steps, updates, "step budget reached");
                break;
            }
        }
        self.shared.finished.store(true, Ordering::Release);
        rx.close();
        while let Ok(b) = rx.try_recv() {
            ack_taken(&b, version, Some("dropped: the run finished".into()), true);
            self.shared
                .accounting
                .dequeued(&b.actor_id, Outcome::DroppedShutdown);
        }
        Ok(LoopOutcome {
            env_steps,
            updates,
            final_version: version,
            completed,
        })
    }

    /// safetensors bytes of the current weights.
    pub fn weights_bytes(&self) -> Result<Vec<u8>, LearnerError> {
        to_safetensors(&self.ppo.inference_model(), &self.model_spec)
            .map_err(|e| LearnerError::Weights(e.to_string()))
    }

    fn publish(&self, version: u64, env_steps: u64, final_: bool) -> Result<(), LearnerError> {
        let _span = info_span!("publish", version).entered();
        let bytes = self.weights_bytes()?;
        // Accept batches of this version before actors can see it.
        self.shared.version.store(version, Ordering::Release);
        let c = &self.shared.config;
        let weights = Weights {
            version,
            safetensors: bytes.into(),
            network: Some(network_to_wire(&c.network)),
            env_id: c.env.id.clone(),
            env_steps,
            r#final: final_,
        };
        self.rt
            .block_on(self.publisher.publish(weights, Duration::from_secs(60)))
            .map_err(|s| LearnerError::Publish(format!("version {version}: {}", s.message())))
    }

    fn prepare(&self, batches: &[DecodedBatch], version: u64) -> Prepared {
        let cfg = &self.shared.config;
        let d = self.model_spec.obs_dim;
        // One forward pass over every observation row and every final observation.
        let mut all_obs = Vec::new();
        for b in batches {
            all_obs.extend_from_slice(&b.observations);
        }
        for b in batches {
            all_obs.extend_from_slice(&b.final_observations);
        }
        let rows = all_obs.len() / d;
        let model = self.ppo.inference_model();
        let values: Vec<f32> = model
            .value(Tensor::from_data(
                TensorData::new(all_obs, [rows, d]),
                self.ppo.device(),
            ))
            .into_data()
            .to_vec()
            .unwrap_or_else(|_| vec![0.0; rows]);

        let n: usize = batches.iter().map(|b| b.num_steps * b.num_envs).sum();
        let mut data = UpdateData {
            obs_dim: d,
            observations: Vec::with_capacity(n * d),
            ..Default::default()
        };
        let mut advantages = vec![0.0f32; n];
        let mut returns = vec![0.0f32; n];
        let mut old_values = Vec::with_capacity(n);
        let (mut obs_off, mut fin_off, mut out_off) = (
            0usize,
            batches
                .iter()
                .map(|b| b.observations.len() / d)
                .sum::<usize>(),
            0usize,
        );
        let mut episode_returns = Vec::new();
        let mut episode_lengths = Vec::new();
        let mut lags = Vec::with_capacity(batches.len());
        for b in batches {
            let te = b.num_steps * b.num_envs;
            let v = &values[obs_off..obs_off + te + b.num_envs];
            let mut final_values = vec![0.0f32; te];
            for (i, _) in b.truncated.iter().enumerate().filter(|(_, t)| **t == 1) {
                final_values[i] = values[fin_off];
                fin_off += 1;
            }
            let input = gae::GaeInput {
                num_steps: b.num_steps,
                num_envs: b.num_envs,
                rewards: &b.rewards,
                terminated: &b.terminated,
                truncated: &b.truncated,
                values: v,
                final_values: &final_values,
            };
            gae::compute_gae(
                &input,
                cfg.ppo.gamma,
                cfg.ppo.gae_lambda,
                &mut advantages[out_off..out_off + te],
                &mut returns[out_off..out_off + te],
            );
            old_values.extend_from_slice(&v[..te]);
            data.observations
                .extend_from_slice(&b.observations[..te * d]);
            data.actions.extend_from_slice(&b.actions);
            data.old_log_probs.extend_from_slice(&b.log_probs);
            episode_returns.extend_from_slice(&b.episode_returns);
            episode_lengths.extend_from_slice(&b.episode_lengths);
            lags.push(version - b.policy_version);
            obs_off += (b.num_steps + 1) * b.num_envs;
            out_off += te;
        }
        let explained_variance = explained_variance(&old_values, &returns);
        normalize(&mut advantages);
        data.advantages = advantages;
        data.returns = returns;
        let lag = Lag {
            min: lags.iter().copied().min().unwrap_or(0),
            mean: lags.iter().sum::<u64>() as f64 / lags.len().max(1) as f64,
            max: lags.iter().copied().max().unwrap_or(0),
        };
        Prepared {
            data,
            explained_variance,
            lag,
            episode_returns,
            episode_lengths,
        }
    }
}

/// Acknowledges a batch the loop has taken (returning the actor's credit).
fn ack_taken(b: &DecodedBatch, version: u64, dropped: Option<String>, run_finished: bool) {
    if let Some(tx) = &b.ack_to {
        let ack = sebulba_proto::Ack {
            sequence: b.sequence,
            accepted: dropped.is_none(),
            code: 0,
            message: dropped.unwrap_or_default(),
            learner_version: version,
            run_finished,
        };
        // A full or closed ack channel means the actor is gone or far behind: nothing to wait for.
        let _ = tx.try_send(Ok(ack));
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Normalises in place to zero mean and unit (population) std, over everything given.
pub fn normalize(x: &mut [f32]) {
    let n = x.len().max(1) as f64;
    let m = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / n;
    let std = var.sqrt() + 1e-8;
    for v in x.iter_mut() {
        *v = ((*v as f64 - m) / std) as f32;
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

    #[test]
    fn normalisation_and_explained_variance() {
        let mut x = [1.0f32, 2.0, 3.0, 4.0];
        normalize(&mut x);
        // mean 2.5, population std sqrt(1.25) = 1.118034
        assert!(
            (x[0] + 1.341_640_8).abs() < 1e-5 && (x[3] - 1.341_640_8).abs() < 1e-5,
            "{x:?}"
        );
        assert!((explained_variance(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]) - 1.0).abs() < 1e-12);
        // values 0: ev = 0
        assert!(explained_variance(&[0.0, 0.0, 0.0], &[1.0, 2.0, 3.0]).abs() < 1e-12);
    }
}
