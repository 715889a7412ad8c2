//! `sebulba local`: param-server, learner, N actors and the evaluator in one
//! process, talking real gRPC over loopback on free ports; or the actors as
//! child processes ([`children`], `run.local_actors_as`).

mod children;
mod process;

use crate::cli::LocalArgs;
use crate::progress;
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Runs every role in this process; returns the learner's summary and the run directory.
pub async fn run(
    args: LocalArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<(sebulba_learner::summary::Summary, std::path::PathBuf)> {
    let config = args.config.resolve()?;
    let (run_dir, run_name) = args.config.run_dir(&config, args.fresh);
    let actors = args.actors.unwrap_or(config.run.local_actors);
    anyhow::ensure!(actors >= 1, "--actors: need at least one actor");
    let security = args.security.load()?;
    // Before anything starts: a tracker that cannot be had fails the command.
    let tracking = crate::track::start_for_run(&run_dir, &args.track)?;
    // With a CA given, roles dial each other over https (the certificate must
    // name 127.0.0.1, or --tls-domain the name it has).
    let scheme = if security.tls.ca.is_some() {
        "https"
    } else {
        "http"
    };

    let ps_listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the parameter server")?;
    let learner_listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the learner")?;
    let ps_url = format!("{scheme}://{}", ps_listener.local_addr()?);
    let learner_url = format!("{scheme}://{}", learner_listener.local_addr()?);
    let as_processes = config.run.local_actors_as.processes_for(&config.env.id);
    let hosting = if as_processes { "processes" } else { "threads" };
    info!(env = %config.env.id, seed = config.run.seed, actors, actors_as = hosting, run_dir = %run_dir.display(), "local run");

    // Roles stop on `roles`; the learner decides when training is over.
    // The parameter server stops only after the learner has returned: a
    // signal stops the evaluator mid-evaluation, and the learner reads its
    // partial report from the server for the summary.
    let roles = shutdown.child_token();
    let ps_stop = CancellationToken::new();
    let peers = Peers {
        ps_url: &ps_url,
        learner_url: &learner_url,
        security: &security,
        roles: &roles,
        ps_stop: &ps_stop,
    };
    let mut tasks = spawn_roles(&peers, ps_listener, &config, &run_dir);
    // The learner stops on a signal, or when the actor processes cannot go on.
    let learner_stop = shutdown.child_token();
    let actor_processes = if as_processes {
        let env = args.security.to_env();
        let stop = &learner_stop;
        Some(spawn_actor_processes(
            &mut tasks, &peers, &config, actors, env, stop,
        ))
    } else {
        spawn_actor_threads(&mut tasks, &peers, &config, actors);
        None
    };

    let deterministic_actors = if config.run.deterministic {
        (0..actors).map(actor_name).collect()
    } else {
        Vec::new()
    };
    let live = Arc::new(sebulba_learner::LiveProgress::new());
    let progress = progress::spawn(live.clone(), config.clone(), roles.clone());
    let opts = sebulba_learner::LearnerOptions {
        config,
        run_dir: run_dir.clone(),
        param_server: ps_url,
        live,
        security,
        start: crate::cli::run_start(args.resume, args.fresh),
        run_name,
        deterministic_actors,
        evaluator_in_process: true,
        actor_processes: actor_processes.clone(),
    };
    let result = sebulba_learner::run(learner_listener, opts, learner_stop).await;
    roles.cancel();
    ps_stop.cancel();
    let _ = progress.await;
    drain(&mut tasks).await;
    crate::track::end_of_run(tracking, &args.track, result.is_ok());
    let summary = result.context("learner")?;
    finished(summary, run_dir, actor_processes.as_deref())
}

/// How the run ended: an error when its actor processes ended it, else
/// the summary, logged.
fn finished(
    summary: sebulba_learner::summary::Summary,
    run_dir: std::path::PathBuf,
    actor_processes: Option<&sebulba_learner::processes::ActorProcesses>,
) -> anyhow::Result<(sebulba_learner::summary::Summary, std::path::PathBuf)> {
    if let Some(why) = actor_processes.and_then(|t| t.failure()) {
        anyhow::bail!(
            "{why} (summary: {})",
            run_dir.join("summary.json").display()
        );
    }
    info!(
        run_dir = %run_dir.display(),
        env_steps = summary.env_steps,
        sps = format!("{:.0}", summary.steps_per_second),
        final_eval = sebulba_learner::summary::shown(summary.final_eval_return_mean),
        best_eval = sebulba_learner::summary::shown(summary.best_eval_return_mean),
        "done"
    );
    Ok((summary, run_dir))
}

/// Where the roles reach each other, and what stops them.
struct Peers<'a> {
    ps_url: &'a str,
    learner_url: &'a str,
    security: &'a sebulba_transport::security::Security,
    roles: &'a CancellationToken,
    ps_stop: &'a CancellationToken,
}

