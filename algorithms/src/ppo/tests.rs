use super::*;
use crate::COLLECTIVE_TEST_LOCK;
use crate::engine::burn::initial_state;
use crate::engine::{EngineChoice, Steps, TrainState};
use crate::trainer::{Trainer, TrainerState};
use crate::trajectory::BatchActions;
use sebulba_core::config::RunConfig;
use sebulba_core::config::{AdvantageNorm, NetworkConfig};
use sebulba_core::devices::LearnerDevices;
use sebulba_core::model::ModelSpec;

// The burn engine's tests own the small CartPole-like case both use.
use crate::engine::burn::tests::{Inner, cfg, spec};

/// A fresh network on one CPU device (burn).
fn on_cpu(s: &ModelSpec, c: &PpoConfig, seed: u64) -> Trainer {
    Trainer::fresh(s, c.adam_eps, seed, &EngineChoice::cpu()).unwrap()
}

/// The network in `state` on `devices` CPU devices (burn).
fn from_state(s: &ModelSpec, c: &PpoConfig, state: &TrainState, devices: usize) -> Trainer {
    let choice = EngineChoice::Burn(LearnerDevices::Cpu(devices));
    Trainer::new(s, state, &choice, c.adam_eps, 3).unwrap()
}

fn params(t: &Trainer) -> Vec<f32> {
    t.state().unwrap().params
}

fn toy_data(n: usize) -> UpdateData {
    UpdateData {
        obs_dim: 2,
        observations: (0..n * 2)
            .map(|i| ((i * 37 % 11) as f32 - 5.0) / 5.0)
            .collect::<Vec<f32>>()
            .into(),
        actions: BatchActions::Discrete((0..n).map(|i| (i % 2) as i32).collect()),
        masks: None,
        old_log_probs: vec![0.5f32.ln(); n],
        advantages: (0..n)
            .map(|i| if i % 2 == 1 { 1.0 } else { -1.0 })
            .collect(),
        returns: vec![1.0; n],
        old_values: vec![0.0; n],
        weights: None,
        sequences: None,
    }
}

/// The mean probability of action 1 over `data`'s rows (two actions).
fn mean_p1(ppo: &mut Trainer, data: &UpdateData) -> f32 {
    ppo.heads(&Steps::rows(data.observations.as_f32().unwrap()))
        .chunks(2)
        .map(|l| 1.0 / (1.0 + (l[0] - l[1]).exp()))
        .sum::<f32>()
        / data.len() as f32
}

#[test]
fn an_update_moves_probability_toward_advantaged_actions() {
    let s = spec();
    let mut c = cfg();
    c.epochs = 4;
    c.minibatches = 2;
    c.ent_coef = 0.0;
    let mut ppo = on_cpu(&s, &c, 3);
    let n = 64;
    let data = toy_data(n);
    let p1 = |ppo: &mut Trainer| mean_p1(ppo, &data);
    let before = p1(&mut ppo);
    let stats = crate::ppo::update(&mut ppo, &data, &c, 1e-2, 0.2).unwrap();
    let after = p1(&mut ppo);
    assert!(after > before + 0.02, "{before} -> {after}");
    assert!(
        stats.terms.value_loss > 0.0 && stats.grad_norm > 0.0 && stats.terms.approx_kl.is_finite()
    );
    assert_eq!((stats.minibatch_steps, stats.early_stopped), (8, false));
}

/// Minibatches of whole env sequences (what a network with memory is cut
/// into, [`crate::minibatches`]) train a network without memory as well:
/// the same update, another shuffle. Fewer sequences than minibatches take
/// no step, and rows that are not sequences are refused.
#[test]
fn sequence_minibatches_go_through_the_same_update() {
    let s = spec();
    let mut c = cfg();
    (c.epochs, c.minibatches, c.ent_coef) = (4, 2, 0.0);
    let mut ppo = on_cpu(&s, &c, 3);
    ppo.batching = sebulba_fused::Batching::Sequences { width: 0 };
    let n = 64;
    let mut data = toy_data(n);
    data.sequences = Some(crate::data::Sequences {
        steps: 8,
        envs: 4,
        starts: vec![0; n],
        initial: sebulba_fused::PolicyState::zeros(0, 8),
        seats: None,
    });
    let p1 = |ppo: &mut Trainer| mean_p1(ppo, &data);
    let before = p1(&mut ppo);
    let stats = crate::ppo::update(&mut ppo, &data, &c, 1e-2, 0.2).unwrap();
    let after = p1(&mut ppo);
    assert!(after > before + 0.02, "{before} -> {after}");
    assert_eq!((stats.minibatch_steps, stats.early_stopped), (8, false));
    c.minibatches = 16;
    let none = crate::ppo::update(&mut ppo, &data, &c, 1e-2, 0.2).unwrap();
    assert_eq!(none.minibatch_steps, 0, "8 sequences for 16 minibatches");
    data.sequences = None;
    assert!(crate::ppo::update(&mut ppo, &data, &c, 1e-2, 0.2).is_err());
}

