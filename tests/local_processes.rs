//! `sebulba local` with its actors as child processes
//! (`run.local_actors_as = "processes"`, the default for Python envs): two
//! children train one run to its end over loopback gRPC with the accounting
//! balanced per process; a child killed with SIGKILL is started again and
//! the run still completes; and when the parent itself is killed with
//! SIGKILL, no child survives it; a child that dies past
//! `run.actor_restarts` ends the run naming it (or, with
//! `run.on_actor_give_up = "continue"`, does not); and the summary's memory
//! holds the children's.

mod common;

use common::scrape::Scrape;
use common::{Proc, assert_accounted, bin, read_json, run_dir, updates_done};
use std::path::Path;
use std::time::{Duration, Instant};

/// The pids whose parent is `parent` and that run its binary (from
/// /proc/*/stat and exe; zombies left out:
/// they have exited).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let exe = std::fs::read_link(format!("/proc/{parent}/exe")).ok();
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid ...`; comm may hold spaces.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let mut fields = rest.split_whitespace();
            let state = fields.next().unwrap_or("");
            let ppid = fields.next().and_then(|p| p.parse::<u32>().ok());
            state != "Z" && ppid == Some(parent)
        })
        // The same binary only: the actors, not the evaluator's ffmpeg
        // filming a video.
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).ok() == exe)
        .collect()
}

/// Whether `pid` still runs (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.split_whitespace().next() != Some("Z"))
        })
        .unwrap_or(false)
}

/// `sebulba local` on CartPole with two actor processes and `steps` steps.
fn local_with_processes(dir: &Path, run: &Path, steps: u64) -> Proc {
    local_with(dir, run, steps, &[])
}

/// The same, with `sets` (`KEY=VALUE` each).
fn local_with(dir: &Path, run: &Path, steps: u64, sets: &[&str]) -> Proc {
    let mut cmd = bin();
    cmd.args(["local", "--env", "CartPole-v1", "--actors", "2"])
        .args(["--metrics-addr", "127.0.0.1:0"])
        .args(["--set", "run.local_actors_as=\"processes\""])
        .args(["--total-steps", &steps.to_string()])
        .arg("--run-dir")
        .arg(run);
    for set in sets {
        cmd.args(["--set", set]);
    }
    Proc::spawn("local", cmd, dir)
}

fn sigkill(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

/// Waits up to a minute for a child of `p` that is not one of `known`.
fn wait_for_new_child(p: &mut Proc, known: &[u32]) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(new) = children_of(p.child.id())
            .into_iter()
            .find(|k| !known.contains(k))
        {
            return new;
        }
        assert!(Instant::now() < deadline, "no new child:\n{}", p.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The memory the summary gives: the run's peak is the learner process's
/// plus each child slot's, and every slot's is the size of a real process.
fn assert_memory_covers_the_children(summary: &serde_json::Value) {
    let f = |v: &serde_json::Value, k: &str| {
        v[k].as_f64()
            .unwrap_or_else(|| panic!("`{k}` missing: {v}"))
    };
    let children = &summary["actor_processes"];
    let total = f(summary, "peak_rss_mib");
    let own = f(summary, "process_peak_rss_mib");
    let kids = f(children, "peak_rss_mib");
    assert!(
        (total - (own + kids)).abs() < 1e-6,
        "{total} = {own} + {kids}: {summary}"
    );
    let slots = children["children"].as_array().expect("children");
    assert_eq!(slots.len(), 2, "{children}");
    for slot in slots {
        // An actor process holds a runtime, a policy and its envs.
        assert!(f(slot, "peak_rss_mib") > 2.0, "{slot}");
    }
}

/// The slot whose processes include `pid`.
fn slot_of(summary: &serde_json::Value, pid: u32) -> serde_json::Value {
    summary["actor_processes"]["children"]
        .as_array()
        .expect("children")
        .iter()
        .find(|c| {
            c["pids"]
                .as_array()
                .is_some_and(|p| p.iter().any(|x| x.as_u64() == Some(u64::from(pid))))
        })
        .cloned()
        .unwrap_or_else(|| panic!("no slot ran {pid}: {summary}"))
}

/// Waits up to a minute for `p` to have `n` children; returns them.
fn wait_for_children(p: &mut Proc, n: usize) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let kids = children_of(p.child.id());
        if kids.len() >= n {
            return kids;
        }
        assert!(
            p.child.try_wait().unwrap().is_none(),
            "exited early:\n{}",
            p.log_text()
        );
        assert!(
            Instant::now() < deadline,
            "{} of {n} children:\n{}",
            kids.len(),
            p.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn actor_processes_train_to_the_end_and_a_killed_one_is_started_again() {
    let dir = run_dir("local-processes");
    let run = dir.join("run");
    // Long enough for a progress line (every 10 s) at 14k steps/s: 120k
    // steps ended in 8.5 s on a CI machine, before its first line.
    let mut p = local_with_processes(&dir, &run, 300_000);
    let kids = wait_for_children(&mut p, 2);
    assert_eq!(kids.len(), 2, "two actor processes, nothing else: {kids:?}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while updates_done(&run) < 5 {
        assert!(Instant::now() < deadline, "no updates:\n{}", p.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    let victim = kids[0];
    sigkill(victim);
    let status = p.wait(Duration::from_secs(300)).expect("the run ends");
    let log = p.log_text();
    assert!(status.success(), "{status}:\n{log}");
    assert!(
        log.contains("actor process died: starting it again"),
        "{log}"
    );
    assert_eq!(
        log.matches("actor process started").count(),
        3,
        "two children and one restart:\n{log}"
    );
    assert!(log.contains("actors_as=\"processes\""), "{log}");

    let summary = read_json(&run.join("summary.json"));
    assert_eq!(summary["completed"], true, "{summary}");
    assert_accounted(&summary);
    let per = summary["batches_per_actor"].as_object().expect("per actor");
    let ids: Vec<&String> = per.keys().collect();
    assert!(
        ids.len() >= 3 && ids.iter().all(|id| id.starts_with("local-")),
        "both slots and the restarted process, each accounted: {ids:?}"
    );
    for (id, c) in per {
        assert!(
            c["used"].as_u64().unwrap_or(0) > 0,
            "{id} trained nothing: {c}"
        );
    }
    // Each process's env steps, which add up to the run's.
    let steps: u64 = per
        .values()
        .map(|c| c["env_steps_used"].as_u64().expect("env_steps_used"))
        .sum();
    assert_eq!(Some(steps), summary["env_steps"].as_u64(), "{summary}");
    assert!(log.contains("per_actor=\"local-0="), "{log}");
    assert!(
        summary["batches"]["streams_broken"].as_u64().unwrap_or(0) >= 1,
        "the killed child's stream is counted: {summary}"
    );
    assert_memory_covers_the_children(&summary);
    let victim_slot = slot_of(&summary, victim);
    assert_eq!(victim_slot["restarts"], 1, "{victim_slot}");
    assert_eq!(victim_slot["given_up"], false, "{victim_slot}");
    assert!(
        victim_slot["last_failure"]
            .as_str()
            .is_some_and(|f| f.starts_with("signal 9 (SIGKILL)")),
        "{victim_slot}"
    );
}

#[test]
fn a_child_given_up_ends_the_run_naming_it_and_its_last_failure() {
    let dir = run_dir("local-processes-give-up");
    let run = dir.join("run");
    let mut p = local_with(&dir, &run, 100_000_000, &["run.actor_restarts=1"]);
    let kids = wait_for_children(&mut p, 2);
    let deadline = Instant::now() + Duration::from_secs(120);
    while updates_done(&run) < 3 {
        assert!(Instant::now() < deadline, "no updates:\n{}", p.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    sigkill(kids[0]);
    let again = wait_for_new_child(&mut p, &kids);
    // Killed once it runs (past its exec), as a crash would find it.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !p.log_text().contains(&format!("pid={again}"))
        || sebulba_core::memory::rss_of(again).map_or(0, |(rss, _)| rss) < 2 << 20
    {
        assert!(
            Instant::now() < deadline,
            "{again} never ran:\n{}",
            p.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sigkill(again);
    let status = p.wait(Duration::from_secs(120)).expect("the run ends");
    let log = p.log_text();
    assert!(!status.success(), "a run that lost an actor fails:\n{log}");
    let summary = read_json(&run.join("summary.json"));
    let slot = slot_of(&summary, again);
    let name = slot["name"].as_str().expect("name");
    let said = format!("actor process {name} was given up after 1 restarts");
    assert!(log.contains(&said), "{said}:\n{log}");
    assert!(log.contains("stopping the run"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("Error") && l.contains(&said) && l.contains("SIGKILL")),
        "the exit error names the child and its last failure:\n{log}"
    );
    assert_eq!(summary["completed"], false, "{summary}");
    let why = summary["stopped_by_error"]
        .as_str()
        .expect("stopped_by_error");
    assert!(
        why.contains(&said) && why.contains("signal 9 (SIGKILL)"),
        "{why}"
    );
    let children = &summary["actor_processes"];
    assert_eq!(children["on_give_up"], "stop");
    assert_eq!(children["max_restarts"], 1);
    assert_eq!(children["given_up"], serde_json::json!([name]));
    assert_eq!(slot["given_up"], true);
    assert_eq!(slot["pids"].as_array().map(Vec::len), Some(2), "{slot}");
    assert_memory_covers_the_children(&summary);
    assert_accounted(&summary);
}

#[test]
fn with_continue_the_run_goes_on_without_a_child_given_up_and_folds_it() {
    let dir = run_dir("local-processes-continue");
    let run = dir.join("run");
    let sets = [
        "run.actor_restarts=0",
        "run.on_actor_give_up=\"continue\"",
        "learner.departed_actors_kept=0",
    ];
    let mut p = local_with(&dir, &run, 300_000, &sets);
    let port = p.logged_port("metrics=127.0.0.1:", Duration::from_secs(60));
    let kids = wait_for_children(&mut p, 2);
    let deadline = Instant::now() + Duration::from_secs(120);
    while updates_done(&run) < 3 {
        assert!(Instant::now() < deadline, "no updates:\n{}", p.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Every process's resident size, the children's by slot name (read
    // each second).
    let sizes = || {
        let m = Scrape::get("127.0.0.1", port);
        ["parent", "local-0", "local-1"].map(|process| {
            m.lookup("sebulba_local_rss_bytes", &[("process", process)])
                .unwrap_or(0.0)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while sizes().iter().any(|&b| b < 2e6) {
        assert!(Instant::now() < deadline, "resident sizes {:?}", sizes());
        std::thread::sleep(Duration::from_millis(250));
    }
    sigkill(kids[0]);
    let status = p.wait(Duration::from_secs(300)).expect("the run ends");
    let log = p.log_text();
    assert!(status.success(), "{status}:\n{log}");
    assert!(
        log.contains("going on with 1 of 2 actor processes"),
        "{log}"
    );
    let summary = read_json(&run.join("summary.json"));
    assert_eq!(summary["completed"], true, "{summary}");
    assert!(summary.get("stopped_by_error").is_none(), "{summary}");
    let slot = slot_of(&summary, kids[0]);
    assert_eq!(slot["given_up"], true, "{slot}");
    assert_eq!(
        summary["actor_processes"]["given_up"],
        serde_json::json!([slot["name"]])
    );
    // The given-up child's stream broke; with none kept, its entry folded.
    assert!(
        summary["actors_folded"].as_u64().unwrap_or(0) >= 1,
        "{summary}"
    );
    assert!(
        summary["batches_departed"]["used"].as_u64().unwrap_or(0) > 0,
        "the folded child had trained: {summary}"
    );
    assert_accounted(&summary);
}

#[test]
fn no_actor_process_outlives_a_parent_killed_with_sigkill() {
    let dir = run_dir("local-processes-orphans");
    let run = dir.join("run");
    let mut p = local_with_processes(&dir, &run, 100_000_000);
    let kids = wait_for_children(&mut p, 2);
    let _ = p.child.kill();
    let _ = p.child.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while kids.iter().any(|&k| alive(k)) {
        assert!(
            Instant::now() < deadline,
            "children {:?} outlived their parent",
            kids.iter().filter(|&&k| alive(k)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigterm_to_the_parent_stops_every_actor_process() {
    let dir = run_dir("local-processes-sigterm");
    let run = dir.join("run");
    let mut p = local_with_processes(&dir, &run, 100_000_000);
    let kids = wait_for_children(&mut p, 2);
    let status = p
        .terminate(Duration::from_secs(30))
        .expect("exits on SIGTERM");
    assert!(status.success(), "{status}:\n{}", p.log_text());
    let still: Vec<u32> = kids.iter().copied().filter(|&k| alive(k)).collect();
    assert!(still.is_empty(), "children {still:?} outlived a SIGTERM");
    assert!(
        p.log_text().contains("actor processes stopped"),
        "{}",
        p.log_text()
    );
}
