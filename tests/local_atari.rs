//! Atari through the command a user runs: `sebulba local --env ale:Breakout`
//! (ALE's vector env) and `--env gym:ALE/Pong-v5` (Gymnasium's wrappers)
//! train briefly at their preset (CleanRL's ppo_atari settings, the Nature
//! CNN on 84x84x4 byte frames), the evaluator scores whole games, the
//! accounting balances, and the published `final.safetensors` (which says
//! its input scale, 1/255, in its metadata) gives sebulba's logits under an
//! independent NumPy forward pass.
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
use std::process::Command;
use std::time::Duration;

fn venv_with_ale() -> Option<PathBuf> {
    let venv = python_venv_or_skip()?;
    if venv.join("lib/python3.11/site-packages/ale_py").is_dir() {
        return Some(venv);
    }
    assert!(
        std::env::var_os("SEBULBA_REQUIRE_PYTHON").is_none(),
        "SEBULBA_REQUIRE_PYTHON is set but {} holds no ale_py: run scripts/python-env.sh",
        venv.display()
    );
    eprintln!(
        "SKIPPED: no ale_py in {} (run scripts/python-env.sh)",
        venv.display()
    );
    None
}

fn local_atari(name: &str, venv: &Path, id: &str) -> PathBuf {
    let dir = run_dir(name);
    let run = dir.join("run");
    let mut cmd = bin();
    cmd.args(["local", "--env", id, "--total-steps", "2048"])
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
    let Some(venv) = venv_with_ale() else {
        return;
    };
    for (name, id) in [
        ("local-atari-ale", "ale:Breakout"),
        ("local-atari-gym", "gym:ALE/Pong-v5"),
    ] {
        let run = local_atari(name, &venv, id);
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
        let bytes = std::fs::read(run.join("final.safetensors")).expect("final.safetensors");
        let spec = spec_in(&bytes);
        assert_eq!(spec.image, Some([84, 84, 4]), "{id}");
        assert_eq!(spec.input_scale, 1.0 / 255.0, "{id}");
        assert_eq!(spec.network.conv.len(), 3, "{id}: the Nature CNN");
        numpy_agrees(&run, &spec, &bytes);
    }
}

/// Random frames through sebulba's forward pass and NumPy's.
fn numpy_agrees(run: &Path, spec: &ModelSpec, bytes: &[u8]) {
    let Some(python) = tools_python_or_skip("numpy") else {
        return;
    };
    let policy = FusedPolicy::from_safetensors(&spec.arch(), bytes).expect("the file");
    let (d, n) = (spec.obs_dim, 6);
    let mut rng = StdRng::seed_from_u64(5);
    let obs: Vec<f32> = (0..n * d)
        .map(|_| f32::from(rng.random_range(0u8..=255)))
        .collect();
    let logits = policy.head(&obs, n);
    let case = serde_json::json!({
        "image": spec.image,
        "conv": spec.network.conv.iter().map(|l| [l.channels, l.kernel, l.stride, l.padding]).collect::<Vec<_>>(),
        "activation": spec.network.activation.as_str(),
        "obs": obs.chunks(d).collect::<Vec<_>>(),
        "logits": logits.chunks(spec.head_dim()).collect::<Vec<_>>(),
    });
    let case_path = run.join("numpy-case.json");
    std::fs::write(&case_path, case.to_string()).expect("writing the case");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/numpy_forward.py");
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
    assert!(scale > 1e-4, "the logits are all near zero: {v}");
    assert!(
        diff < 1e-4 * (1.0 + scale),
        "NumPy's logits differ from sebulba's: {v}"
    );
}
