//! `sebulba bench`: throughput benchmarks that print their figures (and write
//! them as JSON): env stepping and inference ([`envs`]), the PPO update
//! ([`learner`]), the actor-to-learner path ([`transport`]), the turn-based
//! games ([`games`]), and whole local runs.

pub mod agree;
pub mod envs;
pub mod games;
pub mod kernels;
pub mod learner;
pub mod local;
pub mod transport;

use crate::cli::{self, BenchCommand};
use anyhow::Context;
use tokio_util::sync::CancellationToken;

/// One environment's stepping throughput (`sebulba bench envs`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct EnvBench {
    pub env_id: String,
    pub num_envs: usize,
    /// Processes stepping at once (`--processes`), each `num_envs` envs;
    /// steps and steps/s are theirs together.
    pub processes: usize,
    pub steps: u64,
    pub seconds: f64,
    pub steps_per_second: f64,
    /// Games finished per second (turn-based games only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub games_per_second: Option<f64>,
}

/// Runs one benchmark and prints its figures.
pub async fn run(cmd: BenchCommand, shutdown: CancellationToken) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Learner(args) => bench_learner(args),
        BenchCommand::Agree(args) => bench_agree(args),
        BenchCommand::Transport(args) => {
            let r =
                transport::bench_transport(&args.env, args.envs, args.steps, args.batches).await?;
            println!(
                "transport {} {}x{} ({} bytes): {:.0} batches/s, {:.1} MB/s, {:.0} env steps/s",
                r.env_id,
                r.rollout_length,
                r.envs_per_actor,
                r.bytes_per_batch,
                r.batches_per_second,
                r.megabytes_per_second,
                r.env_steps_per_second
            );
            emit_json(&r, args.json.as_deref())
        }
        BenchCommand::Local(args) => local::bench_local(*args, shutdown).await,
        BenchCommand::Kernels(args) => bench_kernels(args),
        BenchCommand::Rules(args) => {
            let rows = games::bench_rules(&args.env, args.games, args.seed)?;
            for r in &rows {
                println!(
                    "{} {:>8} against {:<8} in the other seats: {:>5.1}% [{:.1}, {:.1}] of {} games, {:.1} s",
                    args.env,
                    r.player,
                    r.result.opponent,
                    100.0 * r.result.win_rate,
                    100.0 * r.result.win_rate_low,
                    100.0 * r.result.win_rate_high,
                    r.result.games,
                    r.seconds
                );
            }
            emit_json(&rows, args.json.as_deref())
        }
        BenchCommand::Envs(args) => {
            let rows = if args.processes > 1 {
                let processes = args.processes as usize;
                anyhow::ensure!(
                    !args.env_ids.is_empty(),
                    "--processes: name the envs (--env)"
                );
                let each = |id: &String| {
                    envs::bench_env_processes(id, args.envs, &args.kwargs, args.seconds, processes)
                };
                args.env_ids
                    .iter()
                    .map(each)
                    .collect::<anyhow::Result<_>>()?
            } else {
                envs::bench_envs(&args.env_ids, args.envs, &args.kwargs, args.seconds)?
            };
            for r in &rows {
                let games = r
                    .games_per_second
                    .map_or(String::new(), |g| format!(", {g:.0} games/s"));
                println!(
                    "env {}: {} process(es) x {} envs, {:.0} steps/s{games} ({} steps in {:.2} s)",
                    r.env_id, r.processes, r.num_envs, r.steps_per_second, r.steps, r.seconds
                );
            }
            emit_json(&rows, args.json.as_deref())
        }
        BenchCommand::Inference(args) => {
            let config = args.config.resolve()?;
            let batch = args.batch.unwrap_or(config.env.envs_per_actor);
            let r = envs::bench_inference(&config.env.id, &config.network, batch, args.seconds)?;
            println!(
                "inference {} hidden {:?} batch {}: {:.0} calls/s, {:.0} samples/s",
                r.env_id, r.hidden, r.batch, r.calls_per_second, r.samples_per_second
            );
            emit_json(&r, args.json.as_deref())
        }
    }
}

