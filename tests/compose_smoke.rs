//! The cluster as users run it: the image built offline from the test binary
//! (`deploy/build-image.sh`, nothing pulled), `deploy/docker-compose.yml` up with
//! one actor, secured as the README shows (`sebulba certs` writes the
//! certificates and three role tokens, `tokens.env`, which every compose command
//! reads with `--env-file`; `deploy/docker-compose.secure.yml`: every call over
//! TLS with a token), scaled
//! to three actors while training runs, one actor container killed;
//! training still reaches its budget, the evaluator scores the final version and
//! every actor's batches are used and accounted for. Every service exports its
//! traces over OTLP to a real receiver in this test (in place of Jaeger), and at
//! least one trace crosses from an actor container into the learner's.
//!
//! Needs Docker with Compose. Under CI (`CI` set) a missing Docker fails the
//! test; elsewhere it is skipped with the reason printed.

// Each test is one scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;
use common::compose::*;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn compose_cluster_scales_survives_a_killed_actor_and_finishes() {
    let Some(compose) = compose_or_skip() else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tag = format!("sebulba:smoke-{}", std::process::id());
    let t0 = Instant::now();
    let _image = build_image(&tag);
    eprintln!("image built offline in {:.1} s", t0.elapsed().as_secs_f64());

    // The trace receiver listens on the host; containers reach it through the
    // host gateway, which an override file maps for each service.
    let receiver = otlp::Receiver::start("0.0.0.0:0");
    let dir = run_dir("compose-smoke");
    let override_file = dir.join("otlp-receiver.yml");
    let gateway = "    extra_hosts:\n      - \"host.docker.internal:host-gateway\"\n";
    let yaml: String = ["param-server", "learner", "actor", "evaluator"]
        .iter()
        .map(|s| format!("  {s}:\n{gateway}"))
        .collect();
    std::fs::write(&override_file, format!("services:\n{yaml}")).expect("write override");
    // Secured as the README shows: `sebulba certs` (certificates and tokens.env), the secure overlay.
    let certs = dir.join("certs");
    run(Command::new(env!("CARGO_BIN_EXE_sebulba"))
        .args(["certs", "--out"])
        .arg(&certs));
    let cluster = Cluster {
        compose,
        project: format!("sebulba-smoke-{}", std::process::id()),
        files: vec![
            root.join("deploy/docker-compose.yml"),
            root.join("deploy/docker-compose.secure.yml"),
            override_file,
        ],
        // The tokens `sebulba certs` wrote, read by every compose command.
        env_file: Some(certs.join("tokens.env")),
        env: vec![
            ("SEBULBA_CERTS", certs.display().to_string()),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://host.docker.internal:{}", receiver.addr.port()),
            ),
            ("SEBULBA_IMAGE", tag.clone()),
            ("SEBULBA_ENV", "CartPole-v1".into()),
            ("SEBULBA_TOTAL_STEPS", "120000".into()),
            ("SEBULBA_SEED", "3".into()),
        ],
    };
    run(&mut cluster.cmd(&["up", "-d"]));
    let learner = cluster
        .containers("learner")
        .pop()
        .expect("a learner container");
    // Scale while training runs: wait for the first update.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = run(Command::new("docker").args(["logs", &learner]));
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        if text.contains("participant joined") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no actor joined the learner in 120 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    run(&mut cluster.cmd(&["up", "-d", "--scale", "actor=3"]));
    let actors = cluster.containers("actor");
    assert_eq!(actors.len(), 3, "scaled to 3 actors: {actors:?}");
    std::thread::sleep(Duration::from_secs(3));
    run(Command::new("docker").args(["kill", &actors[2]]));
    eprintln!("killed actor container {}", &actors[2]);

    // The run's directory under the runs root is named for its id.
    let out = run(Command::new("docker").args(["logs", &learner]));
    let log =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let run_id = logged_run_id(&log);
    let run_dir = format!("/runs/{run_id}");
    learner_metrics_match_its_summary(&learner, &run_dir, &dir);
    let code = stdout(Command::new("docker").args(["wait", &learner]));
    assert_eq!(code, "0", "learner exit code");
    copy_out(
        &learner,
        &format!("{run_dir}/summary.json"),
        &dir.join("summary.json"),
    );
    copy_out(
        &learner,
        &format!("{run_dir}/metrics.jsonl"),
        &dir.join("metrics.jsonl"),
    );
    let evaluator = cluster
        .containers("evaluator")
        .pop()
        .expect("an evaluator container");
    let code = stdout(Command::new("docker").args(["wait", &evaluator]));
    assert_eq!(code, "0", "evaluator exit code");
    copy_out(
        &evaluator,
        &format!("{run_dir}/eval.jsonl"),
        &dir.join("eval.jsonl"),
    );

    let summary = read_json(&dir.join("summary.json"));
    eprintln!("summary: {summary:#}");
    assert!(summary["env_steps"].as_u64().expect("env_steps") >= 120_000);
    assert_accounted(&summary);
    let per = summary["batches_per_actor"].as_object().expect("per actor");
    assert!(per.len() >= 3, "batches from 3 actors: {per:?}");
    // Every call carried a token over TLS: the logs show the servers enforcing.
    let logs = run(&mut cluster.cmd(&["logs", "--no-color", "learner", "param-server"]));
    let logs = String::from_utf8_lossy(&logs.stdout);
    assert!(
        logs.contains("tls=true") && logs.contains("auth=true"),
        "servers not secured:\n{logs}"
    );
    for (actor, c) in per {
        assert!(
            c["used"].as_u64().unwrap_or(0) > 0,
            "no batch of {actor} was used"
        );
    }
    let evals = read_jsonl(&dir.join("eval.jsonl"));
    let last = evals.last().expect("evaluations");
    assert_eq!(last["final"], true);
    assert_eq!(last["version"], summary["final_version"]);

    // Stop what still runs (SIGTERM: the param-server flushes its spans), then
    // read what every service exported.
    run(&mut cluster.cmd(&["stop", "-t", "20"]));
    let spans = receiver.spans();
    let report = otlp::analyse(&spans);
    eprintln!("{} spans received: {report}", spans.len());
    for service in ["param-server", "learner", "actor", "evaluator"] {
        assert!(
            report.services.contains(service),
            "no spans from {service}: {report}"
        );
    }
    assert!(report.ingest_continuing_send > 0, "{report}");
    assert!(report.cross_service_traces > 0, "{report}");
    assert!(report.updates_linking_ingest > 0, "{report}");
    assert!(report.refresh_continuing_publish > 0, "{report}");
    // The README's trace table: every gRPC server span is a child of its caller.
    assert!(report.server_spans_without_parent.is_empty(), "{report}");
    eprintln!(
        "compose smoke test took {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

/// Compose serves every role's metrics on :9464 and holds them after the run
/// (`SEBULBA_METRICS_HOLD_SECS`): once the learner has written its summary, a
/// scrape of its container (from the host, at its bridge address) agrees with
/// it, as Prometheus in the `monitoring` profile would read it.
fn learner_metrics_match_its_summary(learner: &str, run_dir: &str, dir: &Path) {
    let summary_path = dir.join("summary.json");
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let copied = Command::new("docker")
            .args(["cp", &format!("{learner}:{run_dir}/summary.json")])
            .arg(&summary_path)
            .output()
            .is_ok_and(|o| o.status.success());
        if copied {
            break;
        }
        assert!(Instant::now() < deadline, "no summary.json in 600 s");
        std::thread::sleep(Duration::from_millis(500));
    }
    let ip = stdout(Command::new("docker").args([
        "inspect",
        "-f",
        "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
        learner,
    ]));
    let ip = ip.split_whitespace().next().expect("the learner's address");
    let m = scrape::Scrape::get(ip, 9464);
    let summary = read_json(&summary_path);
    for (series, field) in [
        ("sebulba_learner_env_steps_total", "env_steps"),
        ("sebulba_learner_updates_total", "updates"),
        ("sebulba_learner_version", "final_version"),
    ] {
        let want = summary[field].as_u64().expect(field) as f64;
        assert_eq!(m.value(series, &[]), want, "{series} vs summary.{field}");
    }
    let used = summary["batches"]["used"].as_u64().expect("batches.used") as f64;
    assert_eq!(
        m.value("sebulba_learner_batches_total", &[("outcome", "used")]),
        used
    );
    eprintln!("compose: the learner's /metrics agrees with summary.json");
}
