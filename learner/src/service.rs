//! The `Learner` gRPC service: `Join` hands out the run spec; `StreamTrajectories`
//! decodes, validates and queues batches, acknowledging each one. The queue is
//! bounded, so a slow learner holds the stream back and the actors wait.

use crate::accounting::Outcome;
use crate::actors::Refusal;
use crate::batch::{AckSender, DecodedBatch, Verdict, ack};
use crate::state::Shared;
use crate::stream::{StreamOwner, closed_verdict, end_status};
use crate::validate::{Expect, decode_batch};
use sebulba_core::policy::network_to_wire;
use sebulba_proto::learner_server::Learner;
use sebulba_proto::{
    Ack, JoinRequest, JoinResponse, PROTOCOL_VERSION, Role, RunSpec, TrajectoryBatch,
};
use sebulba_transport::security::{Class, Gate};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status, Streaming};
use tracing::{Instrument, debug, info, info_span, warn};

pub struct LearnerService {
    pub shared: Arc<Shared>,
    pub queue: mpsc::Sender<DecodedBatch>,
    /// Actors (and read-only evaluators joining) must present their token.
    pub gate: Gate,
}

impl LearnerService {
    fn run_spec(&self, seed: u64) -> RunSpec {
        let c = &self.shared.config;
        RunSpec {
            env_id: c.env.id.clone(),
            envs_per_actor: c.env.envs_per_actor as u32,
            rollout_length: c.env.rollout_length as u32,
            network: Some(network_to_wire(&c.network)),
            seed,
            eval_interval: c.eval.interval as u32,
            eval_episodes: c.eval.episodes as u32,
            total_steps: c.run.total_steps,
            run_id: self.shared.run_id.clone(),
            reward_gamma: if c.ppo.scale_rewards {
                c.ppo.gamma
            } else {
                0.0
            },
            deterministic_lane: None,
            env_kwargs: c.env.kwargs_json(),
            past_fraction: c.selfplay.past_fraction,
            rule_fraction: c.selfplay.rule_fraction,
        }
    }

    /// The checks before a batch is decoded: the stream's actor, the run
    /// still open, the sequence after the actor's previous batch (an env
    /// fault report is counted whatever follows). `Err` holds the ack's
    /// verdict and whether the run is over.
    fn admit(
        shared: &Shared,
        batch: &TrajectoryBatch,
        owner: &mut StreamOwner,
    ) -> Result<(), (Verdict, bool)> {
        let refused = |code: Code, message: String| (Verdict::Refused { code, message }, false);
        if let Err(r) = owner.check(&shared.actors, &batch.actor_id) {
            shared.accounting.rejected(&r.counted_as, r.reason);
            return Err(refused(r.code, r.message));
        }
        if let Some(f) = &batch.env_faults {
            let (id, a) = (&batch.actor_id, &shared.accounting);
            a.env_faults(id, f.env_restarts, f.non_finite, f.discarded_env_steps);
        }
        if shared.is_closed() {
            shared.accounting.arrived_after_finish(&batch.actor_id);
            return Err((closed_verdict(shared), shared.is_finished()));
        }
        if let Err(Refusal::Sequence(last)) = shared.actors.advance(&batch.actor_id, batch.sequence)
        {
            shared.accounting.rejected(&batch.actor_id, "sequence");
            let message = format!(
                "field `sequence`: {} is not after this actor's previous batch ({last}): a batch is taken once",
                batch.sequence
            );
            return Err(refused(Code::AlreadyExists, message));
        }
        Ok(())
    }

