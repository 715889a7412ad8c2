//! What one update trains on and what one step reports: the training data
//! of an update ([`UpdateData`], its rows kept as the actors' env sequences,
//! [`Sequences`]), one minibatch step's input ([`Minibatch`]) and
//! statistics ([`StepStats`], over [`LossTerms`]), and advantage normalisation. Shared by the
//! preparation, the PPO loop and both update engines.

use crate::trajectory::BatchActions;
use sebulba_core::config::PpoConfig;
use sebulba_envs::Observations;
use sebulba_fused::PolicyState;

/// Training data of one update (N samples, batch after batch, each batch's
/// T steps of E envs time-major, unless a game's past moves were left out:
/// then `sequences` is `None`); advantages already normalised when
/// `adv_norm = update`.
#[derive(Debug, Clone)]
pub struct UpdateData {
    pub obs_dim: usize,
    /// `[N * obs_dim]`, in the env's dtype (widened as a minibatch is read).
    pub observations: Observations,
    pub actions: BatchActions,
    /// `[N * n]` allowed actions, when the env has masks.
    pub masks: Option<Vec<u8>>,
    pub old_log_probs: Vec<f32>,
    pub advantages: Vec<f32>,
    pub returns: Vec<f32>,
    /// The critic's values the returns were computed with.
    pub old_values: Vec<f32>,
    /// Each sample's weight in the policy loss, applied to its advantage
    /// after normalisation: V-trace's truncated importance weights
    /// (`ppo.lag_correction = vtrace`); `None` when every weight is 1.
    pub weights: Option<Vec<f32>>,
    /// The rows as env sequences; `None` when they are not whole sequences
    /// (a game's moves made by past versions left out, rows drawn from a
    /// replay memory).
    pub sequences: Option<Sequences>,
}

/// The rows of an [`UpdateData`] as the actors' env sequences: `batches`
/// batches of `steps` steps of `envs` envs, row `(b * steps + t) * envs + e`
/// being env sequence `b * envs + e`'s step `t`. What a network with memory
/// trains on, each sequence from its initial state.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequences {
    /// T
    pub steps: usize,
    /// E
    pub envs: usize,
    /// `[N]`: 1 where an env's episode starts at that row (its state zeroed
    /// first).
    pub starts: Vec<u8>,
    /// Each sequence's state before its first row (`batches * envs` states;
    /// in a game, each of `players` seats' state in turn).
    pub initial: PolicyState,
    /// A turn-based game's movers; `None`: one player.
    pub seats: Option<SeatRows>,
}

/// Whose move each row of a game's sequences is: each seat remembers its
/// own moves only ([`sebulba_fused::Seats`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SeatRows {
    pub players: usize,
    /// `[N]` the seat to move at each row.
    pub movers: Vec<u8>,
    /// `[N]` 1 where a past version or a rule player made the row's move:
    /// kept in its seat's sequence, out of the loss.
    pub others: Vec<u8>,
}

impl Sequences {
    /// How many sequences (batches x E).
    pub fn len(&self) -> usize {
        self.initial.envs()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Lanes per sequence: a game's players, else 1.
    pub fn players(&self) -> usize {
        self.seats.as_ref().map_or(1, |s| s.players)
    }

    /// The seats of `rows` (`[steps * envs]` rows, in order), for the
    /// network's [`sebulba_fused::Sequence`].
    pub fn seats_of<'a>(&'a self, rows: &'a [u8]) -> Option<sebulba_fused::Seats<'a>> {
        self.seats.as_ref().map(|s| sebulba_fused::Seats {
            players: s.players,
            movers: rows,
        })
    }

    /// The row of sequence `s` at step `t`.
    pub fn row(&self, s: usize, t: usize) -> usize {
        self.chunk_row(s, self.steps, t)
    }

    /// The row of chunk `u` at step `t`, the sequences cut into chunks of
    /// `len` steps (a divisor of `steps`). A batch's T steps are its T /
    /// len chunks' rows in turn, so chunk `u` is `u / envs`-th group of
    /// `len` steps' env `u % envs`, and with `len = steps` a chunk is a
    /// sequence.
    pub fn chunk_row(&self, u: usize, len: usize, t: usize) -> usize {
        let (g, e) = (u / self.envs.max(1), u % self.envs.max(1));
        (g * len + t) * self.envs + e
    }
}

impl UpdateData {
    pub fn len(&self) -> usize {
        self.old_log_probs.len()
    }

