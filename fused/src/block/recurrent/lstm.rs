//! The LSTM's steps, as PyTorch's `nn.LSTM` computes them: with the gate
//! pre-activations `a = x W_ih + b_ih + h W_hh + b_hh` split as i, f, g, o,
//! `c' = σ(f) c + σ(i) tanh(g)` and `h' = σ(o) tanh(c')`.

use super::super::{Backward, Before, Bufs, Forward, Seq};
use super::{Carried, RecurrentBlock, hidden_gradient, hidden_product, transposed};
use crate::kernels::{View, add_bias_then, gemm, sigmoid, tanh, wide};

/// A zero cell of any size the config allows (`network.core_size`): the
/// one an episode's first step reads.
static ZEROS: [f32; 4096] = [0.0; 4096];

/// Floats per sample (in `size`s) kept for the way back: the gates after
/// their nonlinearities (4), the cell `c` (1) and the `h` the step read (1).
pub(super) const INNER: usize = 6;
/// Floats per sample (in `size`s) the way back turns over: the gates'
/// pre-activation gradients (4).
pub(super) const SCRATCH: usize = 4;

/// The cells `c` of every row, in the inner activations of `m` rows.
pub(super) fn cells(inner: &[f32], m: usize, h: usize) -> &[f32] {
    &inner[4 * m * h..5 * m * h]
}

/// The `h` each row's step read.
pub(super) fn h_prev(inner: &[f32], m: usize, h: usize) -> &[f32] {
    &inner[5 * m * h..6 * m * h]
}

/// The cell row `row` read: `None` (zero) where its episode starts, its
/// lane's state's `c` at its first row, else its lane's previous row's
/// cell (in `done`, the cells of the rows before its step).
fn c_before<'a>(
    b: &RecurrentBlock,
    row: usize,
    seq: &Seq<'a>,
    done: &'a [f32],
) -> Option<&'a [f32]> {
    let h = b.at.size;
    match seq.before(row) {
        Before::Zero => None,
        Before::State(l) => Some(&seq.state[l * seq.width + b.state_at + h..][..h]),
        Before::Row(r) => Some(&done[r * h..][..h]),
    }
}

pub(super) fn forward(b: &RecurrentBlock, p: &[f32], x: &[f32], f: Forward<'_>) {
    let (at, m, seq) = (&b.at, f.m, f.seq);
    let (h, gw, e) = (at.size, at.width(), seq.envs);
    if m == 0 {
        return;
    }
    let (w_ih, w_hh, b_ih, b_hh) = at.params(p);
    let (gates, rest) = f.inner[..m * INNER * h].split_at_mut(m * gw);
    let (c, hprev) = rest.split_at_mut(m * h);
    let y = &mut f.out[..m * h];
    gemm(
        m,
        at.d_in,
        gw,
        View::rows(x, at.d_in),
        View::rows(w_ih, gw),
        0.0,
        gates,
    );
    add_bias_then(gates, b_ih, |v| v);
    add_bias_then(gates, b_hh, |v| v);
    for t in 0..m / e {
        let r0 = t * e;
        let hp = &mut hprev[r0 * h..(r0 + e) * h];
        b.h_before(t, &seq, y, hp);
        let g_t = &mut gates[r0 * gw..(r0 + e) * gw];
        hidden_product(e, (h, gw), hp, w_hh, 1.0, g_t);
        let (done, now) = c.split_at_mut(r0 * h);
        let y_t = &mut y[r0 * h..(r0 + e) * h];
        for k in 0..e {
            let c_prev = c_before(b, r0 + k, &seq, done);
            let g = &mut g_t[k * gw..(k + 1) * gw];
            step(
                g,
                c_prev,
                &mut now[k * h..(k + 1) * h],
                &mut y_t[k * h..(k + 1) * h],
            );
        }
    }
}

/// One row's step: the gates' nonlinearities in place, its cell and its
/// output (a zero cell before an episode's first step). Zipped slices, no
/// indexing, so the loop vectorises.
fn step(g: &mut [f32], c_prev: Option<&[f32]>, c: &mut [f32], y: &mut [f32]) {
    let h = c.len();
    let cp = c_prev.unwrap_or(&ZEROS[..h]);
    let (gi, rest) = g.split_at_mut(h);
    let (gf, rest) = rest.split_at_mut(h);
    let (gg, go) = rest.split_at_mut(h);
    wide(
        #[inline(always)]
        || {
            let gates = gi
                .iter_mut()
                .zip(gf.iter_mut())
                .zip(gg.iter_mut().zip(go.iter_mut()));
            let cells = cp.iter().zip(c.iter_mut()).zip(y.iter_mut());
            for (((i, f), (g, o)), ((&cp, c), y)) in gates.zip(cells) {
                (*i, *f, *g, *o) = (sigmoid(*i), sigmoid(*f), tanh(*g), sigmoid(*o));
                let cn = *f * cp + *i * *g;
                *c = cn;
                *y = *o * tanh(cn);
            }
        },
    );
}

