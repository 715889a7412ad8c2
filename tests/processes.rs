//! The four roles as separate OS processes on loopback: param-server, learner,
//! two actors and the evaluator. Training completes, every batch is accounted
//! for, both actors' batches are used, and every role exits cleanly. Every role
//! exports traces to a real OTLP receiver, and the traces connect across
//! processes: actor rollout -> learner ingest, learner publish -> actor refresh.

// Each test is one scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;
use common::*;
use std::sync::Mutex;
use std::time::Duration;

/// The first test picks its ports before binding them (its actors start before
/// the learner); it runs alone so no other test's connections can take them.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn four_roles_as_separate_processes() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = run_dir("processes");
    let run = dir.join("run");
    let (ps_port, learner_port) = (free_port(), free_port());
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let learner_url = format!("http://127.0.0.1:{learner_port}");
    let receiver = otlp::Receiver::start("127.0.0.1:0");
    let otlp = format!("http://{}", receiver.addr);
    // Every role exports; the evaluator's service name comes from OTEL_SERVICE_NAME.
    let bin = || {
        let mut c = bin();
        c.env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
            .env_remove("OTEL_SERVICE_NAME");
        c
    };

    let mut ps = Proc::spawn(
        "param-server",
        {
            let mut c = bin();
            c.args(["param-server", "--listen", &format!("127.0.0.1:{ps_port}")]);
            c
        },
        &dir,
    );
    // Actors and the evaluator start before the learner: they must wait and retry.
    let mut actors: Vec<Proc> = (0..2)
        .map(|i| {
            let mut c = bin();
            c.args([
                "actor",
                "--learner",
                &learner_url,
                "--param-server",
                &ps_url,
                "--name",
                &format!("proc-{i}"),
            ]);
            Proc::spawn(&format!("actor-{i}"), c, &dir)
        })
        .collect();
    let mut evaluator = Proc::spawn(
        "evaluator",
        {
            let mut c = bin();
            c.args([
                "evaluator",
                "--param-server",
                &ps_url,
                "--interval",
                "5",
                "--episodes",
                "4",
                "--run-dir",
            ])
            .arg(&run)
            .env("OTEL_SERVICE_NAME", "evaluator");
            c
        },
        &dir,
    );
    // Configuration through the environment, as containers do it.
    let mut learner = Proc::spawn(
        "learner",
        {
            let mut c = bin();
            c.args(["learner", "--listen", &format!("127.0.0.1:{learner_port}")])
                .env("SEBULBA_PARAM_SERVER", &ps_url)
                .env("SEBULBA_ENV", "CartPole-v1")
                .env("SEBULBA_TOTAL_STEPS", "20000")
                .env("SEBULBA_SEED", "7")
                .env("SEBULBA_RUN_DIR", &run);
            c
        },
        &dir,
    );

    // `sebulba health` (the containers' healthcheck) sees both servers serving,
    // and fails on a port nobody serves.
    let healthy = |port: u16| {
        bin()
            .args(["health", "--addr", &format!("127.0.0.1:{port}")])
            .output()
            .expect("run sebulba health")
            .status
            .success()
    };
    for port in [ps_port, learner_port] {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !healthy(port) {
            assert!(
                std::time::Instant::now() < deadline,
                "port {port} never reported SERVING"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    assert!(!healthy(free_port()), "health passes on a closed port");

    let status = learner
        .wait(Duration::from_secs(300))
        .unwrap_or_else(|| panic!("learner did not finish; log:\n{}", learner.log_text()));
    assert!(
        status.success(),
        "learner failed: {status}\n{}",
        learner.log_text()
    );
    for a in actors.iter_mut() {
        let s = a.wait(Duration::from_secs(30)).unwrap_or_else(|| {
            panic!(
                "{} did not stop after the run; log:\n{}",
                a.name,
                a.log_text()
            )
        });
        assert!(s.success(), "{} failed: {s}\n{}", a.name, a.log_text());
    }
    let s = evaluator
        .wait(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("evaluator did not stop; log:\n{}", evaluator.log_text()));
    assert!(
        s.success(),
        "evaluator failed: {s}\n{}",
        evaluator.log_text()
    );
    status_matches_the_run(&ps_url, &run, &otlp);
    let s = ps
        .terminate(Duration::from_secs(10))
        .expect("param-server ignores SIGTERM");
    assert!(
        s.success(),
        "param-server exit on SIGTERM: {s}\n{}",
        ps.log_text()
    );

    let summary = read_json(&run.join("summary.json"));
    eprintln!("summary: {summary:#}");
    assert!(summary["env_steps"].as_u64().expect("env_steps") >= 20_000);
    assert_accounted(&summary);
    let per = summary["batches_per_actor"].as_object().expect("per actor");
    assert_eq!(per.len(), 2, "two actors: {per:?}");
    for (actor, c) in per {
        assert!(
            c["used"].as_u64().unwrap_or(0) > 0,
            "no batch of {actor} was used"
        );
    }
    assert!(
        summary["final_eval_return_mean"].as_f64().is_some(),
        "the final version was not evaluated"
    );
    let evals = read_jsonl(&run.join("eval.jsonl"));
    assert_eq!(evals.last().expect("evaluations")["final"], true);
    assert!(
        evals.len() >= 2,
        "evaluations every 5 versions: {}",
        evals.len()
    );

    // Each role flushed its spans on the way out.
    let spans = receiver.spans();
    let report = otlp::analyse(&spans);
    eprintln!("{} spans: {report}", spans.len());
    let expected = [
        "sebulba-param-server",
        "sebulba-learner",
        "sebulba-actor",
        "evaluator",
    ];
    for service in expected {
        assert!(
            report.services.contains(service),
            "no spans from {service}: {report}"
        );
    }
    for (service, name) in [
        ("sebulba-actor", "rollout"),
        ("sebulba-actor", "act"),
        ("sebulba-learner", "queue_wait"),
        ("sebulba-learner", "sgd"),
        ("sebulba-param-server", "sebulba.v1.ParameterServer/Publish"),
        ("sebulba-learner", "sebulba.v1.Learner/StreamTrajectories"),
        ("evaluator", "evaluate"),
        ("sebulba-status", "status"),
    ] {
        assert!(
            report
                .names
                .contains(&(service.to_string(), name.to_string())),
            "no {name} span from {service}: {report}"
        );
    }
    assert!(report.ingest_continuing_send > 0, "{report}");
    assert!(report.cross_service_traces > 0, "{report}");
    assert!(report.updates_linking_ingest > 0, "{report}");
    assert!(report.refresh_continuing_publish > 0, "{report}");
    // The README's trace table: every gRPC server span is a child of its caller.
    assert!(report.server_spans_without_parent.is_empty(), "{report}");
}

/// SIGTERM in the middle of training, to every role: the learner writes its
/// summary (accounting intact) and final weights and exits 0; actors, the
/// evaluator and the param-server exit 0 too; nothing hangs.
#[test]
fn every_role_shuts_down_cleanly_on_sigterm_mid_run() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = run_dir("sigterm");
    let run = dir.join("run");
    let spawn = |name: &str, args: &[&str]| {
        let mut c = bin();
        c.args(args);
        Proc::spawn(name, c, &dir)
    };
    // Servers bind port 0 and report the port: this test runs beside another.
    let mut ps = spawn("param-server", &["param-server", "--listen", "127.0.0.1:0"]);
    let ps_url = format!(
        "http://127.0.0.1:{}",
        ps.bound_port(Duration::from_secs(30))
    );
    let mut learner = {
        let mut c = bin();
        c.args(["learner", "--listen", "127.0.0.1:0"])
            .args(["--param-server", &ps_url, "--env", "CartPole-v1"])
            .args(["--set", "run.total_steps=100000000", "--run-dir"])
            .arg(&run);
        Proc::spawn("learner", c, &dir)
    };
    let learner_url = format!(
        "http://127.0.0.1:{}",
        learner.bound_port(Duration::from_secs(30))
    );
    let mut actors: Vec<Proc> = (0..2)
        .map(|i| {
            spawn(
                &format!("actor-{i}"),
                &[
                    "actor",
                    "--learner",
                    &learner_url,
                    "--param-server",
                    &ps_url,
                ],
            )
        })
        .collect();
    let mut evaluator = {
        let mut c = bin();
        c.args(["evaluator", "--param-server", &ps_url, "--run-dir"])
            .arg(&run);
        Proc::spawn("evaluator", c, &dir)
    };

    // Let it train for a few updates, and the evaluator score one version:
    // the summary below must carry a score. The first evaluation is filmed
    // (ffmpeg starts), so it can come after the fifth update; the report to
    // the param-server follows its `eval.jsonl` line by milliseconds.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while read_lines(&run.join("metrics.jsonl")) < 5 || read_lines(&run.join("eval.jsonl")) < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "no 5 updates and one evaluation in 120 s; learner log:\n{}\nevaluator log:\n{}",
            learner.log_text(),
            evaluator.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(1));

    let s = learner
        .terminate(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("learner hangs on SIGTERM:\n{}", learner.log_text()));
    assert!(
        s.success(),
        "learner on SIGTERM: {s}\n{}",
        learner.log_text()
    );
    // It ended the actors' streams itself (UNAVAILABLE: come back later)
    // rather than leaving them for the shutdown grace to cut.
    let log = learner.log_text();
    assert!(
        !log.contains("connections still open"),
        "the learner waited out its shutdown grace:\n{log}"
    );
    let summary = read_json(&run.join("summary.json"));
    assert_accounted(&summary);
    assert!(summary["updates"].as_u64().expect("updates") >= 5);
    assert_eq!(summary["completed"], false, "{summary}");
    // Stopped before its budget, the summary still has the evaluator's scores.
    assert!(
        summary["latest_eval_version"].is_u64() && summary["best_eval_return_mean"].is_f64(),
        "{summary}"
    );
    assert!(run.join("final.safetensors").is_file());
    // The state at the stop is checkpointed, whatever the interval.
    let ck = std::fs::read(run.join("checkpoint.bin")).expect("checkpoint.bin after SIGTERM");
    let updates = summary["updates"].to_string();
    assert!(
        String::from_utf8_lossy(&ck).contains(&format!("\"updates\":{updates},")),
        "the checkpoint holds update {updates}"
    );
    // The learner stopped before the end of the run: the run is not over, so
    // the actors wait for it to come back instead of exiting.
    std::thread::sleep(Duration::from_secs(2));
    for a in actors.iter_mut() {
        assert!(
            matches!(a.child.try_wait(), Ok(None)),
            "{} concluded the run was over:\n{}",
            a.name,
            a.log_text()
        );
    }
    // They still stop at once on SIGTERM.
    for p in actors.iter_mut().chain([&mut evaluator, &mut ps]) {
        let s = p
            .terminate(Duration::from_secs(15))
            .unwrap_or_else(|| panic!("{} hangs on SIGTERM:\n{}", p.name, p.log_text()));
        assert!(s.success(), "{} on SIGTERM: {s}\n{}", p.name, p.log_text());
    }
}

