//! Runs never mix in a run directory: a finished run is not appended to, a
//! directory holding another run is refused, `--fresh` starts over, and a
//! learner restarted on its run directory resumes by itself (`resume.rs`).

// Each test is one scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;

use common::{Proc, bin, read_json, read_jsonl, run_dir};
use std::path::Path;
use std::time::Duration;
use std::time::Instant;

/// `sebulba local` on CartPole into `run` with `args`; its exit code and log.
fn local(dir: &Path, name: &str, run: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut c = bin();
    c.args(["local", "--env", "CartPole-v1", "--total-steps", "4096"])
        .args(args)
        .arg("--run-dir")
        .arg(run);
    let mut p = Proc::spawn(name, c, dir);
    let status = p
        .wait(Duration::from_secs(300))
        .unwrap_or_else(|| panic!("{name} did not finish:\n{}", p.log_text()));
    (status.code(), p.log_text())
}

#[test]
fn a_run_directory_holds_one_run_unless_told_otherwise() {
    let dir = run_dir("run-dirs");
    let run = dir.join("run");
    let (code, log) = local(&dir, "first", &run, &["--run-name", "first-run"]);
    assert_eq!(code, Some(0), "{log}");
    let first = read_json(&run.join("summary.json"));
    let videos = read_jsonl(&run.join("videos/videos.jsonl")).len();
    assert!(videos >= 2, "the first and the final evaluation filmed");
    assert!(
        log.contains("run_id=first-run"),
        "the name is the run id:\n{log}"
    );

    // The same directory again: the run there is finished, nothing is appended.
    let (code, log) = local(&dir, "again", &run, &[]);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("is finished") && log.contains("--fresh"),
        "{log}"
    );
    assert_eq!(
        read_json(&run.join("summary.json")),
        first,
        "summary untouched"
    );

    // --fresh starts over: one sequence of updates, a new summary.
    let (code, log) = local(&dir, "fresh", &run, &["--fresh"]);
    assert_eq!(code, Some(0), "{log}");
    let updates: Vec<u64> = read_jsonl(&run.join("metrics.jsonl"))
        .iter()
        .filter_map(|l| l["update"].as_u64())
        .collect();
    assert_eq!(updates, (1..=updates.len() as u64).collect::<Vec<_>>());
    assert_ne!(read_json(&run.join("summary.json")), first);
    let again = read_jsonl(&run.join("videos/videos.jsonl")).len();
    assert_eq!(again, videos, "the first run's videos went with it");

    // Without a checkpoint, another run's files are refused.
    let other = dir.join("other");
    let no_ck = ["--set", "learner.checkpoint_interval=0"];
    let (code, log) = local(&dir, "no-checkpoint", &other, &no_ck);
    assert_eq!(code, Some(0), "{log}");
    let (code, log) = local(&dir, "over-it", &other, &no_ck);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("holds another run"), "{log}");

    // A bad run name is refused by the flag parser.
    let out = bin()
        .args(["local", "--run-name", "../up"])
        .output()
        .expect("run sebulba");
    assert_eq!(out.status.code(), Some(2));
}

/// `run.time_limit_secs` ends a run whose step budget is far off, as a
/// finished run: its final evaluation, the learning rate annealed to nearly
/// 0 by the clock, and a second start in the directory refused as finished.
#[test]
fn a_time_limit_ends_the_run_as_a_finished_one() {
    let dir = run_dir("time-limit");
    let run = dir.join("run");
    let start = |name: &str| {
        let mut c = bin();
        c.args(["local", "--env", "CartPole-v1", "--run-dir"])
            .arg(&run)
            .args(["--set", "run.total_steps=1000000000"])
            .args(["--set", "run.time_limit_secs=6"])
            .args(["--set", "ppo.learning_rate=0.001"]);
        let began = Instant::now();
        let mut p = Proc::spawn(name, c, &dir);
        let status = p
            .wait(Duration::from_secs(300))
            .unwrap_or_else(|| panic!("{name} did not finish:\n{}", p.log_text()));
        (status.code(), p.log_text(), began.elapsed())
    };
    let (code, log, took) = start("limited");
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("run.time_limit_secs reached before run.total_steps"),
        "{log}"
    );
    let s = read_json(&run.join("summary.json"));
    assert_eq!(s["completed"], true, "{s}");
    let wall = s["wall_seconds"].as_f64().expect("wall_seconds");
    assert!(wall >= 6.0 && wall < took.as_secs_f64() + 1.0, "{s}");
    let steps = s["env_steps"].as_u64().expect("env_steps");
    assert!(steps > 0 && steps < 1_000_000_000, "{s}");
    assert!(s["final_eval_return_mean"].is_number(), "{s}");
    let lrs: Vec<f64> = read_jsonl(&run.join("metrics.jsonl"))
        .iter()
        .filter_map(|l| l["learning_rate"].as_f64())
        .collect();
    assert!(lrs.len() > 10, "{lrs:?}");
    assert!(lrs.windows(2).all(|w| w[1] <= w[0]), "{lrs:?}");
    let last = lrs[lrs.len() - 1];
    assert!(last < 2e-4, "annealed by the clock to {last}");

    let (code, log, _) = start("again");
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("is finished") && log.contains("run.time_limit_secs"),
        "{log}"
    );
}

