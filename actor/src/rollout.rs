//! The rollout loop, on a blocking thread: E envs stepped in lockstep, one
//! batched forward pass per step, T steps per batch. Buffers are allocated once
//! and reused. The policy is refreshed between batches, so each batch carries
//! exactly one policy version.

use crate::actions::Actions;
use rand::SeedableRng;
use rand::rngs::StdRng;
use sebulba_core::config::NetworkConfig;
use sebulba_core::devices::DeviceKind;
use sebulba_core::distribution::ActionDist;
use sebulba_core::env::{EnvError, EnvSpec, VecEnv, VecStepOut};
use sebulba_core::policy::InferencePolicy;
use sebulba_proto::{EpisodeStats, TrajectoryBatch, Weights, encode_f32, encode_u8};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span, warn};

pub struct RolloutSetup {
    pub actor_id: String,
    pub env: EnvSpec,
    pub dist: ActionDist,
    pub network: NetworkConfig,
    pub num_envs: usize,
    pub num_steps: usize,
    pub seed: u64,
    /// Where inference runs.
    pub device: DeviceKind,
}

pub struct Rollout {
    setup: RolloutSetup,
    venv: VecEnv,
    policy: InferencePolicy,
    weights: watch::Receiver<Option<Arc<Weights>>>,
    out: mpsc::Sender<TrajectoryBatch>,
    /// One permit per batch the learner has not yet acknowledged.
    credits: Arc<Semaphore>,
    /// The learner's version at its latest ack: weights to wait for before a rollout.
    min_version: Arc<AtomicU64>,
    stop: CancellationToken,
    rt: tokio::runtime::Handle,
    rng: StdRng,
    /// Trace context of the publish that produced the weights in use.
    weights_trace: std::collections::HashMap<String, String>,
}

impl Rollout {
    pub fn new(
        setup: RolloutSetup,
        weights: watch::Receiver<Option<Arc<Weights>>>,
        out: mpsc::Sender<TrajectoryBatch>,
        credits: Arc<Semaphore>,
        min_version: Arc<AtomicU64>,
        stop: CancellationToken,
        rt: tokio::runtime::Handle,
    ) -> Result<Self, String> {
        let venv =
            VecEnv::new(&setup.env.id, setup.num_envs, setup.seed).map_err(|e| e.to_string())?;
        let policy = InferencePolicy::new(&setup.env, &setup.network, setup.device)
            .map_err(|e| e.to_string())?;
        let rng = StdRng::seed_from_u64(setup.seed ^ 0xAC70_12AC);
        Ok(Self {
            setup,
            venv,
            policy,
            weights,
            out,
            credits,
            min_version,
            stop,
            rt,
            rng,
            weights_trace: Default::default(),
        })
    }

    /// Credit-based flow control: a rollout starts only when the learner has taken
    /// (acked) an earlier batch, and only with weights at least as new as the
    /// learner's version at that ack. An actor thus never holds more than its
    /// credit of batches the learner has not started on, and the batch it makes
    /// meanwhile is one version behind when used. HTTP/2 windows alone would let
    /// many small batches pile up and go stale. Returns false when stopped.
    fn wait_for_credit(&mut self) -> bool {
        let stop = self.stop.clone();
        let credits = self.credits.clone();
        let min_version = self.min_version.load(std::sync::atomic::Ordering::Acquire);
        let weights = &mut self.weights;
        self.rt.block_on(async move {
            tokio::select! {
                permit = credits.acquire() => match permit {
                    Ok(p) => p.forget(),
                    Err(_) => return false,
                },
                _ = stop.cancelled() => return false,
            }
            // The learner publishes before it takes the next batches, so this wait
            // is short; if the parameter server is away, act with what we have.
            let fresh = weights.wait_for(|w| w.as_ref().is_some_and(|w| w.version >= min_version));
            tokio::select! {
                _ = tokio::time::timeout(std::time::Duration::from_secs(2), fresh) => true,
                _ = stop.cancelled() => false,
            }
        })
    }

    /// Loads the newest weights if they are newer than the ones in use.
    fn refresh_policy(&mut self) {
        let newest = self.weights.borrow_and_update().clone();
        if let Some(w) = newest
            && self.policy.version() != Some(w.version)
        {
            // Continues the trace of the learner's publish.
            let span = info_span!("weight_refresh", version = w.version);
            sebulba_transport::trace::set_parent_from_map(&span, &w.trace_context);
            let _entered = span.enter();
            match self.policy.load(w.version, w.safetensors.to_vec()) {
                Ok(()) => self.weights_trace = w.trace_context.clone(),
                Err(e) => warn!(
                    version = w.version,
                    "could not load weights, keeping version {:?}: {e}",
                    self.policy.version()
                ),
            }
        }
    }