fn read_lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// `sebulba status` against the finished run's param-server: the version,
/// env steps, throughput and evaluations the run's own files report.
fn status_matches_the_run(ps_url: &str, run: &std::path::Path, otlp: &str) {
    let out = bin()
        .args(["status", "--param-server", ps_url, "--json"])
        // Its calls are traces of their own (the span checks below).
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
        .output()
        .expect("run sebulba status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_str(&text).expect("status --json");
    let summary = read_json(&run.join("summary.json"));
    let evals = read_jsonl(&run.join("eval.jsonl"));
    assert_eq!(status["finished"], true, "{status:#}");
    assert_eq!(status["version"], summary["final_version"], "{status:#}");
    assert_eq!(status["env_steps"], summary["env_steps"], "{status:#}");
    let sps = status["steps_per_second"].as_f64().expect("steps/s");
    let expect = summary["env_steps"].as_f64().unwrap() / status["wall_seconds"].as_f64().unwrap();
    assert!((sps - expect).abs() < 1e-6 * expect, "{status:#}");
    let wall = status["wall_seconds"].as_f64().unwrap();
    let run_wall = summary["wall_seconds"].as_f64().unwrap();
    assert!(wall > 0.0 && wall <= run_wall, "{wall} vs {run_wall}");
    let last = evals.last().expect("evaluations");
    let latest = &status["latest_eval"];
    assert_eq!(latest["version"], last["version"], "{status:#}");
    assert_eq!(latest["return_mean"], last["return_mean"], "{status:#}");
    let best = evals
        .iter()
        .filter_map(|e| e["return_mean"].as_f64())
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(status["best_eval"]["return_mean"].as_f64(), Some(best));
    // The text form, for a person.
    let out = bin()
        .args(["status", "--param-server", ps_url])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
        .output()
        .expect("run sebulba status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(final: the run is done)"), "{text}");
    assert!(
        text.contains(&format!("env steps   {}", summary["env_steps"])),
        "{text}"
    );
}
