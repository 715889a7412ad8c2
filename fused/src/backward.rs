//! The backward pass: from the loss's gradients at the policy head and the
//! value (filled in per sample by the algorithm's loss) back through both
//! heads and torsos to every parameter's gradient, using the activations the
//! forward pass kept in [`Work`]. Checked against burn's autodiff in
//! `sebulba_algorithms::engine::fused`'s tests.

use crate::block::{Backward, Bufs, Input, Seq, bias_grad, dense_backward};
use crate::kernels::{View, gemm};
use crate::net::{self, Head, Layout, TorsoWork, Work};
use crate::sparse_head::SparseHead;
use crate::{Activation, conv};

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
        let turned_over = layout
            .torsos()
            .flat_map(|t| &t.blocks)
            .map(|b| b.pass().scratch_len())
            .max()
            .unwrap_or(0);
        let widest = m * layout.widest();
        let [a, b, c, extra] = &mut self.scratch;
        for s in [a, b, c] {
            s.resize(widest, 0.0);
        }
        // Only a block that says so (a residual block, a recurrent core)
        // turns over a fourth buffer on its way back.
        extra.resize(m * turned_over, 0.0);
    }
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
    seq: Seq<'a>,
}

/// Back through a torso from `b.dh` (the gradient at its output, `[m,
/// width]`), block by block; the first block's input (the observations)
/// gets no gradient.
fn torso_backward(p: &[f32], g: &mut [f32], t: &Torso<'_>, m: usize, mut bufs: Bufs<'_>) {
    for (i, block) in t.layers.blocks.iter().enumerate().rev() {
        let input = match i {
            0 if t.outs.input.is_on() => Input::Sparse(&t.outs.input),
            _ => Input::Dense(t.outs.input_of(i, t.x)),
        };
        let b = Backward {
            m,
            act: t.act,
            seq: t.seq,
            input,
            y: &t.outs.outs[i],
            inner: &t.outs.inner[i],
            wanted: i > 0,
        };
        block.pass().backward(p, g, b, &mut bufs);
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
                seq: work.seq(),
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
        seq: work.seq(),
    };
    let bufs = Bufs {
        dh: dha,
        spare,
        extra,
        conv,
    };
    torso_backward(p, g, &t, m, bufs);
}
