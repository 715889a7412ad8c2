//! burn's model to and from the fused engine's flat vector
//! ([`sebulba_fused::net::Layout`] order): the edge where burn converts. A
//! learner's state is the flat vector (`sebulba_fused::TrainState`); the burn
//! engine writes it into its model keeping the parameter ids (which Adam's
//! state and the all-reduce are keyed by) and reads it back. A network with
//! LayerNorm (burn only) has its scales and shifts after the layout's
//! parameters ([`state_len`]).

use crate::model::{ActorCritic, ModelSpec};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use sebulba_fused::net::Layout;
use sebulba_fused::tensors::{Order, ParamTensor, param_tensors};
use sebulba_fused::{FusedPolicy, ObsNorm};

/// One of the model's trainable tensors, whatever its rank: its id and shape.
struct Tensors {
    id: ParamId,
    dims: Vec<usize>,
}

/// Collects the trainable tensors a module visits, in its visiting order
/// (each block's fields in declaration order: a layer's weight, then its
/// bias); with `values`, their values as well.
struct Collect {
    tensors: Vec<Tensors>,
    values: Option<Vec<Result<Vec<f32>, String>>>,
}

impl<B: Backend> ModuleVisitor<B> for Collect {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let t = param.val();
        self.tensors.push(Tensors {
            id: param.id,
            dims: t.dims().to_vec(),
        });
        if let Some(v) = &mut self.values {
            v.push(floats(t, "a parameter"));
        }
    }
}

/// Replaces each tensor it maps with the next of `values` (their shapes
/// checked before), keeping its id.
struct Replace<'a, B: Backend> {
    values: std::slice::Iter<'a, (Vec<f32>, Vec<usize>)>,
    device: B::Device,
}

impl<B: Backend> ModuleMapper<B> for Replace<'_, B> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let Some((values, shape)) = self.values.next() else {
            return param;
        };
        let data = TensorData::new(values.clone(), shape.clone());
        let tensor = Tensor::from_data(data, &self.device).require_grad();
        Param::initialized(param.id, tensor)
    }
}

/// The model's parts with trainable tensors in [`Layout`] order
/// ([`param_tensors`]'s): actor torso, critic torso, policy head, value
/// head; then the LayerNorms' scales and shifts, the actor torso's first.
fn visit_in_order<B: Backend>(m: &ActorCritic<B>, v: &mut impl ModuleVisitor<B>) {
    m.actor.visit_blocks(v);
    if let Some(c) = &m.critic {
        c.visit_blocks(v);
    }
    m.policy_head.visit(v);
    m.value_head.visit(v);
    m.actor.norms.visit(v);
    if let Some(c) = &m.critic {
        c.norms.visit(v);
    }
}

/// [`visit_in_order`], mapping each part.
fn map_in_order<B: Backend>(m: &mut ActorCritic<B>, f: &mut impl ModuleMapper<B>) {
    m.actor.map_blocks(f);
    if let Some(c) = &mut m.critic {
        c.map_blocks(f);
    }
    m.policy_head = m.policy_head.clone().map(f);
    m.value_head = m.value_head.clone().map(f);
    m.actor.norms = m.actor.norms.clone().map(f);
    if let Some(c) = &mut m.critic {
        c.norms = c.norms.clone().map(f);
    }
}

/// The model's trainable tensors in [`visit_in_order`]'s order, with their
/// values when `values`.
fn params<B: Backend>(m: &ActorCritic<B>, values: bool) -> Collect {
    let mut c = Collect {
        tensors: Vec::new(),
        values: values.then(Vec::new),
    };
    visit_in_order(m, &mut c);
    c
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
    let ps = params(m, false).tensors;
    let dims: Vec<Vec<usize>> = ps.iter().map(|t| t.dims.clone()).collect();
    let list = tensors_of(layout, &dims)?;
    Ok(ps
        .iter()
        .zip(list)
        .map(|(p, tensor)| Slot { id: p.id, tensor })
        .collect())
}

