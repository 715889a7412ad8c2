//! Max-pooling on NHWC buffers (`[m, h, w, c]` row-major), the IMPALA
//! ResNet's downsampling. A window's padding never wins (PyTorch and burn
//! pad with -inf), and of equal values the first in the window's row-major
//! order does, as both scan: the gradient goes to that one input (ties are
//! common: a conv's output over an Atari frame's flat background). The
//! backward pass finds it again from the input and the output rather than
//! keeping indices, all channels of a pixel at once.

use crate::kernels::wide;
use std::ops::Range;

/// A max-pool's shape: a `[h, w, c]` input per sample, `k x k` windows moved
/// `stride` at a time with `pad` on every side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool {
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub k: usize,
    pub stride: usize,
    pub pad: usize,
}

impl Pool {
    /// Refuses a shape with no output, or a window that could lie in the
    /// padding alone (PyTorch's rule: the padding at most half the window).
    pub fn check(&self) -> Result<(), String> {
        if [self.h, self.w, self.c, self.k, self.stride].contains(&0) {
            return Err(format!("{self:?}: a zero size or stride"));
        }
        if 2 * self.pad > self.k {
            return Err(format!(
                "padding {} is over half the {}x{} window",
                self.pad, self.k, self.k
            ));
        }
        if self.k > self.h + 2 * self.pad || self.k > self.w + 2 * self.pad {
            return Err(format!(
                "a {}x{} window does not fit a {}x{} input padded by {}",
                self.k, self.k, self.h, self.w, self.pad
            ));
        }
        Ok(())
    }

    pub fn out_h(&self) -> usize {
        (self.h + 2 * self.pad - self.k) / self.stride + 1
    }

    pub fn out_w(&self) -> usize {
        (self.w + 2 * self.pad - self.k) / self.stride + 1
    }

    /// Floats of one sample's input.
    pub fn in_len(&self) -> usize {
        self.h * self.w * self.c
    }

    /// Floats of one sample's output.
    pub fn out_len(&self) -> usize {
        self.out_h() * self.out_w() * self.c
    }

    /// The input rows (or columns) of output row `o`'s window: those inside
    /// the input.
    fn span(&self, o: usize, size: usize) -> std::ops::Range<usize> {
        let start = (o * self.stride).saturating_sub(self.pad);
        let end = (o * self.stride + self.k)
            .saturating_sub(self.pad)
            .min(size);
        start..end
    }

    /// Visits every output pixel: `f(its offset, its window's input rows,
    /// columns)`, the offsets in floats from sample `s`'s start.
    #[inline(always)]
    fn windows(&self, mut f: impl FnMut(usize, Range<usize>, Range<usize>)) {
        let (oh, ow) = (self.out_h(), self.out_w());
        for oy in 0..oh {
            let rows = self.span(oy, self.h);
            for ox in 0..ow {
                f((oy * ow + ox) * self.c, rows.clone(), self.span(ox, self.w));
            }
        }
    }
}

/// `out` (`[m, out_h, out_w, c]`) = the max-pool of `x` (`[m, h, w, c]`).
pub fn forward(p: &Pool, x: &[f32], m: usize, out: &mut [f32]) {
    let c = p.c;
    wide(
        #[inline(always)]
        || {
            for s in 0..m {
                let x = &x[s * p.in_len()..(s + 1) * p.in_len()];
                let out = &mut out[s * p.out_len()..(s + 1) * p.out_len()];
                p.windows(
                    #[inline(always)]
                    |o, rows, cols| {
                        let dst = &mut out[o..o + c];
                        dst.fill(f32::NEG_INFINITY);
                        for iy in rows {
                            for ix in cols.clone() {
                                let src = &x[(iy * p.w + ix) * c..][..c];
                                for (d, &v) in dst.iter_mut().zip(src) {
                                    *d = if v > *d { v } else { *d };
                                }
                            }
                        }
                    },
                );
            }
        },
    );
}

/// `dx` (`[m, h, w, c]`, overwritten) from `dy` (the output's gradient):
/// each output's gradient added to its window's winner, the first input in
/// the window's order equal to the output `y` (the forward pass keeps the
/// first of equal maxima, so that is the one).
pub fn backward(p: &Pool, x: &[f32], y: &[f32], dy: &[f32], m: usize, dx: &mut [f32]) {
    let c = p.c;
    dx[..m * p.in_len()].fill(0.0);
    // Per channel, 1 once the window's winner is found.
    let mut found = vec![0.0f32; c];
    wide(
        #[inline(always)]
        || {
            for s in 0..m {
                let (i, o) = (s * p.in_len(), s * p.out_len());
                let (x, dx) = (&x[i..i + p.in_len()], &mut dx[i..i + p.in_len()]);
                let (y, dy) = (&y[o..o + p.out_len()], &dy[o..o + p.out_len()]);
                p.windows(
                    #[inline(always)]
                    |o, rows, cols| {
                        let (yo, g) = (&y[o..o + c], &dy[o..o + c]);
                        found.fill(0.0);
                        for iy in rows {
                            for ix in cols.clone() {
                                let at = (iy * p.w + ix) * c;
                                let (xi, dxi) = (&x[at..at + c], &mut dx[at..at + c]);
                                for ch in 0..c {
                                    let same = f32::from(u8::from(xi[ch] == yo[ch]));
                                    let hit = same * (1.0 - found[ch]);
                                    dxi[ch] += hit * g[ch];
                                    found[ch] += hit;
                                }
                            }
                        }
                    },
                );
            }
        },
    );
}

#[cfg(test)]
mod tests;
