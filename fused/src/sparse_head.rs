//! The policy head over each row's allowed actions only. A game's head is
//! mostly masked (Big Two allows a few dozen of its 1,365 actions at a time)
//! and a masked logit is a constant before the softmax with no gradient, so
//! computing the allowed logits alone gives the same loss and gradients for a
//! fraction of the work: the dense head was about two thirds of a Big Two
//! update.
//!
//! The head's weight is `[d_in, d_out]` (as every dense layer), so an
//! action's weights are a strided column: each step first copies them into
//! rows (`[d_out, d_in]`), works on contiguous rows, and copies the
//! gradient back into the layout's order.

use crate::kernels::wide;
use crate::net::{self, Dense, Layout, Work};

/// Worth it when at most one head entry in this many is allowed: a dense
/// product runs several times more multiply-adds per second than the
/// per-row dot products (Big Two allows about one in forty).
pub const SPARSE_RATIO: usize = 4;

/// The allowed actions of each row of a minibatch, row after row.
#[derive(Default, Debug)]
pub struct Allowed {
    /// Where each row's actions start in `actions`, then the end.
    starts: Vec<usize>,
    actions: Vec<u32>,
}

impl Allowed {
    /// No rows.
    pub fn clear(&mut self) {
        self.starts.clear();
        self.actions.clear();
    }

    /// Appends a row: the actions whose `mask` flag is not 0.
    pub fn push_row(&mut self, mask: &[u8]) {
        if self.starts.is_empty() {
            self.starts.push(0);
        }
        // Eight flags at a time: most of a game's are 0.
        const W: usize = 8;
        for (c, chunk) in mask.chunks(W).enumerate() {
            let word = match <[u8; W]>::try_from(chunk) {
                Ok(w) => u64::from_ne_bytes(w),
                Err(_) => 1,
            };
            if word != 0 {
                let allowed = chunk.iter().enumerate().filter(|(_, m)| **m != 0);
                self.actions
                    .extend(allowed.map(|(a, _)| (c * W + a) as u32));
            }
        }
        self.starts.push(self.actions.len());
    }

    pub fn rows(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Row `r`'s allowed actions, ascending.
    pub fn row(&self, r: usize) -> &[u32] {
        &self.actions[self.starts[r]..self.starts[r + 1]]
    }

    /// Whether the sparse head beats the dense one for these rows of a
    /// `head_dim`-wide head ([`SPARSE_RATIO`]).
    pub fn worth_it(&self, head_dim: usize) -> bool {
        self.rows() > 0 && self.actions.len() * SPARSE_RATIO <= self.rows() * head_dim
    }
}

/// The sparse head's buffers, reused from step to step.
#[derive(Default)]
pub struct SparseHead {
    pub allowed: Allowed,
    /// `[d_out, d_in]` the head's weight, an action per row.
    wt: Vec<f32>,
    /// `[d_out, d_in]` its gradient.
    dwt: Vec<f32>,
}

impl SparseHead {
    /// Bytes its buffers hold.
    pub fn bytes(&self) -> usize {
        (self.wt.capacity() + self.dwt.capacity()) * 4
            + self.allowed.actions.capacity() * 4
            + self.allowed.starts.capacity() * 8
    }

    /// Copies the head's weight from `p` into rows, an action per row, for
    /// the [`SparseHead::forward`] and [`SparseHead::backward`] calls that
    /// follow (a learner's every step; an actor's once per version).
    pub fn load(&mut self, d: &Dense, p: &[f32]) {
        let (d_in, d_out) = (d.d_in, d.d_out);
        self.wt.resize(d_in * d_out, 0.0);
        transpose(&p[d.w..d.w + d_in * d_out], d_in, d_out, &mut self.wt);
    }

    /// `out[r, a] = h[r] · W[:, a] + b[a]` for each row `r` of `h` (`[m,
    /// d_in]`) and each of its allowed actions `a`, with the weight the last
    /// [`SparseHead::load`] copied and the bias in `p`; the other entries of
    /// `out` (`[m, d_out]`) are left as they were.
    pub fn forward(&self, d: &Dense, p: &[f32], h: &[f32], out: &mut [f32]) {
        let (d_in, d_out) = (d.d_in, d.d_out);
        let (wt, bias) = (&self.wt, &p[d.b..d.b + d_out]);
        let rows = h.chunks_exact(d_in).zip(out.chunks_exact_mut(d_out));
        for (r, (hr, zr)) in rows.take(self.allowed.rows()).enumerate() {
            for &a in self.allowed.row(r) {
                let a = a as usize;
                zr[a] = dot(hr, &wt[a * d_in..(a + 1) * d_in]) + bias[a];
            }
        }
    }

