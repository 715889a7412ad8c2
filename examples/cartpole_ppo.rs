//! PPO on CartPole-v1 in one loop, to read top to bottom like CleanRL's
//! `ppo.py`, through the functions a sebulba run uses: a native vector env
//! steps, the policy acts through the actors' forward pass on the weights the
//! trainer publishes, each rollout becomes a `Trajectory`, and the run's update
//! rule (`UpdateRule`: PPO's annealed learning rate, then `ppo::train`)
//! prepares it (values, GAE, advantages) and takes the minibatch steps on the
//! trainer's engine. What the services add around this (gRPC, many actors,
//! policy lag, checkpoints, evaluation in its own process) is left out.
//!
//! ```sh
//! cargo run --release --example cartpole_ppo            # seed 1
//! cargo run --release --example cartpole_ppo -- 7       # seed 7
//! ```
//!
//! It exits non-zero unless the greedy policy it ends with scores at least
//! 475 over 10 episodes (the test tier runs it: `scripts/test.sh process`).

use anyhow::bail;
use rand::SeedableRng;
use rand::rngs::StdRng;
use sebulba_algorithms::prepare::Normalizers;
use sebulba_algorithms::{
    Trainer, Trajectory, TrajectoryBuilder, UpdateAt, UpdateRule, UpdateStats,
};
use sebulba_core::config::RunConfig;
use sebulba_core::devices::DeviceKind;
use sebulba_core::distribution::{argmax, sample_categorical};
use sebulba_core::model::ModelSpec;
use sebulba_core::policy::{InferencePolicy, PolicyState};
use sebulba_envs::{ActionBatch, NativeVecEnv};

const ENV: &str = "CartPole-v1";

fn main() -> anyhow::Result<()> {
    // The first whole-number argument (`cargo test` may pass filters and flags).
    let seed: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1);
    // The preset `sebulba local --env CartPole-v1` trains with: 16 envs (two
    // actors' 8) x 32 steps = 512 samples an update, 20 epochs x 2 minibatches,
    // over twice its budget (docs/experiments.md: the example's seeds).
    let mut cfg = RunConfig::preset(ENV)?;
    cfg.run.seed = seed;
    cfg.run.total_steps = 100_000;
    let steps = cfg.env.rollout_length;
    let num_envs = cfg.env.envs_per_actor * cfg.learner.batches_per_update;

    let mut envs = NativeVecEnv::new(ENV, num_envs, seed)?;
    let env = envs.spec().clone();
    let spec = ModelSpec::new(&env, &cfg.network)?;
    // The network and Adam on the run's engine (the fused CPU engine), and
    // the update rule the learner would train with (PPO).
    let mut trainer = Trainer::for_run(&spec, &cfg)?;
    let mut rule = UpdateRule::for_run(&cfg, &spec, 0, &trainer)?;
    // The policy the actors act with, loaded from the weights the trainer publishes.
    let mut policy = InferencePolicy::new(&env, &cfg.network, DeviceKind::Cpu)?;
    // Observation and reward statistics (both off in this preset).
    let mut norms = Normalizers::new(&cfg, spec.obs_dim);
    let mut rng = StdRng::seed_from_u64(seed);

    let mut obs = vec![0.0f32; num_envs * env.obs_dim];
    envs.reset(&mut obs);
    // Each env's policy state, carried across rollouts (empty: no memory).
    let (mut state, mut version, mut env_steps) = (policy.state(num_envs), 0u64, 0u64);
    let mut recent: Vec<f64> = Vec::new();
    while env_steps < cfg.run.total_steps {
        policy.load(version, trainer.safetensors()?)?;
        let trajectory = rollout(
            &mut envs,
            &policy,
            (&mut obs, &mut state),
            steps,
            version,
            &mut rng,
        )?;
        recent.extend(&trajectory.episode_returns);
        let at = UpdateAt {
            version,
            env_steps: env_steps + trajectory.env_steps(),
            budget_used: cfg.budget_used(env_steps, 0.0),
        };
        env_steps = at.env_steps;
        let (_, stats) = rule.train(&[trajectory], at, &mut trainer, &mut norms, &cfg)?;
        let UpdateStats::Ppo(stats) = stats else {
            bail!("the CartPole preset trains with PPO");
        };
        version += 1;
        if version % 10 == 0 {
            let n = recent.len().max(1) as f64;
            println!(
                "steps {env_steps:>6}  episodes {:>4}  mean return {:>6.1}  policy loss {:>7.4}  value loss {:>8.3}  approx kl {:.4}",
                recent.len(),
                recent.iter().sum::<f64>() / n,
                stats.terms.policy_loss,
                stats.terms.value_loss,
                stats.terms.approx_kl,
            );
            recent.clear();
        }
    }
    policy.load(version, trainer.safetensors()?)?;
    let score = evaluate(&policy, seed + 1000, 10)?;
    println!("greedy policy after {env_steps} steps: mean return {score:.1} over 10 episodes");
    if score < 475.0 {
        bail!("CartPole not solved: {score:.1} < 475");
    }
    Ok(())
}

