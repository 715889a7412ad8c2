//! A real Prometheus against a real run: every role a process with its own
//! metrics endpoint (as in the compose cluster), Debian's `prometheus`
//! scraping them every second with `deploy/monitoring/alerts.yml` loaded.
//! While the run trains (and after a malformed batch and a killed actor,
//! so that the event-only series exist), every expression of the Grafana
//! dashboard returns at least one series, with the labels its `by (...)`
//! names; every alert rule evaluates without error. Then the remaining actor
//! is killed: the run stalls, and the stall alerts fire.
//!
//! The alert rules are the shipped ones with their windows and `for`
//! durations shortened (minutes to seconds), so the test takes seconds, not
//! minutes; the expressions are otherwise the file's.

// One scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;

use common::prometheus::{Prometheus, prometheus_or_skip};
use common::scrape::Scrape;
use common::{Proc, actor, evaluator, learner, param_server, run_dir, wait_for_updates};
use sebulba_proto::learner_client::LearnerClient;
use sebulba_proto::{JoinRequest, PROTOCOL_VERSION, Role};
use sebulba_testkit::{Dims, malformations, valid_batch};
use sebulba_transport::grpc::channel;
use sebulba_transport::security::Security;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn with_metrics(c: &mut Command) {
    c.args(["--metrics-addr", "127.0.0.1:0"]);
}

fn metrics_port(p: &Proc) -> u16 {
    p.logged_port("metrics=127.0.0.1:", Duration::from_secs(60))
}

/// The shipped alert rules with minutes made seconds: `[2m]` -> `[15s]`,
/// `[5m]` and `offset 5m` -> 20 s, `for: 1m` -> `for: 5s`, longer `for`s -> `for: 10s`.
fn shortened_rules(dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(root().join("deploy/monitoring/alerts.yml")).unwrap();
    let short = text
        .replace("[2m]", "[15s]")
        .replace("[5m]", "[20s]")
        .replace("offset 5m", "offset 20s")
        .replace("for: 1m", "for: 5s")
        .replace("for: 5m", "for: 10s")
        .replace("for: 10m", "for: 10s");
    assert!(
        !short.contains("m]") && !short.contains("offset 5m"),
        "a window left unshortened:\n{short}"
    );
    let path = dir.join("alerts.yml");
    std::fs::write(&path, short).unwrap();
    path
}

/// Every `expr` of the dashboard's panels.
fn dashboard_exprs() -> Vec<String> {
    let path = root().join("deploy/monitoring/grafana/dashboards/sebulba.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for t in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(t["expr"].as_str().expect("expr").to_string());
        }
    }
    assert!(exprs.len() > 20, "{} expressions", exprs.len());
    exprs
}

/// The labels an expression's outermost `by (...)` keeps.
fn by_labels(expr: &str) -> Vec<String> {
    let Some(at) = expr.find(" by (") else {
        return Vec::new();
    };
    let rest = &expr[at + 5..];
    rest[..rest.find(')').expect("a closing parenthesis")]
        .split(',')
        .map(|l| l.trim().to_string())
        .filter(|l| l != "le")
        .collect()
}

/// Joins as an actor and streams one batch with a NaN reward: refused as
/// `non_finite` (the test's malformed batch).
fn send_a_nan_batch(learner_url: &str) {
    let env = sebulba_envs::env_spec("CartPole-v1").expect("env");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let ch = channel(learner_url, &Security::insecure(), None).expect("channel");
        let mut client = LearnerClient::new(ch);
        let joined = client
            .join(JoinRequest {
                protocol_version: PROTOCOL_VERSION,
                name: "probe".into(),
                role: Role::Actor as i32,
            })
            .await
            .expect("join")
            .into_inner();
        let spec = joined.spec.expect("spec");
        let (t, e) = (spec.rollout_length as usize, spec.envs_per_actor as usize);
        let rule = malformations()
            .into_iter()
            .find(|m| m.reason == "non_finite" && m.field == "`rewards`")
            .expect("the NaN reward rule");
        let mut batch = valid_batch(&env, t, e, &joined.actor_id, 1, 0);
        (rule.apply)(&mut batch, Dims::of(&env, t, e));
        let (tx, rx) = mpsc::channel(1);
        let mut acks = client
            .stream_trajectories(ReceiverStream::new(rx))
            .await
            .expect("stream")
            .into_inner();
        tx.send(batch).await.expect("send");
        let ack = tokio::time::timeout(Duration::from_secs(30), acks.message())
            .await
            .expect("an ack in 30 s")
            .expect("the stream stays open")
            .expect("an ack");
        assert_eq!(ack.code, tonic::Code::InvalidArgument as i32, "{ack:?}");
    });
}

