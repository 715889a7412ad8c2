//! The backward pass: from the loss's gradients at the policy head and the
//! value (filled in per sample by the algorithm's loss) back through both
//! heads and torsos to every parameter's gradient, using the activations the
//! forward pass kept in [`Work`]. Checked against burn's autodiff in
//! `sebulba_algorithms::engine::fused`'s tests.

use crate::kernels::{View, add_column_sums, gemm};
use crate::net::{self, BlockAt, Dense, Head, Layout, TorsoWork, Work};
use crate::residual::Residual;
use crate::sparse_head::SparseHead;
use crate::{Activation, activation, conv, pool};

/// The backward pass's buffers for a minibatch of `m` rows, reused from step
/// to step.
#[derive(Default)]
pub struct Grads {
    /// `[m, head_dim]` the loss's gradient with respect to the policy head's output.
    pub d_head: Vec<f32>,
    /// `[m]` the loss's gradient with respect to the value.
    pub d_value: Vec<f32>,
    scratch: [Vec<f32>; 4],
    /// The convolutions' windows and their gradients, a chunk at a time.
    conv: conv::Scratch,
}

impl Grads {
    /// Bytes its buffers hold.
    pub fn bytes(&self) -> usize {
        [&self.d_head, &self.d_value]
            .into_iter()
            .chain(&self.scratch)
            .map(conv::f32_bytes)
            .sum::<usize>()
            + self.conv.bytes()
    }

    /// Sizes every buffer for `m` rows (allocates only when `m` or the layout grows).
    pub fn resize(&mut self, layout: &Layout, m: usize) {
        self.d_head.resize(m * layout.head_dim, 0.0);
        self.d_value.resize(m, 0.0);
        let residual = layout
            .torsos()
            .flat_map(|t| &t.blocks)
            .any(|b| matches!(b, BlockAt::Residual { .. }));
        let widest = m * layout.widest();
        let [a, b, c, extra] = &mut self.scratch;
        for s in [a, b, c] {
            s.resize(widest, 0.0);
        }
        // Only a residual block's way back turns over a fourth buffer.
        extra.resize(if residual { widest } else { 0 }, 0.0);
    }
}

/// Gradient of a linear layer: `dW = xᵀ dy`, `db = Σ dy` (written, not added),
/// and, when asked, `dx = dy Wᵀ`.
fn dense_backward(
    p: &[f32],
    g: &mut [f32],
    d: &Dense,
    x: &[f32],
    dy: &[f32],
    m: usize,
    dx: Option<&mut [f32]>,
) {
    let (d_in, d_out) = (d.d_in, d.d_out);
    // dW [d_in, d_out] = xᵀ [d_in, m] · dy [m, d_out]
    let (xt, dy_rows) = (View::transposed(x, d_in), View::rows(dy, d_out));
    gemm(
        d_in,
        m,
        d_out,
        xt,
        dy_rows,
        0.0,
        &mut g[d.w..d.w + d_in * d_out],
    );
    bias_grad(g, d.b, d_out, dy, m);
    if let Some(dx) = dx {
        // dx [m, d_in] = dy [m, d_out] · Wᵀ [d_out, d_in]
        let wt = View::transposed(&p[d.w..d.w + d_in * d_out], d_out);
        gemm(m, d_out, d_in, dy_rows, wt, 0.0, dx);
    }
}

/// `db = Σ dy` (written) for the bias at `b` of a `d_out`-wide layer.
fn bias_grad(g: &mut [f32], b: usize, d_out: usize, dy: &[f32], m: usize) {
    let gb = &mut g[b..b + d_out];
    gb.fill(0.0);
    add_column_sums(&dy[..m * d_out], d_out, gb);
}

/// Gradient of the policy head, whose weight `W` is `[d_out, d_in]`: `dW =
/// dyᵀ x`, `db = Σ dy` (written) and `dx = dy W`.
fn head_backward(
    p: &[f32],
    g: &mut [f32],
    h: &Head,
    x: &[f32],
    dy: &[f32],
    m: usize,
    dx: &mut [f32],
) {
    let (d_in, d_out) = (h.d_in, h.d_out);
    let (dyt, x_rows) = (View::transposed(dy, d_out), View::rows(x, d_in));
    gemm(
        d_out,
        m,
        d_in,
        dyt,
        x_rows,
        0.0,
        &mut g[h.w..h.w + d_in * d_out],
    );
    bias_grad(g, h.b, d_out, dy, m);
    let w = View::rows(&p[h.w..h.w + d_in * d_out], d_in);
    gemm(m, d_out, d_in, View::rows(dy, d_out), w, 0.0, dx);
}

/// One torso's blocks, their input and outputs, for the way back.
struct Torso<'a> {
    layers: &'a net::Torso,
    x: &'a [f32],
    outs: &'a TorsoWork,
    act: Activation,
}

/// The buffers the way back through a torso turns over.
struct Bufs<'a> {
    /// The gradient at the current block's output (overwritten).
    dh: &'a mut Vec<f32>,
    spare: &'a mut Vec<f32>,
    /// A residual block's second scratch.
    extra: &'a mut Vec<f32>,
    conv: &'a mut conv::Scratch,
}

