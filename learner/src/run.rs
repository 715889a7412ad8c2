//! The learner role from start to finish: check the run directory (and the
//! checkpoint to resume from), serve `Learner`, run the update loop on its own
//! thread with one model replica per learner device, then wait (bounded) for
//! the final version's evaluation and write the summary.

use crate::checkpoint::Checkpoint;
use crate::error::LearnerError;
use crate::publish::Publisher;
use crate::run_dir::RunStart;
use crate::service::LearnerService;
use crate::state::{LiveProgress, RunClock, Shared};
use crate::summary::{EvalCpu, MemoryReport, Summary, mib};
use crate::update::{LoopContext, LoopOutcome, UpdateLoop};
use crate::validate::Expect;
use sebulba_algorithms::{Trainer, prepare};
use sebulba_core::config::RunConfig;
use sebulba_core::device_choice::DeviceChoice;
use sebulba_core::model::ModelSpec;
use sebulba_proto::learner_server::LearnerServer;
use sebulba_runfiles::files::{write_atomic, write_json_atomic};
use sebulba_runfiles::tensorboard::{self, MirroredLines};
use sebulba_transport::grpc::MAX_MESSAGE_BYTES;
use sebulba_transport::security::Security;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tracing::{info, warn};

pub struct LearnerOptions {
    pub config: RunConfig,
    pub run_dir: PathBuf,
    /// Parameter server URL (`http://host:port`).
    pub param_server: String,
    pub live: Arc<LiveProgress>,
    /// Tokens accepted from actors; the learner token sent when publishing; TLS.
    pub security: Security,
    /// What to do with what the run directory already holds.
    pub start: RunStart,
    /// The run's id when the user names it (`--run-name`); else generated.
    /// A resumed run keeps its checkpoint's.
    pub run_name: Option<String>,
    /// The actors of a deterministic run (`run.deterministic`), by name, in
    /// lane order: `sebulba local` names its own. Empty otherwise.
    pub deterministic_actors: Vec<String>,
    /// The evaluator runs in this process (`sebulba local`): its CPU time is
    /// part of this process's, for the summary's `eval_cpu`.
    pub evaluator_in_process: bool,
    /// `sebulba local`'s actor child processes, as their supervisor keeps
    /// them: the summary adds their memory and says which were given up.
    pub actor_processes: Option<Arc<crate::processes::ActorProcesses>>,
}

/// How long a learner stopped while it waits for the final evaluation waits
/// for the evaluator's partial one (the evaluator, stopped too, files it
/// after the step it is in).
const STOPPED_EVAL_WAIT: Duration = Duration::from_secs(2);

