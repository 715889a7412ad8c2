//! The GPU machine's script (`scripts/device-check.sh`) in its CPU dry run,
//! so that it cannot rot while no GPU is at hand: run as the GPU machine
//! runs it (the script itself, the binary unpacked from a pack's
//! `sebulba.xz`, as `scripts/device-pack.sh` leaves it), every step runs on
//! the binary under test with burn on `cpu` where the GPU run puts `cuda:0`, and
//! writes the figures the note will quote (training too, with `auto`
//! devices, which choose the CPU here and say why). And `bench agree`'s verdict can
//! fail: at a tolerance of zero the two engines (which add in different
//! orders) disagree, and the command says so with a non-zero exit.

mod common;

use common::{bin, read_json, run_dir};
use std::process::Command;

#[test]
fn the_device_script_runs_every_step_on_the_cpu() {
    let dir = run_dir("device-check");
    let root = env!("CARGO_MANIFEST_DIR");
    let pack = pack_of_the_binary(&dir);
    let out = Command::new(format!("{root}/scripts/device-check.sh"))
        .arg("--dry-run")
        .env_remove("SEBULBA")
        .env("PACK", &pack)
        .env("OUT", &dir)
        .env("PEERS", format!("{root}/../shared/bench"))
        .output()
        .expect("scripts/device-check.sh, executable as the GPU machine runs it");
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap_or_default();
    assert!(out.status.success(), "{out:?}\n{summary}");
    assert!(summary.contains("device cpu dry_run 1"), "{summary}");
    let unpacked = format!("(from {})", pack.join("sebulba.xz").display());
    assert!(summary.contains(&unpacked), "{summary}");
    for net in ["mlp", "nature", "minatar"] {
        assert!(
            summary.contains(&format!("agree {net}: agrees")),
            "{summary}"
        );
        let a = read_json(&dir.join(format!("agree-{net}.json")));
        assert_eq!(a["agrees"], true, "{a}");
        assert_eq!(a["fused"]["engine"], "fused", "{a}");
        assert_eq!(a["burn"]["engine"], "burn", "{a}");
        let moved = a["moved"].as_f64().expect("moved");
        assert!(moved > 0.0, "{a}");
        assert!(a["relative_diff"].as_f64().expect("relative_diff") <= 0.02);
        // On the CPU the products are f32 and the tolerance the one asked
        // for; TF32's rounding (2^-11) parts the updates further than f32's.
        assert_eq!(a["precision"], "f32", "{a}");
        assert_eq!(a["tolerance"], a["tolerance_asked"], "{a}");
        let (ulp, tf32) = (a["rounding_floor"].as_f64(), a["tf32_floor"].as_f64());
        assert!(
            matches!((ulp, tf32), (Some(u), Some(t)) if t > u && t.is_finite()),
            "{a}"
        );
    }
    let conv = read_json(&dir.join("agree-nature.json"))["conv"].clone();
    assert_eq!(
        conv.as_array().map(Vec::len),
        Some(3),
        "the Nature CNN's three layers"
    );
    for (net, samples) in [("mlp", 256), ("nature", 64), ("minatar", 256)] {
        let l = read_json(&dir.join(format!("learner-{net}-{samples}.json")));
        let sgps = l["sample_grads_per_second"].as_f64().expect("figure");
        assert!(sgps.is_finite() && sgps > 0.0, "{l}");
        assert_eq!(l["devices"][0], "cpu", "{l}");
    }
    assert!(summary.contains("== 3. peer"), "{summary}");
    // Training with `--learner-devices auto`: no CUDA in this binary, so the
    // CPU, and the run directory says why.
    let train = read_json(&dir.join("train").join("summary.json"));
    assert_eq!(train["learner_devices"][0], "cpu", "{train}");
    let why = train["device_choice"].as_str().expect("device_choice");
    assert!(
        why.starts_with("auto: cpu (") && why.contains("--features cuda"),
        "{why}"
    );
    assert!(
        train["env_steps"].as_u64().expect("env_steps") >= 8192,
        "{train}"
    );
    assert!(
        summary.contains("train: learner devices ['cpu']"),
        "{summary}"
    );
    assert!(summary.ends_with("device-check: done\n"), "{summary}");
}

/// A pack as the GPU machine receives it, holding the binary under test
/// alone (the dry run trains on MinAtar: no Python runtime needed), as
/// `sebulba.xz` (`xz -0`: the format matters here, not the size).
fn pack_of_the_binary(dir: &std::path::Path) -> std::path::PathBuf {
    let pack = dir.join("pack");
    std::fs::create_dir_all(&pack).expect("the pack folder");
    let xz = std::fs::File::create(pack.join("sebulba.xz")).expect("sebulba.xz");
    let status = Command::new("xz")
        .args(["-0", "-T0", "-c", env!("CARGO_BIN_EXE_sebulba")])
        .stdout(xz)
        .status()
        .expect("xz (xz-utils), which scripts/device-pack.sh needs too");
    assert!(status.success(), "xz: {status}");
    pack
}

#[test]
fn engines_that_differ_at_all_disagree_at_tolerance_zero() {
    let dir = run_dir("agree-zero");
    let json = dir.join("agree.json");
    let out = bin()
        .args(["bench", "agree", "--env", "CartPole-v1", "--samples", "128"])
        .args(["--tolerance", "0", "--json"])
        .arg(&json)
        .output()
        .expect("sebulba bench agree");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr.contains("disagree"), "{stderr}");
    let a = read_json(&json);
    assert_eq!(a["agrees"], false, "{a}");
    assert!(a["max_param_diff"].as_f64().expect("diff") > 0.0, "{a}");
}
