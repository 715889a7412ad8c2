//! A recurrent policy through the user's path: `sebulba local --env
//! CartPoleNoVel-v1` (CartPole without its velocities; the preset's LSTM
//! remembers them) solves it with no flags, the accounting balances, and
//! the published `final.safetensors` gives the logits sebulba acts with,
//! step after step with each env's state, under an independent NumPy pass
//! of PyTorch's LSTM (`tests/numpy_forward.py`) and under `torch.nn.LSTM`
//! itself, loaded with `load_state_dict`. MinAtar's convolutions
//! with an LSTM after them, trained on `ppo.bptt` chunks whose states are
//! recomputed every epoch, learn and read the same under NumPy.

mod common;
use common::*;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_core::config::RunConfig;
use sebulba_core::model::ModelSpec;
use sebulba_envs::minatar::{MinAtar, Options};
use sebulba_envs::{Action, Env, make_env};
use sebulba_fused::FusedPolicy;

const ID: &str = "CartPoleNoVel-v1";

#[test]
fn local_mode_solves_cartpole_without_velocities_with_its_lstm() {
    // Deterministic, so that the test beside it sharing the cores cannot
    // change what it learns: 500 by 100k steps on every kernel path.
    let run = run_local(
        "local-novel",
        &[
            "--env",
            ID,
            "--seed",
            "1",
            "--set",
            "run.deterministic=true",
        ],
    );
    let summary = read_json(&run.join("summary.json"));
    eprintln!("summary: {summary:#}");
    assert_eq!(summary["env_id"], ID);
    assert_accounted(&summary);
    assert_eq!(
        summary["batches"]["rejected"], 0,
        "a healthy run rejects nothing"
    );
    let best = summary["best_eval_return_mean"]
        .as_f64()
        .expect("best_eval_return_mean");
    assert!(best >= 475.0, "best evaluation {best} < 475");
    // Its final policy keeps most of it (500 on AVX-512, 417 on the AVX2
    // and scalar paths); the feed-forward preset ends near 42.
    let final_return = summary["final_eval_return_mean"]
        .as_f64()
        .expect("final_eval_return_mean");
    assert!(
        final_return >= 300.0,
        "final evaluation {final_return} < 300"
    );

    // The published policy over 4 envs' episodes, acted step by step.
    let cfg = RunConfig::preset(ID).expect("preset");
    let spec = ModelSpec::new(&sebulba_envs::env_spec(ID).unwrap(), &cfg.network).expect("spec");
    let bytes = std::fs::read(run.join("final.safetensors")).expect("final.safetensors");
    let policy = FusedPolicy::from_safetensors(&spec.arch(), &bytes).expect("the file");
    let mut env: Vec<Box<dyn Env>> = (0..4).map(|e| make_env(ID, e as u64).unwrap()).collect();
    let mut rng = StdRng::seed_from_u64(3);
    // A random push one step in four, so episodes end inside.
    let (obs, starts, logits) = act(&policy, &mut env, 40, |e| {
        if rng.random_ratio(1, 4) {
            rng.random_range(0..2)
        } else {
            e % 2
        }
    });
    let envs = env.len();
    assert!(starts.contains(&1), "episodes start inside the sequence");
    numpy::assert_numpy_sequence(&run, &spec, &obs, (envs, &starts), &logits);
    // PyTorch's own LSTM takes the published core as it is.
    numpy::assert_torch_sequence(&run, &spec, &obs, (envs, &starts), &logits);
}

