//! The actor-critic network on flat f32 buffers: where each weight lives in the
//! parameter vector, and a forward pass that keeps every layer's output (the
//! learner's fused engine runs its backward pass from them).
//! Dense weights are `[d_in, d_out]` row-major and a layer is `y = act(x W +
//! b)`, as in burn's `Linear`; a convolution stem works on NHWC activations
//! with `[kh, kw, c_in, c_out]` weights ([`crate::conv`]), so its weights and
//! the first dense layer after it are reordered at burn's and the file's
//! edges ([`crate::tensors`]).

use crate::conv::{self, Conv};
use crate::kernels::{View, gemm, tanh, wide};
use crate::sparse_input::SparseRows;
use crate::{Activation, Arch, ObsNorm};

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

/// The policy head's place in the parameter vector: a linear layer whose
/// weight is stored an action per row (`[d_out, d_in]`, the transpose of a
/// [`Dense`] weight), so that a game's mostly masked head reads and writes
/// the contiguous rows of its allowed actions alone
/// ([`crate::sparse_head`]). burn's and the file's `[d_in, d_out]` order is
/// restored at their edges ([`crate::tensors`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Head {
    /// Offset of the `[d_out, d_in]` weight.
    pub w: usize,
    /// Offset of the `[d_out]` bias.
    pub b: usize,
    pub d_in: usize,
    pub d_out: usize,
}

impl Head {
    /// Its offsets and sizes as a [`Dense`] has them (the weight's order
    /// differs: only for listing where the values are).
    pub fn as_dense(&self) -> Dense {
        let Head { w, b, d_in, d_out } = *self;
        Dense { w, b, d_in, d_out }
    }
}

/// One convolution layer's place in the parameter vector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConvAt {
    pub conv: Conv,
    /// Offset of the `[kh, kw, c_in, c_out]` weight.
    pub w: usize,
    /// Offset of the `[c_out]` bias.
    pub b: usize,
}

/// A torso: the convolution stem (empty for an MLP), then dense layers.
#[derive(Clone, Debug, PartialEq)]
pub struct Torso {
    pub stem: Vec<ConvAt>,
    pub dense: Vec<Dense>,
}

impl Torso {
    /// Floats per sample of the stem's output (the dense layers' input).
    pub fn stem_width(&self, obs_dim: usize) -> usize {
        self.stem.last().map_or(obs_dim, |c| c.conv.out_len())
    }
}

/// Where every parameter is, for one [`Arch`]: the actor torso, the critic
/// torso (unless shared), the policy head, the value head, each layer's
/// weight then bias.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub obs_dim: usize,
    pub head_dim: usize,
    pub actor: Torso,
    /// `None`: the critic shares the actor's torso.
    pub critic: Option<Torso>,
    pub policy: Head,
    pub value: Dense,
    pub activation: Activation,
    /// [`Arch::input_scale`].
    pub input_scale: f32,
    /// Total parameter count.
    pub len: usize,
}

impl Layout {
    /// The layout of `arch`, which [`Arch::stem`] has accepted (every
    /// network a run, an actor or a file names is checked first).
    pub fn new(arch: &Arch) -> Self {
        let stem = arch
            .stem()
            .unwrap_or_else(|e| panic!("an unchecked network reached the layout: {e}"));
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
        let mut torso = || {
            let stem: Vec<ConvAt> = stem
                .iter()
                .map(|&conv| {
                    let d = dense(conv.patch(), conv.c_out);
                    ConvAt {
                        conv,
                        w: d.w,
                        b: d.b,
                    }
                })
                .collect();
            let mut width = stem.last().map_or(arch.obs_dim, |c| c.conv.out_len());
            let dense = arch
                .hidden
                .iter()
                .map(|&h| {
                    let d = dense(width, h);
                    width = h;
                    d
                })
                .collect();
            Torso { stem, dense }
        };
        let actor = torso();
        let critic = (!arch.shared_torso).then(&mut torso);
        let width = actor
            .dense
            .last()
            .map_or(actor.stem_width(arch.obs_dim), |d| d.d_out);
        let Dense { w, b, d_in, d_out } = dense(width, arch.head_dim);
        let policy = Head { w, b, d_in, d_out };
        let value = dense(width, 1);
        Self {
            obs_dim: arch.obs_dim,
            head_dim: arch.head_dim,
            actor,
            critic,
            policy,
            value,
            activation: arch.activation,
            input_scale: arch.input_scale,
            len,
        }
    }

