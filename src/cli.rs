//! Command-line flags. Every flag has a `SEBULBA_*` environment fallback so
//! containers can be configured without a command line.

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use sebulba_core::config::RunConfig;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "sebulba",
    version,
    about = "Asynchronous distributed PPO in the Sebulba style"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
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
}

/// The run configuration: preset for `--env`, then `--config`, then flags, then `--set`.
#[derive(Args, Debug, Clone)]
pub struct ConfigArgs {
    /// Environment id (CartPole-v1, Acrobot-v1, MountainCar-v0, Pendulum-v1, MountainCarContinuous-v0).
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
    /// Override one key, e.g. `--set ppo.learning_rate=3e-4` (repeatable).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    pub set: Vec<String>,
    /// Run directory (default: runs/<env>-seed<seed>-<unix time>).
    #[arg(long, env = "SEBULBA_RUN_DIR")]
    pub run_dir: Option<PathBuf>,
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
        sets.extend(self.set.iter().cloned());
        RunConfig::resolve(self.env.as_deref(), self.config.as_deref(), &sets)
            .context("invalid run configuration")
    }

    pub fn run_dir(&self, config: &RunConfig) -> PathBuf {
        self.run_dir.clone().unwrap_or_else(|| {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            PathBuf::from("runs").join(format!("{}-seed{}-{secs}", config.env.id, config.run.seed))
        })
    }
}

#[derive(Args, Debug)]
pub struct LocalArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Actors to start (default: the preset's run.local_actors).
    #[arg(long, env = "SEBULBA_ACTORS")]
    pub actors: Option<usize>,
}

#[derive(Args, Debug)]
pub struct ParamServerArgs {
    #[arg(long, env = "SEBULBA_LISTEN", default_value = "0.0.0.0:50052")]
    pub listen: String,
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
    #[arg(long, env = "SEBULBA_SEND_QUEUE", default_value_t = 1)]
    pub send_queue: usize,
}

#[derive(Args, Debug)]
pub struct EvaluatorArgs {
    #[arg(long, env = "SEBULBA_PARAM_SERVER")]
    pub param_server: String,
    #[arg(long, env = "SEBULBA_RUN_DIR")]
    pub run_dir: PathBuf,
    /// Evaluate every this many versions (the final version always).
    #[arg(long, env = "SEBULBA_EVAL_INTERVAL", default_value_t = 10)]
    pub interval: u64,
    /// Deterministic episodes per evaluation.
    #[arg(long, env = "SEBULBA_EVAL_EPISODES", default_value_t = 10)]
    pub episodes: usize,
    /// The run seed (evaluation envs derive theirs from it).
    #[arg(long, env = "SEBULBA_SEED", default_value_t = 1)]
    pub seed: u64,
}

fn default_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "actor".into())
}
