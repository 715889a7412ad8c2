//! Python environments through the command a user runs (`sebulba local
//! --env gym:ID`): a Gymnasium env trains, and repeats bit for bit in a
//! deterministic run; a user's env that keeps raising is replaced, its
//! rollouts dropped and counted, and the run still finishes; EnvPool's
//! HalfCheetah trains with the MuJoCo settings; a recurrent policy learns
//! POPGym's RepeatPrevious; wrong ids and a wrong Python fail at start in
//! one line.
//!
//! They need the binary built with `--features python` (the README's test
//! command) and a venv with gymnasium (scripts/python-env.sh makes `.venv`;
//! `VIRTUAL_ENV` overrides). Without the venv they are skipped, saying so;
//! with `SEBULBA_REQUIRE_PYTHON=1` (as in CI) they fail instead.
#![cfg(feature = "python")]

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn with_python(cmd: &mut Command, venv: &Path) {
    cmd.env("VIRTUAL_ENV", venv)
        .env("PYTHONPATH", repo().join("pyenv/tests/fixtures"))
        .env("RUST_BACKTRACE", "0");
}

/// `sebulba local <args>` to completion; the run directory.
fn local(name: &str, venv: &Path, args: &[&str]) -> PathBuf {
    let dir = common::run_dir(name);
    let run = dir.join("run");
    let mut cmd = common::bin();
    cmd.arg("local").args(args).arg("--run-dir").arg(&run);
    with_python(&mut cmd, venv);
    let mut p = common::Proc::spawn("local", cmd, &dir);
    let status = p
        .wait(Duration::from_secs(600))
        .unwrap_or_else(|| panic!("no end in 10 min; log:\n{}", p.log_text()));
    assert!(status.success(), "{status}; log:\n{}", p.log_text());
    run
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("JSON")
}

/// JSON lines without the fields that time things.
fn untimed(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("JSON line");
            let o = v.as_object_mut().expect("object");
            for k in [
                "wall_seconds",
                "steps_per_second",
                "update_seconds",
                "eval_seconds",
                "cpu_seconds",
                "throttled_seconds",
                "batches_received",
            ] {
                o.remove(k);
            }
            v
        })
        .collect()
}

/// A memory task through the `py:` path: POPGym's RepeatPreviousEasy
/// (name the suit of the card dealt 4 cards ago; its Discrete observation
/// arrives one-hot) with an LSTM. Chance scores -0.5 and a feed-forward
/// policy stays there (-0.49 at 200k steps); the LSTM passes 0.6 by 100k
/// and reaches the maximum, 1.0, by 200k (seed 1, release build).
#[test]
fn a_recurrent_policy_learns_popgyms_repeat_previous_through_py() {
    let Some(venv) = common::python_venv_with_or_skip("popgym") else {
        return;
    };
    let id = "py:popgym.envs.repeat_previous:RepeatPreviousEasy";
    let args = [
        "--env",
        id,
        "--seed",
        "1",
        "--total-steps",
        "120000",
        "--set",
        "network.core=lstm",
        "--set",
        "eval.final_episodes=20",
    ];
    let run = local("py-popgym-lstm", &venv, &args);
    let s = json(&run.join("summary.json"));
    eprintln!("summary: {s:#}");
    common::assert_accounted(&s);
    assert_eq!(s["batches"]["rejected"], 0, "{s:#}");
    let best = s["best_eval_return_mean"].as_f64().expect("best eval");
    assert!(best >= 0.4, "best evaluation {best} < 0.4 (chance: -0.5)");
}

#[test]
fn a_gymnasium_env_trains_and_a_deterministic_run_repeats() {
    let Some(venv) = common::python_venv_or_skip() else {
        return;
    };
    let args = [
        "--env",
        "gym:CartPole-v1",
        "--seed",
        "3",
        "--set",
        "run.deterministic=true",
        "--set",
        "run.total_steps=30000",
        "--set",
        "eval.interval=5",
    ];
    let a = local("py-cartpole-a", &venv, &args);
    let b = local("py-cartpole-b", &venv, &args);
    assert_eq!(
        untimed(&a.join("metrics.jsonl")),
        untimed(&b.join("metrics.jsonl"))
    );
    assert_eq!(
        untimed(&a.join("eval.jsonl")),
        untimed(&b.join("eval.jsonl"))
    );
    let s = json(&a.join("summary.json"));
    assert_eq!(s["env_id"], "gym:CartPole-v1");
    assert_eq!(s["completed"], true);
    let best = s["best_eval_return_mean"].as_f64().expect("best eval");
    // A random policy scores about 20; this seed's run reaches 500.
    assert!(best >= 300.0, "best evaluation {best}");
    assert!(s["final_eval_return_mean"].as_f64().is_some());
}

