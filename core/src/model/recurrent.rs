//! A recurrent core in burn: PyTorch's `nn.LSTM` or `nn.GRU` (one layer),
//! its tensors PyTorch's own (`weight_ih_l0` `[gates * size, d_in]`, ...,
//! gates i, f, g, o or r, z, n), stepped one env step at a time over env
//! sequences so that burn's autodiff takes the gradient through time
//! (`sebulba_fused::block::RecurrentBlock` is the fused engine's, checked
//! against this one). In a game's sequence each seat's state is a lane of
//! its own, read and moved on through masks of the rows' movers.

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
/// row (its state zeroed first, every seat's in a game), else 1; `state`
/// `[envs, width]` each env's state before the first row (every block's,
/// both torsos'; in a game, each seat's in turn).
#[derive(Clone, Debug)]
pub struct Sequence<B: Backend> {
    pub envs: usize,
    pub keep: Tensor<B, 2>,
    pub state: Tensor<B, 2>,
    /// A game's movers: each row reads and moves on its mover's state.
    pub seats: Option<Movers<B>>,
}

/// Whose move each row of a game's sequence is, as masks: `one_hot` `[m,
/// players]` is 1 at each row's mover.
#[derive(Clone, Debug)]
pub struct Movers<B: Backend> {
    pub players: usize,
    pub one_hot: Tensor<B, 2>,
}

/// Each lane's `h` (and an LSTM's `c`) of one env column: one lane per env,
/// or one per seat of a game, read and written through the movers' masks.
struct Lanes<B: Backend> {
    h: Vec<Tensor<B, 2>>,
    c: Option<Vec<Tensor<B, 2>>>,
}

impl<B: Backend> Lanes<B> {
    /// Zeroes the lanes of envs whose episode starts (`keep` `[e, 1]`).
    fn keep(&mut self, keep: &Tensor<B, 2>) {
        for x in self.h.iter_mut().chain(self.c.iter_mut().flatten()) {
            *x = x.clone() * keep.clone();
        }
    }

    /// The state each env's mover reads (`movers[l]` `[e, 1]`, 1 where lane
    /// `l` moves; `None`: one lane).
    fn read(lanes: &[Tensor<B, 2>], movers: Option<&[Tensor<B, 2>]>) -> Tensor<B, 2> {
        match movers {
            None => lanes[0].clone(),
            Some(m) => {
                let mut sum = lanes[0].clone() * m[0].clone();
                for (x, m) in lanes.iter().zip(m).skip(1) {
                    sum = sum + x.clone() * m.clone();
                }
                sum
            }
        }
    }

    /// The movers' lanes become `new`, the others stay.
    fn write(lanes: &mut [Tensor<B, 2>], new: &Tensor<B, 2>, movers: Option<&[Tensor<B, 2>]>) {
        match movers {
            None => lanes[0] = new.clone(),
            Some(m) => {
                for (x, m) in lanes.iter_mut().zip(m) {
                    *x = x.clone() + (new.clone() - x.clone()) * m.clone();
                }
            }
        }
    }
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
        let seats = seq.and_then(|q| q.seats.as_ref());
        let players = seats.map_or(1, |m| m.players);
        let width = seq.map_or(0, |q| q.state.dims()[1] / players);
        let before = |lane: usize, at: usize| match seq {
            Some(q) => {
                let at = lane * width + at;
                q.state.clone().slice([0..e, at..at + h])
            }
            None => Tensor::zeros([e, h], &device),
        };
        let gi = x.matmul(self.weight_ih_l0.val().transpose()) + self.bias_ih_l0.val().unsqueeze();
        let w_hh = self.weight_hh_l0.val().transpose();
        let b_hh = self.bias_hh_l0.val().unsqueeze::<2>();
        let lstm = b.cell == Cell::Lstm;
        let mut lanes = Lanes {
            h: (0..players).map(|l| before(l, s)).collect(),
            c: lstm.then(|| (0..players).map(|l| before(l, s + h)).collect()),
        };
        let mut out = Vec::with_capacity(m / e.max(1));
        let mut cells = Vec::new();
        for t in 0..m / e.max(1) {
            let rows = t * e..(t + 1) * e;
            if let Some(q) = seq {
                lanes.keep(&q.keep.clone().slice([rows.clone(), 0..1]));
            }
            let movers: Option<Vec<Tensor<B, 2>>> = seats.map(|m| {
                let at = |l: usize| m.one_hot.clone().slice([rows.clone(), l..l + 1]);
                (0..players).map(at).collect()
            });
            let movers = movers.as_deref();
            let hp = Lanes::read(&lanes.h, movers);
            let gi_t = gi.clone().slice([rows, 0..gw]);
            let gh = hp.clone().matmul(w_hh.clone()) + b_hh.clone();
            let gate = |g: &Tensor<B, 2>, k: usize| g.clone().slice([0..e, k * h..(k + 1) * h]);
            let hn = match &mut lanes.c {
                Some(cs) => {
                    let c = Lanes::read(cs, movers);
                    let a = gi_t + gh;
                    let (i, f) = (sigmoid(gate(&a, 0)), sigmoid(gate(&a, 1)));
                    let (g, o) = (gate(&a, 2).tanh(), sigmoid(gate(&a, 3)));
                    let c = f * c + i * g;
                    let h = o * c.clone().tanh();
                    if keep_cells {
                        cells.push(c.clone());
                    }
                    Lanes::write(cs, &c, movers);
                    h
                }
                None => {
                    let r = sigmoid(gate(&gi_t, 0) + gate(&gh, 0));
                    let z = sigmoid(gate(&gi_t, 1) + gate(&gh, 1));
                    let n = (gate(&gi_t, 2) + r * gate(&gh, 2)).tanh();
                    n.clone() + z * (hp - n)
                }
            };
            Lanes::write(&mut lanes.h, &hn, movers);
            out.push(hn);
        }
        let cells = (!cells.is_empty()).then(|| Tensor::cat(cells, 0));
        (Tensor::cat(out, 0), cells)
    }
}
