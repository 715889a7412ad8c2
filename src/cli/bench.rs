//! The arguments of `sebulba bench`'s commands: each measures one part of
//! a run alone (the learner, the envs, inference, transport) or all of it.

use super::{ConfigArgs, LocalArgs};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// PPO-update samples/s for the run configuration's network, epochs,
    /// minibatches and `--learner-devices`, on synthetic data.
    Learner(BenchLearnerArgs),
    /// The same PPO updates on the fused CPU engine and on burn on
    /// `--learner-devices` (cuda:0 on a GPU machine), from the same weights
    /// and batch: how far apart the parameters end. Exits non-zero when
    /// they disagree.
    Agree(BenchAgreeArgs),
    /// Env steps/s of every environment through the vectorised env, random
    /// actions, no learner (one thread; `--processes N` for N at once).
    Envs(BenchEnvsArgs),
    /// Policy forward passes/s at the actor's batch size (CPU).
    Inference(BenchInferenceArgs),
    /// A turn-based game's fixed players (random and the rule-based ones)
    /// against each other: each in one seat against the same player in
    /// every other seat, win rates with 95% intervals; how strong each
    /// evaluation opponent is.
    Rules(BenchRulesArgs),
    /// Trajectory batches encoded, sent over loopback gRPC, decoded and validated.
    Transport(BenchTransportArgs),
    /// The fused engine's matrix products at the presets' shapes on every
    /// kernel path this CPU has, beside matrixmultiply: GFLOP/s on one
    /// core and the fraction of the path's peak.
    Kernels(BenchKernelsArgs),
    /// The end-to-end local run: env steps/s as a fraction of the env source
    /// alone (measured first), where the actors' time went, how busy the
    /// learner was, wall time, final evaluation and peak memory.
    Local(Box<BenchLocalArgs>),
}

#[derive(Args, Debug)]
pub struct BenchLocalArgs {
    #[command(flatten)]
    pub local: LocalArgs,
    /// Also report the env steps at the first evaluation whose mean return
    /// reaches this (the learning-curve check; 475 for CartPole-v1).
    #[arg(long)]
    pub target_return: Option<f64>,
    /// Seconds of the env-only measurement before the run (the run's env
    /// source, envs per actor and actors, random actions); 0 skips it.
    #[arg(long, default_value_t = 5.0)]
    pub env_seconds: f64,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BenchKernelsArgs {
    /// Seconds per product and path.
    #[arg(long, default_value_t = 0.3)]
    pub seconds: f64,
    /// Only the products whose name contains this (`nature`, `mlp`).
    #[arg(long)]
    pub only: Option<String>,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BenchTransportArgs {
    #[arg(long, default_value = "CartPole-v1")]
    pub env: String,
    /// E: envs per batch.
    #[arg(long, default_value_t = 8)]
    pub envs: usize,
    /// T: steps per batch.
    #[arg(long, default_value_t = 32)]
    pub steps: usize,
    #[arg(long, default_value_t = 2000)]
    pub batches: usize,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BenchEnvsArgs {
    /// Environments stepped together.
    #[arg(long, default_value_t = 8)]
    pub envs: usize,
    /// Seconds per environment.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Processes stepping each env at once, `--envs` envs each (a run's
    /// actor processes; each has its own Python interpreter).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub processes: u64,
    /// Environments to step (repeatable), e.g. `--env gym:HalfCheetah-v5`
    /// (Python envs: a binary built with `--features python`); default:
    /// every native environment.
    #[arg(long = "env")]
    pub env_ids: Vec<String>,
    /// Keyword arguments for every env made (JSON, as `env.kwargs` becomes).
    #[arg(long, default_value = "")]
    pub kwargs: String,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BenchRulesArgs {
    #[arg(long, default_value = "BigTwo-v0")]
    pub env: String,
    /// Games per pairing (the evaluation's deals, seat rotating).
    #[arg(long, default_value_t = 4000)]
    pub games: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BenchInferenceArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Observations per forward pass (default: the config's envs_per_actor).
    #[arg(long)]
    pub batch: Option<usize>,
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BenchLearnerArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Samples per update (the update batch).
    #[arg(long, default_value_t = 4096)]
    pub samples: usize,
    /// Timed updates (after one warm-up update).
    #[arg(long, default_value_t = 5)]
    pub updates: usize,
    /// Synthetic image observations `H,W,C` (values in [0, 1)) in place of
    /// the env's, for a convolutional network (`--set network.conv=...`):
    /// the shapes of a pixel workload before its env is at hand.
    #[arg(long, value_name = "H,W,C", value_parser = parse_image)]
    pub image: Option<[usize; 3]>,
    /// Also write the figures to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BenchAgreeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Samples per update (the update batch).
    #[arg(long, default_value_t = 1024)]
    pub samples: usize,
    /// Updates on each engine.
    #[arg(long, default_value_t = 1)]
    pub updates: usize,
    /// Synthetic image observations `H,W,C`, as for `bench learner`.
    #[arg(long, value_name = "H,W,C", value_parser = parse_image)]
    pub image: Option<[usize; 3]>,
    /// The most the parameters may differ, as a share of the largest change
    /// the updates made.
    #[arg(long, default_value_t = 0.02)]
    pub tolerance: f64,
    /// Also write the figures to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `H,W,C`, each at least 1.
fn parse_image(s: &str) -> Result<[usize; 3], String> {
    let dims: Vec<usize> = s
        .split(',')
        .map(|d| d.trim().parse::<usize>().map_err(|e| format!("`{d}`: {e}")))
        .collect::<Result<_, _>>()?;
    match dims[..] {
        [h, w, c] if h > 0 && w > 0 && c > 0 => Ok([h, w, c]),
        _ => Err(format!("`{s}`: expected H,W,C, each at least 1")),
    }
}
