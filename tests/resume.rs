//! Checkpoint and resume through the real binary: the learner is killed with
//! SIGKILL mid-run and restarted with `--resume` on the same address; the actor
//! reconnects and rejoins, the evaluator keeps following, and the run finishes
//! at its step budget, continuing from the checkpoint's counters.

mod common;

use common::{Proc, assert_accounted, bin, read_json, read_jsonl, run_dir};
use std::path::Path;
use std::time::{Duration, Instant};

fn updates_done(run: &Path) -> usize {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_learner_killed_mid_run_resumes_from_its_checkpoint_and_finishes() {
    let dir = run_dir("resume");
    let run = dir.join("run");
    let mut c = bin();
    c.args(["param-server", "--listen", "127.0.0.1:0"]);
    let ps = Proc::spawn("param-server", c, &dir);
    let ps_url = format!(
        "http://127.0.0.1:{}",
        ps.bound_port(Duration::from_secs(30))
    );
    let learner = |listen: &str, name: &str, resume: bool| {
        let mut c = bin();
        c.args(["learner", "--listen", listen, "--param-server", &ps_url])
            .args(["--env", "CartPole-v1", "--set", "run.total_steps=50000"])
            .args(["--set", "learner.checkpoint_interval=5"])
            .args(["--set", "eval.interval=5", "--run-dir"])
            .arg(&run);
        if resume {
            c.arg("--resume");
        }
        Proc::spawn(name, c, &dir)
    };
    let mut first = learner("127.0.0.1:0", "learner", false);
    let port = first.bound_port(Duration::from_secs(60));
    let learner_url = format!("http://127.0.0.1:{port}");
    let mut c = bin();
    c.args([
        "actor",
        "--learner",
        &learner_url,
        "--param-server",
        &ps_url,
    ]);
    let mut actor = Proc::spawn("actor", c, &dir);
    let mut c = bin();
    c.args(["evaluator", "--param-server", &ps_url, "--run-dir"])
        .arg(&run);
    let mut evaluator = Proc::spawn("evaluator", c, &dir);

    let deadline = Instant::now() + Duration::from_secs(120);
    while updates_done(&run) < 12 {
        assert!(
            Instant::now() < deadline,
            "no 12 updates:\n{}",
            first.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = first.child.kill();
    let _ = first.child.wait();
    let killed_at = updates_done(&run);
    assert!(run.join("checkpoint.bin").exists());

    let mut second = learner(&format!("127.0.0.1:{port}"), "learner-resumed", true);
    let status = second
        .wait(Duration::from_secs(300))
        .unwrap_or_else(|| panic!("resumed learner did not finish:\n{}", second.log_text()));
    assert!(status.success(), "{status}\n{}", second.log_text());
    for p in [&mut actor, &mut evaluator] {
        let s = p
            .wait(Duration::from_secs(60))
            .unwrap_or_else(|| panic!("{} did not exit:\n{}", p.name, p.log_text()));
        assert!(s.success(), "{}: {s}\n{}", p.name, p.log_text());
    }

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
    assert!(
        summary["env_steps"].as_u64().unwrap_or(0) >= 50_000,
        "{summary}"
    );
    assert_eq!(summary["updates"].as_u64(), numbers.last().copied());
    let evals = read_jsonl(&run.join("eval.jsonl"));
    let last = evals.last().expect("evaluations");
    assert_eq!(last["final"], true);
    assert_eq!(last["version"], summary["final_version"]);
}
