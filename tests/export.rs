//! `sebulba export` the way a user runs it: a short local run of each
//! network kind (an MLP with two torsos, one shared torso with an
//! observation normaliser, MinAtar's convolutions, the IMPALA ResNet, an
//! LSTM and a GRU core, a box action space), exported as `torch` and as
//! `onnx`, then loaded by PyTorch from the exported directory alone
//! (`sebulba_policy.py`) and run by onnxruntime (`check_onnx.py`), whose
//! outputs must be sebulba's for the same observations, state carried from
//! step to step. Files that are not a run's weights are refused, naming
//! what is wrong.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A short local run of `env` with `sets`, exported as `torch` and as
/// `onnx`; the two export directories.
fn exported(name: &str, env: &str, sets: &[&str]) -> (PathBuf, PathBuf) {
    let mut args = vec!["--env", env, "--seed", "1", "--total-steps", "4096"];
    for s in sets {
        args.extend(["--set", s]);
    }
    let run = run_local(name, &args);
    let dirs = [
        (
            "torch",
            &["model.safetensors", "network.json", "sebulba_policy.py"][..],
        ),
        ("onnx", &["policy.onnx", "check_onnx.py"][..]),
    ]
    .map(|(format, files)| {
        let text = export(&run, format);
        let dir = run.join(format!("export-{format}"));
        for f in files.iter().chain(&["check.safetensors"]) {
            assert!(dir.join(f).is_file(), "no {f} in {}: {text}", dir.display());
        }
        dir
    });
    let [torch, onnx] = dirs;
    (torch, onnx)
}