/// Loss weights (V-trace's) scale each sample's advantage after the
/// minibatch normalisation: with every weight 0 the policy does not move,
/// although normalised advantages alone would move it; weights of 1 are the
/// unweighted update exactly.
#[test]
fn loss_weights_apply_after_normalisation() {
    let s = spec();
    let mut c = cfg();
    (c.epochs, c.minibatches, c.ent_coef) = (2, 2, 0.0);
    c.adv_norm = AdvantageNorm::Minibatch;
    let n = 64;
    let mut data = toy_data(n);
    // All advantages 5 or 7: centred, they still favour the odd samples.
    for (i, a) in data.advantages.iter_mut().enumerate() {
        *a = if i % 2 == 1 { 7.0 } else { 5.0 };
    }
    // Every update starts from one network.
    let state = initial_state(&s, 3);
    let start =
        from_state(&s, &c, &state, 1).heads(&Steps::rows(data.observations.as_f32().unwrap()));
    let policy_after = |weights: Option<Vec<f32>>| {
        let mut ppo = from_state(&s, &c, &state, 1);
        let data = UpdateData {
            weights,
            ..data.clone()
        };
        crate::ppo::update(&mut ppo, &data, &c, 1e-2, 0.2).unwrap();
        ppo.heads(&Steps::rows(data.observations.as_f32().unwrap()))
    };
    let moved = |l: &[f32]| {
        l.iter()
            .zip(&start)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max)
    };
    assert!(
        moved(&policy_after(None)) > 1e-3,
        "unweighted, the policy moves"
    );
    assert_eq!(
        moved(&policy_after(Some(vec![0.0; n]))),
        0.0,
        "weights 0: it does not"
    );
    assert_eq!(
        policy_after(Some(vec![1.0; n])),
        policy_after(None),
        "weights 1"
    );
}

#[test]
fn target_kl_stops_the_update_early() {
    let s = spec();
    let mut c = cfg();
    c.epochs = 50;
    c.minibatches = 2;
    c.target_kl = 0.01;
    let mut ppo = on_cpu(&s, &c, 3);
    let stats = crate::ppo::update(&mut ppo, &toy_data(64), &c, 5e-2, 0.2).unwrap();
    assert!(stats.early_stopped, "{stats:?}");
    assert!(
        stats.minibatch_steps >= 1 && stats.minibatch_steps < 100,
        "{stats:?}"
    );
}