    /// An observation row as the torsos read it, in place: normalised when
    /// the network normalises (`norm`), else scaled by the input scale.
    pub fn input_row(&self, norm: Option<&ObsNorm>, row: &mut [f32]) {
        match norm {
            Some(n) => n.apply(row),
            None if self.input_scale != 1.0 => {
                row.iter_mut().for_each(|x| *x *= self.input_scale);
            }
            None => {}
        }
    }

    /// The torsos' output width (the heads' input).
    pub fn width(&self) -> usize {
        self.policy.d_in
    }

    /// The widest activation (or its gradient) of any layer, per sample.
    pub fn widest(&self) -> usize {
        let torsos = std::iter::once(&self.actor).chain(&self.critic);
        torsos
            .flat_map(|t| {
                let convs = t
                    .stem
                    .iter()
                    .flat_map(|c| [c.conv.in_len(), c.conv.out_len()]);
                convs.chain(t.dense.iter().map(|d| d.d_out))
            })
            .chain([self.obs_dim, self.head_dim])
            .max()
            .unwrap_or(1)
    }
}

/// One torso's activations for a minibatch: each layer's output (what the
/// backward pass reads, with the torso's input).
#[derive(Default)]
pub struct TorsoWork {
    /// `[m, out_len]` each convolution's output (after the activation).
    pub stem: Vec<Vec<f32>>,
    /// The convolutions' windows, a chunk at a time.
    pub conv: conv::Scratch,
    /// `[m, d_out]` each dense layer's output.
    pub dense: Vec<Vec<f32>>,
    /// The observations' nonzero entries, when a torso without a stem found
    /// them sparse enough to read that way ([`crate::sparse_input`]).
    pub input: SparseRows,
}

impl TorsoWork {
    /// Bytes its buffers hold.
    pub fn bytes(&self) -> usize {
        let layers: usize = self
            .stem
            .iter()
            .chain(&self.dense)
            .map(conv::f32_bytes)
            .sum();
        layers + self.conv.bytes() + self.input.bytes()
    }

    fn resize(&mut self, t: &Torso, m: usize) {
        self.stem.resize_with(t.stem.len(), Vec::new);
        for (b, c) in self.stem.iter_mut().zip(&t.stem) {
            b.resize(m * c.conv.out_len(), 0.0);
        }
        self.dense.resize_with(t.dense.len(), Vec::new);
        for (b, d) in self.dense.iter_mut().zip(&t.dense) {
            b.resize(m * d.d_out, 0.0);
        }
    }

    /// The stem's output: its last layer's, or `x` when there is no stem.
    pub fn stem_top<'a>(&'a self, x: &'a [f32]) -> &'a [f32] {
        self.stem.last().map_or(x, |v| v.as_slice())
    }

    /// The torso's output: its last layer's, or `x` when it has none.
    pub fn top<'a>(&'a self, x: &'a [f32]) -> &'a [f32] {
        self.dense.last().map_or(self.stem_top(x), |v| v.as_slice())
    }
}

/// Buffers for one minibatch of `m` rows, reused from step to step.
#[derive(Default)]
pub struct Work {
    pub m: usize,
    /// `[m, obs_dim]` the observations as the torsos read them
    /// ([`Layout::input_row`]): the caller fills it.
    pub x: Vec<f32>,
    pub actor: TorsoWork,
    /// The critic torso's (empty with a shared torso).
    pub critic: TorsoWork,
    /// `[m, head_dim]` policy-head outputs.
    pub head: Vec<f32>,
    /// `[m]` values.
    pub value: Vec<f32>,
}

impl Work {
    /// Bytes its buffers hold.
    pub fn bytes(&self) -> usize {
        [&self.x, &self.head, &self.value]
            .into_iter()
            .map(conv::f32_bytes)
            .sum::<usize>()
            + self.actor.bytes()
            + self.critic.bytes()
    }

    /// Sizes every buffer for `m` rows (allocates only when `m` or the layout grows).
    pub fn resize(&mut self, layout: &Layout, m: usize) {
        self.m = m;
        self.x.resize(m * layout.obs_dim, 0.0);
        self.actor.resize(&layout.actor, m);
        match &layout.critic {
            Some(c) => self.critic.resize(c, m),
            None => self.critic = TorsoWork::default(),
        }
        self.head.resize(m * layout.head_dim, 0.0);
        self.value.resize(m, 0.0);
    }
}

