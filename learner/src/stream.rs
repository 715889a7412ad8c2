//! One trajectory stream: the actor it is bound to (the first joined actor
//! it names whose id no other open stream holds), and how it ends when it
//! fails or the learner closes.

use crate::actors::{Actors, Refusal};
use crate::batch::Verdict;
use crate::state::Shared;
use tonic::{Code, Status};

/// The actor a trajectory stream sends for: the first joined actor it names
/// whose id no other open stream holds. Every later batch must name it too.
pub struct StreamOwner {
    stream: u64,
    pub actor: Option<String>,
}

/// A batch whose actor id cannot be taken on its stream.
pub struct ActorRefusal {
    pub code: Code,
    pub reason: &'static str,
    /// Whose counters the refusal goes to.
    pub counted_as: String,
    pub message: String,
}

impl StreamOwner {
    pub fn new(stream: u64) -> Self {
        Self {
            stream,
            actor: None,
        }
    }

    pub fn check(&mut self, actors: &Actors, id: &str) -> Result<(), ActorRefusal> {
        let refusal = |code, reason, counted_as: &str, message| ActorRefusal {
            code,
            reason,
            counted_as: counted_as.to_string(),
            message,
        };
        if let Some(owner) = &self.actor {
            if owner == id {
                return Ok(());
            }
            let message = format!(
                "field `actor_id`: `{id}` on a stream that belongs to `{owner}` (one stream per actor)"
            );
            return Err(refusal(
                Code::PermissionDenied,
                "actor_mismatch",
                owner,
                message,
            ));
        }
        match actors.claim(id, self.stream) {
            Ok(()) => {
                self.actor = Some(id.to_string());
                Ok(())
            }
            // NOT_FOUND (not a validation code): the actor's cue to join
            // again, e.g. after this learner restarted and forgot it.
            Err(Refusal::Unknown | Refusal::Sequence(_)) => Err(refusal(
                Code::NotFound,
                "unknown_actor",
                "<unknown>",
                format!("field `actor_id`: `{id}` has not joined this learner (call Join again)"),
            )),
            Err(Refusal::Taken) => Err(refusal(
                Code::PermissionDenied,
                "actor_taken",
                "<unknown>",
                format!(
                    "field `actor_id`: `{id}` is sending on another stream (one stream per actor)"
                ),
            )),
        }
    }

    /// The stream ended; returns the actors forgotten now
    /// ([`Actors::release`]).
    pub fn release(&self, actors: &Actors) -> Vec<String> {
        match &self.actor {
            Some(actor) => actors.release(actor, self.stream),
            None => Vec::new(),
        }
    }
}

/// Why a batch that arrived after the learner closed is not used.
pub fn closed_verdict(shared: &Shared) -> Verdict {
    Verdict::Dropped(if shared.is_finished() {
        "run finished".into()
    } else {
        "the learner is stopping; the run is not over".into()
    })
}

/// The status a failed trajectory stream ends with, and its counter key:
/// bytes that are no `TrajectoryBatch` are the client's error
/// (INVALID_ARGUMENT), a message over the run's limit is refused before it is
/// read (RESOURCE_EXHAUSTED), and anything else is the transport's.
pub fn end_status(status: &Status) -> (&'static str, Status) {
    match status.code() {
        // tonic-prost reports a prost::DecodeError as INTERNAL with its text.
        Code::Internal
            if status
                .message()
                .contains("failed to decode Protobuf message") =>
        {
            (
                "undecodable",
                Status::invalid_argument(format!(
                    "the whole `message`: not a TrajectoryBatch ({}); the stream ends here",
                    status.message()
                )),
            )
        }
        // tonic checks the length prefix against the limit before reading the body.
        Code::OutOfRange => (
            "oversize",
            Status::resource_exhausted(format!(
                "the whole `message`: {}; the limit follows this run's spec",
                status.message()
            )),
        ),
        code => (
            "transport",
            Status::new(
                if code == Code::Ok {
                    Code::Unknown
                } else {
                    code
                },
                format!("trajectory stream broke: {}", status.message()),
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_stream_ends_with_a_status_that_names_why() {
        let (reason, s) = end_status(&Status::internal(
            "failed to decode Protobuf message: invalid wire type",
        ));
        assert_eq!((reason, s.code()), ("undecodable", Code::InvalidArgument));
        assert!(s.message().contains("`message`"), "{}", s.message());
        let (reason, s) = end_status(&Status::out_of_range(
            "Error, decoded message length too large: found 9 bytes, the limit is: 8 bytes",
        ));
        assert_eq!((reason, s.code()), ("oversize", Code::ResourceExhausted));
        let (reason, s) = end_status(&Status::new(Code::Ok, "odd"));
        assert_eq!(reason, "transport");
        assert_ne!(s.code(), Code::Ok, "a broken stream never ends OK");
    }
}
