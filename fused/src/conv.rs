//! Convolution on flat buffers, for pixel observations. Activations are NHWC
//! (`[m, h, w, c]` row-major, the layout an env's `(H, W, C)` frame already
//! has) and weights `[kh, kw, c_in, c_out]`, so a layer is one matrix product
//! of the input's windows laid out as rows ([`im2col`]) with the weights, and
//! its output is NHWC again. The backward pass is two more products and the
//! windows' gradients added back where they came from ([`col2im`]). Windows
//! are laid out a few samples at a time ([`Conv::chunk_samples`]) and laid
//! out again on the way back rather than kept: the Nature CNN's first layer
//! has 400 windows of 256 floats per sample (105 MB for a minibatch of 256),
//! which would go to memory and back three times; a chunk stays in the
//! core's cache. On the AVX2 and AVX-512 paths a convolution moving one pixel at a
//! time skips the windows where the direct kernel takes its shape
//! ([`direct_conv`]: 16 to 256 input channels, at most 64 outputs, a
//! window under 512 floats, as the IMPALA ResNet's): forward, its sums
//! read the input where it lies (the same bits as through the windows),
//! and its input's gradient is the same kernel over the output's gradient
//! with the weights flipped (where that shape is taken too), in place of
//! the windows' gradients and `col2im`. The bias, and what the caller
//! applies next (an activation, a skip connection), go over each chunk
//! while it is in cache.
//! [`Conv::to_torch`] gives PyTorch's `[c_out, c_in, kh, kw]` order, the one
//! burn's `Conv2d` and the published file hold. A torso's stem
//! ([`crate::Arch::stem`]) is a list of these.

use crate::kernels::direct_conv::{self, Direct, Taps};
use crate::kernels::{View, add_bias_then, add_column_sums, gemm};

/// Window floats per chunk (1 MiB): about a core's second-level cache.
const CHUNK_FLOATS: usize = 256 * 1024;

/// One convolution layer's shape: a `[h, w, c_in]` input per sample, `c_out`
/// filters of `kh x kw`, moved `stride` at a time over the input with `pad`
/// zeros added on every side (0: PyTorch's and TensorFlow's VALID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv {
    pub h: usize,
    pub w: usize,
    pub c_in: usize,
    pub c_out: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: usize,
    pub pad: usize,
}

impl Conv {
    /// Refuses a shape with no output: a zero size or stride, or a kernel
    /// larger than the padded input.
    pub fn check(&self) -> Result<(), String> {
        let sizes = [self.h, self.w, self.c_in, self.c_out, self.kh, self.kw];
        if sizes.contains(&0) || self.stride == 0 {
            return Err(format!("{self:?}: a zero size or stride"));
        }
        if self.kh > self.h + 2 * self.pad || self.kw > self.w + 2 * self.pad {
            return Err(format!(
                "a {}x{} kernel does not fit a {}x{} input padded by {}",
                self.kh, self.kw, self.h, self.w, self.pad
            ));
        }
        Ok(())
    }

    pub fn out_h(&self) -> usize {
        (self.h + 2 * self.pad - self.kh) / self.stride + 1
    }

    pub fn out_w(&self) -> usize {
        (self.w + 2 * self.pad - self.kw) / self.stride + 1
    }

    /// Floats in one window (a row of [`im2col`]'s matrix).
    pub fn patch(&self) -> usize {
        self.kh * self.kw * self.c_in
    }

    /// Floats of one sample's input.
    pub fn in_len(&self) -> usize {
        self.h * self.w * self.c_in
    }

    /// Floats of one sample's output.
    pub fn out_len(&self) -> usize {
        self.out_h() * self.out_w() * self.c_out
    }

    /// Multiply-adds of one sample's forward pass (each window against
    /// every output channel).
    pub fn macs(&self) -> usize {
        self.windows_per_sample() * self.patch() * self.c_out
    }

    /// Windows per sample (rows of [`im2col`]'s matrix).
    pub fn windows_per_sample(&self) -> usize {
        self.out_h() * self.out_w()
    }

