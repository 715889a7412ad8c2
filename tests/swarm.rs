//! The cluster as a Docker Swarm stack, for real on a single-node swarm: the
//! image built offline (`deploy/build-image.sh`), the node labelled to keep the
//! runs, `docker stack deploy -c deploy/docker-stack.yml`, actors scaled from
//! 2 to 3 while training runs, the learner's task `Complete` at its budget,
//! and the summary read from the stack's `runs` volume with every actor's
//! batches used and accounted for. Then again secured, with the overlay
//! `deploy/docker-stack.secure.yml`: certificates and tokens from
//! `sebulba certs` as Swarm secrets, every call over TLS with a token, and
//! no token in any service's environment.
//!
//! A machine not yet in a swarm is made a single-node one for the test and
//! leaves it afterwards; one already in a swarm keeps it (the stack and the
//! label are removed). Needs Docker; under CI (`CI` set) a missing Docker
//! fails the test, elsewhere it is skipped with the reason printed.

// The test is one scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;
use common::compose::*;
use common::*;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One stack at a time: both tests join (and may leave) the same swarm.
static ONE_SWARM: Mutex<()> = Mutex::new(());

const TOTAL_STEPS: u64 = 80_000;

/// The swarm and the stack the test made, undone when it ends.
struct Swarm {
    stack: String,
    node: String,
    left_after: bool,
}

impl Swarm {
    /// Joins (or makes) the swarm for a stack named after `name`.
    fn join(name: &str) -> Self {
        let state =
            stdout(Command::new("docker").args(["info", "-f", "{{.Swarm.LocalNodeState}}"]));
        let left_after = state != "active";
        if left_after {
            run(Command::new("docker").args(["swarm", "init", "--advertise-addr", "127.0.0.1"]));
        }
        let node = stdout(Command::new("docker").args(["info", "-f", "{{.Swarm.NodeID}}"]));
        run(Command::new("docker").args([
            "node",
            "update",
            "--label-add",
            "sebulba.runs=true",
            &node,
        ]));
        Swarm {
            stack: format!("sebulba-{name}-{}", std::process::id()),
            node,
            left_after,
        }
    }

    fn service(&self, name: &str) -> String {
        format!("{}_{name}", self.stack)
    }

    /// The current state of each of the service's tasks (`Running 3 seconds ago`, ...).
    fn task_states(&self, name: &str) -> Vec<String> {
        let out = stdout(Command::new("docker").args([
            "service",
            "ps",
            &self.service(name),
            "--filter",
            "desired-state=running",
            "--format",
            "{{.CurrentState}}",
        ]));
        out.lines().map(str::to_string).collect()
    }

    fn logs(&self, name: &str) -> String {
        let o = run(Command::new("docker").args(["service", "logs", "--raw", &self.service(name)]));
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    }