    /// Handles one batch that arrived on the stream `owner` describes.
    /// Returns an ack now for a refused batch; an accepted one is acked by the
    /// update loop when it takes the batch (`None` here).
    async fn ingest(
        shared: &Shared,
        queue: &mpsc::Sender<DecodedBatch>,
        batch: TrajectoryBatch,
        owner: &mut StreamOwner,
        ack_to: &AckSender,
    ) -> Option<Ack> {
        let version = shared.current_version();
        let now = |verdict: Verdict, finished: bool| {
            Some(ack(batch.sequence, version, verdict, finished))
        };
        if let Err((verdict, finished)) = Self::admit(shared, &batch, owner) {
            return now(verdict, finished);
        }
        // One span per batch, continuing the actor's trace (its send span).
        let span = info_span!(
            parent: None,
            "ingest",
            actor = %batch.actor_id,
            sequence = batch.sequence,
            version = batch.policy_version,
        );
        sebulba_transport::trace::set_parent_from_map(&span, &batch.trace_context);
        let expect = Expect {
            env: &shared.env,
            rollout_length: shared.config.env.rollout_length,
            envs_per_actor: shared.config.env.envs_per_actor,
            current_version: version,
            restarting: shared.is_restarting(),
            scaled_rewards: shared.config.ppo.scale_rewards,
            past_selves: shared.config.selfplay.seats_others(),
            state_width: shared.config.network.state_width(),
        };
        // Not `span.enter()`: a guard held across the `.await` below would leave
        // the span entered on a worker thread while this task is parked.
        let mut decoded = match span.in_scope(|| decode_batch(&batch, &expect)) {
            Ok(d) => d,
            Err(r) => {
                let n = shared.accounting.rejected(&batch.actor_id, r.reason);
                // A flood of bad batches must not flood the log: the first
                // ten of an actor, then every power of two.
                if n <= 10 || n.is_power_of_two() {
                    warn!(parent: &span, actor = %batch.actor_id, sequence = batch.sequence, reason = r.reason, rejected = n, "batch rejected: {}", r.message);
                } else {
                    debug!(parent: &span, actor = %batch.actor_id, sequence = batch.sequence, reason = r.reason, "batch rejected: {}", r.message);
                }
                let refused = Verdict::Refused {
                    code: r.code,
                    message: r.message,
                };
                return now(refused, shared.is_finished());
            }
        };
        decoded.ack_to = Some(ack_to.clone());
        decoded.trace.ingest = sebulba_transport::trace::context_map(&span);
        decoded.trace.queue_wait = Some(info_span!(parent: &span, "queue_wait"));
        shared
            .accounting
            .queued(&batch.actor_id, &decoded.actor_time);
        match queue.send(decoded).instrument(span.clone()).await {
            Ok(()) => None,
            Err(mpsc::error::SendError(b)) => {
                // The update loop has stopped.
                shared
                    .accounting
                    .dequeued(&b.actor_id, Outcome::DroppedShutdown);
                now(closed_verdict(shared), shared.is_finished())
            }
        }
    }

    /// Reads one trajectory stream to its end. A stream that fails (bytes that
    /// do not decode, a message over the run's size limit, a transport error)
    /// ends with a non-OK status at once, ahead of any acks still owed for its
    /// queued batches, which are trained on all the same.
    pub(crate) async fn serve_stream(
        shared: Arc<Shared>,
        queue: mpsc::Sender<DecodedBatch>,
        mut incoming: impl Stream<Item = Result<TrajectoryBatch, Status>> + Unpin,
        ack_tx: AckSender,
    ) {
        let mut owner = StreamOwner::new(shared.actors.new_stream());
        Self::read_stream(&shared, &queue, &mut incoming, &ack_tx, &mut owner).await;
        let forgotten = owner.release(&shared.actors);
        shared.accounting.fold(&forgotten);
    }

    async fn read_stream(
        shared: &Shared,
        queue: &mpsc::Sender<DecodedBatch>,
        incoming: &mut (impl Stream<Item = Result<TrajectoryBatch, Status>> + Unpin),
        ack_tx: &AckSender,
        owner: &mut StreamOwner,
    ) {
        use tokio_stream::StreamExt;
        loop {
            let next = tokio::select! {
                m = incoming.next() => m.transpose(),
                () = shared.streams_end.cancelled() => {
                    if !shared.is_finished() {
                        let why = Status::unavailable(
                            "the learner is stopping before the end of the run; join again when it is back",
                        );
                        let _ = tokio::time::timeout(Duration::from_secs(1), ack_tx.send(Err(why))).await;
                    }
                    return;
                }
            };
            match next {
                Ok(Some(batch)) => {
                    if let Some(ack) = Self::ingest(shared, queue, batch, owner, ack_tx).await
                        && ack_tx.send(Ok(ack)).await.is_err()
                    {
                        return;
                    }
                }
                Ok(None) => return,
                Err(status) => {
                    let who = owner.actor.as_deref().unwrap_or("<no batch yet>");
                    let (reason, end) = end_status(&status);
                    if shared.is_closed() && reason == "transport" {
                        // Actors hang up once told the run is over.
                        info!(actor = who, "trajectory stream closed after the run");
                    } else {
                        shared.accounting.stream_broken(who, reason);
                        warn!(
                            actor = who,
                            reason,
                            "trajectory stream broke: {}",
                            status.message()
                        );
                    }
                    // The client may have stopped reading acks: never wait for it.
                    let _ =
                        tokio::time::timeout(Duration::from_secs(1), ack_tx.send(Err(end))).await;
                    return;
                }
            }
        }
    }
}