/// T steps of every env with actions sampled from `policy`, as a trajectory.
fn rollout(
    envs: &mut NativeVecEnv,
    policy: &InferencePolicy,
    (obs, state): (&mut [f32], &mut PolicyState),
    steps: usize,
    version: u64,
    rng: &mut StdRng,
) -> anyhow::Result<Trajectory> {
    let (e_len, d) = (envs.num_envs(), envs.spec().obs_dim);
    let n_actions = policy.spec().head_dim();
    let mut out = envs.new_step_out();
    let (mut observations, mut actions) = (Vec::with_capacity((steps + 1) * e_len * d), vec![]);
    let (mut log_probs, mut rewards) = (vec![], vec![]);
    let (mut returns, mut lengths) = (vec![], vec![]);
    let (mut ended, mut cut) = (vec![], vec![]);
    let mut scratch = vec![0.0f32; n_actions];
    for t in 0..steps {
        observations.extend_from_slice(obs);
        let head = policy.step(obs, state, None);
        let mut step_actions = vec![0u32; e_len];
        for e in 0..e_len {
            let (a, lp) =
                sample_categorical(&head[e * n_actions..][..n_actions], None, &mut scratch, rng)?;
            step_actions[e] = a as u32;
            actions.push(a as i32);
            log_probs.push(lp);
        }
        envs.step(ActionBatch::Discrete(&step_actions), &mut out)?;
        for e in 0..e_len {
            let i = t * e_len + e;
            rewards.push(out.reward[e]);
            // Only termination ends the bootstrap; a time-limit cut is
            // bootstrapped from its true final observation.
            if out.terminated[e] || out.truncated[e] {
                state.reset(e);
            }
            if out.terminated[e] {
                ended.push(i);
            } else if out.truncated[e] {
                cut.push((i, out.final_obs[e * d..(e + 1) * d].to_vec()));
            }
        }
        for ep in &out.episodes {
            returns.push(ep.episode_return);
            lengths.push(ep.length);
        }
        obs.copy_from_slice(&out.obs);
    }
    observations.extend_from_slice(obs);
    let mut b = TrajectoryBuilder::new(steps, e_len, d)
        .policy_version(version)
        .observations(observations)
        .discrete(actions)
        .log_probs(log_probs)
        .rewards(rewards)
        .episodes(returns, lengths);
    for i in ended {
        b = b.terminate(i);
    }
    for (i, final_obs) in cut {
        b = b.truncate(i, final_obs);
    }
    Ok(b.build())
}

/// The mean return of `episodes` episodes acting greedily (argmax), as the
/// evaluator scores a version.
fn evaluate(policy: &InferencePolicy, seed: u64, episodes: usize) -> anyhow::Result<f64> {
    let mut envs = NativeVecEnv::new(ENV, episodes, seed)?;
    let n = policy.spec().head_dim();
    let mut obs = vec![0.0f32; episodes * envs.spec().obs_dim];
    envs.reset(&mut obs);
    let mut out = envs.new_step_out();
    let mut scores: Vec<Option<f64>> = vec![None; episodes];
    let mut state = policy.state(episodes);
    while scores.iter().any(Option::is_none) {
        let head = policy.step(&obs, &mut state, None);
        let actions: Vec<u32> = (0..episodes)
            .map(|e| argmax(&head[e * n..][..n], None) as u32)
            .collect();
        envs.step(ActionBatch::Discrete(&actions), &mut out)?;
        for ep in &out.episodes {
            scores[ep.env_index].get_or_insert(ep.episode_return);
        }
        obs.copy_from_slice(&out.obs);
    }
    Ok(scores.iter().flatten().sum::<f64>() / episodes as f64)
}