    /// Polls `done` every half second for `secs`, or fails with `what`.
    fn wait_for(&self, secs: u64, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while !done() {
            if Instant::now() > deadline {
                panic!(
                    "{what} within {secs} s; learner log:\n{}",
                    self.logs("learner")
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Swarm {
    fn drop(&mut self) {
        let docker = |args: &[&str]| Command::new("docker").args(args).output();
        let _ = docker(&["stack", "rm", &self.stack]);
        // The network and the containers go asynchronously; the volume after them.
        let volume = format!("{}_runs", self.stack);
        for _ in 0..60 {
            if docker(&["volume", "rm", &volume]).is_ok_and(|o| o.status.success()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let _ = docker(&["node", "update", "--label-rm", "sebulba.runs", &self.node]);
        if self.left_after {
            let _ = docker(&["swarm", "leave", "--force"]);
        }
    }
}

#[test]
fn swarm_stack_scales_actors_and_finishes() {
    if compose_or_skip().is_none() {
        return;
    }
    let _one = ONE_SWARM.lock().unwrap_or_else(|e| e.into_inner());
    deploy_scale_and_finish("swarm", &["deploy/docker-stack.yml"], &[]);
}

#[test]
fn secured_swarm_stack_takes_its_tokens_and_tls_from_secrets() {
    if compose_or_skip().is_none() {
        return;
    }
    let _one = ONE_SWARM.lock().unwrap_or_else(|e| e.into_inner());
    let dir = run_dir("swarm-secure-certs");
    let certs = dir.join("certs");
    run(Command::new(env!("CARGO_BIN_EXE_sebulba"))
        .args(["certs", "--out"])
        .arg(&certs));
    let tokens: Vec<String> = ["actor", "learner", "read"]
        .iter()
        .map(|t| std::fs::read_to_string(certs.join(format!("{t}.token"))).expect("token file"))
        .collect();
    let swarm = deploy_scale_and_finish(
        "swarm-secure",
        &["deploy/docker-stack.yml", "deploy/docker-stack.secure.yml"],
        &[("SEBULBA_CERTS", certs)],
    );
    let logs = swarm.logs("learner") + &swarm.logs("param-server");
    assert!(
        logs.contains("tls=true") && logs.contains("auth=true"),
        "servers not secured:\n{logs}"
    );
    for service in ["param-server", "learner", "actor", "evaluator"] {
        let spec =
            stdout(Command::new("docker").args(["service", "inspect", &swarm.service(service)]));
        assert!(
            spec.contains("/run/secrets/"),
            "{service} takes no secret: {spec}"
        );
        for t in &tokens {
            assert!(!spec.contains(t.as_str()), "a token in {service}'s spec");
        }
    }
}

/// Deploys the stack from `files` (with `env` beside the usual settings),
/// scales the actors from 2 to 3, waits for the learner's task to complete
/// and checks the run; returns the swarm (still up) for further checks.
fn deploy_scale_and_finish(name: &str, files: &[&str], env: &[(&str, PathBuf)]) -> Swarm {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tag = format!("sebulba:{name}-{}", std::process::id());
    let t0 = Instant::now();
    let _image = build_image(&tag);
    let swarm = Swarm::join(name);
    let dir = run_dir(name);
    let mut deploy = Command::new("docker");
    deploy.args(["stack", "deploy"]);
    for f in files {
        deploy.arg("-c").arg(root.join(f));
    }
    run(deploy
        .arg(&swarm.stack)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("SEBULBA_IMAGE", &tag)
        .env("SEBULBA_TOTAL_STEPS", TOTAL_STEPS.to_string())
        .env("SEBULBA_SEED", "5"));
    let deployed = Instant::now();
    swarm.wait_for(180, "no actor joined the learner", || {
        swarm.logs("learner").contains("participant joined")
    });
    let joined = deployed.elapsed().as_secs_f64();
    run(Command::new("docker").args([
        "service",
        "scale",
        "--detach",
        &format!("{}=3", swarm.service("actor")),
    ]));
    swarm.wait_for(120, "3 actor tasks running", || {
        let states = swarm.task_states("actor");
        states.len() == 3 && states.iter().all(|s| s.starts_with("Running"))
    });
    swarm.wait_for(600, "the learner's task did not complete", || {
        let o = stdout(Command::new("docker").args([
            "service",
            "ps",
            &swarm.service("learner"),
            "--format",
            "{{.CurrentState}}",
        ]));
        o.lines().next().is_some_and(|s| s.starts_with("Complete"))
    });
    let finished = deployed.elapsed().as_secs_f64();
    let log = swarm.logs("learner");
    let run_id = logged_run_id(&log);
    let volume = RunsVolume::open(
        &format!("{}_runs", swarm.stack),
        &tag,
        &format!("{}-reader", swarm.stack),
    );
    volume.copy(&format!("{run_id}/summary.json"), &dir.join("summary.json"));
    let summary = read_json(&dir.join("summary.json"));
    assert!(
        summary["completed"].as_bool().unwrap_or(false),
        "{summary:#}"
    );
    assert!(summary["env_steps"].as_u64().expect("env_steps") >= TOTAL_STEPS);
    assert_accounted(&summary);
    let per = summary["batches_per_actor"].as_object().expect("per actor");
    assert!(per.len() >= 3, "batches from 3 actors: {per:?}");
    for (actor, c) in per {
        assert!(
            c["used"].as_u64().unwrap_or(0) > 0,
            "no batch of {actor} was used"
        );
    }
    // The evaluator scores the final version into the same run directory.
    swarm.wait_for(120, "no final evaluation", || {
        volume
            .read(&format!("{run_id}/eval.jsonl"), &dir.join("eval.jsonl"))
            .is_some_and(|t| {
                t.lines()
                    .last()
                    .is_some_and(|l| l.contains("\"final\":true"))
            })
    });
    eprintln!(
        "swarm: image built and swarm joined in {:.1} s; first actor joined {joined:.1} s after deploy; \
         {} env steps at {:.0} steps/s by {} actors, the learner's task complete {finished:.1} s after deploy; \
         final evaluation {}",
        deployed.duration_since(t0).as_secs_f64(),
        summary["env_steps"],
        summary["steps_per_second"].as_f64().unwrap_or(0.0),
        per.len(),
        summary["final_eval_return_mean"],
    );
    swarm
}
