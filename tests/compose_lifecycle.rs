//! A cluster run's whole life, with the README's commands, on real
//! containers: one run is started, its learner stopped and started, and it
//! finishes; then a second run in the same compose project, stopped mid-way
//! with `down`. Each run has its own directory, metrics and summary; each
//! summary satisfies the accounting identity; the first covers its whole wall
//! time, all its steps and every actor of every learner segment; the second
//! has the latest evaluation although the run never finished. Kills of every
//! role and scaling are `tests/compose_chaos.rs`'s.
//!
//! Needs Docker with Compose. Under CI (`CI` set) a missing Docker fails the
//! test; elsewhere it is skipped with the reason printed.

// Each test is one scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;
use common::compose::*;
use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Run 1's step budget: enough for every phase below with room to spare (at
/// about 7k steps/s on 2 cores, the run takes about a minute).
const RUN_STEPS: u64 = 400_000;

/// Waits up to `limit` for `done`, polling; panics naming `what`.
fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Every run id in a learner log, in order of first appearance.
fn run_ids(log: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for id in log
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("run_id="))
    {
        if !ids.iter().any(|s| s == id) {
            ids.push(id.to_string());
        }
    }
    ids
}

/// Actor ids the learner's log says joined.
fn joined_actors(log: &str) -> BTreeSet<String> {
    log.lines()
        .filter(|l| l.contains("participant joined"))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("actor_id="))
                .map(str::to_string)
        })
        .collect()
}

fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect()
}

fn versions(evals: &[Value]) -> Vec<u64> {
    evals
        .iter()
        .map(|e| e["version"].as_u64().expect("version"))
        .collect()
}

