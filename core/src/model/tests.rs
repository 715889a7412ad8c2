use super::*;
use crate::CpuBackend;
use crate::config::{Activation, Init, LayerNormPlacement};
use burn::tensor::TensorData;

fn spec() -> ModelSpec {
    ModelSpec {
        input_scale: 1.0,
        obs_dim: 4,
        image: None,
        action_space: ActionSpace::Discrete { n: 2 },
        network: NetworkConfig::default(),
    }
}

#[test]
fn shapes_and_init_gains() {
    let dev = Default::default();
    let m = spec().init::<CpuBackend>(&dev);
    let obs = Tensor::<CpuBackend, 2>::from_data(TensorData::new(vec![0.1f32; 12], [3, 4]), &dev);
    assert_eq!(m.policy(obs.clone()).dims(), [3, 2]);
    assert_eq!(m.value(obs).dims(), [3]);
    // Orthogonal [64, 64] with gain sqrt(2): W^T W = 2 I to within 1% (burn
    // orthogonalises in f32: off-diagonals up to 8e-3 were seen on
    // ill-conditioned draws; a non-orthogonal matrix is off by O(1)).
    let w = m.actor.layers[1].weight.val();
    let wtw: Vec<f32> = w
        .clone()
        .transpose()
        .matmul(w)
        .into_data()
        .to_vec()
        .unwrap();
    for i in 0..64 {
        for j in 0..64 {
            let want = if i == j { 2.0 } else { 0.0 };
            assert!(
                (wtw[i * 64 + j] - want).abs() < 2e-2,
                "({i},{j}) = {}",
                wtw[i * 64 + j]
            );
        }
    }
    // Policy head gain 0.01: columns have norm 0.01, so initial logits are near zero.
    let h: Vec<f32> = m.policy_head.weight.val().into_data().to_vec().unwrap();
    let col0: f32 = (0..64).map(|r| h[r * 2] * h[r * 2]).sum::<f32>().sqrt();
    assert!((col0 - 0.01).abs() < 1e-5, "{col0}");
    let b: Vec<f32> = m
        .value_head
        .bias
        .as_ref()
        .unwrap()
        .val()
        .into_data()
        .to_vec()
        .unwrap();
    assert_eq!(b, vec![0.0]);
}

fn pendulum_spec(network: NetworkConfig) -> ModelSpec {
    let env = sebulba_envs::env_spec("Pendulum-v1").unwrap();
    ModelSpec::new(&env, &network).unwrap()
}

#[test]
fn a_fresh_model_and_its_copies_agree() {
    let dev = Default::default();
    let m = spec().init::<crate::CpuAutodiff>(&dev);
    let copy = m.clone();
    let inference = burn::module::AutodiffModule::valid(&m);
    let obs = [0.1f32, -0.3, 0.7, 0.2];
    let x = || Tensor::from_data(TensorData::new(obs.to_vec(), [1, 4]), &dev);
    let a: Vec<f32> = m.policy(x()).into_data().to_vec().unwrap();
    let b: Vec<f32> = copy.policy(x()).into_data().to_vec().unwrap();
    let c: Vec<f32> = inference
        .policy(Tensor::from_data(
            TensorData::new(obs.to_vec(), [1, 4]),
            &dev,
        ))
        .into_data()
        .to_vec()
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(a, c);
}

#[test]
fn continuous_head_starts_at_init_std() {
    let dev = Default::default();
    let net = NetworkConfig {
        init_std: 0.5,
        min_std: 1e-3,
        ..Default::default()
    };
    let m = pendulum_spec(net).init::<CpuBackend>(&dev);
    let obs = Tensor::<CpuBackend, 2>::from_data(TensorData::new(vec![0.0f32; 3], [1, 3]), &dev);
    let head: Vec<f32> = m.policy(obs).into_data().to_vec().unwrap();
    // Zero input: the head is its bias: mean 0, softplus(raw) + min_std = 0.5.
    assert_eq!(head[0], 0.0);
    let std = crate::distribution::softplus(head[1] as f64) + 1e-3;
    assert!((std - 0.5).abs() < 1e-6, "{std}");
}

