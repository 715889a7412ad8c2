//! Where a block's parameters go: consecutive places in the flat vector,
//! each layer's weight then its bias, handed out in layout order.

use crate::conv::{Conv, ConvAt};

/// One linear layer's place in the parameter vector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dense {
    /// Offset of the `[d_in, d_out]` weight.
    pub w: usize,
    /// Offset of the `[d_out]` bias.
    pub b: usize,
    pub d_in: usize,
    pub d_out: usize,
}

/// A recurrent core's place in the parameter vector, in PyTorch's
/// `state_dict` order: `weight_ih` `[d_in, gates * size]`, `weight_hh`
/// `[size, gates * size]` (each the transpose of PyTorch's, so a step is a
/// product of row-major operands), then `bias_ih` and `bias_hh`
/// `[gates * size]`; the gates' columns in PyTorch's order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecurrentAt {
    pub w_ih: usize,
    pub w_hh: usize,
    pub b_ih: usize,
    pub b_hh: usize,
    pub d_in: usize,
    pub size: usize,
    pub gates: usize,
}

impl RecurrentAt {
    /// Columns of the gate products: `gates * size`.
    pub fn width(&self) -> usize {
        self.gates * self.size
    }

    /// `(weight_ih, weight_hh, bias_ih, bias_hh)` in `p`.
    pub fn params<'p>(&self, p: &'p [f32]) -> (&'p [f32], &'p [f32], &'p [f32], &'p [f32]) {
        let gw = self.width();
        (
            &p[self.w_ih..self.w_ih + self.d_in * gw],
            &p[self.w_hh..self.w_hh + self.size * gw],
            &p[self.b_ih..self.b_ih + gw],
            &p[self.b_hh..self.b_hh + gw],
        )
    }
}

/// Hands out consecutive places in the flat vector; what it holds is the
/// count handed out so far.
#[derive(Debug, Default)]
pub struct Places(pub usize);

impl Places {
    /// A `[d_in, d_out]` weight and a `[d_out]` bias.
    pub fn dense(&mut self, d_in: usize, d_out: usize) -> Dense {
        let d = Dense {
            w: self.0,
            b: self.0 + d_in * d_out,
            d_in,
            d_out,
        };
        self.0 += d_in * d_out + d_out;
        d
    }

    /// A recurrent core of `size` units with `gates` gates reading `d_in` floats.
    pub fn recurrent(&mut self, d_in: usize, size: usize, gates: usize) -> RecurrentAt {
        let gw = gates * size;
        let w_ih = self.0;
        let w_hh = w_ih + d_in * gw;
        let b_ih = w_hh + size * gw;
        let b_hh = b_ih + gw;
        self.0 = b_hh + gw;
        RecurrentAt {
            w_ih,
            w_hh,
            b_ih,
            b_hh,
            d_in,
            size,
            gates,
        }
    }

    /// A convolution's `[kh, kw, c_in, c_out]` weight and `[c_out]` bias.
    pub fn conv(&mut self, conv: Conv) -> ConvAt {
        let Dense { w, b, .. } = self.dense(conv.patch(), conv.c_out);
        ConvAt { conv, w, b }
    }
}
