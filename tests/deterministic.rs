//! `run.deterministic = true`: a local run repeats bit for bit for its seed.
//! Two runs of one seed write the same `metrics.jsonl` and `eval.jsonl`, but
//! for the fields that time things (listed below); a run of another seed does
//! not. Discrete and continuous actions, observation normalisation and reward
//! scaling, both learner engines, DQN; with `run.forced_lag`, every update
//! trains on batches exactly that many versions old, V-trace corrected or not.

mod common;

use serde_json::Value;
use std::path::Path;

/// Fields that measure time, or count batches arrived so far (when an actor's
/// next batch lands is a matter of timing; which batches are trained on is not).
const TIMING: &[&str] = &[
    "wall_seconds",
    "steps_per_second",
    "update_seconds",
    "eval_seconds",
    "cpu_seconds",
    "throttled_seconds",
    "batches_received",
];

/// The lines of a JSON-lines file without the timing fields.
fn lines_without_timing(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("a JSON line");
            let obj = v.as_object_mut().expect("an object");
            for k in TIMING {
                obj.remove(*k);
            }
            v
        })
        .collect()
}

fn run(name: &str, env: &str, seed: &str, extra: &[&str]) -> (Vec<Value>, Vec<Value>) {
    let mut args = vec![
        "--env",
        env,
        "--seed",
        seed,
        "--set",
        "run.deterministic=true",
        "--set",
        "eval.interval=3",
    ];
    for e in extra {
        args.extend(["--set", e]);
    }
    let dir = common::run_local(name, &args);
    let metrics = lines_without_timing(&dir.join("metrics.jsonl"));
    let evals = lines_without_timing(&dir.join("eval.jsonl"));
    (metrics, evals)
}

/// Two runs with `extra` settings repeat each other; another seed differs.
fn repeats(name: &str, env: &str, extra: &[&str]) {
    repeats_at_lag(name, env, extra, 0);
}

/// The same, with every update `u` (from 1) training on batches exactly
/// `min(u - 1, lag)` versions old; returns the metrics lines.
fn repeats_at_lag(name: &str, env: &str, extra: &[&str], lag: u64) -> Vec<Value> {
    let (m1, e1) = run(&format!("{name}-a"), env, "7", extra);
    let (m2, e2) = run(&format!("{name}-b"), env, "7", extra);
    let (m3, _) = run(&format!("{name}-c"), env, "8", extra);
    assert!(m1.len() >= 5, "{name}: only {} updates", m1.len());
    assert!(e1.len() >= 3, "{name}: only {} evaluations", e1.len());
    for (u, l) in m1.iter().enumerate() {
        let want = (u as u64).min(lag);
        let (lo, hi) = (&l["policy_lag"]["min"], &l["policy_lag"]["max"]);
        assert!(
            *lo == want && *hi == want,
            "{name}: update {} trained at lag {lo}..{hi}, not exactly {want}",
            u + 1
        );
    }
    for (i, (a, b)) in m1.iter().zip(&m2).enumerate() {
        assert_eq!(a, b, "{name}: metrics line {} differs", i + 1);
    }
    assert_eq!(m1.len(), m2.len(), "{name}: update count");
    assert_eq!(e1, e2, "{name}: eval.jsonl differs");
    let versions: Vec<u64> = e1.iter().filter_map(|l| l["version"].as_u64()).collect();
    let due = versions[..versions.len() - 1]
        .iter()
        .enumerate()
        .all(|(k, &v)| v == 3 * k as u64);
    assert!(due, "{name}: every third version evaluated: {versions:?}");
    assert_ne!(m1, m3, "{name}: another seed gives another run");
    eprintln!(
        "{name}: {} metrics lines and {} evaluations repeat exactly",
        m1.len(),
        e1.len()
    );
    m1
}

#[test]
fn cartpole_repeats_on_the_fused_engine() {
    repeats(
        "det-cartpole-fused",
        "CartPole-v1",
        &["run.total_steps=8192", "learner.engine=fused"],
    );
}

#[test]
fn cartpole_repeats_on_the_burn_engine() {
    repeats(
        "det-cartpole-burn",
        "CartPole-v1",
        &["run.total_steps=4096", "learner.engine=burn"],
    );
}

