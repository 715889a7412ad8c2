//! The evaluator: follows the parameter server and, every `interval` versions
//! (and always for the final one, with `final_episodes` episodes), plays
//! episodes on its own environments by the run's evaluation protocol
//! (`eval.policy`: greedy, sampled or ε-greedy), within a budget of env
//! steps and a share of the cores. Results go to `eval.jsonl`; the best
//! weights to `best.safetensors`; each score is filed with the parameter
//! server too. Stopped mid-evaluation, it writes and files what it has.
//! Every `eval.video_every` evaluations it films the first episode
//! (`video`).

mod acting;
mod cpu;
mod episodes;
mod games;
mod line;
mod metrics;
mod run_dir;
mod schedule;
mod versions;
pub mod video;

pub use cpu::{Pacing, THREAD_NAME};
pub use episodes::{CutBy, EpisodeResults, Plan, play_episodes, play_filmed};
pub use games::{MatchResult, Player, play_match, rule_players, wilson_interval};
pub use line::{EvalLine, acting_for};
pub use run_dir::Output;
use run_dir::evaluated;
pub use schedule::{Overrides, Schedule};
use sebulba_core::policy::{InferencePolicy, network_from_wire};
use sebulba_proto::parameter_server_client::ParameterServerClient;
use sebulba_proto::{EvalReport, Weights};
use sebulba_runfiles::files::write_atomic;
use sebulba_runfiles::tensorboard::{self, MirroredLines};
use sebulba_transport::grpc::{SecureChannel, channel};
use sebulba_transport::security::{Class, Security};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

#[derive(Debug, thiserror::Error)]
pub enum EvaluatorError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("weights of version {version}: {reason}")]
    BadWeights { version: u64, reason: String },
    #[error("transport: {0}")]
    Transport(String),
    #[error("evaluation task: {0}")]
    Task(String),
}

pub struct EvaluatorOptions {
    pub param_server: String,
    /// Where `eval.jsonl` and `best.safetensors` go.
    pub output: Output,
    /// The evaluator's own schedule settings; each one not given follows
    /// the run's published schedule ([`Overrides::over`]).
    pub schedule: Overrides,
    /// The run seed; evaluation envs use `eval_seed(seed)`, the same start states for every version.
    pub seed: u64,
    /// Inference device (`cpu`, or `cuda:N` with the `cuda` feature).
    pub device: sebulba_core::devices::DeviceKind,
    /// The read-only token is sent on every call; TLS when a CA is given.
    pub security: Security,
}

/// Evaluates until the final version is done or `shutdown` fires; returns the
/// evaluations made.
pub async fn run(
    opts: EvaluatorOptions,
    shutdown: CancellationToken,
) -> Result<Vec<EvalLine>, EvaluatorError> {
    let (tx, mut rx) = watch::channel::<Option<Arc<Weights>>>(None);
    let mut follower = tokio::spawn(sebulba_transport::follow::follow_weights(
        opts.param_server.clone(),
        opts.security.clone(),
        Class::ReadOnly,
        tx,
        shutdown.child_token(),
    ));
    let mut ev = Evaluator::new(&opts)?;
    metrics::describe();
    loop {
        tokio::select! {
            r = rx.changed() => if r.is_err() {
                // The follower gave up: refused credentials end the evaluator.
                return match (&mut follower).await {
                    Ok(Err(s)) => Err(EvaluatorError::Transport(format!("parameter server: {}", s.message()))),
                    _ => Ok(ev.lines),
                };
            },
            _ = shutdown.cancelled() => break,
        }
        let Some(w) = rx.borrow_and_update().clone() else {
            continue;
        };
        if w.run_id != ev.run && !ev.follow_run(&w)? {
            continue;
        }
        let interval = ev.schedule.interval;
        let due = w.r#final || ev.last.is_none_or(|l| w.version >= l + interval);
        if !due || ev.last == Some(w.version) {
            continue;
        }
        let Some(line) = ev.evaluate(&w, &shutdown).await? else {
            continue;
        };
        let stopped = line.cut_by == Some(CutBy::Shutdown.name());
        ev.record(&w, line, &shutdown).await?;
        if w.r#final || stopped || shutdown.is_cancelled() {
            break;
        }
    }
    follower.abort();
    Ok(ev.lines)
}

