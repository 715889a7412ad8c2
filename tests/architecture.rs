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

/// The repository's top-level entries (what a path may start with).
fn top_level() -> BTreeSet<String> {
    std::fs::read_dir(root())
        .expect("repository root")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.') && name != "target")
        .collect()
}

#[test]
fn every_path_architecture_md_names_exists() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let top = top_level();
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
                `learner.engine = auto`, `core::games`, `../elsewhere/NOTES.md`";
    let found: Vec<&str> = backticked(text)
        .into_iter()
        .filter_map(|t| as_path(t, &top))
        .collect();
    assert_eq!(
        found,
        ["learner/src/run.rs", "deploy/k8s/", "update/step.rs"]
    );
}

/// The tasks "Where to change what" must index, as its entries' bold
/// titles begin (a qualifier in parentheses may follow).
const CHANGE_TASKS: [&str; 5] = [
    "a layer type",
    "an env",
    "an env source",
    "an algorithm",
    "a metric",
];

/// ARCHITECTURE.md's "Where to change what" has an entry (`- **Title.**`)
/// for each task of [`CHANGE_TASKS`], and each entry names at least two
/// repository paths (that they exist is the test above's).
#[test]
fn where_to_change_what_indexes_each_task_by_its_files() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Where to change what"))
        .expect("ARCHITECTURE.md has a section \"Where to change what\"");
    let top = top_level();
    // Each entry: its bold title and the paths its text names.
    let entries: Vec<(String, usize)> = section
        .split("\n- **")
        .skip(1)
        .filter_map(|entry| {
            let (title, body) = entry.split_once("**")?;
            let title = title.trim().trim_end_matches('.').to_lowercase();
            let paths: BTreeSet<&str> = backticked(body)
                .into_iter()
                .filter_map(|t| as_path(t, &top))
                .collect();
            Some((title, paths.len()))
        })
        .collect();
    for task in CHANGE_TASKS {
        let found: Vec<&(String, usize)> = entries
            .iter()
            .filter(|(title, _)| title == task || title.starts_with(&format!("{task} (")))
            .collect();
        assert_eq!(
            found.len(),
            1,
            "one entry for {task:?} in \"Where to change what\": {entries:?}"
        );
        let paths = found[0].1;
        assert!(paths >= 2, "the entry for {task:?} names {paths} path(s)");
    }
}

/// The `may depend on` column of ARCHITECTURE.md's crate table, by crate
/// (dev-dependencies, in parentheses there, left out); the root package's
/// "all of the above" is not listed.
fn table_dependencies(text: &str) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Crates"))
        .expect("ARCHITECTURE.md has a section on crates");
    section
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let deps = cells.get(2)?.split('(').next()?;
            if deps.contains("all of the above") {
                return None;
            }
            let deps = deps
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty() && *d != "—")
                .map(String::from)
                .collect();
            Some((name.to_string(), deps))
        })
        .collect()
}

/// Every workspace crate depends on exactly the sebulba crates its row of
/// the table names (normal dependencies; `cargo metadata`).
#[test]
fn the_crate_table_is_the_dependency_graph() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let table = table_dependencies(&text);
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let mut seen = 0;
    for package in packages {
        let name = package["name"].as_str().expect("name");
        let Some(short) = name.strip_prefix("sebulba-") else {
            continue;
        };
        let actual: BTreeSet<String> = package["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str()?.strip_prefix("sebulba-"))
            .map(String::from)
            .collect();
        let listed = table
            .get(short)
            .unwrap_or_else(|| panic!("ARCHITECTURE.md's crate table has no row for `{short}`"));
        assert_eq!(
            &actual, listed,
            "`{short}`: its dependencies against its table row"
        );
        seen += 1;
    }
    assert_eq!(
        seen,
        table.len(),
        "the table lists crates the workspace lacks"
    );
}

/// The algorithms know no service: none of their own dependencies is an
/// async runtime, gRPC, the transport or the run directory.
#[test]
fn the_algorithms_depend_on_no_service_crate() {
    let manifest = std::fs::read_to_string(root().join("algorithms/Cargo.toml"))
        .expect("algorithms/Cargo.toml");
    let table: toml::Table = manifest.parse().expect("algorithms/Cargo.toml parses");
    let deps = table["dependencies"].as_table().expect("[dependencies]");
    for banned in [
        "tokio",
        "tonic",
        "sebulba-proto",
        "sebulba-transport",
        "sebulba-runfiles",
        "sebulba-learner",
    ] {
        assert!(
            !deps.contains_key(banned),
            "algorithms/Cargo.toml depends on {banned}"
        );
    }
}

