//! Max-pooling on NHWC buffers (`[m, h, w, c]` row-major), the IMPALA
//! ResNet's downsampling. A window's padding never wins (PyTorch and burn
//! pad with -inf), and of equal values the first in the window's row-major
//! order does, as both scan: the gradient goes to that one input. The
//! backward pass finds it again from the input rather than keeping indices.

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

    /// Visits every output pixel with its window's input pixels in the
    /// window's row-major order: `f(sample, output pixel, input pixels)`.
    fn windows(&self, m: usize, mut f: impl FnMut(usize, usize, &mut dyn Iterator<Item = usize>)) {
        let (oh, ow) = (self.out_h(), self.out_w());
        for s in 0..m {
            for oy in 0..oh {
                let rows = self.span(oy, self.h);
                for ox in 0..ow {
                    let cols = self.span(ox, self.w);
                    let mut pixels = rows
                        .clone()
                        .flat_map(|iy| cols.clone().map(move |ix| iy * self.w + ix));
                    f(s, oy * ow + ox, &mut pixels);
                }
            }
        }
    }
}

/// `out` (`[m, out_h, out_w, c]`) = the max-pool of `x` (`[m, h, w, c]`).
pub fn forward(p: &Pool, x: &[f32], m: usize, out: &mut [f32]) {
    let c = p.c;
    p.windows(m, |s, o, pixels| {
        let dst = &mut out[(s * p.out_h() * p.out_w() + o) * c..][..c];
        dst.fill(f32::NEG_INFINITY);
        for i in pixels {
            let src = &x[(s * p.h * p.w + i) * c..][..c];
            dst.iter_mut()
                .zip(src)
                .for_each(|(d, &v)| *d = if v > *d { v } else { *d });
        }
    });
}

/// `dx` (`[m, h, w, c]`, overwritten) from `dy` (the output's gradient):
/// each output's gradient added to its window's winning input, found again
/// in `x`.
pub fn backward(p: &Pool, x: &[f32], dy: &[f32], m: usize, dx: &mut [f32], best: &mut Vec<f32>) {
    let c = p.c;
    dx[..m * p.in_len()].fill(0.0);
    let mut at = vec![usize::MAX; c];
    best.resize(c, 0.0);
    p.windows(m, |s, o, pixels| {
        best.fill(f32::NEG_INFINITY);
        at.fill(usize::MAX);
        for i in pixels {
            let src = &x[(s * p.h * p.w + i) * c..][..c];
            for ch in 0..c {
                if src[ch] > best[ch] {
                    best[ch] = src[ch];
                    at[ch] = i;
                }
            }
        }
        let g = &dy[(s * p.out_h() * p.out_w() + o) * c..][..c];
        // A window of NaNs alone has no winner (its loss is not finite).
        for ch in (0..c).filter(|&ch| at[ch] != usize::MAX) {
            dx[(s * p.h * p.w + at[ch]) * c + ch] += g[ch];
        }
    });
}

#[cfg(test)]
mod tests;
