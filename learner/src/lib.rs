//! The learner: trajectory ingest service, bounded on-policy pipeline, GAE and PPO
//! updates, weight publishing, metrics and the run summary.

pub mod accounting;
pub mod bench;
pub mod bench_transport;
pub mod checkpoint;
pub mod fused;
pub mod gae;
pub mod ppo;
pub mod prepare;
pub mod publish;
pub mod reward_scale;
pub mod service;
pub mod state;
pub mod summary;
pub mod update;
pub mod validate;

use crate::publish::Publisher;
use crate::service::LearnerService;
pub use crate::state::LiveStats;
use crate::state::Shared;
use crate::summary::Summary;
use crate::update::UpdateLoop;
use burn::tensor::backend::AutodiffBackend;
use sebulba_core::config::RunConfig;
use sebulba_core::devices::LearnerDevices;
use sebulba_core::files::{JsonLines, write_atomic, write_json_atomic};
use sebulba_core::model::ModelSpec;
use sebulba_proto::grpc::MAX_MESSAGE_BYTES;
use sebulba_proto::learner_server::LearnerServer;
use sebulba_proto::security::Security;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tracing::{info, warn};

#[derive(Debug, thiserror::Error)]
pub enum LearnerError {
    #[error("config: {0}")]
    Config(String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("weights: {0}")]
    Weights(String),
    #[error("publishing to the parameter server failed: {0}")]
    Publish(String),
    #[error("transport: {0}")]
    Transport(String),
    #[error("update thread: {0}")]
    Thread(String),
    #[error("update: {0}")]
    Update(String),
    #[error("checkpoint: {0}")]
    Checkpoint(String),
}

pub struct LearnerOptions {
    pub config: RunConfig,
    pub run_dir: PathBuf,
    /// Parameter server URL (`http://host:port`).
    pub param_server: String,
    pub live: Arc<LiveStats>,
    /// Tokens accepted from actors; the learner token sent when publishing; TLS.
    pub security: Security,
    /// Continue from the run directory's `checkpoint.bin`.
    pub resume: bool,
}