    /// Samples whose windows make one chunk (at least one).
    pub fn chunk_samples(&self) -> usize {
        (CHUNK_FLOATS / (self.windows_per_sample() * self.patch())).max(1)
    }

    /// Weight floats (the bias has `c_out`).
    pub fn weights(&self) -> usize {
        self.patch() * self.c_out
    }

    /// Weights `[kh, kw, c_in, c_out]` in PyTorch's order `[c_out, c_in, kh, kw]`.
    pub fn to_torch(&self, w: &[f32]) -> Vec<f32> {
        let mut t = vec![0.0; self.weights()];
        for (i, &v) in w[..self.weights()].iter().enumerate() {
            t[self.torch_index(i)] = v;
        }
        t
    }

    /// Weights in PyTorch's order `[c_out, c_in, kh, kw]` in ours.
    pub fn from_torch(&self, t: &[f32]) -> Vec<f32> {
        (0..self.weights())
            .map(|i| t[self.torch_index(i)])
            .collect()
    }

    /// Where our weight `i` (`[ky, kx, ci, co]`) sits in PyTorch's order.
    fn torch_index(&self, i: usize) -> usize {
        let co = i % self.c_out;
        let ci = i / self.c_out % self.c_in;
        let kx = i / (self.c_out * self.c_in) % self.kw;
        let ky = i / (self.c_out * self.c_in * self.kw);
        ((co * self.c_in + ci) * self.kh + ky) * self.kw + kx
    }

    /// Its shape for the direct kernel ([`direct_conv`]), which takes only
    /// a convolution moving one pixel at a time.
    fn taps(&self) -> Option<Taps> {
        (self.stride == 1).then_some(Taps {
            h: self.h,
            w: self.w,
            c_in: self.c_in,
            kh: self.kh,
            kw: self.kw,
            pad: self.pad,
            c_out: self.c_out,
        })
    }

    /// The input column of window column `ox`'s first tap (negative in the padding).
    fn left(&self, ox: usize) -> isize {
        (ox * self.stride) as isize - self.pad as isize
    }

    /// The input row of tap row `ky` of window row `oy`, when inside the input.
    fn row(&self, oy: usize, ky: usize) -> Option<usize> {
        let iy = (oy * self.stride + ky).checked_sub(self.pad)?;
        (iy < self.h).then_some(iy)
    }
}

/// One convolution's place in the parameter vector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConvAt {
    pub conv: Conv,
    /// Offset of the `[kh, kw, c_in, c_out]` weight.
    pub w: usize,
    /// Offset of the `[c_out]` bias.
    pub b: usize,
}

impl ConvAt {
    /// Its weight and bias in `p`.
    pub fn params<'a>(&self, p: &'a [f32]) -> (&'a [f32], &'a [f32]) {
        (&p[self.w..self.b], &p[self.b..self.b + self.conv.c_out])
    }
}

/// Visits every window tap row: `(sample, window index, tap row ky, input
/// row iy or None in the padding, first input column)`.
fn windows(c: &Conv, m: usize, mut f: impl FnMut(usize, usize, usize, Option<usize>, isize)) {
    let (oh, ow) = (c.out_h(), c.out_w());
    for s in 0..m {
        for oy in 0..oh {
            for ox in 0..ow {
                let at = (s * oh + oy) * ow + ox;
                for ky in 0..c.kh {
                    f(s, at, ky, c.row(oy, ky), c.left(ox));
                }
            }
        }
    }
}

/// Each of the `m` samples' windows of `x` (`[m, h, w, c_in]`) as one row
/// `[kh, kw, c_in]` of `cols` (`[m * out_h * out_w, patch]`, overwritten),
/// zeros where a window overhangs the input.
pub fn im2col(c: &Conv, x: &[f32], m: usize, cols: &mut [f32]) {
    let (p, run) = (c.patch(), c.kw * c.c_in);
    windows(c, m, |s, at, ky, iy, left| {
        let dst = &mut cols[at * p + ky * run..at * p + (ky + 1) * run];
        let Some(iy) = iy else {
            dst.fill(0.0);
            return;
        };
        let row = &x[(s * c.h + iy) * c.w * c.c_in..][..c.w * c.c_in];
        if left >= 0 && left as usize + c.kw <= c.w {
            // The whole tap row inside the input: one contiguous copy.
            dst.copy_from_slice(&row[left as usize * c.c_in..][..run]);
            return;
        }
        for (kx, d) in dst.chunks_exact_mut(c.c_in).enumerate() {
            match usize::try_from(left + kx as isize) {
                Ok(ix) if ix < c.w => d.copy_from_slice(&row[ix * c.c_in..][..c.c_in]),
                _ => d.fill(0.0),
            }
        }
    });
}

