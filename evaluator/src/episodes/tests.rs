//! Each protocol's action statistics on a fixed policy, and the budget, the
//! cut and the stop, on `Stall-v0` (episodes that never end by themselves;
//! action 1 pays 1, so a return counts an episode's 1s).

use super::*;
use sebulba_core::config::NetworkConfig;
use sebulba_core::devices::DeviceKind;
use sebulba_core::model::ModelSpec;
use sebulba_envs::stall::STALL_ID;
use sebulba_fused::net::Layout;
use sebulba_fused::tensors::param_tensors;

/// A policy whose logits are `logits` for every observation: every weight
/// zero but the policy head's bias.
fn fixed_policy(env_id: &str, logits: &[f32]) -> InferencePolicy {
    let env = sebulba_envs::env_spec(env_id).expect("env");
    let network = NetworkConfig {
        hidden: vec![4],
        ..NetworkConfig::default()
    };
    let spec = ModelSpec::new(&env, &network).expect("spec");
    let layout = Layout::new(&spec.arch());
    let mut params = vec![0.0; layout.len];
    let bias = param_tensors(&layout)
        .into_iter()
        .find(|t| t.name == "policy_head.bias")
        .expect("policy_head.bias");
    bias.scatter(logits, &mut params);
    let bytes = sebulba_core::weights::flat::to_safetensors(&spec, &params, None).expect("file");
    let mut p = InferencePolicy::new(&env, &network, DeviceKind::Cpu).expect("policy");
    p.load(1, bytes).expect("load");
    p
}

fn plan(episodes: usize, max_steps: u64, policy: EvalPolicy, epsilon: f64) -> Plan {
    Plan {
        episodes,
        max_steps,
        policy,
        epsilon,
        seed: 7,
        cpu_share: None,
    }
}

fn play(p: &InferencePolicy, plan: &Plan) -> EpisodeResults {
    play_episodes(p, STALL_ID, "", plan, &CancellationToken::new()).expect("plays")
}

/// The share of action 1 over every step played: the cut returns over the
/// cut lengths.
fn share_of_ones(r: &EpisodeResults) -> (f64, f64) {
    let ones: f64 = r.cut_returns.iter().sum();
    let steps: f64 = r.cut_lengths.iter().map(|&l| f64::from(l)).sum();
    (ones / steps, steps)
}

/// `q` is within 5 standard errors of `expected` over `n` independent draws.
fn assert_binomial(q: f64, expected: f64, n: f64, what: &str) {
    let sd = (expected * (1.0 - expected) / n).sqrt();
    assert!(
        (q - expected).abs() <= 5.0 * sd,
        "{what}: {q} over {n} steps, expected {expected} +- {}",
        5.0 * sd
    );
}

#[test]
fn a_greedy_policy_that_never_ends_is_cut_at_the_budget_and_reported_as_cut() {
    let p = fixed_policy(STALL_ID, &[0.0, 1.0]);
    let r = play(&p, &plan(8, 10_000, EvalPolicy::Greedy, 0.0));
    assert_eq!(r.cut_by, Some(CutBy::MaxSteps));
    assert!(r.returns.is_empty(), "none finished: {:?}", r.returns);
    assert_eq!(r.asked(), 8);
    // The budget is spent evenly: 1,250 steps each, every one an action 1.
    assert_eq!(r.cut_lengths, vec![1250; 8]);
    assert_eq!(r.cut_returns, vec![1250.0; 8]);
    // Nothing finished: the figure is over the cut episodes.
    assert_eq!((r.mean(), r.std()), (1250.0, 0.0));
}

#[test]
fn an_episode_at_the_cap_finishes_truncated_within_a_budget_that_allows_it() {
    let p = fixed_policy(STALL_ID, &[1.0, 0.0]);
    let r = play(&p, &plan(2, 54_000, EvalPolicy::Greedy, 0.0));
    assert_eq!(r.cut_by, None);
    assert_eq!(
        (r.returns.clone(), r.lengths.clone()),
        (vec![0.0; 2], vec![27_000; 2])
    );
    assert_eq!(r.truncated, 2);
    assert!(r.cut_returns.is_empty());
}

