//! Driving a compose project from a test: the compose program, the image the
//! test builds, a project torn down (volumes too) when the test ends.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{cmd:?} failed: {}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

pub fn stdout(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run(cmd).stdout).trim().to_string()
}

/// `docker compose` (plugin) or `docker-compose` (older installs), if any works.
pub fn compose_program() -> Option<Vec<String>> {
    let ok = |args: &[&str]| {
        Command::new(args[0])
            .args(&args[1..])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    if !ok(&["docker", "info"]) {
        return None;
    }
    if ok(&["docker", "compose", "version"]) {
        Some(vec!["docker".into(), "compose".into()])
    } else if ok(&["docker-compose", "version"]) {
        Some(vec!["docker-compose".into()])
    } else {
        None
    }
}

/// The compose program, or `None` (the test is skipped, saying so) where
/// Docker with Compose is not usable; with `SEBULBA_REQUIRE_DOCKER` set (as
/// `.ci/run` sets it) or `CI` set, that is a failure.
pub fn compose_or_skip() -> Option<Vec<String>> {
    let compose = compose_program();
    if compose.is_none() {
        for var in ["SEBULBA_REQUIRE_DOCKER", "CI"] {
            if std::env::var_os(var).is_some() {
                panic!("{var} is set but Docker with Compose is not usable here");
            }
        }
        eprintln!("SKIPPED: Docker with Compose is not available on this machine");
    }
    compose
}

/// Removes the test's image tag when the test ends.
pub struct Image(pub String);

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
    }
}

pub struct Cluster {
    pub compose: Vec<String>,
    pub project: String,
    pub files: Vec<PathBuf>,
    /// `--env-file` for every command (the secured cluster's tokens).
    pub env_file: Option<PathBuf>,
    pub env: Vec<(&'static str, String)>,
}

impl Cluster {
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.compose[0]);
        c.args(&self.compose[1..]).args(["-p", &self.project]);
        if let Some(f) = &self.env_file {
            c.arg("--env-file").arg(f);
        }
        for f in &self.files {
            c.arg("-f").arg(f);
        }
        c.args(args);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    pub fn containers(&self, service: &str) -> Vec<String> {
        stdout(&mut self.cmd(&["ps", "-q", service]))
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.cmd(&["logs", "--no-color"]).output().map(|o| {
            if std::thread::panicking() {
                eprintln!("{}", String::from_utf8_lossy(&o.stdout));
            }
        });
        let _ = self.cmd(&["down", "-v", "-t", "10"]).output();
    }
}

pub fn copy_out(container: &str, path: &str, to: &Path) {
    run(Command::new("docker")
        .args(["cp", &format!("{container}:{path}")])
        .arg(to));
}

impl Cluster {
    /// Every log line of `service` (all its containers, every restart).
    pub fn logs(&self, service: &str) -> String {
        let o = run(&mut self.cmd(&["logs", "--no-color", service]));
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    }

    /// Waits for the learner to exit (it must succeed) and returns the run's
    /// `summary.json`, copied out of its container into `dir`.
    pub fn finished_summary(&self, dir: &Path) -> serde_json::Value {
        let learner = self.containers("learner").pop().expect("a learner");
        let code = stdout(Command::new("docker").args(["wait", &learner]));
        assert_eq!(
            code,
            "0",
            "learner exit code; log:\n{}",
            self.logs("learner")
        );
        let run_id = super::logged_run_id(&self.logs("learner"));
        let path = dir.join("summary.json");
        copy_out(&learner, &format!("/runs/{run_id}/summary.json"), &path);
        let summary = super::read_json(&path);
        eprintln!("summary: {summary:#}");
        summary
    }
}

/// Builds `tag` offline from the test's binary as the README shows
/// (`deploy/build-image.sh`); the tag is removed when the returned guard drops.
pub fn build_image(tag: &str) -> Image {
    build_image_with(tag, None)
}

/// As [`build_image`], carrying Python and the packages of `venv` when given
/// (`SEBULBA_IMAGE_VENV`).
pub fn build_image_with(tag: &str, venv: Option<&Path>) -> Image {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let image = Image(tag.to_string());
    let mut cmd = Command::new(root.join("deploy/build-image.sh"));
    cmd.arg(env!("CARGO_BIN_EXE_sebulba"))
        .env("SEBULBA_IMAGE", tag);
    if let Some(v) = venv {
        cmd.env("SEBULBA_IMAGE_VENV", v);
    }
    run(&mut cmd);
    image
}

/// Whether the container is running now.
pub fn is_running(container: &str) -> bool {
    stdout(Command::new("docker").args(["inspect", "-f", "{{.State.Running}}", container]))
        == "true"
}

/// The runs volume read from the host as the README shows: a container
/// created on the volume (never started: the image has no shell) that
/// `docker cp` copies out of, while the cluster runs and after `down`.
pub struct RunsVolume {
    container: String,
}

impl RunsVolume {
    pub fn open(volume: &str, image: &str, name: &str) -> Self {
        let volume = format!("{volume}:/runs");
        run(Command::new("docker").args(["create", "--name", name, "-v", &volume, image]));
        Self {
            container: name.to_string(),
        }
    }

    /// Copies `/runs/<path>` (a file or a directory) to `to`.
    pub fn copy(&self, path: &str, to: &Path) {
        copy_out(&self.container, &format!("/runs/{path}"), to);
    }

    /// `/runs/<path>` as text, or `None` when it does not exist (yet).
    pub fn read(&self, path: &str, scratch: &Path) -> Option<String> {
        let _ = std::fs::remove_file(scratch);
        let src = format!("{}:/runs/{path}", self.container);
        let ok = Command::new("docker")
            .args(["cp", &src])
            .arg(scratch)
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then(|| std::fs::read_to_string(scratch).unwrap_or_default())
    }
}

impl Drop for RunsVolume {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", &self.container])
            .output();
    }
}