/// The transpose of [`im2col`]: every row of `cols` added back into `dx`
/// (`[m, h, w, c_in]`, overwritten) at its window; the padding's share is
/// dropped.
pub fn col2im(c: &Conv, cols: &[f32], m: usize, dx: &mut [f32]) {
    let (p, run) = (c.patch(), c.kw * c.c_in);
    dx[..m * c.in_len()].fill(0.0);
    windows(c, m, |s, at, ky, iy, left| {
        let Some(iy) = iy else { return };
        let src = &cols[at * p + ky * run..at * p + (ky + 1) * run];
        let row = &mut dx[(s * c.h + iy) * c.w * c.c_in..][..c.w * c.c_in];
        for (kx, g) in src.chunks_exact(c.c_in).enumerate() {
            if let Ok(ix) = usize::try_from(left + kx as isize)
                && ix < c.w
            {
                let d = &mut row[ix * c.c_in..][..c.c_in];
                d.iter_mut().zip(g).for_each(|(d, &g)| *d += g);
            }
        }
    });
}

/// One chunk's windows and their gradients, reused from call to call.
#[derive(Default)]
pub struct Scratch {
    cols: Vec<f32>,
    dcols: Vec<f32>,
    /// The weights of the way back through the direct kernel.
    flipped: Vec<f32>,
}

impl Scratch {
    /// Bytes its buffers hold.
    pub fn bytes(&self) -> usize {
        f32_bytes(&self.cols) + f32_bytes(&self.dcols) + f32_bytes(&self.flipped)
    }
}

/// Bytes a buffer of floats holds (its capacity, not its length).
pub fn f32_bytes(v: &Vec<f32>) -> usize {
    v.capacity() * std::mem::size_of::<f32>()
}

/// `out` (`[m, out_h, out_w, c_out]`) = the convolution of `x` with weights
/// `w` plus bias `b`.
pub fn forward(
    c: &Conv,
    wb: (&[f32], &[f32]),
    x: &[f32],
    m: usize,
    scratch: &mut Scratch,
    out: &mut [f32],
) {
    forward_then(c, wb, (x, m), scratch, out, |_, _| {});
}

/// [`forward`], then `then(first sample, its chunk of out)` on each chunk
/// of the output while it is still in cache (the caller's activation or
/// skip connection), rather than in a pass of its own over all of `out`.
pub fn forward_then(
    c: &Conv,
    wb: (&[f32], &[f32]),
    (x, m): (&[f32], usize),
    scratch: &mut Scratch,
    out: &mut [f32],
    then: impl FnMut(usize, &mut [f32]),
) {
    forward_in_chunks(c, wb, (x, m), c.chunk_samples(), scratch, out, then);
}

/// [`forward_then`], `per` samples at a time.
fn forward_in_chunks(
    c: &Conv,
    (w, b): (&[f32], &[f32]),
    (x, m): (&[f32], usize),
    per: usize,
    scratch: &mut Scratch,
    out: &mut [f32],
    mut then: impl FnMut(usize, &mut [f32]),
) {
    let (p, cols) = (c.patch(), &mut scratch.cols);
    let w = &w[..p * c.c_out];
    let direct = c.taps().and_then(Direct::new);
    for s0 in (0..m).step_by(per) {
        let n = per.min(m - s0);
        let (x, out) = (
            &x[s0 * c.in_len()..],
            &mut out[s0 * c.out_len()..(s0 + n) * c.out_len()],
        );
        if let Some(d) = &direct {
            d.conv(x, n, w, out);
        } else {
            let rows = n * c.windows_per_sample();
            cols.resize(rows * p, 0.0);
            im2col(c, x, n, cols);
            gemm(
                rows,
                p,
                c.c_out,
                View::rows(cols, p),
                View::rows(w, c.c_out),
                0.0,
                out,
            );
        }
        add_bias_then(out, &b[..c.c_out], |v| v);
        then(s0, out);
    }
}

