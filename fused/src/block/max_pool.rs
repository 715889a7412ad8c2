//! The max-pool block: [`crate::pool`]'s passes; no parameters.

use super::{Backward, Bufs, Forward, Input, Pass, image};
use crate::arch::Shape;
use crate::pool::{self, Pool};

/// A `kernel x kernel` max-pool moved `stride` at a time reading `input`.
pub(super) fn place(
    kernel: usize,
    stride: usize,
    padding: usize,
    input: Shape,
) -> Result<Pool, String> {
    let [h, w, c] = image(input)?;
    let pool = Pool {
        h,
        w,
        c,
        k: kernel,
        stride,
        pad: padding,
    };
    pool.check()?;
    Ok(pool)
}

impl Pass for Pool {
    fn input(&self) -> Shape {
        Shape::Image([self.h, self.w, self.c])
    }

    fn output(&self) -> Shape {
        Shape::Image([self.out_h(), self.out_w(), self.c])
    }

    fn forward(&self, _p: &[f32], x: Input<'_>, f: Forward<'_>) {
        pool::forward(self, x.rows(), f.m, f.out);
    }

    fn backward(&self, _p: &[f32], _g: &mut [f32], b: Backward<'_>, bufs: &mut Bufs<'_>) {
        if b.wanted {
            pool::backward(self, b.input.rows(), b.y, bufs.dh, b.m, bufs.spare);
            std::mem::swap(bufs.dh, bufs.spare);
        }
    }
}