/// Back through a dense layer from `b.dh`; `wanted`: the input's gradient
/// (into `b.dh`).
fn dense_block(
    p: &[f32],
    g: &mut [f32],
    t: &Torso<'_>,
    (i, m): (usize, usize),
    d: &Dense,
    b: &mut Bufs<'_>,
) {
    let dy = &mut b.dh[..m * d.d_out];
    activation::backward(t.act, &t.outs.outs[i][..m * d.d_out], dy);
    if i == 0 && t.outs.input.is_on() {
        // The observations read as their nonzero entries (the first block,
        // so no gradient wanted at them).
        let dw = &mut g[d.w..d.w + d.d_in * d.d_out];
        t.outs.input.weight_grad(&b.dh[..m * d.d_out], d.d_out, dw);
        bias_grad(g, d.b, d.d_out, b.dh, m);
        return;
    }
    let input = t.outs.input_of(i, t.x);
    let dx = (i > 0).then_some(&mut b.spare[..m * d.d_in]);
    dense_backward(p, g, d, input, b.dh, m, dx);
    if i > 0 {
        std::mem::swap(b.dh, b.spare);
    }
}

/// Back through a torso from `b.dh` (the gradient at its output, `[m,
/// width]`), block by block; the first block's input (the observations)
/// gets no gradient.
fn torso_backward(p: &[f32], g: &mut [f32], t: &Torso<'_>, m: usize, mut b: Bufs<'_>) {
    for (i, block) in t.layers.blocks.iter().enumerate().rev() {
        let (input, y) = (t.outs.input_of(i, t.x), &t.outs.outs[i]);
        let wanted = i > 0;
        match block {
            BlockAt::Dense { at, .. } => dense_block(p, g, t, (i, m), at, &mut b),
            BlockAt::Conv { at: c, activate } => {
                let k = &c.conv;
                if *activate {
                    activation::backward(
                        t.act,
                        &y[..m * k.out_len()],
                        &mut b.dh[..m * k.out_len()],
                    );
                }
                let (w, rest) = g.split_at_mut(c.b);
                let (dw, db) = (&mut w[c.w..], &mut rest[..k.c_out]);
                let dx = wanted.then(|| &mut b.spare[..m * k.in_len()]);
                conv::backward(k, &p[c.w..c.b], input, b.dh, m, (dw, db), dx, b.conv);
                if wanted {
                    std::mem::swap(b.dh, b.spare);
                }
            }
            BlockAt::MaxPool(pool) if wanted => {
                pool::backward(pool, input, y, b.dh, m, b.spare);
                std::mem::swap(b.dh, b.spare);
            }
            BlockAt::MaxPool(_) => {}
            BlockAt::Residual { conv0, conv1 } => {
                let r = Residual {
                    conv0,
                    conv1,
                    act: t.act,
                };
                let scratch = (&mut b.spare[..], &mut b.extra[..]);
                let inner = &t.outs.inner[i];
                r.backward(p, g, inner, m, b.dh, scratch, wanted, b.conv);
            }
            BlockAt::Activate(s) => {
                activation::backward(t.act, &y[..m * s.len()], &mut b.dh[..m * s.len()]);
            }
        }
    }
}

/// Every parameter's gradient into `g` (overwritten) from `grads.d_head` and
/// `grads.d_value`, using the activations of the last forward pass in `work`:
/// through the policy head at the allowed entries only when the pass was
/// [`crate::sparse_head::forward`] with `sparse`.
pub fn backward(
    layout: &Layout,
    p: &[f32],
    g: &mut [f32],
    work: &Work,
    grads: &mut Grads,
    sparse: Option<&SparseHead>,
) {
    let (m, act, width) = (work.m, layout.activation, layout.width());
    let [dha, dhv, spare, extra] = &mut grads.scratch;
    let conv = &mut grads.conv;
    let ha = work.actor.top(&work.x);
    let hv = match layout.critic {
        Some(_) => work.critic.top(&work.x),
        None => ha,
    };
    let (dha_w, dhv_w) = (&mut dha[..m * width], &mut dhv[..m * width]);
    match sparse {
        Some(head) => head.backward(&layout.policy, p, g, ha, &grads.d_head, dha_w),
        None => head_backward(p, g, &layout.policy, ha, &grads.d_head, m, dha_w),
    }
    dense_backward(p, g, &layout.value, hv, &grads.d_value, m, Some(dhv_w));
    match &layout.critic {
        Some(critic) => {
            let t = Torso {
                layers: critic,
                x: &work.x,
                outs: &work.critic,
                act,
            };
            let bufs = Bufs {
                dh: dhv,
                spare,
                extra,
                conv,
            };
            torso_backward(p, g, &t, m, bufs);
        }
        None => {
            // A shared torso gets both heads' gradients.
            let (a, b) = (&mut dha[..m * width], &dhv[..m * width]);
            a.iter_mut().zip(b).for_each(|(a, &b)| *a += b);
        }
    }
    let t = Torso {
        layers: &layout.actor,
        x: &work.x,
        outs: &work.actor,
        act,
    };
    let bufs = Bufs {
        dh: dha,
        spare,
        extra,
        conv,
    };
    torso_backward(p, g, &t, m, bufs);
}
