//! Checkpoint and resume through the real binary: the learner is killed with
//! SIGKILL mid-run and restarted on the same address and run directory, with
//! no flag: it finds the checkpoint and resumes by itself; the actor
//! reconnects and rejoins, the evaluator keeps following (on the schedule the
//! run publishes), and the run finishes at its step budget, continuing from
//! the checkpoint's counters.

// One scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;

use common::{
    actor, assert_accounted, evaluator, exits_ok, learner, param_server, read_json, read_jsonl,
    run_dir, updates_done, wait_for_updates,
};
use std::time::Duration;

#[test]
fn a_learner_killed_mid_run_resumes_from_its_checkpoint_and_finishes() {
    let dir = run_dir("resume");
    let run = dir.join("run");
    let (_ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let args = [
        "--set",
        "run.total_steps=50000",
        "--set",
        "learner.checkpoint_interval=5",
        "--set",
        "eval.interval=5",
        "--set",
        "eval.episodes=3",
        "--set",
        "eval.final_episodes=7",
    ];
    let (mut first, port) = learner(&dir, "learner", "127.0.0.1:0", &ps_url, &run, &args, |_| {});
    let learner_url = format!("http://127.0.0.1:{port}");
    let mut actor = actor(&dir, "actor", &learner_url, &ps_url, |_| {});
    let mut evaluator = evaluator(&dir, &ps_url, &run, |_| {});

    let t0 = std::time::Instant::now();
    wait_for_updates(&run, 12, &first);
    let first_segment = t0.elapsed().as_secs_f64();
    let _ = first.child.kill();
    let _ = first.child.wait();
    let killed_at = updates_done(&run);
    assert!(run.join("checkpoint.bin").exists());

    // Same address, same run directory, no flag: the checkpoint is resumed.
    let listen = format!("127.0.0.1:{port}");
    let (mut second, _) = learner(
        &dir,
        "learner-resumed",
        &listen,
        &ps_url,
        &run,
        &args,
        |_| {},
    );
    exits_ok(&mut second, Duration::from_secs(300));
    exits_ok(&mut actor, Duration::from_secs(60));
    exits_ok(&mut evaluator, Duration::from_secs(60));

    let log = second.log_text();
    let resumed_line = log
        .lines()
        .find(|l| l.contains("resumed from checkpoint"))
        .unwrap_or_else(|| panic!("no resume logged:\n{log}"));
    let field = |name: &str| -> u64 {
        resumed_line
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {resumed_line}"))
    };
    let (ck_updates, ck_steps) = (field("updates"), field("env_steps"));
    assert!(ck_updates >= 10 && ck_updates % 5 == 0, "{resumed_line}");
    assert!(ck_updates as usize <= killed_at);
    assert!(ck_steps > 0);

    // One line per update, numbered 1.. without gaps or repeats: the lines of
    // updates after the checkpoint were dropped and those updates done again.
    let metrics = read_jsonl(&run.join("metrics.jsonl"));
    let numbers: Vec<u64> = metrics
        .iter()
        .map(|m| m["update"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
    let after = &metrics[ck_updates as usize];
    assert!(
        after["env_steps"].as_u64().unwrap_or(0) > ck_steps,
        "the step count continued from the checkpoint: {after}"
    );

    let summary = read_json(&run.join("summary.json"));
    assert_accounted(&summary);
    // The actor's batches of versions the dead learner published after its
    // checkpoint are taken, not refused (issue 41).
    let refused = &summary["batches"]["rejected_by_reason"];
    for reason in ["version", "restart"] {
        assert!(
            refused[reason].as_u64().unwrap_or(0) == 0,
            "batches refused as `{reason}` after the resume: {refused}"
        );
    }
    assert!(
        log.contains("taking batches up to the newest version held"),
        "{log}"
    );
    assert!(
        summary["env_steps"].as_u64().unwrap_or(0) >= 50_000,
        "{summary}"
    );
    assert_eq!(summary["updates"].as_u64(), numbers.last().copied());
    // The summary covers the whole run: both segments' time and batches.
    assert_eq!(summary["segments"].as_u64(), Some(2), "{summary}");
    assert_eq!(summary["completed"], true);
    let wall = summary["wall_seconds"].as_f64().unwrap_or(0.0);
    let ck_wall = metrics[ck_updates as usize - 1]["wall_seconds"]
        .as_f64()
        .unwrap_or(f64::MAX);
    assert!(
        ck_wall <= first_segment + 1.0 && wall > ck_wall,
        "wall {wall} s after a first segment of {first_segment:.1} s (checkpoint at {ck_wall} s)"
    );
    let actors = summary["batches_per_actor"].as_object().expect("per actor");
    assert!(
        actors.keys().filter(|k| k.starts_with("actor#")).count() >= 2,
        "the actor's ids of both segments are accounted for: {summary}"
    );
    let evals = read_jsonl(&run.join("eval.jsonl"));
    let last = evals.last().expect("evaluations");
    assert_eq!(last["final"], true);
    assert_eq!(last["version"], summary["final_version"]);
    // The evaluator was given no schedule: it followed the one the learner
    // publishes with its weights (the run's eval.* keys), through both
    // segments: every 5 versions, 3 episodes, 7 for the final version.
    assert!(evals.len() >= 3, "{evals:?}");
    for e in &evals {
        let want = if e["final"] == true { 7 } else { 3 };
        assert_eq!(e["episodes"].as_u64(), Some(want), "{e}");
    }
    let versions: Vec<u64> = evals
        .iter()
        .filter(|e| e["final"] != true)
        .map(|e| e["version"].as_u64().unwrap_or(0))
        .collect();
    assert!(
        versions.windows(2).all(|v| v[1] >= v[0] + 5),
        "evaluated versions {versions:?}"
    );
}