/// `sebulba export --format FORMAT PATH`, which must succeed: what it printed.
fn export(path: &Path, format: &str) -> String {
    let out = bin()
        .args(["export", "--format", format])
        .arg(path)
        .output()
        .expect("running sebulba export");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "export failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Both exports of a run checked against sebulba's outputs: PyTorch's
/// module and onnxruntime's session.
fn check_both((torch, onnx): &(PathBuf, PathBuf)) {
    self_check(torch, "torch", "sebulba_policy.py");
    self_check(onnx, "onnxruntime", "check_onnx.py");
}

/// `python SCRIPT DIR` in the tools venv (skipped, saying so, without
/// `module` outside CI): the export's outputs against sebulba's, within
/// the script's tolerance.
fn self_check(dir: &Path, module: &str, script: &str) {
    let Some(python) = tools_python_or_skip(module) else {
        return;
    };
    let out = Command::new(python)
        .arg(dir.join(script))
        .arg(dir)
        .output()
        .expect("running the check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script}: the export's outputs are not sebulba's: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}: {}", dir.display(), stdout.trim());
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("its JSON line");
    assert!(
        v["scale"].as_f64().expect("scale") > 1e-3,
        "outputs near zero: {v}"
    );
}

/// Python with the exported directory importable: runs `code` and returns
/// its last line.
fn torch_run(dir: &Path, code: &str) -> Option<String> {
    let python = tools_python_or_skip("torch")?;
    let script = format!(
        "import sys, torch\nsys.path.insert(0, {:?})\nimport sebulba_policy\npolicy = sebulba_policy.load({:?})\n{code}",
        dir.display().to_string(),
        dir.display().to_string()
    );
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .output()
        .expect("running python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.lines().last().unwrap_or_default().to_string())
}

#[test]
fn mlps_with_two_torsos_or_one_shared_and_normalised_run_in_torch_and_onnxruntime() {
    let both = exported("export-mlp", "CartPole-v1", &[]);
    check_both(&both);
    let dir = both.0;
    // The module's state dict is exactly the exported file's (strict load),
    // and the mode of the distribution is an action of the space.
    let line = torch_run(
        &dir,
        "head, value, state = policy(torch.zeros(4, 4))\n\
         print(len(policy.state_dict()), policy.act(head).tolist(), tuple(value.shape), tuple(state.shape))",
    );
    if let Some(line) = line {
        let actions = act_of(&line);
        assert_eq!(line, format!("12 {actions} (4,) (4, 0)"));
    }
    check_both(&exported(
        "export-shared",
        "CartPole-v1",
        &[
            "network.shared_torso=true",
            "network.obs_norm=true",
            "network.activation=relu",
        ],
    ));
}

/// The action list printed in `line` (whatever the policy chose), checked
/// to hold CartPole's actions only.
fn act_of(line: &str) -> String {
    let start = line.find('[').expect("a list");
    let end = line.find(']').expect("a list");
    let list = &line[start..=end];
    assert!(
        list[1..list.len() - 1]
            .split(", ")
            .all(|a| a == "0" || a == "1"),
        "not CartPole's actions: {line}"
    );
    list.to_string()
}

#[test]
fn convolutions_and_the_impala_resnet_run_in_torch_and_onnxruntime() {
    let minatar = exported("export-minatar", "MinAtar/Breakout-v1", &[]);
    check_both(&minatar);
    check_both(&bytes_scaled(&minatar.0));
    check_both(&exported(
        "export-impala",
        "MinAtar/Breakout-v1",
        &[
            "network.conv=[]",
            "network.stacks=[{channels=8},{channels=8,blocks=1}]",
            "network.hidden=[32]",
        ],
    ));
}

#[test]
fn lstm_and_gru_cores_carry_their_state_in_torch_and_onnxruntime() {
    check_both(&exported("export-lstm", "CartPoleNoVel-v1", &[]));
    check_both(&exported(
        "export-gru",
        "CartPoleNoVel-v1",
        &["network.core=gru", "network.core_size=32"],
    ));
}

#[test]
fn a_box_action_space_exports_its_means_and_stds() {
    let both = exported("export-box", "Pendulum-v1", &[]);
    check_both(&both);
    let dir = both.0;
    // Pendulum's torque lies in [-2, 2]: the mode is squashed into it.
    if let Some(line) = torch_run(
        &dir,
        "head, value, _ = policy(torch.randn(8, 3) * 5)\n\
         a = policy.act(head)\n\
         print(tuple(head.shape), tuple(a.shape), bool((a.abs() <= 2).all()))",
    ) {
        assert_eq!(line, "(8, 2) (8, 1) True");
    }
}

#[test]
fn what_is_not_a_runs_weights_is_refused_by_name() {
    let dir = run_dir("export-refused");
    let refused = |path: &Path| {
        let out = bin().arg("export").arg(path).output().expect("export");
        assert!(!out.status.success(), "{} was exported", path.display());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = refused(&dir);
    assert!(err.contains("no final.safetensors"), "{err}");
    let file = dir.join("random.safetensors");
    std::fs::write(&file, b"not a safetensors file").expect("write");
    let err = refused(&file);
    assert!(err.contains("not a safetensors file"), "{err}");
    // A valid safetensors file that no sebulba run wrote.
    let bytes = {
        let data = [0u8; 8];
        let view =
            safetensors::tensor::TensorView::new(safetensors::tensor::Dtype::F32, vec![2], &data)
                .expect("view");
        safetensors::serialize([("w", view)], None).expect("serialize")
    };
    std::fs::write(&file, bytes).expect("write");
    let err = refused(&file);
    assert!(err.contains("sebulba.model_spec"), "{err}");
    let err = refused(&dir.join("missing.safetensors"));
    assert!(
        err.contains("neither a run directory nor a weights file"),
        "{err}"
    );
}

/// The weights file of `torch_dir`'s run with an Atari frame's input scale
/// (1/255: the network reads bytes) in its description, exported from the
/// file itself as `torch` and `onnx`: the two directories, which must then
/// scale their input as sebulba does.
fn bytes_scaled(torch_dir: &Path) -> (PathBuf, PathBuf) {
    let run = torch_dir.parent().expect("the run directory");
    let bytes = std::fs::read(run.join("final.safetensors")).expect("final.safetensors");
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).expect("header");
    let mut metadata = header.metadata().clone().expect("metadata");
    let spec = metadata.get_mut("sebulba.model_spec").expect("model spec");
    let mut json: serde_json::Value = serde_json::from_str(spec).expect("JSON");
    json["input_scale"] = serde_json::json!(1.0f32 / 255.0);
    *spec = json.to_string();
    let file = safetensors::SafeTensors::deserialize(&bytes).expect("tensors");
    let scaled = safetensors::serialize(file.tensors(), Some(metadata)).expect("serialize");
    let path = run.join("scaled.safetensors");
    std::fs::write(&path, scaled).expect("write");
    let [torch, onnx] = ["torch", "onnx"].map(|format| {
        export(&path, format);
        run.join(format!("scaled-{format}"))
    });
    let network = read_json(&torch.join("network.json"));
    assert_eq!(
        network["input_scale"].as_f64(),
        Some(f64::from(1.0f32 / 255.0))
    );
    (torch, onnx)
}
