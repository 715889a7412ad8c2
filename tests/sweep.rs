//! `sebulba sweep` through the binary: settings x seeds run in parallel, one
//! table and one plot, a second call resumes (runs nothing finished), an
//! edited setting is refused rather than mixed with its older seeds, and a
//! bad override fails before anything runs.

// One scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;

use common::{bin, read_json, run_dir};
use std::path::Path;

const SPEC: &str = r#"
env = "CartPole-v1"
seeds = [1, 2]
target = 9.0
set = ["run.total_steps=2048", "run.local_actors=1", "eval.episodes=1", "eval.final_episodes=2"]

[[setting]]
name = "base"

[[setting]]
name = "lr-2e-3"
set = ["ppo.learning_rate=2e-3"]
"#;

fn sweep(spec: &Path, out: &Path) -> std::process::Output {
    bin()
        .arg("sweep")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .args(["--jobs", "2"])
        .output()
        .expect("sebulba sweep")
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn modified(p: &Path) -> std::time::SystemTime {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn a_sweep_runs_settings_by_seeds_summarises_them_and_resumes() {
    let dir = run_dir("sweep");
    let (spec, out) = (dir.join("cartpole.toml"), dir.join("out"));
    std::fs::write(&spec, SPEC).expect("write spec");

    let first = sweep(&spec, &out);
    let log = text(&first);
    assert!(first.status.success(), "{log}");
    assert!(
        log.contains("4 to run (0 done earlier), 2 at once"),
        "{log}"
    );

    // One row per setting over both seeds, with the figures each run reported.
    let rows = read_json(&out.join("summary.json"));
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    for (row, name) in rows.iter().zip(["base", "lr-2e-3"]) {
        assert_eq!(row["setting"], name);
        assert_eq!(row["seeds"], 2);
        let finals: Vec<f64> = row["finals"]
            .as_array()
            .expect("finals")
            .iter()
            .map(|f| f[1].as_f64().expect("a final evaluation"))
            .collect();
        let r = |s: &str| read_json(&out.join(name).join(s));
        let reported = [r("seed-1.json"), r("seed-2.json")];
        for (f, rep) in finals.iter().zip(&reported) {
            assert_eq!(Some(*f), rep["final_eval_return_mean"].as_f64());
        }
        let (lo, hi) = (finals[0].min(finals[1]), finals[0].max(finals[1]));
        assert_eq!(row["final_min"].as_f64(), Some(lo));
        assert_eq!(row["final_max"].as_f64(), Some(hi));
        assert_eq!(row["final_median"].as_f64(), Some(0.5 * (lo + hi)));
        // Every CartPole episode lasts at least 9 steps.
        assert_eq!(row["reached_target"], 2, "{row}");
    }
    // Each run is its setting with its seed.
    for (name, lr) in [("base", "0.001"), ("lr-2e-3", "0.002")] {
        for seed in [1, 2] {
            let config =
                std::fs::read_to_string(out.join(name).join(format!("seed-{seed}/config.toml")))
                    .expect("config.toml");
            assert!(config.contains(&format!("seed = {seed}")), "{config}");
            assert!(
                config.contains(&format!("learning_rate = {lr}")),
                "{config}"
            );
        }
    }
    let table = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(table.contains("| base | 2/2 |"), "{table}");
    assert!(table.contains("steps to 9 (reached)"), "{table}");
    assert!(out.join("curves.png").metadata().expect("plot").len() > 1000);

    // Again: nothing runs, nothing changes.
    let result = out.join("lr-2e-3/seed-2.json");
    let before = modified(&result);
    let again = sweep(&spec, &out);
    let log = text(&again);
    assert!(again.status.success(), "{log}");
    assert!(log.contains("0 to run (4 done earlier)"), "{log}");
    assert_eq!(modified(&result), before);

    // A lost result runs again, alone.
    std::fs::remove_file(&result).expect("remove a result");
    let resumed = sweep(&spec, &out);
    let log = text(&resumed);
    assert!(resumed.status.success(), "{log}");
    assert!(log.contains("1 to run (3 done earlier)"), "{log}");
    assert!(result.exists());

    // An edited setting would mix two settings' seeds: refused.
    std::fs::write(
        &spec,
        SPEC.replace("ppo.learning_rate=2e-3", "ppo.learning_rate=3e-3"),
    )
    .expect("edit spec");
    let edited = sweep(&spec, &out);
    let log = text(&edited);
    assert!(!edited.status.success(), "{log}");
    assert!(log.contains("setting `lr-2e-3` differs"), "{log}");

    // A typo fails before anything runs, naming the setting and the key.
    let typo = dir.join("typo.toml");
    std::fs::write(
        &typo,
        SPEC.replace("ppo.learning_rate=2e-3", "ppo.learnig_rate=2e-3"),
    )
    .expect("write spec");
    let fresh = dir.join("typo-out");
    let bad = sweep(&typo, &fresh);
    let log = text(&bad);
    assert!(!bad.status.success(), "{log}");
    assert!(log.contains("setting `lr-2e-3`"), "{log}");
    assert!(log.contains("ppo.learnig_rate"), "{log}");
    assert!(!fresh.join("base/seed-1").exists(), "nothing ran");

    // Two names for one configuration would be one curve: refused.
    let twins = dir.join("twins.toml");
    std::fs::write(
        &twins,
        SPEC.replace("ppo.learning_rate=2e-3", "ppo.learning_rate=1e-3"),
    )
    .expect("write spec");
    let bad = sweep(&twins, &dir.join("twins-out"));
    let log = text(&bad);
    assert!(!bad.status.success(), "{log}");
    assert!(
        log.contains("settings `base` and `lr-2e-3` resolve to the same configuration"),
        "{log}"
    );
}
