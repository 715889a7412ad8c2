//! The independent NumPy forward pass of a published `final.safetensors`
//! (`tests/numpy_forward.py`, PyTorch's conventions) against sebulba's own
//! logits for the same observations.

use sebulba_core::model::ModelSpec;
use std::path::Path;
use std::process::Command;

/// Runs the NumPy pass of `run`'s `final.safetensors` on `obs` (rows of
/// `spec.obs_dim`) and asserts its logits are sebulba's `logits` (skipped,
/// saying so, without the tools venv outside CI).
pub fn assert_numpy_logits(run: &Path, spec: &ModelSpec, obs: &[f32], logits: &[f32]) {
    assert_numpy_sequence(run, spec, obs, (1, &[]), logits);
}

/// [`assert_numpy_logits`] of rows that are steps of `envs` envs,
/// time-major, each episode starting where `starts` says (`[rows]`; empty:
/// none): a recurrent core's state carried from row to row.
pub fn assert_numpy_sequence(
    run: &Path,
    spec: &ModelSpec,
    obs: &[f32],
    (envs, starts): (usize, &[u8]),
    logits: &[f32],
) {
    check_sequence(run, spec, obs, (envs, starts), logits, false);
}

/// [`assert_numpy_sequence`] with the core run by PyTorch itself: a
/// `torch.nn.LSTM` (or `nn.GRU`) that takes the published core's tensors
/// by `load_state_dict` (skipped, saying so, without torch in the tools
/// venv outside CI).
pub fn assert_torch_sequence(
    run: &Path,
    spec: &ModelSpec,
    obs: &[f32],
    (envs, starts): (usize, &[u8]),
    logits: &[f32],
) {
    check_sequence(run, spec, obs, (envs, starts), logits, true);
}

fn check_sequence(
    run: &Path,
    spec: &ModelSpec,
    obs: &[f32],
    (envs, starts): (usize, &[u8]),
    logits: &[f32],
    torch: bool,
) {
    let needs = if torch { "torch" } else { "numpy" };
    let Some(python) = super::tools_python_or_skip(needs) else {
        return;
    };
    let n = &spec.network;
    let case = serde_json::json!({
        "image": spec.image,
        "conv": n.conv.iter().map(|l| [l.channels, l.kernel, l.stride, l.padding]).collect::<Vec<_>>(),
        "stacks": n.stacks.iter().map(|s| [s.channels, s.blocks]).collect::<Vec<_>>(),
        "activation": n.activation.as_str(),
        "obs": obs.chunks(spec.obs_dim).collect::<Vec<_>>(),
        "logits": logits.chunks(spec.head_dim()).collect::<Vec<_>>(),
        "core": n.core.cell().map(|c| c.as_str()),
        "envs": envs,
        "starts": match starts {
            [] => vec![0; obs.len() / spec.obs_dim],
            s => s.to_vec(),
        },
        "torch": torch,
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
    eprintln!("{needs}: {v}");
    let diff = v["max_abs_diff"].as_f64().expect("a difference");
    let scale = v["max_abs_logit"].as_f64().expect("a scale");
    assert!(scale > 1e-4, "the logits are all near zero: {v}");
    assert!(
        diff < 1e-4 * (1.0 + scale),
        "NumPy's logits differ from sebulba's: {v}"
    );
}
