//! The actor-critic network on flat f32 buffers: where each weight lives in the
//! parameter vector, and a forward pass that keeps every layer's output (the
//! learner's fused engine runs its backward pass from them).
//! Weights are `[d_in, d_out]` row-major and a layer is `y = act(x W + b)`, as
//! in burn's `Linear`, so parameters copy across unchanged.

use crate::kernels::{View, gemm, tanh, wide};
use crate::{Activation, Arch};

/// One linear layer's place in the parameter vector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dense {
    /// Offset of the `[d_in, d_out]` weight.
    pub w: usize,
    /// Offset of the `[d_out]` bias.
    pub b: usize,
    pub d_in: usize,
    pub d_out: usize,
}

/// Where every parameter is, for one [`Arch`].
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub obs_dim: usize,
    pub head_dim: usize,
    pub actor: Vec<Dense>,
    /// `None`: the critic shares the actor's torso.
    pub critic: Option<Vec<Dense>>,
    pub policy: Dense,
    pub value: Dense,
    pub activation: Activation,
    /// Total parameter count.
    pub len: usize,
}

impl Layout {
    pub fn new(arch: &Arch) -> Self {
        let mut len = 0;
        let mut dense = |d_in: usize, d_out: usize| {
            let d = Dense {
                w: len,
                b: len + d_in * d_out,
                d_in,
                d_out,
            };
            len += d_in * d_out + d_out;
            d
        };
        let hidden = &arch.hidden;
        let mut torso = || {
            let mut width = arch.obs_dim;
            hidden
                .iter()
                .map(|&h| {
                    let d = dense(width, h);
                    width = h;
                    d
                })
                .collect::<Vec<_>>()
        };
        let actor = torso();
        let critic = (!arch.shared_torso).then(&mut torso);
        let width = hidden.last().copied().unwrap_or(arch.obs_dim);
        let policy = dense(width, arch.head_dim);
        let value = dense(width, 1);
        Self {
            obs_dim: arch.obs_dim,
            head_dim: arch.head_dim,
            actor,
            critic,
            policy,
            value,
            activation: arch.activation,
            len,
        }
    }

    /// The torsos' output width (the heads' input).
    pub fn width(&self) -> usize {
        self.actor.last().map_or(self.obs_dim, |d| d.d_out)
    }

    /// The widest activation of any layer.
    pub fn widest(&self) -> usize {
        let torso = self.actor.iter().chain(self.critic.iter().flatten());
        torso
            .map(|d| d.d_out)
            .chain([self.obs_dim, self.head_dim])
            .max()
            .unwrap_or(1)
    }
}

/// Buffers for one minibatch of `m` rows, reused from step to step.
#[derive(Default)]
pub struct Work {
    pub m: usize,
    /// `[m, obs_dim]` the (normalised) observations: the caller fills it.
    pub x: Vec<f32>,
    /// Every actor-torso layer's output, `[m, d_out]` each.
    pub actor: Vec<Vec<f32>>,
    /// Every critic-torso layer's output (empty with a shared torso).
    pub critic: Vec<Vec<f32>>,
    /// `[m, head_dim]` policy-head outputs.
    pub head: Vec<f32>,
    /// `[m]` values.
    pub value: Vec<f32>,
}

impl Work {
    /// Sizes every buffer for `m` rows (allocates only when `m` or the layout grows).
    pub fn resize(&mut self, layout: &Layout, m: usize) {
        self.m = m;
        self.x.resize(m * layout.obs_dim, 0.0);
        let outs = |layers: &[Dense], bufs: &mut Vec<Vec<f32>>| {
            bufs.resize_with(layers.len(), Vec::new);
            for (b, d) in bufs.iter_mut().zip(layers) {
                b.resize(m * d.d_out, 0.0);
            }
        };
        outs(&layout.actor, &mut self.actor);
        outs(layout.critic.as_deref().unwrap_or(&[]), &mut self.critic);
        self.head.resize(m * layout.head_dim, 0.0);
        self.value.resize(m, 0.0);
    }
}

/// `out = act(x W + b)` for `m` rows: the product, then the bias and the
/// activation in one pass over the output.
fn dense_forward(
    p: &[f32],
    d: &Dense,
    x: &[f32],
    m: usize,
    act: Option<Activation>,
    out: &mut [f32],
) {
    let out = &mut out[..m * d.d_out];
    let w = &p[d.w..d.w + d.d_in * d.d_out];
    gemm(
        m,
        d.d_in,
        d.d_out,
        View::rows(x, d.d_in),
        View::rows(w, d.d_out),
        0.0,
        out,
    );
    let bias = &p[d.b..d.b + d.d_out];
    match act {
        Some(Activation::Tanh) => add_bias_then(out, bias, tanh),
        Some(Activation::Relu) => add_bias_then(out, bias, |v| v.max(0.0)),
        None => add_bias_then(out, bias, |v| v),
    }
}

/// `f(y + bias)` for every row `y` of `out`, compiled wide (see [`wide`]).
#[inline(always)]
fn add_bias_then(out: &mut [f32], bias: &[f32], f: impl Fn(f32) -> f32) {
    wide(
        #[inline(always)]
        || {
            for row in out.chunks_exact_mut(bias.len()) {
                row.iter_mut().zip(bias).for_each(|(o, &b)| *o = f(*o + b));
            }
        },
    );
}

fn torso_forward(
    p: &[f32],
    layers: &[Dense],
    x: &[f32],
    m: usize,
    act: Activation,
    outs: &mut [Vec<f32>],
) {
    for (i, d) in layers.iter().enumerate() {
        let (done, rest) = outs.split_at_mut(i);
        let input = top(x, done);
        dense_forward(p, d, input, m, Some(act), &mut rest[0]);
    }
}

/// The actor torso's layer outputs for the rows in `work.x`.
fn actor_torso(layout: &Layout, p: &[f32], work: &mut Work) {
    let (m, act) = (work.m, layout.activation);
    torso_forward(p, &layout.actor, &work.x, m, act, &mut work.actor);
}

/// Policy-head outputs for the rows in `work.x` (no value head: acting).
pub fn policy_forward(layout: &Layout, p: &[f32], work: &mut Work) {
    actor_torso(layout, p, work);
    let ha = top(&work.x, &work.actor);
    dense_forward(p, &layout.policy, ha, work.m, None, &mut work.head);
}

/// The critic torso (when separate) and the value head; with a shared torso,
/// from the actor torso's outputs already in `work`.
fn value_from_torso(layout: &Layout, p: &[f32], work: &mut Work) {
    let m = work.m;
    let hv = match &layout.critic {
        Some(critic) => {
            torso_forward(p, critic, &work.x, m, layout.activation, &mut work.critic);
            &work.critic
        }
        None => &work.actor,
    };
    let hv = top(&work.x, hv);
    dense_forward(p, &layout.value, hv, m, None, &mut work.value);
}

/// Policy-head outputs and values for the rows in `work.x`.
pub fn forward(layout: &Layout, p: &[f32], work: &mut Work) {
    policy_forward(layout, p, work);
    value_from_torso(layout, p, work);
}

/// Values only for the rows in `work.x` (the learner's bootstrap pass).
pub fn value_forward(layout: &Layout, p: &[f32], work: &mut Work) {
    if layout.critic.is_none() {
        actor_torso(layout, p, work);
    }
    value_from_torso(layout, p, work);
}

/// A torso's output: its last layer's, or the input itself when it has no layer.
pub fn top<'a>(x: &'a [f32], outs: &'a [Vec<f32>]) -> &'a [f32] {
    outs.last().map_or(x, |v| v.as_slice())
}
