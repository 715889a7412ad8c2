//! Soak: every role as its own process (param-server, learner, evaluator and 4
//! actors) training CartPole for `SEBULBA_SOAK_SECS` (default 1800), sampling
//! each role's resident memory every 10 s into `rss.csv` and printing a table of
//! warm-up, peak and final RSS per role. Fails if a role's memory keeps growing
//! (final more than 1.5x its value after warm-up, plus 64 MiB).
//!
//! Not in CI's default run (30 minutes):
//! `cargo test --test soak -- --ignored --nocapture`

mod common;

use common::{Proc, actor, evaluator, learner, param_server, run_dir};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Resident set size of `pid` in KiB (Linux `/proc`).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

#[test]
#[ignore = "30-minute soak, run by hand: cargo test --test soak -- --ignored --nocapture"]
fn four_actors_for_thirty_minutes_without_memory_growth() {
    let secs: u64 = std::env::var("SEBULBA_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1800);
    let dir = run_dir("soak");
    let run = dir.join("run");
    let (ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let args = ["--set", "run.total_steps=1000000000000"];
    let (mut learner, port) = learner(&dir, "learner", "127.0.0.1:0", &ps_url, &run, &args, |_| {});
    let learner_url = format!("http://127.0.0.1:{port}");
    let evaluator = evaluator(&dir, &ps_url, &run, |_| {});
    let actors: Vec<Proc> = (0..4)
        .map(|i| actor(&dir, &format!("actor-{i}"), &learner_url, &ps_url, |_| {}))
        .collect();

    let mut roles: Vec<&Proc> = vec![&ps, &learner, &evaluator];
    roles.extend(actors.iter());
    let mut csv = String::from("seconds");
    for r in &roles {
        let _ = write!(csv, ",{}_rss_kib", r.name);
    }
    csv.push('\n');
    let t0 = Instant::now();
    let warm_up = Duration::from_secs((secs / 6).clamp(10, 300));
    let mut warm: Vec<Option<u64>> = vec![None; roles.len()];
    let mut peak = vec![0u64; roles.len()];
    let mut last = vec![0u64; roles.len()];
    while t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_secs(10));
        let _ = write!(csv, "{}", t0.elapsed().as_secs());
        for (i, r) in roles.iter().enumerate() {
            let kib = rss_kib(r.child.id())
                .unwrap_or_else(|| panic!("{} is gone:\n{}", r.name, r.log_text()));
            let _ = write!(csv, ",{kib}");
            peak[i] = peak[i].max(kib);
            last[i] = kib;
            if t0.elapsed() >= warm_up && warm[i].is_none() {
                warm[i] = Some(kib);
            }
        }
        csv.push('\n');
        std::fs::write(dir.join("rss.csv"), &csv).expect("rss.csv");
    }
    let steps = std::fs::read_to_string(run.join("metrics.jsonl"))
        .ok()
        .and_then(|t| t.lines().last().map(str::to_string))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .and_then(|v| v["env_steps"].as_u64())
        .unwrap_or(0);
    println!(
        "soak: {secs} s, {steps} env steps; RSS per role (MiB), samples in {}",
        dir.join("rss.csv").display()
    );
    println!("| role | after warm-up | peak | final |");
    println!("|---|---|---|---|");
    let mib = |k: u64| k as f64 / 1024.0;
    for (i, r) in roles.iter().enumerate() {
        let w = warm[i].unwrap_or(last[i]);
        println!(
            "| {} | {:.1} | {:.1} | {:.1} |",
            r.name,
            mib(w),
            mib(peak[i]),
            mib(last[i])
        );
        assert!(
            last[i] as f64 <= 1.5 * w as f64 + 64.0 * 1024.0,
            "{}: RSS grew from {w} KiB to {} KiB",
            r.name,
            last[i]
        );
    }
    let s = learner.terminate(Duration::from_secs(30));
    assert!(s.is_some_and(|s| s.success()), "learner stops cleanly");
}
