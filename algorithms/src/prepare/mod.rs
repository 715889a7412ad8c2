//! Turning an update's batches into training data: reward-scale statistics
//! first; then, batch by batch, the values of its T+1
//! observation rows and its final observations in one forward pass and GAE
//! over that batch's slices (V-trace for a lagged batch when
//! `ppo.lag_correction = vtrace`); last, advantages normalised once over the
//! whole update. The observation statistics the values use are the ones the actors
//! acted with; [`fold_obs_stats`] moves them on after SGD (`ppo::train`).

use crate::data::Lag;
use crate::data::{SeatRows, Sequences, UpdateData, normalize_where};
use crate::engine::Steps;
use crate::gae;
use crate::gae_players::{PlayerGaeInput, compute_player_gae};
use crate::reward_scale::RewardScaler;
use crate::trainer::Trainer;
use crate::trajectory::{BatchActions, GameRows, Trajectory};
use crate::vtrace::{VtraceOut, VtraceParams, compute_vtrace};
use sebulba_core::config::{AdvantageNorm, LagCorrection, RunConfig};
use sebulba_core::model::RunningMeanStd;
use sebulba_envs::{ObsDtype, Observations, concat_f32};
use sebulba_fused::Batching;

/// Statistics the learner carries from update to update.
pub struct Normalizers {
    /// Observation mean/var, when `network.obs_norm` is on.
    pub obs: Option<RunningMeanStd>,
    /// Discounted-return std, when `ppo.scale_rewards` is on.
    pub rewards: Option<RewardScaler>,
}

impl Normalizers {
    pub fn new(cfg: &RunConfig, obs_dim: usize) -> Self {
        Self {
            obs: cfg.network.obs_norm.then(|| RunningMeanStd::new(obs_dim)),
            rewards: cfg.ppo.scale_rewards.then(RewardScaler::default),
        }
    }
}

/// What `prepare` learned beside the training data.
pub struct Prepared {
    pub data: UpdateData,
    pub explained_variance: f64,
    pub lag: Lag,
    pub episode_returns: Vec<f64>,
    pub episode_lengths: Vec<u32>,
    /// The factor rewards were multiplied by (1 without reward scaling).
    pub reward_scale: f32,
    /// Batches whose advantages and targets V-trace corrected for their lag.
    pub lag_corrected: usize,
    /// A game's moves made by past versions or rule players: out of the loss.
    pub past_moves: u64,
}

pub fn prepare(
    batches: &[Trajectory],
    version: u64,
    trainer: &mut Trainer,
    norms: &mut Normalizers,
    cfg: &RunConfig,
    obs_dim: usize,
) -> Prepared {
    let reward_scale = observe_rewards(batches, norms);
    let n: usize = batches
        .iter()
        .map(|b| b.rollout_length * b.envs_per_actor)
        .sum();
    let mut out = Collected::with_capacity(n, obs_dim, batches);
    // A network with memory reads every move of a game in its seat's
    // sequence: others' moves stay, out of the loss.
    out.keep_others = matches!(trainer.batching, Batching::Sequences { .. });
    let mut lags = Vec::with_capacity(batches.len());
    for b in batches {
        let lag = version.saturating_sub(b.policy_version);
        out.push(b, lag, trainer, reward_scale, cfg);
        lags.push(lag);
    }
    let mut data = out.data;
    if out.lag_corrected > 0 {
        data.weights = Some(out.weights);
    }
    if !out.sequences_whole {
        data.sequences = None;
    }
    let explained_variance = explained_variance(&data.old_values, &data.returns);
    if cfg.ppo.adv_norm == AdvantageNorm::Update {
        let counted: Vec<bool> = (0..data.len()).map(|i| data.trains(i)).collect();
        normalize_where(&mut data.advantages, |i| counted[i]);
    }
    Prepared {
        data,
        explained_variance,
        lag: Lag::of(&lags),
        episode_returns: out.episode_returns,
        episode_lengths: out.episode_lengths,
        reward_scale,
        lag_corrected: out.lag_corrected,
        past_moves: out.past_moves,
    }
}

/// What an update's metrics line reports of `batches` besides training
/// data: their lag behind `version` and the episodes they finished. For an
/// algorithm that trains on something else (DQN's replay memory); `data` is
/// empty.
pub fn bookkeeping(batches: &[Trajectory], version: u64, obs_dim: usize) -> Prepared {
    let lags: Vec<u64> = batches
        .iter()
        .map(|b| version.saturating_sub(b.policy_version))
        .collect();
    let mut out = Collected::with_capacity(0, obs_dim, batches);
    for b in batches {
        out.episode_returns.extend_from_slice(&b.episode_returns);
        out.episode_lengths.extend_from_slice(&b.episode_lengths);
    }
    Prepared {
        data: out.data,
        explained_variance: 0.0,
        lag: Lag::of(&lags),
        episode_returns: out.episode_returns,
        episode_lengths: out.episode_lengths,
        reward_scale: 1.0,
        lag_corrected: 0,
        past_moves: 0,
    }
}

