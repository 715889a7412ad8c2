//! Helpers for end-to-end tests: run the real `sebulba` binary, keep children
//! from outliving a failed test, read run-directory files.

#![allow(dead_code)]

pub mod compose;
pub mod numpy;
pub mod otlp;
pub mod prometheus;
pub mod scrape;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sebulba"));
    c.env("RUST_LOG", "info").stdin(Stdio::null());
    c
}

/// A fresh, empty directory under the target dir (kept after the test for inspection).
pub fn run_dir(name: &str) -> PathBuf {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create run dir");
    dir
}

/// Runs `sebulba local <args> --run-dir <fresh dir>/run` to completion (15 min
/// at most), asserts it succeeded, and returns the run directory.
pub fn run_local(name: &str, args: &[&str]) -> PathBuf {
    let dir = run_dir(name);
    let run = dir.join("run");
    let mut cmd = bin();
    cmd.arg("local").args(args).arg("--run-dir").arg(&run);
    let mut p = Proc::spawn("local", cmd, &dir);
    let status = p
        .wait(Duration::from_secs(900))
        .unwrap_or_else(|| panic!("local run did not finish in 15 min; log:\n{}", p.log_text()));
    assert!(
        status.success(),
        "local run failed: {status}; log:\n{}",
        p.log_text()
    );
    run
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind port 0")
        .port()
}

/// A child process that is killed if the test ends before it does; its output
/// goes to `<log_dir>/<name>.log`.
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command, log_dir: &Path) -> Proc {
        let log = log_dir.join(format!("{name}.log"));
        let f = std::fs::File::create(&log).expect("log file");
        let child = cmd
            .stdout(f.try_clone().expect("dup log"))
            .stderr(f)
            .spawn()
            .expect("spawn sebulba");
        Proc {
            name: name.into(),
            child,
            log,
        }
    }

    /// Waits up to `timeout` for the process to exit by itself.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends SIGTERM (graceful shutdown) and waits for the exit.
    pub fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.signal("TERM", timeout)
    }

    /// Sends `signal` (`TERM`, `INT`, ...) and waits for the exit.
    pub fn signal(&mut self, signal: &str, timeout: Duration) -> Option<ExitStatus> {
        let _ = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status();
        self.wait(timeout)
    }

    /// Waits for a server started with `--listen 127.0.0.1:0` to log the port it
    /// bound (`local=127.0.0.1:PORT`). Binding port 0 cannot race with other
    /// tests or with clients' ephemeral ports, as a pre-picked free port can.
    pub fn bound_port(&self, timeout: Duration) -> u16 {
        self.logged_port("local=127.0.0.1:", timeout)
    }

    /// Waits for the log to hold `PREFIX<port>` (e.g. `metrics=127.0.0.1:`).
    pub fn logged_port(&self, prefix: &str, timeout: Duration) -> u16 {
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.log_text();
            if let Some(port) = log
                .split_whitespace()
                .filter_map(|w| w.strip_prefix(prefix))
                .find_map(|p| p.parse().ok())
            {
                return port;
            }
            assert!(
                Instant::now() < deadline,
                "{} logged no `{prefix}` address:\n{log}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

pub fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: bad line {l}: {e}", path.display()))
        })
        .collect()
}