/// The lifecycle compose uses, as processes: every role under one runs root.
/// A learner stopped mid-run and started again resumes its run by itself; the
/// next run gets a directory of its own; the evaluator follows both.
#[test]
fn under_a_runs_root_restarts_resume_and_runs_stay_apart() {
    let dir = run_dir("runs-root");
    let root = dir.join("runs");
    let root_s = root.to_str().expect("utf-8").to_string();
    let (_ps, ps_port) = common::param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let learner_at = |name: &str, listen: &str| {
        let mut c = bin();
        c.args(["learner", "--listen", listen, "--param-server", &ps_url])
            .args(["--env", "CartPole-v1", "--total-steps", "30000"])
            .args([
                "--set",
                "learner.checkpoint_interval=2",
                "--runs-root",
                &root_s,
            ]);
        let p = Proc::spawn(name, c, &dir);
        let port = p.bound_port(Duration::from_secs(60));
        (p, port)
    };
    let evaluator = |name: &str| {
        let mut c = bin();
        c.args([
            "evaluator",
            "--param-server",
            &ps_url,
            "--runs-root",
            &root_s,
        ]);
        Proc::spawn(name, c, &dir)
    };
    let runs = || -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(&root)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        v.sort();
        v
    };

    // Run 1, stopped mid-run (SIGTERM) and started again on the same address.
    let (mut l1, port) = learner_at("learner-1", "127.0.0.1:0");
    let url = format!("http://127.0.0.1:{port}");
    let mut a1 = common::actor(&dir, "actor-1", &url, &ps_url, |_| {});
    let mut e1 = evaluator("evaluator-1");
    let first = {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(run) = runs().into_iter().find(|r| common::updates_done(r) >= 4) {
                break run;
            }
            assert!(std::time::Instant::now() < deadline, "{}", l1.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let s = l1
        .terminate(Duration::from_secs(15))
        .expect("learner stops");
    assert!(s.success(), "{}", l1.log_text());
    assert_eq!(read_json(&first.join("summary.json"))["completed"], false);
    let (mut l1b, _) = learner_at("learner-1b", &format!("127.0.0.1:{port}"));
    common::exits_ok(&mut l1b, Duration::from_secs(300));
    assert!(l1b.log_text().contains("resuming it"), "{}", l1b.log_text());
    common::exits_ok(&mut a1, Duration::from_secs(60));
    common::exits_ok(&mut e1, Duration::from_secs(60));

    // Run 2: a directory of its own.
    let (mut l2, port) = learner_at("learner-2", "127.0.0.1:0");
    let url = format!("http://127.0.0.1:{port}");
    let mut a2 = common::actor(&dir, "actor-2", &url, &ps_url, |_| {});
    let mut e2 = evaluator("evaluator-2");
    common::exits_ok(&mut l2, Duration::from_secs(300));
    common::exits_ok(&mut a2, Duration::from_secs(60));
    common::exits_ok(&mut e2, Duration::from_secs(60));

    let all = runs();
    assert_eq!(all.len(), 2, "{all:?}");
    for (run, segments) in [
        (&first, 2),
        (all.iter().find(|r| **r != first).expect("run 2"), 1),
    ] {
        let summary = read_json(&run.join("summary.json"));
        common::assert_accounted(&summary);
        assert_eq!(summary["completed"], true, "{summary}");
        assert_eq!(summary["segments"].as_u64(), Some(segments), "{summary}");
        assert_eq!(
            run.file_name().and_then(|n| n.to_str()),
            summary["run_id"].as_str(),
            "the directory is named for the run"
        );
        let updates: Vec<u64> = read_jsonl(&run.join("metrics.jsonl"))
            .iter()
            .filter_map(|l| l["update"].as_u64())
            .collect();
        assert_eq!(updates, (1..=updates.len() as u64).collect::<Vec<_>>());
        let evals = read_jsonl(&run.join("eval.jsonl"));
        let last = evals
            .last()
            .expect("evaluations in the run's own directory");
        assert_eq!(last["version"], summary["final_version"], "{run:?}");
        assert_eq!(summary["final_eval_return_mean"], last["return_mean"]);
    }
}
