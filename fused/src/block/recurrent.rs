//! A recurrent core: PyTorch's `nn.LSTM` or `nn.GRU` (one layer), run over
//! env sequences. The forward pass takes every row's input product at once
//! (`x W_ih`, one product over the whole minibatch), then steps through
//! time with one product of the envs' previous `h` per step (`E` rows at a
//! time); the backward pass runs back through time the same way and takes
//! the weights' gradients as two products over the whole minibatch. Each
//! env's state is zeroed where its episode starts ([`Seq::starts`]), so no
//! gradient crosses an episode's start either.

mod gru;
mod lstm;

use super::{Backward, Before, Bufs, Forward, Input, Pass, Seq, bias_grad};
use crate::arch::{Cell, Core, Shape};
use crate::kernels::few_rows::{FEW_ROWS, rows_by};
use crate::kernels::{View, gemm};
use crate::param_tensor::{self, ParamTensor};
use crate::places::{Places, RecurrentAt};

/// A recurrent core placed: its parameters, what it reads, and where its
/// state sits in each env's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecurrentBlock {
    pub cell: Cell,
    pub at: RecurrentAt,
    pub input: Shape,
    /// Offset of its state (`h`, then an LSTM's `c`) in each env's.
    pub state_at: usize,
}

impl RecurrentBlock {
    /// `core` reading `input` (an image read flattened), placed next, its
    /// state at `state_at`.
    pub(super) fn place(
        core: Core,
        input: Shape,
        places: &mut Places,
        state_at: usize,
    ) -> Result<Self, String> {
        if core.size == 0 {
            return Err("zero hidden units".into());
        }
        if input.image().is_some() {
            // PyTorch's core would read the image flattened channels first:
            // a dense layer in between keeps the published tensors PyTorch's.
            return Err(
                "reads an image; put a dense layer (`network.hidden`) before the core".into(),
            );
        }
        Ok(Self {
            cell: core.cell,
            at: places.recurrent(input.len(), core.size, core.cell.gates()),
            input,
            state_at,
        })
    }

    /// Hidden units.
    fn size(&self) -> usize {
        self.at.size
    }

    /// The `h` each row of step `t` reads into `out` (`[envs, size]`): zero
    /// where its episode starts, its lane's state before the first row, or
    /// its lane's previous output (from `y`).
    fn h_before(&self, t: usize, seq: &Seq<'_>, y: &[f32], out: &mut [f32]) {
        let (e, h) = (seq.envs, self.size());
        for (k, dst) in out.chunks_exact_mut(h).take(e).enumerate() {
            match seq.before(t * e + k) {
                Before::Zero => dst.fill(0.0),
                Before::State(l) => {
                    dst.copy_from_slice(&seq.state[l * seq.width + self.state_at..][..h])
                }
                Before::Row(r) => dst.copy_from_slice(&y[r * h..][..h]),
            }
        }
    }
}

/// The gradients carried back through time, one per lane: at each lane's
/// `h` (and an LSTM's `c`) after the step being taken back.
struct Carried {
    h: Vec<f32>,
    c: Vec<f32>,
    /// One step's gradients at the `h` its rows read, `[envs, size]`.
    step: Vec<f32>,
}

impl Carried {
    fn new(seq: &Seq<'_>, size: usize, cells: bool) -> Self {
        let n = seq.lanes() * size;
        Self {
            h: vec![0.0; n],
            c: vec![0.0; if cells { n } else { 0 }],
            step: vec![0.0; seq.envs * size],
        }
    }

    /// The step's gradients at the `h` its rows read (`self.step`) to the
    /// lanes they belong to: kept where a row read its lane's previous row,
    /// zero where it read a zero or the initial state (nothing before it to
    /// reach).
    fn pass_back(&mut self, t: usize, seq: &Seq<'_>, size: usize) {
        let e = seq.envs;
        for k in 0..e {
            let row = t * e + k;
            let dst = &mut self.h[seq.lane(row) * size..][..size];
            match seq.before(row) {
                Before::Row(_) => dst.copy_from_slice(&self.step[k * size..][..size]),
                _ => dst.fill(0.0),
            }
        }
    }
}

/// `out = h W_hh + beta out` (`beta` 0 or 1) for one step's `e` envs:
/// `h` `[e, size]`, `W_hh` `[size, width]`.
fn hidden_product(
    e: usize,
    (size, width): (usize, usize),
    h: &[f32],
    w_hh: &[f32],
    beta: f32,
    out: &mut [f32],
) {
    match e <= FEW_ROWS {
        true => rows_by(e, size, width, h, w_hh, beta, out),
        false => gemm(
            e,
            size,
            width,
            View::rows(h, size),
            View::rows(w_hh, width),
            beta,
            out,
        ),
    }
}

