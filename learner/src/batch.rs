//! A validated batch as the learner service holds it: the plain
//! [`Trajectory`] the algorithms train on, plus what only the service needs
//! (which actor sent it, where its ack goes, its trace state).

pub use sebulba_algorithms::trajectory::{BatchActions, GameRows, Trajectory};

/// A validated batch, decoded once into the arrays the update reads.
#[derive(Debug)]
pub struct DecodedBatch {
    pub actor_id: String,
    pub sequence: u64,
    pub trajectory: Trajectory,
    /// Where the ack goes once the update loop takes the batch. Acking on dequeue
    /// (not on arrival) is the actors' flow control: an actor holds at most its
    /// credit of batches the learner has not started on, so none goes stale.
    pub ack_to: Option<AckSender>,
    /// The batch's journey through the learner, for tracing.
    pub trace: BatchTrace,
    /// The actor's account of its time since its previous batch.
    pub actor_time: crate::accounting::ActorTime,
}

/// Tracing state that travels with a queued batch: the `queue_wait` span is
/// open from enqueue until the update loop takes the batch (dropping it closes
/// the span), and `ingest` names the ingest span the update links to.
#[derive(Debug, Default)]
pub struct BatchTrace {
    pub queue_wait: Option<tracing::Span>,
    pub ingest: std::collections::HashMap<String, String>,
}

impl DecodedBatch {
    /// A batch that came on no stream (tests, benchmarks): nothing to ack.
    pub fn unsent(actor_id: &str, sequence: u64, trajectory: Trajectory) -> Self {
        Self {
            actor_id: actor_id.into(),
            sequence,
            trajectory,
            ack_to: None,
            trace: BatchTrace::default(),
            actor_time: Default::default(),
        }
    }

    pub fn env_steps(&self) -> u64 {
        self.trajectory.env_steps()
    }

    /// A batch the update loop has taken (and acked): its trajectory goes to
    /// the algorithms, its origin stays for accounting, warnings and the
    /// update span's links.
    pub fn into_parts(self) -> (BatchOrigin, Trajectory) {
        let origin = BatchOrigin {
            env_steps: self.trajectory.env_steps(),
            actor_id: self.actor_id,
            sequence: self.sequence,
            ingest: self.trace.ingest,
        };
        (origin, self.trajectory)
    }
}

/// Where a taken batch came from: its actor, its sequence number, and the
/// ingest span the update links to.
#[derive(Debug, Clone)]
pub struct BatchOrigin {
    pub actor_id: String,
    /// The env steps of the batch (for the per-actor throughput).
    pub env_steps: u64,
    pub sequence: u64,
    pub ingest: std::collections::HashMap<String, String>,
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
