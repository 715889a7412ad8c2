//! burn's model to and from the fused engine's flat vector
//! ([`sebulba_fused::net::Layout`] order): the edge where burn converts. A
//! learner's state is the flat vector (`sebulba_fused::TrainState`); the burn
//! engine writes it into its model keeping the parameter ids (which Adam's
//! state and the all-reduce are keyed by) and reads it back. A network with
//! LayerNorm (burn only) has its scales and shifts after the layout's
//! parameters ([`state_len`]).

use crate::model::{ActorCritic, ModelSpec, Torso};
use burn::module::{Param, ParamId};
use burn::nn::Linear;
use burn::nn::conv::Conv2d;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use sebulba_fused::net::{BlockAt, Layout};
use sebulba_fused::tensors::{Order, ParamTensor, param_tensors};
use sebulba_fused::{FusedPolicy, ObsNorm};

/// One of the model's trainable tensors, whatever its rank.
pub enum Tensors<'a, B: Backend> {
    D1(&'a Param<Tensor<B, 1>>),
    D2(&'a Param<Tensor<B, 2>>),
    D4(&'a Param<Tensor<B, 4>>),
}

/// The same, to be replaced.
enum TensorsMut<'a, B: Backend> {
    D1(&'a mut Param<Tensor<B, 1>>),
    D2(&'a mut Param<Tensor<B, 2>>),
    D4(&'a mut Param<Tensor<B, 4>>),
}

impl<B: Backend> Tensors<'_, B> {
    pub fn id(&self) -> ParamId {
        match self {
            Self::D1(p) => p.id,
            Self::D2(p) => p.id,
            Self::D4(p) => p.id,
        }
    }

    fn dims(&self) -> Vec<usize> {
        match self {
            Self::D1(p) => p.dims().to_vec(),
            Self::D2(p) => p.dims().to_vec(),
            Self::D4(p) => p.dims().to_vec(),
        }
    }

    fn values(&self) -> Result<Vec<f32>, String> {
        match self {
            Self::D1(p) => floats(p.val(), "a vector"),
            Self::D2(p) => floats(p.val(), "a matrix"),
            Self::D4(p) => floats(p.val(), "a convolution weight"),
        }
    }
}

const NO_BIAS: &str = "a layer without a bias";

fn linear_params<'a, B: Backend>(
    l: &'a Linear<B>,
    out: &mut Vec<Tensors<'a, B>>,
) -> Result<(), String> {
    out.push(Tensors::D2(&l.weight));
    out.push(Tensors::D1(l.bias.as_ref().ok_or(NO_BIAS)?));
    Ok(())
}

fn conv_params<'a, B: Backend>(
    c: &'a Conv2d<B>,
    out: &mut Vec<Tensors<'a, B>>,
) -> Result<(), String> {
    out.push(Tensors::D4(&c.weight));
    out.push(Tensors::D1(c.bias.as_ref().ok_or(NO_BIAS)?));
    Ok(())
}

/// A torso's tensors in its blocks' order (the layout's).
fn torso_params<'a, B: Backend>(
    t: &'a Torso<B>,
    out: &mut Vec<Tensors<'a, B>>,
) -> Result<(), String> {
    let (mut conv, mut res, mut layers) = (t.conv.iter(), t.res.iter(), t.layers.iter());
    let missing = || "the model lacks a block of its layout".to_string();
    for b in &t.blocks {
        match b {
            BlockAt::Conv { .. } => conv_params(conv.next().ok_or_else(missing)?, out)?,
            BlockAt::Residual { .. } => {
                let r = res.next().ok_or_else(missing)?;
                conv_params(&r.conv0, out)?;
                conv_params(&r.conv1, out)?;
            }
            BlockAt::Dense { .. } => linear_params(layers.next().ok_or_else(missing)?, out)?,
            BlockAt::MaxPool(_) | BlockAt::Activate(_) => {}
        }
    }
    Ok(())
}