#[tonic::async_trait]
impl Learner for LearnerService {
    async fn join(&self, request: Request<JoinRequest>) -> Result<Response<JoinResponse>, Status> {
        // Credentials first: a stranger learns nothing about the run.
        let class = self.gate.check(
            request.metadata(),
            "sebulba.v1.Learner/Join",
            &[Class::Actor, Class::ReadOnly],
        )?;
        let req = request.into_inner();
        if req.protocol_version != PROTOCOL_VERSION {
            return Err(Status::failed_precondition(format!(
                "field `protocol_version`: peer speaks protocol {}, this learner speaks {PROTOCOL_VERSION}; run the same sebulba version everywhere",
                req.protocol_version
            )));
        }
        if self.shared.is_closed() && !self.shared.is_finished() {
            // Retryable: the learner comes back (resuming), and so do its actors.
            return Err(Status::unavailable(
                "the learner is stopping before the end of the run; join again when it is back",
            ));
        }
        if self.shared.is_finished() {
            // Not an error: the caller learns the run is over and stops.
            return Ok(Response::new(JoinResponse {
                run_finished: true,
                protocol_version: PROTOCOL_VERSION,
                ..Default::default()
            }));
        }
        let role = Role::try_from(req.role).map_err(|_| {
            Status::invalid_argument(format!("field `role`: unknown role {}", req.role))
        })?;
        if role == Role::Actor && class == Some(Class::ReadOnly) {
            return Err(Status::permission_denied(
                "sebulba.v1.Learner/Join: a read-only token may not join as an actor",
            ));
        }
        let (actor_id, seed, lane) = match role {
            Role::Actor => self
                .shared
                .register_actor(&req.name)
                .map_err(Status::failed_precondition)?,
            Role::Evaluator => (String::new(), self.shared.config.run.seed ^ 0xE7A1, None),
        };
        info!(name = %req.name, ?role, %actor_id, ?lane, "participant joined");
        let mut spec = self.run_spec(seed);
        spec.deterministic_lane = lane
            .zip(self.shared.deterministic.as_ref())
            .map(|(l, s)| s.wire(l));
        Ok(Response::new(JoinResponse {
            actor_id,
            spec: Some(spec),
            protocol_version: PROTOCOL_VERSION,
            run_finished: false,
        }))
    }

    type StreamTrajectoriesStream = Pin<Box<dyn Stream<Item = Result<Ack, Status>> + Send>>;