#[test]
fn epsilon_greedy_acts_at_random_with_probability_epsilon() {
    // Greedy is action 1; a random action is 0 half the time: 1s at 1 - ε/2.
    let p = fixed_policy(STALL_ID, &[0.0, 2.0]);
    for eps in [0.05, 0.2, 1.0] {
        let r = play(&p, &plan(16, 160_000, EvalPolicy::Epsilon, eps));
        let (q, n) = share_of_ones(&r);
        assert_eq!(n, 160_000.0);
        assert_binomial(q, 1.0 - eps / 2.0, n, &format!("epsilon {eps}"));
    }
    // At 0 it is greedy.
    let r = play(&p, &plan(4, 4_000, EvalPolicy::Epsilon, 0.0));
    assert_eq!(share_of_ones(&r).0, 1.0);
}

#[test]
fn a_sampled_evaluation_draws_from_the_policys_distribution() {
    // Logits [0, ln 3]: p(1) = 3/4.
    let p = fixed_policy(STALL_ID, &[0.0, 3f32.ln()]);
    let r = play(&p, &plan(16, 160_000, EvalPolicy::Sample, 0.0));
    let (q, n) = share_of_ones(&r);
    assert_binomial(q, 0.75, n, "sample");
    // The draws come from the evaluation seed: the same plan repeats.
    let again = play(&p, &plan(16, 160_000, EvalPolicy::Sample, 0.0));
    assert_eq!(again.cut_returns, r.cut_returns);
}

#[test]
fn a_stopped_evaluation_is_cut_as_stopped_with_what_it_played() {
    let p = fixed_policy(STALL_ID, &[0.0, 1.0]);
    let stop = CancellationToken::new();
    stop.cancel();
    let r = play_episodes(
        &p,
        STALL_ID,
        "",
        &plan(4, 1_000_000, EvalPolicy::Greedy, 0.0),
        &stop,
    )
    .expect("plays");
    assert_eq!(r.cut_by, Some(CutBy::Shutdown));
    assert_eq!((r.asked(), r.returns.len()), (4, 0));
    // Stopped from another thread mid-evaluation (64 episodes of 27,000
    // steps take seconds): within a step.
    let stop = CancellationToken::new();
    let t = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            stop.cancel();
            std::time::Instant::now()
        })
    };
    let r = play_episodes(
        &p,
        STALL_ID,
        "",
        &plan(64, 1_000_000_000, EvalPolicy::Greedy, 0.0),
        &stop,
    )
    .expect("plays");
    let stopped_at = t.join().expect("stopper");
    assert!(stopped_at.elapsed() < std::time::Duration::from_millis(100));
    assert_eq!(r.cut_by, Some(CutBy::Shutdown));
    assert!(r.cut_lengths.iter().all(|&l| l > 0), "{:?}", r.cut_lengths);
}

#[test]
fn episodes_that_end_are_counted_once_and_the_budget_counts_only_unfinished_ones() {
    // CartPole ends by itself within 500 steps; 10 episodes fit in 5,000.
    let p = fixed_policy("CartPole-v1", &[0.0, 0.0]);
    let r = play_episodes(
        &p,
        "CartPole-v1",
        "",
        &plan(10, 5_000, EvalPolicy::Greedy, 0.0),
        &CancellationToken::new(),
    )
    .expect("plays");
    assert_eq!((r.returns.len(), r.cut_by), (10, None));
    assert_eq!(r.truncated, 0);
    // Greedy (always 0, the first of equal logits) falls within a few dozen steps.
    assert!(r.lengths.iter().all(|&l| l < 100), "{:?}", r.lengths);
    let total: u32 = r.lengths.iter().sum();
    // A budget of fewer steps than they take cuts some.
    let tight = play_episodes(
        &p,
        "CartPole-v1",
        "",
        &plan(10, u64::from(total) - 1, EvalPolicy::Greedy, 0.0),
        &CancellationToken::new(),
    )
    .expect("plays");
    assert_eq!(tight.cut_by, Some(CutBy::MaxSteps));
    assert!(!tight.cut_returns.is_empty() && tight.asked() == 10);
}