/// The schedule run `w.run_id` publishes, if any; one out of range is
/// refused (logged naming the key, counted) and the evaluator's defaults
/// score the run.
fn published_schedule(w: &Weights) -> Option<Schedule> {
    match Schedule::published(w.eval.as_ref()?) {
        Ok(s) => Some(s),
        Err(e) => {
            warn!(run = %w.run_id, "the run's evaluation schedule (field `eval`) is refused, the defaults are used: {e}");
            metrics::schedule_refused();
            None
        }
    }
}

/// The evaluator's state between versions.
struct Evaluator<'a> {
    opts: &'a EvaluatorOptions,
    started: Instant,
    /// The run directory's `eval.jsonl` (with its TensorBoard mirror) and the
    /// directory, once a run is followed.
    out: Option<(MirroredLines, PathBuf)>,
    client: ParameterServerClient<SecureChannel>,
    /// Kept across versions of the same network (reloaded in place).
    policy: Option<InferencePolicy>,
    /// A game's earlier versions, the checkpoint opponents.
    earlier: versions::Earlier,
    /// The run of the versions evaluated, and its schedule.
    run: String,
    schedule: Schedule,
    last: Option<u64>,
    best: f64,
    lines: Vec<EvalLine>,
    /// CPU seconds of the evaluations made.
    cpu_seconds: f64,
    videos: Option<video::Videos>,
    /// The run's evaluations so far (`eval.jsonl`'s lines): which are filmed.
    evaluations: u64,
}

impl<'a> Evaluator<'a> {
    fn new(opts: &'a EvaluatorOptions) -> Result<Self, EvaluatorError> {
        let client = ParameterServerClient::new(
            channel(&opts.param_server, &opts.security, Some(Class::ReadOnly))
                .map_err(|e| EvaluatorError::Transport(e.to_string()))?,
        );
        Ok(Self {
            opts,
            started: Instant::now(),
            out: None,
            client,
            policy: None,
            earlier: versions::Earlier::new(versions::DEFAULT_KEEP),
            run: String::new(),
            schedule: Schedule::default_for(""),
            last: None,
            best: f64::NEG_INFINITY,
            lines: Vec::new(),
            cpu_seconds: 0.0,
            videos: None,
            evaluations: 0,
        })
    }

    /// Starts following run `w.run_id` (another run on the parameter server:
    /// its versions start afresh, its files go to its directory, and its
    /// schedule is the one it publishes unless the options say). False
    /// when the id cannot name a directory: its versions are not evaluated.
    fn follow_run(&mut self, w: &Weights) -> Result<bool, EvaluatorError> {
        let run_id = w.run_id.as_str();
        let Some(dir) = self.opts.output.dir_for(run_id) else {
            warn!(run = %run_id, "a run id that names no directory: not evaluated");
            return Ok(false);
        };
        std::fs::create_dir_all(&dir)
            .map_err(|e| EvaluatorError::Io(dir.display().to_string(), e))?;
        // Go on from what this directory already holds (an evaluator
        // restarted mid-run, or started after the run): no version twice.
        let (last, best, evaluations) = evaluated(&dir.join("eval.jsonl"));
        self.evaluations = evaluations;
        let out = MirroredLines::open(
            &dir.join("eval.jsonl"),
            &dir.join(tensorboard::EVALUATOR_DIR),
            "eval",
        )
        .map_err(|e| EvaluatorError::Io("eval.jsonl".into(), e))?;
        info!(run = %run_id, dir = %dir.display(), ?last, "following run");
        (self.run, self.last, self.best) = (run_id.to_string(), last, best);
        self.schedule = self.opts.schedule.over(&w.env_id, published_schedule(w));
        info!(run = %run_id, schedule = ?self.schedule, "evaluation schedule");
        self.videos = (self.schedule.video_every > 0)
            .then(|| video::Videos::open(&dir))
            .and_then(|v| {
                v.inspect_err(|e| warn!(run = %run_id, "no videos for this run: {e}"))
                    .ok()
            });
        self.out = Some((out, dir));
        self.earlier = versions::Earlier::new(self.schedule.earlier_versions);
        Ok(true)
    }

