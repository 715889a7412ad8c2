//! The `Learner` gRPC service: `Join` hands out the run spec; `StreamTrajectories`
//! decodes, validates and queues batches, acknowledging each one. The queue is
//! bounded, so a slow learner holds the stream back and the actors wait.

use crate::accounting::Outcome;
use crate::state::Shared;
use crate::validate::{DecodedBatch, Expect, decode_batch};
use sebulba_proto::learner_server::Learner;
use sebulba_proto::{
    Ack, JoinRequest, JoinResponse, NetworkSpec, PROTOCOL_VERSION, Role, RunSpec, TrajectoryBatch,
};
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status, Streaming};
use tracing::{Instrument, debug, info, info_span, warn};

pub type AckSender = mpsc::Sender<Result<Ack, Status>>;

pub struct LearnerService {
    pub shared: Arc<Shared>,
    pub queue: mpsc::Sender<DecodedBatch>,
}

impl LearnerService {
    fn run_spec(&self, seed: u64) -> RunSpec {
        let c = &self.shared.config;
        RunSpec {
            env_id: c.env.id.clone(),
            envs_per_actor: c.env.envs_per_actor as u32,
            rollout_length: c.env.rollout_length as u32,
            network: Some(NetworkSpec {
                hidden: c.network.hidden.iter().map(|&h| h as u32).collect(),
                activation: c.network.activation.as_str().into(),
            }),
            seed,
            eval_interval: c.eval.interval as u32,
            eval_episodes: c.eval.episodes as u32,
            total_steps: c.run.total_steps,
        }
    }

    /// Handles one batch. Returns an ack now for a refused batch; an accepted one
    /// is acked by the update loop when it takes the batch (`None` here).
    async fn ingest(
        shared: &Shared,
        queue: &mpsc::Sender<DecodedBatch>,
        batch: TrajectoryBatch,
        ack_to: &AckSender,
    ) -> Option<Ack> {
        let version = shared.current_version();
        let mut ack = Ack {
            sequence: batch.sequence,
            learner_version: version,
            ..Default::default()
        };
        if !shared.is_known_actor(&batch.actor_id) {
            shared.accounting.rejected("<unknown>", "unknown_actor");
            ack.code = Code::FailedPrecondition as i32;
            ack.message = format!(
                "field `actor_id`: `{}` has not joined this learner (call Join first)",
                batch.actor_id
            );
            return Some(ack);
        }
        if shared.is_finished() {
            shared.accounting.arrived_after_finish(&batch.actor_id);
            ack.run_finished = true;
            ack.message = "run finished".into();
            return Some(ack);
        }
        let expect = Expect {
            env: &shared.env,
            num_steps: shared.config.env.rollout_length,
            num_envs: shared.config.env.envs_per_actor,
            current_version: version,
        };
        match decode_batch(&batch, &expect) {
            Err(r) => {
                shared.accounting.rejected(&batch.actor_id, r.reason);
                warn!(actor = %batch.actor_id, sequence = batch.sequence, reason = r.reason, "batch rejected: {}", r.message);
                ack.code = r.code as i32;
                ack.message = r.message;
            }
            Ok(mut decoded) => {
                decoded.ack_to = Some(ack_to.clone());
                shared.accounting.queued(&batch.actor_id);
                match queue.send(decoded).await {
                    Ok(()) => return None,
                    Err(mpsc::error::SendError(b)) => {
                        // The update loop has stopped: the run is over.
                        shared
                            .accounting
                            .dequeued(&b.actor_id, Outcome::DroppedShutdown);
                        ack.run_finished = true;
                        ack.message = "run finished".into();
                    }
                }
            }
        }
        ack.run_finished |= shared.is_finished();
        Some(ack)
    }
}

#[tonic::async_trait]
impl Learner for LearnerService {
    async fn join(&self, request: Request<JoinRequest>) -> Result<Response<JoinResponse>, Status> {
        let req = request.into_inner();
        if req.protocol_version != PROTOCOL_VERSION {
            return Err(Status::failed_precondition(format!(
                "field `protocol_version`: peer speaks protocol {}, this learner speaks {PROTOCOL_VERSION}; run the same sebulba version everywhere",
                req.protocol_version
            )));
        }
        if self.shared.is_finished() {
            return Err(Status::failed_precondition("the run has finished"));
        }
        let role = Role::try_from(req.role).map_err(|_| {
            Status::invalid_argument(format!("field `role`: unknown role {}", req.role))
        })?;
        let (actor_id, seed) = match role {
            Role::Actor => self.shared.register_actor(&req.name),
            Role::Evaluator => (String::new(), self.shared.config.run.seed ^ 0xE7A1),
        };
        info!(name = %req.name, ?role, %actor_id, "participant joined");
        Ok(Response::new(JoinResponse {
            actor_id,
            spec: Some(self.run_spec(seed)),
            protocol_version: PROTOCOL_VERSION,
        }))
    }

    type StreamTrajectoriesStream = Pin<Box<dyn Stream<Item = Result<Ack, Status>> + Send>>;

    async fn stream_trajectories(
        &self,
        request: Request<Streaming<TrajectoryBatch>>,
    ) -> Result<Response<Self::StreamTrajectoriesStream>, Status> {
        let mut incoming = request.into_inner();
        let (ack_tx, ack_rx) = mpsc::channel(64);
        let shared = self.shared.clone();
        let queue = self.queue.clone();
        tokio::spawn(
            async move {
                loop {
                    match incoming.message().await {
                        Ok(Some(batch)) => {
                            if let Some(ack) = Self::ingest(&shared, &queue, batch, &ack_tx).await
                                && ack_tx.send(Ok(ack)).await.is_err()
                            {
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(status) => {
                            // A half-sent batch never reaches us as a message: nothing to count.
                            debug!(%status, "trajectory stream ended with an error");
                            break;
                        }
                    }
                }
            }
            .instrument(info_span!("trajectory_stream")),
        );
        Ok(Response::new(Box::pin(ReceiverStream::new(ack_rx))))
    }
}
