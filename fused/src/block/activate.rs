//! The activation as a block of its own (the IMPALA ResNet's ReLU after its
//! stacks); no parameters.

use super::{Backward, Bufs, Forward, Input, Pass};
use crate::activation;
use crate::arch::Shape;

/// The network's activation over what it reads, of any shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Activate(pub Shape);

impl Pass for Activate {
    fn input(&self) -> Shape {
        self.0
    }

    fn output(&self) -> Shape {
        self.0
    }

    fn forward(&self, _p: &[f32], x: Input<'_>, f: Forward<'_>) {
        let n = f.m * self.0.len();
        activation::apply_into(&x.rows()[..n], f.act, &mut f.out[..n]);
    }

    fn backward(&self, _p: &[f32], _g: &mut [f32], b: Backward<'_>, bufs: &mut Bufs<'_>) {
        let n = b.m * self.0.len();
        activation::backward(b.act, &b.y[..n], &mut bufs.dh[..n]);
    }
}
