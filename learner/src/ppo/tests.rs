use super::*;
use sebulba_core::CpuAutodiff;
use sebulba_core::config::{Activation, NetworkConfig};
use sebulba_core::env::ActionSpace;

type B = CpuAutodiff;

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
            activation: Activation::Tanh,
        },
    }
}

/// A model whose outputs do not depend on the input: zero weights, chosen biases.
fn constant_model(logits: [f32; 2], value: f32) -> ActorCritic<B> {
    let dev = Default::default();
    let mut m = spec().init::<B>(&dev);
    let zero = |p: &Param<Tensor<B, 2>>| Param::from_tensor(p.val().zeros_like());
    m.actor.layers[0].weight = zero(&m.actor.layers[0].weight);
    m.critic.layers[0].weight = zero(&m.critic.layers[0].weight);
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

#[test]
fn losses_match_hand_worked_values() {
    // logits [0, ln 3] -> p = [0.25, 0.75]; behaviour p = 0.5 for both taken actions.
    // ratios: action 1 -> 1.5, action 0 -> 0.5. clip 0.2.
    // sample 0 (adv +1): max(-1.5, -1.2) = -1.2; sample 1 (adv -1): max(0.5, 0.8) = 0.8
    // policy = -0.2; value = 0.5 * mean(0.25, 0.25) = 0.125; entropy = 0.5623351446
    // approx_kl = mean(0.5 - ln 1.5, -0.5 + ln 2) = 0.1438410362; clip fraction = 1
    let mut c = cfg();
    c.clip_coef = 0.2;
    c.vf_coef = 0.5;
    c.ent_coef = 0.01;
    let m = constant_model([0.0, 3f32.ln()], 0.5);
    let dev = Default::default();
    let obs =
        Tensor::<B, 2>::from_data(TensorData::new(vec![0.3f32, -1.0, 2.0, 0.5], [2, 2]), &dev);
    let actions = Tensor::<B, 1, Int>::from_data(TensorData::new(vec![1i64, 0], [2]), &dev);
    let l = ppo_losses(
        &m,
        obs,
        actions,
        t1(vec![0.5f32.ln(); 2]),
        t1(vec![1.0, -1.0]),
        t1(vec![1.0, 0.0]),
        &c,
    );
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
}

#[test]
fn clipped_side_has_no_policy_gradient() {
    // Ratio 1.5 with positive advantage is past 1 + clip: the surrogate is flat there,
    // so the policy head's bias gets no gradient from the policy term.
    let mut c = cfg();
    c.ent_coef = 0.0;
    c.vf_coef = 0.0;
    let m = constant_model([0.0, 3f32.ln()], 0.0);
    let dev = Default::default();
    let obs = Tensor::<B, 2>::from_data(TensorData::new(vec![0.0f32, 0.0], [1, 2]), &dev);
    let actions = Tensor::<B, 1, Int>::from_data(TensorData::new(vec![1i64], [1]), &dev);
    let l = ppo_losses(
        &m,
        obs.clone(),
        actions.clone(),
        t1(vec![0.5f32.ln()]),
        t1(vec![1.0]),
        t1(vec![0.0]),
        &c,
    );
    let grads = GradientsParams::from_grads(l.total.backward(), &m);
    let bias_id = m.policy_head.bias.as_ref().unwrap().id;
    let g: Vec<f32> = grads
        .get::<<B as AutodiffBackend>::InnerBackend, 1>(bias_id)
        .map(|g| g.into_data().to_vec().unwrap())
        .unwrap_or(vec![0.0, 0.0]);
    assert!(g.iter().all(|x| x.abs() < 1e-7), "{g:?}");
    // Inside the trust region (behaviour p = 0.7, ratio 1.07) the gradient is non-zero.
    let l = ppo_losses(
        &m,
        obs,
        actions,
        t1(vec![0.7f32.ln()]),
        t1(vec![1.0]),
        t1(vec![0.0]),
        &c,
    );
    let grads = GradientsParams::from_grads(l.total.backward(), &m);
    let g: Vec<f32> = grads
        .get::<<B as AutodiffBackend>::InnerBackend, 1>(bias_id)
        .unwrap()
        .into_data()
        .to_vec()
        .unwrap();
    assert!(g[1] < -1e-3, "{g:?}");
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

#[test]
fn an_update_moves_probability_toward_advantaged_actions() {
    let s = spec();
    let mut c = cfg();
    c.epochs = 4;
    c.minibatches = 2;
    c.ent_coef = 0.0;
    let mut ppo = Ppo::<B>::new(&s, &c, 3, Default::default());
    let n = 64;
    let obs: Vec<f32> = (0..n * 2)
        .map(|i| ((i * 37 % 11) as f32 - 5.0) / 5.0)
        .collect();
    let data = UpdateData {
        obs_dim: 2,
        observations: obs.clone(),
        actions: (0..n).map(|i| (i % 2) as i32).collect(),
        old_log_probs: vec![0.5f32.ln(); n],
        advantages: (0..n)
            .map(|i| if i % 2 == 1 { 1.0 } else { -1.0 })
            .collect(),
        returns: vec![1.0; n],
    };
    let p1 = |ppo: &Ppo<B>| {
        let logits: Vec<f32> = ppo
            .inference_model()
            .policy(Tensor::from_data(
                TensorData::new(obs.clone(), [n, 2]),
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
    let stats = ppo.update(&data, &c, 1e-2);
    let after = p1(&ppo);
    assert!(after > before + 0.02, "{before} -> {after}");
    assert!(stats.value_loss > 0.0 && stats.grad_norm > 0.0 && stats.approx_kl.is_finite());
}
