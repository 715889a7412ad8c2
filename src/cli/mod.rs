//! Command-line flags. Every flag has a `SEBULBA_*` environment fallback so
//! containers can be configured without a command line.

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use sebulba_core::config::{EvalPolicy, RunConfig};
use sebulba_core::devices::DeviceKind;
use std::path::PathBuf;

mod bench;
mod security;
mod tools;
pub use bench::{BenchAgreeArgs, BenchCommand, BenchKernelsArgs, BenchLearnerArgs, BenchLocalArgs};
pub use security::SecurityArgs;
pub use tools::{
    CertsArgs, ExportArgs, ExportFormat, HealthArgs, PlotArgs, StatusArgs, SweepArgs, TrackArgs,
    WatchArgs,
};

#[derive(Parser, Debug)]
#[command(
    name = "sebulba",
    version,
    about = "Asynchronous distributed PPO in the Sebulba style"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Async worker threads (gRPC, ingest, publishing); default: one per CPU
    /// core. The learner's update loop, each local actor's rollout and the
    /// evaluator's episodes run on threads of their own besides these.
    #[arg(long, global = true, env = "SEBULBA_THREADS", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (e.g. `0.0.0.0:9464`;
    /// off when absent or empty). In local mode one endpoint carries every role;
    /// commands that are not services (health, bench, status, ...) ignore it.
    #[arg(long, global = true, env = "SEBULBA_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// With `--metrics-addr`: after the role has finished, keep serving this
    /// many seconds so a scraper reads the final figures (SIGTERM ends it).
    #[arg(long, global = true, env = "SEBULBA_METRICS_HOLD_SECS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub metrics_hold_secs: u64,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Every role in one process, over loopback gRPC.
    Local(LocalArgs),
    /// The versioned weight store.
    ParamServer(ParamServerArgs),
    /// Trajectory ingest, PPO updates, weight publishing.
    Learner(LearnerArgs),
    /// Steps environments and streams trajectories to the learner.
    Actor(ActorArgs),
    /// Scores published versions with deterministic episodes.
    Evaluator(EvaluatorArgs),
    /// Throughput benchmarks that print figures (and write them as JSON).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Exits 0 when the gRPC server at `--addr` reports SERVING on
    /// `grpc.health.v1` (container healthchecks).
    Health(HealthArgs),
    /// Writes a fresh CA (`ca.pem`), a server certificate it signed
    /// (`server.pem`, `server.key`) for `--names`, and three random role
    /// tokens (`tokens.env`, for `docker compose --env-file`): TLS and tokens
    /// without openssl.
    Certs(CertsArgs),
    /// Where a run stands, read from its parameter server: version, env
    /// steps, steps/s and the latest and best evaluations.
    Status(StatusArgs),
    /// Learning curves of run directories as a PNG: evaluation return against
    /// env steps and against wall time, runs that differ only in their seed
    /// drawn as one curve (mean, and the band between the lowest and highest
    /// seed).
    Plot(PlotArgs),
    /// Settings x seeds of `sebulba bench local`, `--jobs` at once, resumable:
    /// one table of final returns (median, lowest, highest, steps to a
    /// target) and one plot.
    Sweep(SweepArgs),
    /// A run's weights for other tools: `--format torch` writes a directory
    /// PyTorch loads as an `nn.Module` without sebulba, with a check of its
    /// outputs against sebulba's.
    Export(ExportArgs),
    /// Sends a run directory to experiment trackers (`--track`): what the
    /// run has written, then what it writes, until it ends (its
    /// `summary.json`), or until stopped; a later `track` goes on from
    /// there. For a cluster's runs, or a run whose tracker was down.
    Track(TrackArgs),
    /// A run's final (or best) policy playing the run's env as its final
    /// evaluation does (the same start states and protocol), each
    /// episode's return printed: how a trained agent does, from its files.
    Watch(WatchArgs),
}