    /// Whether sample `i` is in the loss: every sample but a game's moves
    /// by others than the newest version, which a network with memory keeps
    /// in their seats' sequences (without memory they are left out).
    pub fn trains(&self, i: usize) -> bool {
        let others = self.sequences.as_ref().and_then(|s| s.seats.as_ref());
        others.is_none_or(|g| g.others.get(i).is_none_or(|&o| o == 0))
    }

    /// How many samples are out of the loss (a game's moves by others, kept
    /// for their seats' sequences).
    pub fn len_out_of_loss(&self) -> usize {
        let others = self.sequences.as_ref().and_then(|s| s.seats.as_ref());
        others.map_or(0, |g| g.others.iter().filter(|&&o| o != 0).count())
    }

    /// How many of samples `idx` are in the loss.
    pub fn trained_in(&self, idx: &[usize]) -> usize {
        idx.iter().filter(|&&i| self.trains(i)).count()
    }
    pub fn is_empty(&self) -> bool {
        self.old_log_probs.is_empty()
    }
}

/// One minibatch step's input: samples `idx` of `data` (and, when they are
/// whole env sequences, which: `sequences`) with their advantages
/// (normalised per minibatch when asked) and, for continuous actions, the
/// standard-normal draws of the sampled entropy estimate (`[idx.len() * width]`;
/// empty for discrete actions). Drawn once for the whole minibatch, so every
/// engine and device count sees the same numbers.
pub struct Minibatch<'a> {
    pub data: &'a UpdateData,
    pub idx: &'a [usize],
    /// The sequences of `data.sequences` whose rows `idx` holds, time-major
    /// (`idx[t * sequences.len() + k]` is sequence `sequences[k]`'s step
    /// `t`); empty when rows were drawn one by one. An engine that shards a
    /// minibatch over devices or threads must split it by sequence, not
    /// by contiguous rows, once a network reads them in time order.
    pub sequences: &'a [usize],
    /// The states the sequences (or chunks) of the cut start from, indexed
    /// by the numbers in `sequences` (empty for rows).
    pub states: &'a PolicyState,
    pub adv: &'a [f32],
    pub noise: &'a [f32],
    pub lr: f64,
    /// The gradient is scaled to this global norm when above it.
    pub max_grad_norm: f64,
    pub loss: Loss<'a>,
}

/// What a minibatch step minimises.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss<'a> {
    /// PPO: clipped surrogate (ratio clip range `clip`, after annealing),
    /// value loss and entropy bonus by `cfg`'s coefficients; no step past
    /// `cfg.target_kl`.
    Ppo { cfg: &'a PpoConfig, clip: f64 },
    /// DQN: the Huber loss (threshold `huber_delta`) of `Q(s, a) - y`, the
    /// policy head's outputs read as Q-values and `y` in `data.returns`.
    Q { huber_delta: f64 },
}

impl Loss<'_> {
    /// The approximate KL past which a step is not taken (0: always taken).
    pub fn target_kl(&self) -> f64 {
        match self {
            Loss::Ppo { cfg, .. } => cfg.target_kl,
            Loss::Q { .. } => 0.0,
        }
    }
}

/// The loss terms of a step: PPO's, and a Q step's mean Q-value (a Q step's
/// Huber loss is its `value_loss`). One type for a shard's sums over its rows,
/// a step's means, and an update's means over its steps.
#[derive(Debug, Default, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LossTerms {
    pub policy_loss: f64,
    pub value_loss: f64,
    pub entropy: f64,
    pub approx_kl: f64,
    /// Of samples whose ratio was clipped (summed: their count).
    pub clip_fraction: f64,
    /// Q-learning steps: the taken actions' Q-values (PPO's metrics leave it out).
    #[serde(skip)]
    pub q_mean: f64,
}

impl LossTerms {
    /// Adds `o` term by term.
    pub fn add(&mut self, o: &LossTerms) {
        self.policy_loss += o.policy_loss;
        self.value_loss += o.value_loss;
        self.entropy += o.entropy;
        self.approx_kl += o.approx_kl;
        self.clip_fraction += o.clip_fraction;
        self.q_mean += o.q_mean;
    }

