//! The activation's passes over whole buffers, compiled wide: what every
//! block that activates (dense layers, convolutions, residual blocks, the
//! activation block) runs forward and back.

use crate::Activation;
use crate::kernels::{tanh, wide};

/// The activation applied in place.
pub(crate) fn apply(out: &mut [f32], act: Activation) {
    wide(
        #[inline(always)]
        || match act {
            Activation::Tanh => out.iter_mut().for_each(|v| *v = tanh(*v)),
            Activation::Relu => out.iter_mut().for_each(|v| *v = v.max(0.0)),
        },
    );
}

/// `out = act(x)` in one pass.
pub(crate) fn apply_into(x: &[f32], act: Activation, out: &mut [f32]) {
    wide(
        #[inline(always)]
        || match act {
            Activation::Tanh => out.iter_mut().zip(x).for_each(|(o, &v)| *o = tanh(v)),
            Activation::Relu => out.iter_mut().zip(x).for_each(|(o, &v)| *o = v.max(0.0)),
        },
    );
}

/// `dy` times the activation's derivative, from its output `y`: tanh' = 1 -
/// y^2 and relu' = [y > 0].
pub(crate) fn backward(act: Activation, y: &[f32], dy: &mut [f32]) {
    wide(
        #[inline(always)]
        || match act {
            Activation::Tanh => dy.iter_mut().zip(y).for_each(|(g, &y)| *g *= 1.0 - y * y),
            Activation::Relu => dy
                .iter_mut()
                .zip(y)
                .for_each(|(g, &y)| *g = if y > 0.0 { *g } else { 0.0 }),
        },
    );
}