/// Folds the update's observations into the normaliser's statistics and sets
/// them on the model: after SGD, so the update itself sees the statistics its
/// batches were acted with, and the new weights carry the new ones.
pub fn fold_obs_stats(
    batches: &[Trajectory],
    trainer: &mut Trainer,
    norms: &mut Normalizers,
    d: usize,
) {
    if let Some(stats) = &mut norms.obs {
        for b in batches {
            stats.update(
                &b.observations
                    .to_f32(0..b.rollout_length * b.envs_per_actor * d),
            );
        }
        trainer.set_obs_stats(stats);
    }
}

/// Folds the update's discounted returns into the reward scale; returns the
/// reward factor.
fn observe_rewards(batches: &[Trajectory], norms: &mut Normalizers) -> f32 {
    match &mut norms.rewards {
        Some(s) => {
            for b in batches {
                s.observe(&b.discounted_returns);
            }
            s.factor()
        }
        None => 1.0,
    }
}

/// The update's training data, batch after batch.
struct Collected {
    data: UpdateData,
    /// Mask width, when any batch has masks (a batch without allows every action).
    mask_width: Option<usize>,
    episode_returns: Vec<f64>,
    episode_lengths: Vec<u32>,
    lag_corrected: usize,
    past_moves: u64,
    /// Policy-loss weights, kept under `ppo.lag_correction = vtrace`.
    weights: Vec<f32>,
    /// Every batch so far appended whole env sequences of one shape.
    sequences_whole: bool,
    /// A game's moves by others than the newest version are kept (flagged
    /// in the seats' `others`) rather than left out.
    keep_others: bool,
}

impl Collected {
    fn with_capacity(n: usize, obs_dim: usize, batches: &[Trajectory]) -> Self {
        let mask_width = batches.iter().find_map(|b| {
            b.action_masks
                .as_ref()
                .map(|m| m.len() / (b.rollout_length * b.envs_per_actor).max(1))
        });
        let dtype = batches
            .first()
            .map_or(ObsDtype::F32, |b| b.observations.dtype());
        let continuous = matches!(
            batches.first().map(|b| &b.actions),
            Some(BatchActions::Continuous(_))
        );
        Self {
            data: UpdateData {
                obs_dim,
                observations: Observations::with_capacity(dtype, n * obs_dim),
                actions: if continuous {
                    BatchActions::Continuous(Vec::new())
                } else {
                    BatchActions::Discrete(Vec::with_capacity(n))
                },
                masks: mask_width.map(|w| Vec::with_capacity(n * w)),
                old_log_probs: Vec::with_capacity(n),
                advantages: Vec::with_capacity(n),
                returns: Vec::with_capacity(n),
                old_values: Vec::with_capacity(n),
                weights: None,
                sequences: None,
            },
            mask_width,
            episode_returns: Vec::new(),
            episode_lengths: Vec::new(),
            lag_corrected: 0,
            past_moves: 0,
            weights: Vec::new(),
            sequences_whole: true,
            keep_others: false,
        }
    }

