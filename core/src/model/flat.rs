//! burn's model to and from the fused engine's flat vector
//! ([`sebulba_fused::net::Layout`] order): the edge where burn converts. A
//! learner's state is the flat vector (`sebulba_fused::TrainState`); the burn
//! engine writes it into its model keeping the parameter ids (which Adam's
//! state and the all-reduce are keyed by) and reads it back. A network with
//! LayerNorm (burn only) has its scales and shifts after the layout's
//! parameters ([`state_len`]).

use crate::model::{ActorCritic, ModelSpec};
use burn::module::{Param, ParamId};
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use sebulba_fused::net::{Dense, Layout};
use sebulba_fused::{FusedPolicy, ObsNorm};

/// The model's linear layers in [`Layout`] order: actor torso, critic torso,
/// policy head, value head.
fn linears<B: Backend>(m: &ActorCritic<B>) -> Vec<&Linear<B>> {
    let critic = m.critic.iter().flat_map(|c| c.layers.iter());
    m.actor
        .layers
        .iter()
        .chain(critic)
        .chain([&m.policy_head, &m.value_head])
        .collect()
}

fn linears_mut<B: Backend>(m: &mut ActorCritic<B>) -> Vec<&mut Linear<B>> {
    let critic = m.critic.iter_mut().flat_map(|c| c.layers.iter_mut());
    m.actor
        .layers
        .iter_mut()
        .chain(critic)
        .chain([&mut m.policy_head, &mut m.value_head])
        .collect()
}

/// The LayerNorms' learned tensors, after the layout's: each norm's scale
/// then shift, the actor torso's norms first.
fn norm_params<B: Backend>(m: &ActorCritic<B>) -> Vec<&Param<Tensor<B, 1>>> {
    let critic = m.critic.iter().flat_map(|c| c.norms.iter());
    m.actor
        .norms
        .iter()
        .chain(critic)
        .flat_map(|n| std::iter::once(&n.gamma).chain(n.beta.as_ref()))
        .collect()
}

fn norm_params_mut<B: Backend>(m: &mut ActorCritic<B>) -> Vec<&mut Param<Tensor<B, 1>>> {
    let critic = m.critic.iter_mut().flat_map(|c| c.norms.iter_mut());
    m.actor
        .norms
        .iter_mut()
        .chain(critic)
        .flat_map(|n| std::iter::once(&mut n.gamma).chain(n.beta.as_mut()))
        .collect()
}

/// Floats in a learner's state of `spec`'s network: the layout's, and two
/// per hidden unit of each torso with LayerNorm (its scale and shift).
pub fn state_len(spec: &ModelSpec) -> usize {
    let n = &spec.network;
    let torsos = if n.shared_torso { 1 } else { 2 };
    let norms = match n.layer_norm {
        crate::config::LayerNormPlacement::None => 0,
        _ => 2 * torsos * n.hidden.iter().sum::<usize>(),
    };
    Layout::new(&spec.arch()).len + norms
}

fn denses(layout: &Layout) -> Vec<Dense> {
    let critic = layout.critic.iter().flatten();
    layout
        .actor
        .iter()
        .chain(critic)
        .chain([&layout.policy, &layout.value])
        .copied()
        .collect()
}

pub fn floats<B: Backend, const D: usize>(t: Tensor<B, D>, what: &str) -> Result<Vec<f32>, String> {
    t.into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .map_err(|e| format!("{what}: {e:?}"))
}

/// Each parameter's id with its offset, length and shape (`[d_in, d_out]` or `[d_out]`).
pub fn param_slots<B: Backend>(
    layout: &Layout,
    m: &ActorCritic<B>,
) -> Result<Vec<(ParamId, usize, Vec<usize>)>, String> {
    let (ls, ds) = (linears(m), denses(layout));
    if ls.len() != ds.len() {
        return Err(format!(
            "the model has {} linear layers, the fused layout {}",
            ls.len(),
            ds.len()
        ));
    }
    let mut slots = Vec::with_capacity(2 * ls.len());
    for (l, d) in ls.iter().zip(&ds) {
        let bias = l.bias.as_ref().ok_or("a linear layer without a bias")?;
        slots.push((l.weight.id, d.w, vec![d.d_in, d.d_out]));
        slots.push((bias.id, d.b, vec![d.d_out]));
    }
    let mut at = layout.len;
    for p in norm_params(m) {
        let [d] = p.dims();
        slots.push((p.id, at, vec![d]));
        at += d;
    }
    Ok(slots)
}

/// The model's trainable parameters: the layout's, then the LayerNorms'.
pub fn read_params<B: Backend>(layout: &Layout, m: &ActorCritic<B>) -> Result<Vec<f32>, String> {
    let norms = norm_params(m);
    let extra: usize = norms.iter().map(|p| p.dims()[0]).sum();
    let mut p = vec![0.0f32; layout.len + extra];
    let mut at = layout.len;
    for n in norms {
        let v = floats(n.val(), "layer norm")?;
        p[at..at + v.len()].copy_from_slice(&v);
        at += v.len();
    }
    for (l, d) in linears(m).into_iter().zip(denses(layout)) {
        let bias = l.bias.as_ref().ok_or("a linear layer without a bias")?;
        if l.weight.dims() != [d.d_in, d.d_out] {
            return Err(format!(
                "a weight is {:?}, the layout expects {:?}",
                l.weight.dims(),
                [d.d_in, d.d_out]
            ));
        }
        p[d.w..d.b].copy_from_slice(&floats(l.weight.val(), "weight")?);
        p[d.b..d.b + d.d_out].copy_from_slice(&floats(bias.val(), "bias")?);
    }
    Ok(p)
}