impl Command {
    /// The role a command runs as a service (its default `service.name` is
    /// `sebulba-<role>`); benchmarks and health checks export no traces.
    pub fn role(&self) -> Option<&'static str> {
        match self {
            Command::Local(_) => Some("local"),
            Command::ParamServer(_) => Some("param-server"),
            Command::Learner(_) => Some("learner"),
            Command::Actor(_) => Some("actor"),
            Command::Evaluator(_) => Some("evaluator"),
            Command::Bench(_)
            | Command::Health(_)
            | Command::Certs(_)
            | Command::Status(_)
            | Command::Plot(_)
            | Command::Sweep(_)
            | Command::Export(_)
            | Command::Track(_)
            | Command::Watch(_) => None,
        }
    }

    /// What a command's spans are exported as (with
    /// OTEL_EXPORTER_OTLP_ENDPOINT): its role, or `status`, whose calls to the
    /// parameter server are then traces of their own rather than orphaned
    /// server spans.
    pub fn service_name(&self) -> Option<&'static str> {
        match self {
            Command::Status(_) => Some("status"),
            other => other.role(),
        }
    }
}

/// The run configuration: preset for `--env`, then `--config`, then flags, then `--set`.
#[derive(Args, Debug, Clone)]
pub struct ConfigArgs {
    /// Environment id (CartPole-v1, CartPoleNoVel-v1, Acrobot-v1, MountainCar-v0, Pendulum-v1, MountainCarContinuous-v0, the games, MinAtar/..., and `gym:`, `py:`, `ale:` ids).
    #[arg(long, env = "SEBULBA_ENV")]
    pub env: Option<String>,
    /// Env steps to train for (all actors together).
    #[arg(long, env = "SEBULBA_TOTAL_STEPS")]
    pub total_steps: Option<u64>,
    #[arg(long, env = "SEBULBA_SEED")]
    pub seed: Option<u64>,
    /// TOML run file (sections as in the run directory's config.toml).
    #[arg(long, env = "SEBULBA_CONFIG")]
    pub config: Option<PathBuf>,
    /// Override one key, e.g. `--set ppo.learning_rate=3e-4` (repeatable;
    /// `SEBULBA_SET` holds one per line, as a container's environment does).
    #[arg(
        long = "set",
        value_name = "SECTION.KEY=VALUE",
        env = "SEBULBA_SET",
        value_delimiter = '\n'
    )]
    pub set: Vec<String>,
    /// Run directory (default: runs/<run name>, or runs/<env>-seed<seed>-<unix
    /// time>). A directory with a checkpoint is resumed; one with another run's
    /// files and no checkpoint is refused (see --fresh).
    #[arg(long, env = "SEBULBA_RUN_DIR")]
    pub run_dir: Option<PathBuf>,
    /// A directory of runs (compose uses /runs): the learner resumes the
    /// unfinished run of its environment there, or starts a new run in
    /// `<root>/<run id>`; the evaluator writes each run's files there.
    #[arg(long, env = "SEBULBA_RUNS_ROOT", conflicts_with = "run_dir")]
    pub runs_root: Option<PathBuf>,
    /// The run's name: its id on the wire and in checkpoints, and its default
    /// run directory (letters, digits, `.`, `_`, `-`; at most 64).
    #[arg(long, env = "SEBULBA_RUN_NAME", value_parser = parse_run_name)]
    pub run_name: Option<String>,
    /// Learner devices, one model replica each, e.g. `cpu`, `cpu,cpu`, `cuda:0,cuda:1`
    /// (sets `learner.devices`).
    #[arg(
        long = "learner-devices",
        visible_alias = "devices",
        env = "SEBULBA_LEARNER_DEVICES",
        value_delimiter = ','
    )]
    pub learner_devices: Vec<String>,
}

impl ConfigArgs {
    pub fn resolve(&self) -> anyhow::Result<RunConfig> {
        let mut sets = Vec::new();
        if let Some(n) = self.total_steps {
            sets.push(format!("run.total_steps={n}"));
        }
        if let Some(s) = self.seed {
            sets.push(format!("run.seed={s}"));
        }
        if !self.learner_devices.is_empty() {
            let quoted: Vec<String> = self
                .learner_devices
                .iter()
                .map(|d| format!("{:?}", d.trim()))
                .collect();
            sets.push(format!("learner.devices=[{}]", quoted.join(",")));
        }
        // Blank lines of `SEBULBA_SET` (or the variable set empty) say nothing.
        sets.extend(self.set.iter().filter(|s| !s.trim().is_empty()).cloned());
        RunConfig::resolve(self.env.as_deref(), self.config.as_deref(), &sets)
            .context("invalid run configuration")
    }

