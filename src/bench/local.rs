//! `sebulba bench local`: a whole local run, set against its environments'
//! own limit. Before the run, the same env source is stepped alone (random
//! actions, no learner) with the run's envs per actor in as many processes
//! as the run has actors; the run's end-to-end steps/s is reported as a
//! fraction of that, with where the actors' time went (envs, the policy,
//! waiting for the learner's credit, the rest: sending and weights) and how
//! busy the learner was, so a user sees which side of the run to scale.

use super::{EnvBench, envs};
use crate::cli::BenchLocalArgs;
use anyhow::Context;
use sebulba_learner::accounting::ActorTime;
use serde::Serialize;
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// The end-to-end line of the benchmark suite.
#[derive(Serialize)]
struct BenchLocal {
    /// The command line that reproduces it.
    command: String,
    env_id: String,
    env_steps: u64,
    wall_seconds: f64,
    env_steps_per_second: f64,
    /// The learner's clock at its last update: the run up to the step budget,
    /// without the final evaluation and the shutdown after it (what a peer's
    /// timed training loop, its evaluation apart, compares with).
    training_seconds: Option<f64>,
    training_steps_per_second: Option<f64>,
    updates: u64,
    final_eval_return_mean: Option<f64>,
    peak_rss_mib: Option<f64>,
    /// `--target-return`, and the env steps of the first evaluation whose mean
    /// return reached it (None: none did).
    target_return: Option<f64>,
    steps_to_target: Option<u64>,
    /// The env source alone with the run's envs and actors (None with
    /// `--env-seconds 0`), and the run's steps/s as a fraction of it.
    env_only: Option<EnvBench>,
    fraction_of_env_only: Option<f64>,
    /// Shares of the actors' wall time, all actors together.
    actor_shares: Shares,
    /// The learner's update time as a share of the run's wall time.
    learner_busy: Option<f64>,
}

/// Where the actors' time went, as shares of their wall time (0 to 1).
#[derive(Serialize, Default, Debug, PartialEq)]
pub struct Shares {
    pub env: f64,
    pub inference: f64,
    pub waiting_for_learner: f64,
    /// Assembling and sending batches, taking new weights.
    pub other: f64,
}

impl Shares {
    pub fn of(t: &ActorTime) -> Self {
        if t.wall_seconds <= 0.0 {
            return Shares::default();
        }
        let share = |s: f64| s / t.wall_seconds;
        let (env, inference, waiting) = (
            share(t.env_seconds),
            share(t.inference_seconds),
            share(t.waiting_seconds),
        );
        Shares {
            env,
            inference,
            waiting_for_learner: waiting,
            other: (1.0 - env - inference - waiting).max(0.0),
        }
    }
}

pub async fn bench_local(args: BenchLocalArgs, shutdown: CancellationToken) -> anyhow::Result<()> {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let config = args.local.config.resolve()?;
    let actors = args.local.actors.unwrap_or(config.run.local_actors);
    let env_only = if args.env_seconds > 0.0 {
        let (id, e, kwargs) = (
            &config.env.id,
            config.env.envs_per_actor,
            config.env.kwargs_json(),
        );
        let r = envs::bench_env_processes(id, e, &kwargs, args.env_seconds, actors)?;
        println!(
            "env-only limit {id}: {actors} process(es) x {e} envs, random actions: {:.0} steps/s",
            r.steps_per_second
        );
        Some(r)
    } else {
        None
    };
    let (s, run_dir) = crate::local::run(args.local, shutdown).await?;
    let steps_to_target = match args.target_return {
        Some(target) => first_eval_reaching(&run_dir.join("eval.jsonl"), target)?,
        None => None,
    };
    let fraction_of_env_only = env_only
        .as_ref()
        .map(|r| s.steps_per_second / r.steps_per_second);
    let learner = LearnerTimes::read(&run_dir.join("metrics.jsonl"))?;
    // A run that made no update has no training time.
    let training_seconds = learner
        .as_ref()
        .map(|t| t.last_update_wall)
        .filter(|&t| t > 0.0);
    let r = BenchLocal {
        command,
        env_id: s.env_id.clone(),
        env_steps: s.env_steps,
        wall_seconds: s.wall_seconds,
        env_steps_per_second: s.steps_per_second,
        training_seconds,
        training_steps_per_second: training_seconds.map(|t| s.env_steps as f64 / t),
        updates: s.updates,
        final_eval_return_mean: s.final_eval_return_mean,
        peak_rss_mib: s.peak_rss_mib,
        target_return: args.target_return,
        steps_to_target,
        env_only,
        fraction_of_env_only,
        actor_shares: Shares::of(&s.batches.actor_time),
        learner_busy: learner
            .filter(|_| s.wall_seconds > 0.0)
            .map(|t| t.busy / s.wall_seconds),
    };
    print_lines(&r);
    super::emit_json(&r, args.json.as_deref())
}

