use super::*;
use crate::COLLECTIVE_TEST_LOCK;
use crate::engine::EngineState;
use crate::trainer::{Trainer, TrainerState};
use crate::trajectory::BatchActions;
use burn::module::Param;
use burn::tensor::{Tensor, TensorData};
use sebulba_core::config::RunConfig;
use sebulba_core::config::{AdvantageNorm, NetworkConfig};
use sebulba_core::model::{ActorCritic, ModelSpec};

// The burn engine's tests own the small CartPole-like case both use.
use crate::engine::burn::tests::{B, Inner, cfg, spec};

fn toy_data(n: usize) -> UpdateData {
    UpdateData {
        obs_dim: 2,
        observations: (0..n * 2)
            .map(|i| ((i * 37 % 11) as f32 - 5.0) / 5.0)
            .collect(),
        actions: BatchActions::Discrete((0..n).map(|i| (i % 2) as i32).collect()),
        masks: None,
        old_log_probs: vec![0.5f32.ln(); n],
        advantages: (0..n)
            .map(|i| if i % 2 == 1 { 1.0 } else { -1.0 })
            .collect(),
        returns: vec![1.0; n],
        old_values: vec![0.0; n],
        weights: None,
    }
}

#[test]
fn an_update_moves_probability_toward_advantaged_actions() {
    let s = spec();
    let mut c = cfg();
    c.epochs = 4;
    c.minibatches = 2;
    c.ent_coef = 0.0;
    let mut ppo = Trainer::<B>::new(&s, &c, 3, vec![Default::default()]).unwrap();
    let n = 64;
    let data = toy_data(n);
    let p1 = |ppo: &Trainer<B>| {
        let logits: Vec<f32> = ppo
            .inference_model()
            .policy(Tensor::from_data(
                TensorData::new(data.observations.clone(), [n, 2]),
                &Default::default(),
            ))
            .into_data()
            .to_vec()
            .unwrap();
        logits
            .chunks(2)
            .map(|l| 1.0 / (1.0 + (l[0] - l[1]).exp()))
            .sum::<f32>()
            / n as f32
    };
    let before = p1(&ppo);
    let stats = crate::ppo::update(&mut ppo, &data, &c, 1e-2, 0.2).unwrap();
    let after = p1(&ppo);
    assert!(after > before + 0.02, "{before} -> {after}");
    assert!(
        stats.terms.value_loss > 0.0 && stats.grad_norm > 0.0 && stats.terms.approx_kl.is_finite()
    );
    assert_eq!((stats.minibatch_steps, stats.early_stopped), (8, false));
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
    // The burn backend's RNG is process-wide and other tests draw from it
    // meanwhile: every update starts from one model, cloned.
    let first = Trainer::<B>::new(&s, &c, 3, vec![Default::default()]).unwrap();
    let model = first.model().clone();
    let logits = |ppo: &Trainer<B>| -> Vec<f32> {
        let obs = Tensor::from_data(
            TensorData::new(data.observations.clone(), [n, 2]),
            &Default::default(),
        );
        ppo.inference_model()
            .policy(obs)
            .into_data()
            .to_vec()
            .unwrap()
    };
    let start = logits(&first);
    let policy_after = |weights: Option<Vec<f32>>| {
        let mut ppo =
            Trainer::<B>::with_model(&s, model.clone(), &c, 3, vec![Default::default()]).unwrap();
        let data = UpdateData {
            weights,
            ..data.clone()
        };
        crate::ppo::update(&mut ppo, &data, &c, 1e-2, 0.2).unwrap();
        logits(&ppo)
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
    let mut ppo = Trainer::<B>::new(&s, &c, 3, vec![Default::default()]).unwrap();
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
    );
    let mut c = cfg();
    c.epochs = 10;
    c.minibatches = 2;
    c.ent_coef = 0.0;
    let mut ppo = Trainer::<B>::new(&s, &c, 5, vec![Default::default()]).unwrap();
    let n = 128;
    let observations: Vec<f32> = (0..n * 3)
        .map(|i| ((i * 13 % 7) as f32 - 3.0) / 3.0)
        .collect();
    let model = ppo.inference_model();
    let head: Vec<f32> = model
        .policy(Tensor::from_data(
            TensorData::new(observations.clone(), [n, 3]),
            &Default::default(),
        ))
        .into_data()
        .to_vec()
        .unwrap();
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
        observations: observations.clone(),
        actions: BatchActions::Continuous(u),
        masks: None,
        old_log_probs,
        advantages: (0..n)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect(),
        returns: vec![0.0; n],
        old_values: vec![0.0; n],
        weights: None,
    };
    let mean_of = |ppo: &Trainer<B>| {
        let h: Vec<f32> = ppo
            .inference_model()
            .policy(Tensor::from_data(
                TensorData::new(observations.clone(), [n, 3]),
                &Default::default(),
            ))
            .into_data()
            .to_vec()
            .unwrap();
        h.chunks(2).map(|r| r[0]).sum::<f32>() / n as f32
    };
    let before = mean_of(&ppo);
    let stats = crate::ppo::update(&mut ppo, &data, &c, 1e-2, 0.2).unwrap();
    let after = mean_of(&ppo);
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
        network: net,
        ..spec()
    };
    let c = cfg();
    let mut ppo = Trainer::<B>::new(&s, &c, 3, vec![Default::default()]).unwrap();
    let mut stats = sebulba_core::model::RunningMeanStd::new(2);
    stats.update(&[1.0, 2.0, 3.0, 6.0]);
    ppo.set_obs_stats(&stats);
    crate::ppo::update(&mut ppo, &toy_data(64), &c, 1e-2, 0.2).unwrap();
    let n = ppo.inference_model().obs_norm.unwrap();
    let mean: Vec<f32> = n.mean.val().into_data().to_vec().unwrap();
    let var: Vec<f32> = n.var.val().into_data().to_vec().unwrap();
    assert_eq!(mean, vec![2.0, 4.0]);
    assert_eq!(var, vec![1.0, 4.0]);
}