#[test]
fn a_continuous_update_moves_the_mean_toward_advantaged_actions() {
    let env = sebulba_envs::env_spec("Pendulum-v1").unwrap();
    let s = ModelSpec::new(
        &env,
        &NetworkConfig {
            hidden: vec![8],
            ..Default::default()
        },
    )
    .unwrap();
    let mut c = cfg();
    c.epochs = 10;
    c.minibatches = 2;
    c.ent_coef = 0.0;
    let mut ppo = on_cpu(&s, &c, 5);
    let n = 128;
    let observations: Vec<f32> = (0..n * 3)
        .map(|i| ((i * 13 % 7) as f32 - 3.0) / 3.0)
        .collect();
    let head = ppo.heads(&Steps::rows(&observations));
    // Pre-tanh samples at mean +- 0.5; the positive ones are advantaged.
    let sq = match s.dist() {
        ActionDist::TanhNormal { squash, .. } => squash,
        _ => unreachable!(),
    };
    let u: Vec<f32> = (0..n)
        .map(|i| head[2 * i] + if i % 2 == 0 { 0.5 } else { -0.5 })
        .collect();
    let old_log_probs = (0..n)
        .map(|i| {
            sebulba_core::distribution::tanh_normal_log_prob(
                &head[2 * i..2 * i + 2],
                &u[i..i + 1],
                1e-3,
                &sq,
            )
        })
        .collect();
    let data = UpdateData {
        obs_dim: 3,
        observations: observations.clone().into(),
        actions: BatchActions::Continuous(u),
        masks: None,
        old_log_probs,
        advantages: (0..n)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect(),
        returns: vec![0.0; n],
        old_values: vec![0.0; n],
        weights: None,
        sequences: None,
    };
    let mean_of = |ppo: &mut Trainer| {
        let h = ppo.heads(&Steps::rows(&observations));
        h.chunks(2).map(|r| r[0]).sum::<f32>() / n as f32
    };
    let before = mean_of(&mut ppo);
    let stats = crate::ppo::update(&mut ppo, &data, &c, 1e-2, 0.2).unwrap();
    let after = mean_of(&mut ppo);
    assert!(after > before + 0.05, "{before} -> {after}");
    // (The first step's ratio is checked in `at_zero_lag_the_first_steps_ratio_is_one_in_both_engines`.)
    assert!(
        stats.terms.approx_kl.is_finite() && stats.terms.entropy.is_finite(),
        "{stats:?}"
    );
}

#[test]
fn obs_norm_statistics_survive_an_update() {
    let mut net = spec().network;
    net.obs_norm = true;
    let s = ModelSpec {
        input_scale: 1.0,
        network: net,
        ..spec()
    };
    let c = cfg();
    for choice in [EngineChoice::cpu(), EngineChoice::Fused { threads: 1 }] {
        let mut ppo = Trainer::fresh(&s, c.adam_eps, 3, &choice).unwrap();
        let mut stats = sebulba_core::model::RunningMeanStd::new(2);
        stats.update(&[1.0, 2.0, 3.0, 6.0]);
        ppo.set_obs_stats(&stats);
        crate::ppo::update(&mut ppo, &toy_data(64), &c, 1e-2, 0.2).unwrap();
        let file = ppo.safetensors().unwrap();
        let (_, norm) = sebulba_fused::file::read(&s.arch(), &file).unwrap();
        let norm = norm.expect("published with the normaliser");
        assert_eq!(norm.mean(), [2.0, 4.0], "{}", ppo.engine());
        assert_eq!(norm.var(), [1.0, 4.0], "{}", ppo.engine());
    }
}

/// Largest element-wise difference relative to the parameter tensor's scale.
fn max_rel_diff(a: &[f32], b: &[f32]) -> f64 {
    let scale = a.iter().map(|x| x.abs()).fold(0.0f32, f32::max).max(1e-3) as f64;
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).abs() / scale)
        .fold(0.0, f64::max)
}

fn continuous_case() -> (ModelSpec, UpdateData) {
    let env = sebulba_envs::env_spec("Pendulum-v1").unwrap();
    let s = ModelSpec::new(
        &env,
        &NetworkConfig {
            hidden: vec![16, 16],
            obs_norm: true,
            ..Default::default()
        },
    )
    .unwrap();
    let n = 96;
    let data = UpdateData {
        obs_dim: 3,
        observations: (0..n * 3)
            .map(|i| ((i * 29 % 17) as f32 - 8.0) / 8.0)
            .collect::<Vec<f32>>()
            .into(),
        actions: BatchActions::Continuous(
            (0..n).map(|i| ((i * 7 % 5) as f32 - 2.0) / 2.0).collect(),
        ),
        masks: None,
        old_log_probs: (0..n).map(|i| -1.0 - (i % 3) as f32 * 0.1).collect(),
        advantages: (0..n).map(|i| ((i * 11 % 9) as f32 - 4.0) / 4.0).collect(),
        returns: (0..n).map(|i| (i % 4) as f32).collect(),
        old_values: vec![0.5; n],
        weights: None,
        sequences: None,
    };
    (s, data)
}

