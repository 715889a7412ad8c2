use super::*;
use crate::CpuBackend;
use crate::config::{Activation, NetworkConfig};
use crate::model::flat::{obs_norm, read_params};
use crate::model::{ActorCritic, RunningMeanStd};
use crate::weights;
use burn::tensor::{Tensor, TensorData};
use safetensors::SafeTensors;
use safetensors::tensor::{Dtype, TensorView};
use sebulba_envs::env_spec;
use sebulba_fused::file::read;
use sebulba_fused::net::Layout;

/// Networks the fused pass covers: separate and shared torsos, tanh and
/// relu, with and without the normaliser, discrete and continuous heads.
fn specs() -> Vec<ModelSpec> {
    let nets = [
        NetworkConfig::default(),
        NetworkConfig {
            hidden: vec![16, 8, 4],
            activation: Activation::Relu,
            shared_torso: true,
            obs_norm: true,
            ..Default::default()
        },
        NetworkConfig {
            hidden: vec![12],
            obs_norm: true,
            ..Default::default()
        },
    ];
    vec![
        ModelSpec::new(&env_spec("CartPole-v1").unwrap(), &nets[0]).unwrap(),
        ModelSpec::new(&env_spec("Pendulum-v1").unwrap(), &nets[1]).unwrap(),
        ModelSpec::new(&env_spec("Acrobot-v1").unwrap(), &nets[2]).unwrap(),
    ]
}

/// A model of `spec` with normaliser statistics away from the identity.
fn model(spec: &ModelSpec) -> ActorCritic<CpuBackend> {
    let mut m = spec.init::<CpuBackend>(&Default::default());
    let rows: Vec<f32> = (0..3 * spec.obs_dim)
        .map(|i| (i * 7 % 5) as f32 - 1.5)
        .collect();
    let mut stats = RunningMeanStd::new(spec.obs_dim);
    stats.update(&rows);
    m.set_obs_stats(&stats);
    m
}

fn stats_of(spec: &ModelSpec, m: &ActorCritic<CpuBackend>) -> Option<ObsNorm> {
    let norm = obs_norm(m).unwrap();
    assert_eq!(norm.is_some(), spec.network.obs_norm);
    norm
}

#[test]
fn the_file_is_the_one_burn_writes_and_each_side_reads_the_other() {
    for spec in specs() {
        let m = model(&spec);
        let layout = Layout::new(&spec.arch());
        let params = read_params(&layout, &m).unwrap();
        let stats = stats_of(&spec, &m);
        let ours = to_safetensors(&spec, &params, stats.as_ref()).unwrap();
        let burns = weights::to_safetensors(&m, &spec).unwrap();
        let (a, b) = (
            SafeTensors::deserialize(&ours).unwrap(),
            SafeTensors::deserialize(&burns).unwrap(),
        );
        let (mut na, mut nb) = (a.names(), b.names());
        na.sort_unstable();
        nb.sort_unstable();
        assert_eq!(na, nb, "tensor names");
        for name in na {
            let (x, y) = (a.tensor(name).unwrap(), b.tensor(name).unwrap());
            assert_eq!(x.dtype(), y.dtype(), "{name}");
            assert_eq!(x.shape(), y.shape(), "{name}");
            assert_eq!(x.data(), y.data(), "{name}");
        }
        let (_, ma) = SafeTensors::read_metadata(&ours).unwrap();
        let (_, mb) = SafeTensors::read_metadata(&burns).unwrap();
        assert_eq!(ma.metadata(), mb.metadata());

        // burn's file read flat gives the model's parameters and statistics.
        let (p, s) = read(&spec.arch(), &burns).unwrap();
        assert_eq!(p, params);
        assert_eq!(s, stats);
        // Our file loaded by burn acts as the model does.
        let back: ActorCritic<CpuBackend> =
            weights::from_safetensors(&spec, ours, &Default::default()).unwrap();
        let obs: Vec<f32> = (0..2 * spec.obs_dim)
            .map(|i| i as f32 * 0.3 - 1.0)
            .collect();
        let x = || {
            Tensor::<CpuBackend, 2>::from_data(
                TensorData::new(obs.clone(), [2, spec.obs_dim]),
                &Default::default(),
            )
        };
        let head = |m: &ActorCritic<CpuBackend>| m.policy(x()).into_data().to_vec::<f32>();
        assert_eq!(head(&back).unwrap(), head(&m).unwrap());
    }
}

