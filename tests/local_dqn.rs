//! DQN through the command a user types: the Acrobot-v1 preset is DQN
//! (`run.algorithm = dqn`), and `sebulba local --env Acrobot-v1` learns with
//! it: actors act epsilon-greedy with the rate the weights carry, the learner
//! trains from its replay memory, and the metrics say so. The preset's full
//! 100k steps take minutes; this run takes 40k, where it already swings up
//! in well under 100 steps (an untrained policy hangs for all 500).

mod common;
use common::*;

#[test]
fn local_mode_learns_acrobot_with_the_dqn_preset() {
    let run = run_local(
        "local-dqn-acrobot",
        &[
            "--env",
            "Acrobot-v1",
            "--seed",
            "1",
            "--total-steps",
            "40000",
        ],
    );
    let summary = read_json(&run.join("summary.json"));
    eprintln!("summary: {summary:#}");
    assert_eq!(summary["env_id"], "Acrobot-v1");
    let final_return = summary["final_eval_return_mean"]
        .as_f64()
        .expect("final_eval_return_mean");
    assert!(
        final_return >= -100.0,
        "final evaluation {final_return} < -100"
    );
    assert_accounted(&summary);
    assert_eq!(summary["batches"]["rejected"], 0);
    // The memory section: the replay memory holds the run's transitions
    // (Acrobot: 6 observation floats twice, an action, a reward and a flag:
    // 57 bytes), up to the buffer's size.
    let memory = &summary["memory"];
    let mib = |k: &str| {
        memory[k]
            .as_f64()
            .unwrap_or_else(|| panic!("memory.{k}: {memory}"))
    };
    let buffer = summary_config_buffer(&run);
    let stored = (summary["env_steps"].as_f64().expect("env_steps")).min(buffer);
    let transitions = mib("replay_mib") * f64::from(1u32 << 20) / 57.0;
    assert!(
        transitions <= stored + 1.0 && transitions >= 0.9 * stored,
        "replay memory of {transitions:.0} transitions for {stored} stored: {memory}"
    );
    assert!(mib("engine_mib") > 0.0, "{memory}");
    assert!(
        mib("rss_mib") <= summary["peak_rss_mib"].as_f64().expect("peak"),
        "{memory}"
    );

    let config: toml::Table = std::fs::read_to_string(run.join("config.toml"))
        .expect("config.toml")
        .parse()
        .expect("config.toml parses");
    assert_eq!(config["run"]["algorithm"].as_str(), Some("dqn"));

    let metrics = read_jsonl(&run.join("metrics.jsonl"));
    let updates = summary["updates"].as_u64().expect("updates");
    assert_eq!(metrics.len() as u64, updates, "one metrics line per update");
    for key in [
        "td_loss",
        "q_mean",
        "gradient_steps",
        "replay_size",
        "target_updates",
        "epsilon",
        "samples",
    ] {
        assert!(metrics[0].get(key).is_some(), "no `{key}`: {}", metrics[0]);
    }
    assert!(
        metrics[0].get("policy_loss").is_none(),
        "PPO's keys in a DQN line"
    );
    let num = |l: &serde_json::Value, k: &str| l[k].as_f64().expect(k);
    let last = metrics.last().expect("lines");
    // The preset's schedule: epsilon from 1 to 0.1 over the first 12% of
    // the run, a gradient step per env step, the target every 250 steps.
    assert!(num(&metrics[0], "epsilon") > 0.99, "{}", metrics[0]);
    assert!((num(last, "epsilon") - 0.1).abs() < 1e-6, "{last}");
    let steps: f64 = metrics.iter().map(|l| num(l, "gradient_steps")).sum();
    let env_steps = summary["env_steps"].as_f64().expect("env_steps");
    assert!(
        (steps - env_steps).abs() <= 128.0,
        "{steps} gradient steps for {env_steps} env steps"
    );
    assert_eq!(num(last, "target_updates"), (env_steps / 250.0).floor());
    assert_eq!(num(last, "replay_size"), env_steps.min(50_000.0));
    assert!(
        metrics.iter().all(|l| num(l, "td_loss").is_finite()),
        "a non-finite TD loss"
    );
}

/// `dqn.buffer_size` of the run, from its `config.toml`.
fn summary_config_buffer(run: &std::path::Path) -> f64 {
    let config: toml::Table = std::fs::read_to_string(run.join("config.toml"))
        .expect("config.toml")
        .parse()
        .expect("config.toml parses");
    config["dqn"]["buffer_size"]
        .as_integer()
        .expect("dqn.buffer_size") as f64
}
