//! A dense layer: `y = act(x W + b)` with `W` `[d_in, d_out]` row-major, as
//! in burn's `Linear`, reading a flat vector or an image flattened, or the
//! observations' nonzero entries when it is the first block
//! ([`crate::sparse_input`]). Its products serve the heads too.

use super::{Backward, Bufs, Forward, Input, Pass};
use crate::activation;
use crate::arch::{Activation, Shape};
use crate::kernels::{View, add_bias_then, add_column_sums, gemm, tanh};
use crate::param_tensor::{self, ParamTensor};
use crate::places::{Dense, Places};

/// A dense layer of `at.d_out` outputs reading `input` (an image read
/// flattened), then the network's activation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DenseBlock {
    pub at: Dense,
    pub input: Shape,
}

impl DenseBlock {
    /// `width` outputs reading `input`, placed next.
    pub(super) fn place(width: usize, input: Shape, places: &mut Places) -> Result<Self, String> {
        if width == 0 {
            return Err("zero outputs".into());
        }
        Ok(Self {
            at: places.dense(input.len(), width),
            input,
        })
    }
}

impl Pass for DenseBlock {
    fn input(&self) -> Shape {
        self.input
    }

    fn output(&self) -> Shape {
        Shape::Flat(self.at.d_out)
    }

    fn macs(&self) -> usize {
        self.at.d_in * self.at.d_out
    }

    fn group(&self) -> Option<&'static str> {
        Some("layers")
    }

    fn tensors(&self, name: &str, out: &mut Vec<ParamTensor>) {
        param_tensor::dense(out, name, &self.at, self.input.image(), false);
    }

    fn forward(&self, p: &[f32], x: Input<'_>, f: Forward<'_>) {
        dense_forward(p, &self.at, x, f.m, Some(f.act), f.out);
    }

    fn backward(&self, p: &[f32], g: &mut [f32], b: Backward<'_>, bufs: &mut Bufs<'_>) {
        let (d, m) = (&self.at, b.m);
        let n = m * d.d_out;
        activation::backward(b.act, &b.y[..n], &mut bufs.dh[..n]);
        match b.input {
            // The observations read as their nonzero entries (the first
            // block, so no gradient wanted at them).
            Input::Sparse(rows) => {
                let dw = &mut g[d.w..d.w + d.d_in * d.d_out];
                rows.weight_grad(&bufs.dh[..n], d.d_out, dw);
                bias_grad(g, d.b, d.d_out, bufs.dh, m);
            }
            Input::Dense(x) => {
                let dx = b.wanted.then_some(&mut bufs.spare[..m * d.d_in]);
                dense_backward(p, g, d, x, bufs.dh, m, dx);
                if b.wanted {
                    std::mem::swap(bufs.dh, bufs.spare);
                }
            }
        }
    }
}

/// `out = act(x W + b)` for `m` rows: the product, then the bias and the
/// activation in one pass over the output.
pub(crate) fn dense_forward(
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

/// Gradient of a linear layer: `dW = xᵀ dy`, `db = Σ dy` (written, not added),
/// and, when asked, `dx = dy Wᵀ`.
pub(crate) fn dense_backward(
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
pub(crate) fn bias_grad(g: &mut [f32], b: usize, d_out: usize, dy: &[f32], m: usize) {
    let gb = &mut g[b..b + d_out];
    gb.fill(0.0);
    add_column_sums(&dy[..m * d_out], d_out, gb);
}