/// Learners on one and on two CPU devices from one initial model: burn's init
/// draws from a process-wide RNG that tests running in parallel also draw from.
fn one_and_two_devices(s: &ModelSpec, c: &PpoConfig, seed: u64) -> (Trainer, Trainer) {
    let state = initial_state(s, seed);
    (from_state(s, c, &state, 1), from_state(s, c, &state, 2))
}

#[test]
fn one_and_two_replicas_reach_the_same_parameters() {
    let _turn = COLLECTIVE_TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let mut c = cfg();
    c.epochs = 3;
    c.minibatches = 2;
    c.ent_coef = 0.01;
    c.clip_value_loss = true;
    let discrete = (spec(), toy_data(64));
    for (label, (s, data), adv_norm) in [
        ("discrete", discrete, AdvantageNorm::Update),
        ("continuous", continuous_case(), AdvantageNorm::Minibatch),
    ] {
        c.adv_norm = adv_norm;
        let (mut one, mut two) = one_and_two_devices(&s, &c, 7);
        let before = params(&one);
        assert_eq!(before, params(&two), "{label}: same initial weights");
        let s1 = crate::ppo::update(&mut one, &data, &c, 3e-3, 0.2).unwrap();
        let s2 = crate::ppo::update(&mut two, &data, &c, 3e-3, 0.2).unwrap();
        let p1 = params(&one);
        assert!(
            max_rel_diff(&before, &p1) > 1e-3,
            "{label}: the update moved nothing"
        );
        let replicas = two.replica_states().unwrap();
        for (i, r) in replicas.iter().enumerate() {
            let d = max_rel_diff(&p1, &r.params);
            eprintln!("{label}: replica {i} max relative difference {d:e}");
            assert!(
                d < 1e-5,
                "{label}: replica {i} differs from one device by {d:e}"
            );
        }
        assert_eq!(replicas[0], replicas[1], "{label}: replicas drifted apart");
        for (a, b, what) in [
            (s1.terms.policy_loss, s2.terms.policy_loss, "policy_loss"),
            (s1.terms.value_loss, s2.terms.value_loss, "value_loss"),
            (s1.terms.entropy, s2.terms.entropy, "entropy"),
            (s1.terms.approx_kl, s2.terms.approx_kl, "approx_kl"),
            (s1.grad_norm, s2.grad_norm, "grad_norm"),
        ] {
            assert!(
                (a - b).abs() <= 1e-5 * a.abs().max(1e-3),
                "{label} {what}: {a} vs {b}"
            );
        }
        assert_eq!(s1.minibatch_steps, s2.minibatch_steps);
    }
    burn_collective::reset_collective::<Inner>();
}

#[test]
fn target_kl_stops_every_replica_at_the_same_step() {
    let _turn = COLLECTIVE_TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let mut c = cfg();
    c.epochs = 50;
    c.minibatches = 2;
    c.target_kl = 0.01;
    let data = toy_data(64);
    let (mut one, mut two) = one_and_two_devices(&spec(), &c, 3);
    let s1 = crate::ppo::update(&mut one, &data, &c, 5e-2, 0.2).unwrap();
    let s2 = crate::ppo::update(&mut two, &data, &c, 5e-2, 0.2).unwrap();
    assert!(s1.early_stopped && s2.early_stopped);
    assert_eq!(s1.minibatch_steps, s2.minibatch_steps);
    let replicas = two.replica_states().unwrap();
    assert_eq!(replicas[0], replicas[1]);
    burn_collective::reset_collective::<Inner>();
}