/// The gradients of a layer from its input `x` and `dy` (its output's,
/// `[m, out_h, out_w, c_out]`): `dw` and `db` (written, not added) and, when
/// asked, `dx` (overwritten).
#[allow(clippy::too_many_arguments)]
pub fn backward(
    c: &Conv,
    w: &[f32],
    x: &[f32],
    dy: &[f32],
    m: usize,
    dwb: (&mut [f32], &mut [f32]),
    dx: Option<&mut [f32]>,
    scratch: &mut Scratch,
) {
    backward_then(c, (w, x, dy), m, dwb, dx, scratch, |_, _| {});
}

/// [`backward`], then `then(first sample, its chunk of dx)` on each chunk
/// of `dx` once it is complete and still in cache.
pub fn backward_then(
    c: &Conv,
    wxy: (&[f32], &[f32], &[f32]),
    m: usize,
    dwb: (&mut [f32], &mut [f32]),
    dx: Option<&mut [f32]>,
    scratch: &mut Scratch,
    then: impl FnMut(usize, &mut [f32]),
) {
    let per = c.chunk_samples();
    backward_in_chunks(c, wxy, (m, per), dwb, dx, scratch, then);
}

/// [`backward_then`], `per` samples at a time: each chunk's windows laid
/// out again, its share of `dw` and `db` added, and its part of `dx`
/// written, through the direct kernel or by its windows' gradients added
/// back.
fn backward_in_chunks(
    c: &Conv,
    (w, x, dy): (&[f32], &[f32], &[f32]),
    (m, per): (usize, usize),
    (dw, db): (&mut [f32], &mut [f32]),
    mut dx: Option<&mut [f32]>,
    scratch: &mut Scratch,
    mut then: impl FnMut(usize, &mut [f32]),
) {
    let (p, n) = (c.patch(), c.c_out);
    let dw = &mut dw[..p * n];
    dw.fill(0.0);
    db[..n].fill(0.0);
    let wt = View::transposed(&w[..p * n], n);
    let forward = c.taps().filter(|_| dx.is_some());
    let back = forward.and_then(|t| t.backward()).and_then(Direct::new);
    if let (Some(t), Some(_)) = (forward, &back) {
        direct_conv::flip(&t, &w[..p * n], &mut scratch.flipped);
    }
    for s0 in (0..m).step_by(per) {
        let k = per.min(m - s0);
        let rows = k * c.windows_per_sample();
        let dy_rows = &dy[s0 * c.out_len()..(s0 + k) * c.out_len()];
        // Row after row, as over all of dy at once: the same sums.
        add_column_sums(dy_rows, n, &mut db[..n]);
        let dy = View::rows(dy_rows, n);
        let cols = &mut scratch.cols;
        cols.resize(rows * p, 0.0);
        im2col(c, &x[s0 * c.in_len()..], k, cols);
        // dW [p, c_out] += colsᵀ [p, rows] · dy [rows, c_out]
        gemm(p, rows, n, View::transposed(cols, p), dy, 1.0, dw);
        if let Some(dx) = dx.as_deref_mut() {
            let dx = &mut dx[s0 * c.in_len()..(s0 + k) * c.in_len()];
            let flipped = &scratch.flipped;
            if let Some(d) = &back {
                d.conv(dy_rows, k, flipped, dx);
            } else {
                // dcols [rows, p] = dy [rows, c_out] · Wᵀ [c_out, p]
                let dcols = &mut scratch.dcols;
                dcols.resize(rows * p, 0.0);
                gemm(rows, n, p, dy, wt, 0.0, dcols);
                col2im(c, dcols, k, dx);
            }
            then(s0, dx);
        }
    }
}

#[cfg(test)]
mod tests;
