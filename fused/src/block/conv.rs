//! A convolution block: [`crate::conv`]'s passes, then the network's
//! activation when it activates.

use super::{Backward, Bufs, Forward, Input, Pass, image};
use crate::activation;
use crate::arch::{ConvLayer, Shape};
use crate::conv::{self, Conv, ConvAt};
use crate::param_tensor::{self, ParamTensor};
use crate::places::Places;

/// A convolution, then the network's activation when `activate`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConvBlock {
    pub at: ConvAt,
    pub activate: bool,
}

impl ConvBlock {
    /// `layer` reading `input`, placed next.
    pub(super) fn place(
        layer: ConvLayer,
        activate: bool,
        input: Shape,
        places: &mut Places,
    ) -> Result<Self, String> {
        let [h, w, c_in] = image(input)?;
        let conv = Conv {
            h,
            w,
            c_in,
            c_out: layer.channels,
            kh: layer.kernel,
            kw: layer.kernel,
            stride: layer.stride,
            pad: layer.padding,
        };
        conv.check()?;
        Ok(Self {
            at: places.conv(conv),
            activate,
        })
    }
}

impl Pass for ConvBlock {
    fn input(&self) -> Shape {
        let c = &self.at.conv;
        Shape::Image([c.h, c.w, c.c_in])
    }

    fn output(&self) -> Shape {
        let c = &self.at.conv;
        Shape::Image([c.out_h(), c.out_w(), c.c_out])
    }

    fn macs(&self) -> usize {
        self.at.conv.macs()
    }

    fn group(&self) -> Option<&'static str> {
        Some("conv")
    }

    fn tensors(&self, name: &str, out: &mut Vec<ParamTensor>) {
        param_tensor::conv(out, name, &self.at);
    }

    fn forward(&self, p: &[f32], x: Input<'_>, f: Forward<'_>) {
        let c = &self.at.conv;
        let (activate, act) = (self.activate, f.act);
        let then = |_, o: &mut [f32]| {
            if activate {
                activation::apply(o, act);
            }
        };
        conv::forward_then(
            c,
            self.at.params(p),
            (x.rows(), f.m),
            f.scratch,
            f.out,
            then,
        );
    }

    fn backward(&self, p: &[f32], g: &mut [f32], b: Backward<'_>, bufs: &mut Bufs<'_>) {
        let (at, k, m) = (&self.at, &self.at.conv, b.m);
        if self.activate {
            let n = m * k.out_len();
            activation::backward(b.act, &b.y[..n], &mut bufs.dh[..n]);
        }
        let (w, rest) = g.split_at_mut(at.b);
        let (dw, db) = (&mut w[at.w..], &mut rest[..k.c_out]);
        let dx = b.wanted.then(|| &mut bufs.spare[..m * k.in_len()]);
        let (weight, x) = (&p[at.w..at.b], b.input.rows());
        conv::backward(k, weight, x, bufs.dh, m, (dw, db), dx, bufs.conv);
        if b.wanted {
            std::mem::swap(bufs.dh, bufs.spare);
        }
    }
}
