//! The update loop, on its own thread: take `batches_per_update` fresh batches
//! (dropping those too far behind the current policy), value all T+1
//! observations and the final observations in one forward pass, GAE per batch,
//! normalise advantages over the whole update, run PPO, publish the new version.

use crate::LearnerError;
use crate::accounting::Outcome;
use crate::checkpoint::{Checkpoint, Meta};
use crate::ppo::{Ppo, PpoStats};
use crate::prepare::{Normalizers, prepare};
use crate::publish::Publisher;
use crate::state::{LiveStats, Shared};
use crate::summary::Lag;
use crate::validate::DecodedBatch;
use burn::tensor::backend::AutodiffBackend;
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
use tracing::{Instrument, debug, error, info, info_span};

pub struct UpdateLoop<B: AutodiffBackend> {
    pub shared: Arc<Shared>,
    pub live: Arc<LiveStats>,
    pub ppo: Ppo<B>,
    pub model_spec: ModelSpec,
    pub publisher: Publisher,
    pub rt: tokio::runtime::Handle,
    pub metrics: JsonLines,
    pub started: Instant,
    pub normalizers: Normalizers,
    /// Where checkpoints go (`checkpoint.bin`); `learner.checkpoint_interval` says how often.
    pub run_dir: std::path::PathBuf,
    /// The checkpoint to continue from (`--resume`).
    pub resume: Option<Checkpoint>,
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
    reward_scale: f32,
    episodes: usize,
    episode_return_mean: Option<f64>,
    episode_length_mean: Option<f64>,
    update_seconds: f64,
    batches_received: u64,
    batches_used: u64,
    batches_dropped_stale: u64,
    batches_rejected: u64,
}

impl<B: AutodiffBackend> UpdateLoop<B> {
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
        if let Some(ck) = self.resume.take() {
            self.ppo
                .load_state(&ck.ppo)
                .map_err(|e| LearnerError::Checkpoint(format!("restoring PPO: {e}")))?;
            self.normalizers.obs = ck.meta.obs_stats;
            self.normalizers.rewards = ck.meta.reward_scale;
            (env_steps, updates, version) = (ck.meta.env_steps, ck.meta.updates, ck.meta.version);
            // Versions published after the checkpoint may still be held: go on
            // above them, so followers take the resumed weights as newer.
            if let Some(held) = self.rt.block_on(self.publisher.latest_version())
                && held >= version
            {
                version = held + 1;
            }
            self.live.env_steps.store(env_steps, Ordering::Relaxed);
            self.live.updates.store(updates, Ordering::Relaxed);
            info!(env_steps, updates, version, "resumed from checkpoint");
        }
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
                let Some(mut b) = next else {
                    for b in batches.drain(..) {
                        self.shared
                            .accounting
                            .dequeued(&b.actor_id, Outcome::DroppedShutdown);
                    }
                    break 'run;
                };
                // Taken: its queue_wait span ends here.
                b.trace.queue_wait.take();
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
            // Each update is its own trace, linked to the ingest spans of the
            // batches it used (each of which continues one actor rollout).
            let span = info_span!(
                parent: None,
                "update",
                update = updates + 1,
                version,
                samples = cfg.samples_per_update(),
                batches = batches.len(),
            );
            for b in &batches {
                sebulba_proto::trace::link_from_map(&span, &b.trace.ingest);
            }
            let _enter = span.enter();
            let t0 = Instant::now();
            // Linear annealing to 0 over the step budget.
            let remaining = (1.0 - steps_at_start as f64 / cfg.run.total_steps as f64).max(0.0);
            let anneal = |on: bool, x: f64| if on { x * remaining } else { x };
            let lr = anneal(cfg.ppo.anneal_lr, cfg.ppo.learning_rate);
            let clip = anneal(cfg.ppo.anneal_clip, cfg.ppo.clip_coef);
            let prepared = info_span!("prepare").in_scope(|| {
                prepare(
                    &batches,
                    version,
                    &mut self.ppo,
                    &mut self.normalizers,
                    &cfg,
                    self.model_spec.obs_dim,
                )
            });
            let stats = info_span!("sgd", epochs = cfg.ppo.epochs)
                .in_scope(|| self.ppo.update(&prepared.data, &cfg.ppo, lr, clip))
                .map_err(|e| LearnerError::Update(e.to_string()))?;
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
            let every = cfg.learner.checkpoint_interval;
            if every > 0 && (updates.is_multiple_of(every) || completed) {
                self.checkpoint(version, env_steps, updates);
            }
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
                reward_scale: prepared.reward_scale,
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
        // Stopped from outside (SIGTERM): keep the latest state for `--resume`.
        let every = cfg.learner.checkpoint_interval;
        if !completed && every > 0 && updates > 0 && !updates.is_multiple_of(every) {
            self.checkpoint(version, env_steps, updates);
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

    /// Writes `checkpoint.bin` for the state after update `updates`. A failure
    /// (a full disk) is logged and training goes on: the previous checkpoint
    /// stays intact, and the next interval tries again.
    fn checkpoint(&mut self, version: u64, env_steps: u64, updates: u64) {
        let span = info_span!("checkpoint", updates);
        let _entered = span.enter();
        if let Err(e) = self.write_checkpoint(version, env_steps, updates) {
            error!(updates, "checkpoint not written: {e}");
        }
    }

    fn write_checkpoint(
        &mut self,
        version: u64,
        env_steps: u64,
        updates: u64,
    ) -> Result<(), LearnerError> {
        let ppo = self.ppo.save_state().map_err(LearnerError::Checkpoint)?;
        let c = &self.shared.config;
        let ck = Checkpoint {
            meta: Meta {
                version,
                env_steps,
                updates,
                env_id: c.env.id.clone(),
                network: c.network.clone(),
                obs_stats: self.normalizers.obs.clone(),
                reward_scale: self.normalizers.rewards.clone(),
            },
            ppo,
        };
        ck.write(&self.run_dir)
            .map_err(|e| LearnerError::Checkpoint(e.to_string()))?;
        debug!(updates, version, env_steps, "checkpoint written");
        Ok(())
    }

    /// safetensors bytes of the current weights.
    pub fn weights_bytes(&self) -> Result<Vec<u8>, LearnerError> {
        to_safetensors(&self.ppo.inference_model(), &self.model_spec)
            .map_err(|e| LearnerError::Weights(e.to_string()))
    }

    fn publish(&self, version: u64, env_steps: u64, final_: bool) -> Result<(), LearnerError> {
        let span = info_span!("publish", version);
        let _entered = span.enter();
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
            // Followers' weight refreshes continue this trace.
            trace_context: sebulba_proto::trace::context_map(&span),
        };
        self.rt
            .block_on(
                self.publisher
                    .publish(weights, Duration::from_secs(60))
                    .instrument(span.clone()),
            )
            .map_err(|s| LearnerError::Publish(format!("version {version}: {}", s.message())))
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
