//! One parameter tensor as burn's model holds it (PyTorch's order for
//! convolutions and for a dense layer reading an image): its name, its shape
//! and how its values map to the flat vector; and the two kinds of layer
//! every block's tensors are made of. [`crate::tensors`] lists a network's.

use crate::conv::{Conv, ConvAt};
use crate::places::{Dense, RecurrentAt};

/// How a tensor's values are ordered against the flat vector's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Order {
    /// The same order.
    Plain,
    /// A convolution's weight: `[c_out, c_in, kh, kw]` from our `[kh, kw,
    /// c_in, c_out]`.
    Conv(Conv),
    /// A dense weight reading an image: its rows follow the image
    /// flattened channels first (`[c, h, w]`, as burn's and PyTorch's NCHW
    /// tensors flatten) where ours follow `[h, w, c]`; and ours is an
    /// output per row when it is the policy head's (`transposed`).
    Flattened {
        h: usize,
        w: usize,
        c: usize,
        d_out: usize,
        transposed: bool,
    },
    /// A tensor `[d_in, d_out]` whose transpose we hold: the policy head's
    /// weight (burn's `[d_in, d_out]`, ours an action per row, see
    /// [`crate::net::Head`]) and a recurrent core's (PyTorch's `[gates *
    /// size, d_in]`, ours `[d_in, gates * size]`).
    Transposed { d_in: usize, d_out: usize },
}

/// One parameter tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamTensor {
    /// burn's record name (`actor.conv.0.weight`, `policy_head.bias`, ...).
    pub name: String,
    /// Offset of its values in the flat vector.
    pub at: usize,
    pub shape: Vec<usize>,
    pub order: Order,
}

impl ParamTensor {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Our index of the tensor's value `i`.
    fn ours(&self, i: usize) -> usize {
        match self.order {
            Order::Plain | Order::Conv(_) => i,
            Order::Flattened {
                h,
                w,
                c,
                d_out,
                transposed,
            } => {
                let (row, j) = (i / d_out, i % d_out);
                let (ch, pixel) = (row / (h * w), row % (h * w));
                let ours = pixel * c + ch;
                match transposed {
                    true => j * (h * w * c) + ours,
                    false => ours * d_out + j,
                }
            }
            Order::Transposed { d_in, d_out } => (i % d_out) * d_in + i / d_out,
        }
    }

    /// The tensor's values, in its own order, from the flat vector.
    pub fn gather(&self, flat: &[f32]) -> Vec<f32> {
        let ours = &flat[self.at..self.at + self.len()];
        match self.order {
            Order::Plain => ours.to_vec(),
            Order::Conv(c) => c.to_torch(ours),
            Order::Flattened { .. } | Order::Transposed { .. } => {
                (0..self.len()).map(|i| ours[self.ours(i)]).collect()
            }
        }
    }

    /// Writes the tensor's `values` (in its own order) into the flat vector.
    pub fn scatter(&self, values: &[f32], flat: &mut [f32]) {
        let ours = &mut flat[self.at..self.at + self.len()];
        match self.order {
            Order::Plain => ours.copy_from_slice(&values[..ours.len()]),
            Order::Conv(c) => ours.copy_from_slice(&c.from_torch(values)),
            Order::Flattened { .. } | Order::Transposed { .. } => {
                for (i, &v) in values[..self.len()].iter().enumerate() {
                    ours[self.ours(i)] = v;
                }
            }
        }
    }
}

/// A dense layer's weight and bias, its rows reordered when it reads an
/// image (`image`, flattened channels first on burn's side) and its values
/// an output per row when it is the policy head (`transposed`).
pub(crate) fn dense(
    out: &mut Vec<ParamTensor>,
    name: &str,
    d: &Dense,
    image: Option<[usize; 3]>,
    transposed: bool,
) {
    let (d_in, d_out) = (d.d_in, d.d_out);
    let order = match image {
        Some([h, w, c]) => Order::Flattened {
            h,
            w,
            c,
            d_out,
            transposed,
        },
        None if transposed => Order::Transposed { d_in, d_out },
        None => Order::Plain,
    };
    out.push(ParamTensor {
        name: format!("{name}.weight"),
        at: d.w,
        shape: vec![d_in, d_out],
        order,
    });
    out.push(ParamTensor {
        name: format!("{name}.bias"),
        at: d.b,
        shape: vec![d_out],
        order: Order::Plain,
    });
}

/// A convolution's weight (PyTorch's order) and bias.
pub(crate) fn conv(out: &mut Vec<ParamTensor>, name: &str, c: &ConvAt) {
    let k = &c.conv;
    out.push(ParamTensor {
        name: format!("{name}.weight"),
        at: c.w,
        shape: vec![k.c_out, k.c_in, k.kh, k.kw],
        order: Order::Conv(*k),
    });
    out.push(ParamTensor {
        name: format!("{name}.bias"),
        at: c.b,
        shape: vec![k.c_out],
        order: Order::Plain,
    });
}

/// A recurrent core's tensors under PyTorch's `nn.LSTM`/`nn.GRU` names and
/// shapes (`weight_ih_l0` `[gates * size, d_in]`, ...), so that
/// `load_state_dict` takes them; ours are the weights' transposes.
pub(crate) fn recurrent(out: &mut Vec<ParamTensor>, name: &str, r: &RecurrentAt) {
    let gw = r.width();
    for (tensor, at, d_out) in [
        ("weight_ih_l0", r.w_ih, r.d_in),
        ("weight_hh_l0", r.w_hh, r.size),
    ] {
        out.push(ParamTensor {
            name: format!("{name}.{tensor}"),
            at,
            shape: vec![gw, d_out],
            order: Order::Transposed { d_in: gw, d_out },
        });
    }
    for (tensor, at) in [("bias_ih_l0", r.b_ih), ("bias_hh_l0", r.b_hh)] {
        out.push(ParamTensor {
            name: format!("{name}.{tensor}"),
            at,
            shape: vec![gw],
            order: Order::Plain,
        });
    }
}
