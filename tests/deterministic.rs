//! `run.deterministic = true`: a local run repeats bit for bit for its seed.
//! Two runs of one seed write the same `metrics.jsonl` and `eval.jsonl`, but
//! for the fields that time things (listed below); a run of another seed does
//! not. Discrete and continuous actions, observation normalisation and reward
//! scaling, both learner engines.

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
    let (m1, e1) = run(&format!("{name}-a"), env, "7", extra);
    let (m2, e2) = run(&format!("{name}-b"), env, "7", extra);
    let (m3, _) = run(&format!("{name}-c"), env, "8", extra);
    assert!(m1.len() >= 5, "{name}: only {} updates", m1.len());
    assert!(e1.len() >= 3, "{name}: only {} evaluations", e1.len());
    assert!(
        m1.iter().all(|l| l["policy_lag"]["max"] == 0),
        "{name}: lockstep trains at lag 0"
    );
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