/// How often the learner logs its progress line.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Serves `Learner` on `listener` and trains until the step budget is reached or
/// `shutdown` fires; writes `config.toml`, `metrics.jsonl`, `final.safetensors`
/// and `summary.json` in the run directory.
pub async fn run(
    listener: TcpListener,
    opts: LearnerOptions,
    shutdown: CancellationToken,
) -> Result<Summary, LearnerError> {
    let mut cfg = opts.config;
    cfg.validate()?;
    let env = sebulba_envs::env_spec_with(&cfg.env.id, &cfg.env.kwargs_json())?;
    let model_spec = ModelSpec::new(&env, &cfg.network)?;
    let run_dir = opts.run_dir;
    // config.toml keeps `auto`: a resume on another machine chooses again.
    let resume = crate::run_dir::open(&run_dir, &cfg, opts.start)?;
    let device_choice: DeviceChoice = sebulba_core::device_choice::resolve(&mut cfg);
    info!(devices = ?device_choice.devices, reason = %device_choice.reason, "learner devices");
    let run_id = match (&resume, opts.run_name) {
        (Some(ck), _) => ck.meta.run_id.clone(),
        (None, Some(name)) => name,
        (None, None) => crate::state::new_run_id(&cfg.env.id),
    };
    let plan = deterministic_plan(&cfg, opts.deterministic_actors, resume.as_ref())?;
    let shared = Arc::new(Shared::new(cfg.clone(), env, run_id).with_deterministic(plan));
    let clock = restore(&shared, resume.as_ref());
    info!(run_id = %shared.run_id, segment = clock.segment, "run");
    let (queue_tx, queue_rx) = mpsc::channel(cfg.learner.queue_capacity);
    let publisher = Publisher::new(&opts.param_server, &opts.security)?;
    accept_held_versions(&shared, &publisher, resume.as_ref()).await;
    let server_stop = CancellationToken::new();
    let server = serve(listener, &opts.security, &shared, queue_tx, &server_stop).await?;
    let metrics = MirroredLines::open(
        &run_dir.join("metrics.jsonl"),
        &run_dir.join(tensorboard::LEARNER_DIR),
        "train",
    )
    .map_err(|e| LearnerError::Io("metrics.jsonl".into(), e))?;
    let ctx = LoopContext {
        normalizers: prepare::Normalizers::new(&cfg, model_spec.obs_dim),
        shared: shared.clone(),
        live: opts.live.clone(),
        model_spec,
        publisher: publisher.clone(),
        rt: tokio::runtime::Handle::current(),
        metrics,
        clock,
        run_dir: run_dir.clone(),
        stop: shutdown.clone(),
    };
    let progress = crate::progress::ProgressTask {
        shared: shared.clone(),
        live: opts.live.clone(),
        publisher: publisher.clone(),
        clock,
        evaluator_in_process: opts.evaluator_in_process,
    };
    let progress = tokio::spawn(progress.log_every(PROGRESS_EVERY, shutdown.child_token()));
    let done = spawn_loop(ctx, queue_rx, resume)?;
    let outcome = done
        .await
        .map_err(|_| LearnerError::Thread("it died".into()))
        .and_then(|r| r);
    progress.abort();
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            shared.streams_end.cancel();
            server_stop.cancel();
            return Err(e);
        }
    };
    final_evals(&publisher, &shared, &outcome, &shutdown).await;
    let cpu = EvalCpu::measure(shared.evals.scores().cpu_seconds, opts.evaluator_in_process);
    let ended = Ended {
        outcome: &outcome,
        clock,
        devices: &device_choice,
        cpu,
        processes: opts.actor_processes.as_deref(),
    };
    let summary = write_summary(&run_dir, &ended, &shared)?;
    stop_server(&shared, &server_stop, server).await;
    match outcome.failure {
        Some(why) => Err(LearnerError::Diverged(why)),
        None => Ok(summary),
    }
}

/// Ends every open trajectory stream and stops the server (waiting 5 s at
/// most).
async fn stop_server(
    shared: &Shared,
    stop: &CancellationToken,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
) {
    shared.streams_end.cancel();
    stop.cancel();
    match tokio::time::timeout(Duration::from_secs(5), server).await {
        Ok(Ok(Err(e))) => warn!("learner server: {e}"),
        Err(_) => warn!("learner server did not stop within 5 s; leaving it"),
        _ => {}
    }
}

/// Before a resumed learner serves: the actors' batches of the versions its
/// predecessor published after the checkpoint are honest work, taken rather
/// than refused.
async fn accept_held_versions(shared: &Shared, publisher: &Publisher, resume: Option<&Checkpoint>) {
    let Some(ck) = resume else { return };
    let held = publisher.latest_version(&shared.run_id).await;
    shared.resume_at(ck.meta.version, held);
    let held_text = held.map_or_else(|| "none".to_string(), |h| h.to_string());
    info!(checkpoint = ck.meta.version, held = %held_text, "taking batches up to the newest version held");
}

/// A resumed run's accounting and evaluations, and its clock going on from
/// the checkpoint's (a new segment); a new run's clock at zero.
fn restore(shared: &Shared, resume: Option<&Checkpoint>) -> RunClock {
    match resume {
        Some(ck) => {
            shared.accounting.restore(
                &ck.meta.accounting,
                shared.config.learner.departed_actors_kept,
            );
            shared.evals.restore(ck.meta.evals.clone());
            RunClock::new(ck.meta.wall_seconds, ck.meta.segments.saturating_add(1))
        }
        None => RunClock::new(0.0, 1),
    }
}

