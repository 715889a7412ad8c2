//! The burn engine's loss and gradient clipping against hand-worked values.

use super::replica::scalar;
use super::*;
use burn::module::Param;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{ElementConversion, Tensor, TensorData};
use burn_optim::GradientsParams;
use sebulba_core::CpuAutodiff;
use sebulba_core::config::{NetworkConfig, PpoConfig};
use sebulba_envs::ActionSpace;

pub(crate) type B = CpuAutodiff;
pub(crate) type Inner = <B as AutodiffBackend>::InnerBackend;

pub(crate) fn cfg() -> PpoConfig {
    sebulba_core::config::RunConfig::preset("CartPole-v1")
        .unwrap()
        .ppo
}

pub(crate) fn spec() -> ModelSpec {
    ModelSpec {
        input_scale: 1.0,
        obs_dim: 2,
        image: None,
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
) -> MinibatchTensors<B> {
    let n = actions.len();
    let dev = Default::default();
    MinibatchTensors {
        trained: None,
        seq: None,
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
        input_scale: 1.0,
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

/// Byte observations (as an image env's), and the same update's figures.
fn byte_data(n: usize, salt: usize) -> UpdateData {
    UpdateData {
        obs_dim: 2,
        observations: (0..n * 2)
            .map(|i| ((i * 37 + salt) % 251) as u8)
            .collect::<Vec<u8>>()
            .into(),
        actions: crate::trajectory::BatchActions::Discrete(
            (0..n).map(|i| (i % 2) as i32).collect(),
        ),
        masks: None,
        old_log_probs: vec![0.5f32.ln(); n],
        advantages: (0..n).map(|i| ((i * 7 % 5) as f32 - 2.0) / 2.0).collect(),
        returns: (0..n).map(|i| (i % 3) as f32).collect(),
        old_values: vec![0.0; n],
        weights: None,
        sequences: None,
    }
}

/// Minibatch steps over `data` (rows in a scrambled order), then the
/// parameters; `other` is stepped on once in the middle, while `data` is
/// held, to show a minibatch of other data is not read from what is held.
fn steps_on(engine: &mut dyn UpdateEngine, data: &UpdateData, other: &UpdateData) -> Vec<f32> {
    let c = cfg();
    let step = |e: &mut dyn UpdateEngine, d: &UpdateData, idx: &[usize]| {
        let adv: Vec<f32> = idx.iter().map(|&i| d.advantages[i]).collect();
        e.step(&Minibatch {
            data: d,
            sequences: &[],
            states: &sebulba_fused::PolicyState::default(),
            idx,
            adv: &adv,
            noise: &[],
            lr: 1e-2,
            max_grad_norm: 0.5,
            loss: crate::data::Loss::Ppo { cfg: &c, clip: 0.2 },
        })
        .unwrap();
    };
    let n = data.len();
    let order: Vec<usize> = (0..n).map(|i| (i * 13 + 5) % n).collect();
    engine.begin_update(data);
    for (k, idx) in order.chunks(n / 4).enumerate() {
        step(engine, data, idx);
        if k == 1 {
            step(engine, other, &order[..n / 4]);
        }
    }
    engine.end_update();
    engine.save().unwrap().params
}

/// An engine holding an update's observations on its device (as on a GPU)
/// takes exactly the steps of one copying every minibatch from the host:
/// the rows gathered there are the rows, widened the same way.
#[test]
fn held_observations_give_the_same_steps_as_copies_from_the_host() {
    let s = spec();
    let state = initial_state(&s, 5);
    let (data, other) = (byte_data(64, 0), byte_data(64, 101));
    let engine = || BurnEngine::<B>::new(&s, &state, 1e-5, vec![Default::default()]).unwrap();
    let copied = steps_on(&mut engine(), &data, &other);
    let held = steps_on(&mut engine().holding_observations(), &data, &other);
    assert_eq!(held, copied);
    assert_ne!(copied, state.params, "the steps moved the parameters");
}