#[test]
fn network_options_build_and_differ() {
    let dev = Default::default();
    let obs = Tensor::<CpuBackend, 2>::from_data(
        TensorData::new(vec![0.3f32, -0.2, 0.5, 1.0, 2.0, -1.0], [2, 3]),
        &dev,
    );
    for layer_norm in [
        LayerNormPlacement::None,
        LayerNormPlacement::Pre,
        LayerNormPlacement::Post,
    ] {
        for init in [Init::Orthogonal, Init::LecunUniform] {
            for shared_torso in [false, true] {
                let net = NetworkConfig {
                    hidden: vec![16, 8],
                    activation: Activation::Relu,
                    layer_norm,
                    init,
                    shared_torso,
                    obs_norm: true,
                    ..Default::default()
                };
                let m = pendulum_spec(net).init::<CpuBackend>(&dev);
                assert_eq!(m.critic.is_none(), shared_torso);
                assert_eq!(
                    m.actor.norms.len(),
                    if layer_norm == LayerNormPlacement::None {
                        0
                    } else {
                        2
                    }
                );
                let (p, v) = m.policy_value(obs.clone());
                assert_eq!(p.dims(), [2, 2]);
                let v2: Vec<f32> = m.value(obs.clone()).into_data().to_vec().unwrap();
                assert_eq!(v.into_data().to_vec::<f32>().unwrap(), v2);
            }
        }
    }
    // LeCun uniform: |w| <= sqrt(3 / fan_in) and not orthogonal-scaled.
    let net = NetworkConfig {
        hidden: vec![256],
        init: Init::LecunUniform,
        ..Default::default()
    };
    let m = pendulum_spec(net).init::<CpuBackend>(&dev);
    let w: Vec<f32> = m.actor.layers[0].weight.val().into_data().to_vec().unwrap();
    let bound = (3.0f32 / 3.0).sqrt();
    assert!(w.iter().all(|x| x.abs() <= bound + 1e-6));
    assert!(w.iter().any(|x| x.abs() > 0.9 * bound));
}

#[test]
fn obs_norm_applies_to_every_observation_and_is_not_trained() {
    let dev = Default::default();
    let net = NetworkConfig {
        obs_norm: true,
        obs_clip: 5.0,
        ..Default::default()
    };
    let mut m = pendulum_spec(net.clone()).init::<CpuBackend>(&dev);
    let mut stats = RunningMeanStd::new(3);
    stats.update(&[1.0, 0.0, 8.0, -1.0, 2.0, -8.0]);
    m.set_obs_stats(&stats);
    // A reset observation and its normalised form give identical outputs from a
    // model whose normaliser is off.
    let reset_obs = [0.9f32, 0.1, 0.5];
    let normed: Vec<f32> = reset_obs
        .iter()
        .zip(&stats.mean)
        .zip(&stats.var)
        .map(|((&x, &m), &v)| ((x as f64 - m) / (v + OBS_NORM_EPS).sqrt()).clamp(-5.0, 5.0) as f32)
        .collect();
    let plain = ModelSpec {
        input_scale: 1.0,
        network: NetworkConfig {
            obs_norm: false,
            ..net
        },
        ..pendulum_spec(NetworkConfig::default())
    };
    let x =
        |v: &[f32]| Tensor::<CpuBackend, 2>::from_data(TensorData::new(v.to_vec(), [1, 3]), &dev);
    let a: Vec<f32> = m.policy(x(&reset_obs)).into_data().to_vec().unwrap();
    let mut bare = plain.init::<CpuBackend>(&dev);
    bare.actor = m.actor.clone();
    bare.policy_head = m.policy_head.clone();
    let b: Vec<f32> = bare.policy(x(&normed)).into_data().to_vec().unwrap();
    for (p, q) in a.iter().zip(&b) {
        assert!((p - q).abs() < 1e-6, "{a:?} vs {b:?}");
    }
    // The statistics are parameters without gradients, on a backend that
    // tracks them (the learner's): an optimizer leaves them.
    let obs_norm = NetworkConfig {
        obs_norm: true,
        ..Default::default()
    };
    let mut trained = pendulum_spec(obs_norm).init::<crate::CpuAutodiff>(&dev);
    trained.set_obs_stats(&stats);
    let n = trained.obs_norm.as_ref().unwrap();
    assert!(!n.mean.val().is_require_grad() && !n.var.val().is_require_grad());
    let w = &trained.actor.layers[0].weight;
    assert!(w.val().is_require_grad(), "the check itself sees gradients");
}