/// Serves `Learner` on `listener` and trains until the step budget is reached or
/// `shutdown` fires; writes `config.toml`, `metrics.jsonl`, `final.safetensors`
/// and `summary.json` in the run directory.
pub async fn run(
    listener: TcpListener,
    opts: LearnerOptions,
    shutdown: CancellationToken,
) -> Result<Summary, LearnerError> {
    let started = Instant::now();
    let cfg = opts.config;
    cfg.validate()
        .map_err(|e| LearnerError::Config(e.to_string()))?;
    let env = sebulba_core::env::env_spec(&cfg.env.id)
        .map_err(|e| LearnerError::Config(e.to_string()))?;
    let run_dir = opts.run_dir;
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| LearnerError::Io(run_dir.display().to_string(), e))?;
    // Read (and check) the checkpoint before anything is served or written.
    let resume = if opts.resume {
        let ck = checkpoint::Checkpoint::read(&run_dir)
            .map_err(|e| LearnerError::Checkpoint(e.to_string()))?
            .ok_or_else(|| {
                LearnerError::Config(format!(
                    "--resume: no {} in {}",
                    checkpoint::FILE,
                    run_dir.display()
                ))
            })?;
        if ck.meta.env_id != cfg.env.id {
            return Err(LearnerError::Config(format!(
                "--resume: field `env.id`: the checkpoint is for {}, this run is {}",
                ck.meta.env_id, cfg.env.id
            )));
        }
        if ck.meta.network != cfg.network {
            return Err(LearnerError::Config(
                "--resume: section `network` differs from the checkpoint's; the weights cannot be loaded".into(),
            ));
        }
        info!(
            env_steps = ck.meta.env_steps,
            updates = ck.meta.updates,
            "checkpoint found"
        );
        Some(ck)
    } else {
        None
    };
    write_atomic(&run_dir.join("config.toml"), cfg.to_toml().as_bytes())
        .map_err(|e| LearnerError::Io("config.toml".into(), e))?;
    let model_spec = ModelSpec::new(&env, &cfg.network);
    let shared = Arc::new(Shared::new(cfg.clone(), env));

    let (queue_tx, queue_rx) = mpsc::channel(cfg.learner.queue_capacity);
    let gate = opts.security.gate();
    let service = LearnerService {
        shared: shared.clone(),
        queue: queue_tx,
        gate: gate.clone(),
    };
    let server_stop = CancellationToken::new();
    let reflection =
        sebulba_proto::grpc::reflection().map_err(|e| LearnerError::Transport(e.to_string()))?;
    let health = sebulba_proto::grpc::health(&["sebulba.v1.Learner"]).await;
    let local = listener
        .local_addr()
        .map_err(|e| LearnerError::Io("listener".into(), e))?;
    let mut builder = sebulba_proto::grpc::server(&opts.security)
        .map_err(|e| LearnerError::Transport(e.to_string()))?;
    let server = {
        let stop = server_stop.clone();
        tokio::spawn(
            builder
                .add_service(health)
                .add_service(InterceptedService::new(reflection, gate.any_class()))
                .add_service(
                    LearnerServer::new(service)
                        .max_decoding_message_size(MAX_MESSAGE_BYTES)
                        .max_encoding_message_size(MAX_MESSAGE_BYTES),
                )
                .serve_with_incoming_shutdown(
                    sebulba_proto::grpc::incoming(listener),
                    stop.cancelled_owned(),
                ),
        )
    };
    info!(%local, env = %cfg.env.id, total_steps = cfg.run.total_steps, tls = opts.security.tls.identity.is_some(), auth = gate.is_enforcing(), "learner serving");

    let publisher = Publisher::new(&opts.param_server, &opts.security)
        .map_err(|e| LearnerError::Transport(e.to_string()))?;
    if let Some(ck) = &resume {
        // Updates after the checkpoint are done again: their old lines go.
        trim_metrics(&run_dir.join("metrics.jsonl"), ck.meta.updates)
            .map_err(|e| LearnerError::Io("metrics.jsonl".into(), e))?;
    }
    let metrics = JsonLines::append_to(&run_dir.join("metrics.jsonl"))
        .map_err(|e| LearnerError::Io("metrics.jsonl".into(), e))?;
    let devices = LearnerDevices::parse(&cfg.learner.devices)
        .map_err(|e| LearnerError::Config(format!("learner.devices: {e}")))?;
    let parts = LoopParts {
        shared: shared.clone(),
        live: opts.live.clone(),
        normalizers: prepare::Normalizers::new(&cfg, model_spec.obs_dim),
        model_spec,
        publisher: publisher.clone(),
        metrics,
        started,
        queue_rx,
        stop: shutdown.clone(),
        final_path: run_dir.join("final.safetensors"),
        run_dir: run_dir.clone(),
        resume,
    };
    info!(devices = ?cfg.learner.devices, "learner replicas");
    let done_rx = match devices {
        LearnerDevices::Cpu(n) => {
            spawn_update_loop::<sebulba_core::CpuAutodiff>(parts, vec![Default::default(); n])?
        }
        #[cfg(feature = "cuda")]
        LearnerDevices::Cuda(ids) => {
            spawn_update_loop::<burn::backend::Autodiff<burn_cuda::Cuda<f32, i32>>>(
                parts,
                ids.into_iter().map(burn_cuda::CudaDevice::new).collect(),
            )?
        }
        #[cfg(not(feature = "cuda"))]
        LearnerDevices::Cuda(_) => {
            return Err(LearnerError::Config(
                "learner.devices: cuda devices need a binary built with `--features cuda`".into(),
            ));
        }
    };
    let outcome = done_rx
        .await
        .map_err(|_| LearnerError::Thread("update thread died".into()))?;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            server_stop.cancel();
            return Err(e);
        }
    };
    let wall = started.elapsed().as_secs_f64();

    // The summary reports the final version's evaluation: wait for it (bounded).
    let mut evals = Vec::new();
    if outcome.completed {
        let deadline = Instant::now() + Duration::from_secs(cfg.learner.final_eval_timeout_secs);
        loop {
            match publisher.evals().await {
                Ok(r) => evals = r,
                Err(e) => warn!("reading evaluations: {}", e.message()),
            }
            if evals.iter().any(|r| r.version == outcome.final_version)
                || Instant::now() >= deadline
                || shutdown.is_cancelled()
            {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }
    let final_eval = evals
        .iter()
        .find(|r| r.version == outcome.final_version)
        .map(|r| r.return_mean);
    if outcome.completed && final_eval.is_none() {
        warn!(
            "no evaluation of the final version {} arrived; summary has none",
            outcome.final_version
        );
    }
    let best = evals
        .iter()
        .max_by(|a, b| a.return_mean.total_cmp(&b.return_mean));
    let (batches, batches_per_actor) = shared.accounting.snapshot();
    let summary = Summary {
        env_id: cfg.env.id.clone(),
        seed: cfg.run.seed,
        env_steps: outcome.env_steps,
        wall_seconds: wall,
        steps_per_second: outcome.env_steps as f64 / wall.max(1e-9),
        updates: outcome.updates,
        final_version: outcome.final_version,
        final_eval_return_mean: final_eval,
        best_eval_return_mean: best.map(|r| r.return_mean),
        best_eval_version: best.map(|r| r.version),
        batches,
        batches_per_actor,
        peak_rss_mib: sebulba_core::memory::peak_rss_bytes().map(|b| b as f64 / (1 << 20) as f64),
    };
    write_json_atomic(&run_dir.join("summary.json"), &summary)
        .map_err(|e| LearnerError::Io("summary.json".into(), e))?;
    info!(env_steps = summary.env_steps, sps = format!("{:.0}", summary.steps_per_second), final_eval = ?summary.final_eval_return_mean, "learner finished");

    server_stop.cancel();
    match tokio::time::timeout(Duration::from_secs(5), server).await {
        Ok(Ok(Err(e))) => warn!("learner server: {e}"),
        Err(_) => warn!("learner server did not stop within 5 s; leaving it"),
        _ => {}
    }
    Ok(summary)
}

/// Keeps the lines of `metrics.jsonl` up to update `updates` (atomically).
fn trim_metrics(path: &std::path::Path, updates: u64) -> std::io::Result<()> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let kept: String = text
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["update"].as_u64())
                .is_some_and(|u| u <= updates)
        })
        .flat_map(|l| [l, "\n"])
        .collect();
    write_atomic(path, kept.as_bytes())
}

