//! The GRU's steps, as PyTorch's `nn.GRU` computes them: with `x W_ih +
//! b_ih` split as `(x_r, x_z, x_n)` and `h W_hh + b_hh` as `(h_r, h_z,
//! h_n)`, `r = σ(x_r + h_r)`, `z = σ(x_z + h_z)`, `n = tanh(x_n + r h_n)`
//! and `h' = (1 - z) n + z h`, computed as `n + z (h - n)`.

use super::super::{Backward, Before, Bufs, Forward};
use super::{Carried, RecurrentBlock, hidden_gradient, hidden_product, transposed};
use crate::kernels::{View, add_bias_then, gemm, sigmoid, tanh, wide};

/// Floats per sample (in `size`s) kept for the way back: r, z and n (3),
/// the hidden side's products `h W_hh + b_hh` (3) and the `h` the step
/// read (1).
pub(super) const INNER: usize = 7;
/// Floats per sample (in `size`s) the way back turns over: the gradients at
/// the input side's products (3) and at the hidden side's (3), which differ
/// at n.
pub(super) const SCRATCH: usize = 6;

/// The `h` each row's step read.
pub(super) fn h_prev(inner: &[f32], m: usize, h: usize) -> &[f32] {
    &inner[6 * m * h..7 * m * h]
}

pub(super) fn forward(b: &RecurrentBlock, p: &[f32], x: &[f32], f: Forward<'_>) {
    let (at, m, seq) = (&b.at, f.m, f.seq);
    let (h, gw, e) = (at.size, at.width(), seq.envs);
    if m == 0 {
        return;
    }
    let (w_ih, w_hh, b_ih, b_hh) = at.params(p);
    let (gates, rest) = f.inner[..m * INNER * h].split_at_mut(m * gw);
    let (hg, hprev) = rest.split_at_mut(m * gw);
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
    for t in 0..m / e {
        let r0 = t * e;
        let hp = &mut hprev[r0 * h..(r0 + e) * h];
        b.h_before(t, &seq, y, hp);
        let hg_t = &mut hg[r0 * gw..(r0 + e) * gw];
        hidden_product(e, (h, gw), hp, w_hh, 0.0, hg_t);
        add_bias_then(hg_t, b_hh, |v| v);
        for k in 0..e {
            let row = r0 + k;
            let g = &mut gates[row * gw..(row + 1) * gw];
            let hidden = (&hg_t[k * gw..(k + 1) * gw], &hp[k * h..(k + 1) * h]);
            step(g, hidden, &mut y[row * h..(row + 1) * h]);
        }
    }
}

/// One row's step: `g` (the input side's products) becomes r, z and n.
/// Zipped slices, no indexing, so the loop vectorises.
fn step(g: &mut [f32], (hg, hp): (&[f32], &[f32]), y: &mut [f32]) {
    let h = y.len();
    let (gr, rest) = g.split_at_mut(h);
    let (gz, gn) = rest.split_at_mut(h);
    let (hr, rest) = hg.split_at(h);
    let (hz, hn) = rest.split_at(h);
    wide(
        #[inline(always)]
        || {
            let input = gr.iter_mut().zip(gz.iter_mut()).zip(gn.iter_mut());
            let hidden = hr.iter().zip(hz).zip(hn.iter().zip(hp));
            for (((r, z), n), ((&hr, &hz), (&hn, &hp)), y) in input
                .zip(hidden)
                .zip(y.iter_mut())
                .map(|((a, b), c)| (a, b, c))
            {
                *r = sigmoid(*r + hr);
                *z = sigmoid(*z + hz);
                *n = tanh(*n + *r * hn);
                *y = *n + *z * (hp - *n);
            }
        },
    );
}