/// The model's tensors in [`Layout`] order ([`param_tensors`]'s): actor
/// torso, critic torso, policy head, value head; then the LayerNorms' scales
/// and shifts, the actor torso's first.
fn params<B: Backend>(m: &ActorCritic<B>) -> Result<Vec<Tensors<'_, B>>, String> {
    let mut out = Vec::new();
    torso_params(&m.actor, &mut out)?;
    if let Some(c) = &m.critic {
        torso_params(c, &mut out)?;
    }
    linear_params(&m.policy_head, &mut out)?;
    linear_params(&m.value_head, &mut out)?;
    let critic = m.critic.iter().flat_map(|c| c.norms.iter());
    for n in m.actor.norms.iter().chain(critic) {
        out.push(Tensors::D1(&n.gamma));
        out.extend(n.beta.as_ref().map(Tensors::D1));
    }
    Ok(out)
}

/// A torso's tensors into `out` (in its blocks' order) and its LayerNorms'
/// into `norms`.
fn torso_params_mut<'a, B: Backend>(
    t: &'a mut Torso<B>,
    out: &mut Vec<TensorsMut<'a, B>>,
    norms: &mut Vec<TensorsMut<'a, B>>,
) -> Result<(), String> {
    let Torso {
        conv,
        res,
        layers,
        norms: layer_norms,
        blocks,
        ..
    } = t;
    let (mut conv, mut res, mut layers) = (conv.iter_mut(), res.iter_mut(), layers.iter_mut());
    let missing = || "the model lacks a block of its layout".to_string();
    let push_conv = |c: &'a mut Conv2d<B>, out: &mut Vec<TensorsMut<'a, B>>| {
        out.push(TensorsMut::D4(&mut c.weight));
        out.push(TensorsMut::D1(c.bias.as_mut().ok_or(NO_BIAS)?));
        Ok::<_, String>(())
    };
    for b in blocks.iter() {
        match b {
            BlockAt::Conv { .. } => push_conv(conv.next().ok_or_else(missing)?, out)?,
            BlockAt::Residual { .. } => {
                let r = res.next().ok_or_else(missing)?;
                push_conv(&mut r.conv0, out)?;
                push_conv(&mut r.conv1, out)?;
            }
            BlockAt::Dense { .. } => {
                let l = layers.next().ok_or_else(missing)?;
                out.push(TensorsMut::D2(&mut l.weight));
                out.push(TensorsMut::D1(l.bias.as_mut().ok_or(NO_BIAS)?));
            }
            BlockAt::MaxPool(_) | BlockAt::Activate(_) => {}
        }
    }
    for n in layer_norms {
        norms.push(TensorsMut::D1(&mut n.gamma));
        norms.extend(n.beta.as_mut().map(TensorsMut::D1));
    }
    Ok(())
}

/// [`params`], to be replaced.
fn params_mut<B: Backend>(m: &mut ActorCritic<B>) -> Result<Vec<TensorsMut<'_, B>>, String> {
    let (mut out, mut norms) = (Vec::new(), Vec::new());
    torso_params_mut(&mut m.actor, &mut out, &mut norms)?;
    if let Some(c) = &mut m.critic {
        torso_params_mut(c, &mut out, &mut norms)?;
    }
    for l in [&mut m.policy_head, &mut m.value_head] {
        out.push(TensorsMut::D2(&mut l.weight));
        out.push(TensorsMut::D1(l.bias.as_mut().ok_or(NO_BIAS)?));
    }
    out.extend(norms);
    Ok(out)
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

pub fn floats<B: Backend, const D: usize>(t: Tensor<B, D>, what: &str) -> Result<Vec<f32>, String> {
    t.into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .map_err(|e| format!("{what}: {e:?}"))
}

/// One trainable tensor of burn's model: its id (what Adam's state and the
/// gradients are keyed by) and where its values live in the flat vector.
pub struct Slot {
    pub id: ParamId,
    pub tensor: ParamTensor,
}