/// Continuous actions, observation normalisation and reward scaling (the
/// Pendulum preset), three actors: every update takes a batch of the first
/// two lanes, then of the third and first, ...
#[test]
fn pendulum_with_three_actors_repeats() {
    repeats(
        "det-pendulum",
        "Pendulum-v1",
        &["run.total_steps=12288", "run.local_actors=3"],
    );
}

/// A forced lag of 3 with V-trace, four actors: the learner publishes each
/// version three updates late and the lanes act with exactly those, so the
/// lag is exact from the fourth update on, and the run still repeats; the
/// evaluator scores every third published version, then the final one.
#[test]
fn a_forced_lag_is_exact_and_repeats() {
    let metrics = repeats_at_lag(
        "det-lag-vtrace",
        "CartPole-v1",
        &[
            "run.total_steps=8192",
            "run.local_actors=4",
            "run.forced_lag=3",
            "learner.max_policy_lag=3",
            "ppo.lag_correction=vtrace",
        ],
        3,
    );
    let corrected: Vec<u64> = metrics
        .iter()
        .map(|l| l["lag_corrected_batches"].as_u64().expect("a count"))
        .collect();
    assert_eq!(corrected[0], 0, "update 1 trains on version 0's batches");
    assert!(
        corrected[1..].iter().all(|&c| c == 2),
        "every later update V-trace corrects both its batches: {corrected:?}"
    );
}

/// The same on the burn engine, at lag 2 without correction.
#[test]
fn a_forced_lag_repeats_on_the_burn_engine() {
    repeats_at_lag(
        "det-lag-burn",
        "CartPole-v1",
        &[
            "run.total_steps=4096",
            "run.forced_lag=2",
            "learner.engine=burn",
        ],
        2,
    );
}

/// A recurrent policy (CartPoleNoVel-v1's preset, an LSTM): each env's
/// state, the batches' initial states and the training through time
/// repeat, on each engine, with V-trace at a forced lag (the current
/// policy's log-probabilities read through the sequences too).
#[test]
fn a_recurrent_policy_repeats_on_both_engines() {
    for engine in ["fused", "burn"] {
        let engine_key = format!("learner.engine={engine}");
        repeats_at_lag(
            &format!("det-recurrent-{engine}"),
            "CartPoleNoVel-v1",
            &[
                "run.total_steps=6144",
                "run.forced_lag=1",
                "ppo.lag_correction=vtrace",
                &engine_key,
            ],
            1,
        );
    }
}

/// DQN (`run.algorithm = dqn`): the replay draws, the target copies and the
/// epsilon-greedy acting repeat too, on each engine, with two actors.
#[test]
fn dqn_repeats_on_both_engines() {
    for engine in ["fused", "burn"] {
        let engine_key = format!("learner.engine={engine}");
        repeats(
            &format!("det-dqn-{engine}"),
            "CartPole-v1",
            &[
                "run.algorithm=dqn",
                "ppo.scale_rewards=false",
                "run.total_steps=2048",
                "run.local_actors=2",
                "env.envs_per_actor=4",
                "env.rollout_length=8",
                "learner.batches_per_update=1",
                "dqn.batch_size=32",
                "dqn.learning_starts=256",
                "dqn.target_update_interval=128",
                &engine_key,
            ],
        );
    }
}

/// Only `sebulba local` knows its actors: a learner on its own refuses the
/// key, naming it, before it serves anything.
#[test]
fn a_standalone_learner_refuses_deterministic_runs() {
    let dir = common::run_dir("det-standalone");
    let mut cmd = common::bin();
    cmd.args(["learner", "--env", "CartPole-v1", "--listen", "127.0.0.1:0"])
        .args(["--param-server", "http://127.0.0.1:9", "--run-dir"])
        .arg(dir.join("run"))
        .args(["--set", "run.deterministic=true"]);
    let mut p = common::Proc::spawn("learner", cmd, &dir);
    let status = p
        .wait(std::time::Duration::from_secs(30))
        .expect("the learner exits at once");
    assert!(!status.success());
    let log = p.log_text();
    assert!(
        log.contains("run.deterministic") && log.contains("sebulba local"),
        "{log}"
    );
}
