//! The actor: joins the learner, follows the parameter server, steps E
//! environments with batched inference, and streams T-step trajectory batches
//! tagged with the policy version that produced them. If the learner goes away
//! it rejoins with backoff; if the parameter server goes away it keeps acting
//! with the weights it has.

mod actions;
mod buffers;
mod faults;
mod memory;
mod metrics;
mod pool;
mod rollout;
mod selfplay;
#[cfg(test)]
mod testing;
mod timing;
mod turns;

use rollout::{Rollout, RolloutSetup};
use sebulba_core::distribution::ActionDist;
use sebulba_core::policy::network_from_wire;
use sebulba_proto::learner_client::LearnerClient;
use sebulba_proto::{JoinRequest, PROTOCOL_VERSION, Role, RunSpec, TrajectoryBatch, Weights};
use sebulba_transport::grpc::{MAX_MESSAGE_BYTES, SecureChannel, channel};
use sebulba_transport::security::{Class, Security};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

#[derive(Debug, thiserror::Error)]
pub enum ActorError {
    /// Worth retrying: the learner is away or the stream broke.
    #[error("learner unavailable: {0}")]
    Unavailable(String),
    /// The learner does not know this actor (it restarted) or cannot take its
    /// batches under this id (another client used it): join again at once.
    #[error("the learner does not know this actor: {0}")]
    Forgotten(String),
    /// Not worth retrying: this actor cannot take part in the run.
    #[error("cannot take part in the run: {0}")]
    Fatal(String),
}

pub struct ActorOptions {
    pub learner: String,
    pub param_server: String,
    /// Name for logs and per-actor accounting.
    pub name: String,
    /// Batches the learner has not yet acknowledged, the one being built
    /// included: at most this many (at least one).
    pub send_queue: usize,
    /// Inference device (`cpu`, or `cuda:N` with the `cuda` feature).
    pub device: sebulba_core::devices::DeviceKind,
    /// The actor token is sent on every call; TLS when a CA is given.
    pub security: Security,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct ActorReport {
    pub batches_sent: u64,
    pub env_steps: u64,
    pub sessions: u32,
}

/// How long a joined actor waits for the first weights of its run.
const WEIGHTS_PATIENCE: Duration = Duration::from_secs(60);

enum SessionEnd {
    RunFinished,
    Shutdown,
}

/// Acts until the learner says the run is finished or `shutdown` fires.
pub async fn run(
    opts: ActorOptions,
    shutdown: CancellationToken,
) -> Result<ActorReport, ActorError> {
    let (weights_tx, weights_rx) = watch::channel(None);
    let follower = tokio::spawn(sebulba_transport::follow::follow_weights(
        opts.param_server.clone(),
        opts.security.clone(),
        Class::Actor,
        weights_tx,
        shutdown.child_token(),
    ));
    let mut report = ActorReport::default();
    // The run this actor last joined: that run's final version on the
    // parameter server ends it while the learner is away.
    let mut joined: Option<String> = None;
    let started = std::time::Instant::now();
    let new_backoff =
        || sebulba_transport::grpc::backoff(Duration::from_millis(100), Duration::from_secs(5));
    let mut backoff = new_backoff();
    let metrics = metrics::ActorMetrics::new(&opts.name);
    let result = loop {
        report.sessions += 1;
        metrics.sessions.increment(1);
        let sent_before = report.batches_sent;
        match session(
            &opts,
            weights_rx.clone(),
            &shutdown,
            (&mut report, &metrics),
            &mut joined,
        )
        .await
        {
            Ok(SessionEnd::RunFinished) => {
                info!(name = %opts.name, batches = report.batches_sent, "run finished");
                break Ok(report);
            }
            Ok(SessionEnd::Shutdown) => break Ok(report),
            Err(ActorError::Fatal(m)) => break Err(ActorError::Fatal(m)),
            Err(ActorError::Forgotten(m)) => {
                info!(name = %opts.name, "{m}; joining again");
                backoff = new_backoff();
            }
            Err(ActorError::Unavailable(m)) => {
                metrics.stream_breaks.increment(1);
                // With the learner away, the parameter server may still say
                // the run is over: its final version ends the run here too.
                let newest = weights_rx.borrow().clone();
                if concludes_run(newest.as_deref(), joined.as_deref(), started.elapsed()) {
                    info!(name = %opts.name, "the parameter server holds the run's final version; run finished");
                    break Ok(report);
                }
                if report.batches_sent > sent_before {
                    backoff = new_backoff();
                }
                let delay = backoff.next().unwrap_or(Duration::from_secs(5));
                if report.sessions > 3 {
                    warn!(name = %opts.name, "learner unavailable ({m}); retrying in {delay:?}");
                }
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.cancelled() => break Ok(report),
                }
            }
        }
    };
    follower.abort();
    result
}