/// Writes `p` (what [`read_params`] gives) into the model's parameters,
/// keeping their ids (what Adam's state is keyed by); a vector of another
/// length is refused.
pub fn write_params<B: Backend>(
    layout: &Layout,
    p: &[f32],
    m: &mut ActorCritic<B>,
) -> Result<(), String> {
    let extra: usize = norm_params(m).iter().map(|n| n.dims()[0]).sum();
    if p.len() != layout.len + extra {
        return Err(format!(
            "{} parameters for a network of {}",
            p.len(),
            layout.len + extra
        ));
    }
    let tensor = |v: &[f32], device: &B::Device| {
        Tensor::from_data(TensorData::new(v.to_vec(), [v.len()]), device).require_grad()
    };
    for (l, d) in linears_mut(m).into_iter().zip(denses(layout)) {
        let device = l.weight.val().device();
        let w = TensorData::new(p[d.w..d.b].to_vec(), [d.d_in, d.d_out]);
        l.weight = Param::initialized(l.weight.id, Tensor::from_data(w, &device).require_grad());
        if let Some(bias) = &mut l.bias {
            let b = tensor(&p[d.b..d.b + d.d_out], &device);
            *bias = Param::initialized(bias.id, b);
        }
    }
    let mut at = layout.len;
    for n in norm_params_mut(m) {
        let [d] = n.dims();
        let device = n.val().device();
        *n = Param::initialized(n.id, tensor(&p[at..at + d], &device));
        at += d;
    }
    Ok(())
}

/// The model's observation normaliser (`None` when it has none).
pub fn obs_norm<B: Backend>(m: &ActorCritic<B>) -> Result<Option<ObsNorm>, String> {
    m.obs_norm
        .as_ref()
        .map(|n| {
            let mean = floats(n.mean.val(), "obs_norm.mean")?;
            let var = floats(n.var.val(), "obs_norm.var")?;
            Ok(ObsNorm::new(mean, var, n.clip))
        })
        .transpose()
}

/// A fused copy of `model` for acting (`spec.network` must be
/// [`crate::config::NetworkConfig::fused_covers`]ed).
pub fn fused_policy<B: Backend>(
    spec: &ModelSpec,
    model: &ActorCritic<B>,
) -> Result<FusedPolicy, String> {
    if !spec.network.fused_covers() {
        return Err("LayerNorm networks run on burn".into());
    }
    let arch = spec.arch();
    let params = read_params(&Layout::new(&arch), model)?;
    FusedPolicy::new(&arch, params, obs_norm(model)?).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;
    use crate::config::{Activation, LayerNormPlacement, NetworkConfig};
    use crate::model::RunningMeanStd;
    use sebulba_envs::env_spec;

    #[test]
    fn the_fused_policy_matches_burns_forward_pass() {
        let nets = [
            NetworkConfig::default(),
            NetworkConfig {
                hidden: vec![32, 16, 8],
                activation: Activation::Relu,
                shared_torso: true,
                obs_norm: true,
                obs_clip: 1.0,
                ..Default::default()
            },
        ];
        for (env, net) in [("CartPole-v1", &nets[0]), ("Pendulum-v1", &nets[1])] {
            let spec = ModelSpec::new(&env_spec(env).unwrap(), net);
            let dev = Default::default();
            let mut m = spec.init::<CpuBackend>(&dev);
            let n = 5;
            let obs: Vec<f32> = (0..n * spec.obs_dim)
                .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.3)
                .collect();
            let mut stats = RunningMeanStd::new(spec.obs_dim);
            stats.update(&obs[..2 * spec.obs_dim]);
            m.set_obs_stats(&stats);
            let fused = fused_policy(&spec, &m).unwrap();
            let x = Tensor::<CpuBackend, 2>::from_data(
                TensorData::new(obs.clone(), [n, spec.obs_dim]),
                &dev,
            );
            let want: Vec<f32> = m.policy(x).into_data().to_vec().unwrap();
            let got = fused.head(&obs, n);
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() < 1e-5 * (1.0 + w.abs()),
                    "{env}: {got:?} vs {want:?}"
                );
            }
            // A smaller batch afterwards reuses the buffers.
            assert_eq!(fused.head(&obs, 2).len(), 2 * spec.head_dim());
            // The parameters written back keep the forward pass.
            let layout = Layout::new(&spec.arch());
            let p = read_params(&layout, &m).unwrap();
            let mut other = spec.init::<CpuBackend>(&dev);
            write_params(&layout, &p, &mut other).unwrap();
            assert_eq!(read_params(&layout, &other).unwrap(), p);
        }
        let mut spec = ModelSpec::new(&env_spec("CartPole-v1").unwrap(), &nets[0]);
        spec.network.layer_norm = LayerNormPlacement::Post;
        let m = spec.init::<CpuBackend>(&Default::default());
        assert!(fused_policy(&spec, &m).is_err());
    }
}