/// The crates a package depends on, directly or not (normal dependencies),
/// by name.
fn dependency_tree(package: &str) -> BTreeSet<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none"])
        .args(["--offline", "--format", "{p}"])
        .current_dir(root())
        .output()
        .expect("cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

/// `core` (and so the algorithms' model, config and weights) reaches no gRPC
/// and no async runtime: it takes the wire's messages without the `grpc`
/// feature. The algorithms reach no gRPC either; their tokio comes only
/// through burn-collective, the burn engine's all-reduce.
#[test]
fn core_and_the_algorithms_reach_no_grpc() {
    let core = dependency_tree("sebulba-core");
    for banned in ["tonic", "tokio", "sebulba-transport"] {
        assert!(!core.contains(banned), "sebulba-core depends on {banned}");
    }
    let algorithms = dependency_tree("sebulba-algorithms");
    assert!(
        !algorithms.contains("tonic"),
        "sebulba-algorithms reaches tonic"
    );
    assert!(
        algorithms.contains("sebulba-core"),
        "the tree was read: {algorithms:?}"
    );
}

/// The fused engine's network knows no burn: its crate reaches no burn crate,
/// and burn's backends are named only inside the burn engine (no
/// `AutodiffBackend` bound outside `algorithms/src/engine/burn/`).
#[test]
fn the_fused_network_is_free_of_burn_and_burn_stays_in_its_engine() {
    let fused = dependency_tree("sebulba-fused");
    assert!(
        fused.contains("matrixmultiply"),
        "the tree was read: {fused:?}"
    );
    let burn: Vec<&String> = fused.iter().filter(|c| c.starts_with("burn")).collect();
    assert!(burn.is_empty(), "sebulba-fused reaches {burn:?}");
    let mut offenders: Vec<String> = rust_files()
        .into_iter()
        .filter(|(rel, text)| {
            text.contains("AutodiffBackend") && !rel.starts_with("algorithms/src/engine/burn")
        })
        .map(|(rel, _)| rel)
        .collect();
    offenders.sort();
    assert!(
        offenders.is_empty(),
        "AutodiffBackend outside the burn engine: {offenders:?}"
    );
}

/// Every Rust file of the repository but this one: its path from the root
/// and its text.
fn rust_files() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)
            .expect("a readable folder")
            .flatten()
        {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") && name != "architecture.rs" {
                let rel = path.strip_prefix(root()).expect("under the root");
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                out.push((rel.display().to_string(), text));
            }
        }
    }
    out
}

/// Adding a block type touches few files (issue 71: at most 6 outside tests
/// and docs; the ONNX export, issue 74, is one more). Each block type but the dense layer, which the heads and the
/// sparse input share, is named outside its own files and tests only where
/// ARCHITECTURE.md's "A layer type" entry says: its `Block`, its placing
/// and dispatch, and burn's module.
#[test]
fn a_block_type_is_named_only_at_the_block_seams() {
    let seams = [
        "fused/src/arch.rs",
        "fused/src/block/mod.rs",
        "core/src/model/torso.rs",
        "src/export/onnx/mod.rs",
    ];
    let is_test = |rel: &str| {
        rel.starts_with("tests/")
            || rel.contains("/tests/")
            || rel.ends_with("/tests.rs")
            || rel.ends_with("_tests.rs")
    };
    let files = rust_files();
    for block in ["Conv", "MaxPool", "Residual", "Activate"] {
        let names = [format!("Block::{block}"), format!("BlockAt::{block}")];
        let mut found: Vec<&str> = files
            .iter()
            .filter(|(rel, text)| !is_test(rel) && names.iter().any(|n| text.contains(n.as_str())))
            .map(|(rel, _)| rel.as_str())
            .collect();
        found.sort();
        assert!(
            found.len() >= 2,
            "{block}: the search found its seams: {found:?}"
        );
        let outside: Vec<&&str> = found.iter().filter(|f| !seams.contains(f)).collect();
        assert!(
            outside.is_empty(),
            "{block} is dispatched outside the block seams {seams:?}: {outside:?}"
        );
    }
}