/// How long an actor that has joined no run yet keeps trying to reach a
/// learner while the parameter server holds a finished run's final version:
/// the next run's learner may be starting (compose `up -d` after a finished
/// run starts every role at once), and its first publish replaces that version.
const NEXT_RUN_PATIENCE: Duration = Duration::from_secs(15);

/// Whether the newest weights heard, `newest`, end this actor while its
/// learner is away: the final version of the run it joined, at once; a
/// final version when it has joined no run, after [`NEXT_RUN_PATIENCE`]
/// (`trying`: how long it has been trying); a final version of another run
/// than its own, never.
fn concludes_run(newest: Option<&Weights>, joined: Option<&str>, trying: Duration) -> bool {
    newest.is_some_and(|w| {
        w.r#final
            && match joined {
                Some(run) => run == w.run_id,
                None => trying >= NEXT_RUN_PATIENCE,
            }
    })
}

/// Refused credentials are fatal (retrying cannot fix them); the rest is worth retrying.
fn unavailable(s: tonic::Status) -> ActorError {
    let m = format!("{:?}: {}", s.code(), s.message());
    if sebulba_transport::security::credentials_refused(&s) {
        ActorError::Fatal(m)
    } else {
        ActorError::Unavailable(m)
    }
}

async fn session(
    opts: &ActorOptions,
    mut weights: watch::Receiver<Option<Arc<Weights>>>,
    shutdown: &CancellationToken,
    (report, metrics): (&mut ActorReport, &metrics::ActorMetrics),
    joined: &mut Option<String>,
) -> Result<SessionEnd, ActorError> {
    let ch = channel(&opts.learner, &opts.security, Some(Class::Actor))
        .map_err(|e| ActorError::Fatal(format!("learner address `{}`: {e}", opts.learner)))?;
    let mut client = LearnerClient::new(ch)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let Some((actor_id, spec)) = join(&mut client, &opts.name).await? else {
        return Ok(SessionEnd::RunFinished);
    };
    *joined = Some(spec.run_id.clone());
    let env = sebulba_envs::env_spec_with(&spec.env_id, &spec.env_kwargs)
        .map_err(|e| ActorError::Fatal(e.to_string()))?;
    let network = network_from_wire(&spec.network.clone().unwrap_or_default())
        .map_err(|e| ActorError::Fatal(e.to_string()))?;
    let dist = ActionDist::new(&env.action_space, &network);
    let span = info_span!("actor", id = %actor_id);
    info!(parent: &span, env = %spec.env_id, envs = spec.envs_per_actor, steps = spec.rollout_length, "joined");
    if !weights_of_run(&mut weights, &spec.run_id, shutdown).await? {
        return Ok(SessionEnd::Shutdown);
    }
    let (batch_tx, batch_rx) = mpsc::channel(opts.send_queue.max(1));
    let flow = Flow::new(opts.send_queue);
    let stop = shutdown.child_token();
    let others = other_seats(opts, &spec, &env, &stop)?;
    let setup = RolloutSetup {
        actor_id,
        env,
        env_kwargs: spec.env_kwargs.clone(),
        dist,
        network,
        envs_per_actor: spec.envs_per_actor as usize,
        rollout_length: spec.rollout_length as usize,
        seed: spec.seed,
        device: opts.device,
        run_id: spec.run_id.clone(),
        reward_gamma: (spec.reward_gamma > 0.0 && spec.reward_gamma <= 1.0)
            .then_some(spec.reward_gamma),
        lane: spec.deterministic_lane,
        metrics: metrics.clone(),
        others,
    };
    let rollout = Rollout::new(
        setup,
        weights,
        batch_tx,
        flow.credits.clone(),
        flow.min_version.clone(),
        stop.clone(),
        tokio::runtime::Handle::current(),
    )
    .map_err(ActorError::Fatal)?;
    let rollout = tokio::task::spawn_blocking(move || rollout.run());
    let outcome = stream(&mut client, batch_rx, &flow, shutdown, (report, metrics))
        .instrument(span)
        .await;
    stop.cancel();
    match rollout.await {
        Ok(Ok(steps)) => report.env_steps += steps,
        Ok(Err(e)) => return Err(ActorError::Fatal(e.to_string())),
        Err(e) => return Err(ActorError::Fatal(format!("rollout thread: {e}"))),
    }
    outcome
}