/// received = used + dropped + rejected (+ queued, 0 at the end), overall and per actor.
pub fn assert_accounted(summary: &serde_json::Value) {
    let check = |c: &serde_json::Value, who: &str| {
        let n = |k: &str| {
            c[k].as_u64()
                .unwrap_or_else(|| panic!("{who}: `{k}` missing in {c}"))
        };
        assert_eq!(
            n("queued"),
            0,
            "{who}: batches still queued at the end: {c}"
        );
        assert_eq!(
            n("received"),
            n("used") + n("dropped_stale") + n("dropped_shutdown") + n("rejected"),
            "{who}: accounting identity broken: {c}"
        );
    };
    check(&summary["batches"], "total");
    let per = summary["batches_per_actor"]
        .as_object()
        .expect("batches_per_actor");
    for (actor, c) in per {
        check(c, actor);
    }
    // The departed actors folded together (`learner.departed_actors_kept`).
    let departed = &summary["batches_departed"];
    check(departed, "departed");
    let folded = summary["actors_folded"].as_u64().expect("actors_folded");
    if folded == 0 {
        assert_eq!(
            departed["received"].as_u64(),
            Some(0),
            "nothing folded, nothing departed: {summary}"
        );
    }
    for k in [
        "received",
        "used",
        "dropped_stale",
        "dropped_shutdown",
        "rejected",
        "env_steps_used",
    ] {
        let sum: u64 = per
            .values()
            .chain(std::iter::once(departed))
            .map(|c| c[k].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(
            sum,
            summary["batches"][k].as_u64().unwrap_or(0),
            "per-actor and departed `{k}` do not add up to the run's"
        );
    }
}

/// The run's curves as a user draws them: one `metrics.jsonl` line per
/// update, the final evaluation last in `eval.jsonl`, and `sebulba plot` of
/// the run writes a 1500x600 PNG (beside the run) labelled with its env.
pub fn assert_curves(run: &Path, env_id: &str) {
    let summary = read_json(&run.join("summary.json"));
    let metrics = read_jsonl(&run.join("metrics.jsonl"));
    assert_eq!(
        Some(metrics.len() as u64),
        summary["updates"].as_u64(),
        "{env_id}: one metrics line per update"
    );
    let evals = read_jsonl(&run.join("eval.jsonl"));
    let last = evals.last().expect("evaluations in eval.jsonl");
    assert_eq!(last["final"], true, "{env_id}: the final evaluation last");
    let png = run.with_extension("png");
    let out = bin()
        .arg("plot")
        .arg(run)
        .arg("--out")
        .arg(&png)
        .output()
        .expect("run sebulba plot");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{env_id}: plot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(&format!("{env_id} (1 seed)")), "{text}");
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png).expect("the PNG"),
    ));
    let info = decoder.read_info().expect("a PNG").info().clone();
    assert_eq!((info.width, info.height), (1500, 600), "{env_id}");
}

/// The run's best evaluation is the best line of its `eval.jsonl`.
pub fn assert_best_is_the_runs(summary: &serde_json::Value, evals: &[serde_json::Value]) {
    let best = evals
        .iter()
        .map(|e| e["return_mean"].as_f64().expect("return_mean"))
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(
        summary["best_eval_return_mean"].as_f64(),
        Some(best),
        "{summary}"
    );
    let v = summary["best_eval_version"].as_u64().expect("best version");
    assert!(
        evals
            .iter()
            .any(|e| e["version"] == v && e["return_mean"].as_f64() == Some(best)),
        "best version {v} is not a best line of eval.jsonl"
    );
}

/// `sebulba param-server --listen <listen>` (`127.0.0.1:0` for a port of its
/// own), with `setup` adding flags or environment; returns it and its port.
pub fn param_server(
    dir: &Path,
    name: &str,
    listen: &str,
    setup: impl FnOnce(&mut Command),
) -> (Proc, u16) {
    let mut c = bin();
    c.args(["param-server", "--listen", listen]);
    setup(&mut c);
    let p = Proc::spawn(name, c, dir);
    let port = p.bound_port(Duration::from_secs(30));
    (p, port)
}

/// `sebulba learner` on CartPole-v1 writing to `run`, publishing to `ps_url`,
/// with `args` appended; returns it and its port.
pub fn learner(
    dir: &Path,
    name: &str,
    listen: &str,
    ps_url: &str,
    run: &Path,
    args: &[&str],
    setup: impl FnOnce(&mut Command),
) -> (Proc, u16) {
    let mut c = bin();
    c.args(["learner", "--listen", listen, "--param-server", ps_url]);
    if !args.contains(&"--env") {
        c.args(["--env", "CartPole-v1"]);
    }
    c.arg("--run-dir").arg(run).args(args);
    setup(&mut c);
    let p = Proc::spawn(name, c, dir);
    let port = p.bound_port(Duration::from_secs(60));
    (p, port)
}

