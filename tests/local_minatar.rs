//! MinAtar through the user's path: `sebulba local --env MinAtar/Breakout-v1`
//! with its preset (the MinAtar network: a convolution stem on the 10x10x4
//! grid) trains, the accounting balances, and the published
//! `final.safetensors` gives the logits sebulba acts with under an
//! independent NumPy forward pass (`tests/numpy_forward.py`, PyTorch's
//! conventions).

mod common;
use common::*;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_core::config::RunConfig;
use sebulba_core::model::ModelSpec;
use sebulba_envs::minatar::{MinAtar, Options};
use sebulba_envs::{Action, Env};
use sebulba_fused::FusedPolicy;
use std::process::Command;

const ID: &str = "MinAtar/Breakout-v1";

#[test]
fn local_mode_trains_minatar_breakout_and_numpy_reads_its_weights() {
    let run = run_local(
        "local-minatar",
        &[
            "--env",
            ID,
            "--seed",
            "1",
            "--total-steps",
            "250000",
            "--set",
            "eval.final_episodes=20",
        ],
    );
    let summary = read_json(&run.join("summary.json"));
    eprintln!("summary: {summary:#}");
    assert_accounted(&summary);
    // Random play scores 0.4 (tests/minatar_reference.rs); the preset passes
    // 4 by 200k steps (seed 1, release build).
    let best = summary["best_eval_return_mean"]
        .as_f64()
        .expect("best eval");
    assert!(best > 2.0, "best evaluation {best} <= 2");

    let Some(python) = tools_python_or_skip("numpy") else {
        return;
    };
    let cfg = RunConfig::preset(ID).expect("preset");
    let mut env = MinAtar::new(ID, Options::default(), 5).expect("env");
    let spec = ModelSpec::new(env.spec(), &cfg.network).expect("spec");
    let bytes = std::fs::read(run.join("final.safetensors")).expect("final.safetensors");
    let policy = FusedPolicy::from_safetensors(&spec.arch(), &bytes).expect("the file");
    // Observations of a game in play.
    let (d, n) = (spec.obs_dim, 24);
    let mut rng = StdRng::seed_from_u64(3);
    let mut obs = vec![0.0; n * d];
    env.reset(&mut obs[..d]);
    for i in 1..n {
        let (done, rest) = obs.split_at_mut(i * d);
        let r = env
            .step(Action::Discrete(rng.random_range(0..3)), &mut rest[..d])
            .expect("a step");
        if r.terminated {
            env.reset(&mut rest[..d]);
        }
        let _ = done;
    }
    let logits = policy.head(&obs, n);
    let case = serde_json::json!({
        "image": spec.image,
        "conv": cfg.network.conv.iter().map(|l| [l.channels, l.kernel, l.stride, l.padding]).collect::<Vec<_>>(),
        "activation": cfg.network.activation.as_str(),
        "obs": obs.chunks(d).collect::<Vec<_>>(),
        "logits": logits.chunks(spec.head_dim()).collect::<Vec<_>>(),
    });
    let case_path = run.join("numpy-case.json");
    std::fs::write(&case_path, case.to_string()).expect("writing the case");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/numpy_forward.py");
    let out = Command::new(python)
        .arg(script)
        .arg(run.join("final.safetensors"))
        .arg(&case_path)
        .output()
        .expect("running numpy_forward.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("its answer");
    eprintln!("numpy: {v}");
    let diff = v["max_abs_diff"].as_f64().expect("a difference");
    let scale = v["max_abs_logit"].as_f64().expect("a scale");
    assert!(scale > 1e-3, "the logits are all near zero: {v}");
    assert!(
        diff < 1e-4 * (1.0 + scale),
        "NumPy's logits differ from sebulba's: {v}"
    );
}

/// Every other MinAtar game through the same path, briefly: the preset's
/// network fits its grid, actors, learner and evaluator run it to the end,
/// and the accounting balances.
#[test]
fn local_mode_runs_every_minatar_game() {
    for id in sebulba_envs::minatar::MINATAR_IDS
        .iter()
        .filter(|id| id.ends_with("-v1") && **id != ID)
    {
        let name = id.trim_start_matches("MinAtar/").to_lowercase();
        let run = run_local(
            &format!("local-minatar-{name}"),
            &[
                "--env",
                id,
                "--total-steps",
                "16384",
                "--set",
                "eval.final_episodes=2",
                "--set",
                "eval.episodes=2",
            ],
        );
        let summary = read_json(&run.join("summary.json"));
        assert_accounted(&summary);
        assert!(
            summary["final_eval_return_mean"].is_number(),
            "{id}: {summary:#}"
        );
    }
}
