//! A real Prometheus server (Debian's `prometheus` package, which .ci/run
//! installs) scraping the roles of a test run, queried through its HTTP API.

use super::Proc;
use super::scrape::http_get;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The `prometheus` executable on `PATH`; `None`, after saying so, when there
/// is none, or with `SEBULBA_REQUIRE_PROMETHEUS` set (CI) a failure.
pub fn prometheus_or_skip() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("prometheus"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("SEBULBA_REQUIRE_PROMETHEUS").is_none(),
            "SEBULBA_REQUIRE_PROMETHEUS is set but no `prometheus` is on PATH (apt-get install prometheus)"
        );
        eprintln!("SKIPPED: no `prometheus` on PATH (apt-get install prometheus)");
    }
    found
}

pub struct Prometheus {
    pub proc: Proc,
    port: u16,
}

impl Prometheus {
    /// Starts `exe` scraping `targets` (`(job, port)` on 127.0.0.1) every
    /// second and evaluating the rules of `rules` every second; waits until it
    /// is ready.
    pub fn start(exe: &Path, dir: &Path, targets: &[(&str, u16)], rules: Option<&Path>) -> Self {
        let mut yml = String::from(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n",
        );
        if let Some(r) = rules {
            yml += &format!("rule_files:\n  - {}\n", r.display());
        }
        yml += "scrape_configs:\n";
        let mut jobs: Vec<&str> = targets.iter().map(|t| t.0).collect();
        jobs.sort_unstable();
        jobs.dedup();
        for job in jobs {
            let addrs: Vec<String> = targets
                .iter()
                .filter(|t| t.0 == job)
                .map(|t| format!("\"127.0.0.1:{}\"", t.1))
                .collect();
            yml += &format!(
                "  - job_name: {job}\n    static_configs:\n      - targets: [{}]\n",
                addrs.join(", ")
            );
        }
        let config = dir.join("prometheus.yml");
        std::fs::write(&config, yml).expect("prometheus.yml");
        // Prometheus cannot report a port it picked: pick a free one, and
        // pick again should another process take it first.
        for attempt in 0..3 {
            let port = free_port();
            let mut c = Command::new(exe);
            c.arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join(format!("prometheus-data-{attempt}")).display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"));
            let mut proc = Proc::spawn(&format!("prometheus-{attempt}"), c, dir);
            if wait_ready(&mut proc, port) {
                return Self { proc, port };
            }
            assert!(
                proc.log_text().contains("address already in use"),
                "prometheus did not start:\n{}",
                proc.log_text()
            );
        }
        panic!("prometheus found no free port in three tries");
    }

    /// The series `expr` evaluates to now (`data.result` of an instant
    /// query); panics when Prometheus refuses the expression.
    pub fn query(&self, expr: &str) -> Vec<Value> {
        let body = self.api(&format!("/api/v1/query?query={}", percent_encoded(expr)));
        match &body["data"]["result"] {
            Value::Array(series) => series.clone(),
            other => panic!("`{expr}`: not a vector but {other}"),
        }
    }

    /// Every alerting rule with its state (`inactive`, `pending`, `firing`),
    /// health and last error.
    pub fn alert_rules(&self) -> Vec<Value> {
        let body = self.api("/api/v1/rules?type=alert");
        body["data"]["groups"]
            .as_array()
            .expect("rule groups")
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect()
    }

    /// The names of the alerts firing now.
    pub fn firing(&self) -> Vec<String> {
        self.alert_rules()
            .iter()
            .filter(|r| r["state"] == "firing")
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect()
    }

    fn api(&self, path: &str) -> Value {
        let (head, body) = http_get("127.0.0.1", self.port, path)
            .unwrap_or_else(|e| panic!("GET prometheus {path}: {e}"));
        let v: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET {path}: {e}: {head}\n{body}"));
        assert_eq!(v["status"], "success", "GET {path}: {v}");
        v
    }
}

/// Waits up to 60 s for `/-/ready`; false when the process exited first.
fn wait_ready(proc: &mut Proc, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok((head, _)) = http_get("127.0.0.1", port, "/-/ready")
            && head.contains(" 200")
        {
            return true;
        }
        if let Ok(Some(_)) = proc.child.try_wait() {
            return false;
        }
        assert!(
            Instant::now() < deadline,
            "prometheus not ready in 60 s:\n{}",
            proc.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `text` as a URL query value.
fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