    /// tonic's path, where the service is mounted bare; a learner serves
    /// this method through [`crate::route`], which reads each batch into an
    /// allocation of its own.
    async fn stream_trajectories(
        &self,
        request: Request<Streaming<TrajectoryBatch>>,
    ) -> Result<Response<Self::StreamTrajectoriesStream>, Status> {
        self.gate.check(
            request.metadata(),
            "sebulba.v1.Learner/StreamTrajectories",
            &[Class::Actor],
        )?;
        let incoming = request.into_inner();
        let (ack_tx, ack_rx) = mpsc::channel(64);
        tokio::spawn(
            Self::serve_stream(self.shared.clone(), self.queue.clone(), incoming, ack_tx)
                .instrument(info_span!("trajectory_stream")),
        );
        Ok(Response::new(Box::pin(ReceiverStream::new(ack_rx))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sebulba_core::config::RunConfig;
    use sebulba_proto::encode_f32;

    fn service() -> (LearnerService, mpsc::Receiver<DecodedBatch>) {
        let mut cfg = RunConfig::preset("CartPole-v1").unwrap();
        cfg.env.envs_per_actor = 2;
        cfg.env.rollout_length = 1;
        let env = sebulba_envs::env_spec("CartPole-v1").unwrap();
        let (tx, rx) = mpsc::channel(4);
        (
            LearnerService {
                shared: Arc::new(Shared::new(cfg, env, "test-run".into())),
                queue: tx,
                gate: Gate::default(),
            },
            rx,
        )
    }

    fn join_req(version: u32) -> Request<JoinRequest> {
        Request::new(JoinRequest {
            protocol_version: version,
            name: "t".into(),
            role: Role::Actor as i32,
        })
    }

    fn batch(actor: &str, sequence: u64) -> TrajectoryBatch {
        let env = sebulba_envs::env_spec("CartPole-v1").unwrap();
        sebulba_testkit::valid_batch(&env, 1, 2, actor, sequence, 0)
    }

    #[tokio::test]
    async fn join_refuses_another_protocol_version_and_hands_out_the_spec() {
        let (svc, _rx) = service();
        let e = svc.join(join_req(PROTOCOL_VERSION + 1)).await.unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition);
        assert!(e.message().contains("protocol_version"), "{}", e.message());
        let a = svc
            .join(join_req(PROTOCOL_VERSION))
            .await
            .unwrap()
            .into_inner();
        let b = svc
            .join(join_req(PROTOCOL_VERSION))
            .await
            .unwrap()
            .into_inner();
        assert_ne!(a.actor_id, b.actor_id);
        let (sa, sb) = (a.spec.unwrap(), b.spec.unwrap());
        assert_eq!(sa.env_id, "CartPole-v1");
        assert_eq!((sa.envs_per_actor, sa.rollout_length), (2, 1));
        assert_ne!(sa.seed, sb.seed, "actors get their own seeds");
    }

    #[tokio::test]
    async fn ingest_queues_good_batches_and_counts_refusals() {
        let (svc, mut rx) = service();
        let (ack_tx, _ack_rx) = mpsc::channel(4);
        let join = || svc.join(join_req(PROTOCOL_VERSION));
        let id = join().await.unwrap().into_inner().actor_id;
        let other = join().await.unwrap().into_inner().actor_id;
        let mut owner = StreamOwner::new(svc.shared.actors.new_stream());
        macro_rules! ingest {
            ($b:expr, $owner:expr) => {
                LearnerService::ingest(&svc.shared, &svc.queue, $b, $owner, &ack_tx).await
            };
        }
        // Unknown actor: NOT_FOUND, the actor's cue to join again.
        let ack = ingest!(batch("stranger", 0), &mut owner).unwrap();
        assert_eq!(ack.code, Code::NotFound as i32);
        assert!(ack.message.contains("`actor_id`"));
        // Malformed (its actor now owns the stream).
        let mut bad = batch(&id, 0);
        bad.rewards = Some(encode_f32(&[1, 2], &[f32::NAN, 0.0]));
        let ack = ingest!(bad, &mut owner).unwrap();
        assert_eq!(ack.code, Code::InvalidArgument as i32);
        assert!(!ack.accepted && ack.message.contains("`rewards`"));
        // Another joined actor's id on this actor's stream.
        let ack = ingest!(batch(&other, 0), &mut owner).unwrap();
        assert_eq!(ack.code, Code::PermissionDenied as i32);
        assert!(ack.message.contains("`actor_id`") && ack.message.contains(&other));
        // Good: queued, acked later by the update loop.
        assert!(ingest!(batch(&id, 1), &mut owner).is_none());
        let queued = rx.try_recv().unwrap();
        assert!(queued.ack_to.is_some());
        // The same sequence again, or an older one: taken once only.
        for seq in [1, 0] {
            let ack = ingest!(batch(&id, seq), &mut owner).unwrap();
            assert_eq!(ack.code, Code::AlreadyExists as i32);
            assert!(ack.message.contains("`sequence`"), "{}", ack.message);
        }
        // A second stream cannot send under an id an open stream holds.
        let mut impostor = StreamOwner::new(svc.shared.actors.new_stream());
        let ack = ingest!(batch(&id, 99), &mut impostor).unwrap();
        assert_eq!(ack.code, Code::PermissionDenied as i32, "{ack:?}");
        let snap = svc.shared.accounting.snapshot();
        let (c, per) = (&snap.total, &snap.per_actor);
        assert_eq!((c.received, c.rejected, c.queued), (7, 6, 1));
        assert_eq!(per["<unknown>"].rejected_by_reason["unknown_actor"], 1);
        assert_eq!(per["<unknown>"].rejected_by_reason["actor_taken"], 1);
        assert_eq!(per[&id].rejected_by_reason["non_finite"], 1);
        assert_eq!(per[&id].rejected_by_reason["actor_mismatch"], 1);
        assert_eq!(per[&id].rejected_by_reason["sequence"], 2);
        assert!(c.balanced());
        // After the run finished, batches are received and dropped, and the actor is told.
        svc.shared
            .finished
            .store(true, std::sync::atomic::Ordering::Release);
        let ack = ingest!(batch(&id, 2), &mut owner).unwrap();
        assert!(ack.run_finished && !ack.accepted);
        assert_eq!(svc.shared.accounting.total().dropped_shutdown, 1);
        // And a Join after the run says so in a field, not an error.
        let late = join().await.unwrap().into_inner();
        assert!(late.run_finished && late.spec.is_none() && late.actor_id.is_empty());
    }

    #[tokio::test]
    async fn a_stopping_learner_does_not_say_the_run_is_over() {
        let (svc, _rx) = service();
        let (ack_tx, _ack_rx) = mpsc::channel(4);
        let id = svc
            .join(join_req(PROTOCOL_VERSION))
            .await
            .unwrap()
            .into_inner()
            .actor_id;
        svc.shared
            .stopping
            .store(true, std::sync::atomic::Ordering::Release);
        let mut owner = StreamOwner::new(svc.shared.actors.new_stream());
        let ack =
            LearnerService::ingest(&svc.shared, &svc.queue, batch(&id, 0), &mut owner, &ack_tx)
                .await
                .unwrap();
        assert!(!ack.accepted && !ack.run_finished, "{ack:?}");
        let e = svc.join(join_req(PROTOCOL_VERSION)).await.unwrap_err();
        assert_eq!(e.code(), Code::Unavailable, "retryable: {e:?}");
        assert!(svc.shared.accounting.snapshot().balanced());
    }
}
