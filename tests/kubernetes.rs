//! The Kubernetes manifests in `deploy/k8s`, checked offline (no cluster
//! here): `deploy/k8s/validate.sh` validates them against the Kubernetes
//! schemas with `kubernetes-validate` and checks their wiring; and the
//! certificate its README's `sebulba certs` command issues really serves the
//! names the Services have in the cluster, over TLS, to `sebulba health`
//! (what the probes run).

mod common;

use common::{Proc, bin, free_port, run_dir, tools_python_or_skip};
use std::path::Path;
use std::time::{Duration, Instant};

fn k8s() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s")
}

#[test]
fn manifests_validate_against_the_kubernetes_schemas() {
    let Some(python) = tools_python_or_skip("kubernetes_validate") else {
        return;
    };
    let validator = python.with_file_name("kubernetes-validate");
    let out = std::process::Command::new(k8s().join("validate.sh"))
        .env("KUBERNETES_VALIDATE", &validator)
        .output()
        .expect("run deploy/k8s/validate.sh");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "validate.sh failed:\n{text}");
    assert!(text.contains("== deploy/k8s: valid"), "{text}");
}

/// The `--names` of the README's `sebulba certs --out deploy/k8s/certs` line.
fn readme_names() -> String {
    let readme = std::fs::read_to_string(k8s().join("README.md")).expect("deploy/k8s/README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("sebulba certs --out deploy/k8s/certs"))
        .expect("the certs command in deploy/k8s/README.md");
    line.split_whitespace()
        .skip_while(|w| *w != "--names")
        .nth(1)
        .expect("--names")
        .to_string()
}

#[test]
fn the_readmes_certificate_serves_every_service_name() {
    let dir = run_dir("k8s-certs");
    let certs = dir.join("certs");
    let names = readme_names();
    let out = bin()
        .args(["certs", "--out"])
        .arg(&certs)
        .args(["--names", &names])
        .output()
        .expect("sebulba certs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = free_port();
    let mut cmd = bin();
    cmd.args(["param-server", "--listen", &format!("127.0.0.1:{port}")])
        .env("SEBULBA_TLS_CERT", certs.join("server.pem"))
        .env("SEBULBA_TLS_KEY", certs.join("server.key"))
        .env("SEBULBA_TLS_CA", certs.join("ca.pem"));
    let _server = Proc::spawn("param-server", cmd, &dir);
    let health = |domain: &str| {
        bin()
            .args(["health", "--addr", &format!("127.0.0.1:{port}")])
            .env("SEBULBA_TLS_CA", certs.join("ca.pem"))
            .env("SEBULBA_TLS_DOMAIN", domain)
            .output()
            .expect("sebulba health")
            .status
            .success()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !health("127.0.0.1") {
        assert!(
            Instant::now() < deadline,
            "the TLS param-server never served"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for service in ["learner", "param-server"] {
        for name in [
            service.to_string(),
            format!("{service}.sebulba"),
            format!("{service}.sebulba.svc"),
            format!("{service}.sebulba.svc.cluster.local"),
        ] {
            assert!(health(&name), "the certificate does not serve {name}");
        }
    }
    assert!(
        !health("evil.example"),
        "a name the certificate lacks passed"
    );
}