fn flat_params<Bk: burn::tensor::backend::Backend>(m: &ActorCritic<Bk>) -> Vec<f32> {
    struct Collect(Vec<f32>);
    impl<Bk: burn::tensor::backend::Backend> burn::module::ModuleVisitor<Bk> for Collect {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<Bk, D>>) {
            self.0.extend(p.val().into_data().to_vec::<f32>().unwrap());
        }
    }
    let mut c = Collect(Vec::new());
    burn::module::Module::visit(m, &mut c);
    c.0
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
    );
    let n = 96;
    let data = UpdateData {
        obs_dim: 3,
        observations: (0..n * 3)
            .map(|i| ((i * 29 % 17) as f32 - 8.0) / 8.0)
            .collect(),
        actions: BatchActions::Continuous(
            (0..n).map(|i| ((i * 7 % 5) as f32 - 2.0) / 2.0).collect(),
        ),
        masks: None,
        old_log_probs: (0..n).map(|i| -1.0 - (i % 3) as f32 * 0.1).collect(),
        advantages: (0..n).map(|i| ((i * 11 % 9) as f32 - 4.0) / 4.0).collect(),
        returns: (0..n).map(|i| (i % 4) as f32).collect(),
        old_values: vec![0.5; n],
        weights: None,
    };
    (s, data)
}

/// Learners on one and on two CPU devices from one initial model: burn's init
/// draws from a process-wide RNG that tests running in parallel also draw from.
fn one_and_two_devices(s: &ModelSpec, c: &PpoConfig, seed: u64) -> (Trainer<B>, Trainer<B>) {
    let dev = burn::tensor::Device::<B>::default();
    let init = s.init::<B>(&dev);
    (
        Trainer::<B>::with_model(s, init.clone(), c, seed, vec![dev]).unwrap(),
        Trainer::<B>::with_model(s, init, c, seed, vec![dev, dev]).unwrap(),
    )
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
        let before = flat_params(one.model());
        assert_eq!(
            before,
            flat_params(two.model()),
            "{label}: same initial weights"
        );
        let s1 = crate::ppo::update(&mut one, &data, &c, 3e-3, 0.2).unwrap();
        let s2 = crate::ppo::update(&mut two, &data, &c, 3e-3, 0.2).unwrap();
        let p1 = flat_params(one.model());
        assert!(
            max_rel_diff(&before, &p1) > 1e-3,
            "{label}: the update moved nothing"
        );
        for (i, r) in two.replicas().iter().enumerate() {
            let d = max_rel_diff(&p1, &flat_params(r.model()));
            eprintln!("{label}: replica {i} max relative difference {d:e}");
            assert!(
                d < 1e-5,
                "{label}: replica {i} differs from one device by {d:e}"
            );
        }
        assert_eq!(
            flat_params(two.replicas()[0].model()),
            flat_params(two.replicas()[1].model()),
            "{label}: replicas drifted apart"
        );
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
    assert_eq!(
        flat_params(two.replicas()[0].model()),
        flat_params(two.replicas()[1].model())
    );
    burn_collective::reset_collective::<Inner>();
}

