use super::replica::scalar;
use super::*;
use burn::module::Param;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{ElementConversion, Tensor, TensorData};
use burn_optim::GradientsParams;
use sebulba_core::CpuAutodiff;
use sebulba_core::config::{AdvantageNorm, NetworkConfig};
use sebulba_core::env::ActionSpace;

type B = CpuAutodiff;
type Inner = <B as AutodiffBackend>::InnerBackend;

fn cfg() -> PpoConfig {
    sebulba_core::config::RunConfig::preset("CartPole-v1")
        .unwrap()
        .ppo
}

fn spec() -> ModelSpec {
    ModelSpec {
        obs_dim: 2,
        action_space: ActionSpace::Discrete { n: 2 },
        network: NetworkConfig {
            hidden: vec![4],
            ..Default::default()
        },
    }
}

/// A model whose outputs do not depend on the input: zero weights, chosen biases.
fn constant_model(logits: [f32; 2], value: f32) -> ActorCritic<B> {
    let dev = Default::default();
    let mut m = spec().init::<B>(&dev);
    let zero = |p: &Param<Tensor<B, 2>>| Param::from_tensor(p.val().zeros_like());
    m.actor.layers[0].weight = zero(&m.actor.layers[0].weight);
    let critic = m.critic.as_mut().unwrap();
    critic.layers[0].weight = zero(&critic.layers[0].weight);
    m.policy_head.weight = zero(&m.policy_head.weight);
    m.value_head.weight = zero(&m.value_head.weight);
    m.policy_head.bias = Some(Param::from_tensor(Tensor::from_data(
        TensorData::new(logits.to_vec(), [2]),
        &dev,
    )));
    m.value_head.bias = Some(Param::from_tensor(Tensor::from_data(
        TensorData::new(vec![value], [1]),
        &dev,
    )));
    m
}

fn t1(v: Vec<f32>) -> Tensor<B, 1> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), &Default::default())
}

fn discrete_mb(
    actions: Vec<i64>,
    old_logp: Vec<f32>,
    adv: Vec<f32>,
    ret: Vec<f32>,
) -> Minibatch<B> {
    let n = actions.len();
    let dev = Default::default();
    Minibatch {
        obs: Tensor::from_data(
            TensorData::new(
                (0..2 * n).map(|i| i as f32 * 0.1).collect::<Vec<_>>(),
                [n, 2],
            ),
            &dev,
        ),
        actions: MbActions::Discrete(Tensor::from_data(TensorData::new(actions, [n]), &dev)),
        valid: None,
        old_logp: t1(old_logp),
        adv: t1(adv),
        ret: t1(ret.clone()),
        old_values: t1(vec![0.0; n]),
        noise: None,
    }
}

fn bias_grad(m: &ActorCritic<B>, total: Tensor<B, 1>, value_head: bool) -> Vec<f32> {
    let grads = GradientsParams::from_grads(total.backward(), m);
    let head = if value_head {
        &m.value_head
    } else {
        &m.policy_head
    };
    let id = head.bias.as_ref().unwrap().id;
    grads
        .get::<Inner, 1>(id)
        .map(|g| g.into_data().to_vec().unwrap())
        .unwrap_or_default()
}

fn dist() -> ActionDist {
    spec().dist()
}

#[test]
fn losses_match_hand_worked_values() {
    // logits [0, ln 3] -> p = [0.25, 0.75]; behaviour p = 0.5 for both taken actions.
    // ratios: action 1 -> 1.5, action 0 -> 0.5. clip 0.2.
    // sample 0 (adv +1): max(-1.5, -1.2) = -1.2; sample 1 (adv -1): max(0.5, 0.8) = 0.8
    // policy = -0.2; value = 0.5 * mean(0.25, 0.25) = 0.125; entropy = 0.5623351446
    // approx_kl = mean(0.5 - ln 1.5, -0.5 + ln 2) = 0.1438410362; clip fraction = 1
    let mut c = cfg();
    c.vf_coef = 0.5;
    c.ent_coef = 0.01;
    let m = constant_model([0.0, 3f32.ln()], 0.5);
    let mb = discrete_mb(
        vec![1, 0],
        vec![0.5f32.ln(); 2],
        vec![1.0, -1.0],
        vec![1.0, 0.0],
    );
    let l = ppo_losses(&m, mb, &dist(), &c, 0.2);
    let close = |got: f64, want: f64, what: &str| {
        assert!((got - want).abs() < 1e-6, "{what}: {got} vs {want}")
    };
    close(scalar(l.policy), -0.2, "policy");
    close(scalar(l.value), 0.125, "value");
    close(scalar(l.entropy), 0.562_335_144_6, "entropy");
    close(scalar(l.approx_kl), 0.143_841_036_2, "approx_kl");
    close(scalar(l.clip_fraction), 1.0, "clip_fraction");
    close(
        l.total.into_scalar().elem::<f64>(),
        -0.2 - 0.01 * 0.562_335_144_6 + 0.5 * 0.125,
        "total",
    );
    // A wider (annealed or configured) clip range changes the surrogate:
    // clip 0.6 -> sample 0: max(-1.5, -1.5) = -1.5; sample 1: max(0.5, 0.5) = 0.5.
    let mb = discrete_mb(
        vec![1, 0],
        vec![0.5f32.ln(); 2],
        vec![1.0, -1.0],
        vec![1.0, 0.0],
    );
    close(
        scalar(ppo_losses(&m, mb, &dist(), &c, 0.6).policy),
        -0.5,
        "policy at clip 0.6",
    );
}

