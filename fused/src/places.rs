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

    /// A convolution's `[kh, kw, c_in, c_out]` weight and `[c_out]` bias.
    pub fn conv(&mut self, conv: Conv) -> ConvAt {
        let Dense { w, b, .. } = self.dense(conv.patch(), conv.c_out);
        ConvAt { conv, w, b }
    }
}
