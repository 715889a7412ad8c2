//! Every parameter tensor of a [`Layout`] as burn's model holds it, which
//! is PyTorch's order for convolutions and for a dense layer reading an image
//! ([`ParamTensor`]). burn's edge (`sebulba_core::model::flat`) and the
//! published file ([`crate::file`]) convert through this one list; each block
//! names its own tensors ([`crate::block`]).

pub use crate::param_tensor::{Order, ParamTensor};

use crate::net::{Layout, Torso};
use crate::param_tensor::dense;

/// A torso's tensors, named as burn's module holds them: each block with
/// parameters names its own under `{name}.{group}.{k}`, `k` counting that
/// group's blocks in order (`actor.conv.0`, `actor.res.1.conv0`,
/// `critic.layers.2`).
fn torso(out: &mut Vec<ParamTensor>, name: &str, t: &Torso) {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for b in &t.blocks {
        let pass = b.pass();
        let Some(group) = pass.group() else { continue };
        let k = match counts.iter_mut().find(|(g, _)| *g == group) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                counts.push((group, 0));
                0
            }
        };
        pass.tensors(&format!("{name}.{group}.{k}"), out);
    }
}

/// Every parameter tensor in layout order: the actor torso, the critic
/// torso, the policy head, the value head.
pub fn param_tensors(layout: &Layout) -> Vec<ParamTensor> {
    let mut out = Vec::new();
    torso(&mut out, "actor", &layout.actor);
    if let Some(c) = &layout.critic {
        torso(&mut out, "critic", c);
    }
    // A torso that ends on an image feeds the heads with it flattened.
    let actor_top = layout.actor.output.image();
    let critic_top = layout
        .critic
        .as_ref()
        .map_or(actor_top, |c| c.output.image());
    let policy = layout.policy.as_dense();
    dense(&mut out, "policy_head", &policy, actor_top, true);
    dense(&mut out, "value_head", &layout.value, critic_top, false);
    out
}

#[cfg(test)]
mod tests;