fn bench_kernels(args: cli::BenchKernelsArgs) -> anyhow::Result<()> {
    let r = kernels::bench_kernels(args.seconds, args.only.as_deref())?;
    kernels::print(&r);
    emit_json(&r, args.json.as_deref())
}

/// A benchmark's output is its product: figures on stdout (not a service log).
fn bench_learner(args: cli::BenchLearnerArgs) -> anyhow::Result<()> {
    let config = args.config.resolve()?;
    let r = learner::bench_learner(&config, args.image, args.samples, args.updates)?;
    println!(
        "learner PPO update: {} image {:?} conv {:?} stacks {:?} hidden {:?} core {} devices {:?} engine {}: {} samples x {} epochs x {} minibatches, {} updates in {:.2} s: {:.0} samples/s ({:.0} sample-gradients/s)",
        r.env_id,
        r.image,
        r.conv,
        r.stacks,
        r.hidden,
        r.core,
        r.devices,
        r.engine,
        r.samples_per_update,
        r.epochs,
        r.minibatches,
        r.updates,
        r.seconds,
        r.samples_per_second,
        r.sample_grads_per_second
    );
    print!(
        "  {:.1} GFLOP/s in the products ({:.2} MFLOP a sample-gradient, kernels {})",
        r.gflops,
        r.gradient_flops_per_sample as f64 / 1e6,
        r.kernels
    );
    match (&r.peak, r.fraction_of_peak) {
        (Some(p), Some(f)) => println!(
            "; peak {:.1} GFLOP/s on {} core{} ({} lanes x {} FMA units x 2 x {:.2} GHz; an FMA loop reached {:.1}): {:.1}% of peak",
            p.gflops,
            p.cores,
            if p.cores == 1 { "" } else { "s" },
            p.lanes,
            p.fma_units,
            p.ghz,
            p.fma_loop_gflops,
            100.0 * f
        ),
        _ => println!("; no peak for this path or device"),
    }
    emit_json(&r, args.json.as_deref())
}

/// Prints the comparison, and fails when the engines disagree.
fn bench_agree(args: cli::BenchAgreeArgs) -> anyhow::Result<()> {
    let config = args.config.resolve()?;
    let r = agree::agree(
        &config,
        args.image,
        args.samples,
        args.updates,
        args.tolerance,
    )?;
    println!(
        "engines agree {}: {} conv {:?} stacks {:?} hidden {:?}, {} update(s) of {} samples: fused {:.2} s, burn on {:?} {:.2} s; parameters moved {:.3e} (L2), apart by {:.3e} ({:.2e} of the move, tolerance {:.2e} for {:?} products; rounding alone {:.2e}, TF32's rounding of the weights {:.2e}; largest single difference {:.2e})",
        if r.agrees { "yes" } else { "NO" },
        r.env_id,
        r.conv,
        r.stacks,
        r.hidden,
        r.updates,
        r.samples_per_update,
        r.fused.seconds,
        r.burn.devices,
        r.burn.seconds,
        r.moved,
        r.apart,
        r.relative_diff,
        r.tolerance,
        r.precision,
        r.rounding_floor,
        r.tf32_floor,
        r.max_param_diff
    );
    emit_json(&r, args.json.as_deref())?;
    // Where rounding alone parts the engine from itself as far, the
    // difference says nothing about either engine.
    let chaotic = r.rounding_floor >= 0.5 * r.relative_diff;
    let hint = match chaotic {
        true => format!(
            "; but rounding alone moves these updates {:.2e} of the move: they amplify it, so compare fewer minibatch steps (--set ppo.epochs=1)",
            r.rounding_floor
        ),
        false => String::new(),
    };
    anyhow::ensure!(
        r.agrees,
        "the fused engine and burn on {:?} disagree: parameters apart by {:.3e} (L2) after moving {:.3e}{hint}",
        r.burn.devices,
        r.apart,
        r.moved
    );
    Ok(())
}

/// Prints the figures as JSON and writes them to `path` when given.
fn emit_json<T: serde::Serialize>(value: &T, path: Option<&std::path::Path>) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(value)?;
    println!("{json}");
    if let Some(path) = path {
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
