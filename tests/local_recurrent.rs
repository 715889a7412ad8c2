//! A recurrent policy through the user's path: `sebulba local --env
//! CartPoleNoVel-v1` (CartPole without its velocities; the preset's LSTM
//! remembers them) solves it with no flags, the accounting balances, and
//! the published `final.safetensors` gives the logits sebulba acts with,
//! step after step with each env's state, under an independent NumPy pass
//! of PyTorch's LSTM (`tests/numpy_forward.py`).

mod common;
use common::*;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_core::config::RunConfig;
use sebulba_core::model::ModelSpec;
use sebulba_envs::{Action, make_env};
use sebulba_fused::FusedPolicy;

const ID: &str = "CartPoleNoVel-v1";

#[test]
fn local_mode_solves_cartpole_without_velocities_with_its_lstm() {
    let run = run_local("local-novel", &["--env", ID, "--seed", "1"]);
    let summary = read_json(&run.join("summary.json"));
    eprintln!("summary: {summary:#}");
    assert_eq!(summary["env_id"], ID);
    assert_accounted(&summary);
    assert_eq!(
        summary["batches"]["rejected"], 0,
        "a healthy run rejects nothing"
    );
    let final_return = summary["final_eval_return_mean"]
        .as_f64()
        .expect("final_eval_return_mean");
    assert!(
        final_return >= 475.0,
        "final evaluation {final_return} < 475"
    );

    // The published policy over 4 envs' episodes, acted step by step.
    let cfg = RunConfig::preset(ID).expect("preset");
    let spec = ModelSpec::new(&sebulba_envs::env_spec(ID).unwrap(), &cfg.network).expect("spec");
    let bytes = std::fs::read(run.join("final.safetensors")).expect("final.safetensors");
    let policy = FusedPolicy::from_safetensors(&spec.arch(), &bytes).expect("the file");
    let (d, envs, steps) = (spec.obs_dim, 4, 40);
    let mut rng = StdRng::seed_from_u64(3);
    let mut env: Vec<_> = (0..envs).map(|e| make_env(ID, e as u64).unwrap()).collect();
    let mut now = vec![0.0f32; envs * d];
    for (e, env) in env.iter_mut().enumerate() {
        env.reset(&mut now[e * d..(e + 1) * d]);
    }
    let (mut obs, mut starts, mut logits) = (Vec::new(), Vec::new(), Vec::new());
    let mut state = policy.state(envs);
    let mut ended = vec![false; envs];
    for _ in 0..steps {
        state.reset_ended(ended.iter().copied());
        starts.extend(ended.iter().map(|&x| u8::from(x)));
        obs.extend_from_slice(&now);
        logits.extend(policy.step(&now, &mut state, None));
        for (e, env) in env.iter_mut().enumerate() {
            let row = &mut now[e * d..(e + 1) * d];
            // A random push one step in four, so episodes end inside.
            let a = if rng.random_ratio(1, 4) {
                rng.random_range(0..2)
            } else {
                e % 2
            };
            ended[e] = env
                .step(Action::Discrete(a), row)
                .expect("a step")
                .terminated;
            if ended[e] {
                env.reset(row);
            }
        }
    }
    assert!(starts.contains(&1), "episodes start inside the sequence");
    numpy::assert_numpy_sequence(&run, &spec, &obs, (envs, &starts), &logits);
}
