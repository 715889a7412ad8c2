//! The IMPALA ResNet's residual block on NHWC buffers: `y = x +
//! conv1(act(conv0(act(x))))`, both convolutions 3x3 with padding 1 keeping
//! the channels. The forward pass keeps `act(x)` and `act(conv0(..))` (the
//! block's inner activations) for the way back, which runs through `conv1`,
//! `conv0` and the skip.

use super::{Backward, Bufs, Forward, Input, Pass, image};
use crate::activation;
use crate::arch::{Activation, Shape};
use crate::conv::{self, Conv, ConvAt, Scratch};
use crate::param_tensor::{self, ParamTensor};
use crate::places::Places;

/// One residual block's convolutions: `x + conv1(act(conv0(act(x))))`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Residual {
    pub conv0: ConvAt,
    pub conv1: ConvAt,
}

/// A convolution's weight and bias gradients inside `g` (the bias follows
/// the weight).
fn grads_of<'g>(c: &ConvAt, g: &'g mut [f32]) -> (&'g mut [f32], &'g mut [f32]) {
    let (w, rest) = g.split_at_mut(c.b);
    (&mut w[c.w..], &mut rest[..c.conv.c_out])
}

impl Residual {
    /// The block reading `input`, its two convolutions placed next.
    pub(super) fn place(input: Shape, places: &mut Places) -> Result<Self, String> {
        let [h, w, c] = image(input)?;
        let conv = Conv {
            h,
            w,
            c_in: c,
            c_out: c,
            kh: 3,
            kw: 3,
            stride: 1,
            pad: 1,
        };
        conv.check()?;
        Ok(Self {
            conv0: places.conv(conv),
            conv1: places.conv(conv),
        })
    }

    /// Floats per sample of its input (and output, and each activation).
    fn len(&self) -> usize {
        self.conv0.conv.in_len()
    }

    /// `out` for the `m` rows of `x`; `inner` (`[m, 2 * len]`) gets
    /// `act(x)` then `act(conv0(act(x)))`. The second activation and the
    /// skip are applied a chunk at a time, while the convolution's output is
    /// in cache.
    #[allow(clippy::too_many_arguments)]
    fn forward_rows(
        &self,
        p: &[f32],
        x: &[f32],
        m: usize,
        act: Activation,
        inner: &mut [f32],
        scratch: &mut Scratch,
        out: &mut [f32],
    ) {
        let (len, n) = (self.len(), m * self.len());
        let (a, b) = inner[..2 * n].split_at_mut(n);
        activation::apply_into(&x[..n], act, a);
        let activate = |_, h: &mut [f32]| activation::apply(h, act);
        conv::forward_then(
            &self.conv0.conv,
            self.conv0.params(p),
            (a, m),
            scratch,
            b,
            activate,
        );
        let skip = |s0: usize, o: &mut [f32]| {
            let x = &x[s0 * len..][..o.len()];
            o.iter_mut().zip(x).for_each(|(o, &x)| *o += x);
        };
        conv::forward_then(
            &self.conv1.conv,
            self.conv1.params(p),
            (b, m),
            scratch,
            out,
            skip,
        );
    }

    /// Both convolutions' gradients into `g` (written) from `dy` (the
    /// output's gradient, `[m, len]`), using the block's `inner` activations;
    /// when `want_dx`, `dy` becomes the input's gradient. `t1` and `t2` are
    /// scratch of `[m, len]` each. The activations' derivatives and the skip
    /// are applied to each chunk of a convolution's input gradient as it is
    /// completed.
    #[allow(clippy::too_many_arguments)]
    fn backward_rows(
        &self,
        p: &[f32],
        g: &mut [f32],
        inner: &[f32],
        (m, act): (usize, Activation),
        dy: &mut [f32],
        (t1, t2): (&mut [f32], &mut [f32]),
        want_dx: bool,
        scratch: &mut Scratch,
    ) {
        let (len, n) = (self.len(), m * self.len());
        let (a, b) = inner[..2 * n].split_at(n);
        let (c0, c1) = (&self.conv0, &self.conv1);
        let (t1, t2) = (&mut t1[..n], &mut t2[..n]);
        // Through conv1 to its input act(h), then through the activation.
        let wxy = (c1.params(p).0, b, &dy[..n]);
        let through =
            |s0: usize, d: &mut [f32]| activation::backward(act, &b[s0 * len..][..d.len()], d);
        conv::backward_then(
            &c1.conv,
            wxy,
            m,
            grads_of(c1, g),
            Some(t1),
            scratch,
            through,
        );
        // Through conv0 to its input act(x), through the activation, plus the skip.
        let wxy = (c0.params(p).0, a, &t1[..]);
        let dx = want_dx.then_some(&mut *t2);
        let skip = |s0: usize, d: &mut [f32]| {
            activation::backward(act, &a[s0 * len..][..d.len()], d);
            let dy = &mut dy[s0 * len..][..d.len()];
            dy.iter_mut().zip(&*d).for_each(|(y, &t)| *y += t);
        };
        conv::backward_then(&c0.conv, wxy, m, grads_of(c0, g), dx, scratch, skip);
    }
}

impl Pass for Residual {
    fn input(&self) -> Shape {
        let c = &self.conv0.conv;
        Shape::Image([c.h, c.w, c.c_in])
    }

    fn output(&self) -> Shape {
        self.input()
    }

    fn macs(&self) -> usize {
        self.conv0.conv.macs() + self.conv1.conv.macs()
    }

    fn inner_len(&self) -> usize {
        2 * self.len()
    }

    fn scratch_len(&self) -> usize {
        self.len()
    }

    fn group(&self) -> Option<&'static str> {
        Some("res")
    }

    fn tensors(&self, name: &str, out: &mut Vec<ParamTensor>) {
        param_tensor::conv(out, &format!("{name}.conv0"), &self.conv0);
        param_tensor::conv(out, &format!("{name}.conv1"), &self.conv1);
    }

    fn forward(&self, p: &[f32], x: Input<'_>, f: Forward<'_>) {
        self.forward_rows(p, x.rows(), f.m, f.act, f.inner, f.scratch, f.out);
    }

    fn backward(&self, p: &[f32], g: &mut [f32], b: Backward<'_>, bufs: &mut Bufs<'_>) {
        let scratch = (&mut bufs.spare[..], &mut bufs.extra[..]);
        let at = (b.m, b.act);
        self.backward_rows(p, g, b.inner, at, bufs.dh, scratch, b.wanted, bufs.conv);
    }
}
