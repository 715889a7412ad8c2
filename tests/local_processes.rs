//! `sebulba local` with its actors as child processes
//! (`run.local_actors_as = "processes"`, the default for Python envs): two
//! children train one run to its end over loopback gRPC with the accounting
//! balanced per process; a child killed with SIGKILL is started again and
//! the run still completes; and when the parent itself is killed with
//! SIGKILL, no child survives it.

mod common;

use common::{Proc, assert_accounted, bin, read_json, run_dir, updates_done};
use std::path::Path;
use std::time::{Duration, Instant};

/// The pids whose parent is `parent` (from /proc/*/stat; zombies left out:
/// they have exited).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
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

/// `sebulba local` on CartPole with `n` actor processes and `steps` steps.
fn local_with_processes(dir: &Path, run: &Path, steps: u64) -> Proc {
    let mut cmd = bin();
    cmd.args(["local", "--env", "CartPole-v1", "--actors", "2"])
        .args(["--set", "run.local_actors_as=\"processes\""])
        .args(["--total-steps", &steps.to_string()])
        .arg("--run-dir")
        .arg(run);
    Proc::spawn("local", cmd, dir)
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
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status();
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
