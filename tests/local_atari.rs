//! Atari through the command a user runs: `sebulba local --env ale:Breakout`
//! (ALE's vector env) and `--env gym:ALE/Pong-v5` (Gymnasium's wrappers)
//! train briefly at their preset (CleanRL's ppo_atari settings, the Nature
//! CNN on 84x84x4 byte frames), the evaluator scores whole games, the
//! accounting balances, and the published `final.safetensors` (which says
//! its input scale, 1/255, in its metadata) gives sebulba's logits under an
//! independent NumPy forward pass. The preset's variant with the IMPALA
//! ResNet (`configs/atari-impala.toml`) goes the same way.
//!
//! Evaluation games are capped at 2,000 frames (`env.kwargs`) so that an
//! untrained greedy policy that never serves cannot hold a game for ALE's
//! 108,000. They need the `python` feature and a venv with ale-py
//! (scripts/python-env.sh); skipped without one, saying so, and failed
//! instead under `SEBULBA_REQUIRE_PYTHON=1` (CI).
#![cfg(feature = "python")]

mod common;
use common::*;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_core::model::ModelSpec;
use sebulba_fused::FusedPolicy;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn local_atari(name: &str, venv: &Path, id: &str, extra: &[&str]) -> PathBuf {
    let dir = run_dir(name);
    let run = dir.join("run");
    let mut cmd = bin();
    cmd.args(["local", "--env", id, "--total-steps", "2048"])
        .args(extra)
        .args(["--set", "env.kwargs.max_num_frames_per_episode=2000"])
        .args(["--set", "eval.interval=1", "--set", "eval.episodes=2"])
        .args(["--set", "eval.final_episodes=3"])
        .arg("--run-dir")
        .arg(&run)
        .env("VIRTUAL_ENV", venv)
        .env("RUST_BACKTRACE", "0");
    let mut p = Proc::spawn("local", cmd, &dir);
    let status = p
        .wait(Duration::from_secs(900))
        .unwrap_or_else(|| panic!("{id}: no end in 15 min; log:\n{}", p.log_text()));
    assert!(status.success(), "{id}: {status}; log:\n{}", p.log_text());
    run
}

/// The model spec a published file carries in its metadata.
fn spec_in(bytes: &[u8]) -> ModelSpec {
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("a header length")) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).expect("a header");
    let spec = header["__metadata__"]["sebulba.model_spec"]
        .as_str()
        .expect("the model spec in the metadata");
    serde_json::from_str(spec).expect("a model spec")
}

#[test]
fn local_mode_trains_atari_on_both_paths_and_numpy_reads_its_weights() {
    let Some(venv) = python_venv_with_or_skip("ale_py") else {
        return;
    };
    for (name, id) in [
        ("local-atari-ale", "ale:Breakout"),
        ("local-atari-gym", "gym:ALE/Pong-v5"),
    ] {
        let run = local_atari(name, &venv, id, &[]);
        let summary = read_json(&run.join("summary.json"));
        eprintln!("{id}: {summary:#}");
        assert_accounted(&summary);
        assert_eq!(
            summary["updates"].as_u64(),
            Some(2),
            "{id}: 2 updates of 1,024 steps"
        );
        let score = summary["final_eval_return_mean"]
            .as_f64()
            .expect("a final score");
        // Whole games at the raw score: Pong's run from -21 to 21.
        assert!((-21.0..=864.0).contains(&score), "{id}: {score}");
        assert_curves(&run, id);
        let bytes = std::fs::read(run.join("final.safetensors")).expect("final.safetensors");
        let spec = spec_in(&bytes);
        assert_eq!(spec.image, Some([84, 84, 4]), "{id}");
        assert_eq!(spec.input_scale, 1.0 / 255.0, "{id}");
        assert_eq!(spec.network.conv.len(), 3, "{id}: the Nature CNN");
        numpy_agrees(&run, &spec, &bytes);
    }
}