#[test]
fn a_failing_env_is_replaced_and_counted_and_the_run_finishes() {
    let Some(venv) = common::python_venv_or_skip() else {
        return;
    };
    // Each step of the fixture env raises with probability 1/2000 (seeded:
    // this run fails alike every time).
    let run = local(
        "py-faults",
        &venv,
        &[
            "--env",
            "py:sebulba_fixture_envs:make",
            "--set",
            "env.kwargs.fail_prob=0.0005",
            "--set",
            "run.total_steps=10000",
        ],
    );
    let s = json(&run.join("summary.json"));
    assert_eq!(s["completed"], true);
    let b = &s["batches"];
    let restarts = b["env_restarts"].as_u64().expect("env_restarts");
    assert!(restarts > 0, "{b}");
    assert!(
        b["env_steps_discarded"].as_u64().expect("discarded") > 0,
        "{b}"
    );
    // Nothing half-written was sent: every batch received was used or
    // dropped at the end, none refused.
    assert_eq!(b["rejected"], 0, "{b}");
    let per_actor: u64 = s["batches_per_actor"]
        .as_object()
        .expect("per actor")
        .values()
        .map(|c| c["env_restarts"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(per_actor, restarts);
    // The evaluator replaces failed envs too, and still scores every version.
    let evals = untimed(&run.join("eval.jsonl"));
    assert!(
        evals
            .iter()
            .any(|e| e["final"] == true && e["episodes"] == 100)
    );
    assert!(
        evals
            .iter()
            .any(|e| e["env_restarts"].as_u64().unwrap_or(0) > 0)
    );
}

/// EnvPool's MuJoCo through the command a user runs, with the MuJoCo
/// settings: its actors are threads of the one process (EnvPool steps
/// outside the GIL), the run finishes with every batch accounted for per
/// actor, and each actor says where its time went.
#[test]
fn envpool_halfcheetah_trains_with_the_mujoco_settings_on_actor_threads() {
    let Some(venv) = common::python_venv_with_or_skip("envpool") else {
        return;
    };
    let config = repo().join("configs/mujoco.toml");
    let run = local(
        "envpool-cheetah",
        &venv,
        &[
            "--env",
            "envpool:HalfCheetah-v5",
            "--config",
            config.to_str().expect("path"),
            "--set",
            "run.total_steps=40960",
            "--set",
            "eval.interval=10",
            "--set",
            "eval.final_episodes=4",
        ],
    );
    let s = json(&run.join("summary.json"));
    assert_eq!(s["env_id"], "envpool:HalfCheetah-v5");
    assert_eq!(s["completed"], true);
    common::assert_accounted(&s);
    assert_eq!(s["batches"]["rejected"], 0);
    let per = s["batches_per_actor"].as_object().expect("per actor");
    assert_eq!(per.len(), 2, "{per:?}");
    for (actor, c) in per {
        assert!(c["used"].as_u64().unwrap_or(0) > 0, "{actor}: {c}");
        let t = &c["actor_time"];
        let secs = |k: &str| t[k].as_f64().unwrap_or(-1.0);
        assert!(secs("env_seconds") > 0.0, "{actor}: {t}");
        assert!(secs("inference_seconds") > 0.0, "{actor}: {t}");
        let parts = secs("env_seconds") + secs("inference_seconds") + secs("waiting_seconds");
        assert!(parts <= secs("wall_seconds") + 1e-3, "{actor}: {t}");
    }
    let toml = std::fs::read_to_string(run.join("config.toml")).expect("config.toml");
    assert!(toml.contains("rollout_length = 128"), "{toml}");
    let evals = untimed(&run.join("eval.jsonl"));
    assert!(
        evals
            .iter()
            .any(|e| e["final"] == true && e["episodes"] == 4)
    );
}

/// `sebulba local` with `args` and `envs` fails within 60 s; its output.
fn fails_fast(venv: &Path, args: &[&str], envs: &[(&str, &str)]) -> String {
    let dir = common::run_dir("py-wrong");
    let mut cmd = common::bin();
    cmd.arg("local")
        .args(args)
        .arg("--run-dir")
        .arg(dir.join("run"));
    with_python(&mut cmd, venv);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let t0 = Instant::now();
    let out = cmd.output().expect("run sebulba");
    assert!(t0.elapsed() < Duration::from_secs(60));
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn wrong_ids_and_a_wrong_python_fail_at_start_in_one_line() {
    let Some(venv) = common::python_venv_or_skip() else {
        return;
    };
    /// Arguments, environment variables, and what the one line names.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 4] = [
        (&["--env", "gym:NoSuchEnv-v0"], &[], "NoSuchEnv"),
        (
            &["--env", "py:no_such_module:make"],
            &[],
            "ModuleNotFoundError",
        ),
        (
            &["--env", "gym:CartPole-v1"],
            &[("PYTHONHOME", "/no/such/python")],
            "PYTHONHOME",
        ),
        (
            &["--env", "gym:CartPole-v1"],
            &[("VIRTUAL_ENV", "/no/such/venv")],
            "VIRTUAL_ENV",
        ),
    ];
    for (args, envs, needle) in cases {
        let err = fails_fast(&venv, args, envs);
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(needle)).collect();
        assert_eq!(lines.len(), 1, "{args:?} {envs:?}:\n{err}");
        assert!(
            !err.contains("Traceback"),
            "{args:?}: a wrong id needs no traceback:\n{err}"
        );
    }
}
