//! Decoding and validation of incoming trajectory batches. Anything wrong is
//! refused with the field named and a reason category for the counters; an
//! accepted batch is internally consistent, so the update never sees bad data.

use prost::Message;
use sebulba_envs::{ActionSpace, EnvSpec, ObsDtype, Observations};
use sebulba_proto::{Tensor, TensorError, TrajectoryBatch, decode_f32, decode_i32, decode_u8};
use tonic::Code;

use crate::accounting::ActorTime;
use crate::batch::{BatchActions, DecodedBatch, Trajectory};

mod game;
mod state;
use state::decode_initial_state;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct Rejection {
    pub code: Code,
    /// Counter key: `oversize`, `trace_context`, `shape`, `non_finite`,
    /// `out_of_range`, `mask`, `unknown_actor`, `version`, `restart`, `spec`.
    pub reason: &'static str,
    pub message: String,
}

fn reject(code: Code, reason: &'static str, message: impl Into<String>) -> Rejection {
    Rejection {
        code,
        reason,
        message: message.into(),
    }
}

impl From<TensorError> for Rejection {
    fn from(e: TensorError) -> Self {
        reject(Code::InvalidArgument, "shape", e.to_string())
    }
}

/// What a batch must match: the run's spec and the learner's current state.
pub struct Expect<'a> {
    pub env: &'a EnvSpec,
    pub rollout_length: usize,
    pub envs_per_actor: usize,
    pub current_version: u64,
    /// A resumed learner before its first publish ([`crate::state::Shared::restarting`]).
    pub restarting: bool,
    /// The run scales rewards: every batch carries `discounted_returns`.
    pub scaled_rewards: bool,
    /// Some seats of a game are played by past versions
    /// (`selfplay.past_fraction` or `rule_fraction > 0`): batches may carry
    /// `past_moves`.
    pub past_selves: bool,
    /// Floats of each seat's policy state (`NetworkConfig::state_width`):
    /// with a recurrent core every batch carries `initial_state` `[E,
    /// state_width x the env's players]` (a game's seats each remember
    /// their own moves); without one (0), none may.
    pub state_width: usize,
}

fn check_finite(field: &str, values: &[f32]) -> Result<(), Rejection> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(reject(
            Code::InvalidArgument,
            "non_finite",
            format!(
                "field `{field}`: non-finite value {} at flat index {i}",
                values[i]
            ),
        )),
        None => Ok(()),
    }
}

/// Largest magnitude accepted in observations and rewards: squares and sums
/// of a whole update stay far inside f32's range (3.4e38), so a finite batch
/// cannot overflow the normalisers, the losses or the gradients.
pub const MAX_MAGNITUDE: f32 = 1e9;
/// Largest magnitude of a log-probability and of a pre-tanh action sample. A
/// policy's own samples lie within a few dozen of zero; beyond this, the
/// importance ratio `exp(new - old)` overflows.
pub const MAX_LOG_PROB: f32 = 1e4;

/// Longest episode whose statistics are accepted.
pub const MAX_EPISODE_LENGTH: u32 = 1_000_000_000;

/// Finite, and at most `bound` in magnitude.
fn check_bounded(field: &str, values: &[f32], bound: f32) -> Result<(), Rejection> {
    check_finite(field, values)?;
    match values.iter().position(|v| v.abs() > bound) {
        Some(i) => Err(reject(
            Code::InvalidArgument,
            "out_of_range",
            format!(
                "field `{field}`: {} at flat index {i} is beyond ±{bound:e}",
                values[i]
            ),
        )),
        None => Ok(()),
    }
}

/// The counter key of a value outside its range: `non_finite` for NaN and
/// infinities, else `out_of_range`.
fn range_reason(finite: bool) -> &'static str {
    if finite { "out_of_range" } else { "non_finite" }
}

fn check_flags(field: &str, values: &[u8]) -> Result<(), Rejection> {
    match values.iter().position(|&v| v > 1) {
        Some(i) => Err(reject(
            Code::InvalidArgument,
            "out_of_range",
            format!(
                "field `{field}`: value {} at flat index {i} is not 0 or 1",
                values[i]
            ),
        )),
        None => Ok(()),
    }
}

