//! The rollout loop, on a blocking thread: E envs stepped together, one
//! batched forward pass per step, T steps per batch. Buffers are allocated once
//! and reused. The policy is refreshed between batches, so each batch carries
//! exactly one policy version, except a game's carried overlap rows
//! ([`crate::turns`]), which keep the log-probabilities they were acted with.

use crate::actions::Actions;
use crate::buffers::Buffers;
use rand::SeedableRng;
use rand::rngs::StdRng;
use sebulba_core::config::NetworkConfig;
use sebulba_core::devices::DeviceKind;
use sebulba_core::distribution::ActionDist;
use sebulba_core::policy::InferencePolicy;
use sebulba_envs::{DiscountedReturn, EnvError, EnvSpec, VecStepOut, VectorEnv, make_vector_env};
use sebulba_proto::{TrajectoryBatch, Weights};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span, warn};

pub struct RolloutSetup {
    pub actor_id: String,
    pub env: EnvSpec,
    /// A Python environment's keyword arguments (JSON; empty for native ids).
    pub env_kwargs: String,
    pub dist: ActionDist,
    pub network: NetworkConfig,
    pub envs_per_actor: usize,
    pub rollout_length: usize,
    pub seed: u64,
    /// Where inference runs.
    pub device: DeviceKind,
    /// The run joined: weights of any other run are never acted with.
    pub run_id: String,
    /// The discount of each env's running return, sent with every batch for
    /// reward scaling (`None`: the run does not scale rewards).
    pub reward_gamma: Option<f64>,
    /// A deterministic run's lane: each batch is acted with exactly the
    /// version it names.
    pub lane: Option<sebulba_proto::DeterministicLane>,
    /// This actor's live metrics.
    pub(crate) metrics: crate::metrics::ActorMetrics,
    /// A game's other seats: `selfplay.past_fraction` and `rule_fraction`,
    /// and the pool followed from the parameter server when some seats are
    /// past (`None`: every seat is the newest).
    pub(crate) others: Option<crate::selfplay::Others>,
}

