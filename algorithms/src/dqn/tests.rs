//! DQN's update through both engines: they agree step for step, the target
//! network is the synced one, and Q-learning finds known values.

use super::replay::Replay;
use super::target_network::TargetNetwork;
use super::train::{QSettings, q_update};
use crate::engine::burn::initial_state;
use crate::engine::{EngineChoice, TrainState};
use crate::trainer::Trainer;
use crate::trajectory::{Trajectory, TrajectoryBuilder};
use sebulba_core::config::{NetworkConfig, PpoConfig};
use sebulba_core::devices::LearnerDevices;
use sebulba_core::model::ModelSpec;
use sebulba_envs::ActionSpace;

fn spec() -> ModelSpec {
    ModelSpec {
        input_scale: 1.0,
        obs_dim: 2,
        image: None,
        action_space: ActionSpace::Discrete { n: 3 },
        network: NetworkConfig {
            hidden: vec![16, 16],
            ..Default::default()
        },
    }
}

/// The network in `state` on `choice`'s engine.
fn on_engine(state: &TrainState, choice: EngineChoice, seed: u64) -> Trainer {
    let eps = PpoConfig::default().adam_eps;
    Trainer::new(&spec(), state, &choice, eps, seed).expect("a CPU engine")
}

/// One engine or the other from the same initial network.
fn pair(seed: u64) -> (Trainer, Trainer) {
    let state = initial_state(&spec(), seed);
    (
        on_engine(&state, EngineChoice::cpu(), seed),
        on_engine(&state, EngineChoice::Fused { threads: 1 }, seed),
    )
}

fn on(fused: bool, seed: u64) -> Trainer {
    let choice = match fused {
        true => EngineChoice::Fused { threads: 1 },
        false => EngineChoice::cpu(),
    };
    on_engine(&initial_state(&spec(), seed), choice, seed)
}

/// The largest element-wise distance between two parameter vectors.
fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn params(p: &Trainer) -> Vec<f32> {
    p.state().expect("parameters").params
}

/// `p`'s network now, as a target.
fn synced(p: &Trainer) -> TargetNetwork {
    TargetNetwork::of(p).expect("a target network")
}

/// A batch of T x 1 env whose every step ends the episode: observation
/// `(x, -x)`, action `t % 3`, reward `1 - action` (so Q* = 1, 0, -1).
fn one_step_episodes(t_len: usize) -> Trajectory {
    let obs: Vec<f32> = (0..=t_len)
        .flat_map(|t| {
            let x = (t % 7) as f32 / 7.0 - 0.5;
            [x, -x]
        })
        .collect();
    let actions: Vec<i32> = (0..t_len).map(|t| (t % 3) as i32).collect();
    let rewards = actions.iter().map(|&a| 1.0 - a as f32).collect();
    (0..t_len)
        .fold(TrajectoryBuilder::new(t_len, 1, 2), |b, t| b.terminate(t))
        .observations(obs)
        .discrete(actions)
        .rewards(rewards)
        .build()
}

/// Transitions that bootstrap: nothing terminates.
fn ongoing(t_len: usize) -> Trajectory {
    let mut b = one_step_episodes(t_len);
    b.terminated = vec![0; t_len];
    b
}

fn settings(steps: usize, lr: f64) -> QSettings {
    QSettings {
        batch_size: 32,
        gradient_steps: steps,
        gamma: 0.9,
        huber_delta: 1.0,
        learning_rate: lr,
        max_grad_norm: 10.0,
        actions: 3,
    }
}