    /// Produces batches until stopped or the stream goes away; returns env steps taken.
    pub fn run(mut self) -> Result<u64, EnvError> {
        let (t_len, e_len, d) = (
            self.setup.num_steps,
            self.setup.num_envs,
            self.setup.env.obs_dim,
        );
        let mut actions = Actions::new(&self.setup.dist, &self.venv, t_len);
        let mut obs = vec![0.0f32; e_len * d];
        self.venv.reset(&mut obs);
        let mut step_out: VecStepOut = self.venv.new_step_out();
        let mut obs_rows = vec![0.0f32; (t_len + 1) * e_len * d];
        let mut log_probs = vec![0.0f32; t_len * e_len];
        let mut rewards = vec![0.0f32; t_len * e_len];
        let mut terminated = vec![0u8; t_len * e_len];
        let mut truncated = vec![0u8; t_len * e_len];
        let mut final_obs: Vec<f32> = Vec::new();
        let mut episodes: Vec<EpisodeStats> = Vec::new();
        let mut sequence = 0u64;
        let mut env_steps = 0u64;
        while !self.stop.is_cancelled() {
            if !self.wait_for_credit() {
                break;
            }
            self.refresh_policy();
            let Some(version) = self.policy.version() else {
                return Ok(env_steps);
            };
            // One trace per rollout: acting (env steps and inference) then
            // sending; the learner's ingest continues it from the send span.
            // It links to the publish of the weights it acts with.
            let span = info_span!(
                parent: None,
                "rollout",
                actor = %self.setup.actor_id,
                sequence,
                version,
                steps = t_len,
                envs = e_len
            );
            sebulba_transport::trace::link_from_map(&span, &self.weights_trace);
            let act = info_span!(parent: &span, "act");
            let guard = act.enter();
            obs_rows[..e_len * d].copy_from_slice(&obs);
            final_obs.clear();
            episodes.clear();
            for t in 0..t_len {
                let head = self.policy.head(&obs, e_len);
                let row = t * e_len;
                let batch = actions
                    .sample(
                        t,
                        &head,
                        &self.venv,
                        &mut log_probs[row..row + e_len],
                        &mut self.rng,
                    )
                    .map_err(|e| EnvError::BadAction {
                        id: self.setup.env.id.clone(),
                        reason: e.to_string(),
                    })?;
                self.venv.step(batch, &mut step_out)?;
                rewards[row..row + e_len].copy_from_slice(&step_out.reward);
                for e in 0..e_len {
                    terminated[row + e] = step_out.terminated[e] as u8;
                    truncated[row + e] = step_out.truncated[e] as u8;
                    if step_out.truncated[e] {
                        final_obs.extend_from_slice(&step_out.final_obs[e * d..(e + 1) * d]);
                    }
                }
                episodes.extend(step_out.episodes.iter().map(|s| EpisodeStats {
                    episode_return: s.episode_return,
                    length: s.length,
                }));
                obs.copy_from_slice(&step_out.obs);
                obs_rows[(t + 1) * e_len * d..(t + 2) * e_len * d].copy_from_slice(&obs);
            }
            env_steps += (t_len * e_len) as u64;
            let (actions_tensor, action_masks) = actions.encode(t_len, e_len);
            drop(guard);
            let send = info_span!(parent: &span, "send", sequence);
            let batch = TrajectoryBatch {
                actor_id: self.setup.actor_id.clone(),
                sequence,
                policy_version: version,
                num_steps: t_len as u32,
                num_envs: e_len as u32,
                observations: Some(encode_f32(&[t_len + 1, e_len, d], &obs_rows)),
                actions: Some(actions_tensor),
                log_probs: Some(encode_f32(&[t_len, e_len], &log_probs)),
                rewards: Some(encode_f32(&[t_len, e_len], &rewards)),
                terminated: Some(encode_u8(&[t_len, e_len], &terminated)),
                truncated: Some(encode_u8(&[t_len, e_len], &truncated)),
                final_observations: Some(encode_f32(&[final_obs.len() / d, d], &final_obs)),
                action_masks,
                player_ids: None,
                episodes: episodes.clone(),
                trace_context: sebulba_transport::trace::context_map(&send),
            };
            sequence += 1;
            let sent = self.rt.block_on(
                async {
                    tokio::select! {
                        r = self.out.send(batch) => r.is_ok(),
                        _ = self.stop.cancelled() => false,
                    }
                }
                .instrument(send),
            );
            drop(act);
            drop(span);
            if !sent {
                debug!("trajectory stream closed");
                break;
            }
        }
        Ok(env_steps)
    }
}