#[test]
fn bad_files_and_values_are_refused_by_name() {
    let spec = &specs()[1];
    let arch = spec.arch();
    let layout = Layout::new(&arch);
    let m = model(spec);
    let params = read_params(&layout, &m).unwrap();
    let stats = stats_of(spec, &m);
    let good = to_safetensors(spec, &params, stats.as_ref()).unwrap();

    // Writing: a NaN parameter, missing or misfit statistics, a short vector.
    let mut nan = params.clone();
    nan[layout.value.b] = f32::NAN;
    let e = to_safetensors(spec, &nan, stats.as_ref()).unwrap_err();
    assert!(e.to_string().contains("value_head.bias"), "{e}");
    assert!(to_safetensors(spec, &params, None).is_err());
    let short = ObsNorm::new(vec![0.0; 1], vec![1.0; 1], 5.0);
    assert!(to_safetensors(spec, &params, Some(&short)).is_err());
    assert!(to_safetensors(spec, &params[1..], stats.as_ref()).is_err());

    // Reading: garbage, another network, a missing normaliser, non-finite values.
    assert!(matches!(
        read(&arch, b"not safetensors"),
        Err(WeightsError::Store(_))
    ));
    let other = &specs()[0];
    let e = read(&other.arch(), &good).unwrap_err();
    assert!(matches!(e, WeightsError::Mismatch(_)), "{e}");
    let unnormalised = sebulba_fused::Arch {
        obs_norm: false,
        ..arch.clone()
    };
    let e = read(&unnormalised, &good).unwrap_err();
    assert!(e.to_string().contains("tensors"), "{e}");
    let inf = ObsNorm::new(
        stats.as_ref().unwrap().mean().to_vec(),
        vec![f32::INFINITY; layout.obs_dim],
        5.0,
    );
    let e = to_safetensors(spec, &params, Some(&inf)).unwrap_err();
    assert!(e.to_string().contains("obs_norm.var"), "{e}");

    // A file with the right names but a wrong shape, and one in f64.
    let wide = |dtype: Dtype, shape: Vec<usize>| {
        let file = SafeTensors::deserialize(&good).unwrap();
        let mut owned: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = file
            .tensors()
            .into_iter()
            .map(|(n, t)| (n, t.dtype(), t.shape().to_vec(), t.data().to_vec()))
            .collect();
        let bias = owned.iter_mut().find(|t| t.0 == "value_head.bias").unwrap();
        let n: usize = shape.iter().product();
        (bias.1, bias.2, bias.3) = (dtype, shape, vec![0; n * dtype.bitsize() / 8]);
        let views: Vec<_> = owned
            .iter()
            .map(|(n, d, s, b)| (n.as_str(), TensorView::new(*d, s.clone(), b).unwrap()))
            .collect();
        safetensors::serialize(views, None).unwrap()
    };
    let e = read(&arch, &wide(Dtype::F32, vec![2])).unwrap_err();
    assert!(e.to_string().contains("value_head.bias"), "{e}");
    let e = read(&arch, &wide(Dtype::F64, vec![1])).unwrap_err();
    assert!(e.to_string().contains("value_head.bias"), "{e}");
    // Reading refuses a NaN too.
    let nan_file = {
        let mut p = params.clone();
        let first_dense = layout.actor.blocks.iter().find_map(|b| match b {
            sebulba_fused::net::BlockAt::Dense(d) => Some(d.at.w),
            _ => None,
        });
        p[first_dense.expect("a dense layer")] = 1.0;
        let mut bytes = to_safetensors(spec, &p, stats.as_ref()).unwrap();
        // Overwrite the first weight's 1.0 with a NaN in place.
        let one = 1.0f32.to_le_bytes();
        let at = bytes
            .windows(4)
            .rposition(|w| w == one)
            .expect("the 1.0 just written");
        bytes[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
        bytes
    };
    assert!(matches!(
        read(&arch, &nan_file),
        Err(WeightsError::NonFinite(_))
    ));
}