    /// The learner's run directory and run name: `--run-dir`; `<root>/<name>`
    /// for `--run-name` (root `--runs-root`, default `runs`); under
    /// `--runs-root` the unfinished run to resume (unless `fresh`) or a new
    /// one; else `runs/<env>-seed<seed>-<time>`.
    pub fn run_dir(&self, config: &RunConfig, fresh: bool) -> (PathBuf, Option<String>) {
        let root = self.runs_root.clone();
        match (&self.run_dir, &self.run_name, root) {
            (Some(dir), name, _) => (dir.clone(), name.clone()),
            (None, Some(name), root) => (
                root.unwrap_or_else(|| PathBuf::from("runs")).join(name),
                Some(name.clone()),
            ),
            (None, None, Some(root)) => {
                sebulba_learner::run_dir::in_root(&root, &config.env.id, fresh)
            }
            (None, None, None) => (self.default_run_dir(config), None),
        }
    }

    fn default_run_dir(&self, config: &RunConfig) -> PathBuf {
        self.run_dir.clone().unwrap_or_else(|| {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            PathBuf::from("runs").join(format!("{}-seed{}-{secs}", config.env.id, config.run.seed))
        })
    }
}

#[derive(Args, Debug, Clone)]
pub struct LocalArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Actors to start (default: the preset's run.local_actors).
    #[arg(long, env = "SEBULBA_ACTORS")]
    pub actors: Option<usize>,
    /// Continue the run in `--run-dir` from its `checkpoint.bin` (required;
    /// without this flag a checkpoint found there is resumed anyway).
    #[arg(long, env = "SEBULBA_RESUME", conflicts_with = "fresh")]
    pub resume: bool,
    /// Start over in `--run-dir`, removing the previous run's files.
    #[arg(long, env = "SEBULBA_FRESH")]
    pub fresh: bool,
    #[command(flatten)]
    pub track: TrackFlag,
    #[command(flatten)]
    pub security: SecurityArgs,
}

#[derive(Args, Debug)]
pub struct ParamServerArgs {
    #[arg(long, env = "SEBULBA_LISTEN", default_value = "0.0.0.0:50052")]
    pub listen: String,
    #[command(flatten)]
    pub security: SecurityArgs,
}

#[derive(Args, Debug)]
pub struct LearnerArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[arg(long, env = "SEBULBA_LISTEN", default_value = "0.0.0.0:50051")]
    pub listen: String,
    /// Parameter server address, e.g. http://param-server:50052.
    #[arg(long, env = "SEBULBA_PARAM_SERVER")]
    pub param_server: String,
    /// Continue the run in `--run-dir` from its `checkpoint.bin` (required;
    /// without this flag a checkpoint found there is resumed anyway).
    #[arg(long, env = "SEBULBA_RESUME", conflicts_with = "fresh")]
    pub resume: bool,
    /// Start over in `--run-dir`, removing the previous run's files.
    #[arg(long, env = "SEBULBA_FRESH")]
    pub fresh: bool,
    #[command(flatten)]
    pub track: TrackFlag,
    #[command(flatten)]
    pub security: SecurityArgs,
}

#[derive(Args, Debug)]
pub struct ActorArgs {
    /// Learner address, e.g. http://learner:50051.
    #[arg(long, env = "SEBULBA_LEARNER")]
    pub learner: String,
    #[arg(long, env = "SEBULBA_PARAM_SERVER")]
    pub param_server: String,
    /// Name in logs and per-actor accounting (default: the host name).
    #[arg(long, env = "SEBULBA_ACTOR_NAME", default_value_t = default_name())]
    pub name: String,
    /// Batches in flight to the learner.
    #[arg(long, env = "SEBULBA_SEND_QUEUE", default_value_t = 1, value_parser = within::<usize>("actor.send_queue"))]
    pub send_queue: usize,
    /// Inference device: `cpu`, or `cuda:N` (binary built with `--features cuda`).
    #[arg(long, env = "SEBULBA_DEVICE", default_value = "cpu", value_parser = parse_device)]
    pub device: DeviceKind,
    #[command(flatten)]
    pub security: SecurityArgs,
}

