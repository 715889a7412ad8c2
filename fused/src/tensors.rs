//! Every parameter tensor of a [`Layout`] as burn's model holds it, which
//! is PyTorch's order for convolutions and for the dense layer after a stem:
//! its name, its shape and how its values map to the flat vector. burn's
//! edge (`sebulba_core::model::flat`) and the published file
//! ([`crate::file`]) convert through this one list.

use crate::conv::Conv;
use crate::net::{Dense, Layout, Torso};

/// How a tensor's values are ordered against the flat vector's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Order {
    /// The same order.
    Plain,
    /// A convolution's weight: `[c_out, c_in, kh, kw]` from our `[kh, kw,
    /// c_in, c_out]`.
    Conv(Conv),
    /// The first dense weight after a stem: its rows follow the stem output
    /// flattened channels first (`[c, h, w]`, as burn's and PyTorch's NCHW
    /// tensors flatten) where ours follow `[h, w, c]`; and ours is an
    /// output per row when it is the policy head's (`transposed`).
    Flattened {
        h: usize,
        w: usize,
        c: usize,
        d_out: usize,
        transposed: bool,
    },
    /// The policy head's weight: burn's `[d_in, d_out]`, ours an action per
    /// row (`[d_out, d_in]`, see [`crate::net::Head`]).
    Transposed { d_in: usize, d_out: usize },
}

/// One parameter tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamTensor {
    /// burn's record name (`actor.conv.0.weight`, `policy_head.bias`, ...).
    pub name: String,
    /// Offset of its values in the flat vector.
    pub at: usize,
    pub shape: Vec<usize>,
    pub order: Order,
}

impl ParamTensor {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Our index of the tensor's value `i`.
    fn ours(&self, i: usize) -> usize {
        match self.order {
            Order::Plain | Order::Conv(_) => i,
            Order::Flattened {
                h,
                w,
                c,
                d_out,
                transposed,
            } => {
                let (row, j) = (i / d_out, i % d_out);
                let (ch, pixel) = (row / (h * w), row % (h * w));
                let ours = pixel * c + ch;
                match transposed {
                    true => j * (h * w * c) + ours,
                    false => ours * d_out + j,
                }
            }
            Order::Transposed { d_in, d_out } => (i % d_out) * d_in + i / d_out,
        }
    }

    /// The tensor's values, in its own order, from the flat vector.
    pub fn gather(&self, flat: &[f32]) -> Vec<f32> {
        let ours = &flat[self.at..self.at + self.len()];
        match self.order {
            Order::Plain => ours.to_vec(),
            Order::Conv(c) => c.to_torch(ours),
            Order::Flattened { .. } | Order::Transposed { .. } => {
                (0..self.len()).map(|i| ours[self.ours(i)]).collect()
            }
        }
    }

    /// Writes the tensor's `values` (in its own order) into the flat vector.
    pub fn scatter(&self, values: &[f32], flat: &mut [f32]) {
        let ours = &mut flat[self.at..self.at + self.len()];
        match self.order {
            Order::Plain => ours.copy_from_slice(&values[..ours.len()]),
            Order::Conv(c) => ours.copy_from_slice(&c.from_torch(values)),
            Order::Flattened { .. } | Order::Transposed { .. } => {
                for (i, &v) in values[..self.len()].iter().enumerate() {
                    ours[self.ours(i)] = v;
                }
            }
        }
    }
}

/// A dense layer's weight and bias, its rows reordered when it reads a stem
/// and its values an output per row when it is the policy head
/// (`transposed`).
fn dense(
    out: &mut Vec<ParamTensor>,
    name: &str,
    d: &Dense,
    after: Option<&Conv>,
    transposed: bool,
) {
    let (d_in, d_out) = (d.d_in, d.d_out);
    let order = match after {
        Some(c) => Order::Flattened {
            h: c.out_h(),
            w: c.out_w(),
            c: c.c_out,
            d_out,
            transposed,
        },
        None if transposed => Order::Transposed { d_in, d_out },
        None => Order::Plain,
    };
    out.push(ParamTensor {
        name: format!("{name}.weight"),
        at: d.w,
        shape: vec![d_in, d_out],
        order,
    });
    out.push(ParamTensor {
        name: format!("{name}.bias"),
        at: d.b,
        shape: vec![d_out],
        order: Order::Plain,
    });
}

fn torso(out: &mut Vec<ParamTensor>, name: &str, t: &Torso) {
    for (i, c) in t.stem.iter().enumerate() {
        let k = &c.conv;
        out.push(ParamTensor {
            name: format!("{name}.conv.{i}.weight"),
            at: c.w,
            shape: vec![k.c_out, k.c_in, k.kh, k.kw],
            order: Order::Conv(*k),
        });
        out.push(ParamTensor {
            name: format!("{name}.conv.{i}.bias"),
            at: c.b,
            shape: vec![k.c_out],
            order: Order::Plain,
        });
    }
    let last = t.stem.last().map(|c| &c.conv);
    for (i, d) in t.dense.iter().enumerate() {
        dense(
            out,
            &format!("{name}.layers.{i}"),
            d,
            last.filter(|_| i == 0),
            false,
        );
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
    // A stem with no dense layer feeds the heads directly.
    let feeds_heads = |t: &Torso| {
        t.dense
            .is_empty()
            .then(|| t.stem.last().map(|c| c.conv))
            .flatten()
    };
    let actor_top = feeds_heads(&layout.actor);
    let critic_top = layout.critic.as_ref().map_or(actor_top, feeds_heads);
    let policy = layout.policy.as_dense();
    dense(&mut out, "policy_head", &policy, actor_top.as_ref(), true);
    dense(
        &mut out,
        "value_head",
        &layout.value,
        critic_top.as_ref(),
        false,
    );
    out
}

#[cfg(test)]
mod tests;