#[test]
fn compose_runs_survive_restarts_and_never_mix() {
    let Some(compose) = compose_or_skip() else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pid = std::process::id();
    let tag = format!("sebulba:lifecycle-{pid}");
    let t0 = Instant::now();
    let _image = build_image(&tag);
    let dir = run_dir("compose-lifecycle");
    let scratch = dir.join("scratch");
    let project = format!("sebulba-lifecycle-{pid}");
    let cluster = Cluster {
        compose,
        project: project.clone(),
        files: vec![root.join("deploy/docker-compose.yml")],
        env_file: None,
        env: vec![
            ("SEBULBA_IMAGE", tag.clone()),
            ("SEBULBA_ENV", "CartPole-v1".into()),
            ("SEBULBA_TOTAL_STEPS", RUN_STEPS.to_string()),
            ("SEBULBA_SEED", "4".into()),
            // No collector listens there: export errors are rate-limited.
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9".into()),
            // The wall-time check times the learner's container: no metrics
            // hold after its run (compose's default keeps it up 6 s more).
            ("SEBULBA_METRICS_HOLD_SECS", "0".into()),
        ],
    };
    // Declared after the cluster: removed before `down -v` removes the volume.
    let runs = RunsVolume::open(&format!("{project}_runs"), &tag, &format!("{project}-runs"));
    let updates = |id: &str| {
        runs.read(&format!("{id}/metrics.jsonl"), &scratch)
            .map_or(0, |t| {
                lines(&t)
                    .last()
                    .map_or(0, |l| l["update"].as_u64().unwrap_or(0))
            })
    };

    // --- Run 1 starts, with two actors.
    let started = Instant::now();
    run(&mut cluster.cmd(&["up", "-d", "--scale", "actor=2"]));
    // The learner started in between (after the param-server's healthcheck).
    let up_returned = Instant::now();
    let learner = cluster.containers("learner").pop().expect("a learner");
    let actors = cluster.containers("actor");
    assert_eq!(actors.len(), 2, "{actors:?}");
    // Its first progress line (every 10 s) and some evaluations.
    wait_for(
        "the learner's progress line",
        Duration::from_secs(120),
        || cluster.logs("learner").contains("progress env_steps="),
    );
    let log = cluster.logs("learner");
    let run1 = run_ids(&log).first().cloned().expect("run id in the log");
    let segment1_actors = joined_actors(&log);
    assert_eq!(segment1_actors.len(), 2, "{log}");
    wait_for("evaluations of run 1", Duration::from_secs(60), || {
        runs.read(&format!("{run1}/eval.jsonl"), &scratch)
            .is_some_and(|t| lines(&t).len() >= 2)
    });

    // --- `stop` and `start` the learner: the run goes on where it was.
    let stop_issued = Instant::now();
    run(&mut cluster.cmd(&["stop", "learner"]));
    let stopped = Instant::now();
    eprintln!(
        "`stop learner` took {:.1} s",
        (stopped - stop_issued).as_secs_f64()
    );
    let mid = read_json_text(&runs.read(&format!("{run1}/summary.json"), &scratch));
    assert_eq!(mid["completed"], false, "{mid}");
    assert_eq!(mid["segments"], 1, "{mid}");
    assert!(mid["latest_eval_version"].is_u64(), "{mid}");
    assert_accounted(&mid);
    let at_stop = mid["updates"].as_u64().expect("updates");
    assert!(
        mid["env_steps"].as_u64().unwrap_or(u64::MAX) < RUN_STEPS,
        "run 1 finished before its learner was stopped: raise RUN_STEPS"
    );
    std::thread::sleep(Duration::from_secs(3));
    for a in &actors {
        assert!(
            is_running(a),
            "actor {a} gave up while the learner was away"
        );
    }
    run(&mut cluster.cmd(&["start", "learner"]));
    let restarted = Instant::now();
    wait_for("updates after the restart", Duration::from_secs(90), || {
        updates(&run1) > at_stop + 20
    });

    // --- Run 1 finishes.
    let code = stdout(Command::new("docker").args(["wait", &learner]));
    let finished = Instant::now();
    assert_eq!(code, "0", "learner exit code");
    let evaluator = cluster.containers("evaluator").pop().expect("an evaluator");
    assert_eq!(
        stdout(Command::new("docker").args(["wait", &evaluator])),
        "0"
    );
    let run1_dir = dir.join("run1");
    runs.copy(&run1, &run1_dir);
    let summary1 = read_json(&run1_dir.join("summary.json"));
    eprintln!("run 1 summary: {summary1:#}");
    assert_eq!(summary1["run_id"], run1.as_str());
    assert_eq!(summary1["completed"], true);
    assert_eq!(summary1["segments"], 2, "stop and start: two segments");
    assert!(summary1["env_steps"].as_u64().expect("env_steps") >= RUN_STEPS);
    assert_accounted(&summary1);
    // Every actor of the first segment is still accounted for.
    let per = summary1["batches_per_actor"]
        .as_object()
        .expect("per actor");
    for a in &segment1_actors {
        assert!(
            per.get(a)
                .is_some_and(|c| c["used"].as_u64().unwrap_or(0) > 0),
            "actor {a} of segment 1 is missing from the summary: {per:?}"
        );
    }
    // Wall time: all the learner's segments, not the last one alone. The
    // learner ran between `up` and `stop`, and from `start` to its end, less
    // Its clock stops at the summary,
    // before its server drains its streams (up to 3 s) on `stop`.
    let wall = summary1["wall_seconds"].as_f64().expect("wall_seconds");
    let secs = |d: Duration| d.as_secs_f64();
    let most = secs(stopped - started) + secs(finished - restarted);
    let least = secs(stop_issued - up_returned) + secs(finished - restarted);
    eprintln!("run 1: wall_seconds {wall:.1}; the learner ran {least:.1} to {most:.1} s");
    assert!(wall <= most + 1.0, "wall {wall:.1} s > {most:.1} s");
    assert!(
        wall >= least - 5.0,
        "wall {wall:.1} s misses time of the {least:.1} s the learner ran at least"
    );
    // Metrics: each update once, in order, though the learner stopped.
    let metrics1 =
        lines(&std::fs::read_to_string(run1_dir.join("metrics.jsonl")).expect("metrics"));
    let numbers: Vec<u64> = metrics1
        .iter()
        .map(|m| m["update"].as_u64().expect("update"))
        .collect();
    let all: Vec<u64> = (1..=summary1["updates"].as_u64().expect("updates")).collect();
    assert_eq!(
        numbers, all,
        "metrics.jsonl of run 1 is not updates 1..=N once each"
    );
    // Evaluations: each version once; the final one last and in the summary;
    // the best is the whole run's.
    let evals1 = lines(&std::fs::read_to_string(run1_dir.join("eval.jsonl")).expect("evals"));
    let v1 = versions(&evals1);
    assert!(v1.windows(2).all(|w| w[0] < w[1]), "eval versions {v1:?}");
    let last = evals1.last().expect("evaluations");
    assert_eq!(last["final"], true);
    assert_eq!(last["version"], summary1["final_version"]);
    assert_eq!(summary1["latest_eval_version"], summary1["final_version"]);
    assert_best_is_the_runs(&summary1, &evals1);
    let run1_files: Vec<(String, Vec<u8>)> = ["summary.json", "metrics.jsonl", "eval.jsonl"]
        .iter()
        .map(|f| {
            (
                f.to_string(),
                std::fs::read(run1_dir.join(f)).expect("run 1 file"),
            )
        })
        .collect();

    // --- Run 2 in the same project: `up -d` again, then `down` mid-run.
    run(&mut cluster.cmd(&["up", "-d"]));
    wait_for(
        "run 2's id in the learner's log",
        Duration::from_secs(60),
        || run_ids(&cluster.logs("learner")).len() >= 2,
    );
    let run2 = run_ids(&cluster.logs("learner"))[1].clone();
    assert_ne!(run2, run1);
    wait_for("evaluations of run 2", Duration::from_secs(120), || {
        runs.read(&format!("{run2}/eval.jsonl"), &scratch)
            .is_some_and(|t| lines(&t).len() >= 2)
    });
    let logs = cluster.cmd(&["logs", "--no-color"]).output().expect("logs");
    let logs = String::from_utf8_lossy(&logs.stdout).into_owned();
    run(&mut cluster.cmd(&["down", "-t", "20"]));
    let run2_dir = dir.join("run2");
    runs.copy(&run2, &run2_dir);
    let summary2 = read_json(&run2_dir.join("summary.json"));
    eprintln!("run 2 summary: {summary2:#}");
    assert_eq!(summary2["run_id"], run2.as_str());
    assert_eq!(summary2["completed"], false);
    assert_eq!(summary2["segments"], 1);
    assert!(summary2["env_steps"].as_u64().unwrap_or(u64::MAX) < RUN_STEPS);
    assert_accounted(&summary2);
    let evals2 = lines(&std::fs::read_to_string(run2_dir.join("eval.jsonl")).expect("evals"));
    let v2 = versions(&evals2);
    // The latest evaluation filed (one more may have been in flight at `down`).
    let latest = summary2["latest_eval_version"]
        .as_u64()
        .expect("latest eval");
    assert!(v2.contains(&latest), "{latest} not in {v2:?}");
    assert!(
        v2.iter().filter(|&&v| v > latest).count() <= 1,
        "latest {latest} of {v2:?}"
    );
    // The best of the evaluations filed before the learner stopped: the one in
    // flight at `down` may land in eval.jsonl after the summary was written.
    let filed: Vec<Value> = evals2
        .iter()
        .filter(|e| e["version"].as_u64().is_some_and(|v| v <= latest))
        .cloned()
        .collect();
    assert_best_is_the_runs(&summary2, &filed);
    // Its own metrics, from update 1: nothing appended to run 1's.
    let metrics2 =
        lines(&std::fs::read_to_string(run2_dir.join("metrics.jsonl")).expect("metrics"));
    assert_eq!(
        metrics2.first().map(|m| m["update"].clone()),
        Some(1.into())
    );
    let final1 = summary1["final_version"].as_u64().expect("final version");
    assert!(v2[0] < final1, "run 2's versions start afresh: {v2:?}");
    let again = dir.join("run1-again");
    runs.copy(&run1, &again);
    for (f, before) in &run1_files {
        let after = std::fs::read(again.join(f)).expect("run 1 file");
        assert!(after == *before, "run 1's {f} changed during run 2");
    }

    // Progress in the logs; a missing collector's errors rate-limited.
    assert!(logs.contains("progress env_steps="), "no progress line");
    let noise = logs
        .lines()
        .filter(|l| l.contains("ERROR") && l.to_lowercase().contains("export"))
        .count();
    eprintln!("{noise} export error lines in all logs, such as:");
    for l in logs
        .lines()
        .filter(|l| l.contains("ERROR") && l.to_lowercase().contains("export"))
        .take(2)
    {
        eprintln!("  {l}");
    }
    assert!(
        noise <= 24,
        "export errors are not rate-limited: {noise} lines"
    );
    eprintln!(
        "compose lifecycle test took {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

fn read_json_text(text: &Option<String>) -> Value {
    let t = text.as_deref().expect("summary.json written");
    serde_json::from_str(t).unwrap_or_else(|e| panic!("summary.json: {e}: {t}"))
}
