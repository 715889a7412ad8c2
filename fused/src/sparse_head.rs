//! The policy head over each row's allowed actions only. A game's head is
//! mostly masked (Big Two allows a few dozen of its 1,365 actions at a time)
//! and a masked logit is a constant before the softmax with no gradient, so
//! computing the allowed logits alone gives the same loss and gradients for a
//! fraction of the work: the dense head was about two thirds of a Big Two
//! update.
//!
//! The head's weight is stored an action per row ([`Head`]), so an allowed
//! action's weights and their gradient are contiguous rows of the
//! parameter and gradient vectors, read and written in place.

use crate::kernels::wide;
use crate::net::{self, Head, Layout, Work};

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
}

impl SparseHead {
    /// Bytes its buffers hold.
    pub fn bytes(&self) -> usize {
        self.allowed.actions.capacity() * 4 + self.allowed.starts.capacity() * 8
    }

    /// `out[r, a] = h[r] · W[a] + b[a]` for each row `r` of `h` (`[m, d_in]`)
    /// and each of its allowed actions `a`, with the head's weight and bias
    /// in `p`; the other entries of `out` (`[m, d_out]`) are left as they
    /// were.
    pub fn forward(&self, d: &Head, p: &[f32], h: &[f32], out: &mut [f32]) {
        let (d_in, d_out) = (d.d_in, d.d_out);
        let (w, bias) = (&p[d.w..d.w + d_in * d_out], &p[d.b..d.b + d_out]);
        let rows = h.chunks_exact(d_in).zip(out.chunks_exact_mut(d_out));
        for (r, (hr, zr)) in rows.take(self.allowed.rows()).enumerate() {
            for &a in self.allowed.row(r) {
                let a = a as usize;
                zr[a] = dot(hr, &w[a * d_in..(a + 1) * d_in]) + bias[a];
            }
        }
    }

    /// The head's gradients from `dy` (`[m, d_out]`, read at the allowed
    /// entries only): `dW` and `db` written into `g` at the head's place
    /// (zero at actions no row allows), `dx = dy W` into `dx` (`[m, d_in]`).
    pub fn backward(
        &self,
        d: &Head,
        p: &[f32],
        g: &mut [f32],
        h: &[f32],
        dy: &[f32],
        dx: &mut [f32],
    ) {
        let (d_in, d_out) = (d.d_in, d.d_out);
        let w = &p[d.w..d.w + d_in * d_out];
        let (front, back) = g.split_at_mut(d.b);
        let (dw, db) = (&mut front[d.w..d.w + d_in * d_out], &mut back[..d_out]);
        dw.fill(0.0);
        db.fill(0.0);
        let rows = h.chunks_exact(d_in).zip(dy.chunks_exact(d_out));
        let rows = rows.zip(dx.chunks_exact_mut(d_in));
        for (r, ((hr, dyr), dxr)) in rows.take(self.allowed.rows()).enumerate() {
            dxr.fill(0.0);
            for &a in self.allowed.row(r) {
                let (a, s) = (a as usize, dyr[a as usize]);
                let span = a * d_in..(a + 1) * d_in;
                axpy(s, &w[span.clone()], dxr);
                axpy(s, hr, &mut dw[span]);
                db[a] += s;
            }
        }
    }
}

/// Policy-head outputs at each row's allowed actions only (`head.allowed`,
/// one row per row of `work.x`; the other entries of `work.head` keep stale
/// values) and values: a mostly masked head's cheaper [`net::forward`].
pub fn forward(layout: &Layout, p: &[f32], work: &mut Work, head: &SparseHead) {
    policy_forward(layout, p, work, head);
    net::value_from_torso(layout, p, work);
}

/// Policy-head outputs at each row's allowed actions only; no value head.
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

#[cfg(test)]
mod tests;
