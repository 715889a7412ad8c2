//! Faults during one run, every role a separate process: one actor is killed
//! (SIGKILL) mid-stream, another is stalled (SIGSTOP) and never resumes, and
//! the parameter server is killed and restarted on the same address. The
//! learner carries on: it counts the broken stream, is never blocked by the
//! stalled actor, republishes to the new parameter server, and finishes; the
//! surviving actor and the evaluator re-subscribe; the accounting identity
//! holds overall and per actor; the final version is evaluated and reported.

mod common;

use common::{
    Proc, actor, assert_accounted, assert_best_is_the_runs, evaluator, exits_ok, learner,
    param_server, read_json, read_jsonl, run_dir, updates_done, wait_for_updates,
};
use std::process::Command;
use std::time::Duration;

fn signal(p: &Proc, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(p.child.id().to_string())
        .status()
        .expect("kill");
    assert!(ok.success(), "kill -{sig} {}", p.name);
}

#[test]
fn a_killed_actor_a_stalled_actor_and_a_restarted_param_server_do_not_stop_the_run() {
    let dir = run_dir("faults");
    let run = dir.join("run");
    let (mut ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let args = ["--set", "run.total_steps=60000", "--set", "eval.interval=5"];
    let (mut learner, port) = learner(&dir, "learner", "127.0.0.1:0", &ps_url, &run, &args, |_| {});
    let learner_url = format!("http://127.0.0.1:{port}");
    let mut survivor = actor(&dir, "survivor", &learner_url, &ps_url, |_| {});
    let mut killed = actor(&dir, "killed", &learner_url, &ps_url, |_| {});
    let stalled = actor(&dir, "stalled", &learner_url, &ps_url, |_| {});
    let mut evaluator = evaluator(&dir, &ps_url, &run, |_| {});

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
    let restart = format!("127.0.0.1:{ps_port}");
    let (_ps2, again) = param_server(&dir, "param-server-2", &restart, |_| {});
    assert_eq!(again, ps_port);

    exits_ok(&mut learner, Duration::from_secs(300));
    exits_ok(&mut survivor, Duration::from_secs(60));
    exits_ok(&mut evaluator, Duration::from_secs(60));

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
    // The best evaluation is the whole run's, though the restarted
    // param-server knew only the reports filed after its restart.
    assert_best_is_the_runs(&summary, &evals);
    assert_eq!(summary["latest_eval_version"], summary["final_version"]);
}