/// Waits until the parameter server has weights of the run joined: an actor
/// acts only with real weights of its run. False when `shutdown` fired first.
async fn weights_of_run(
    weights: &mut watch::Receiver<Option<Arc<Weights>>>,
    run_id: &str,
    shutdown: &CancellationToken,
) -> Result<bool, ActorError> {
    let of_this_run = weights.wait_for(|w| w.as_ref().is_some_and(|w| w.run_id == run_id));
    tokio::select! {
        r = tokio::time::timeout(WEIGHTS_PATIENCE, of_this_run) => match r {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(_)) => Err(ActorError::Fatal("the parameter server refused this actor (see the error above)".into())),
            Err(_) => Err(ActorError::Unavailable(format!("no weights of run `{run_id}` on the parameter server within {WEIGHTS_PATIENCE:?}"))),
        },
        _ = shutdown.cancelled() => Ok(false),
    }
}

/// For a game whose run seats past selves or rule players
/// (`RunSpec.past_fraction` or `rule_fraction > 0`): the fractions, and the
/// pool followed from the parameter server until `stop` fires when some
/// seats are past.
fn other_seats(
    opts: &ActorOptions,
    spec: &RunSpec,
    env: &sebulba_envs::EnvSpec,
    stop: &CancellationToken,
) -> Result<Option<selfplay::Others>, ActorError> {
    let (past, rule) = (spec.past_fraction, spec.rule_fraction);
    for (field, f) in [("past_fraction", past), ("rule_fraction", rule)] {
        if !(0.0..=1.0).contains(&f) {
            return Err(ActorError::Fatal(format!(
                "run spec field `{field}`: {f} is outside [0, 1]"
            )));
        }
    }
    if past + rule > 1.0 {
        return Err(ActorError::Fatal(format!(
            "run spec field `rule_fraction`: {rule} with past_fraction {past} sums past 1"
        )));
    }
    if (past == 0.0 && rule == 0.0) || !env.is_game() {
        return Ok(None);
    }
    let pool = (past > 0.0).then(|| {
        let (tx, rx) = watch::channel(pool::Pool::default());
        tokio::spawn(pool::follow_pool(
            opts.param_server.clone(),
            opts.security.clone(),
            spec.run_id.clone(),
            tx,
            stop.clone(),
        ));
        rx
    });
    Ok(Some(selfplay::Others {
        fractions: selfplay::Fractions { past, rule },
        pool,
    }))
}

/// Joins the run: this actor's id and the run spec, or `None` when the run
/// has finished. Its span parents the learner's `Join` span.
#[tracing::instrument(name = "join", skip(client))]
async fn join(
    client: &mut LearnerClient<SecureChannel>,
    name: &str,
) -> Result<Option<(String, RunSpec)>, ActorError> {
    let mut join = tonic::Request::new(JoinRequest {
        protocol_version: PROTOCOL_VERSION,
        name: name.to_string(),
        role: Role::Actor as i32,
    });
    join.set_timeout(Duration::from_secs(10));
    let joined = match client.join(join).await {
        Ok(r) if r.get_ref().run_finished => return Ok(None),
        Ok(r) => r.into_inner(),
        Err(s) if s.code() == tonic::Code::FailedPrecondition => {
            return Err(ActorError::Fatal(s.message().to_string()));
        }
        Err(s) => return Err(unavailable(s)),
    };
    let spec = joined
        .spec
        .ok_or_else(|| ActorError::Fatal("Join answered without a run spec".into()))?;
    Ok(Some((joined.actor_id, spec)))
}

/// The actor's flow control, shared with its rollout thread: one credit per
/// batch the learner has not taken yet, and the newest learner version heard.
struct Flow {
    credits: Arc<Semaphore>,
    min_version: Arc<AtomicU64>,
}

impl Flow {
    /// `send_queue` credits (at least one), no learner version heard yet.
    fn new(send_queue: usize) -> Self {
        Self {
            credits: Arc::new(Semaphore::new(send_queue.max(1))),
            min_version: Arc::new(AtomicU64::new(0)),
        }
    }

