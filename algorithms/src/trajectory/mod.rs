//! What the algorithms train on: one actor's T steps of E envs, decoded into
//! plain arrays. The learner service builds one from each validated batch
//! (its ack and trace stay on the service side); the example builds them
//! straight from a vector env.

mod builder;

use sebulba_envs::Observations;
use sebulba_fused::{PolicyState, Seats, Sequence};

pub use builder::TrajectoryBuilder;

/// T steps of E envs with the behaviour policy's log-probabilities.
#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    /// The policy version that acted (the learner measures lag against it).
    pub policy_version: u64,
    /// T
    pub rollout_length: usize,
    /// E
    pub envs_per_actor: usize,
    /// `[(T+1) * E * obs_dim]`, in the env's dtype.
    pub observations: Observations,
    pub actions: BatchActions,
    /// `[T * E * n]`, 1 = allowed, when the env has action masks.
    pub action_masks: Option<Vec<u8>>,
    pub log_probs: Vec<f32>,
    pub rewards: Vec<f32>,
    pub terminated: Vec<u8>,
    pub truncated: Vec<u8>,
    /// `[K * obs_dim]`, one row per truncated step in (t, e) order.
    pub final_observations: Observations,
    /// `[T * E]` each env's running discounted return after each step (the
    /// actor keeps it, see `sebulba_envs::DiscountedReturn`); empty when the
    /// run does not scale rewards.
    pub discounted_returns: Vec<f32>,
    pub episode_returns: Vec<f64>,
    pub episode_lengths: Vec<u32>,
    /// A turn-based game's seats and overlap rows (`None` for one player).
    pub game: Option<GameRows>,
    /// Each env's policy state before the batch's first row (width 0: a
    /// network without memory).
    pub initial_state: PolicyState,
}

impl Trajectory {
    /// T x E: the env steps it holds.
    pub fn env_steps(&self) -> u64 {
        (self.rollout_length * self.envs_per_actor) as u64
    }

    /// 1 where an env's episode starts at that observation row (the step
    /// before it terminated or was cut), over the `T + 1` rows, and a
    /// game's overlap rows after them (`[(T + 1 + K) * E]`); row 0's are
    /// in the initial state.
    pub fn starts(&self) -> Vec<u8> {
        let e = self.envs_per_actor;
        let overlap = self
            .game
            .as_ref()
            .map_or(&[][..], |g| &g.overlap_terminated);
        let mut starts = vec![0u8; (self.rollout_length + 1) * e + overlap.len()];
        let ended = self.terminated.iter().zip(&self.truncated);
        let ended = ended.map(|(&term, &cut)| term == 1 || cut == 1);
        let ended = ended.chain(overlap.iter().map(|&term| term == 1));
        for (s, end) in starts[e..].iter_mut().zip(ended) {
            *s = u8::from(end);
        }
        starts
    }

    /// The first `steps` observation rows of each env (a game's overlap
    /// rows continue them) as the sequence a network reads them in
    /// (`starts` from [`Self::starts`]; a game's rows each its mover's), the
    /// rows after it continuing rows `continues` ([`Self::cut_rows`] for the
    /// final observations).
    pub fn sequence<'a>(
        &'a self,
        steps: usize,
        starts: &'a [u8],
        continues: &'a [usize],
    ) -> Sequence<'a> {
        let rows = steps * self.envs_per_actor;
        Sequence {
            steps,
            envs: self.envs_per_actor,
            starts: &starts[..rows],
            state: &self.initial_state,
            continues,
            seats: self.game.as_ref().map(|g| Seats {
                players: self.players(),
                movers: &g.player_ids[..rows],
            }),
        }
    }

    /// The seats of a game (its overlap is K = P - 1 moves), 1 otherwise.
    pub fn players(&self) -> usize {
        let k = self.game.as_ref().map_or(0, |g| g.overlap_terminated.len());
        k / self.envs_per_actor.max(1) + 1
    }

    /// The rows `t * E + e` of the truncated steps, in order: where each
    /// final observation continues its env's sequence.
    pub fn cut_rows(&self) -> Vec<usize> {
        let cut = self.truncated.iter().enumerate();
        cut.filter(|&(_, &t)| t == 1).map(|(i, _)| i).collect()
    }
}

/// What a batch of a P-player game carries beyond its T trained rows (the
/// overlap of K = P - 1 moves, see `gae_players`).
#[derive(Debug, Clone, PartialEq)]
pub struct GameRows {
    /// `[(T + K + 1) * E]`: the seat to move at each observation row.
    pub player_ids: Vec<u8>,
    /// `[K * E * obs_dim]`: observation rows T+1..=T+K.
    pub overlap_observations: Observations,
    /// `[K * E]`: the overlap moves that ended a game.
    pub overlap_terminated: Vec<u8>,
    /// `[T * E]`: 1 where a past version made the trained row's move (not
    /// trained on); empty when none did.
    pub past_moves: Vec<u8>,
}

impl GameRows {
    /// `terminated` over all `T + K + 1` rows, given the trained rows' flags
    /// (the last observation row has no move yet: 0).
    pub fn all_terminated(&self, trained: &[u8]) -> Vec<u8> {
        let e = self.player_ids.len() - trained.len() - self.overlap_terminated.len();
        [trained, &self.overlap_terminated, &vec![0; e]].concat()
    }
}

/// The actions of a batch, by action-space kind.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchActions {
    /// `[T * E]` indices.
    Discrete(Vec<i32>),
    /// `[T * E * dim]` pre-tanh samples.
    Continuous(Vec<f32>),
}