/// What a dense layer reads: rows of floats, or the nonzero entries of each.
#[derive(Clone, Copy)]
enum Input<'a> {
    Dense(&'a [f32]),
    Sparse(&'a SparseRows),
}

/// `out = act(x W + b)` for `m` rows: the product, then the bias and the
/// activation in one pass over the output.
fn dense_forward(
    p: &[f32],
    d: &Dense,
    x: Input<'_>,
    m: usize,
    act: Option<Activation>,
    out: &mut [f32],
) {
    let out = &mut out[..m * d.d_out];
    match x {
        Input::Dense(x) => {
            let w = &p[d.w..d.w + d.d_in * d.d_out];
            let (x, w) = (View::rows(x, d.d_in), View::rows(w, d.d_out));
            gemm(m, d.d_in, d.d_out, x, w, 0.0, out);
        }
        Input::Sparse(rows) => rows.product(&p[d.w..d.w + d.d_in * d.d_out], d.d_out, out),
    }
    let bias = &p[d.b..d.b + d.d_out];
    match act {
        Some(Activation::Tanh) => add_bias_then(out, bias, tanh),
        Some(Activation::Relu) => add_bias_then(out, bias, |v| v.max(0.0)),
        None => add_bias_then(out, bias, |v| v),
    }
}

/// The policy head's outputs `out = x Wᵀ + b` for `m` rows (`W` is
/// `[d_out, d_in]`).
fn head_forward(p: &[f32], h: &Head, x: &[f32], m: usize, out: &mut [f32]) {
    let out = &mut out[..m * h.d_out];
    let wt = View::transposed(&p[h.w..h.w + h.d_in * h.d_out], h.d_in);
    gemm(m, h.d_in, h.d_out, View::rows(x, h.d_in), wt, 0.0, out);
    add_bias_then(out, &p[h.b..h.b + h.d_out], |v| v);
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

/// The activation applied in place (a convolution's output).
fn activate(out: &mut [f32], act: Activation) {
    wide(
        #[inline(always)]
        || match act {
            Activation::Tanh => out.iter_mut().for_each(|v| *v = tanh(*v)),
            Activation::Relu => out.iter_mut().for_each(|v| *v = v.max(0.0)),
        },
    );
}

fn torso_forward(p: &[f32], t: &Torso, x: &[f32], m: usize, act: Activation, w: &mut TorsoWork) {
    for (i, c) in t.stem.iter().enumerate() {
        let (done, rest) = w.stem.split_at_mut(i);
        let input = done.last().map_or(x, |v| v.as_slice());
        let (cw, cb) = (&p[c.w..c.b], &p[c.b..c.b + c.conv.c_out]);
        let out = &mut rest[0];
        conv::forward(&c.conv, (cw, cb), input, m, &mut w.conv, out);
        activate(out, act);
    }
    let x = w.stem.last().map_or(x, |v| v.as_slice());
    // The observations themselves: read as nonzero entries when sparse.
    let sparse = match t.dense.first() {
        Some(d) if t.stem.is_empty() => w.input.index(x, m, d.d_in),
        _ => {
            w.input.clear();
            false
        }
    };
    for (i, d) in t.dense.iter().enumerate() {
        let (done, rest) = w.dense.split_at_mut(i);
        let input = match done.last() {
            Some(h) => Input::Dense(h),
            None if sparse => Input::Sparse(&w.input),
            None => Input::Dense(x),
        };
        dense_forward(p, d, input, m, Some(act), &mut rest[0]);
    }
}

/// The actor torso's layer outputs for the rows in `work.x`.
pub(crate) fn actor_torso(layout: &Layout, p: &[f32], work: &mut Work) {
    let (m, act) = (work.m, layout.activation);
    torso_forward(p, &layout.actor, &work.x, m, act, &mut work.actor);
}

/// Policy-head outputs for the rows in `work.x` (no value head: acting).
pub fn policy_forward(layout: &Layout, p: &[f32], work: &mut Work) {
    actor_torso(layout, p, work);
    let ha = work.actor.top(&work.x);
    head_forward(p, &layout.policy, ha, work.m, &mut work.head);
}

/// The critic torso (when separate) and the value head; with a shared torso,
/// from the actor torso's outputs already in `work`.
pub(crate) fn value_from_torso(layout: &Layout, p: &[f32], work: &mut Work) {
    let m = work.m;
    let hv = match &layout.critic {
        Some(critic) => {
            torso_forward(p, critic, &work.x, m, layout.activation, &mut work.critic);
            &work.critic
        }
        None => &work.actor,
    };
    let hv = Input::Dense(hv.top(&work.x));
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