/// Back through time from the output's gradient (`bufs.dh`): every row's
/// gate pre-activation gradients into the front of `bufs.extra` (both the
/// input's and the hidden state's products read them). Returns their offset
/// there for each: `(input side, hidden side)`.
pub(super) fn through_time(
    b: &RecurrentBlock,
    p: &[f32],
    bk: &Backward<'_>,
    bufs: &mut Bufs<'_>,
) -> (usize, usize) {
    let (at, m, seq) = (&b.at, bk.m, bk.seq);
    let (h, gw, e) = (at.size, at.width(), seq.envs);
    if m == 0 {
        return (0, 0);
    }
    let (_, w_hh, ..) = at.params(p);
    let w_hh_t = transposed(w_hh, (h, gw));
    let gates = &bk.inner[..m * gw];
    let c = cells(bk.inner, m, h);
    let da = &mut bufs.extra[..m * gw];
    let mut carried = Carried::new(&seq, h, true);
    let dy = &bufs.dh[..m * h];
    for t in (0..m / e).rev() {
        let r0 = t * e;
        for row in r0..r0 + e {
            let l = seq.lane(row);
            let c_prev = c_before(b, row, &seq, c);
            let lane = (&carried.h[l * h..][..h], &mut carried.c[l * h..][..h]);
            let now = (&gates[row * gw..][..gw], &c[row * h..][..h]);
            let reads_row = matches!(seq.before(row), Before::Row(_));
            step_back(
                now,
                c_prev,
                &dy[row * h..][..h],
                lane,
                &mut da[row * gw..][..gw],
                !reads_row,
            );
        }
        if (r0..r0 + e).any(|row| matches!(seq.before(row), Before::Row(_))) {
            let da_t = &da[r0 * gw..(r0 + e) * gw];
            hidden_gradient(e, (h, gw), da_t, &w_hh_t, 0.0, &mut carried.step);
        }
        carried.pass_back(t, &seq, h);
    }
    (0, 0)
}

/// One row's way back: its gates' pre-activation gradients `da` from the
/// gradient at its output `dy` plus the one carried from the next step at
/// `h`, and at its cell; the cell's gradient carried to its lane's row
/// before (zero when it read no row: nothing before it to reach).
fn step_back(
    (g, c): (&[f32], &[f32]),
    c_prev: Option<&[f32]>,
    dy: &[f32],
    (dh_next, dc_next): (&[f32], &mut [f32]),
    da: &mut [f32],
    start: bool,
) {
    let h = c.len();
    let cp = c_prev.unwrap_or(&ZEROS[..h]);
    let keep = if start { 0.0 } else { 1.0 };
    let (gi, rest) = g.split_at(h);
    let (gf, rest) = rest.split_at(h);
    let (gg, go) = rest.split_at(h);
    let (dai, rest) = da.split_at_mut(h);
    let (daf, rest) = rest.split_at_mut(h);
    let (dag, dao) = rest.split_at_mut(h);
    wide(
        #[inline(always)]
        || {
            let gates = gi.iter().zip(gf).zip(gg.iter().zip(go));
            let state = c.iter().zip(cp).zip(dy.iter().zip(dh_next));
            let out = dai
                .iter_mut()
                .zip(daf.iter_mut())
                .zip(dag.iter_mut().zip(dao.iter_mut()));
            let all = gates.zip(state).zip(out.zip(dc_next.iter_mut()));
            for ((((&i, &f), (&g, &o)), ((&c, &cp), (&dy, &dhn))), (((ai, af), (ag, ao)), dcn)) in
                all
            {
                let dh = dy + dhn;
                let tc = tanh(c);
                let dc = dh * o * (1.0 - tc * tc) + *dcn;
                *ai = dc * g * i * (1.0 - i);
                *af = dc * cp * f * (1.0 - f);
                *ag = dc * i * (1.0 - g * g);
                *ao = dh * tc * o * (1.0 - o);
                *dcn = dc * f * keep;
            }
        },
    );
}