    /// Values and GAE of batch `b`, `lag` versions behind the policy
    /// trained (V-trace instead of GAE for a lagged batch when
    /// `ppo.lag_correction = vtrace`), appended with its samples.
    fn push(
        &mut self,
        b: &Trajectory,
        lag: u64,
        trainer: &mut Trainer,
        reward_scale: f32,
        cfg: &RunConfig,
    ) {
        let te = b.rollout_length * b.envs_per_actor;
        // One forward pass: the T+1 rows, a game's overlap rows, then the
        // final observations.
        let none = Observations::default();
        let overlap = b.game.as_ref().map_or(&none, |g| &g.overlap_observations);
        let rows = concat_f32(&[&b.observations, overlap, &b.final_observations]);
        let (starts, cut) = (b.starts(), b.cut_rows());
        // A game's overlap rows continue its sequence, before the final
        // observations.
        let k = b.game.as_ref().map_or(0, |g| g.overlap_terminated.len());
        let steps = b.rollout_length + 1 + k / b.envs_per_actor.max(1);
        let rows_read = Steps::sequence(&rows, b.sequence(steps, &starts, &cut));
        let values = trainer.values(&rows_read);
        let (v, finals) = values.split_at(te + b.envs_per_actor + k);
        let mut final_values = vec![0.0f32; te];
        let truncated = b.truncated.iter().enumerate().filter(|(_, t)| **t == 1);
        for ((i, _), &fv) in truncated.zip(finals) {
            final_values[i] = fv;
        }
        let scaled: Vec<f32> = b.rewards.iter().map(|&r| r * reward_scale).collect();
        let input = gae::GaeInput {
            rollout_length: b.rollout_length,
            envs_per_actor: b.envs_per_actor,
            rewards: &scaled,
            terminated: &b.terminated,
            truncated: &b.truncated,
            values: v,
            final_values: &final_values,
        };
        let (mut adv, mut ret) = (vec![0.0f32; te], vec![0.0f32; te]);
        let mut weights = vec![1.0f32; te];
        let p = &cfg.ppo;
        // Games: per-player GAE (config refuses V-trace for them).
        let game = b.game.is_some();
        let corrected =
            (!game && lag > 0 && p.lag_correction == LagCorrection::Vtrace).then(|| {
                let out = VtraceOut {
                    advantages: &mut adv,
                    returns: &mut ret,
                    weights: &mut weights,
                };
                vtrace(b, &starts, trainer, (&input, p), out)
            });
        if let Some(g) = &b.game {
            player_gae(b, g, &scaled, v, p, &mut adv, &mut ret);
        } else if corrected.is_none() {
            gae::compute_gae(&input, p.gamma, p.gae_lambda, &mut adv, &mut ret);
        }
        self.lag_corrected += usize::from(corrected.is_some());
        if p.lag_correction == LagCorrection::Vtrace {
            self.weights.extend_from_slice(&weights);
        }
        let log_probs = corrected.as_deref().unwrap_or(&b.log_probs);
        self.append(b, &adv, &ret, v, log_probs);
        self.append_sequences(b, &starts);
    }

    /// Appends batch `b`'s trained samples with their advantages, returns,
    /// values and behaviour log-probabilities: every row but a game's moves
    /// made by past versions (counted in `past_moves`).
    fn append(
        &mut self,
        b: &Trajectory,
        adv: &[f32],
        ret: &[f32],
        values: &[f32],
        log_probs: &[f32],
    ) {
        let te = b.rollout_length * b.envs_per_actor;
        let d = self.data.obs_dim;
        let past = b.game.as_ref().map_or(&[][..], |g| &g.past_moves);
        self.past_moves += count(past) as u64;
        let past = if self.keep_others { &[][..] } else { past };
        let dropped = count(past);
        let out = &mut self.data;
        extend_rows(&mut out.advantages, adv, 1, past);
        extend_rows(&mut out.returns, ret, 1, past);
        extend_rows(&mut out.old_values, &values[..te], 1, past);
        extend_obs_rows(&mut out.observations, &b.observations, te, d, past);
        match (&mut out.actions, &b.actions) {
            (BatchActions::Discrete(all), BatchActions::Discrete(a)) => {
                extend_rows(all, a, 1, past)
            }
            (BatchActions::Continuous(all), BatchActions::Continuous(a)) => {
                extend_rows(all, a, a.len() / te.max(1), past)
            }
            _ => unreachable!("every batch of a run has the run's action space"),
        }
        if let (Some(all), Some(w)) = (&mut out.masks, self.mask_width) {
            match &b.action_masks {
                Some(m) => extend_rows(all, m, w, past),
                None => all.extend(std::iter::repeat_n(1u8, (te - dropped) * w)),
            }
        }
        extend_rows(&mut out.old_log_probs, log_probs, 1, past);
        self.episode_returns.extend_from_slice(&b.episode_returns);
        self.episode_lengths.extend_from_slice(&b.episode_lengths);
    }
}

impl Collected {
    /// Batch `b`'s env sequences after the ones before (`starts`: its
    /// [`Trajectory::starts`]); the data are no longer whole sequences once
    /// a batch's shape differs, or a game's moves made by others than the
    /// newest version were left out (without memory).
    fn append_sequences(&mut self, b: &Trajectory, starts: &[u8]) {
        let (t, e, p) = (b.rollout_length, b.envs_per_actor, b.players());
        let past = b.game.as_ref().map_or(&[][..], |g| &g.past_moves);
        let whole = self.keep_others || count(past) == 0;
        let seqs = self.data.sequences.get_or_insert_with(|| Sequences {
            steps: t,
            envs: e,
            starts: Vec::new(),
            initial: b.initial_state.select(0..0),
            seats: b.game.as_ref().map(|_| SeatRows {
                players: p,
                movers: Vec::new(),
                others: Vec::new(),
            }),
        });
        let shape = (seqs.steps, seqs.envs, seqs.players(), seqs.initial.width());
        let fits = shape == (t, e, p, b.initial_state.width());
        if !(whole && fits && self.sequences_whole) {
            self.sequences_whole = false;
            return;
        }
        seqs.starts.extend_from_slice(&starts[..t * e]);
        seqs.initial.extend(&b.initial_state);
        if let (Some(s), Some(g)) = (&mut seqs.seats, &b.game) {
            s.movers.extend_from_slice(&g.player_ids[..t * e]);
            match past.is_empty() {
                true => s.others.extend(std::iter::repeat_n(0, t * e)),
                false => s.others.extend_from_slice(past),
            }
        }
    }
}