#[derive(Args, Debug)]
pub struct EvaluatorArgs {
    #[arg(long, env = "SEBULBA_PARAM_SERVER")]
    pub param_server: String,
    /// The run directory to write into.
    #[arg(long, env = "SEBULBA_RUN_DIR", required_unless_present = "runs_root")]
    pub run_dir: Option<PathBuf>,
    /// A directory of runs: each run's files go to `<root>/<run id>`.
    #[arg(long, env = "SEBULBA_RUNS_ROOT", conflicts_with = "run_dir")]
    pub runs_root: Option<PathBuf>,
    /// Evaluate every this many versions (the final version always).
    /// Default: the run's `eval.interval`, which its learner publishes with
    /// the weights (so do the next three flags' `eval.*` keys).
    #[arg(long, env = "SEBULBA_EVAL_INTERVAL", value_parser = within::<u64>("eval.interval"))]
    pub interval: Option<u64>,
    /// Episodes per evaluation (a game: games against each
    /// opponent). Default: the run's `eval.episodes`.
    #[arg(long, env = "SEBULBA_EVAL_EPISODES", value_parser = within::<usize>("eval.episodes"))]
    pub episodes: Option<usize>,
    /// Episodes for the run's final version. Default: the
    /// run's `eval.final_episodes`.
    #[arg(long, env = "SEBULBA_EVAL_FINAL_EPISODES", value_parser = within::<usize>("eval.final_episodes"))]
    pub final_episodes: Option<usize>,
    /// A game's earlier versions kept as opponents (each one copy of the
    /// weights: about 2 MB for Big Two). Default: the run's
    /// `eval.earlier_versions`.
    #[arg(long, env = "SEBULBA_EVAL_EARLIER_VERSIONS", value_parser = within::<usize>("eval.earlier_versions"))]
    pub earlier_versions: Option<usize>,
    /// How evaluation acts: `greedy`, `sample` or `epsilon`. Default: the
    /// run's `eval.policy`.
    #[arg(long = "policy", env = "SEBULBA_EVAL_POLICY", value_parser = parse_eval_policy)]
    pub eval_policy: Option<EvalPolicy>,
    /// The random action's probability under `--policy epsilon`. Default:
    /// the run's `eval.epsilon`.
    #[arg(long, env = "SEBULBA_EVAL_EPSILON", value_parser = within_real("eval.epsilon"))]
    pub epsilon: Option<f64>,
    /// Env steps one periodic evaluation may play (summed over its
    /// episodes; the rest are cut). Default: the run's `eval.max_steps`.
    #[arg(long, env = "SEBULBA_EVAL_MAX_STEPS", value_parser = within::<u64>("eval.max_steps"))]
    pub max_steps: Option<u64>,
    /// The same for the final evaluation. Default: the run's
    /// `eval.final_max_steps`.
    #[arg(long, env = "SEBULBA_EVAL_FINAL_MAX_STEPS", value_parser = within::<u64>("eval.final_max_steps"))]
    pub final_max_steps: Option<u64>,
    /// The share of the machine's cores, (0, 1], a periodic evaluation may
    /// take. Default: the run's `eval.cpu_share`.
    #[arg(long, env = "SEBULBA_EVAL_CPU_SHARE", value_parser = within_real("eval.cpu_share"))]
    pub cpu_share: Option<f64>,
    /// Film the first episode of every this many evaluations, and of the
    /// final one, into the run's `videos/` (0: never). Default: the run's
    /// `eval.video_every`.
    #[arg(long, env = "SEBULBA_EVAL_VIDEO_EVERY", value_parser = within::<u64>("eval.video_every"))]
    pub video_every: Option<u64>,
    /// The run seed (evaluation envs derive theirs from it).
    #[arg(long, env = "SEBULBA_SEED", default_value_t = 1)]
    pub seed: u64,
    /// Inference device: `cpu`, or `cuda:N` (binary built with `--features cuda`).
    #[arg(long, env = "SEBULBA_DEVICE", default_value = "cpu", value_parser = parse_device)]
    pub device: DeviceKind,
    #[command(flatten)]
    pub security: SecurityArgs,
}

