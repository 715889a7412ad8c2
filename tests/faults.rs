//! Faults during one run, every role a separate process: one actor is killed
//! (SIGKILL) mid-stream, another is stalled (SIGSTOP) and never resumes, and
//! the parameter server is killed and restarted on the same address. The
//! learner carries on: it counts the broken stream, is never blocked by the
//! stalled actor, republishes to the new parameter server, and finishes; the
//! surviving actor and the evaluator re-subscribe; the accounting identity
//! holds overall and per actor; the final version is evaluated and reported.

mod common;

use common::{Proc, assert_accounted, bin, read_json, read_jsonl, run_dir};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn signal(p: &Proc, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(p.child.id().to_string())
        .status()
        .expect("kill");
    assert!(ok.success(), "kill -{sig} {}", p.name);
}

fn updates_done(run: &Path) -> usize {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn wait_for_updates(run: &Path, n: usize, learner: &Proc) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while updates_done(run) < n {
        assert!(
            Instant::now() < deadline,
            "fewer than {n} updates in 120 s:\n{}",
            learner.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_killed_actor_a_stalled_actor_and_a_restarted_param_server_do_not_stop_the_run() {
    let dir = run_dir("faults");
    let run = dir.join("run");
    let spawn_ps = |listen: &str, name: &str| {
        let mut c = bin();
        c.args(["param-server", "--listen", listen]);
        Proc::spawn(name, c, &dir)
    };
    let mut ps = spawn_ps("127.0.0.1:0", "param-server");
    let ps_port = ps.bound_port(Duration::from_secs(30));
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let mut c = bin();
    c.args([
        "learner",
        "--listen",
        "127.0.0.1:0",
        "--param-server",
        &ps_url,
    ])
    .args(["--env", "CartPole-v1", "--set", "run.total_steps=60000"])
    .args(["--set", "eval.interval=5", "--run-dir"])
    .arg(&run);
    let mut learner = Proc::spawn("learner", c, &dir);
    let learner_url = format!(
        "http://127.0.0.1:{}",
        learner.bound_port(Duration::from_secs(60))
    );
    let actor = |name: &str| {
        let mut c = bin();
        c.args([
            "actor",
            "--learner",
            &learner_url,
            "--param-server",
            &ps_url,
        ])
        .args(["--name", name]);
        Proc::spawn(name, c, &dir)
    };
    let mut survivor = actor("survivor");
    let mut killed = actor("killed");
    let stalled = actor("stalled");
    let mut c = bin();
    c.args(["evaluator", "--param-server", &ps_url, "--run-dir"])
        .arg(&run);
    let mut evaluator = Proc::spawn("evaluator", c, &dir);

    wait_for_updates(&run, 5, &learner);
    // SIGKILL mid-stream: its connection dies with whatever it was sending.
    let _ = killed.child.kill();
    let _ = killed.child.wait();
    // SIGSTOP: the connection stays open, nothing more comes.
    signal(&stalled, "STOP");
    let at_fault = updates_done(&run);

    // The parameter server dies and comes back empty, on the same address.
    let _ = ps.child.kill();
    let _ = ps.child.wait();
    std::thread::sleep(Duration::from_secs(3));
    let ps2 = spawn_ps(&format!("127.0.0.1:{ps_port}"), "param-server-2");
    assert_eq!(ps2.bound_port(Duration::from_secs(30)), ps_port);

    let status = learner
        .wait(Duration::from_secs(300))
        .unwrap_or_else(|| panic!("learner did not finish:\n{}", learner.log_text()));
    assert!(
        status.success(),
        "learner: {status}\n{}",
        learner.log_text()
    );
    for p in [&mut survivor, &mut evaluator] {
        let s = p
            .wait(Duration::from_secs(60))
            .unwrap_or_else(|| panic!("{} did not exit:\n{}", p.name, p.log_text()));
        assert!(s.success(), "{}: {s}\n{}", p.name, p.log_text());
    }
    drop(stalled); // SIGKILL on drop; it never ran again.

    let log = learner.log_text();
    assert!(
        updates_done(&run) > at_fault + 5,
        "training went on after the faults"
    );
    assert!(
        log.contains("publish failed"),
        "the learner saw the param-server outage and retried:\n{log}"
    );
    let summary = read_json(&run.join("summary.json"));
    assert_accounted(&summary);
    assert!(
        summary["env_steps"].as_u64().unwrap_or(0) >= 60_000,
        "{summary}"
    );
    let per = summary["batches_per_actor"].as_object().expect("per actor");
    let of = |name: &str| {
        per.iter()
            .find(|(id, _)| id.starts_with(&format!("{name}#")))
            .map(|(_, c)| c.clone())
            .unwrap_or_else(|| panic!("no batches from {name}: {per:?}"))
    };
    assert!(
        of("killed")["streams_broken"].as_u64().unwrap_or(0) >= 1,
        "the killed actor's broken stream is counted: {per:?}"
    );
    assert!(of("survivor")["used"].as_u64().unwrap_or(0) > 0);
    assert!(of("stalled")["used"].as_u64().unwrap_or(0) > 0);
    // The evaluator re-subscribed to the new parameter server and scored the
    // final version there; the learner read that score back.
    let evals = read_jsonl(&run.join("eval.jsonl"));
    let last = evals.last().expect("evaluations");
    assert_eq!(last["final"], true, "{evals:?}");
    assert_eq!(last["version"], summary["final_version"]);
    assert!(summary["final_eval_return_mean"].is_number(), "{summary}");
}