#[test]
fn a_restored_ppo_has_the_saved_adam_state_and_continues_exactly() {
    let s = spec();
    let mut c = cfg();
    c.epochs = 2;
    c.minibatches = 2;
    let dev = burn::tensor::Device::<B>::default();
    let data = toy_data(64);
    let mut a = Trainer::<B>::new(&s, &c, 1, vec![dev]).unwrap();
    for _ in 0..3 {
        crate::ppo::update(&mut a, &data, &c, 1e-2, 0.2).unwrap();
    }
    let saved = a.save_state().unwrap();
    let saved_moments = a.replicas()[0].optim_state_by_param().unwrap();
    assert!(!saved_moments.is_empty(), "Adam has state after 3 updates");

    // Another run's learner (other init, other RNG) restored from the checkpoint.
    let mut b = Trainer::<B>::new(&s, &c, 99, vec![dev]).unwrap();
    assert_ne!(flat_params(a.model()), flat_params(b.model()));
    b.load_state(&saved).unwrap();
    assert_eq!(flat_params(a.model()), flat_params(b.model()));
    assert_eq!(
        b.replicas()[0].optim_state_by_param().unwrap(),
        saved_moments,
        "the resumed optimizer state (both moments and the step count, per parameter id) equals the saved one"
    );

    // A control with the same weights and RNG but a fresh Adam.
    let fresh_adam = Trainer::<B>::new(&s, &c, 5, vec![dev])
        .unwrap()
        .save_state()
        .unwrap()
        .engine
        .optim;
    let mut control = Trainer::<B>::new(&s, &c, 7, vec![dev]).unwrap();
    control
        .load_state(&TrainerState {
            engine: EngineState {
                optim: fresh_adam,
                ..saved.engine.clone()
            },
            ..saved.clone()
        })
        .unwrap();
    crate::ppo::update(&mut a, &data, &c, 1e-2, 0.2).unwrap();
    crate::ppo::update(&mut b, &data, &c, 1e-2, 0.2).unwrap();
    crate::ppo::update(&mut control, &data, &c, 1e-2, 0.2).unwrap();
    assert_eq!(
        flat_params(a.model()),
        flat_params(b.model()),
        "the resumed learner takes exactly the step the original takes"
    );
    assert!(
        max_rel_diff(&flat_params(a.model()), &flat_params(control.model())) > 1e-4,
        "without the saved moments the step differs (so the test can fail)"
    );
}

/// The behaviour log-probabilities an actor computes for `data`'s actions with
/// the weights `ppo` would publish now (the actor's inference path).
pub(crate) fn actor_log_probs(
    ppo: &Trainer<B>,
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
    let bytes = sebulba_core::weights::to_safetensors(&ppo.inference_model(), spec).unwrap();
    policy.load(1, bytes).unwrap();
    let n = data.advantages.len();
    let head = policy.head(&data.observations, n);
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
            ),
            {
                let mut d = toy_data(64);
                d.obs_dim = 4;
                d.observations = (0..64 * 4)
                    .map(|i| ((i * 37 % 11) as f32 - 5.0) / 5.0)
                    .collect();
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
        for fused in [false, true] {
            let mut ppo = Trainer::<B>::new(&s, &c, 3, vec![Default::default()]).unwrap();
            if fused {
                ppo.use_fused(1).unwrap();
            }
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
    let finite = |ppo: &Trainer<B>| flat_params(ppo.model()).iter().all(|x| x.is_finite());
    let (one, two) = one_and_two_devices(&s, &c, 5);
    let mut fused = Trainer::<B>::new(&s, &c, 5, vec![Default::default()]).unwrap();
    fused.use_fused(1).unwrap();
    for (label, mut ppo) in [("burn x1", one), ("burn x2", two), ("fused", fused)] {
        // Every sample's return is NaN: nothing steps, nothing moves.
        let mut all_bad = toy_data(64);
        all_bad.returns = vec![f32::NAN; 64];
        let before = flat_params(ppo.model());
        let stats = crate::ppo::update(&mut ppo, &all_bad, &c, 1e-2, 0.2).unwrap();
        assert_eq!(
            (stats.non_finite_steps, stats.minibatch_steps),
            (8, 0),
            "{label}: {stats:?}"
        );
        assert_eq!(before, flat_params(ppo.model()), "{label}: weights moved");
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
        assert_ne!(
            before,
            flat_params(ppo.model()),
            "{label}: the rest stepped"
        );
    }
    burn_collective::reset_collective::<Inner>();
}

/// A saved state with a NaN weight (checksums cannot catch what was written
/// that way) is refused on load.
#[test]
fn a_state_with_a_non_finite_weight_is_refused() {
    let s = spec();
    let c = cfg();
    let mut model = s.init::<B>(&Default::default());
    let shape = model.value_head.weight.val().shape();
    let nan = vec![f32::NAN; shape.num_elements()];
    model.value_head.weight = Param::from_tensor(Tensor::from_data(
        TensorData::new(nan, shape),
        &Default::default(),
    ));
    let mut bad = Trainer::<B>::with_model(&s, model, &c, 1, vec![Default::default()]).unwrap();
    let state = bad.save_state().unwrap();
    let mut fresh = Trainer::<B>::new(&s, &c, 1, vec![Default::default()]).unwrap();
    let Err(e) = fresh.load_state(&state) else {
        panic!("refused");
    };
    assert!(e.to_string().contains("non-finite"), "{e}");
}

/// `learner.threads = 0` splits a step only where a minibatch is big enough:
/// not CartPole's CleanRL minibatch of 128 rows of a 64x64 network, but Big
/// Two's preset minibatch of 512 rows of 256x256.
#[test]
fn auto_threads_split_only_big_minibatches() {
    let spec = |id: &str| {
        let cfg = RunConfig::preset(id).unwrap();
        let env = sebulba_envs::env_spec(id).unwrap();
        (ModelSpec::new(&env, &cfg.network), cfg)
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
        let ppo = Trainer::<B>::for_run(&cartpole, &cfg, vec![Default::default()]).unwrap();
        assert_eq!((ppo.engine(), ppo.threads()), ("fused", got));
    }
}