#[test]
fn clipped_side_has_no_policy_gradient() {
    // Ratio 1.5 with positive advantage is past 1 + clip: the surrogate is flat there,
    // so the policy head's bias gets no gradient from the policy term.
    let mut c = cfg();
    c.ent_coef = 0.0;
    c.vf_coef = 0.0;
    let m = constant_model([0.0, 3f32.ln()], 0.0);
    let l = ppo_losses(
        &m,
        discrete_mb(vec![1], vec![0.5f32.ln()], vec![1.0], vec![0.0]),
        &dist(),
        &c,
        0.2,
    );
    let g = bias_grad(&m, l.total, false);
    assert!(g.iter().all(|x| x.abs() < 1e-7), "{g:?}");
    // Inside the trust region (behaviour p = 0.7, ratio 1.07) the gradient is non-zero.
    let l = ppo_losses(
        &m,
        discrete_mb(vec![1], vec![0.7f32.ln()], vec![1.0], vec![0.0]),
        &dist(),
        &c,
        0.2,
    );
    let g = bias_grad(&m, l.total, false);
    assert!(g[1] < -1e-3, "{g:?}");
}

#[test]
fn value_clipping_takes_the_max_and_has_no_gradient_outside_on_the_clipped_side() {
    // V_old = 0, eps_v = 0.2, vf_coef 1, no policy/entropy terms (adv 0, ent 0).
    let mut c = cfg();
    c.ent_coef = 0.0;
    c.vf_coef = 1.0;
    c.clip_value_loss = true;
    c.value_clip_coef = 0.2;
    let run = |c: &PpoConfig, v: f32, ret: f32| {
        let m = constant_model([0.0, 0.0], v);
        let mb = discrete_mb(vec![0], vec![0.5f32.ln()], vec![0.0], vec![ret]);
        let l = ppo_losses(&m, mb, &dist(), c, 0.2);
        let value = scalar(l.value);
        (value, bias_grad(&m, l.total, true)[0])
    };
    // V = 1.5 overshoots R = 1 beyond the trust region: unclipped 0.25, clipped
    // (0.2 - 1)^2 = 0.64; the max is the clipped term, flat in V: zero gradient.
    let (value, g) = run(&c, 1.5, 1.0);
    assert!((value - 0.5 * 0.64).abs() < 1e-6, "{value}");
    assert_eq!(g, 0.0);
    // Inside the region (V = 0.1): both terms equal (0.9^2), gradient V - R = -0.9.
    let (value, g) = run(&c, 0.1, 1.0);
    assert!((value - 0.5 * 0.81).abs() < 1e-6, "{value}");
    assert!((g + 0.9).abs() < 1e-5, "{g}");
    // Outside on the unclipped side (V = -0.5): (V - R)^2 = 2.25 beats the clipped
    // 1.44, so the gradient is V - R = -1.5 (a min would have picked 1.44, a mean 1.845).
    let (value, g) = run(&c, -0.5, 1.0);
    assert!((value - 0.5 * 2.25).abs() < 1e-6, "{value}");
    assert!((g + 1.5).abs() < 1e-5, "{g}");
    // Without clipping the overshoot case has its plain gradient V - R = 0.5.
    c.clip_value_loss = false;
    let (value, g) = run(&c, 1.5, 1.0);
    assert!(
        (value - 0.5 * 0.25).abs() < 1e-6 && (g - 0.5).abs() < 1e-5,
        "{value} {g}"
    );
}