/// Waits up to `limit` for `check` to pass, checking every half second;
/// panics with its last complaint.
fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + limit;
    loop {
        match check() {
            Ok(()) => return,
            Err(why) => assert!(
                Instant::now() < deadline,
                "{what}: not within {limit:?}: {why}"
            ),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Ok when every alert of `names` fires.
fn fire(prom: &Prometheus, names: &[&str]) -> Result<(), String> {
    let firing = prom.firing();
    match names.iter().all(|a| firing.iter().any(|f| f == a)) {
        true => Ok(()),
        false => Err(format!("firing: {firing:?}")),
    }
}

#[test]
fn a_real_prometheus_reads_every_dashboard_series_and_fires_the_stall_alerts() {
    let Some(exe) = prometheus_or_skip() else {
        return;
    };
    let dir = run_dir("prometheus");
    let run = dir.join("run");
    let (ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", with_metrics);
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let args = [
        "--set",
        "run.total_steps=100000000",
        "--set",
        "eval.interval=5",
    ];
    let (learner, port) = learner(
        &dir,
        "learner",
        "127.0.0.1:0",
        &ps_url,
        &run,
        &args,
        with_metrics,
    );
    let learner_url = format!("http://127.0.0.1:{port}");
    let mut first = actor(&dir, "actor-1", &learner_url, &ps_url, with_metrics);
    let mut second = actor(&dir, "actor-2", &learner_url, &ps_url, with_metrics);
    let evaluator = evaluator(&dir, &ps_url, &run, with_metrics);
    let targets = [
        ("param-server", metrics_port(&ps)),
        ("learner", metrics_port(&learner)),
        ("actor", metrics_port(&first)),
        ("actor", metrics_port(&second)),
        ("evaluator", metrics_port(&evaluator)),
    ];
    let rules = shortened_rules(&dir);
    let prom = Prometheus::start(&exe, &dir, &targets, Some(&rules));
    let scraping_since = Instant::now();

    wait_for_updates(&run, 10, &learner);
    // The event-only series: a refused batch, and a stream broken by a
    // killed actor.
    send_a_nan_batch(&learner_url);
    let _ = second.child.kill();
    let _ = second.child.wait();
    let learner_metrics = targets[1].1;
    wait_until(
        "the learner counts the broken stream and the evaluations",
        Duration::from_secs(120),
        || {
            let m = Scrape::get("127.0.0.1", learner_metrics);
            let broken = m.sum("sebulba_learner_streams_broken_total");
            let evals = m.names().contains("sebulba_learner_eval_return_mean");
            match broken >= 1.0 && evals {
                true => Ok(()),
                false => Err(format!(
                    "broken streams {broken}, evaluations read: {evals}"
                )),
            }
        },
    );

    // Every dashboard expression answers with a series, labelled as its
    // `by (...)` says (Prometheus has scraped at least twice since).
    let exprs = dashboard_exprs();
    wait_until(
        "every dashboard expression returns a series",
        Duration::from_secs(60),
        || {
            let missing: Vec<&String> = exprs.iter().filter(|e| prom.query(e).is_empty()).collect();
            match missing.is_empty() {
                true => Ok(()),
                false => Err(format!("no series for {missing:?}")),
            }
        },
    );
    for expr in &exprs {
        for series in prom.query(expr) {
            for label in by_labels(expr) {
                assert!(
                    series["metric"][&label].is_string(),
                    "`{expr}` lacks `{label}`: {series}"
                );
            }
        }
    }
    let refused = prom.query("sum by (reason) (sebulba_learner_batches_rejected_total)");
    assert!(
        refused
            .iter()
            .any(|s| s["metric"]["reason"] == "non_finite"),
        "{refused:?}"
    );

    // The rules: all evaluate; the refused batch fires its alert; a healthy
    // run has no stall or non-finite alert.
    let alert_rules = prom.alert_rules();
    assert_eq!(alert_rules.len(), 6, "{alert_rules:?}");
    for r in &alert_rules {
        assert_eq!(r["health"], "ok", "{r}");
    }
    wait_until(
        "SebulbaBatchesRefused fires",
        Duration::from_secs(30),
        || fire(&prom, &["SebulbaBatchesRefused"]),
    );
    // A window without two samples reads as no env steps and no updates:
    // judge the stall rules once their (shortened, 15 s) windows are full
    // and a few evaluations have passed since.
    let full = Duration::from_secs(20);
    std::thread::sleep(full.saturating_sub(scraping_since.elapsed()));
    let firing = prom.firing();
    for calm in [
        "SebulbaLearnerStalled",
        "SebulbaActorsGone",
        "SebulbaNonFiniteSteps",
    ] {
        assert!(
            !firing.iter().any(|f| f == calm),
            "{calm} fires: {firing:?}"
        );
    }

    // The last actor dies: no env steps, no updates; both stall alerts fire.
    let _ = first.child.kill();
    let _ = first.child.wait();
    let t0 = Instant::now();
    wait_until(
        "SebulbaActorsGone and SebulbaLearnerStalled fire",
        Duration::from_secs(90),
        || fire(&prom, &["SebulbaActorsGone", "SebulbaLearnerStalled"]),
    );
    eprintln!(
        "stall alerts fired {:.1} s after the last actor died",
        t0.elapsed().as_secs_f64()
    );
    for r in prom.alert_rules() {
        assert_eq!(r["health"], "ok", "{r}");
    }
}