#[test]
fn a_restored_ppo_has_the_saved_adam_state_and_continues_exactly() {
    let s = spec();
    let mut c = cfg();
    c.epochs = 2;
    c.minibatches = 2;
    let data = toy_data(64);
    for choice in [EngineChoice::cpu(), EngineChoice::Fused { threads: 1 }] {
        let e = format!("{choice:?}");
        let mut a = Trainer::fresh(&s, c.adam_eps, 1, &choice).unwrap();
        for _ in 0..3 {
            crate::ppo::update(&mut a, &data, &c, 1e-2, 0.2).unwrap();
        }
        let saved = a.checkpoint_state().unwrap();
        assert!(saved.state.time > 0, "{e}: Adam has stepped");
        assert!(saved.state.m2.iter().any(|&v| v > 0.0), "{e}");

        // Another run's learner (other init, other RNG) restored from the checkpoint.
        let mut b = Trainer::fresh(&s, c.adam_eps, 99, &choice).unwrap();
        assert_ne!(params(&a), params(&b));
        b.load_state(&saved).unwrap();
        assert_eq!(b.state().unwrap(), saved.state, "{e}: the state as saved");

        // A control with the same weights and RNG but a fresh Adam.
        let mut control = Trainer::fresh(&s, c.adam_eps, 7, &choice).unwrap();
        control
            .load_state(&TrainerState {
                state: TrainState::new(saved.state.params.clone()),
                ..saved.clone()
            })
            .unwrap();
        crate::ppo::update(&mut a, &data, &c, 1e-2, 0.2).unwrap();
        crate::ppo::update(&mut b, &data, &c, 1e-2, 0.2).unwrap();
        crate::ppo::update(&mut control, &data, &c, 1e-2, 0.2).unwrap();
        assert_eq!(
            params(&a),
            params(&b),
            "{e}: the resumed learner takes exactly the step the original takes"
        );
        assert!(
            max_rel_diff(&params(&a), &params(&control)) > 1e-4,
            "{e}: without the saved moments the step differs (so the test can fail)"
        );
    }
}

/// The behaviour log-probabilities an actor computes for `data`'s actions with
/// the weights `ppo` would publish now (the actor's inference path).
pub(crate) fn actor_log_probs(
    ppo: &Trainer,
    env_id: &str,
    spec: &ModelSpec,
    data: &UpdateData,
) -> Vec<f32> {
    let env = sebulba_envs::env_spec(env_id).unwrap();
    let mut policy = sebulba_core::policy::InferencePolicy::new(
        &env,
        &spec.network,
        sebulba_core::devices::DeviceKind::Cpu,
    )
    .unwrap();
    let bytes = ppo.safetensors().unwrap();
    policy.load(1, bytes).unwrap();
    let n = data.advantages.len();
    let head = policy.step(
        data.observations.as_f32().unwrap(),
        &mut policy.state(n),
        None,
    );
    let hd = head.len() / n;
    (0..n)
        .map(|i| {
            let h = &head[i * hd..(i + 1) * hd];
            match (&data.actions, spec.dist()) {
                (BatchActions::Discrete(a), _) => {
                    let mut out = vec![0.0; hd];
                    sebulba_core::distribution::log_softmax_row(h, None, &mut out);
                    out[a[i] as usize]
                }
                (
                    BatchActions::Continuous(u),
                    ActionDist::TanhNormal {
                        squash, min_std, ..
                    },
                ) => {
                    let w = hd / 2;
                    sebulba_core::distribution::tanh_normal_log_prob(
                        h,
                        &u[i * w..(i + 1) * w],
                        min_std,
                        &squash,
                    )
                }
                _ => unreachable!(),
            }
        })
        .collect()
}

/// At zero lag, before any gradient step and without observation
/// normalisation, the learner's log-probabilities are the actor's: the first
/// step's ratio is 1 (approximate KL ~ 0, nothing clipped), in both engines.
#[test]
fn at_zero_lag_the_first_steps_ratio_is_one_in_both_engines() {
    let (mut pendulum, mut continuous) = continuous_case();
    pendulum.network.obs_norm = false;
    let cases = [
        (
            "CartPole-v1",
            ModelSpec::new(
                &sebulba_envs::env_spec("CartPole-v1").unwrap(),
                &spec().network,
            )
            .unwrap(),
            {
                let mut d = toy_data(64);
                d.obs_dim = 4;
                d.observations = (0..64 * 4)
                    .map(|i| ((i * 37 % 11) as f32 - 5.0) / 5.0)
                    .collect::<Vec<f32>>()
                    .into();
                d
            },
        ),
        ("Pendulum-v1", pendulum, {
            continuous.old_log_probs.clear();
            continuous
        }),
    ];
    let mut c = cfg();
    (c.epochs, c.minibatches, c.ent_coef) = (1, 1, 0.0);
    for (env_id, s, mut data) in cases {
        for choice in [EngineChoice::cpu(), EngineChoice::Fused { threads: 1 }] {
            let mut ppo = Trainer::fresh(&s, c.adam_eps, 3, &choice).unwrap();
            data.old_log_probs = actor_log_probs(&ppo, env_id, &s, &data);
            let stats = crate::ppo::update(&mut ppo, &data, &c, 0.0, 0.2).unwrap();
            let engine = ppo.engine();
            assert!(
                stats.terms.approx_kl.abs() < 1e-6 && stats.terms.clip_fraction == 0.0,
                "{env_id} on {engine}: {stats:?}"
            );
            // Off by a little, the ratio is no longer 1: the check can fail.
            data.old_log_probs.iter_mut().for_each(|lp| *lp -= 0.05);
            let stats = crate::ppo::update(&mut ppo, &data, &c, 0.0, 0.2).unwrap();
            assert!(
                stats.terms.approx_kl > 1e-4,
                "{env_id} on {engine}: {stats:?}"
            );
        }
    }
}