    /// The head's gradients from `dy` (`[m, d_out]`, read at the allowed
    /// entries only): `dW` and `db` written into `g` at the layer's place,
    /// `dx = dy Wᵀ` into `dx` (`[m, d_in]`). Reads the weight the last
    /// [`SparseHead::load`] copied.
    pub fn backward(&mut self, d: &Dense, g: &mut [f32], h: &[f32], dy: &[f32], dx: &mut [f32]) {
        let (d_in, d_out) = (d.d_in, d.d_out);
        self.dwt.clear();
        self.dwt.resize(d_in * d_out, 0.0);
        let db = &mut g[d.b..d.b + d_out];
        db.fill(0.0);
        let (wt, dwt) = (&self.wt, &mut self.dwt);
        let rows = h.chunks_exact(d_in).zip(dy.chunks_exact(d_out));
        let rows = rows.zip(dx.chunks_exact_mut(d_in));
        for (r, ((hr, dyr), dxr)) in rows.take(self.allowed.rows()).enumerate() {
            dxr.fill(0.0);
            for &a in self.allowed.row(r) {
                let (a, s) = (a as usize, dyr[a as usize]);
                let span = a * d_in..(a + 1) * d_in;
                axpy(s, &wt[span.clone()], dxr);
                axpy(s, hr, &mut dwt[span]);
                db[a] += s;
            }
        }
        transpose(&self.dwt, d_out, d_in, &mut g[d.w..d.w + d_in * d_out]);
    }
}

/// Policy-head outputs at each row's allowed actions only (`head.allowed`,
/// one row per row of `work.x`; the other entries of `work.head` keep stale
/// values) and values: a mostly masked head's cheaper [`net::forward`].
pub fn forward(layout: &Layout, p: &[f32], work: &mut Work, head: &mut SparseHead) {
    head.load(&layout.policy, p);
    policy_forward(layout, p, work, head);
    net::value_from_torso(layout, p, work);
}

/// Policy-head outputs at each row's allowed actions only, with the head's
/// weight `head` already holds ([`SparseHead::load`] of `p`: an actor's
/// weights, fixed between versions); no value head.
pub fn policy_forward(layout: &Layout, p: &[f32], work: &mut Work, head: &SparseHead) {
    net::actor_torso(layout, p, work);
    let ha = work.actor.top(&work.x);
    head.forward(&layout.policy, p, ha, &mut work.head);
}

/// Lanes summed apart in [`dot`]: four AVX-512 registers' worth, so that
/// the additions do not wait on each other.
const LANES: usize = 64;

/// `a · b`, in [`LANES`] partial sums (a fixed order on every instruction set).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    wide(
        #[inline(always)]
        || {
            let mut acc = [0.0f32; LANES];
            let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
            let (ra, rb) = (ca.remainder(), cb.remainder());
            for (x, y) in ca.zip(cb) {
                for l in 0..LANES {
                    acc[l] += x[l] * y[l];
                }
            }
            let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
            acc.iter().sum::<f32>() + tail
        },
    )
}

/// `y += s x`.
fn axpy(s: f32, x: &[f32], y: &mut [f32]) {
    wide(
        #[inline(always)]
        || y.iter_mut().zip(x).for_each(|(y, &x)| *y += s * x),
    );
}

/// `to` (`[cols, rows]`) = the transpose of `from` (`[rows, cols]`): whole
/// tiles through a fixed-size block (no bounds checks, both sides' lines in
/// the first-level cache), then the edges.
fn transpose(from: &[f32], rows: usize, cols: usize, to: &mut [f32]) {
    const T: usize = 16;
    let (full_r, full_c) = (rows / T * T, cols / T * T);
    for r0 in (0..full_r).step_by(T) {
        for c0 in (0..full_c).step_by(T) {
            let mut tile = [[0.0f32; T]; T];
            for (i, row) in tile.iter_mut().enumerate() {
                row.copy_from_slice(&from[(r0 + i) * cols + c0..][..T]);
            }
            for j in 0..T {
                let out: &mut [f32; T] = (&mut to[(c0 + j) * rows + r0..][..T])
                    .try_into()
                    .expect("a tile's row");
                for (o, row) in out.iter_mut().zip(&tile) {
                    *o = row[j];
                }
            }
        }
    }
    let edge = |r: usize, c: usize| (r >= full_r || c >= full_c).then_some((r, c));
    for (r, c) in (0..rows).flat_map(|r| (0..cols).filter_map(move |c| edge(r, c))) {
        to[c * rows + r] = from[r * cols + c];
    }
}

#[cfg(test)]
mod tests;