    /// An ack: the learner's version at it becomes the floor of the next
    /// rollouts' weights (it never goes down), and the batch's credit returns.
    fn ack(&self, learner_version: u64) {
        self.min_version
            .fetch_max(learner_version, Ordering::AcqRel);
        self.credits.add_permits(1);
    }
}

/// Streams the rollout's batches and reads the acks until the run finishes,
/// the stream fails or `shutdown` fires.
async fn stream(
    client: &mut LearnerClient<SecureChannel>,
    batches: mpsc::Receiver<TrajectoryBatch>,
    flow: &Flow,
    shutdown: &CancellationToken,
    (report, metrics): (&mut ActorReport, &metrics::ActorMetrics),
) -> Result<SessionEnd, ActorError> {
    let mut acks = client
        .stream_trajectories(ReceiverStream::new(batches))
        .await
        .map_err(unavailable)?
        .into_inner();
    loop {
        let a = tokio::select! {
            ack = acks.message() => match ack {
                Ok(Some(a)) => a,
                Ok(None) => return Err(ActorError::Unavailable("learner closed the stream".into())),
                Err(s) => return Err(unavailable(s)),
            },
            _ = shutdown.cancelled() => return Ok(SessionEnd::Shutdown),
        };
        flow.ack(a.learner_version);
        match (a.accepted, a.code) {
            (true, _) => metrics.acked_used.increment(1),
            (false, 0) => metrics.acked_not_used.increment(1),
            _ => metrics.acked_refused.increment(1),
        }
        if a.accepted {
            report.batches_sent += 1;
        } else if [
            tonic::Code::NotFound,
            tonic::Code::PermissionDenied,
            tonic::Code::AlreadyExists,
        ]
        .iter()
        .any(|&c| a.code == c as i32)
        {
            // The learner does not know this id, or another client sends
            // under it: a new Join gives a new (unguessable) id.
            return Err(ActorError::Forgotten(a.message));
        } else if a.code != 0 {
            warn!(
                sequence = a.sequence,
                code = a.code,
                "batch refused: {}",
                a.message
            );
        } else {
            debug!(sequence = a.sequence, "batch not used: {}", a.message);
        }
        if a.run_finished {
            return Ok(SessionEnd::RunFinished);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights(run: &str, last: bool) -> Weights {
        Weights {
            run_id: run.into(),
            r#final: last,
            ..Default::default()
        }
    }

    /// The final version of the run joined ends an actor whose learner is
    /// away at once; one seen before joining anything, only after the next
    /// run's learner had time to come up and publish; another run's, or a
    /// version that is not final, never.
    #[test]
    fn a_final_version_ends_the_actor_of_its_run_or_a_late_one() {
        let (done, going) = (weights("run-1", true), weights("run-1", false));
        let (now, later) = (Duration::ZERO, NEXT_RUN_PATIENCE);
        assert!(concludes_run(Some(&done), Some("run-1"), now));
        assert!(
            !concludes_run(Some(&done), None, now),
            "a run may be starting"
        );
        assert!(concludes_run(Some(&done), None, later), "none started");
        assert!(
            !concludes_run(Some(&done), Some("run-2"), later),
            "another run"
        );
        assert!(!concludes_run(Some(&going), Some("run-1"), later));
        assert!(!concludes_run(Some(&going), None, later));
        assert!(!concludes_run(None, Some("run-1"), later));
    }

    /// `send_queue` credits, one at least; an ack returns one and raises
    /// the floor of the next rollouts' weights to the learner's version,
    /// never lowering it (acks of batches taken out of order).
    #[test]
    fn a_flow_holds_send_queue_credits_and_an_ack_returns_one() {
        assert_eq!(Flow::new(3).credits.available_permits(), 3);
        let flow = Flow::new(0);
        assert_eq!(flow.credits.available_permits(), 1);
        assert_eq!(flow.min_version.load(Ordering::Acquire), 0);
        flow.ack(4);
        assert_eq!(flow.credits.available_permits(), 2);
        assert_eq!(flow.min_version.load(Ordering::Acquire), 4);
        flow.ack(2);
        assert_eq!(flow.credits.available_permits(), 3);
        assert_eq!(flow.min_version.load(Ordering::Acquire), 4);
    }
}
