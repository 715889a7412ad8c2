//! The Prometheus endpoint of a real local run: scraped while it trains, and
//! after it has written `summary.json` (the endpoint stays up for
//! `--metrics-hold-secs`), where every figure must agree with the summary and
//! `eval.jsonl`.

mod common;

use common::scrape::Scrape;
use common::{Proc, bin, read_json, read_jsonl, run_dir};
use std::time::{Duration, Instant};

#[test]
fn a_local_runs_metrics_agree_with_its_summary() {
    let dir = run_dir("metrics");
    let run = dir.join("run");
    let mut cmd = bin();
    cmd.args(["local", "--env", "CartPole-v1", "--total-steps", "30000"])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--metrics-hold-secs",
            "120",
        ])
        .arg("--run-dir")
        .arg(&run);
    let mut p = Proc::spawn("local", cmd, &dir);
    let port = p.logged_port("metrics=127.0.0.1:", Duration::from_secs(60));

    // Live: the endpoint answers in Prometheus' text format while training.
    let live = Scrape::get("127.0.0.1", port);
    assert!(
        live.content_type.starts_with("text/plain"),
        "{}",
        live.content_type
    );

    let deadline = Instant::now() + Duration::from_secs(600);
    while !run.join("summary.json").exists() {
        assert!(
            Instant::now() < deadline,
            "no summary; log:\n{}",
            p.log_text()
        );
        assert!(
            p.child.try_wait().unwrap().is_none(),
            "exited early:\n{}",
            p.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let summary = read_json(&run.join("summary.json"));
    let evals = read_jsonl(&run.join("eval.jsonl"));
    let m = Scrape::get("127.0.0.1", port);

    check_learner(&m, &summary);
    check_other_roles(&m, &summary, &evals);
    // The first and the final evaluation are filmed (`eval.video_every`'s
    // default counts from the first): each video counted once.
    let videos = read_jsonl(&run.join("videos/videos.jsonl"));
    assert!(videos.len() >= 2, "{videos:?}");
    assert_eq!(
        m.value("sebulba_evaluator_videos_total", &[]),
        videos.len() as f64
    );
    let failed = m.lookup("sebulba_evaluator_videos_failed_total", &[]);
    assert_eq!(failed.unwrap_or(0.0), 0.0);
    dashboard_reads_what_the_roles_export(&m);

    // SIGTERM ends the hold at once.
    let status = p
        .terminate(Duration::from_secs(15))
        .expect("exits on SIGTERM during the hold");
    assert!(status.success(), "{status}; log:\n{}", p.log_text());
}

/// Series the learner exports only once such an event happened (a refused
/// batch, a broken stream): absent from a clean run's scrape.
const EVENT_ONLY: [&str; 2] = [
    "sebulba_learner_batches_rejected_total",
    "sebulba_learner_streams_broken_total",
];

/// The Grafana dashboard of the compose `monitoring` profile and its
/// Prometheus config: every series a panel queries is one this run exports
/// (local mode: every role on one endpoint), and Prometheus scrapes every
/// role on the port compose serves metrics on.
fn dashboard_reads_what_the_roles_export(m: &Scrape) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let text = std::fs::read_to_string(root.join("monitoring/grafana/dashboards/sebulba.json"))
        .expect("the dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let exported = m.names();
    let learner_src = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("learner/src/metrics.rs"),
    )
    .expect("learner/src/metrics.rs");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "{} panels", panels.len());
    let mut queried = std::collections::BTreeSet::new();
    for panel in panels {
        let targets = panel["targets"].as_array().expect("targets");
        assert!(
            !targets.is_empty(),
            "panel {} queries nothing",
            panel["title"]
        );
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("sebulba_") {
                    queried.insert(word.to_string());
                }
            }
        }
    }
    for name in &queried {
        if EVENT_ONLY.contains(&name.as_str()) {
            assert!(
                learner_src.contains(name.as_str()),
                "{name}: not a learner series"
            );
        } else {
            assert!(
                exported.contains(name),
                "the dashboard queries {name}, which no role exports"
            );
        }
    }
    let prometheus = std::fs::read_to_string(root.join("monitoring/prometheus.yml")).unwrap();
    let compose = std::fs::read_to_string(root.join("docker-compose.yml")).unwrap();
    assert!(compose.contains("SEBULBA_METRICS_ADDR: ${SEBULBA_METRICS_ADDR-0.0.0.0:9464}"));
    for target in ["param-server:9464", "learner:9464", "evaluator:9464"] {
        assert!(prometheus.contains(target), "prometheus.yml lacks {target}");
    }
    assert!(prometheus.contains("names: [\"actor\"]") && prometheus.contains("port: 9464"));
}

fn u(v: &serde_json::Value) -> f64 {
    v.as_u64().expect("a count") as f64
}

