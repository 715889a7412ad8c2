//! `sebulba`: one binary for every role. This file parses the command line,
//! sets up the runtime, telemetry and signal handling, and hands over to the
//! role crates (or to [`bench`], [`local`] and [`certs`] in this package).

mod bench;
mod certs;
mod cli;
mod export;
mod local;
mod plot;
mod progress;
mod status;
mod sweep;
mod track;
mod watch;

use anyhow::Context;
use clap::Parser;
use cli::{Cli, Command};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::info;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // `gym:` and `py:` environment ids (the interpreter starts on first use).
    #[cfg(feature = "python")]
    sebulba_pyenv::install();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = cli.threads {
        rt.worker_threads(n.into());
    }
    let rt = rt
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let telemetry = match cli.command.service_name() {
        // Services export traces when OTEL_EXPORTER_OTLP_ENDPOINT is set.
        Some(role) => rt.block_on(async { sebulba_transport::telemetry::init(role) })?,
        None => {
            sebulba_transport::telemetry::init_logging();
            sebulba_transport::telemetry::Telemetry::default()
        }
    };
    // Services only: a `sebulba health` run as a container's healthcheck
    // inherits SEBULBA_METRICS_ADDR and must not try to bind the service's port.
    let metrics = cli
        .metrics_addr
        .clone()
        .filter(|a| !a.trim().is_empty() && cli.command.role().is_some());
    if let Some(addr) = &metrics {
        let addr = rt.block_on(sebulba_transport::metrics::serve(addr))?;
        // Tests read the port back from `metrics=IP:PORT` when they asked for port 0.
        info!(metrics = %addr, "serving Prometheus metrics at /metrics");
    }
    // A bad SEBULBA_KERNELS is refused here, before any role computes.
    let kernels = sebulba_fused::kernels::select_from_env()?;
    if cli.command.role().is_some() {
        info!(kernels = kernels.name(), "fused kernels");
    }
    let hold = metrics
        .is_some()
        .then(|| std::time::Duration::from_secs(cli.metrics_hold_secs));
    let result = rt.block_on(run(cli, hold));
    // Flush the last spans (the final update, the summary) before exiting.
    telemetry.shutdown();
    // Whatever still runs on the runtime's blocking threads (a Python call
    // that has not returned) does not hold the process: it exits now.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}

/// Cancels `token` on SIGINT or SIGTERM.
fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(_) => return,
                };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        info!("shutting down");
        token.cancel();
    });
}

/// `sebulba learner`: the learner role on its own.
async fn run_learner(args: cli::LearnerArgs, shutdown: CancellationToken) -> anyhow::Result<()> {
    let security = args.security.load()?;
    let config = args.config.resolve()?;
    let (run_dir, run_name) = args.config.run_dir(&config, args.fresh);
    let tracking = track::start_for_run(&run_dir, &args.track)?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let opts = sebulba_learner::LearnerOptions {
        config,
        run_dir: run_dir.clone(),
        param_server: args.param_server,
        live: Arc::new(sebulba_learner::LiveProgress::new()),
        security,
        start: crate::cli::run_start(args.resume, args.fresh),
        run_name,
        // Deterministic runs are `sebulba local`'s: it knows its actors.
        deterministic_actors: Vec::new(),
        evaluator_in_process: false,
        actor_processes: None,
    };
    let summary = sebulba_learner::run(listener, opts, shutdown).await;
    track::end_of_run(tracking, &args.track, summary.is_ok());
    let summary = summary?;
    info!(run_dir = %run_dir.display(), env_steps = summary.env_steps, final_eval = sebulba_learner::summary::shown(summary.final_eval_return_mean), "summary written");
    Ok(())
}

/// Runs the command; then, with a metrics endpoint, keeps it up for `hold`
/// (or until a signal) so the final figures can be scraped.
async fn run(cli: Cli, hold: Option<std::time::Duration>) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let result = run_command(cli, shutdown.clone()).await;
    if let Some(hold) = hold.filter(|h| !h.is_zero()) {
        info!(
            seconds = hold.as_secs(),
            "holding the metrics endpoint open"
        );
        tokio::select! {
            _ = tokio::time::sleep(hold) => {}
            _ = shutdown.cancelled() => {}
        }
    }
    result
}

async fn run_command(cli: Cli, shutdown: CancellationToken) -> anyhow::Result<()> {
    match cli.command {
        Command::Local(args) => local::run(args, shutdown).await.map(|_| ()),
        Command::ParamServer(args) => {
            let listener = tokio::net::TcpListener::bind(&args.listen)
                .await
                .with_context(|| format!("binding {}", args.listen))?;
            let security = args.security.load()?;
            sebulba_param_server::run(listener, &security, shutdown).await?;
            Ok(())
        }
        Command::Learner(args) => run_learner(args, shutdown).await,
        Command::Actor(args) => {
            let opts = sebulba_actor::ActorOptions {
                learner: args.learner,
                param_server: args.param_server,
                name: args.name,
                send_queue: args.send_queue,
                device: args.device,
                security: args.security.load()?,
            };
            let report = sebulba_actor::run(opts, shutdown).await?;
            info!(
                batches = report.batches_sent,
                env_steps = report.env_steps,
                "actor done"
            );
            Ok(())
        }
        Command::Evaluator(args) => {
            let opts = sebulba_evaluator::EvaluatorOptions {
                param_server: args.param_server.clone(),
                output: match (args.run_dir.clone(), args.runs_root.clone()) {
                    (Some(dir), _) => sebulba_evaluator::Output::Dir(dir),
                    (None, Some(root)) => sebulba_evaluator::Output::PerRun(root),
                    (None, None) => anyhow::bail!("--run-dir or --runs-root is required"),
                },
                schedule: args.overrides(),
                seed: args.seed,
                device: args.device,
                security: args.security.load()?,
            };
            let lines = sebulba_evaluator::run(opts, shutdown).await?;
            info!(evaluations = lines.len(), "evaluator done");
            Ok(())
        }
        Command::Bench(cmd) => bench::run(cmd, shutdown).await,
        Command::Health(args) => sebulba_transport::grpc::check_health(
            &args.addr,
            &args.service,
            std::time::Duration::from_secs(args.timeout_secs),
            &args.security.load()?,
        )
        .await
        .map_err(|e| anyhow::anyhow!("not healthy: {e}")),
        Command::Certs(args) => certs::write(&args.out, &args.names),
        Command::Status(args) => status::run(args).await,
        Command::Plot(args) => plot::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Watch(args) => tokio::task::block_in_place(|| watch::run(&args)),
        Command::Track(args) => tokio::task::block_in_place(|| track::run(&args, &shutdown)),
        Command::Sweep(args) => tokio::task::block_in_place(|| sweep::run(&args, &shutdown)),
    }
}