    /// The policy for version `w`: the current one reloaded when the network
    /// is unchanged, else a new one.
    fn policy_for(&mut self, w: &Weights) -> Result<InferencePolicy, EvaluatorError> {
        let bad = |reason: String| EvaluatorError::BadWeights {
            version: w.version,
            reason,
        };
        let env = sebulba_envs::env_spec_with(&w.env_id, &w.env_kwargs)
            .map_err(|e| bad(e.to_string()))?;
        let network = network_from_wire(&w.network.clone().unwrap_or_default())
            .map_err(|e| bad(e.to_string()))?;
        match self.policy.take() {
            Some(p) if p.spec().network == network && p.spec().obs_dim == env.obs_dim => Ok(p),
            _ => InferencePolicy::new(&env, &network, self.opts.device)
                .map_err(|e| bad(e.to_string())),
        }
    }

    /// Plays the episodes of version `w` on a thread of its own, named
    /// [`THREAD_NAME`] (its span continues the trace of the publish that
    /// made it), until they finish, its budget is spent or `stop` fires;
    /// `None` when its weights do not load.
    async fn evaluate(
        &mut self,
        w: &Weights,
        stop: &CancellationToken,
    ) -> Result<Option<EvalLine>, EvaluatorError> {
        let mut p = self.policy_for(w)?;
        if let Err(e) = p.load(w.version, w.safetensors.to_vec()) {
            warn!(version = w.version, "skipping unloadable weights: {e}");
            self.policy = Some(p);
            return Ok(None);
        }
        let s = &self.schedule;
        // Games are native ids: no spec (for a `gym:` id, a Python call) needed.
        let game = sebulba_envs::games::GAME_IDS.contains(&w.env_id.as_str());
        // A game's matches are played greedily (module `games`).
        let acted = if game {
            (sebulba_core::config::EvalPolicy::Greedy, 0.0)
        } else {
            line::acting_for(s, w.epsilon.is_some())
        };
        let seed = sebulba_core::config::eval_seed(self.opts.seed);
        let plan = s.plan(w.r#final, acted, seed);
        let earlier = if game {
            self.earlier.opponent_for(w)?
        } else {
            None
        };
        log_start(w, &plan);
        let t0 = Instant::now();
        let span = info_span!("evaluate", version = w.version, episodes = plan.episodes);
        sebulba_transport::trace::set_parent_from_map(&span, &w.trace_context);
        let (env_id, env_kwargs, stop) = (w.env_id.clone(), w.env_kwargs.clone(), stop.clone());
        let mut film = self.film_for(w, game);
        let (p, results, film) = on_eval_thread(move || {
            let _e = span.enter();
            let r = if game {
                let (seed, games) = (plan.seed, plan.episodes);
                let mut pacing = Pacing::new(&stop, plan.cpu_share);
                let earlier = earlier.as_ref();
                games::play_matches(&p, earlier, &env_id, &env_kwargs, games, seed, &mut pacing)
            } else {
                let film = film.as_mut().map(|f| f as &mut dyn video::Film);
                play_filmed(&p, &env_id, &env_kwargs, &plan, &stop, film).map(|r| (r, Vec::new()))
            };
            (p, r, film)
        })
        .await?;
        self.policy = Some(p);
        let (results, matches) = match results {
            Ok(r) => r,
            Err(episodes::PlayError::Stopped) => return Ok(None),
            Err(e) => {
                return Err(EvaluatorError::BadWeights {
                    version: w.version,
                    reason: e.to_string(),
                });
            }
        };
        if game {
            self.earlier.keep(w.version, &w.safetensors);
        }
        self.last = Some(w.version);
        self.evaluations += 1;
        if let (Some(v), Some(f)) = (&mut self.videos, film) {
            v.file(w.version, w.env_steps, f);
        }
        // The learner's training clock when it published this version (what
        // curves against wall time want); this evaluator's own clock only for
        // weights that do not carry it.
        let wall = if w.wall_seconds.is_finite() && w.wall_seconds > 0.0 {
            w.wall_seconds
        } else {
            self.started.elapsed().as_secs_f64()
        };
        let clocks = line::Clocks {
            eval_seconds: t0.elapsed().as_secs_f64(),
            wall_seconds: wall,
        };
        let mut line = EvalLine::new(w, &results, acted, clocks);
        line.matches = matches;
        Ok(Some(line))
    }

    /// Writes the line to `eval.jsonl`, keeps the best weights, and files the
    /// score with the parameter server.
    /// A recording of this evaluation's first episode, where one is due:
    /// every `eval.video_every` evaluations and the final one, never a
    /// game's matches.
    fn film_for(&self, w: &Weights, game: bool) -> Option<video::Recording> {
        let every = self.schedule.video_every;
        let due = every > 0 && (w.r#final || self.evaluations.is_multiple_of(every));
        let videos = self.videos.as_ref().filter(|_| due && !game)?;
        Some(videos.recording(w.version, w.r#final))
    }

    async fn record(
        &mut self,
        w: &Weights,
        line: EvalLine,
        shutdown: &CancellationToken,
    ) -> Result<(), EvaluatorError> {
        info!(
            version = line.version,
            env_steps = line.env_steps,
            return_mean = format!("{:.1}", line.return_mean),
            episodes = line.episodes,
            of = line.episodes_asked,
            cut_by = line.cut_by.unwrap_or("none"),
            cpu_seconds = format!("{:.1}", line.cpu_seconds),
            "evaluated"
        );
        // A run is followed before any of its versions is evaluated.
        if let Some((out, dir)) = &mut self.out {
            out.write(&line)
                .map_err(|e| EvaluatorError::Io("eval.jsonl".into(), e))?;
            // An evaluation of cut episodes alone is no candidate.
            let whole = line::scored_whole(line.episodes as u64, line.episodes_asked as u64);
            if whole && line.return_mean > self.best {
                self.best = line.return_mean;
                write_atomic(&dir.join("best.safetensors"), &w.safetensors)
                    .map_err(|e| EvaluatorError::Io("best.safetensors".into(), e))?;
            }
        }
        let report = line.report(&w.run_id);
        self.cpu_seconds += line.cpu_seconds;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let wall = self.started.elapsed().as_secs_f64().max(1e-9);
        metrics::evaluated(&line, self.cpu_seconds, self.cpu_seconds / (wall * cores));
        let span = info_span!("report_eval", version = line.version);
        sebulba_transport::trace::set_parent_from_map(&span, &w.trace_context);
        report_eval(self.client.clone(), report, shutdown)
            .instrument(span)
            .await;
        self.lines.push(line);
        Ok(())
    }
}

fn log_start(w: &Weights, plan: &Plan) {
    info!(
        version = w.version,
        evaluation = %if w.r#final { "final" } else { "periodic" },
        episodes = plan.episodes,
        max_steps = plan.max_steps,
        policy = %plan.policy.name(),
        "evaluating"
    );
}

/// Runs `work` on a new thread named [`THREAD_NAME`] (the threads it starts
/// inherit the name, and their CPU time is the evaluation's), off the
/// runtime's threads: a long evaluation starves no task, and the runtime
/// can end without waiting for it.
async fn on_eval_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, EvaluatorError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|e| EvaluatorError::Task(e.to_string()))?;
    rx.await
        .map_err(|_| EvaluatorError::Task("the evaluation thread died".into()))
}

/// Files a score with the parameter server, retrying briefly; a failure only costs the summary.
async fn report_eval(
    mut client: ParameterServerClient<SecureChannel>,
    report: EvalReport,
    shutdown: &CancellationToken,
) {
    for attempt in 0..20u32 {
        let mut req = tonic::Request::new(report.clone());
        // Stopping: one try, short, so that the process ends promptly.
        let stopping = shutdown.is_cancelled();
        req.set_timeout(Duration::from_secs(if stopping { 2 } else { 5 }));
        match client.report_eval(req).await {
            Ok(_) => return,
            Err(e) if attempt == 19 => warn!(
                version = report.version,
                "could not report evaluation: {}",
                e.message()
            ),
            Err(e) if stopping => {
                warn!(
                    version = report.version,
                    "could not report evaluation while stopping: {}",
                    e.message()
                );
                return;
            }
            Err(_) => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}