/// The learner's series against `summary.json`.
fn check_learner(m: &Scrape, summary: &serde_json::Value) {
    // The learner: progress, batches by outcome, per actor, the evaluations.
    assert_eq!(
        m.value("sebulba_learner_env_steps_total", &[]),
        u(&summary["env_steps"])
    );
    assert_eq!(
        m.value("sebulba_learner_updates_total", &[]),
        u(&summary["updates"])
    );
    assert_eq!(
        m.value("sebulba_learner_version", &[]),
        u(&summary["final_version"])
    );
    let b = &summary["batches"];
    for outcome in [
        "received",
        "used",
        "dropped_stale",
        "dropped_shutdown",
        "rejected",
    ] {
        let got = m.value("sebulba_learner_batches_total", &[("outcome", outcome)]);
        assert_eq!(got, u(&b[outcome]), "batches {outcome}");
    }
    assert_eq!(m.value("sebulba_learner_queue_depth", &[]), u(&b["queued"]));
    let per_actor = summary["batches_per_actor"].as_object().expect("per actor");
    assert_eq!(per_actor.len(), 2);
    for (actor, c) in per_actor {
        for outcome in ["received", "used"] {
            let got = m.value(
                "sebulba_learner_actor_batches_total",
                &[("actor", actor), ("outcome", outcome)],
            );
            assert_eq!(got, u(&c[outcome]), "{actor} {outcome}");
        }
    }
    // One lag observation per batch used, one duration per update.
    assert_eq!(
        m.value("sebulba_learner_policy_lag_count", &[]),
        u(&b["used"])
    );
    assert_eq!(
        m.value("sebulba_learner_update_seconds_count", &[]),
        u(&summary["updates"])
    );
    let latest = summary["latest_eval_return_mean"]
        .as_f64()
        .expect("evaluated");
    assert_eq!(
        m.value("sebulba_learner_eval_return_mean", &[("which", "latest")]),
        latest
    );
    let best = summary["best_eval_return_mean"].as_f64().expect("best");
    assert_eq!(
        m.value("sebulba_learner_eval_return_mean", &[("which", "best")]),
        best
    );
}

/// The evaluator's, the param-server's and the actors' series.
fn check_other_roles(m: &Scrape, summary: &serde_json::Value, evals: &[serde_json::Value]) {
    let b = &summary["batches"];
    // The evaluator and the param-server say the same.
    let last = evals.last().expect("evaluations");
    assert_eq!(
        m.value("sebulba_evaluator_evaluations_total", &[]),
        evals.len() as f64
    );
    assert_eq!(
        m.value("sebulba_evaluator_version", &[]),
        u(&last["version"])
    );
    assert_eq!(
        m.value("sebulba_evaluator_return_mean", &[]),
        last["return_mean"].as_f64().unwrap()
    );
    let cpu: f64 = evals
        .iter()
        .map(|e| e["cpu_seconds"].as_f64().unwrap())
        .sum();
    let exported = m.value("sebulba_evaluator_cpu_seconds", &[]);
    assert!(
        (exported - cpu).abs() <= 1e-9 * cpu.max(1.0),
        "{exported} against {cpu}"
    );
    let share = m.value("sebulba_evaluator_cpu_share", &[]);
    assert!((0.0..=1.0).contains(&share), "{share}");
    let cut: u64 = evals
        .iter()
        .map(|e| e["episodes_cut"].as_u64().unwrap())
        .sum();
    assert_eq!(
        m.value("sebulba_evaluator_episodes_cut_total", &[]),
        cut as f64
    );
    let episodes: u64 = evals.iter().map(|e| e["episodes"].as_u64().unwrap()).sum();
    assert_eq!(
        m.value("sebulba_evaluator_episodes_total", &[]),
        episodes as f64
    );
    assert_eq!(
        m.value("sebulba_param_server_version", &[]),
        u(&summary["final_version"])
    );
    assert_eq!(
        m.value("sebulba_param_server_env_steps", &[]),
        u(&summary["env_steps"])
    );
    assert_eq!(
        m.value(
            "sebulba_param_server_eval_reports_total",
            &[("outcome", "accepted")]
        ),
        evals.len() as f64
    );

    // The actors: every batch the learner used was acked to its actor as
    // used, and they stepped at least the env steps trained on.
    assert_eq!(
        m.value(
            "sebulba_actor_batches_acked_total",
            &[("actor", "local-0"), ("verdict", "used")]
        ) + m.value(
            "sebulba_actor_batches_acked_total",
            &[("actor", "local-1"), ("verdict", "used")]
        ),
        u(&b["used"])
    );
    assert!(m.sum("sebulba_actor_env_steps_total") >= u(&summary["env_steps"]));
    assert!(m.sum("sebulba_actor_episodes_total") > 0.0);
}

#[test]
fn a_bad_metrics_address_fails_at_start_in_one_line() {
    let dir = run_dir("metrics-bad");
    let out = bin()
        .args([
            "local",
            "--env",
            "CartPole-v1",
            "--metrics-addr",
            "localhost-9464",
        ])
        .arg("--run-dir")
        .arg(dir.join("run"))
        .output()
        .expect("run sebulba");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--metrics-addr `localhost-9464`"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