/// V-trace's advantages, targets and weights of batch `b` (`starts`: its
/// [`Trajectory::starts`]) into `out`, against pi, the policy this update
/// starts from; returns pi's log-probabilities, which replace the batch's
/// as the PPO ratio's reference.
fn vtrace(
    b: &Trajectory,
    starts: &[u8],
    trainer: &mut Trainer,
    (input, p): (&gae::GaeInput<'_>, &sebulba_core::config::PpoConfig),
    out: VtraceOut<'_>,
) -> Vec<f32> {
    let d = trainer.obs_dim();
    let obs = b
        .observations
        .to_f32(0..b.rollout_length * b.envs_per_actor * d);
    let steps = Steps::sequence(&obs, b.sequence(b.rollout_length, starts, &[]));
    let log_pi = trainer.log_probs(&steps, &b.actions, b.action_masks.as_deref());
    let log_ratios: Vec<f32> = log_pi
        .iter()
        .zip(&b.log_probs)
        .map(|(p, m)| p - m)
        .collect();
    let params = VtraceParams {
        gamma: p.gamma,
        lambda: p.gae_lambda,
        rho_clip: p.vtrace_rho_clip,
        c_clip: p.vtrace_c_clip,
    };
    compute_vtrace(input, &log_ratios, params, out);
    log_pi
}

/// Moves flagged in `past`.
fn count(past: &[u8]) -> usize {
    past.iter().filter(|&&x| x == 1).count()
}

/// Appends the rows of `src` (`width` values each) not flagged in `past`
/// (every row when `past` is empty).
fn extend_rows<T: Copy>(out: &mut Vec<T>, src: &[T], width: usize, past: &[u8]) {
    if past.is_empty() {
        out.extend_from_slice(src);
        return;
    }
    for (row, &p) in src.chunks_exact(width.max(1)).zip(past) {
        if p == 0 {
            out.extend_from_slice(row);
        }
    }
}

/// Appends the first `rows` observation rows of `src` (`d` values each) not
/// flagged in `past`, in their dtype.
fn extend_obs_rows(out: &mut Observations, src: &Observations, rows: usize, d: usize, past: &[u8]) {
    if past.is_empty() {
        out.extend_from(src, 0..rows * d);
        return;
    }
    for (k, _) in past.iter().enumerate().take(rows).filter(|(_, p)| **p == 0) {
        out.extend_from(src, k * d..(k + 1) * d);
    }
}

/// Advantages and returns of a game's batch: each player's moves bootstrap
/// from its own next move (`gae_players`), over the trained rows and the
/// overlap. Validation ran the same recursion, so it cannot fail here; if it
/// ever did, the batch's advantages stay 0 and the error is logged.
fn player_gae(
    b: &Trajectory,
    g: &GameRows,
    scaled_rewards: &[f32],
    values: &[f32],
    p: &sebulba_core::config::PpoConfig,
    adv: &mut [f32],
    ret: &mut [f32],
) {
    let n = g.player_ids.len();
    let mut rewards = scaled_rewards.to_vec();
    rewards.resize(n, 0.0);
    let terminated = g.all_terminated(&b.terminated);
    let input = PlayerGaeInput {
        trained_rows: b.rollout_length,
        rows: n / b.envs_per_actor.max(1),
        envs_per_actor: b.envs_per_actor,
        players: usize::from(g.player_ids.iter().copied().max().unwrap_or(0)) + 1,
        player_ids: &g.player_ids,
        rewards: &rewards,
        terminated: &terminated,
        values: &values[..n],
    };
    if let Err(e) = compute_player_gae(&input, p.gamma, p.gae_lambda, adv, ret) {
        tracing::error!(policy_version = b.policy_version, "per-player GAE: {e}");
        adv.fill(0.0);
        ret.copy_from_slice(&values[..adv.len()]);
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
mod tests;