impl Expect<'_> {
    /// The largest encoding a well-formed batch of this spec can have, twice
    /// over, plus 64 KiB for ids, episode stats and trace context. Anything
    /// larger is refused before a byte of it is decoded.
    pub fn max_batch_bytes(&self) -> usize {
        // A game's batch carries its overlap rows too (and player ids, 4
        // bytes a row, inside `per_step`'s margin).
        let t = self.rollout_length + self.env.overlap_rows();
        let (e, d) = (self.envs_per_actor, self.env.obs_dim);
        let steps = t.saturating_mul(e);
        let (act, masks) = match &self.env.action_space {
            ActionSpace::Discrete { n } => (4, *n),
            ActionSpace::Box { low, .. } => (4 * low.len(), 0),
        };
        // observations (T+1) and final observations (at most one per step),
        // in the env's dtype; actions; per step:
        // Saturating: the config's ranges keep these small, but a limit must
        // never wrap around to a small number.
        let size = self.env.obs_dtype.size();
        let obs = size
            .saturating_mul(t + 1)
            .saturating_mul(e)
            .saturating_mul(d);
        let finals = size.saturating_mul(steps).saturating_mul(d);
        // log-probs, rewards and discounted returns (f32); two flags; masks;
        // one episode (two numbers) per step at most.
        let per_step = act + 12 + 2 + masks + 16;
        let states = 4usize
            .saturating_mul(e)
            .saturating_mul(self.env_state_width());
        let tensors = obs
            .saturating_add(finals)
            .saturating_add(states)
            .saturating_add(steps.saturating_mul(per_step));
        tensors.saturating_mul(2).saturating_add(64 * 1024)
    }
}

/// Decodes and validates `b` against `expect`. The actor id is checked by the caller.
pub fn decode_batch(b: &TrajectoryBatch, expect: &Expect<'_>) -> Result<DecodedBatch, Rejection> {
    check_envelope(b, expect)?;
    let (t, e) = (b.rollout_length as usize, b.envs_per_actor as usize);
    // A game's per-step arrays carry its overlap rows: R = T + K.
    let r = t + expect.env.overlap_rows();
    let d = expect.env.obs_dim as u32;
    let (ru, eu) = (r as u32, e as u32);
    let obs = (b.observations.as_ref(), "observations");
    let mut observations = decode_observations(obs, &[ru + 1, eu, d], expect.env.obs_dtype)?;
    let mut actions = decode_actions(b, &expect.env.action_space, ru)?;
    let mut action_masks = decode_masks(b, &expect.env.action_space, &actions, ru)?;
    let mut log_probs = decode_f32(b.log_probs.as_ref(), "log_probs", &[ru, eu])?;
    check_bounded("log_probs", &log_probs, MAX_LOG_PROB)?;
    // A probability is at most 1; a density (continuous actions) may exceed it.
    let discrete = matches!(actions, BatchActions::Discrete(_));
    if let Some(i) = log_probs.iter().position(|&lp| discrete && lp > 1e-4) {
        return Err(reject(
            Code::InvalidArgument,
            "out_of_range",
            format!(
                "field `log_probs`: {} at flat index {i} is a positive log-probability",
                log_probs[i]
            ),
        ));
    }
    let mut rewards = decode_f32(b.rewards.as_ref(), "rewards", &[ru, eu])?;
    check_bounded("rewards", &rewards, MAX_MAGNITUDE)?;
    let mut terminated = decode_u8(b.terminated.as_ref(), "terminated", &[ru, eu])?;
    check_flags("terminated", &terminated)?;
    let mut truncated = decode_u8(b.truncated.as_ref(), "truncated", &[ru, eu])?;
    check_flags("truncated", &truncated)?;
    let k = truncated.iter().filter(|&&x| x == 1).count() as u32;
    let finals = (b.final_observations.as_ref(), "final_observations");
    let final_observations = decode_observations(finals, &[k, d], expect.env.obs_dtype)?;
    let discounted_returns = decode_returns(b, expect, ru, eu)?;
    let (episode_returns, episode_lengths) = decode_episodes(b, r)?;
    let split = game::Split {
        observations: &mut observations,
        actions: &mut actions,
        action_masks: &mut action_masks,
        log_probs: &mut log_probs,
        rewards: &mut rewards,
        terminated: &mut terminated,
        truncated: &mut truncated,
    };
    let rows = game::Rows {
        t,
        r,
        e,
        d: d as usize,
    };
    let game = game::decode_game(b, (expect.env.players, expect.past_selves), &rows, split)?;
    let trajectory = Trajectory {
        policy_version: b.policy_version,
        rollout_length: t,
        envs_per_actor: e,
        observations,
        actions,
        action_masks,
        log_probs,
        rewards,
        terminated,
        truncated,
        final_observations,
        discounted_returns,
        episode_returns,
        episode_lengths,
        game,
        initial_state: decode_initial_state(b, expect, eu)?,
    };
    let mut decoded = DecodedBatch::unsent(&b.actor_id, b.sequence, trajectory);
    decoded.actor_time = decode_actor_time(b)?;
    Ok(decoded)
}