/// A non-finite loss skips its step (weights and Adam untouched) in every
/// engine and device count, and the other steps go on.
#[test]
fn non_finite_steps_are_skipped_and_leave_the_weights_finite() {
    let _turn = COLLECTIVE_TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let s = spec();
    let mut c = cfg();
    c.epochs = 2;
    c.minibatches = 4;
    c.adv_norm = AdvantageNorm::Off;
    let finite = |ppo: &Trainer| params(ppo).iter().all(|x| x.is_finite());
    let (one, two) = one_and_two_devices(&s, &c, 5);
    let fused = Trainer::fresh(&s, c.adam_eps, 5, &EngineChoice::Fused { threads: 1 }).unwrap();
    for (label, mut ppo) in [("burn x1", one), ("burn x2", two), ("fused", fused)] {
        // Every sample's return is NaN: nothing steps, nothing moves.
        let mut all_bad = toy_data(64);
        all_bad.returns = vec![f32::NAN; 64];
        let before = params(&ppo);
        let stats = crate::ppo::update(&mut ppo, &all_bad, &c, 1e-2, 0.2).unwrap();
        assert_eq!(
            (stats.non_finite_steps, stats.minibatch_steps),
            (8, 0),
            "{label}: {stats:?}"
        );
        assert_eq!(before, params(&ppo), "{label}: weights moved");
        // One bad sample: only the minibatches holding it are skipped.
        let mut one_bad = toy_data(64);
        one_bad.advantages[17] = f32::INFINITY;
        let stats = crate::ppo::update(&mut ppo, &one_bad, &c, 1e-2, 0.2).unwrap();
        assert_eq!(
            stats.non_finite_steps, 2,
            "{label}: once per epoch: {stats:?}"
        );
        assert_eq!(stats.minibatch_steps, 6, "{label}: {stats:?}");
        assert!(
            stats.terms.policy_loss.is_finite() && finite(&ppo),
            "{label}"
        );
        assert_ne!(before, params(&ppo), "{label}: the rest stepped");
    }
    burn_collective::reset_collective::<Inner>();
}

/// A saved state with a NaN weight (checksums cannot catch what was written
/// that way) is refused on load.
#[test]
fn a_state_with_a_non_finite_weight_is_refused() {
    let s = spec();
    let c = cfg();
    let mut fresh = on_cpu(&s, &c, 1);
    let good = fresh.checkpoint_state().unwrap();
    let before = fresh.state().unwrap();
    let mut nan = good.clone();
    nan.state.params[3] = f32::NAN;
    let Err(e) = fresh.load_state(&nan) else {
        panic!("refused");
    };
    assert!(e.to_string().contains("non-finite"), "{e}");
    // Another network's state (one value short) is refused too, naming the part.
    let mut short = good.clone();
    short.state.m1.pop();
    let e = fresh.load_state(&short).expect_err("refused");
    assert!(e.to_string().contains("`m1`"), "{e}");
    assert_eq!(fresh.state().unwrap(), before, "the trainer is as it was");
}