/// The layout's tensors, then the LayerNorms' (after the layout's
/// parameters), against the model's: the same count and shapes.
fn tensors_of(layout: &Layout, dims: &[Vec<usize>]) -> Result<Vec<ParamTensor>, String> {
    let mut list = param_tensors(layout);
    let mut at = layout.len;
    for d in &dims[list.len().min(dims.len())..] {
        let shape = d.clone();
        let len: usize = shape.iter().product();
        list.push(ParamTensor {
            name: "layer norm".into(),
            at,
            shape,
            order: Order::Plain,
        });
        at += len;
    }
    if list.len() != dims.len() {
        return Err(format!(
            "the model has {} tensors, the fused layout {}",
            dims.len(),
            list.len()
        ));
    }
    for (t, d) in list.iter().zip(dims) {
        if &t.shape != d {
            return Err(format!(
                "`{}` is {d:?}, the layout expects {:?}",
                t.name, t.shape
            ));
        }
    }
    Ok(list)
}

/// Each trainable tensor's id and place, in [`params`] order.
pub fn param_slots<B: Backend>(layout: &Layout, m: &ActorCritic<B>) -> Result<Vec<Slot>, String> {
    let ps = params(m)?;
    let dims: Vec<Vec<usize>> = ps.iter().map(Tensors::dims).collect();
    let list = tensors_of(layout, &dims)?;
    Ok(ps
        .iter()
        .zip(list)
        .map(|(p, tensor)| Slot { id: p.id(), tensor })
        .collect())
}

/// The model's trainable parameters: the layout's, then the LayerNorms'.
pub fn read_params<B: Backend>(layout: &Layout, m: &ActorCritic<B>) -> Result<Vec<f32>, String> {
    let ps = params(m)?;
    let dims: Vec<Vec<usize>> = ps.iter().map(Tensors::dims).collect();
    let list = tensors_of(layout, &dims)?;
    let len = list.last().map_or(0, |t| t.at + t.len());
    let mut p = vec![0.0f32; len];
    for (param, t) in ps.iter().zip(&list) {
        t.scatter(&param.values()?, &mut p);
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
    let dims: Vec<Vec<usize>> = params(m)?.iter().map(Tensors::dims).collect();
    let list = tensors_of(layout, &dims)?;
    let len = list.last().map_or(0, |t| t.at + t.len());
    if p.len() != len {
        return Err(format!("{} parameters for a network of {len}", p.len()));
    }
    let device = m.policy_head.weight.val().device();
    for (param, t) in params_mut(m)?.into_iter().zip(&list) {
        let data = TensorData::new(t.gather(p), t.shape.clone());
        match param {
            TensorsMut::D1(x) => {
                *x = Param::initialized(x.id, Tensor::from_data(data, &device).require_grad())
            }
            TensorsMut::D2(x) => {
                *x = Param::initialized(x.id, Tensor::from_data(data, &device).require_grad())
            }
            TensorsMut::D4(x) => {
                *x = Param::initialized(x.id, Tensor::from_data(data, &device).require_grad())
            }
        }
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
        let impala = NetworkConfig {
            stacks: vec![
                crate::config::Stack {
                    channels: 4,
                    blocks: 2,
                },
                crate::config::Stack {
                    channels: 5,
                    blocks: 1,
                },
            ],
            hidden: vec![16],
            activation: Activation::Relu,
            ..Default::default()
        };
        for (env, net) in [
            ("CartPole-v1", &nets[0]),
            ("Pendulum-v1", &nets[1]),
            ("MinAtar/Breakout-v1", &impala),
        ] {
            let spec = ModelSpec::new(&env_spec(env).unwrap(), net).unwrap();
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
        let mut spec = ModelSpec::new(&env_spec("CartPole-v1").unwrap(), &nets[0]).unwrap();
        spec.network.layer_norm = LayerNormPlacement::Post;
        let m = spec.init::<CpuBackend>(&Default::default());
        assert!(fused_policy(&spec, &m).is_err());
    }
}