type Roles = tokio::task::JoinSet<anyhow::Result<()>>;

/// The param-server and the evaluator, each on a task.
fn spawn_roles(
    p: &Peers<'_>,
    ps_listener: TcpListener,
    config: &sebulba_core::config::RunConfig,
    run_dir: &std::path::Path,
) -> Roles {
    let mut tasks = Roles::new();
    {
        let t = p.ps_stop.clone();
        let security = p.security.clone();
        tasks.spawn(async move {
            sebulba_param_server::run(ps_listener, &security, t)
                .await
                .map_err(anyhow::Error::from)
                .context("parameter server")
        });
    }
    {
        let opts = sebulba_evaluator::EvaluatorOptions {
            param_server: p.ps_url.to_string(),
            output: sebulba_evaluator::Output::Dir(run_dir.to_path_buf()),
            schedule: sebulba_evaluator::Overrides::all(&config.eval),
            seed: config.run.seed,
            device: sebulba_core::devices::DeviceKind::Cpu,
            security: p.security.clone(),
        };
        let t = p.roles.clone();
        tasks.spawn(async move {
            sebulba_evaluator::run(opts, t)
                .await
                .map(|_| ())
                .map_err(anyhow::Error::from)
                .context("evaluator")
        });
    }
    tasks
}

/// `actors` actors, each on a task of this process.
fn spawn_actor_threads(
    tasks: &mut Roles,
    p: &Peers<'_>,
    config: &sebulba_core::config::RunConfig,
    actors: usize,
) {
    for i in 0..actors {
        let opts = sebulba_actor::ActorOptions {
            learner: p.learner_url.to_string(),
            param_server: p.ps_url.to_string(),
            name: actor_name(i),
            send_queue: config.actor.send_queue,
            device: sebulba_core::devices::DeviceKind::Cpu,
            security: p.security.clone(),
        };
        let t = p.roles.clone();
        tasks.spawn(async move {
            sebulba_actor::run(opts, t)
                .await
                .map(|_| ())
                .map_err(anyhow::Error::from)
                .with_context(|| format!("actor {i}"))
        });
    }
}

/// `actors` actor processes, watched from a thread of their own until they
/// finish or the roles stop; a child given up may end the run through
/// `learner_stop` (`run.on_actor_give_up`). Returns their table, which the
/// learner's summary reads.
fn spawn_actor_processes(
    tasks: &mut Roles,
    p: &Peers<'_>,
    config: &sebulba_core::config::RunConfig,
    actors: usize,
    security: Vec<(&'static str, std::ffi::OsString)>,
    learner_stop: &CancellationToken,
) -> Arc<sebulba_learner::processes::ActorProcesses> {
    let args = children::ChildArgs {
        learner_url: p.learner_url.to_string(),
        ps_url: p.ps_url.to_string(),
        send_queue: config.actor.send_queue,
        security,
    };
    let table = Arc::new(sebulba_learner::processes::ActorProcesses::new(
        config.run.on_actor_give_up,
        config.run.actor_restarts,
    ));
    let supervision = children::Supervision {
        args,
        table: table.clone(),
        end_run: learner_stop.clone(),
    };
    let names: Vec<String> = (0..actors).map(actor_name).collect();
    let roles = p.roles.clone();
    tasks.spawn_blocking(move || {
        children::supervise(&supervision, &names, &roles);
        let report = supervision.table.report();
        let restarts: u32 = report.children.iter().map(|r| r.restarts).sum();
        info!(
            processes = report.children.len(),
            restarts,
            given_up = report.given_up.len(),
            peak_rss_mib = format!("{:.1}", report.peak_rss_mib),
            "actor processes stopped"
        );
        Ok(())
    });
    table
}

/// The name of local actor `i` (its lane in a deterministic run).
fn actor_name(i: usize) -> String {
    format!("local-{i}")
}

/// Waits (at most 10 s) for the roles to stop, logging their errors.
async fn drain(tasks: &mut Roles) {
    let all = async {
        while let Some(r) = tasks.join_next().await {
            match r {
                Ok(Err(e)) => warn!("{e:#}"),
                Err(e) => warn!("role task: {e}"),
                Ok(Ok(())) => {}
            }
        }
    };
    if tokio::time::timeout(Duration::from_secs(10), all)
        .await
        .is_err()
    {
        warn!("some roles did not stop within 10 s");
    }
}
