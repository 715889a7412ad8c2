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
    /// `act(x)` then `act(conv0(act(x)))`.
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
        let n = m * self.len();
        let (a, b) = inner[..2 * n].split_at_mut(n);
        activation::apply_into(&x[..n], act, a);
        conv::forward(&self.conv0.conv, self.conv0.params(p), a, m, scratch, b);
        activation::apply(b, act);
        conv::forward(&self.conv1.conv, self.conv1.params(p), b, m, scratch, out);
        out[..n].iter_mut().zip(&x[..n]).for_each(|(o, &x)| *o += x);
    }

    /// Both convolutions' gradients into `g` (written) from `dy` (the
    /// output's gradient, `[m, len]`), using the block's `inner` activations;
    /// when `want_dx`, `dy` becomes the input's gradient. `t1` and `t2` are
    /// scratch of `[m, len]` each.
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
        let n = m * self.len();
        let (a, b) = inner[..2 * n].split_at(n);
        let (c0, c1) = (&self.conv0, &self.conv1);
        let (t1, t2) = (&mut t1[..n], &mut t2[..n]);
        // Through conv1 to its input act(h), then through the activation.
        let w1 = c1.params(p).0;
        conv::backward(&c1.conv, w1, b, dy, m, grads_of(c1, g), Some(t1), scratch);
        activation::backward(act, b, t1);
        // Through conv0 to its input act(x).
        let w0 = c0.params(p).0;
        let dx = want_dx.then_some(&mut *t2);
        conv::backward(&c0.conv, w0, a, t1, m, grads_of(c0, g), dx, scratch);
        if want_dx {
            activation::backward(act, a, t2);
            dy[..n].iter_mut().zip(&*t2).for_each(|(d, &t)| *d += t);
        }
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

    fn inner_len(&self) -> usize {
        2 * self.len()
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