/// MinAtar's preset network with an LSTM after its dense layer, on chunks
/// of 32 of the rollout's 128 steps with their starting states recomputed
/// before every epoch: it learns well past random play (0.4; 4.2 by 164k
/// steps, seed 1), and NumPy reads the published file's convolutions and
/// core step after step as sebulba acts.
#[test]
fn minatar_with_an_lstm_on_bptt_chunks_learns_and_numpy_reads_it() {
    const MINATAR: &str = "MinAtar/Breakout-v1";
    let sets = [
        "network.core=lstm",
        "ppo.bptt=32",
        "ppo.refresh_states=true",
    ];
    let args: Vec<&str> = ["--env", MINATAR, "--seed", "1", "--total-steps", "163840"]
        .into_iter()
        .chain(["--set", "eval.final_episodes=20"])
        .chain(sets.iter().flat_map(|&s| ["--set", s]))
        .collect();
    let run = run_local("local-minatar-lstm", &args);
    let summary = read_json(&run.join("summary.json"));
    eprintln!("summary: {summary:#}");
    assert_accounted(&summary);
    let best = summary["best_eval_return_mean"]
        .as_f64()
        .expect("best eval");
    assert!(best > 2.0, "best evaluation {best} <= 2");

    let cfg = RunConfig::resolve(Some(MINATAR), None, &sets.map(String::from)).expect("config");
    let mut env: Vec<Box<MinAtar>> = (0..3)
        .map(|e| Box::new(MinAtar::new(MINATAR, Options::default(), e).expect("env")))
        .collect();
    let spec = ModelSpec::new(env[0].spec(), &cfg.network).expect("spec");
    let bytes = std::fs::read(run.join("final.safetensors")).expect("final.safetensors");
    let policy = FusedPolicy::from_safetensors(&spec.arch(), &bytes).expect("the file");
    let mut rng = StdRng::seed_from_u64(4);
    let (obs, starts, logits) = act(&policy, &mut env, 30, |_| rng.random_range(0..3));
    let envs = env.len();
    numpy::assert_numpy_sequence(&run, &spec, &obs, (envs, &starts), &logits);
}

/// Big Two in self-play with an LSTM, through `sebulba local`: four seats
/// of each game share the network, each remembering its own moves (the
/// actor's states per seat, the learner's sequences per seat, the
/// evaluator's per seat in every match). Deterministic, so the figures are
/// this seed's: 150k moves take the greedy policy from 17% to 72% against
/// three random players (the feed-forward preset's run: 45% to 79%).
#[test]
fn big_two_self_play_with_an_lstm_learns_with_a_state_per_seat() {
    let args = [
        "--env",
        "BigTwo-v0",
        "--seed",
        "1",
        "--total-steps",
        "150000",
        "--set",
        "network.core=lstm",
        "--set",
        "run.deterministic=true",
        "--set",
        "run.time_limit_secs=0",
    ];
    let run = run_local("local-bigtwo-lstm", &args);
    let summary = read_json(&run.join("summary.json"));
    assert_accounted(&summary);
    let evals = read_jsonl(&run.join("eval.jsonl"));
    let win_rate = |e: &serde_json::Value, who: &str| {
        let matches = e["matches"].as_array().expect("matches");
        let m = matches.iter().find(|m| m["opponent"] == who);
        m.and_then(|m| m["win_rate"].as_f64())
            .unwrap_or_else(|| panic!("{who}: {e}"))
    };
    let (first, last) = (&evals[0], evals.last().expect("evaluations"));
    let (before, after) = (win_rate(first, "random"), win_rate(last, "random"));
    eprintln!("against three random players: {before} at version 0, {after} at the end");
    assert_eq!(last["final"], true);
    assert!(after >= 0.55 && after > before + 0.3, "{before} -> {after}");
}

/// `steps` steps of `policy` over `env` (each reset first, and again when
/// its episode ends), env `e` taking `action(e)`: the observation rows
/// acted on, time-major, where episodes start, and the logits sebulba
/// acted with, each env's state carried from step to step.
fn act<E: Env + ?Sized>(
    policy: &FusedPolicy,
    env: &mut [Box<E>],
    steps: usize,
    mut action: impl FnMut(usize) -> usize,
) -> (Vec<f32>, Vec<u8>, Vec<f32>) {
    let (d, envs) = (env[0].spec().obs_dim, env.len());
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
            let a = action(e);
            ended[e] = env
                .step(Action::Discrete(a), row)
                .expect("a step")
                .terminated;
            if ended[e] {
                env.reset(row);
            }
        }
    }
    (obs, starts, logits)
}
