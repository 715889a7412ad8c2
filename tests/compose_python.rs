//! A Gymnasium env in the compose cluster: the image built offline
//! (`deploy/build-image.sh` with `SEBULBA_IMAGE_VENV`) carries the Python
//! standard library and the venv's packages; `SEBULBA_ENV=gym:CartPole-v1`
//! trains with two actor containers, each with its own interpreter (150k
//! steps: long enough that the second container joins before the end), and the
//! evaluator scores the final version in its own.
//!
//! Needs Docker with Compose (as the other compose tests: skipped, saying so,
//! outside CI) and the venv of the Python tests (tests/python.rs).
#![cfg(feature = "python")]

mod common;
use common::compose::*;
use common::*;
use std::path::Path;
use std::time::Instant;

#[test]
fn compose_cluster_trains_a_gymnasium_env() {
    let Some(compose) = compose_or_skip() else {
        return;
    };
    let Some(venv) = python_venv_or_skip() else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tag = format!("sebulba:python-{}", std::process::id());
    let t0 = Instant::now();
    let _image = build_image_with(&tag, Some(&venv));
    eprintln!(
        "image with Python built offline in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let dir = run_dir("compose-python");
    let cluster = Cluster {
        compose,
        project: format!("sebulba-python-{}", std::process::id()),
        files: vec![root.join("deploy/docker-compose.yml")],
        env_file: None,
        env: vec![
            ("SEBULBA_IMAGE", tag.clone()),
            ("SEBULBA_ENV", "gym:CartPole-v1".into()),
            ("SEBULBA_TOTAL_STEPS", "150000".into()),
            ("SEBULBA_SEED", "2".into()),
        ],
    };
    run(&mut cluster.cmd(&["up", "-d", "--scale", "actor=2"]));
    let summary = cluster.finished_summary(&dir);
    assert_eq!(summary["env_id"], "gym:CartPole-v1");
    assert!(summary["env_steps"].as_u64().expect("env_steps") >= 150_000);
    assert_accounted(&summary);
    let per = summary["batches_per_actor"].as_object().expect("per actor");
    assert_eq!(per.len(), 2, "batches from both actor containers: {per:?}");
    // The evaluator's interpreter scored the final version.
    let final_eval = summary["final_eval_return_mean"].as_f64();
    assert!(final_eval.is_some_and(f64::is_finite), "{summary}");
    assert!(
        summary["best_eval_return_mean"].as_f64().unwrap_or(0.0) > 100.0,
        "a random policy scores about 20: {summary}"
    );
    eprintln!(
        "compose Python test took {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
