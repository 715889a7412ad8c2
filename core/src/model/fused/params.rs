//! Copies between the flat parameter vector and burn's model, keyed by burn's
//! parameter ids: the burn model stays what is published and checkpointed.

use super::net::{Dense, Layout};
use crate::model::ActorCritic;
use burn::module::{Param, ParamId};
use burn::nn::Linear;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};

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
    Ok(slots)
}

/// The model's trainable parameters, in layout order.
pub fn read_params<B: Backend>(layout: &Layout, m: &ActorCritic<B>) -> Result<Vec<f32>, String> {
    let mut p = vec![0.0f32; layout.len];
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

/// Writes `p` into the model's parameters, keeping their ids (what Adam's
/// state and checkpoints are keyed by).
pub fn write_params<B: AutodiffBackend>(layout: &Layout, p: &[f32], m: &mut ActorCritic<B>) {
    for (l, d) in linears_mut(m).into_iter().zip(denses(layout)) {
        let device = l.weight.val().device();
        let w = TensorData::new(p[d.w..d.b].to_vec(), [d.d_in, d.d_out]);
        l.weight = Param::initialized(l.weight.id, Tensor::from_data(w, &device).require_grad());
        if let Some(bias) = &mut l.bias {
            let b = TensorData::new(p[d.b..d.b + d.d_out].to_vec(), [d.d_out]);
            *bias = Param::initialized(bias.id, Tensor::from_data(b, &device).require_grad());
        }
    }
}
