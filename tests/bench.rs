//! The benchmark suite through the binary, at small sizes: every line prints
//! its figures and writes JSON with them. Speeds are printed, never asserted
//! (only that they were measured: positive and finite).

// Each test is one scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;

use common::{bin, read_json, run_dir};

fn bench(dir: &std::path::Path, name: &str, args: &[&str]) -> serde_json::Value {
    let json = dir.join(format!("{name}.json"));
    let out = bin()
        .arg("bench")
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("sebulba bench");
    assert!(out.status.success(), "bench {args:?}: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    read_json(&json)
}

fn measured(v: &serde_json::Value, key: &str) -> f64 {
    let x = v[key].as_f64().unwrap_or_else(|| panic!("`{key}` in {v}"));
    assert!(x.is_finite() && x > 0.0, "`{key}` = {x}");
    x
}

#[test]
fn every_benchmark_line_prints_and_writes_its_figures() {
    let dir = run_dir("bench");
    let envs = bench(&dir, "envs", &["envs", "--envs", "4", "--seconds", "0.2"]);
    let rows = envs.as_array().expect("a row per env");
    // The classic-control envs, the turn-based games (games/s too), then
    // MinAtar's.
    let minatar = sebulba_envs::minatar::MINATAR_IDS;
    let classic = sebulba_envs::ENV_IDS.len();
    let games = classic + sebulba_envs::games::GAME_IDS.len();
    assert_eq!(rows.len(), games + minatar.len());
    for r in rows {
        measured(r, "steps_per_second");
    }
    for (r, id) in rows[classic..games]
        .iter()
        .zip(sebulba_envs::games::GAME_IDS)
    {
        assert_eq!(r["env_id"], *id);
        measured(r, "games_per_second");
    }
    for (r, id) in rows[games..].iter().zip(minatar) {
        assert_eq!(r["env_id"], *id);
        assert_eq!(r["processes"], 1);
    }
    // Two processes stepping at once: one row, their steps together.
    let two = bench(
        &dir,
        "envs-2",
        &[
            "envs",
            "--env",
            "Pendulum-v1",
            "--envs",
            "4",
            "--seconds",
            "0.3",
            "--processes",
            "2",
        ],
    );
    let two = &two.as_array().expect("rows")[..];
    assert_eq!(two.len(), 1);
    assert_eq!(
        (two[0]["processes"].as_u64(), two[0]["num_envs"].as_u64()),
        (Some(2), Some(4))
    );
    measured(&two[0], "steps_per_second");
    let inf = bench(
        &dir,
        "inference",
        &["inference", "--env", "CartPole-v1", "--seconds", "0.5"],
    );
    measured(&inf, "samples_per_second");
    let tr = bench(&dir, "transport", &["transport", "--batches", "50"]);
    measured(&tr, "batches_per_second");
    measured(&tr, "megabytes_per_second");
    let le = bench(
        &dir,
        "learner",
        &[
            "learner",
            "--env",
            "CartPole-v1",
            "--samples",
            "512",
            "--updates",
            "1",
        ],
    );
    measured(&le, "samples_per_second");
    assert_eq!(
        le["engine"], "fused",
        "auto picks the fused engine on one cpu: {le}"
    );
    the_learners_flops_are_set_beside_its_peak(&le);
    let burn = bench(
        &dir,
        "learner-burn",
        &[
            "learner",
            "--env",
            "CartPole-v1",
            "--samples",
            "256",
            "--updates",
            "1",
            "--set",
            "learner.engine=burn",
        ],
    );
    measured(&burn, "samples_per_second");
    assert_eq!(burn["engine"], "burn");
    // A convolutional network on synthetic images of MinAtar's shape.
    let conv = bench(
        &dir,
        "learner-conv",
        &[
            "learner",
            "--env",
            "CartPole-v1",
            "--image",
            "10,10,4",
            "--samples",
            "256",
            "--updates",
            "1",
            "--set",
            "network.conv=[{channels=8,kernel=3}]",
        ],
    );
    measured(&conv, "samples_per_second");
    assert_eq!(conv["image"], serde_json::json!([10, 10, 4]));
    assert_eq!(conv["conv"], serde_json::json!([[8, 3, 1, 0]]));
    let run = dir.join("run");
    let run = run.to_str().expect("utf-8 path");
    let local = bench(
        &dir,
        "local",
        &[
            "local",
            "--env",
            "CartPole-v1",
            "--total-steps",
            "6000",
            "--run-dir",
            run,
            "--target-return",
            "0",
            "--env-seconds",
            "0.5",
        ],
    );
    measured(&local, "env_steps_per_second");
    // Set against the env source alone with the run's 2 actors of 8 envs.
    let limit = &local["env_only"];
    assert_eq!(
        (limit["processes"].as_u64(), limit["num_envs"].as_u64()),
        (Some(2), Some(8))
    );
    measured(limit, "steps_per_second");
    measured(&local, "fraction_of_env_only");
    let shares = &local["actor_shares"];
    let share = |k: &str| shares[k].as_f64().unwrap_or(-1.0);
    let parts = ["env", "inference", "waiting_for_learner", "other"];
    assert!(
        parts.iter().all(|k| (0.0..=1.0).contains(&share(k))),
        "{shares}"
    );
    let total: f64 = parts.iter().map(|k| share(k)).sum();
    assert!((total - 1.0).abs() < 1e-6, "{shares}");
    assert!(share("env") > 0.0 && share("inference") > 0.0, "{shares}");
    let busy = measured(&local, "learner_busy");
    assert!(
        busy <= 1.0,
        "the learner's update time within the run's: {busy}"
    );
    assert!(local["env_steps"].as_u64().unwrap_or(0) >= 6000, "{local}");
    // Training alone ends at the last update, before the final evaluation
    // and the shutdown that the whole run's wall time includes.
    let (training, wall) = (
        measured(&local, "training_seconds"),
        measured(&local, "wall_seconds"),
    );
    assert!(
        training <= wall,
        "training {training} s within the run's {wall} s"
    );
    assert!(
        measured(&local, "training_steps_per_second") >= measured(&local, "env_steps_per_second"),
        "{local}"
    );
    assert!(
        local["command"]
            .as_str()
            .is_some_and(|c| c.contains("bench local")),
        "the JSON says how to reproduce it: {local}"
    );
    measured(&local, "peak_rss_mib");
    // Every return reaches 0: the first evaluation (of version 0, at 0 steps).
    let first_eval =
        std::fs::read_to_string(dir.join("run").join("eval.jsonl")).expect("eval.jsonl");
    let first: serde_json::Value =
        serde_json::from_str(first_eval.lines().next().expect("an eval line")).expect("json");
    assert_eq!(local["target_return"], 0.0);
    assert_eq!(local["steps_to_target"], first["env_steps"], "{local}");
}

/// CartPole's default network (two torsos of 64 and 64 on 4 inputs, heads
/// of 2 and 1): the forward products 2 x (4 x 64 + 64 x 64) + 64 x 3 =
/// 8,896 multiply-adds, each again for its weights and, but for the first
/// layers, for its input: 2 x (3 x 8,896 - 2 x 256) flops a sample. The
/// GFLOP/s are those times the sample-gradients a second, and the fraction
/// is over the peak of the path the update ran on.
fn the_learners_flops_are_set_beside_its_peak(le: &serde_json::Value) {
    assert_eq!(le["gradient_flops_per_sample"], 2 * (3 * 8_896 - 2 * 256));
    let gflops = measured(le, "gflops");
    let sgps = measured(le, "sample_grads_per_second");
    assert!(
        (gflops - 52_352.0 * sgps / 1e9).abs() < 1e-6 * gflops,
        "{le}"
    );
    let kernels = le["kernels"].as_str().expect("the kernels' path");
    if kernels == "scalar" {
        assert!(le["peak"].is_null(), "no FMA on the portable path: {le}");
        return;
    }
    let peak = &le["peak"];
    assert_eq!(peak["kernels"], kernels, "{le}");
    assert_eq!(peak["cores"], le["threads"], "{le}");
    let (lanes, units) = (measured(peak, "lanes"), measured(peak, "fma_units"));
    let want = lanes * units * 2.0 * measured(peak, "ghz") * measured(peak, "cores");
    assert!(
        (measured(peak, "gflops") - want).abs() < 1e-9 * want,
        "{le}"
    );
    measured(peak, "fma_loop_gflops");
    let fraction = measured(le, "fraction_of_peak");
    assert!((fraction - gflops / want).abs() < 1e-9, "{le}");
}

/// `bench kernels`: each product of the presets on every path this CPU
/// has, matrixmultiply first; every path's figure beside it and beside its
/// peak.
#[test]
fn every_kernel_path_is_timed_beside_matrixmultiply() {
    let dir = run_dir("bench-kernels");
    let r = bench(
        &dir,
        "kernels",
        &["kernels", "--seconds", "0.02", "--only", "mlp64"],
    );
    let products = r["products"].as_array().expect("products");
    let names: Vec<&str> = products
        .iter()
        .map(|p| p["shape"]["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(
        names,
        ["mlp64 forward", "mlp64 input grad", "mlp64 weight grad"]
    );
    let peaks = r["peaks"].as_array().expect("peaks");
    for p in products {
        let paths = p["paths"].as_array().expect("paths");
        assert_eq!(paths[0]["kernels"], "scalar", "{p}");
        assert_eq!(paths[0]["speedup"], 1.0, "{p}");
        for f in paths {
            let g = measured(f, "gflops");
            let base = measured(&paths[0], "gflops");
            assert!((measured(f, "speedup") - g / base).abs() < 1e-9, "{p}");
            let peak = peaks.iter().find(|q| q["kernels"] == f["kernels"]);
            match peak {
                Some(q) => {
                    let want = g / measured(q, "gflops");
                    assert!((measured(f, "fraction_of_peak") - want).abs() < 1e-9);
                }
                None => assert!(f["fraction_of_peak"].is_null(), "{p}"),
            }
        }
    }
    let bad = bin()
        .args(["bench", "kernels", "--seconds", "0"])
        .output()
        .expect("sebulba bench kernels");
    assert!(!bad.status.success());
    let text = String::from_utf8_lossy(&bad.stderr);
    assert!(text.contains("--seconds must be positive"), "{text}");
}

/// `bench rules`: Big Two's fixed players against each other, as the
/// evaluator seats them. Every pairing is played; the planner wins more
/// than its share against three greedy players, and more than greedy does
/// at the same tables; a player against three of itself sits near its
/// share.
#[test]
fn rule_players_meet_each_other_on_the_same_deals() {
    let dir = run_dir("bench-rules");
    let rules = bench(
        &dir,
        "rules",
        &["rules", "--env", "BigTwo-v0", "--games", "400"],
    );
    let rows = rules.as_array().expect("a row per pairing");
    let names = ["random", "greedy", "planner"];
    assert_eq!(rows.len(), names.len() * names.len());
    let rate = |me: &str, them: &str| {
        let row = rows
            .iter()
            .find(|r| r["player"] == me && r["opponent"] == them)
            .unwrap_or_else(|| panic!("{me} vs {them} in {rules}"));
        assert_eq!(row["games"], 400, "{row}");
        row["win_rate"].as_f64().expect("win_rate")
    };
    for me in names {
        for them in names {
            assert!((0.0..=1.0).contains(&rate(me, them)));
        }
        // 400 games: a fair share's 95% band is about 21-29%.
        let own = rate(me, me);
        assert!((0.18..=0.32).contains(&own), "{me} against itself: {own}");
    }
    assert!(rate("planner", "greedy") > 0.30, "{rules}");
    assert!(rate("planner", "greedy") > rate("greedy", "greedy"));
    assert!(rate("greedy", "random") > rate("random", "random"));
    // Nim has one rule player: random and greedy, four pairings.
    let nim = bench(
        &dir,
        "rules-nim",
        &["rules", "--env", "Nim-v0", "--games", "100"],
    );
    assert_eq!(nim.as_array().map(Vec::len), Some(4), "{nim}");
    // Not a game: one clear line, non-zero exit.
    let out = bin()
        .args(["bench", "rules", "--env", "CartPole-v1"])
        .output()
        .expect("sebulba bench rules");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CartPole-v1: not a turn-based game"), "{err}");
}

/// A synthetic expensive env (`env.kwargs.step_cost_us`) through `bench
/// local`: one actor spinning 1 ms a step cannot step faster than 1,000 env
/// steps/s, whatever the learner does.
#[test]
fn a_costly_native_env_bounds_one_actor_to_its_step_cost() {
    let dir = run_dir("bench-costly");
    let run = dir.join("run");
    let local = bench(
        &dir,
        "costly",
        &[
            "local",
            "--env",
            "CartPole-v1",
            "--total-steps",
            "1024",
            "--run-dir",
            run.to_str().expect("utf-8 path"),
            "--set",
            "env.kwargs.step_cost_us=1000",
            "--set",
            "run.local_actors=1",
            "--set",
            "env.envs_per_actor=4",
            "--set",
            "env.rollout_length=64",
            "--set",
            "eval.episodes=1",
            "--set",
            "eval.final_episodes=1",
            "--env-seconds",
            "1",
        ],
    );
    let sps = measured(&local, "env_steps_per_second");
    assert!(local["env_steps"].as_u64().unwrap_or(0) >= 1024, "{local}");
    assert!(sps <= 1000.0, "one actor at 1 ms a step: {sps} env steps/s");
    // The env alone is bound the same way, and the actor's time is the env's.
    let limit = measured(&local["env_only"], "steps_per_second");
    assert!(limit <= 1000.0, "the env alone at 1 ms a step: {limit}");
    let env_share = local["actor_shares"]["env"].as_f64().unwrap_or(0.0);
    assert!(env_share > 0.5, "{}", local["actor_shares"]);
}