/// Everything the update thread takes, whatever the backend.
struct LoopParts {
    shared: Arc<Shared>,
    live: Arc<LiveStats>,
    normalizers: prepare::Normalizers,
    model_spec: ModelSpec,
    publisher: Publisher,
    metrics: JsonLines,
    started: Instant,
    queue_rx: mpsc::Receiver<validate::DecodedBatch>,
    stop: CancellationToken,
    final_path: PathBuf,
    run_dir: PathBuf,
    resume: Option<checkpoint::Checkpoint>,
}

type LoopResult = Result<update::LoopOutcome, LearnerError>;

/// Starts the update loop on its own thread with one replica per device.
fn spawn_update_loop<B: AutodiffBackend>(
    p: LoopParts,
    devices: Vec<B::Device>,
) -> Result<oneshot::Receiver<LoopResult>, LearnerError> {
    let cfg = p.shared.config.clone();
    let mut ppo = ppo::Ppo::<B>::new(&p.model_spec, &cfg.ppo, cfg.run.seed, devices)
        .map_err(|e| LearnerError::Config(e.to_string()))?;
    ppo::use_configured_engine(&mut ppo, &cfg)
        .map_err(|e| LearnerError::Config(format!("learner.engine: {e}")))?;
    info!(engine = ppo.engine(), "learner update engine");
    let mut update_loop = UpdateLoop {
        shared: p.shared,
        live: p.live,
        ppo,
        normalizers: p.normalizers,
        model_spec: p.model_spec,
        publisher: p.publisher,
        rt: tokio::runtime::Handle::current(),
        metrics: p.metrics,
        started: p.started,
        run_dir: p.run_dir,
        resume: p.resume,
    };
    let (done_tx, done_rx) = oneshot::channel();
    let (queue_rx, stop, final_path) = (p.queue_rx, p.stop, p.final_path);
    std::thread::Builder::new()
        .name("learner-update".into())
        .spawn(move || {
            let result = update_loop.run(queue_rx, stop).and_then(|outcome| {
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
