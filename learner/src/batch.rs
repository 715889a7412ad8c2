//! The training vocabulary: a trajectory batch as the learner holds it once
//! validated (decoded arrays, where its ack goes, its trace state).

/// A validated batch, decoded once into the arrays the update reads.
#[derive(Debug)]
pub struct DecodedBatch {
    pub actor_id: String,
    pub sequence: u64,
    pub policy_version: u64,
    pub num_steps: usize,
    pub num_envs: usize,
    /// `[(T+1) * E * obs_dim]`
    pub observations: Vec<f32>,
    pub actions: BatchActions,
    /// `[T * E * n]`, 1 = allowed, when the env has action masks.
    pub action_masks: Option<Vec<u8>>,
    pub log_probs: Vec<f32>,
    pub rewards: Vec<f32>,
    pub terminated: Vec<u8>,
    pub truncated: Vec<u8>,
    /// `[K * obs_dim]`, one row per truncated step in (t, e) order.
    pub final_observations: Vec<f32>,
    /// `[T * E]` each env's running discounted return after each step (the
    /// actor keeps it, see `envs::DiscountedReturn`); empty when the run
    /// does not scale rewards.
    pub discounted_returns: Vec<f32>,
    pub episode_returns: Vec<f64>,
    pub episode_lengths: Vec<u32>,
    /// A turn-based game's seats and overlap rows (`None` for one player).
    pub game: Option<GameRows>,
    /// Where the ack goes once the update loop takes the batch. Acking on dequeue
    /// (not on arrival) is the actors' flow control: an actor holds at most its
    /// credit of batches the learner has not started on, so none goes stale.
    pub ack_to: Option<AckSender>,
    /// The batch's journey through the learner, for tracing.
    pub trace: BatchTrace,
}

/// What a batch of a P-player game carries beyond its T trained rows (the
/// overlap of K = P - 1 moves, see `gae_players`).
#[derive(Debug, Clone, PartialEq)]
pub struct GameRows {
    /// `[(T + K + 1) * E]`: the seat to move at each observation row.
    pub player_ids: Vec<u8>,
    /// `[K * E * obs_dim]`: observation rows T+1..=T+K.
    pub overlap_observations: Vec<f32>,
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

/// Tracing state that travels with a queued batch: the `queue_wait` span is
/// open from enqueue until the update loop takes the batch (dropping it closes
/// the span), and `ingest` names the ingest span the update links to.
#[derive(Debug, Default)]
pub struct BatchTrace {
    pub queue_wait: Option<tracing::Span>,
    pub ingest: std::collections::HashMap<String, String>,
}

/// The actions of a batch, by action-space kind.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchActions {
    /// `[T * E]` indices.
    Discrete(Vec<i32>),
    /// `[T * E * dim]` pre-tanh samples.
    Continuous(Vec<f32>),
}

impl DecodedBatch {
    pub fn env_steps(&self) -> u64 {
        (self.num_steps * self.num_envs) as u64
    }
}

/// Where a batch's ack goes: the response stream of the call it came on.
pub type AckSender = tokio::sync::mpsc::Sender<Result<sebulba_proto::Ack, tonic::Status>>;

/// What became of a batch, as its actor is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Taken into an update.
    Used,
    /// Well-formed but not trained on (too stale, or the run ended): why.
    Dropped(String),
    /// Refused by validation: the status code and the message naming the field.
    Refused { code: tonic::Code, message: String },
}

/// The one place an [`Ack`](sebulba_proto::Ack) is made: for the batch
/// `sequence`, at learner version `version`.
pub fn ack(
    sequence: u64,
    version: u64,
    verdict: Verdict,
    run_finished: bool,
) -> sebulba_proto::Ack {
    let (accepted, code, message) = match verdict {
        Verdict::Used => (true, 0, String::new()),
        Verdict::Dropped(m) => (false, 0, m),
        Verdict::Refused { code, message } => (false, code as i32, message),
    };
    sebulba_proto::Ack {
        sequence,
        accepted,
        code,
        message,
        learner_version: version,
        run_finished,
    }
}

impl DecodedBatch {
    /// Tells the actor what became of this batch (returning its credit). A
    /// full or closed ack channel means the actor is gone or far behind:
    /// nothing to wait for.
    pub fn acknowledge(&self, version: u64, verdict: Verdict, run_finished: bool) {
        if let Some(tx) = &self.ack_to {
            let _ = tx.try_send(Ok(ack(self.sequence, version, verdict, run_finished)));
        }
    }
}
