//! A turn-based game in the compose cluster, started as the README shows:
//! `SEBULBA_ENV=BigTwo-v1` and nothing else (the preset), two actor
//! containers stepping four-seat games with the overlap and per-seat
//! credit, the learner's per-player GAE, and the evaluator's matches
//! (1,000 games against random, greedy and an earlier version) reaching
//! `summary.json` through the param-server.
//!
//! Needs Docker with Compose (as the other compose tests: skipped, saying
//! so, outside CI).

mod common;
use common::compose::*;
use common::*;
use std::path::Path;
use std::time::Instant;

#[test]
fn compose_cluster_trains_big_two() {
    let Some(compose) = compose_or_skip() else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tag = format!("sebulba:games-{}", std::process::id());
    let t0 = Instant::now();
    let _image = build_image(&tag);
    let dir = run_dir("compose-games");
    let cluster = Cluster {
        compose,
        project: format!("sebulba-games-{}", std::process::id()),
        files: vec![root.join("deploy/docker-compose.yml")],
        env_file: None,
        env: vec![
            ("SEBULBA_IMAGE", tag.clone()),
            ("SEBULBA_ENV", "BigTwo-v1".into()),
            ("SEBULBA_TOTAL_STEPS", "16384".into()),
            ("SEBULBA_SEED", "4".into()),
            ("SEBULBA_METRICS_HOLD_SECS", "0".into()),
        ],
    };
    run(&mut cluster.cmd(&["up", "-d", "--scale", "actor=2"]));
    let summary = cluster.finished_summary(&dir);
    assert_eq!(summary["env_id"], "BigTwo-v1");
    assert!(summary["env_steps"].as_u64().expect("env_steps") >= 16_384);
    assert_accounted(&summary);
    assert_eq!(summary["batches"]["rejected"], 0, "{summary}");
    let matches = summary["final_eval_matches"]
        .as_array()
        .expect("the final version's matches");
    let names: Vec<&str> = matches
        .iter()
        .filter_map(|m| m["opponent"].as_str())
        .collect();
    assert_eq!(names[..3], ["random", "greedy", "planner"], "{names:?}");
    for m in matches {
        assert_eq!(m["games"], 1000, "{m}");
        let rate = m["win_rate"].as_f64().expect("win rate");
        assert!((0.0..=1.0).contains(&rate), "{m}");
    }
    eprintln!(
        "compose games test took {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