/// `out = d W_hhᵀ + beta out` (`beta` 0 or 1) for one step's `e` envs: the
/// gradient at the `h` a step read, from its gates' `d` `[e, width]`;
/// `w_hh_t` is `W_hhᵀ` `[width, size]`, copied once for the whole way back.
fn hidden_gradient(
    e: usize,
    (size, width): (usize, usize),
    d: &[f32],
    w_hh_t: &[f32],
    beta: f32,
    out: &mut [f32],
) {
    match e <= FEW_ROWS {
        true => rows_by(e, width, size, d, w_hh_t, beta, out),
        false => {
            let (d, w) = (View::rows(d, width), View::rows(w_hh_t, size));
            gemm(e, width, size, d, w, beta, out);
        }
    }
}

/// `W_hhᵀ` (`[width, size]`, row-major) of `W_hh` (`[size, width]`): what
/// every step of the way back multiplies by.
fn transposed(w_hh: &[f32], (size, width): (usize, usize)) -> Vec<f32> {
    let mut t = vec![0.0f32; size * width];
    for (i, row) in w_hh[..size * width].chunks_exact(width).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            t[j * size + i] = v;
        }
    }
    t
}

impl Pass for RecurrentBlock {
    fn input(&self) -> Shape {
        self.input
    }

    fn output(&self) -> Shape {
        Shape::Flat(self.size())
    }

    fn macs(&self) -> usize {
        let a = &self.at;
        (a.d_in + a.size) * a.gates * a.size
    }

    fn inner_len(&self) -> usize {
        match self.cell {
            Cell::Lstm => lstm::INNER * self.size(),
            Cell::Gru => gru::INNER * self.size(),
        }
    }

    fn scratch_len(&self) -> usize {
        match self.cell {
            Cell::Lstm => lstm::SCRATCH * self.size(),
            Cell::Gru => gru::SCRATCH * self.size(),
        }
    }

    fn state_width(&self) -> usize {
        self.cell.carried() * self.size()
    }

    fn state_after(
        &self,
        (m, y, inner): (usize, &[f32], &[f32]),
        rows: &[usize],
        width: usize,
        out: &mut [f32],
    ) {
        let h = self.size();
        for (k, &row) in rows.iter().enumerate() {
            let dst = &mut out[k * width + self.state_at..];
            dst[..h].copy_from_slice(&y[row * h..][..h]);
            if self.cell == Cell::Lstm {
                dst[h..2 * h].copy_from_slice(&lstm::cells(inner, m, h)[row * h..][..h]);
            }
        }
    }

    fn group(&self) -> Option<&'static str> {
        Some("core")
    }

    fn tensors(&self, name: &str, out: &mut Vec<ParamTensor>) {
        param_tensor::recurrent(out, name, &self.at);
    }

    fn forward(&self, p: &[f32], x: Input<'_>, f: Forward<'_>) {
        assert!(
            f.m.is_multiple_of(f.seq.envs.max(1))
                && f.seq.state.len() == f.seq.lanes() * f.seq.width
                && f.seq.lanes() >= f.seq.envs,
            "a recurrent core's rows must be whole steps of the sequence's envs"
        );
        match self.cell {
            Cell::Lstm => lstm::forward(self, p, x.rows(), f),
            Cell::Gru => gru::forward(self, p, x.rows(), f),
        }
    }

    fn backward(&self, p: &[f32], g: &mut [f32], b: Backward<'_>, bufs: &mut Bufs<'_>) {
        let (at, m) = (&self.at, b.m);
        let (h, gw, d_in) = (at.size, at.width(), at.d_in);
        let (dxo, dho) = match self.cell {
            Cell::Lstm => lstm::through_time(self, p, &b, bufs),
            Cell::Gru => gru::through_time(self, p, &b, bufs),
        };
        let hprev = match self.cell {
            Cell::Lstm => lstm::h_prev(b.inner, m, h),
            Cell::Gru => gru::h_prev(b.inner, m, h),
        };
        let (x, extra) = (b.input.rows(), &bufs.extra[..]);
        let (da_x, da_h) = (&extra[dxo..dxo + m * gw], &extra[dho..dho + m * gw]);
        // dW_ih = xᵀ dA_x, dW_hh = h_prevᵀ dA_h, each over every row at once.
        let dw_ih = &mut g[at.w_ih..at.w_ih + d_in * gw];
        gemm(
            d_in,
            m,
            gw,
            View::transposed(x, d_in),
            View::rows(da_x, gw),
            0.0,
            dw_ih,
        );
        let dw_hh = &mut g[at.w_hh..at.w_hh + h * gw];
        gemm(
            h,
            m,
            gw,
            View::transposed(hprev, h),
            View::rows(da_h, gw),
            0.0,
            dw_hh,
        );
        bias_grad(g, at.b_ih, gw, da_x, m);
        bias_grad(g, at.b_hh, gw, da_h, m);
        if b.wanted {
            let (w_ih, ..) = at.params(p);
            let dx = &mut bufs.spare[..m * d_in];
            gemm(
                m,
                gw,
                d_in,
                View::rows(da_x, gw),
                View::transposed(w_ih, gw),
                0.0,
                dx,
            );
            std::mem::swap(bufs.dh, bufs.spare);
        }
    }
}

#[cfg(test)]
mod tests;