impl EvaluatorArgs {
    /// The schedule settings given on the command line.
    pub fn overrides(&self) -> sebulba_evaluator::Overrides {
        sebulba_evaluator::Overrides {
            interval: self.interval,
            episodes: self.episodes,
            final_episodes: self.final_episodes,
            earlier_versions: self.earlier_versions,
            policy: self.eval_policy,
            epsilon: self.epsilon,
            max_steps: self.max_steps,
            final_max_steps: self.final_max_steps,
            cpu_share: self.cpu_share,
            video_every: self.video_every,
        }
    }
}

fn parse_eval_policy(s: &str) -> Result<EvalPolicy, String> {
    EvalPolicy::from_name(s)
        .ok_or_else(|| format!("`{s}`: expected one of {}", EvalPolicy::NAMES.join(", ")))
}

/// A parser of a real-valued flag that sets `key`, held to its range.
fn within_real(key: &'static str) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync {
    move |text: &str| {
        let x: f64 = text
            .parse()
            .map_err(|_| format!("expected a number, got `{text}`"))?;
        sebulba_core::config::ranges::check_real(key, x).map_err(|e| e.to_string())?;
        Ok(x)
    }
}

fn parse_device(s: &str) -> Result<DeviceKind, String> {
    DeviceKind::parse(s).ok_or_else(|| format!("unknown device `{s}` (expected cpu or cuda:N)"))
}

fn default_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "actor".into())
}

/// A flag parser holding a whole number to the range of config key `key`
/// (`core/src/config/ranges.rs`), so flags and run files agree.
fn within<T>(key: &'static str) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: std::str::FromStr + TryFrom<u64>,
{
    move |text: &str| {
        let n: u64 = text
            .parse()
            .map_err(|_| format!("expected a whole number, got `{text}`"))?;
        sebulba_core::config::ranges::check_key(key, n).map_err(|e| e.to_string())?;
        T::try_from(n).map_err(|_| format!("{n} does not fit"))
    }
}

/// A run name: safe as a directory name and a wire id.
/// `--track`: experiment trackers the run is sent to as it goes.
#[derive(Args, Debug, Clone, Default)]
pub struct TrackFlag {
    /// Send the run to an experiment tracker as it goes (repeatable, or
    /// comma-separated): `mlflow=http://HOST:5000` (MLflow's REST API) or
    /// `wandb[=PROJECT]` (Weights & Biases, offline without credentials). A
    /// tracker that fails never stops or slows training; see
    /// docs/operations.md, Experiment trackers.
    #[arg(long, env = "SEBULBA_TRACK", value_delimiter = ',', value_parser = parse_track)]
    pub track: Vec<sebulba_tracking::Track>,
    /// At the run's end, how long a failing tracker is waited for before
    /// the rest is left in the run directory for `sebulba track`.
    #[arg(long, env = "SEBULBA_TRACK_WAIT_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub track_wait_secs: u64,
}

fn parse_track(text: &str) -> Result<sebulba_tracking::Track, String> {
    text.parse()
        .map_err(|e: sebulba_tracking::TrackError| e.to_string())
}

fn parse_run_name(text: &str) -> Result<String, String> {
    let ok = !text.is_empty()
        && text.len() <= 64
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !text.starts_with('.');
    if ok {
        Ok(text.to_string())
    } else {
        Err(format!(
            "`{text}`: 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.`"
        ))
    }
}

/// How the learner treats its run directory, from `--resume` / `--fresh`.
pub fn run_start(resume: bool, fresh: bool) -> sebulba_learner::RunStart {
    match (resume, fresh) {
        (true, _) => sebulba_learner::RunStart::Resume,
        (_, true) => sebulba_learner::RunStart::Fresh,
        _ => sebulba_learner::RunStart::Auto,
    }
}
