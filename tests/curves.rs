//! Learning curves through the paths a user takes: the TensorBoard event
//! files of real runs, read back with the `tensorboard` package's own loader,
//! hold exactly what `metrics.jsonl` and `eval.jsonl` say; `sebulba plot`
//! draws those runs as a PNG.

mod common;

use common::{bin, read_jsonl, run_local, tools_python_or_skip};
use std::collections::BTreeMap;
use std::path::Path;

type Scalars = BTreeMap<String, Vec<(i64, f64)>>;

/// TensorBoard's view of a run directory: run → tag → (step, value).
fn tensorboard_scalars(python: &Path, run: &Path) -> BTreeMap<String, Scalars> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/tensorboard_scalars.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(run)
        .output()
        .expect("run the tensorboard reader");
    assert!(
        out.status.success(),
        "tensorboard reader: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("reader's JSON");
    let mut runs = BTreeMap::new();
    for (run, tags) in v.as_object().expect("runs") {
        let mut scalars = Scalars::new();
        for (tag, points) in tags.as_object().expect("tags") {
            let points = points
                .as_array()
                .expect("points")
                .iter()
                .map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap()))
                .collect();
            scalars.insert(tag.clone(), points);
        }
        runs.insert(run.clone(), scalars);
    }
    runs
}

/// Every number of every line (nested objects joined with `/`) is the event
/// file's scalar `prefix/field` at step `env_steps`, in order, as an f32.
fn assert_mirrors(lines: &[serde_json::Value], scalars: &Scalars, prefix: &str) {
    let mut expected: Scalars = BTreeMap::new();
    for line in lines {
        let step = line["env_steps"].as_i64().expect("env_steps");
        let mut fields = Vec::new();
        flatten(prefix, line, &mut fields);
        for (tag, x) in fields {
            expected.entry(tag).or_default().push((step, x));
        }
    }
    assert_eq!(
        expected.keys().collect::<Vec<_>>(),
        scalars.keys().collect::<Vec<_>>(),
        "tags"
    );
    for (tag, want) in &expected {
        let got = &scalars[tag];
        assert_eq!(got.len(), want.len(), "{tag}: points");
        for ((gs, gv), (ws, wv)) in got.iter().zip(want) {
            assert_eq!(gs, ws, "{tag}: step");
            assert_eq!(*gv, f64::from(*wv as f32), "{tag} at step {ws}");
        }
    }
}

fn flatten(path: &str, v: &serde_json::Value, out: &mut Vec<(String, f64)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                flatten(&format!("{path}/{k}"), v, out);
            }
        }
        serde_json::Value::Number(n) => out.push((path.to_string(), n.as_f64().unwrap())),
        serde_json::Value::Bool(b) => out.push((path.to_string(), f64::from(u8::from(*b)))),
        _ => {}
    }
}

#[test]
fn tensorboard_events_mirror_the_json_lines_and_plot_draws_the_runs() {
    let runs: Vec<_> = ["1", "2"]
        .iter()
        .map(|seed| {
            run_local(
                &format!("curves-{seed}"),
                &[
                    "--env",
                    "CartPole-v1",
                    "--seed",
                    seed,
                    "--total-steps",
                    "12000",
                ],
            )
        })
        .collect();
    if let Some(python) = tools_python_or_skip("tensorboard") {
        for run in &runs {
            let tb = tensorboard_scalars(&python, run);
            let metrics = read_jsonl(&run.join("metrics.jsonl"));
            let evals = read_jsonl(&run.join("eval.jsonl"));
            assert!(!metrics.is_empty() && !evals.is_empty());
            // The third run holds the videos: pictures, no scalars.
            assert_eq!(
                tb.keys().collect::<Vec<_>>(),
                [
                    "tensorboard/evaluator",
                    "tensorboard/learner",
                    "tensorboard/videos"
                ]
            );
            assert!(tb["tensorboard/videos"].is_empty());
            assert_mirrors(&metrics, &tb["tensorboard/learner"], "train");
            assert_mirrors(&evals, &tb["tensorboard/evaluator"], "eval");
        }
    }
    plot_draws_both_panels(&runs);
}

/// `sebulba plot` of two seeds: a 1500×600 PNG with the setting's colour in
/// both panels; a directory that is not a run fails, naming it.
fn plot_draws_both_panels(runs: &[std::path::PathBuf]) {
    let png_path = runs[0].parent().unwrap().join("curves.png");
    let out = bin()
        .arg("plot")
        .args(runs)
        .arg("--out")
        .arg(&png_path)
        .output()
        .expect("run sebulba plot");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "plot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("CartPole-v1 (2 seeds)"), "{text}");
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).expect("the PNG"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("PNG pixels");
    assert_eq!((info.width, info.height), (1500, 600));
    let channels = info.line_size / info.width as usize;
    // The first setting's line colour (plot/draw.rs), left and right of centre.
    let mut seen = [0usize; 2];
    for (i, px) in buf.chunks(channels).enumerate() {
        if px[..3] == [31, 119, 180] {
            seen[usize::from(i % 1500 >= 750)] += 1;
        }
    }
    assert!(
        seen[0] > 200 && seen[1] > 200,
        "curve pixels per panel: {seen:?}"
    );

    let out = bin()
        .args(["plot", "/nonexistent-run", "--out"])
        .arg(&png_path)
        .output()
        .expect("run sebulba plot");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("/nonexistent-run/config.toml"), "{err}");
}