/// Longest actor time between two batches accepted, in seconds (a year):
/// sums over a run stay exact in f64.
pub const MAX_ACTOR_SECONDS: f64 = 3.2e7;

/// The actor's account of its time: each part finite, in [0, a year], and
/// the parts together at most the wall time (with a microsecond's rounding).
fn decode_actor_time(b: &TrajectoryBatch) -> Result<ActorTime, Rejection> {
    let Some(t) = &b.actor_time else {
        return Ok(ActorTime::default());
    };
    let parts = [
        ("wall_seconds", t.wall_seconds),
        ("env_seconds", t.env_seconds),
        ("inference_seconds", t.inference_seconds),
        ("waiting_seconds", t.waiting_seconds),
    ];
    for (name, v) in parts {
        if !(0.0..=MAX_ACTOR_SECONDS).contains(&v) {
            return Err(reject(
                Code::InvalidArgument,
                range_reason(v.is_finite()),
                format!(
                    "field `actor_time.{name}`: {v} is not a duration in [0, {MAX_ACTOR_SECONDS:e}] s"
                ),
            ));
        }
    }
    let sum = t.env_seconds + t.inference_seconds + t.waiting_seconds;
    if sum > t.wall_seconds + 1e-6 {
        return Err(reject(
            Code::InvalidArgument,
            "out_of_range",
            format!(
                "field `actor_time.wall_seconds`: {} is less than its parts together ({sum})",
                t.wall_seconds
            ),
        ));
    }
    Ok(ActorTime {
        wall_seconds: t.wall_seconds,
        env_seconds: t.env_seconds,
        inference_seconds: t.inference_seconds,
        waiting_seconds: t.waiting_seconds,
    })
}

/// Observations in the env's dtype: `f32` ones finite and bounded, bytes as
/// they are (any byte is a valid pixel).
fn decode_observations(
    (tensor, field): (Option<&Tensor>, &str),
    shape: &[u32],
    dtype: ObsDtype,
) -> Result<Observations, Rejection> {
    Ok(match dtype {
        ObsDtype::F32 => {
            let values = decode_f32(tensor, field, shape)?;
            check_bounded(field, &values, MAX_MAGNITUDE)?;
            Observations::F32(values)
        }
        ObsDtype::U8 => Observations::U8(decode_u8(tensor, field, shape)?),
    })
}

/// The envs' running discounted returns `[T, E]`: required when the run
/// scales rewards, refused when it does not (empty then).
fn decode_returns(
    b: &TrajectoryBatch,
    expect: &Expect<'_>,
    t: u32,
    e: u32,
) -> Result<Vec<f32>, Rejection> {
    match (expect.scaled_rewards, &b.discounted_returns) {
        (true, returns) => {
            let g = decode_f32(returns.as_ref(), "discounted_returns", &[t, e])?;
            check_bounded("discounted_returns", &g, MAX_MAGNITUDE)?;
            Ok(g)
        }
        (false, None) => Ok(Vec::new()),
        (false, Some(_)) => Err(reject(
            Code::FailedPrecondition,
            "spec",
            "field `discounted_returns`: this run does not scale rewards",
        )),
    }
}

/// What is checked before a tensor is decoded: the size, the trace context,
/// T x E and the version.
fn check_envelope(b: &TrajectoryBatch, expect: &Expect<'_>) -> Result<(), Rejection> {
    let (size, limit) = (b.encoded_len(), expect.max_batch_bytes());
    if size > limit {
        return Err(reject(
            Code::ResourceExhausted,
            "oversize",
            format!(
                "the whole `message`: {size} bytes, over the {limit}-byte limit for {}x{} batches of {}",
                expect.rollout_length, expect.envs_per_actor, expect.env.id
            ),
        ));
    }
    if let Err(e) = sebulba_transport::trace::check_context_map(&b.trace_context) {
        return Err(reject(
            Code::InvalidArgument,
            "trace_context",
            format!("field `trace_context`: {e}"),
        ));
    }
    let (t, e) = (b.rollout_length as usize, b.envs_per_actor as usize);
    if t != expect.rollout_length || e != expect.envs_per_actor {
        return Err(reject(
            Code::FailedPrecondition,
            "spec",
            format!(
                "fields `rollout_length`/`envs_per_actor`: got {t}x{e}, the run spec says {}x{}",
                expect.rollout_length, expect.envs_per_actor
            ),
        ));
    }
    if b.policy_version > expect.current_version {
        // A resumed learner cannot know every version its predecessor
        // published (the parameter server may have restarted too): counted
        // apart from a client's error.
        let (reason, whose) = match expect.restarting {
            true => ("restart", "the learner resumed below it"),
            false => ("version", "from the future"),
        };
        return Err(reject(
            Code::InvalidArgument,
            reason,
            format!(
                "field `policy_version`: {} is {whose} (learner is at {})",
                b.policy_version, expect.current_version
            ),
        ));
    }
    Ok(())
}