fn print_lines(r: &BenchLocal) {
    println!(
        "end-to-end local {}: {:.0} env steps/s ({} steps, {} updates in {:.1} s), final eval {:?}, peak RSS {:.0} MiB{}",
        r.env_id,
        r.env_steps_per_second,
        r.env_steps,
        r.updates,
        r.wall_seconds,
        r.final_eval_return_mean,
        r.peak_rss_mib.unwrap_or(f64::NAN),
        match (r.target_return, r.steps_to_target) {
            (Some(t), Some(n)) => format!(", first eval >= {t} at {n} env steps"),
            (Some(t), None) => format!(", no eval reached {t}"),
            _ => String::new(),
        }
    );
    if let (Some(sps), Some(t)) = (r.training_steps_per_second, r.training_seconds) {
        println!(
            "training alone: {sps:.0} env steps/s ({t:.2} s to the last update; the rest of the wall time is the final evaluation and shutdown)"
        );
    }
    if let Some(f) = r.fraction_of_env_only {
        println!("end to end is {:.0}% of the env-only limit", 100.0 * f);
    }
    let a = &r.actor_shares;
    let pct = |x: f64| 100.0 * x;
    println!(
        "actors' time: envs {:.0}%, policy {:.0}%, waiting for the learner {:.0}%, sending and weights {:.0}%; learner busy {}",
        pct(a.env),
        pct(a.inference),
        pct(a.waiting_for_learner),
        pct(a.other),
        r.learner_busy
            .map_or("unknown".into(), |b| format!("{:.0}% of the run", pct(b)))
    );
}

/// What the learner's `metrics.jsonl` says of its time.
struct LearnerTimes {
    /// `update_seconds` of every line, summed: how long the learner was busy.
    busy: f64,
    /// `wall_seconds` of the last line: the run's clock at its last update.
    last_update_wall: f64,
}

impl LearnerTimes {
    /// `None` when the run wrote no metrics.
    fn read(metrics: &Path) -> anyhow::Result<Option<Self>> {
        if !metrics.exists() {
            return Ok(None);
        }
        let mut t = LearnerTimes {
            busy: 0.0,
            last_update_wall: 0.0,
        };
        sebulba_runfiles::files::each_json_line(metrics, |_, v| {
            t.busy += v["update_seconds"].as_f64().unwrap_or(0.0);
            t.last_update_wall = v["wall_seconds"].as_f64().unwrap_or(t.last_update_wall);
            Ok(())
        })
        .with_context(|| format!("reading {}", metrics.display()))?;
        Ok(Some(t))
    }
}

/// Env steps of the first line of `eval.jsonl` with `return_mean >= target`.
fn first_eval_reaching(path: &Path, target: f64) -> anyhow::Result<Option<u64>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("a line of {}", path.display()))?;
        if v["return_mean"].as_f64().is_some_and(|r| r >= target) {
            return Ok(v["env_steps"].as_u64());
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_parts_of_the_actors_wall_time() {
        let t = ActorTime {
            wall_seconds: 8.0,
            env_seconds: 4.0,
            inference_seconds: 1.0,
            waiting_seconds: 2.0,
        };
        let want = Shares {
            env: 0.5,
            inference: 0.125,
            waiting_for_learner: 0.25,
            other: 0.125,
        };
        assert_eq!(Shares::of(&t), want);
        assert_eq!(Shares::of(&ActorTime::default()), Shares::default());
    }
}