/// `sebulba actor --name <name>`.
pub fn actor(
    dir: &Path,
    name: &str,
    learner_url: &str,
    ps_url: &str,
    setup: impl FnOnce(&mut Command),
) -> Proc {
    let mut c = bin();
    c.args(["actor", "--learner", learner_url, "--param-server", ps_url])
        .args(["--name", name]);
    setup(&mut c);
    Proc::spawn(name, c, dir)
}

/// `sebulba evaluator` writing to `run`.
pub fn evaluator(dir: &Path, ps_url: &str, run: &Path, setup: impl FnOnce(&mut Command)) -> Proc {
    let mut c = bin();
    c.args(["evaluator", "--param-server", ps_url, "--run-dir"])
        .arg(run);
    setup(&mut c);
    Proc::spawn("evaluator", c, dir)
}

/// Waits for `p` to exit by itself within `timeout` and asserts it succeeded.
pub fn exits_ok(p: &mut Proc, timeout: Duration) {
    let status = p
        .wait(timeout)
        .unwrap_or_else(|| panic!("{} did not exit in {timeout:?}:\n{}", p.name, p.log_text()));
    assert!(status.success(), "{}: {status}\n{}", p.name, p.log_text());
}

/// Lines of the run's `metrics.jsonl` so far (one per update).
pub fn updates_done(run: &Path) -> usize {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Waits (up to 2 min) until the run has `n` updates.
pub fn wait_for_updates(run: &Path, n: usize, learner: &Proc) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while updates_done(run) < n {
        assert!(
            Instant::now() < deadline,
            "fewer than {n} updates in 120 s:\n{}",
            learner.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The venv Python-environment tests run with (`VIRTUAL_ENV`, else the
/// repository's `.venv` from scripts/python-env.sh), or `None`, after saying
/// so, when it holds no gymnasium; with `SEBULBA_REQUIRE_PYTHON` set (CI)
/// that is a failure instead.
pub fn python_venv_or_skip() -> Option<PathBuf> {
    python_venv_with_or_skip("gymnasium")
}

/// As [`python_venv_or_skip`], for a venv that holds `package` (`ale_py`).
pub fn python_venv_with_or_skip(package: &str) -> Option<PathBuf> {
    let venv = std::env::var_os("VIRTUAL_ENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv"));
    if venv
        .join("lib/python3.11/site-packages")
        .join(package)
        .is_dir()
    {
        return Some(venv);
    }
    assert!(
        std::env::var_os("SEBULBA_REQUIRE_PYTHON").is_none(),
        "SEBULBA_REQUIRE_PYTHON is set but {} holds no {package}: run scripts/python-env.sh",
        venv.display()
    );
    eprintln!(
        "SKIPPED: no {package} in {} (run scripts/python-env.sh)",
        venv.display()
    );
    None
}

/// The Python of the tools venv (`SEBULBA_TOOLS_VENV`, else the repository's
/// `.venv-tools` from scripts/python-env.sh) when it holds `module`; else
/// `None`, after saying so, or with `SEBULBA_REQUIRE_PYTHON` set (CI) a
/// failure.
pub fn tools_python_or_skip(module: &str) -> Option<PathBuf> {
    let venv = std::env::var_os("SEBULBA_TOOLS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-tools"));
    if venv
        .join("lib/python3.11/site-packages")
        .join(module)
        .is_dir()
    {
        return Some(venv.join("bin/python"));
    }
    assert!(
        std::env::var_os("SEBULBA_REQUIRE_PYTHON").is_none(),
        "SEBULBA_REQUIRE_PYTHON is set but {} holds no {module}: run scripts/python-env.sh",
        venv.display()
    );
    eprintln!(
        "SKIPPED: no {module} in {} (run scripts/python-env.sh)",
        venv.display()
    );
    None
}

/// The run id a learner's log names (`run_id=...`), for finding its directory
/// under a runs root.
pub fn logged_run_id(log: &str) -> String {
    log.split_whitespace()
        .find_map(|w| w.strip_prefix("run_id="))
        .unwrap_or_else(|| panic!("no run id in the learner's log:\n{log}"))
        .to_string()
}
