//! ARCHITECTURE.md is the map of what is built: every repository path it
//! names in backticks exists. A path is a backticked token that starts with
//! a top-level entry of the repository (`learner/src/run.rs`,
//! `deploy/k8s/`), or any token ending in `.rs`, which must then be written
//! from the repository's root.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The backticked tokens of `text`.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The token as a path to check, or `None` when it is no repository path.
fn as_path<'a>(token: &'a str, top: &BTreeSet<String>) -> Option<&'a str> {
    // `core/src/policy.rs` `InferencePolicy`: one token a path; a span with
    // spaces or code (`a::b`, `f(x)`) is not.
    let token = token.trim();
    if token.contains([' ', '(', ':', '<', '=', '*', '{']) || token.starts_with("../") {
        return None;
    }
    let first = token.split('/').next().unwrap_or(token);
    let named_from_root = token.contains('/') && top.contains(first);
    (named_from_root || token.ends_with(".rs")).then_some(token)
}

#[test]
fn every_path_architecture_md_names_exists() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let top: BTreeSet<String> = std::fs::read_dir(root())
        .expect("repository root")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.') && name != "target")
        .collect();
    let paths: BTreeSet<&str> = backticked(&text)
        .into_iter()
        .filter_map(|t| as_path(t, &top))
        .collect();
    assert!(paths.len() > 20, "too few paths found: {paths:?}");
    let missing: Vec<&&str> = paths
        .iter()
        .filter(|p| !root().join(p.trim_end_matches('/')).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}

#[test]
fn the_path_reader_takes_paths_and_leaves_code() {
    let top: BTreeSet<String> = ["learner", "deploy"].map(String::from).into();
    let text = "`learner/src/run.rs` `run`, `deploy/k8s/`, `update/step.rs`, \
                `learner.engine = auto`, `core::games`, `../shared/DESIGN.md`";
    let found: Vec<&str> = backticked(text)
        .into_iter()
        .filter_map(|t| as_path(t, &top))
        .collect();
    assert_eq!(
        found,
        ["learner/src/run.rs", "deploy/k8s/", "update/step.rs"]
    );
}