/// The model's trainable parameters: the layout's, then the LayerNorms'.
pub fn read_params<B: Backend>(layout: &Layout, m: &ActorCritic<B>) -> Result<Vec<f32>, String> {
    let ps = params(m, true);
    let dims: Vec<Vec<usize>> = ps.tensors.iter().map(|t| t.dims.clone()).collect();
    let list = tensors_of(layout, &dims)?;
    let len = list.last().map_or(0, |t| t.at + t.len());
    let mut p = vec![0.0f32; len];
    for (values, t) in ps.values.unwrap_or_default().into_iter().zip(&list) {
        t.scatter(&values?, &mut p);
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
    let dims: Vec<Vec<usize>> = params(m, false)
        .tensors
        .into_iter()
        .map(|t| t.dims)
        .collect();
    let list = tensors_of(layout, &dims)?;
    let len = list.last().map_or(0, |t| t.at + t.len());
    if p.len() != len {
        return Err(format!("{} parameters for a network of {len}", p.len()));
    }
    let values: Vec<(Vec<f32>, Vec<usize>)> = list
        .iter()
        .map(|t| (t.gather(p), t.shape.clone()))
        .collect();
    let mut replace = Replace {
        values: values.iter(),
        device: m.policy_head.weight.val().device(),
    };
    map_in_order(m, &mut replace);
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
        // MinAtar with dense layers alone: a first dense layer reading an
        // image, whose weight rows burn holds channels first.
        for (env, net) in [
            ("CartPole-v1", &nets[0]),
            ("Pendulum-v1", &nets[1]),
            ("MinAtar/Breakout-v1", &impala),
            ("MinAtar/Breakout-v1", &nets[0]),
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

    /// burn's core and the fused engine's read the same sequence (episode
    /// starts inside, a state per env) to the same heads and values.
    #[test]
    fn burns_core_reads_a_sequence_as_the_fused_engines() {
        use crate::config::CoreKind;
        use crate::model::Sequence;
        use sebulba_fused::net::{self, Work};
        for (core, shared) in [
            (CoreKind::Lstm, false),
            (CoreKind::Gru, true),
            (CoreKind::Lstm, true),
        ] {
            let net = NetworkConfig {
                hidden: vec![8],
                core,
                core_size: 6,
                shared_torso: shared,
                ..Default::default()
            };
            let spec = ModelSpec::new(&env_spec("CartPole-v1").unwrap(), &net).unwrap();
            let dev = Default::default();
            let m = spec.init::<CpuBackend>(&dev);
            let layout = Layout::new(&spec.arch());
            let (steps, envs, d) = (5, 3, spec.obs_dim);
            let rows = steps * envs;
            let obs: Vec<f32> = (0..rows * d)
                .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.2)
                .collect();
            let starts: Vec<u8> = (0..rows).map(|r| u8::from(r % 7 == 4)).collect();
            let w = layout.state_width;
            let state: Vec<f32> = (0..envs * w)
                .map(|i| ((i * 13 % 11) as f32 - 5.0) * 0.15)
                .collect();
            let seq = Sequence {
                envs,
                keep: Tensor::from_data(
                    TensorData::new(
                        starts.iter().map(|&s| f32::from(1 - s)).collect::<Vec<_>>(),
                        [rows, 1],
                    ),
                    &dev,
                ),
                state: Tensor::from_data(TensorData::new(state.clone(), [envs, w]), &dev),
                seats: None,
            };
            let x =
                Tensor::<CpuBackend, 2>::from_data(TensorData::new(obs.clone(), [rows, d]), &dev);
            let (heads, values) = m.policy_value_in(x, Some(&seq));
            let heads: Vec<f32> = heads.into_data().to_vec().unwrap();
            let values: Vec<f32> = values.into_data().to_vec().unwrap();

            let p = read_params(&layout, &m).unwrap();
            let mut work = Work::default();
            work.resize(&layout, rows);
            work.x.copy_from_slice(&obs);
            work.set_sequence(envs, &starts, &state, None);
            net::forward(&layout, &p, &mut work);
            for (g, w) in work
                .head
                .iter()
                .zip(&heads)
                .chain(work.value.iter().zip(&values))
            {
                assert!(
                    (g - w).abs() < 1e-5 * (1.0 + w.abs()),
                    "{core:?}: {g} vs {w}"
                );
            }
        }
    }
}