#[test]
fn the_loss_uses_advantages_as_given() {
    // logits equal, behaviour p = 0.5: ratio 1 everywhere, policy = -mean(adv) = -2.
    // (Per-minibatch normalisation happens on the whole minibatch before sharding.)
    let m = constant_model([0.0, 0.0], 0.0);
    let mb = discrete_mb(
        vec![0, 1],
        vec![0.5f32.ln(); 2],
        vec![1.0, 3.0],
        vec![0.0; 2],
    );
    assert!((scalar(ppo_losses(&m, mb, &dist(), &cfg(), 0.2).policy) + 2.0).abs() < 1e-6);
}

#[test]
fn masked_actions_change_log_probs_in_the_loss() {
    // logits [0, ln 3, 5] with the third action masked: p(1) = 0.75 as for two actions.
    let spec3 = ModelSpec {
        action_space: ActionSpace::Discrete { n: 3 },
        ..spec()
    };
    let dev = Default::default();
    let mut m = spec3.init::<B>(&dev);
    m.actor.layers[0].weight = Param::from_tensor(m.actor.layers[0].weight.val().zeros_like());
    m.policy_head.weight = Param::from_tensor(m.policy_head.weight.val().zeros_like());
    m.policy_head.bias = Some(Param::from_tensor(Tensor::from_data(
        TensorData::new(vec![0.0f32, 3f32.ln(), 5.0], [3]),
        &dev,
    )));
    let mut mb = discrete_mb(vec![1], vec![0.75f32.ln()], vec![1.0], vec![0.0]);
    mb.valid = Some(Tensor::from_data(
        TensorData::new(vec![true, true, false], [1, 3]),
        &dev,
    ));
    let l = ppo_losses(&m, mb, &spec3.dist(), &cfg(), 0.2);
    // The behaviour log-prob equals the masked one: ratio 1, KL 0.
    assert!(scalar(l.approx_kl).abs() < 1e-6);
    assert!((scalar(l.entropy) - 0.562_335_144_6).abs() < 1e-6);
}

#[test]
fn global_norm_clipping_scales_all_gradients_together() {
    let m = spec().init::<B>(&Default::default());
    let dev = Default::default();
    let obs =
        Tensor::<B, 2>::from_data(TensorData::new(vec![3.0f32, -2.0, 1.0, 4.0], [2, 2]), &dev);
    let loss = (m.value(obs.clone()) - 100.0).powi_scalar(2).mean() + m.policy(obs).sum();
    let mut grads = GradientsParams::from_grads(loss.backward(), &m);
    let mut copy = GradientsParams::from_grads(
        (m.value(Tensor::zeros([1, 2], &dev)) * 0.0)
            .sum()
            .backward(),
        &m,
    );
    let before = clip_global_norm(&m, &mut grads, f64::INFINITY);
    assert!(before > 1.0, "{before}");
    let reported = clip_global_norm(&m, &mut grads, 0.5);
    assert!((reported - before).abs() < 1e-6 * before);
    let after = clip_global_norm(&m, &mut grads, f64::INFINITY);
    assert!((after - 0.5).abs() < 1e-4, "{after}");
    // Below the limit nothing changes.
    let zero = clip_global_norm(&m, &mut copy, 0.5);
    assert!(zero < 0.5);
}

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
    }
}

