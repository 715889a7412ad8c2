//! The Prometheus endpoint of a real local run: scraped while it trains, and
//! after it has written `summary.json` (the endpoint stays up for
//! `--metrics-hold-secs`), where every figure must agree with the summary and
//! `eval.jsonl`.

mod common;

use common::{Proc, bin, read_json, read_jsonl, run_dir};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// One scrape: `name{label="v",...}` (labels sorted) → value, and the
/// response's content type.
struct Scrape {
    content_type: String,
    samples: HashMap<String, f64>,
}

impl Scrape {
    fn get(port: u16) -> Scrape {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to /metrics");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).expect("read /metrics");
        let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
        assert!(
            head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
            "{head}"
        );
        let content_type = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-type:")
                    .map(|v| v.trim().to_string())
            })
            .unwrap_or_default();
        let samples = body
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').expect("`series value`");
                (canonical(series), value.parse::<f64>().expect("a number"))
            })
            .collect();
        Scrape {
            content_type,
            samples,
        }
    }

    /// The value of `name` with exactly `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let key = key(
            name,
            labels
                .iter()
                .map(|&(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        *self
            .samples
            .get(&key)
            .unwrap_or_else(|| panic!("no series {key} in the scrape"))
    }

    /// The sum of `name` over every label set.
    fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|(k, _)| k.split('{').next() == Some(name))
            .map(|(_, v)| v)
            .sum()
    }
}

fn key(name: &str, labels: BTreeMap<String, String>) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// `name{b="2",a="1"}` → `name{a="1",b="2"}`.
fn canonical(series: &str) -> String {
    let Some((name, rest)) = series.split_once('{') else {
        return key(series, BTreeMap::new());
    };
    let labels = rest
        .trim_end_matches('}')
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').expect("label=value");
            (k.to_string(), v.trim_matches('"').to_string())
        })
        .collect();
    key(name, labels)
}

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
    let live = Scrape::get(port);
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
    let m = Scrape::get(port);

    check_learner(&m, &summary);
    check_other_roles(&m, &summary, &evals);

    // SIGTERM ends the hold at once.
    let status = p
        .terminate(Duration::from_secs(15))
        .expect("exits on SIGTERM during the hold");
    assert!(status.success(), "{status}; log:\n{}", p.log_text());
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