/// Back through time from the output's gradient (`bufs.dh`): every row's
/// gradients at the input side's products and at the hidden side's into
/// `bufs.extra`. Returns their offsets there.
pub(super) fn through_time(
    b: &RecurrentBlock,
    p: &[f32],
    bk: &Backward<'_>,
    bufs: &mut Bufs<'_>,
) -> (usize, usize) {
    let (at, m, seq) = (&b.at, bk.m, bk.seq);
    let (h, gw, e) = (at.size, at.width(), seq.envs);
    if m == 0 {
        return (0, m * gw);
    }
    let (_, w_hh, ..) = at.params(p);
    let w_hh_t = transposed(w_hh, (h, gw));
    let (gates, hg) = bk.inner[..2 * m * gw].split_at(m * gw);
    let hprev = h_prev(bk.inner, m, h);
    let (dx, dhg) = bufs.extra[..2 * m * gw].split_at_mut(m * gw);
    let mut carried = Carried::new(&seq, h, false);
    let dy = &bufs.dh[..m * h];
    for t in (0..m / e).rev() {
        let r0 = t * e;
        for (k, row) in (r0..r0 + e).enumerate() {
            let now = (&gates[row * gw..][..gw], &hg[row * gw..][..gw]);
            let hp = &hprev[row * h..][..h];
            let grads = (&mut dx[row * gw..][..gw], &mut dhg[row * gw..][..gw]);
            // The lane's gradient in, the part that skips the products out.
            let through = &mut carried.step[k * h..][..h];
            through.copy_from_slice(&carried.h[seq.lane(row) * h..][..h]);
            step_back(now, hp, &dy[row * h..][..h], through, grads);
        }
        if (r0..r0 + e).any(|row| matches!(seq.before(row), Before::Row(_))) {
            let dhg_t = &dhg[r0 * gw..(r0 + e) * gw];
            hidden_gradient(e, (h, gw), dhg_t, &w_hh_t, 1.0, &mut carried.step);
        }
        carried.pass_back(t, &seq, h);
    }
    (0, m * gw)
}

/// One row's way back: the gradients at its input side's products (`dx`)
/// and at its hidden side's (`dhg`) from the gradient at its output `dy`
/// plus the one carried from its lane's next row (`dh_next`), which
/// becomes the part of the previous `h`'s gradient that skips the products
/// (`z dh`).
fn step_back(
    (g, hg): (&[f32], &[f32]),
    hp: &[f32],
    dy: &[f32],
    dh_next: &mut [f32],
    (dx, dhg): (&mut [f32], &mut [f32]),
) {
    let h = hp.len();
    let (gr, rest) = g.split_at(h);
    let (gz, gn) = rest.split_at(h);
    let hn = &hg[2 * h..3 * h];
    let (dxr, rest) = dx.split_at_mut(h);
    let (dxz, dxn) = rest.split_at_mut(h);
    let (dhr, rest) = dhg.split_at_mut(h);
    let (dhz, dhn) = rest.split_at_mut(h);
    wide(
        #[inline(always)]
        || {
            let gates = gr.iter().zip(gz).zip(gn.iter().zip(hn));
            let ins = hp.iter().zip(dy).zip(dh_next.iter_mut());
            let to_x = dxr.iter_mut().zip(dxz.iter_mut()).zip(dxn.iter_mut());
            let to_h = dhr.iter_mut().zip(dhz.iter_mut()).zip(dhn.iter_mut());
            for (
                (((&r, &z), (&n, &hn)), ((&hp, &dy), dhn_next)),
                (((xr, xz), xn), ((hr, hz), hnn)),
            ) in gates.zip(ins).zip(to_x.zip(to_h))
            {
                let dh = dy + *dhn_next;
                let dan = dh * (1.0 - z) * (1.0 - n * n);
                let dar = dan * hn * r * (1.0 - r);
                let daz = dh * (hp - n) * z * (1.0 - z);
                (*xr, *xz, *xn) = (dar, daz, dan);
                (*hr, *hz, *hnn) = (dar, daz, dan * r);
                *dhn_next = dh * z;
            }
        },
    );
}