pub struct Rollout {
    setup: RolloutSetup,
    venv: Box<dyn VectorEnv>,
    policy: InferencePolicy,
    /// The policy's state per env (per seat in a game).
    memory: crate::memory::SeatStates,
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
    /// The exploration rate of the weights in use (a DQN run's).
    epsilon: Option<f32>,
    /// A deterministic run's batch was acted with another version than its
    /// lane names (said once).
    lane_broken: bool,
    /// Env failures since the last batch sent.
    faults: crate::faults::Faults,
    /// Whose move each row is, for a game.
    turns: Option<crate::turns::Turns>,
    /// Which seats past versions play, for a game with past selves.
    selfplay: Option<crate::selfplay::SelfPlay>,
    /// Where the time went since the last batch sent.
    timing: crate::timing::Timing,
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
        let venv = make_vector_env(
            &setup.env.id,
            &setup.env_kwargs,
            setup.envs_per_actor,
            setup.seed,
            sebulba_envs::Purpose::Train,
        )
        .map_err(|e| e.to_string())?;
        let policy = InferencePolicy::new(&setup.env, &setup.network, setup.device)
            .map_err(|e| e.to_string())?;
        let rng = StdRng::seed_from_u64(setup.seed ^ 0xAC70_12AC);
        let rows = setup.rollout_length + setup.env.overlap_rows();
        let turns = crate::turns::Turns::new(venv.as_ref(), rows);
        let memory =
            crate::memory::SeatStates::new(&policy, setup.envs_per_actor, setup.env.players);
        let selfplay = match (&turns, setup.others.clone()) {
            (Some(_), Some(others)) => {
                let past = InferencePolicy::new(&setup.env, &setup.network, setup.device)
                    .map_err(|e| e.to_string())?;
                let rules = venv.rule_players();
                let sizes = (setup.env.players, setup.envs_per_actor, rows, rules);
                let sp = crate::selfplay::SelfPlay::new(others.fractions, sizes, past, others.pool);
                Some(sp)
            }
            _ => None,
        };
        Ok(Self {
            setup,
            venv,
            policy,
            memory,
            weights,
            out,
            credits,
            min_version,
            stop,
            rt,
            rng,
            weights_trace: Default::default(),
            epsilon: None,
            lane_broken: false,
            faults: Default::default(),
            turns,
            selfplay,
            timing: crate::timing::Timing::new(),
        })
    }

    /// Credit-based flow control: a rollout starts only when the learner has taken
    /// (acked) an earlier batch, and only with weights at least as new as the
    /// learner's version at that ack. An actor thus never holds more than its
    /// credit of batches the learner has not started on, and the batch it makes
    /// meanwhile is one version behind when used. HTTP/2 windows alone would let
    /// many small batches pile up and go stale. In a deterministic run the
    /// `sequence`-th batch waits, however long, for the version its lane names
    /// (with a forced lag that is older than the learner's at the ack).
    /// Returns false when stopped.
    fn wait_for_credit(&mut self, sequence: u64) -> bool {
        let stop = self.stop.clone();
        let credits = self.credits.clone();
        let floor = self.min_version.clone();
        let lane_version = self.setup.lane.map(|l| l.version_for(sequence));
        let weights = &mut self.weights;
        let run_id = self.setup.run_id.clone();
        self.rt.block_on(async move {
            tokio::select! {
                permit = credits.acquire() => match permit {
                    Ok(p) => p.forget(),
                    Err(_) => return false,
                },
                _ = stop.cancelled() => return false,
            }
            // Read after the credit: the ack that returned it raised the floor
            // first (`Flow::ack`), so this rollout acts with at least its version.
            let acked = floor.load(std::sync::atomic::Ordering::Acquire);
            let min_version = lane_version.unwrap_or(acked);
            // The learner publishes before it takes the next batches, so this wait
            // is short; if the parameter server is away, act with what we have
            // (not in a deterministic run: there the version is part of the result).
            let fresh = weights.wait_for(|w| {
                w.as_ref()
                    .is_some_and(|w| w.run_id == run_id && w.version >= min_version)
            });
            let patience = match lane_version {
                Some(_) => std::time::Duration::MAX,
                None => std::time::Duration::from_secs(2),
            };
            tokio::select! {
                _ = tokio::time::timeout(patience, fresh) => true,
                _ = stop.cancelled() => false,
            }
        })
    }

    /// Loads the newest weights if they are newer than the ones in use, and
    /// draws the past version this rollout's past seats act with.
    fn refresh_policy(&mut self) {
        if let Some(sp) = &mut self.selfplay {
            sp.draw(&mut self.rng);
        }
        let newest = self.weights.borrow_and_update().clone();
        if let Some(w) = newest
            && w.run_id == self.setup.run_id
            && self.policy.version() != Some(w.version)
        {
            // Continues the trace of the learner's publish.
            let span = info_span!("weight_refresh", version = w.version);
            sebulba_transport::trace::set_parent_from_map(&span, &w.trace_context);
            let _entered = span.enter();
            if let Some(e) = w.epsilon.filter(|e| !(0.0..=1.0).contains(e)) {
                warn!(
                    version = w.version,
                    "field `epsilon`: {e} is not an exploration rate in [0, 1]; keeping version {:?}",
                    self.policy.version()
                );
                return;
            }
            match self.policy.load(w.version, w.safetensors.to_vec()) {
                Ok(()) => {
                    self.weights_trace = w.trace_context.clone();
                    self.epsilon = w.epsilon;
                }
                Err(e) => warn!(
                    version = w.version,
                    "could not load weights, keeping version {:?}: {e}",
                    self.policy.version()
                ),
            }
        }
    }

    /// Says once when a deterministic run's batch is acted with another
    /// version than its lane names (the actor joined mid-run): the run goes
    /// on, but no longer repeats.
    fn check_lane(&mut self, sequence: u64, version: u64) {
        if let Some(l) = self.setup.lane
            && l.version_for(sequence) != version
            && !self.lane_broken
        {
            self.lane_broken = true;
            warn!(
                sequence,
                version,
                wanted = l.version_for(sequence),
                "deterministic run: acting with another version than the lane names; this run will not repeat exactly"
            );
        }
    }

    /// Acts one rollout into `buf`: its rows after the carried ones (T, or
    /// T + K the first time for a game); an env failure ends it early.
    fn act(
        &mut self,
        actions: &mut Actions,
        buf: &mut Buffers,
        step_out: &mut VecStepOut,
        mut returns: Option<&mut DiscountedReturn>,
    ) -> Result<(), EnvError> {
        let e_len = self.setup.envs_per_actor;
        let first = buf.start(self.memory.values());
        for t in first..buf.rows {
            buf.before_row(t, self.memory.values());
            if let Some(turns) = &mut self.turns {
                turns.record_movers(t, self.venv.as_ref());
            }
            let started = std::time::Instant::now();
            let masks = actions.load_masks(t, self.venv.as_ref());
            let movers = self.turns.as_ref().map(|turns| turns.movers(t));
            let mut head = self
                .memory
                .step(&self.policy, &buf.obs, None, movers, masks);
            if let (Some(sp), Some(turns)) = (&mut self.selfplay, &self.turns) {
                sp.act(t, turns.movers(t), &buf.obs, &mut head, self.venv.as_ref());
            }
            let log_probs = buf.log_probs_at(t);
            let batch = actions
                .sample_loaded(t, &head, e_len, log_probs, self.epsilon, &mut self.rng)
                .map_err(|e| EnvError::BadAction {
                    id: self.setup.env.id.clone(),
                    reason: e.to_string(),
                })?;
            let stepping = self.timing.inference(started);
            let stepped = self.venv.step(batch, step_out);
            self.timing.env(stepping);
            if let Err(e) = stepped {
                buf.steps_lost = ((t - first) * e_len) as u64;
                return Err(e);
            }
            buf.record(t, step_out, returns.as_deref_mut());
            for e in (0..e_len).filter(|&e| step_out.terminated[e] || step_out.truncated[e]) {
                self.memory.end(e);
            }
            if let Some(turns) = &mut self.turns {
                turns.credit(t, step_out, &mut buf.rewards);
            }
            if let Some(sp) = &mut self.selfplay {
                for e in (0..e_len).filter(|&e| step_out.terminated[e]) {
                    sp.new_game(e, &mut self.rng);
                }
            }
        }
        if let Some(turns) = &mut self.turns {
            turns.record_movers(buf.rows, self.venv.as_ref());
        }
        Ok(())
    }

    /// After a rollout an env failure ended: nothing of it is sent, the env
    /// is replaced, the credit goes back for the next rollout, and the next
    /// one starts afresh (a game's carried rows are dropped with it).
    fn recover(
        &mut self,
        e: EnvError,
        buf: &mut Buffers,
        returns: Option<&mut DiscountedReturn>,
    ) -> Result<(), EnvError> {
        let lost = std::mem::take(&mut buf.steps_lost);
        let venv = self.venv.as_mut();
        self.faults.recover(e, venv, lost, &mut buf.obs, returns)?;
        // The failed step may have moved some envs on and not others, and
        // the rollout is dropped: every state starts afresh, as the next
        // batch's initial states will say.
        self.memory.end_all();
        buf.carried = 0;
        if let Some(turns) = &mut self.turns {
            turns.restart();
        }
        if let Some(sp) = &mut self.selfplay {
            sp.new_games(&mut self.rng);
        }
        self.setup.metrics.env_restarts.increment(1);
        self.credits.add_permits(1);
        Ok(())
    }

    /// After a batch is sent: a game's overlap rows become the next
    /// batch's first rows.
    fn carry_overlap(&mut self, actions: &mut Actions, buf: &mut Buffers) {
        let t_len = self.setup.rollout_length;
        if let Some(turns) = &mut self.turns {
            turns.shift(t_len);
            actions.shift(t_len, self.setup.envs_per_actor);
            buf.shift(t_len);
        }
        if let Some(sp) = &mut self.selfplay {
            sp.shift(t_len);
        }
    }

    /// Resets every env (each starts a new game, seated anew).
    fn reset(&mut self, obs: &mut [f32]) -> Result<(), EnvError> {
        self.venv.reset(obs)?;
        self.memory.end_all();
        if let Some(sp) = &mut self.selfplay {
            sp.new_games(&mut self.rng);
        }
        Ok(())
    }

    /// Produces batches until stopped or the stream goes away; returns env steps taken.
    pub fn run(mut self) -> Result<u64, EnvError> {
        let mut work = self.work()?;
        let (mut sequence, mut env_steps) = (0u64, 0u64);
        let m = self.setup.metrics.clone();
        while !self.stop.is_cancelled() {
            let waiting = std::time::Instant::now();
            if !self.wait_for_credit(sequence) {
                break;
            }
            let waited = waiting.elapsed().as_secs_f64();
            m.credit_wait_seconds.record(waited);
            self.timing.waited(waited);
            self.refresh_policy();
            let Some(version) = self.policy.version() else {
                return Ok(env_steps);
            };
            self.check_lane(sequence, version);
            // One trace per rollout: acting (env steps and inference) then
            // sending; the learner's ingest continues it from the send span.
            // It links to the publish of the weights it acts with.
            let span = info_span!(
                parent: None,
                "rollout",
                actor = %self.setup.actor_id,
                sequence,
                version,
                steps = self.setup.rollout_length,
                envs = self.setup.envs_per_actor
            );
            sebulba_transport::trace::link_from_map(&span, &self.weights_trace);
            let act = info_span!(parent: &span, "act");
            let Some(steps) = act.in_scope(|| self.act_timed(&mut work, version))? else {
                continue;
            };
            env_steps += steps;
            let send = info_span!(parent: &span, "send", sequence);
            let batch = self.assemble(&mut work, sequence, version, &send);
            sequence += 1;
            let sent = self.send(batch, send);
            drop(span);
            if !sent {
                debug!("trajectory stream closed");
                break;
            }
        }
        Ok(env_steps)
    }

    /// A rollout's buffers, made once, and the envs reset.
    fn work(&mut self) -> Result<Work, EnvError> {
        let (t_len, e_len) = (self.setup.rollout_length, self.setup.envs_per_actor);
        let env = &self.setup.env;
        let rows = t_len + env.overlap_rows();
        let mut work = Work {
            actions: Actions::new(&self.setup.dist, self.venv.as_ref(), rows),
            buf: Buffers::new(t_len, rows, e_len, env.obs_dim, env.obs_dtype),
            // Kept with the envs, from their first step to the last.
            returns: self
                .setup
                .reward_gamma
                .map(|gamma| DiscountedReturn::new(gamma, e_len)),
            step_out: self.venv.new_step_out(),
            rows,
        };
        self.reset(&mut work.buf.obs)?;
        Ok(work)
    }

    /// T steps with the weights of `version`: the env steps taken, or `None`
    /// when an env failed (the rollout is dropped, the envs recovered).
    fn act_timed(&mut self, work: &mut Work, version: u64) -> Result<Option<u64>, EnvError> {
        let acting = std::time::Instant::now();
        let w = &mut *work;
        if let Err(e) = self.act(
            &mut w.actions,
            &mut w.buf,
            &mut w.step_out,
            w.returns.as_mut(),
        ) {
            self.recover(e, &mut w.buf, w.returns.as_mut())?;
            return Ok(None);
        }
        self.faults.succeeded();
        let steps = (self.setup.rollout_length * self.setup.envs_per_actor) as u64;
        let m = &self.setup.metrics;
        m.rollout_seconds.record(acting.elapsed().as_secs_f64());
        m.env_steps.increment(steps);
        m.episodes.increment(w.buf.episodes.len() as u64);
        m.version.set(version as f64);
        Ok(Some(steps))
    }

    /// The `TrajectoryBatch` of the rollout just acted (a game's seats and
    /// past moves with it), its overlap rows carried into the next one.
    fn assemble(
        &mut self,
        work: &mut Work,
        sequence: u64,
        version: u64,
        send: &tracing::Span,
    ) -> TrajectoryBatch {
        let (actions_tensor, action_masks) =
            work.actions.encode(work.rows, self.setup.envs_per_actor);
        let scaled = work.returns.is_some();
        let mut batch = work
            .buf
            .batch(&self.setup.actor_id, sequence, version, scaled);
        batch.actions = Some(actions_tensor);
        batch.action_masks = action_masks;
        batch.player_ids = self.turns.as_ref().map(|t| t.encode());
        batch.past_moves = self.selfplay.as_ref().map(|s| s.encode());
        self.carry_overlap(&mut work.actions, &mut work.buf);
        batch.trace_context = sebulba_transport::trace::context_map(send);
        batch.env_faults = self.faults.take();
        batch.actor_time = Some(self.timing.take());
        batch
    }

    /// Hands `batch` to the stream; false when the stream is gone or the
    /// actor stops.
    fn send(&self, batch: TrajectoryBatch, span: tracing::Span) -> bool {
        self.rt.block_on(
            async {
                tokio::select! {
                    r = self.out.send(batch) => r.is_ok(),
                    _ = self.stop.cancelled() => false,
                }
            }
            .instrument(span),
        )
    }
}

/// One rollout's buffers, reused from rollout to rollout.
struct Work {
    actions: Actions,
    buf: Buffers,
    /// Each env's running discounted return, when the run scales rewards.
    returns: Option<DiscountedReturn>,
    step_out: VecStepOut,
    /// T plus a game's overlap rows.
    rows: usize,
}

#[cfg(test)]
mod tests;
