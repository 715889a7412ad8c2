//! Experiment trackers through the paths a user takes (`sebulba local
//! --track`, `sebulba track`), read back by the trackers' own readers:
//!
//! - a real MLflow tracking server (`mlflow server` from the tools venv)
//!   receives every number of `metrics.jsonl` and `eval.jsonl` once, at its
//!   step, the configuration as params, the videos, weights and summary as
//!   artifacts, read back with MLflow's client; killed mid-run, the run
//!   goes on and finishes, and `sebulba track` sends the rest once it is back;
//! - a Weights & Biases offline run (the `wandb` package in the embedded
//!   Python) is read back with wandb's reader of its transaction log.

mod common;
use common::*;

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// `mlflow server` and its workers, in a process group of their own: killed
/// together (here, and when the test ends).
struct Server(Proc);

impl Server {
    fn kill(&mut self) {
        let group = format!("-{}", self.0.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.0.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `mlflow server` on `port`, its store and artifacts under `dir`, once it
/// answers (it takes tens of seconds to start on 2 cores).
fn mlflow_server(python: &Path, dir: &Path, port: u16) -> Server {
    let mlflow = python.with_file_name("mlflow");
    let mut c = Command::new("setsid");
    c.arg(mlflow)
        .arg("server")
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .arg("--backend-store-uri")
        .arg(format!("sqlite:///{}", dir.join("mlflow.db").display()))
        .arg("--artifacts-destination")
        .arg(dir.join("artifacts"))
        .args(["--workers", "1"]);
    let mut server = Server(Proc::spawn(&format!("mlflow-{port}"), c, dir));
    let deadline = Instant::now() + Duration::from_secs(240);
    while !healthy(port) {
        assert!(
            Instant::now() < deadline,
            "mlflow server not up in 240 s:\n{}",
            server.0.log_text()
        );
        assert!(
            matches!(server.0.child.try_wait(), Ok(None)),
            "mlflow server exited:\n{}",
            server.0.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    server
}

fn healthy(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut answer = String::new();
    s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .and_then(|()| s.read_to_string(&mut answer))
        .is_ok()
        && (answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200"))
}

/// The run as MLflow's own client reads it back.
fn mlflow_run(python: &Path, uri: &str, run_id: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/mlflow_read.py");
    let out = Command::new(python)
        .arg(script)
        .args([uri, run_id])
        .output()
        .expect("run mlflow_read.py");
    assert!(
        out.status.success(),
        "mlflow_read.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("mlflow_read.py's JSON")
}

/// The MLflow run a run directory's tracker opened.
fn tracked_run_id(run: &Path) -> String {
    let state = read_json(&run.join("tracking/mlflow.json"));
    state["remote"]["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no run id in tracking/mlflow.json: {state}"))
        .to_string()
}

/// Every finite number of a JSON line, flattened as the trackers name them
/// (`prefix/a/b`; booleans as 0 and 1).
fn numbers(prefix: &str, v: &Value, out: &mut Vec<(String, f64)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                numbers(&format!("{prefix}/{k}"), v, out);
            }
        }
        Value::Number(n) => out.extend(n.as_f64().map(|x| (prefix.to_string(), x))),
        Value::Bool(b) => out.push((prefix.to_string(), f64::from(u8::from(*b)))),
        _ => {}
    }
}

/// (step, value) of each line's numbers, by metric name.
fn expected(run: &Path, file: &str, prefix: &str) -> BTreeMap<String, Vec<(u64, f64)>> {
    let mut want: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
    for line in read_jsonl(&run.join(file)) {
        let step = line["env_steps"].as_u64().expect("env_steps");
        let mut values = Vec::new();
        numbers(prefix, &line, &mut values);
        for (k, v) in values {
            want.entry(k).or_default().push((step, v));
        }
    }
    want
}

/// MLflow holds every number of the run's lines, each once, at its step;
/// the configuration as params; the videos, weights and summary.
fn assert_all_in_mlflow(run: &Path, got: &Value) {
    assert_eq!(got["status"], "FINISHED", "{}", got["status"]);
    let name = run.file_name().unwrap().to_string_lossy();
    assert_eq!(got["name"], *name);
    for (file, prefix) in [("metrics.jsonl", "train"), ("eval.jsonl", "eval")] {
        let want = expected(run, file, prefix);
        assert!(want.contains_key(&format!("{prefix}/env_steps")), "{file}");
        for (key, points) in &want {
            let history = got["metrics"][key]
                .as_array()
                .unwrap_or_else(|| panic!("{key} not in MLflow"));
            let mut have: Vec<(u64, f64)> = history
                .iter()
                .map(|m| (m["step"].as_u64().unwrap(), m["value"].as_f64().unwrap()))
                .collect();
            have.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let mut points = points.clone();
            points.sort_by(|a, b| a.partial_cmp(b).unwrap());
            assert_eq!(have, points, "{key}: every line once, at its step");
        }
    }
    let summary = read_json(&run.join("summary.json"));
    let logged = &got["metrics"]["summary/env_steps"][0]["value"];
    assert_eq!(logged.as_f64(), summary["env_steps"].as_f64());

    let config: toml::Table = std::fs::read_to_string(run.join("config.toml"))
        .expect("config.toml")
        .parse()
        .expect("config.toml parses");
    let env = config["env"]["id"].as_str().expect("env.id");
    assert_eq!(got["params"]["env.id"], env);
    let lr = config["ppo"]["learning_rate"].to_string();
    assert_eq!(got["params"]["ppo.learning_rate"], *lr.as_str());

    let artifacts: BTreeMap<String, u64> = got["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .map(|a| {
            (
                a["path"].as_str().unwrap().to_string(),
                a["size"].as_u64().unwrap(),
            )
        })
        .collect();
    let size = |rel: &str| std::fs::metadata(run.join(rel)).expect(rel).len();
    let videos = read_jsonl(&run.join("videos/videos.jsonl"));
    assert!(!videos.is_empty(), "no videos filmed");
    let mut kept: Vec<String> = videos
        .iter()
        .map(|v| format!("videos/{}", v["file"].as_str().unwrap()))
        .collect();
    kept.extend(["final.safetensors", "summary.json", "config.toml"].map(String::from));
    for rel in &kept {
        assert_eq!(
            artifacts.get(rel),
            Some(&size(rel)),
            "artifact {rel}: {artifacts:?}"
        );
    }
}

/// The lines of a file that may not be there yet.
fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

fn local(run: &Path, steps: &str, tracks: &[&str]) -> Command {
    let mut c = bin();
    c.args(["local", "--env", "CartPole-v1", "--total-steps", steps])
        .args(["--set", "eval.video_every=1", "--run-dir"])
        .arg(run);
    for t in tracks {
        c.args(["--track", t]);
    }
    c
}

fn finishes(p: &mut Proc, what: &str) {
    let status = p
        .wait(Duration::from_secs(600))
        .unwrap_or_else(|| panic!("{what} did not finish in 10 min:\n{}", p.log_text()));
    assert!(status.success(), "{what}: {status}\n{}", p.log_text());
}

#[test]
fn mlflow_gets_the_whole_run_and_a_server_killed_mid_run_loses_nothing() {
    let Some(python) = tools_python_or_skip("mlflow") else {
        return;
    };
    let dir = run_dir("trackers-mlflow");
    let port = free_port();
    let uri = format!("http://127.0.0.1:{port}");
    let track = format!("mlflow={uri}");
    let mut server = mlflow_server(&python, &dir, port);

    let whole = dir.join("whole");
    let mut c = local(&whole, "8192", &[&track]);
    c.env("MLFLOW_EXPERIMENT_NAME", "sebulba-tests");
    let mut p = Proc::spawn("whole", c, &dir);
    finishes(&mut p, "the tracked run");
    let got = mlflow_run(&python, &uri, &tracked_run_id(&whole));
    assert_eq!(got["experiment"], "sebulba-tests");
    assert_all_in_mlflow(&whole, &got);

    // The server dies mid-run: the run finishes all the same, and says why
    // its tracker could not finish.
    let cut = dir.join("cut");
    let mut c = local(&cut, "60000", &[&track]);
    c.args(["--track-wait-secs", "2"]);
    let mut p = Proc::spawn("cut", c, &dir);
    let deadline = Instant::now() + Duration::from_secs(300);
    // Killed once part of the run is in MLflow: the rest must join it.
    let delivered = || {
        let state = std::fs::read(cut.join("tracking/mlflow.json")).unwrap_or_default();
        let state: Value = serde_json::from_slice(&state).unwrap_or_default();
        state["files"]["metrics.jsonl"]["offset"]
            .as_u64()
            .unwrap_or(0)
    };
    while delivered() == 0 {
        assert!(
            Instant::now() < deadline,
            "no update delivered:\n{}",
            p.log_text()
        );
        assert!(
            matches!(p.child.try_wait(), Ok(None)),
            "the run ended early:\n{}",
            p.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    server.kill();
    let killed_at = lines(&cut.join("metrics.jsonl"));
    finishes(&mut p, "the run whose tracker died");
    let summary = read_json(&cut.join("summary.json"));
    assert_eq!(summary["completed"], true, "{summary}");
    let done = lines(&cut.join("metrics.jsonl"));
    assert!(
        done > killed_at + 3,
        "the run went on: {killed_at} then {done} updates"
    );
    let log = p.log_text();
    assert!(log.contains("tracker failing, training goes on"), "{log}");
    assert!(
        log.contains("sebulba track"),
        "says how to send the rest:\n{log}"
    );

    // Back up: `sebulba track` sends the rest into the same MLflow run.
    let run_id = tracked_run_id(&cut);
    let _server = mlflow_server(&python, &dir, port);
    let mut c = bin();
    c.arg("track").arg(&cut).args(["--track", &track]);
    let mut t = Proc::spawn("track", c, &dir);
    finishes(&mut t, "sebulba track");
    assert!(
        t.log_text().contains("mlflow:") && t.log_text().contains("run finished"),
        "{}",
        t.log_text()
    );
    assert_eq!(tracked_run_id(&cut), run_id, "the same MLflow run");
    assert_all_in_mlflow(&cut, &mlflow_run(&python, &uri, &run_id));
}

/// The offline run's transaction log, under the run directory.
fn wandb_log(run: &Path) -> PathBuf {
    let root = run.join("tracking/wandb/wandb");
    let runs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("offline-run-"))
        })
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    std::fs::read_dir(&runs[0])
        .expect("the offline run")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "wandb"))
        .expect("run-<id>.wandb")
}

