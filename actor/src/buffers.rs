//! One rollout's arrays ([`Buffers`]), allocated once and reused.

use sebulba_envs::{DiscountedReturn, ObsDtype, Observations, VecStepOut};
use sebulba_proto::{EpisodeStats, Tensor, TrajectoryBatch, encode_f32, encode_u8};

/// One rollout's arrays, reused from rollout to rollout: R+1 observation rows
/// (R = T, or T + K for a game; row 0 is where the last rollout ended, or
/// the first carried row), per-step log-probabilities,
/// rewards, discounted returns and episode-end flags, the true final
/// observation of each truncated step, and the episodes that finished. The
/// observation rows are kept in the env's dtype (a byte image as bytes); the
/// current observation, which the policy reads, is `f32`.
pub(crate) struct Buffers {
    t_len: usize,
    /// Rows per batch: T plus a game's overlap.
    pub(crate) rows: usize,
    /// Rows at the front already acted (a game's overlap of the last batch).
    pub(crate) carried: usize,
    e_len: usize,
    d: usize,
    /// The current observation of every env, `[E * obs_dim]`.
    pub(crate) obs: Vec<f32>,
    obs_rows: Observations,
    log_probs: Vec<f32>,
    pub(crate) rewards: Vec<f32>,
    /// Each env's running discounted return after each step (reward scaling).
    returns: Vec<f32>,
    terminated: Vec<u8>,
    truncated: Vec<u8>,
    final_obs: Observations,
    pub(crate) episodes: Vec<EpisodeStats>,
    /// Env steps taken by a rollout an env failure ended (not sent).
    pub(crate) steps_lost: u64,
    /// Each env's policy state before the rollout's first row (`[E *
    /// width]`, every seat's in a game; empty for a network without memory).
    initial_state: Vec<f32>,
    /// A game's states before its first overlap row (row T): the next
    /// batch's initial states, since that row is its first.
    overlap_state: Vec<f32>,
}

impl Buffers {
    pub(crate) fn new(t_len: usize, rows: usize, e_len: usize, d: usize, dtype: ObsDtype) -> Self {
        let n = rows * e_len;
        Self {
            t_len,
            rows,
            carried: 0,
            e_len,
            d,
            obs: vec![0.0; e_len * d],
            obs_rows: Observations::zeros(dtype, (rows + 1) * e_len * d),
            log_probs: vec![0.0; n],
            rewards: vec![0.0; n],
            returns: vec![0.0; n],
            terminated: vec![0; n],
            truncated: vec![0; n],
            final_obs: Observations::with_capacity(dtype, 0),
            episodes: Vec::new(),
            steps_lost: 0,
            initial_state: Vec::new(),
            overlap_state: Vec::new(),
        }
    }

    /// A new rollout starts from the current observations and each env's
    /// policy state `state` (`[E * width]`), after the carried rows;
    /// returns its first row to act.
    pub(crate) fn start(&mut self, state: &[f32]) -> usize {
        if self.carried == 0 {
            self.obs_rows.write(0, &self.obs);
            self.initial_state.clear();
            self.initial_state.extend_from_slice(state);
        }
        self.final_obs.clear();
        self.episodes.clear();
        self.carried
    }

    /// Before acting row `t` with the policy states `state`: a game's first
    /// overlap row is the next batch's first, so its states are kept.
    pub(crate) fn before_row(&mut self, t: usize, state: &[f32]) {
        if t == self.t_len && self.rows > self.t_len {
            self.overlap_state.clear();
            self.overlap_state.extend_from_slice(state);
        }
    }

    /// Rows `from..` (and the observation row after them) to the front,
    /// as the next rollout's carried rows, with the states before them.
    pub(crate) fn shift(&mut self, from: usize) {
        std::mem::swap(&mut self.initial_state, &mut self.overlap_state);
        use crate::turns::shift_rows;
        let e = self.e_len;
        self.obs_rows.copy_within(from * e * self.d);
        shift_rows(&mut self.log_probs, from, e);
        shift_rows(&mut self.rewards, from, e);
        shift_rows(&mut self.returns, from, e);
        shift_rows(&mut self.terminated, from, e);
        shift_rows(&mut self.truncated, from, e);
        self.carried = self.rows - from;
    }

    pub(crate) fn log_probs_at(&mut self, t: usize) -> &mut [f32] {
        &mut self.log_probs[t * self.e_len..(t + 1) * self.e_len]
    }

    /// What step `t` of every env returned, and the returns it makes.
    pub(crate) fn record(
        &mut self,
        t: usize,
        out: &VecStepOut,
        returns: Option<&mut DiscountedReturn>,
    ) {
        let (e_len, d) = (self.e_len, self.d);
        let row = t * e_len;
        self.rewards[row..row + e_len].copy_from_slice(&out.reward);
        if let Some(g) = returns {
            g.step(
                &out.reward,
                &out.terminated,
                &mut self.returns[row..row + e_len],
            );
        }
        for e in 0..e_len {
            self.terminated[row + e] = out.terminated[e] as u8;
            self.truncated[row + e] = out.truncated[e] as u8;
            if out.truncated[e] {
                self.final_obs.push_f32(&out.final_obs[e * d..(e + 1) * d]);
            }
        }
        self.episodes
            .extend(out.episodes.iter().map(|s| EpisodeStats {
                episode_return: s.episode_return,
                length: s.length,
            }));
        self.obs.copy_from_slice(&out.obs);
        self.obs_rows.write((t + 1) * e_len * d, &self.obs);
    }

    /// The rollout as a batch (without actions, masks and trace context);
    /// with the discounted returns when `with_returns`.
    pub(crate) fn batch(
        &self,
        actor_id: &str,
        sequence: u64,
        version: u64,
        with_returns: bool,
    ) -> TrajectoryBatch {
        let (t, e, d) = (self.t_len, self.e_len, self.d);
        let r = self.rows;
        TrajectoryBatch {
            actor_id: actor_id.to_string(),
            sequence,
            policy_version: version,
            rollout_length: t as u32,
            envs_per_actor: e as u32,
            observations: Some(encode_obs(&[r + 1, e, d], &self.obs_rows)),
            log_probs: Some(encode_f32(&[r, e], &self.log_probs)),
            rewards: Some(encode_f32(&[r, e], &self.rewards)),
            terminated: Some(encode_u8(&[r, e], &self.terminated)),
            truncated: Some(encode_u8(&[r, e], &self.truncated)),
            final_observations: Some(encode_obs(&[self.final_obs.len() / d, d], &self.final_obs)),
            episodes: self.episodes.clone(),
            discounted_returns: with_returns.then(|| encode_f32(&[r, e], &self.returns)),
            initial_state: (!self.initial_state.is_empty())
                .then(|| encode_f32(&[e, self.initial_state.len() / e], &self.initial_state)),
            ..Default::default()
        }
    }
}

/// Observations on the wire in their dtype.
fn encode_obs(shape: &[usize], obs: &Observations) -> Tensor {
    match obs {
        Observations::F32(v) => encode_f32(shape, v),
        Observations::U8(v) => encode_u8(shape, v),
    }
}

#[cfg(test)]
mod tests;
