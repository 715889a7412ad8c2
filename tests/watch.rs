//! `sebulba watch` the way a user runs it after a local run: the final
//! weights replay the run's final evaluation exactly (the same start
//! states, protocol and episodes, so the same mean return), and the best
//! weights with the periodic evaluations' episode count replay the best
//! evaluation. What is not a run directory of episodes is refused by name.

mod common;
use common::*;

use std::path::Path;

fn watch(run: &Path, args: &[&str]) -> serde_json::Value {
    let out = bin()
        .arg("watch")
        .arg(run)
        .arg("--json")
        .args(args)
        .output()
        .expect("running sebulba watch");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

#[test]
fn watching_replays_the_runs_own_evaluations() {
    let run = run_local(
        "watch-cartpole",
        &[
            "--env",
            "CartPole-v1",
            "--seed",
            "1",
            "--total-steps",
            "2048",
        ],
    );
    let summary = read_json(&run.join("summary.json"));
    let final_mean = summary["final_eval_return_mean"].as_f64().expect("final");
    // Short of CartPole's cap, so that the mean says which episodes ran.
    assert!(final_mean < 490.0, "final evaluation {final_mean}");
    let watched = watch(&run, &[]);
    eprintln!(
        "final evaluation {final_mean}, watched {}",
        watched["return_mean"]
    );
    assert_eq!(watched["episodes"], summary["final_eval_episodes"]);
    assert_eq!(watched["return_mean"].as_f64(), Some(final_mean));

    let best = summary["best_eval_return_mean"].as_f64().expect("best");
    let evals = read_jsonl(&run.join("eval.jsonl"));
    let episodes = evals
        .iter()
        .find(|e| e["return_mean"].as_f64() == Some(best))
        .and_then(|e| e["episodes_asked"].as_u64())
        .map(|n| n.to_string());
    let episodes = episodes.expect("the best evaluation is in eval.jsonl");
    let watched = watch(&run, &["--weights", "best", "--episodes", &episodes]);
    eprintln!("best evaluation {best}, watched {}", watched["return_mean"]);
    assert_eq!(watched["return_mean"].as_f64(), Some(best), "{watched}");
    let three = watch(&run, &["--episodes", "3"]);
    assert_eq!(three["returns"].as_array().map(Vec::len), Some(3));
}

#[test]
fn what_is_not_a_run_of_episodes_is_refused() {
    let dir = run_dir("watch-refused");
    let out = bin().arg("watch").arg(&dir).output().expect("watch");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a run directory"), "{err}");
    std::fs::write(dir.join("config.toml"), "[env]\nid = \"Nim-v0\"\n").expect("config");
    let out = bin().arg("watch").arg(&dir).output().expect("watch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("turn-based game"),
        "{err}"
    );
}