#[test]
fn an_update_moves_probability_toward_advantaged_actions() {
    let s = spec();
    let mut c = cfg();
    c.epochs = 4;
    c.minibatches = 2;
    c.ent_coef = 0.0;
    let mut ppo = Ppo::<B>::new(&s, &c, 3, vec![Default::default()]).unwrap();
    let n = 64;
    let data = toy_data(n);
    let p1 = |ppo: &Ppo<B>| {
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
    let stats = ppo.update(&data, &c, 1e-2, 0.2).unwrap();
    let after = p1(&ppo);
    assert!(after > before + 0.02, "{before} -> {after}");
    assert!(stats.value_loss > 0.0 && stats.grad_norm > 0.0 && stats.approx_kl.is_finite());
    assert_eq!((stats.minibatch_steps, stats.early_stopped), (8, false));
}

#[test]
fn target_kl_stops_the_update_early() {
    let s = spec();
    let mut c = cfg();
    c.epochs = 50;
    c.minibatches = 2;
    c.target_kl = 0.01;
    let mut ppo = Ppo::<B>::new(&s, &c, 3, vec![Default::default()]).unwrap();
    let stats = ppo.update(&toy_data(64), &c, 5e-2, 0.2).unwrap();
    assert!(stats.early_stopped, "{stats:?}");
    assert!(
        stats.minibatch_steps >= 1 && stats.minibatch_steps < 100,
        "{stats:?}"
    );
}

#[test]
fn a_continuous_update_moves_the_mean_toward_advantaged_actions() {
    let env = sebulba_core::env::env_spec("Pendulum-v1").unwrap();
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
    let mut ppo = Ppo::<B>::new(&s, &c, 5, vec![Default::default()]).unwrap();
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
    };
    let mean_of = |ppo: &Ppo<B>| {
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
    let stats = ppo.update(&data, &c, 1e-2, 0.2).unwrap();
    let after = mean_of(&ppo);
    assert!(after > before + 0.05, "{before} -> {after}");
    // The first step's ratio is 1: the actor's CPU log-prob equals the learner's.
    assert!(
        stats.approx_kl.is_finite() && stats.entropy.is_finite(),
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
    let mut ppo = Ppo::<B>::new(&s, &c, 3, vec![Default::default()]).unwrap();
    let mut stats = sebulba_core::model::RunningMeanStd::new(2);
    stats.update(&[1.0, 2.0, 3.0, 6.0]);
    ppo.set_obs_stats(&stats);
    ppo.update(&toy_data(64), &c, 1e-2, 0.2).unwrap();
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
    let env = sebulba_core::env::env_spec("Pendulum-v1").unwrap();
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
    };
    (s, data)
}

/// Learners on one and on two CPU devices from one initial model: burn's init
/// draws from a process-wide RNG that tests running in parallel also draw from.
fn one_and_two_devices(s: &ModelSpec, c: &PpoConfig, seed: u64) -> (Ppo<B>, Ppo<B>) {
    let dev = burn::tensor::Device::<B>::default();
    let init = s.init::<B>(&dev);
    (
        Ppo::<B>::with_model(s, init.clone(), c, seed, vec![dev]).unwrap(),
        Ppo::<B>::with_model(s, init, c, seed, vec![dev, dev]).unwrap(),
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
        let s1 = one.update(&data, &c, 3e-3, 0.2).unwrap();
        let s2 = two.update(&data, &c, 3e-3, 0.2).unwrap();
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
            (s1.policy_loss, s2.policy_loss, "policy_loss"),
            (s1.value_loss, s2.value_loss, "value_loss"),
            (s1.entropy, s2.entropy, "entropy"),
            (s1.approx_kl, s2.approx_kl, "approx_kl"),
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
    let s1 = one.update(&data, &c, 5e-2, 0.2).unwrap();
    let s2 = two.update(&data, &c, 5e-2, 0.2).unwrap();
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
    let mut a = Ppo::<B>::new(&s, &c, 1, vec![dev]).unwrap();
    for _ in 0..3 {
        a.update(&data, &c, 1e-2, 0.2).unwrap();
    }
    let saved = a.save_state().unwrap();
    let saved_moments = a.replicas()[0].optim_state_by_param().unwrap();
    assert!(!saved_moments.is_empty(), "Adam has state after 3 updates");

    // Another run's learner (other init, other RNG) restored from the checkpoint.
    let mut b = Ppo::<B>::new(&s, &c, 99, vec![dev]).unwrap();
    assert_ne!(flat_params(a.model()), flat_params(b.model()));
    b.load_state(&saved).unwrap();
    assert_eq!(flat_params(a.model()), flat_params(b.model()));
    assert_eq!(
        b.replicas()[0].optim_state_by_param().unwrap(),
        saved_moments,
        "the resumed optimizer state (both moments and the step count, per parameter id) equals the saved one"
    );

    // A control with the same weights and RNG but a fresh Adam.
    let fresh_adam = Ppo::<B>::new(&s, &c, 5, vec![dev])
        .unwrap()
        .save_state()
        .unwrap()
        .optim;
    let mut control = Ppo::<B>::new(&s, &c, 7, vec![dev]).unwrap();
    control
        .load_state(&PpoState {
            optim: fresh_adam,
            ..saved.clone()
        })
        .unwrap();
    a.update(&data, &c, 1e-2, 0.2).unwrap();
    b.update(&data, &c, 1e-2, 0.2).unwrap();
    control.update(&data, &c, 1e-2, 0.2).unwrap();
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