    /// Every term times `k` (sums to means: `k = 1 / rows`).
    pub fn times(self, k: f64) -> Self {
        Self {
            policy_loss: self.policy_loss * k,
            value_loss: self.value_loss * k,
            entropy: self.entropy * k,
            approx_kl: self.approx_kl * k,
            clip_fraction: self.clip_fraction * k,
            q_mean: self.q_mean * k,
        }
    }

    /// Every term divided by `k` (an update's sums over `k` steps to means).
    pub fn over(self, k: f64) -> Self {
        Self {
            policy_loss: self.policy_loss / k,
            value_loss: self.value_loss / k,
            entropy: self.entropy / k,
            approx_kl: self.approx_kl / k,
            clip_fraction: self.clip_fraction / k,
            q_mean: self.q_mean / k,
        }
    }
}

/// The statistics of one minibatch step: its loss terms (means over its
/// samples), the gradient norm, and whether it stepped. A replica's share of
/// a step is weighted by `shard / minibatch`, so shares add up to the whole
/// minibatch's figures.
#[derive(Debug, Default, Clone, Copy)]
pub struct StepStats {
    pub terms: LossTerms,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// False when no step was taken: the approximate KL was past the target,
    /// or (`non_finite`) the loss or the gradient was not finite.
    pub stepped: bool,
    /// The loss or the gradient norm was NaN or infinite: the step was skipped
    /// and the parameters and Adam's state are as they were.
    pub non_finite: bool,
}

impl StepStats {
    /// A step skipped for a non-finite loss or gradient.
    pub fn skipped_non_finite() -> Self {
        Self {
            non_finite: true,
            ..Self::default()
        }
    }
}

/// Normalises in place to zero mean and unit (population) std, over everything given.
pub fn normalize(x: &mut [f32]) {
    normalize_where(x, |_| true);
}

/// [`normalize`] with the mean and std of the entries `counted` (every
/// entry is moved by them): samples out of the loss do not weigh in.
pub fn normalize_where(x: &mut [f32], counted: impl Fn(usize) -> bool) {
    let kept = || x.iter().enumerate().filter(|(i, _)| counted(*i));
    let n = kept().count().max(1) as f64;
    let m = kept().map(|(_, &v)| v as f64).sum::<f64>() / n;
    let var = kept().map(|(_, &v)| (v as f64 - m).powi(2)).sum::<f64>() / n;
    let std = var.sqrt() + 1e-8;
    for v in x.iter_mut() {
        *v = ((*v as f64 - m) / std) as f32;
    }
}

/// The policy lag of an update's batches (versions behind the one trained).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Lag {
    pub min: u64,
    pub mean: f64,
    pub max: u64,
}

impl Lag {
    /// Of each batch's lag (all 0 for none).
    pub fn of(lags: &[u64]) -> Self {
        Self {
            min: lags.iter().copied().min().unwrap_or(0),
            mean: lags.iter().sum::<u64>() as f64 / lags.len().max(1) as f64,
            max: lags.iter().copied().max().unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_gives_zero_mean_unit_std() {
        let mut x = [1.0f32, 2.0, 3.0, 4.0];
        normalize(&mut x);
        // mean 2.5, population std sqrt(1.25) = 1.118034
        assert!(
            (x[0] + 1.341_640_8).abs() < 1e-5 && (x[3] - 1.341_640_8).abs() < 1e-5,
            "{x:?}"
        );
        // A constant input stays finite (the epsilon), and becomes zeros.
        let mut c = [3.0f32; 5];
        normalize(&mut c);
        assert!(c.iter().all(|&v| v == 0.0), "{c:?}");
        // Over the counted entries only: [1, 3] has mean 2 and std 1, and
        // the uncounted 7 moves with them.
        let mut y = [1.0f32, 7.0, 3.0];
        normalize_where(&mut y, |i| i != 1);
        assert!(
            (y[0] + 1.0).abs() < 1e-6 && (y[2] - 1.0).abs() < 1e-6,
            "{y:?}"
        );
        assert!((y[1] - 5.0).abs() < 1e-5, "{y:?}");
    }
}