#[test]
fn the_engines_agree_on_q_steps() {
    let mut replay = Replay::new(1000, 2);
    replay.push_batch(&ongoing(60));
    let (mut burn, mut fused) = pair(4);
    assert_eq!(params(&burn), params(&fused));
    let (ta, tb) = (synced(&burn), synced(&fused));
    // Rewards of +-1 against Q near 0: errors on both sides of the threshold.
    let s = QSettings {
        huber_delta: 0.5,
        ..settings(10, 1e-3)
    };
    let a = q_update(&mut burn, &ta, &replay, &s).unwrap();
    let b = q_update(&mut fused, &tb, &replay, &s).unwrap();
    assert_eq!(a.gradient_steps, 10);
    assert_eq!(b.gradient_steps, 10);
    assert!(
        (a.td_loss - b.td_loss).abs() < 1e-4 * a.td_loss.abs().max(1.0),
        "{a:?} {b:?}"
    );
    assert!((a.q_mean - b.q_mean).abs() < 1e-4, "{a:?} {b:?}");
    let (pa, pb) = (params(&burn), params(&fused));
    let diff = max_diff(&pa, &pb);
    assert!(diff < 1e-4, "parameters {diff} apart");
}

#[test]
fn the_target_network_is_the_one_synced() {
    for fused in [false, true] {
        let mut replay = Replay::new(1000, 2);
        replay.push_batch(&ongoing(60));
        let mut p = on(fused, 5);
        let obs = [0.3f32, -0.3, -0.1, 0.1];
        let target = synced(&p);
        let before = target.heads(&mut p, &obs);
        q_update(&mut p, &target, &replay, &settings(20, 1e-2)).unwrap();
        assert_eq!(
            target.heads(&mut p, &obs),
            before,
            "fused {fused}: the target moved"
        );
        let target = synced(&p);
        assert_ne!(
            target.heads(&mut p, &obs),
            before,
            "fused {fused}: the sync did not take"
        );
    }
}

#[test]
fn q_learning_finds_the_rewards_of_one_step_episodes() {
    for fused in [false, true] {
        let mut replay = Replay::new(1000, 2);
        replay.push_batch(&one_step_episodes(210));
        let mut p = on(fused, 6);
        let target = synced(&p);
        let s = q_update(&mut p, &target, &replay, &settings(600, 3e-3)).unwrap();
        assert_eq!(s.non_finite_steps, 0);
        // Terminal steps: the targets are the rewards, whatever the target
        // network; a sync shows the online network's values.
        let q = synced(&p).heads(&mut p, &[0.2, -0.2, -0.4, 0.4]);
        for row in q.chunks(3) {
            for (a, want) in [1.0f32, 0.0, -1.0].iter().enumerate() {
                assert!((row[a] - want).abs() < 0.05, "fused {fused}: {q:?}");
            }
        }
    }
}

/// A DQN run's update schedule, in both engines: no gradient step before
/// `learning_starts`; `replay_ratio` steps per transition with the fraction
/// carried; the target copied when the run passes a multiple of
/// `target_update_interval` env steps, and only then.
#[test]
fn a_dqn_update_keeps_its_schedule() {
    use super::update::{DqnLearner, epsilon};
    use crate::prepare::Normalizers;
    use sebulba_core::config::{Algorithm, RunConfig};
    let mut cfg = RunConfig::preset("CartPole-v1").unwrap();
    cfg.network.obs_norm = false;
    cfg.run.algorithm = Algorithm::Dqn;
    cfg.run.total_steps = 1000;
    cfg.dqn.batch_size = 8;
    cfg.dqn.replay_ratio = 0.75;
    cfg.dqn.learning_starts = 20;
    cfg.dqn.target_update_interval = 25;
    cfg.dqn.learning_rate = 1e-2;
    cfg.dqn.adam_eps = PpoConfig::default().adam_eps;
    cfg.dqn.exploration_fraction = 0.1;
    assert_eq!(epsilon(&cfg, 0), Some(1.0));
    assert_eq!(epsilon(&cfg, 50), Some(0.55));
    assert_eq!(epsilon(&cfg, 100), Some(0.1));
    for fused in [false, true] {
        let mut p = on(fused, 7);
        let mut norms = Normalizers::new(&cfg, 2);
        let mut dqn = DqnLearner::new(&cfg.dqn, &spec(), 0, &p).unwrap();
        let obs = [0.3f32, -0.3, -0.1, 0.1];
        let mut target = dqn.target().heads(&mut p, &obs);
        // (env steps after the update, gradient steps, target copies, copied now)
        for (u, (steps, grads, copies, copied)) in [
            (10, 0, 0, false),
            (20, 7, 0, false),
            (30, 8, 1, true),
            (40, 7, 1, false),
            (50, 8, 2, true),
        ]
        .into_iter()
        .enumerate()
        {
            let batch = one_step_episodes(10);
            let (prepared, s) = dqn
                .train(&[batch], u as u64, steps, &mut p, &mut norms, &cfg)
                .unwrap();
            let at = format!("fused {fused}, update {u}: {s:?}");
            assert_eq!(s.q.gradient_steps, grads, "{at}");
            assert_eq!(s.target_updates, copies, "{at}");
            assert_eq!((s.samples, s.replay_size), (10, 10 * (u + 1)), "{at}");
            assert_eq!(s.epsilon, f64::from(epsilon(&cfg, steps).unwrap()), "{at}");
            assert!(prepared.data.is_empty(), "{at}");
            let now = dqn.target().heads(&mut p, &obs);
            assert_eq!(now != target, copied, "{at}");
            target = now;
        }
    }
}