/// `learner.threads = 0` splits a step only where a minibatch is big enough:
/// not CartPole's CleanRL minibatch of 128 rows of a 64x64 network, but Big
/// Two's preset minibatch of 512 rows of 256x256.
#[test]
fn auto_threads_split_only_big_minibatches() {
    let spec = |id: &str| {
        let cfg = RunConfig::preset(id).unwrap();
        let env = sebulba_envs::env_spec(id).unwrap();
        (ModelSpec::new(&env, &cfg.network).unwrap(), cfg)
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (cartpole, _) = spec("CartPole-v1");
    assert_eq!(crate::engine::threads::auto_threads(&cartpole, 128), 1);
    let (bigtwo, cfg) = spec("BigTwo-v0");
    let rows = cfg.samples_per_update() / cfg.ppo.minibatches;
    assert_eq!(rows, 512);
    assert_eq!(crate::engine::threads::auto_threads(&bigtwo, rows), cores);
    // An explicit count is honoured up to the cores, and capped there (each
    // thread holds a gradient buffer of the network's size).
    let (cartpole, mut cfg) = spec("CartPole-v1");
    for (asked, got) in [(1, 1), (256, cores)] {
        cfg.learner.threads = asked;
        let ppo = Trainer::for_run(&cartpole, &cfg).unwrap();
        assert_eq!((ppo.engine(), ppo.threads()), ("fused", got));
    }
}

/// What the learner's resume does (the state loaded, the checkpoint's f64
/// statistics set) publishes the parameters and statistics the original
/// would, bit for bit, on either engine and across them.
#[test]
fn a_resumed_trainer_publishes_the_file_the_original_would() {
    let mut s = spec();
    s.network.obs_norm = true;
    let c = cfg();
    let mut stats = sebulba_core::model::RunningMeanStd::new(2);
    stats.update(&[1.0, 2.0, 3.0, 6.0, -0.5, 0.25]);
    let engines = [EngineChoice::cpu(), EngineChoice::Fused { threads: 1 }];
    for (from, to) in engines
        .iter()
        .flat_map(|a| engines.iter().map(move |b| (a, b)))
    {
        let mut original = Trainer::fresh(&s, c.adam_eps, 4, from).unwrap();
        original.set_obs_stats(&stats);
        crate::ppo::update(&mut original, &toy_data(64), &c, 1e-2, 0.2).unwrap();
        let saved = original.checkpoint_state().unwrap();
        let mut resumed = Trainer::fresh(&s, c.adam_eps, 9, to).unwrap();
        resumed.load_state(&saved).unwrap();
        resumed.set_obs_stats(&stats);
        // (The header's key order varies: compare what the file holds.)
        let read = |t: &Trainer| sebulba_fused::file::read(&s.arch(), &t.safetensors().unwrap());
        let (got, want) = (read(&resumed).unwrap(), read(&original).unwrap());
        assert_eq!(got, want, "{from:?} -> {to:?}");
        assert!(
            want.1.is_some_and(|n| n.mean()[0] != 0.0),
            "statistics published"
        );
    }
}

/// A LayerNorm network (burn only) keeps its norms' scales and shifts, and
/// their Adam state, across a checkpoint: the resumed learner continues
/// exactly.
#[test]
fn a_layer_norm_network_resumes_exactly() {
    use sebulba_core::config::LayerNormPlacement;
    for placement in [LayerNormPlacement::Pre, LayerNormPlacement::Post] {
        let mut s = spec();
        s.network.layer_norm = placement;
        let c = cfg();
        let data = toy_data(64);
        let mut a = on_cpu(&s, &c, 2);
        crate::ppo::update(&mut a, &data, &c, 1e-2, 0.2).unwrap();
        let saved = a.checkpoint_state().unwrap();
        let layout_len = sebulba_fused::net::Layout::new(&s.arch()).len;
        assert_eq!(
            saved.state.params.len(),
            layout_len + 2 * 2 * 4,
            "{placement:?}"
        );
        let norms = &saved.state.params[layout_len..];
        assert!(
            norms.iter().any(|&v| v != 1.0 && v != 0.0),
            "{placement:?}: the norms trained"
        );
        let mut b = on_cpu(&s, &c, 8);
        b.load_state(&saved).unwrap();
        assert_eq!(b.state().unwrap(), saved.state, "{placement:?}");
        crate::ppo::update(&mut a, &data, &c, 1e-2, 0.2).unwrap();
        crate::ppo::update(&mut b, &data, &c, 1e-2, 0.2).unwrap();
        assert_eq!(params(&a), params(&b), "{placement:?}");
    }
}