/// The actions of `rows` steps.
fn decode_actions(
    b: &TrajectoryBatch,
    space: &ActionSpace,
    rows: u32,
) -> Result<BatchActions, Rejection> {
    let (tu, eu) = (rows, b.envs_per_actor);
    match space {
        ActionSpace::Discrete { n } => {
            let a = decode_i32(b.actions.as_ref(), "actions", &[tu, eu])?;
            if let Some(i) = a.iter().position(|&x| x < 0 || x as usize >= *n) {
                return Err(reject(
                    Code::InvalidArgument,
                    "out_of_range",
                    format!(
                        "field `actions`: action {} at flat index {i} is outside 0..{n}",
                        a[i]
                    ),
                ));
            }
            Ok(BatchActions::Discrete(a))
        }
        ActionSpace::Box { low, .. } => {
            let a = decode_f32(b.actions.as_ref(), "actions", &[tu, eu, low.len() as u32])?;
            check_bounded("actions", &a, MAX_LOG_PROB)?;
            Ok(BatchActions::Continuous(a))
        }
    }
}

/// The action masks, when sent: flags, at least one allowed action per step,
/// and the taken action among them.
fn decode_masks(
    b: &TrajectoryBatch,
    space: &ActionSpace,
    actions: &BatchActions,
    rows: u32,
) -> Result<Option<Vec<u8>>, Rejection> {
    let (tu, eu) = (rows, b.envs_per_actor);
    let (m, n, taken) = match (&b.action_masks, space, actions) {
        (None, _, _) => return Ok(None),
        (Some(m), ActionSpace::Discrete { n }, BatchActions::Discrete(taken)) => (m, *n, taken),
        (Some(_), _, _) => {
            return Err(reject(
                Code::FailedPrecondition,
                "spec",
                "field `action_masks`: masks need a discrete action space",
            ));
        }
    };
    let m = decode_u8(Some(m), "action_masks", &[tu, eu, n as u32])?;
    check_flags("action_masks", &m)?;
    for (i, &a) in taken.iter().enumerate() {
        let row = &m[i * n..(i + 1) * n];
        if row.iter().all(|&x| x == 0) {
            return Err(reject(
                Code::InvalidArgument,
                "mask",
                format!("field `action_masks`: step {i} allows no action"),
            ));
        }
        if row[a as usize] == 0 {
            return Err(reject(
                Code::InvalidArgument,
                "mask",
                format!("field `action_masks`: step {i} forbids the taken action {a}"),
            ));
        }
    }
    Ok(Some(m))
}

/// Finished-episode statistics: finite returns, lengths of at least one step.
fn decode_episodes(b: &TrajectoryBatch, rows: usize) -> Result<(Vec<f64>, Vec<u32>), Rejection> {
    // An episode ends at a step: more of them than steps cannot be.
    let steps = rows * b.envs_per_actor as usize;
    if b.episodes.len() > steps {
        return Err(reject(
            Code::InvalidArgument,
            "shape",
            format!(
                "field `episodes`: {} entries for {steps} steps",
                b.episodes.len()
            ),
        ));
    }
    let mut returns = Vec::with_capacity(b.episodes.len());
    let mut lengths = Vec::with_capacity(b.episodes.len());
    for (i, ep) in b.episodes.iter().enumerate() {
        // Each reward is at most MAX_MAGNITUDE, so a return is at most that
        // times the length; an episode is at most MAX_EPISODE_LENGTH steps.
        let bound = f64::from(MAX_MAGNITUDE) * f64::from(ep.length);
        let out_of_range =
            ep.length == 0 || ep.length > MAX_EPISODE_LENGTH || ep.episode_return.abs() > bound;
        if !ep.episode_return.is_finite() || out_of_range {
            return Err(reject(
                Code::InvalidArgument,
                range_reason(ep.episode_return.is_finite()),
                format!(
                    "field `episodes[{i}]`: return {} length {}",
                    ep.episode_return, ep.length
                ),
            ));
        }
        returns.push(ep.episode_return);
        lengths.push(ep.length);
    }
    Ok((returns, lengths))
}

#[cfg(test)]
mod tests;