/// A deterministic run's lanes: one per actor named, from the version the run
/// starts at (a resumed run goes on in order from its checkpoint's).
fn deterministic_plan(
    cfg: &RunConfig,
    actors: Vec<String>,
    resume: Option<&Checkpoint>,
) -> Result<Option<crate::deterministic::Deterministic>, LearnerError> {
    if !cfg.run.deterministic {
        return Ok(None);
    }
    if actors.is_empty() {
        return Err(sebulba_core::config::ConfigError::BadValue {
            key: "run.deterministic".into(),
            reason: "only a `sebulba local` run can be deterministic (it knows its actors)".into(),
        }
        .into());
    }
    let first = resume.map_or(0, |ck| ck.meta.version);
    let per_update = cfg.learner.batches_per_update;
    Ok(Some(
        crate::deterministic::Deterministic::new(actors, per_update, first)
            .with_lag(cfg.run.forced_lag),
    ))
}

/// The largest batch message the run accepts, in bytes.
fn batch_limit(shared: &Shared) -> usize {
    Expect {
        env: &shared.env,
        rollout_length: shared.config.env.rollout_length,
        envs_per_actor: shared.config.env.envs_per_actor,
        current_version: 0,
        restarting: false,
        scaled_rewards: shared.config.ppo.scale_rewards,
        past_selves: shared.config.selfplay.seats_others(),
        state_width: shared.config.network.state_width(),
    }
    .max_batch_bytes()
}

/// Where the process's memory goes as the update loop ends.
/// The kernel's peak (`VmHWM`), or the resident size the loop saw as it
/// ended where that is higher: the kernel updates its high-water mark lazily
/// (on unmapping, with per-thread counters folded in late), so a later read
/// can fall below an earlier `VmRSS` (48.24 under 48.35 MiB in a CI run).
fn peak_rss(outcome: &LoopOutcome) -> Option<u64> {
    let hwm = sebulba_core::memory::peak_rss_bytes();
    match (hwm, outcome.memory.rss) {
        (Some(h), Some(r)) => Some(h.max(r)),
        (h, r) => h.or(r),
    }
}

fn memory_report(
    outcome: &LoopOutcome,
    shared: &Shared,
    children: Option<&crate::processes::ProcessesReport>,
) -> MemoryReport {
    let limit = batch_limit(shared) as u64;
    let m = &outcome.memory;
    MemoryReport {
        rss_mib: m.rss.map(mib),
        children_rss_mib: children.map(|c| c.rss_mib),
        heap_in_use_mib: m.heap.map(|h| mib(h.in_use)),
        heap_free_mib: m.heap.map(|h| mib(h.free)),
        engine_mib: mib(m.engine),
        replay_mib: mib(m.replay),
        held_versions_mib: mib(m.held_versions),
        batch_limit_mib: mib(limit),
        queue_bound_mib: mib(limit * shared.config.learner.queue_capacity as u64),
    }
}

/// Starts the gRPC server (health, reflection, `Learner`) on `listener`.
async fn serve(
    listener: TcpListener,
    security: &Security,
    shared: &Arc<Shared>,
    queue: mpsc::Sender<crate::batch::DecodedBatch>,
    stop: &CancellationToken,
) -> Result<JoinHandle<Result<(), tonic::transport::Error>>, LearnerError> {
    let gate = security.gate();
    // The run's own limit, checked on the length prefix before a byte is read.
    let limit = batch_limit(shared);
    let service = Arc::new(LearnerService {
        shared: shared.clone(),
        queue,
        gate: gate.clone(),
    });
    let reflection = sebulba_transport::grpc::reflection()?;
    let health = sebulba_transport::grpc::health(&["sebulba.v1.Learner"]).await;
    let local = listener
        .local_addr()
        .map_err(|e| LearnerError::Io("listener".into(), e))?;
    let mut builder = sebulba_transport::grpc::server(security)?;
    let server = builder
        .add_service(health)
        .add_service(InterceptedService::new(reflection, gate.any_class()))
        .add_service(crate::route::TrajectoryRoute::new(
            LearnerServer::from_arc(service.clone())
                .max_decoding_message_size(limit)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            service,
            limit,
        ))
        .serve_with_incoming_shutdown(
            sebulba_transport::grpc::incoming(listener),
            stop.clone().cancelled_owned(),
        );
    let cfg = &shared.config;
    info!(%local, env = %cfg.env.id, max_message_bytes = limit, total_steps = cfg.run.total_steps, tls = security.tls.identity.is_some(), auth = gate.is_enforcing(), "learner serving");
    Ok(tokio::spawn(sebulba_transport::grpc::serve_until(
        server,
        stop.clone(),
    )))
}