/// The Atari preset's variant with the IMPALA ResNet
/// (`configs/atari-impala.toml`) through the same command: it trains, and
/// NumPy's forward pass of its stacks (convolutions, max-pools, residual
/// blocks) gives sebulba's logits.
#[test]
fn local_mode_trains_atari_with_the_impala_resnet() {
    let Some(venv) = python_venv_with_or_skip("ale_py") else {
        return;
    };
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/atari-impala.toml");
    let config = config.to_str().expect("a UTF-8 path");
    let id = "ale:Breakout";
    let run = local_atari("local-atari-impala", &venv, id, &["--config", config]);
    let summary = read_json(&run.join("summary.json"));
    eprintln!("{id} (IMPALA): {summary:#}");
    assert_accounted(&summary);
    assert_eq!(
        summary["updates"].as_u64(),
        Some(2),
        "2 updates of 1,024 steps"
    );
    assert!(summary["final_eval_return_mean"].is_number(), "{summary:#}");
    let bytes = std::fs::read(run.join("final.safetensors")).expect("final.safetensors");
    let spec = spec_in(&bytes);
    let stacks: Vec<(usize, usize)> = spec
        .network
        .stacks
        .iter()
        .map(|s| (s.channels, s.blocks))
        .collect();
    assert_eq!(stacks, [(16, 2), (32, 2), (32, 2)], "the IMPALA ResNet");
    assert!(spec.network.conv.is_empty(), "no Nature CNN before it");
    numpy_agrees(&run, &spec, &bytes);
}

/// CleanRL's `ppo_atari_lstm.py` settings (`configs/atari-lstm.toml`: one
/// frame per observation, the Nature CNN, an LSTM of 128) through the same
/// command: each env's rollout trains as one sequence, and NumPy reads the
/// published convolutions and core step after step as sebulba acts.
#[test]
fn local_mode_trains_atari_on_one_frame_with_an_lstm() {
    let Some(venv) = python_venv_with_or_skip("ale_py") else {
        return;
    };
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/atari-lstm.toml");
    let config = config.to_str().expect("a UTF-8 path");
    let id = "ale:Breakout";
    let run = local_atari("local-atari-lstm", &venv, id, &["--config", config]);
    let summary = read_json(&run.join("summary.json"));
    eprintln!("{id} (LSTM): {summary:#}");
    assert_accounted(&summary);
    assert_eq!(
        summary["updates"].as_u64(),
        Some(2),
        "2 updates of 1,024 steps"
    );
    assert_eq!(summary["batches"]["rejected"], 0, "{summary:#}");
    assert!(summary["final_eval_return_mean"].is_number(), "{summary:#}");
    let bytes = std::fs::read(run.join("final.safetensors")).expect("final.safetensors");
    let spec = spec_in(&bytes);
    assert_eq!(spec.image, Some([84, 84, 1]), "one frame");
    assert_eq!(spec.network.core_size, 128);
    assert_eq!(spec.arch().state_width(), 2 * 128, "h and c of one core");
    let policy = FusedPolicy::from_safetensors(&spec.arch(), &bytes).expect("the file");
    let (d, envs) = (spec.obs_dim, 3);
    let mut rng = StdRng::seed_from_u64(6);
    let mut state = policy.state(envs);
    let (mut obs, mut starts, mut logits) = (Vec::new(), Vec::new(), Vec::new());
    for t in 0..5 {
        let now: Vec<f32> = (0..envs * d)
            .map(|_| f32::from(rng.random_range(0u8..=255)))
            .collect();
        // Env 1's episode starts again at step 3.
        let ended = [false, t == 3, false];
        state.reset_ended(ended);
        starts.extend(ended.map(u8::from));
        logits.extend(policy.step(&now, &mut state, None));
        obs.extend(now);
    }
    numpy::assert_numpy_sequence(&run, &spec, &obs, (envs, &starts), &logits);
}

/// Random frames through sebulba's forward pass and NumPy's.
fn numpy_agrees(run: &Path, spec: &ModelSpec, bytes: &[u8]) {
    let policy = FusedPolicy::from_safetensors(&spec.arch(), bytes).expect("the file");
    let (d, n) = (spec.obs_dim, 6);
    let mut rng = StdRng::seed_from_u64(5);
    let obs: Vec<f32> = (0..n * d)
        .map(|_| f32::from(rng.random_range(0u8..=255)))
        .collect();
    let logits = policy.step(&obs, &mut policy.state(n), None);
    numpy::assert_numpy_logits(run, spec, &obs, &logits);
}
