use super::*;

/// One step of fresh episodes.
fn step_once(p: &InferencePolicy, obs: &[f32], n: usize) -> Vec<f32> {
    p.step(obs, &mut p.state(n), None)
}

/// burn's model (what acts where the fused pass does not: LayerNorm,
/// CUDA) steps a recurrent policy as the fused pass does: the same
/// heads and the same states, step after step.
#[test]
fn burns_step_moves_each_envs_state_as_the_fused_one() {
    let net = NetworkConfig {
        hidden: vec![8],
        core: CoreKind::Lstm,
        core_size: 5,
        ..Default::default()
    };
    let env = sebulba_envs::env_spec("CartPole-v1").unwrap();
    let spec = ModelSpec::new(&env, &net).unwrap();
    let m = spec.init::<CpuBackend>(&Default::default());
    let fused = crate::model::flat::fused_policy(&spec, &m).unwrap();
    let (mut a, mut b) = (fused.state(3), fused.state(3));
    for t in 0..4 {
        let obs: Vec<f32> = (0..12)
            .map(|i| ((i * 7 + t) % 5) as f32 * 0.3 - 0.6)
            .collect();
        let want = fused.step(&obs, &mut a, None);
        let got = head_on(&m, &spec, &obs, &mut b, &Default::default());
        for (g, w) in got
            .iter()
            .zip(&want)
            .chain(b.values().iter().zip(a.values()))
        {
            assert!((g - w).abs() < 1e-5, "step {t}: {g} vs {w}");
        }
        a.reset(1);
        b.reset(1);
    }
    assert!(a.values().iter().any(|&v| v != 0.0));
}

#[test]
fn cpu_inference_and_cuda_without_the_feature() {
    let env = sebulba_envs::env_spec("CartPole-v1").unwrap();
    let net = NetworkConfig::default();
    let p = InferencePolicy::new(&env, &net, DeviceKind::Cpu).unwrap();
    assert_eq!(step_once(&p, &[0.0; 8], 2).len(), 4);
    #[cfg(not(feature = "cuda"))]
    {
        let e = InferencePolicy::new(&env, &net, DeviceKind::Cuda(0))
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("cuda:0") && e.to_string().contains("--features cuda"),
            "{e}"
        );
    }
}

#[test]
fn loading_a_version_replaces_every_weight_and_a_bad_one_changes_nothing() {
    let env = sebulba_envs::env_spec("CartPole-v1").unwrap();
    let net = NetworkConfig::default();
    let mut p = InferencePolicy::new(&env, &net, DeviceKind::Cpu).unwrap();
    let obs = [0.1, -0.2, 0.03, 0.4, -0.5, 0.6, 0.07, -0.08];
    let before = step_once(&p, &obs, 2);
    // Another network of the same shape, as a learner would publish it.
    let dev = Default::default();
    let other = p.spec().init::<CpuBackend>(&dev);
    let bytes = crate::weights::to_safetensors(&other, p.spec()).unwrap();
    let want = head_on(&other, p.spec(), &obs, &mut PolicyState::zeros(0, 2), &dev);
    p.load(1, bytes.clone()).unwrap();
    // (The CPU policy acts through the fused forward pass: equal to burn's
    // to f32 rounding.)
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
    let loaded = step_once(&p, &obs, 2);
    assert!(
        close(&loaded, &want),
        "outputs are the loaded network's: {loaded:?} vs {want:?}"
    );
    assert!(!close(&loaded, &before));
    // A truncated file is refused and the policy keeps version 1.
    assert!(p.load(2, bytes[..bytes.len() / 2].to_vec()).is_err());
    assert_eq!(step_once(&p, &obs, 2), loaded);
}

/// A core the config does not know, or too wide, is refused naming the
/// field; a known one survives the wire.
#[test]
fn a_core_survives_the_wire_and_a_bad_one_is_refused() {
    let net = NetworkConfig {
        core: CoreKind::Lstm,
        core_size: 24,
        ..Default::default()
    };
    assert_eq!(network_from_wire(&network_to_wire(&net)).unwrap(), net);
    let mut wire = network_to_wire(&net);
    wire.core = "transformer".into();
    let e = network_from_wire(&wire).unwrap_err().to_string();
    assert!(e.contains("network.core"), "{e}");
    wire.core = "lstm".into();
    wire.core_size = 5000;
    let e = network_from_wire(&wire).unwrap_err().to_string();
    assert!(e.contains("network.core_size"), "{e}");
}

#[test]
fn the_network_spec_survives_the_wire() {
    let net = NetworkConfig {
        conv: vec![
            ConvLayer {
                channels: 16,
                kernel: 3,
                stride: 2,
                padding: 1,
            },
            ConvLayer {
                channels: 8,
                kernel: 2,
                stride: 1,
                padding: 0,
            },
        ],
        stacks: vec![
            Stack {
                channels: 16,
                blocks: 2,
            },
            Stack {
                channels: 4,
                blocks: 0,
            },
        ],
        hidden: vec![32, 16],
        core: CoreKind::Gru,
        core_size: 24,
        activation: Activation::Relu,
        layer_norm: LayerNormPlacement::Pre,
        init: Init::LecunUniform,
        shared_torso: true,
        obs_norm: true,
        obs_clip: 5.0,
        min_std: 0.01,
        init_std: 2.0,
    };
    assert_eq!(network_from_wire(&network_to_wire(&net)).unwrap(), net);
    let mut wire = network_to_wire(&net);
    wire.layer_norm = "sideways".into();
    assert!(
        network_from_wire(&wire)
            .unwrap_err()
            .to_string()
            .contains("network.layer_norm")
    );
    let mut wire = network_to_wire(&net);
    wire.init_std = 0.001;
    assert!(
        network_from_wire(&wire)
            .unwrap_err()
            .to_string()
            .contains("init_std")
    );
    // A layer out of the config's ranges is refused naming the layer
    // and the field.
    for (layer, field, bad) in [(0, "kernel", 0), (1, "channels", 5000), (1, "stride", 0)] {
        let mut wire = network_to_wire(&net);
        let l = &mut wire.conv[layer];
        match field {
            "kernel" => l.kernel = bad,
            "channels" => l.channels = bad,
            _ => l.stride = bad,
        }
        let e = network_from_wire(&wire).unwrap_err().to_string();
        assert!(
            e.contains(&format!("layer {layer}")) && e.contains(&format!("network.conv.{field}")),
            "{e}"
        );
    }
    // A stem on a flat observation is refused when the policy is built.
    let env = sebulba_envs::env_spec("CartPole-v1").unwrap();
    let e = InferencePolicy::new(&env, &net, DeviceKind::Cpu)
        .err()
        .unwrap();
    assert!(e.to_string().contains("network.conv"), "{e}");
}