type Queue = mpsc::Receiver<crate::batch::DecodedBatch>;

/// Builds the trainer and runs the update loop on a thread of its own;
/// `final.safetensors` is written when it ends.
fn spawn_loop(
    ctx: LoopContext,
    rx: Queue,
    resume: Option<Checkpoint>,
) -> Result<oneshot::Receiver<Result<LoopOutcome, LearnerError>>, LearnerError> {
    let cfg = &ctx.shared.config;
    let trainer = Trainer::for_run(&ctx.model_spec, cfg)?;
    info!(
        engine = trainer.engine(),
        threads = trainer.threads(),
        "learner update engine"
    );
    let final_path = ctx.run_dir.join("final.safetensors");
    let mut update_loop = UpdateLoop {
        trainer,
        ctx,
        pending_publish: None,
        held: Default::default(),
        checkpoints: Default::default(),
    };
    let (done_tx, done_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("learner-update".into())
        .spawn(move || {
            let result = update_loop.run(rx, resume).and_then(|outcome| {
                let bytes = update_loop.weights_bytes()?;
                write_atomic(&final_path, &bytes)
                    .map_err(|e| LearnerError::Io("final.safetensors".into(), e))?;
                Ok(outcome)
            });
            let _ = done_tx.send(result);
        })
        .map_err(|e| LearnerError::Thread(e.to_string()))?;
    Ok(done_rx)
}

/// Reads the evaluations the summary reports into `shared.evals`, once the
/// final version's has arrived (waiting at most
/// `learner.final_eval_timeout_secs`).
async fn final_evals(
    publisher: &Publisher,
    shared: &Shared,
    outcome: &LoopOutcome,
    shutdown: &CancellationToken,
) {
    let book = &shared.evals;
    if !outcome.completed {
        // Stopped early: whatever the evaluator has filed so far, without
        // waiting long (a container stop allows a few seconds in all).
        let filed = tokio::time::timeout(
            Duration::from_secs(2),
            book.read_new(publisher, &shared.run_id),
        );
        match filed.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!("reading evaluations: {}", e.message()),
            Err(_) => warn!("reading evaluations: no answer within 2 s"),
        }
        return;
    }
    let wait = Duration::from_secs(shared.config.learner.final_eval_timeout_secs);
    let run = &shared.run_id;
    let (version, never) = (outcome.final_version, CancellationToken::new());
    if !book.wait_for(publisher, run, version, wait, shutdown).await && shutdown.is_cancelled() {
        // Stopped mid-evaluation: the evaluator, stopped too, files what it
        // has played within a step; the summary reports it.
        book.wait_for(publisher, run, version, STOPPED_EVAL_WAIT, &never)
            .await;
    }
    if book.scores().of_version(outcome.final_version).is_none() {
        warn!(
            "no evaluation of the final version {} arrived; summary has none",
            outcome.final_version
        );
    }
}

/// How the run ended: what the update loop did, its clock (all segments),
/// the learner's devices, and evaluation's CPU time.
struct Ended<'a> {
    outcome: &'a LoopOutcome,
    clock: RunClock,
    devices: &'a DeviceChoice,
    cpu: EvalCpu,
    /// A local run's actor processes.
    processes: Option<&'a crate::processes::ActorProcesses>,
}