/// Q steps on two burn replicas (each a shard of the minibatch, gradients
/// all-reduced) move the weights as one replica does, and the replicas stay
/// identical.
#[test]
fn two_replicas_take_the_q_steps_of_one() {
    let mut one = on(false, 8);
    let two_cpus = EngineChoice::Burn(LearnerDevices::Cpu(2));
    let mut two = on_engine(&one.state().unwrap(), two_cpus, 8);
    let mut replay = Replay::new(1000, 2);
    replay.push_batch(&ongoing(60));
    let (ta, tb) = (synced(&one), synced(&two));
    let s = settings(10, 1e-3);
    let a = q_update(&mut one, &ta, &replay, &s).unwrap();
    let b = q_update(&mut two, &tb, &replay, &s).unwrap();
    assert_eq!(b.gradient_steps, 10);
    assert!((a.td_loss - b.td_loss).abs() < 1e-5, "{a:?} {b:?}");
    let (pa, pb) = (params(&one), params(&two));
    let diff = max_diff(&pa, &pb);
    assert!(diff < 1e-5, "parameters {diff} apart");
    let second = two.replica_states().unwrap()[1].params.clone();
    assert_eq!(pb, second, "the replicas drifted apart");
}

/// burn steps only the parameters a loss reaches (a Q step never reaches the
/// value head): a checkpoint still saves, resumes on either engine, and a
/// resumed run saves again and continues as the original does.
#[test]
fn q_steps_checkpoint_and_resume_on_either_engine() {
    let mut replay = Replay::new(1000, 2);
    replay.push_batch(&ongoing(60));
    let s = settings(5, 1e-3);
    for from_fused in [false, true] {
        let mut original = on(from_fused, 6);
        let target = synced(&original);
        q_update(&mut original, &target, &replay, &s).unwrap();
        let saved = original
            .checkpoint_state()
            .expect("a checkpoint after Q steps");
        assert_eq!(saved.state.time, 5);
        for to_fused in [false, true] {
            let label = format!("fused {from_fused} -> fused {to_fused}");
            let mut resumed = on(to_fused, 1);
            resumed.load_state(&saved).unwrap();
            assert_eq!(resumed.state().unwrap(), saved.state, "{label}");
            let mut again = on(from_fused, 1);
            again.load_state(&saved).unwrap();
            for t in [&mut resumed, &mut again] {
                let target = synced(t);
                q_update(t, &target, &replay, &s).unwrap();
            }
            let next = resumed
                .checkpoint_state()
                .expect("a resumed run saves again");
            assert_eq!(next.state.time, 10, "{label}");
            let d = max_diff(&params(&resumed), &params(&again));
            let limit = if from_fused == to_fused { 0.0 } else { 1e-4 };
            assert!(d <= limit, "{label}: {d} apart");
        }
    }
}
