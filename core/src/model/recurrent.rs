//! A recurrent core in burn: PyTorch's `nn.LSTM` or `nn.GRU` (one layer),
//! its tensors PyTorch's own (`weight_ih_l0` `[gates * size, d_in]`, ...,
//! gates i, f, g, o or r, z, n), stepped one env step at a time over env
//! sequences so that burn's autodiff takes the gradient through time
//! (`sebulba_fused::block::RecurrentBlock` is the fused engine's, checked
//! against this one).

use crate::config::Init;
use burn::module::{Initializer, Module, Param};
use burn::tensor::activation::sigmoid;
use burn::tensor::{Tensor, backend::Backend};
use sebulba_fused::Cell;
use sebulba_fused::block::RecurrentBlock;

/// The core's parameters in PyTorch's order, shapes and names (burn's
/// record names are the fields': `actor.core.0.weight_ih_l0`, which the
/// published file keeps).
#[derive(Module, Debug)]
pub struct Recurrent<B: Backend> {
    pub weight_ih_l0: Param<Tensor<B, 2>>,
    pub weight_hh_l0: Param<Tensor<B, 2>>,
    pub bias_ih_l0: Param<Tensor<B, 1>>,
    pub bias_hh_l0: Param<Tensor<B, 1>>,
}

/// The rows of a pass as env sequences: `m / envs` steps of `envs` envs,
/// time-major; `keep` `[m, 1]` is 0 where an env's episode starts at that
/// row (its state zeroed first), else 1; `state` `[envs, width]` each env's
/// state before the first row (every block's, both torsos').
#[derive(Clone, Debug)]
pub struct Sequence<B: Backend> {
    pub envs: usize,
    pub keep: Tensor<B, 2>,
    pub state: Tensor<B, 2>,
}

impl<B: Backend> Recurrent<B> {
    /// Weights orthogonal with gain 1 and zero biases, as CleanRL's
    /// `ppo_atari_lstm.py` starts its LSTM (or LeCun uniform weights).
    pub fn new(b: &RecurrentBlock, init: Init, device: &B::Device) -> Self {
        let (gw, d_in, h) = (b.at.width(), b.at.d_in, b.at.size);
        let weight = |cols: usize| match init {
            Init::Orthogonal => super::orthogonal::orthogonal([gw, cols], 1.0, device),
            Init::LecunUniform => Initializer::KaimingUniform {
                gain: 1.0,
                fan_out_only: false,
            }
            .init_with([gw, cols], Some(cols), Some(gw), device),
        };
        Self {
            weight_ih_l0: weight(d_in),
            weight_hh_l0: weight(h),
            bias_ih_l0: Param::from_tensor(Tensor::zeros([gw], device)),
            bias_hh_l0: Param::from_tensor(Tensor::zeros([gw], device)),
        }
    }

    /// Every row's `h` (`[m, size]`) for the rows `x` (`[m, d_in]`) of
    /// `seq`, the core's state at `b.state_at` in each env's; without a
    /// sequence, each row an env of its own from a zero state.
    pub fn forward(
        &self,
        b: &RecurrentBlock,
        x: Tensor<B, 2>,
        seq: Option<&Sequence<B>>,
    ) -> Tensor<B, 2> {
        self.run(b, x, seq, false).0
    }

    /// [`Self::forward`], and the core's state after every row (`[m,
    /// state]`: `h`, then an LSTM's `c`).
    pub fn forward_keeping(
        &self,
        b: &RecurrentBlock,
        x: Tensor<B, 2>,
        seq: Option<&Sequence<B>>,
    ) -> (Tensor<B, 2>, Tensor<B, 2>) {
        let (h, c) = self.run(b, x, seq, true);
        match c {
            Some(c) => (h.clone(), Tensor::cat(vec![h, c], 1)),
            None => (h.clone(), h),
        }
    }

    /// Every row's `h`, and when `keep_cells` an LSTM's `c` of every row.
    fn run(
        &self,
        b: &RecurrentBlock,
        x: Tensor<B, 2>,
        seq: Option<&Sequence<B>>,
        keep_cells: bool,
    ) -> (Tensor<B, 2>, Option<Tensor<B, 2>>) {
        let (m, h, gw) = (x.dims()[0], b.at.size, b.at.width());
        let device = x.device();
        let (e, s) = (seq.map_or(m, |q| q.envs), b.state_at);
        let before = |at: usize| match seq {
            Some(q) => q.state.clone().slice([0..e, at..at + h]),
            None => Tensor::zeros([e, h], &device),
        };
        let gi = x.matmul(self.weight_ih_l0.val().transpose()) + self.bias_ih_l0.val().unsqueeze();
        let w_hh = self.weight_hh_l0.val().transpose();
        let b_hh = self.bias_hh_l0.val().unsqueeze::<2>();
        let mut hp = before(s);
        let mut cp = (b.cell == Cell::Lstm).then(|| before(s + h));
        let mut out = Vec::with_capacity(m / e.max(1));
        let mut cells = Vec::new();
        for t in 0..m / e.max(1) {
            let rows = t * e..(t + 1) * e;
            let keep = match seq {
                Some(q) => q.keep.clone().slice([rows.clone(), 0..1]),
                None => Tensor::ones([e, 1], &device),
            };
            hp = hp * keep.clone();
            let gi_t = gi.clone().slice([rows, 0..gw]);
            let gh = hp.clone().matmul(w_hh.clone()) + b_hh.clone();
            let gate = |g: &Tensor<B, 2>, k: usize| g.clone().slice([0..e, k * h..(k + 1) * h]);
            hp = match cp.take() {
                Some(c) => {
                    let a = gi_t + gh;
                    let (i, f) = (sigmoid(gate(&a, 0)), sigmoid(gate(&a, 1)));
                    let (g, o) = (gate(&a, 2).tanh(), sigmoid(gate(&a, 3)));
                    let c = f * (c * keep) + i * g;
                    let h = o * c.clone().tanh();
                    if keep_cells {
                        cells.push(c.clone());
                    }
                    cp = Some(c);
                    h
                }
                None => {
                    let r = sigmoid(gate(&gi_t, 0) + gate(&gh, 0));
                    let z = sigmoid(gate(&gi_t, 1) + gate(&gh, 1));
                    let n = (gate(&gi_t, 2) + r * gate(&gh, 2)).tanh();
                    n.clone() + z * (hp - n)
                }
            };
            out.push(hp.clone());
        }
        let cells = (!cells.is_empty()).then(|| Tensor::cat(cells, 0));
        (Tensor::cat(out, 0), cells)
    }
}