#[test]
fn wandb_offline_run_is_read_back_by_wandbs_own_reader() {
    let Some(venv) = python_venv_with_or_skip("wandb") else {
        return;
    };
    let dir = run_dir("trackers-wandb");
    let run = dir.join("run");
    let mut c = local(&run, "6144", &["wandb=sebulba-tests"]);
    // No credentials anywhere: offline.
    c.env("VIRTUAL_ENV", &venv)
        .env("HOME", &dir)
        .env_remove("WANDB_API_KEY")
        .env_remove("WANDB_MODE");
    let mut p = Proc::spawn("local", c, &dir);
    finishes(&mut p, "the tracked run");

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/wandb_read.py");
    let out = Command::new(venv.join("bin/python"))
        .arg(script)
        .arg(wandb_log(&run))
        .output()
        .expect("run wandb_read.py");
    assert!(
        out.status.success(),
        "wandb_read.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).expect("wandb_read.py's JSON");
    assert_eq!(got["project"], "sebulba-tests");
    assert_eq!(got["name"], "run");
    assert_eq!(got["exit_code"], 0);

    let rows = got["history"].as_array().expect("history");
    let with = |key: &str| {
        rows.iter()
            .filter(|r| !r[key].is_null())
            .collect::<Vec<_>>()
    };
    // Every line of metrics.jsonl is one row at its env_steps, its numbers
    // as they are in the file.
    let lines = read_jsonl(&run.join("metrics.jsonl"));
    let train = with("train/env_steps");
    assert_eq!(train.len(), lines.len());
    for (row, line) in train.iter().zip(&lines) {
        assert_eq!(row["env_steps"], line["env_steps"]);
        assert_eq!(
            row["train/policy_loss"].as_f64(),
            line["policy_loss"].as_f64()
        );
    }
    let evals = read_jsonl(&run.join("eval.jsonl"));
    let eval = with("eval/return_mean");
    assert_eq!(eval.len(), evals.len());
    for (row, line) in eval.iter().zip(&evals) {
        assert_eq!(
            row["eval/return_mean"].as_f64(),
            line["return_mean"].as_f64()
        );
    }
    // Each video once, the file itself (its size) as W&B keeps it.
    let videos = read_jsonl(&run.join("videos/videos.jsonl"));
    let filmed = with("eval/video/_type");
    assert_eq!(filmed.len(), videos.len());
    assert!(!filmed.is_empty());
    for (row, video) in filmed.iter().zip(&videos) {
        assert_eq!(row["eval/video/_type"], "video-file", "{row}");
        assert_eq!(row["env_steps"], video["env_steps"]);
        let file = run.join("videos").join(video["file"].as_str().unwrap());
        let size = std::fs::metadata(&file).expect("the video").len();
        assert_eq!(row["eval/video/size"].as_u64(), Some(size), "{row}");
    }

    let config: toml::Table = std::fs::read_to_string(run.join("config.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        got["config"]["env.id"].as_str(),
        config["env"]["id"].as_str()
    );
    let summary = read_json(&run.join("summary.json"));
    assert_eq!(
        got["summary"]["summary/env_steps"].as_f64(),
        summary["env_steps"].as_f64()
    );
    let files = got["files"].as_array().expect("files");
    for f in ["final.safetensors", "summary.json", "config.toml"] {
        assert!(files.iter().any(|p| p == f), "{f} not saved: {files:?}");
    }
}