/// The summary of a run that `ended` so; its evaluations (final, best,
/// latest) are the whole run's, as `shared.evals` has kept them.
/// Writes `summary.json` and says how the run ended.
fn write_summary(
    run_dir: &std::path::Path,
    ended: &Ended<'_>,
    shared: &Shared,
) -> Result<Summary, LearnerError> {
    let summary = summarize(ended, shared);
    write_json_atomic(&run_dir.join("summary.json"), &summary)
        .map_err(|e| LearnerError::Io("summary.json".into(), e))?;
    info!(
        env_steps = summary.env_steps,
        sps = format!("{:.0}", summary.steps_per_second),
        final_eval = crate::summary::shown(summary.final_eval_return_mean),
        train_return = crate::summary::shown(summary.train_return_mean),
        eval_cpu_share = crate::summary::shown(summary.eval_cpu.share),
        "learner finished"
    );
    Ok(summary)
}

fn summarize(ended: &Ended<'_>, shared: &Shared) -> Summary {
    let Ended {
        outcome,
        clock,
        devices,
        cpu,
        processes,
    } = *ended;
    let processes = processes.map(|p| (p.report(), p.failure()));
    let own_peak = peak_rss(outcome).map(mib);
    let cfg = &shared.config;
    let wall = clock.wall_seconds();
    let scores = shared.evals.scores();
    let final_score = scores.of_version(outcome.final_version);
    let final_eval = final_score.as_ref().map(|s| s.return_mean);
    let (best, latest) = (scores.best.as_ref(), scores.latest.as_ref());
    let batches = shared.accounting.snapshot();
    let (train_return_mean, train_episodes) = shared.train_returns.mean();
    Summary {
        run_id: shared.run_id.clone(),
        env_id: cfg.env.id.clone(),
        seed: cfg.run.seed,
        env_steps: outcome.env_steps,
        wall_seconds: wall,
        steps_per_second: outcome.env_steps as f64 / wall.max(1e-9),
        segments: clock.segment,
        completed: outcome.completed,
        updates: outcome.updates,
        final_version: outcome.final_version,
        final_eval_return_mean: final_eval,
        final_eval_episodes: final_score.as_ref().map(|s| s.episodes),
        final_eval_episodes_asked: final_score.as_ref().map(|s| s.episodes_asked),
        final_eval_cut_by: final_score
            .as_ref()
            .map(|s| s.cut_by.clone())
            .filter(|c| !c.is_empty()),
        best_eval_return_mean: best.map(|r| r.return_mean),
        best_eval_version: best.map(|r| r.version),
        final_eval_matches: final_score.map(|s| s.matches).unwrap_or_default(),
        best_eval_matches: best.map(|s| s.matches.clone()).unwrap_or_default(),
        latest_eval_return_mean: latest.map(|r| r.return_mean),
        latest_eval_version: latest.map(|r| r.version),
        train_return_mean,
        train_episodes,
        eval_cpu: cpu,
        batches: batches.total,
        batches_per_actor: batches.per_actor,
        actors_folded: batches.departed.actors,
        batches_departed: batches.departed.batches,
        stopped_by_error: outcome
            .failure
            .clone()
            .or_else(|| processes.as_ref().and_then(|(_, why)| why.clone())),
        peak_rss_mib: own_peak.map(|p| p + processes.as_ref().map_or(0.0, |(r, _)| r.peak_rss_mib)),
        process_peak_rss_mib: own_peak,
        memory: memory_report(outcome, shared, processes.as_ref().map(|(r, _)| r)),
        actor_processes: processes.map(|(r, _)| r),
        kernels: sebulba_fused::kernels::active().name(),
        engine: if cfg.learner.engine.use_fused(&devices.devices, &cfg.network) {
            "fused"
        } else {
            "burn"
        },
        learner_devices: devices.devices.clone(),
        device_choice: devices.reason.clone(),
    }
}
