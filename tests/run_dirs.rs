//! Runs never mix in a run directory: a finished run is not appended to, a
//! directory holding another run is refused, `--fresh` starts over, and a
//! learner restarted on its run directory resumes by itself (`resume.rs`).

mod common;

use common::{Proc, bin, read_json, read_jsonl, run_dir};
use std::path::Path;
use std::time::Duration;

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
