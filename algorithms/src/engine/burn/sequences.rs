//! A network with memory on burn: an update's rows read as env sequences
//! (each from its initial state, zeroed where an episode starts), a cut
//! episode's final observation read from the state after its env's last
//! step, and a minibatch's sequences shared out between the replicas whole.

use crate::data::Minibatch;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use sebulba_core::model::{ActorCritic, Movers, Sequence};

/// `seq` (the fused crate's description, on the host) as burn's model reads
/// it, on `device`.
pub(super) fn on_device<B: Backend>(
    seq: &sebulba_fused::Sequence<'_>,
    device: &B::Device,
) -> Sequence<B> {
    let rows = seq.steps * seq.envs;
    let width = seq.state.width();
    let keep: Vec<f32> = seq.starts[..rows]
        .iter()
        .map(|&s| f32::from(u8::from(s == 0)))
        .collect();
    let seats = seq.seats.map(|s| {
        let mut one_hot = vec![0.0f32; rows * s.players];
        for (row, &seat) in s.movers[..rows].iter().enumerate() {
            one_hot[row * s.players + seat as usize] = 1.0;
        }
        Movers {
            players: s.players,
            one_hot: Tensor::from_data(TensorData::new(one_hot, [rows, s.players]), device),
        }
    });
    Sequence {
        envs: seq.envs,
        keep: Tensor::from_data(TensorData::new(keep, [rows, 1]), device),
        state: Tensor::from_data(
            TensorData::new(seq.state.values().to_vec(), [seq.envs, width]),
            device,
        ),
        seats,
    }
}

/// Values (`heads` false) or policy-head outputs of the rows `x` (`[rows,
/// obs_dim]`): the rows of `seq`, then each later row from the state after
/// the row it continues (a zero state when it continues none).
pub(super) fn pass<B: Backend>(
    model: &ActorCritic<B>,
    x: Tensor<B, 2>,
    seq: &sebulba_fused::Sequence<'_>,
    heads: bool,
) -> Tensor<B, 2> {
    let device = x.device();
    let [total, d] = x.dims();
    let in_seq = seq.steps * seq.envs;
    let on = on_device::<B>(seq, &device);
    let out = |x: Tensor<B, 2>, s: &Sequence<B>| match heads {
        true => model.policy_in(x, Some(s)),
        false => {
            let v = model.value_in(x, Some(s));
            let n = v.dims()[0];
            v.reshape([n, 1])
        }
    };
    let first = out(x.clone().slice([0..in_seq, 0..d]), &on);
    if total == in_seq {
        return first;
    }
    // A later row reads one lane's state (its env's, or a game's seat's).
    let width = seq.state.width() / seq.players();
    let later = total - in_seq;
    let continues = &seq.continues[..later];
    let known: Vec<usize> = continues.iter().copied().filter(|&c| c < in_seq).collect();
    let mut state = vec![0.0f32; later * width];
    if !known.is_empty() {
        let after = model.states_after(x.clone().slice([0..in_seq, 0..d]), &on, &known);
        let after: Vec<f32> = after.into_data().to_vec().unwrap_or_default();
        let mut next = after.chunks_exact(width);
        for (k, _) in continues.iter().enumerate().filter(|(_, c)| **c < in_seq) {
            if let Some(s) = next.next() {
                state[k * width..(k + 1) * width].copy_from_slice(s);
            }
        }
    }
    let from = Sequence {
        envs: later,
        keep: Tensor::ones([later, 1], &device),
        state: Tensor::from_data(TensorData::new(state, [later, width]), &device),
        seats: None,
    };
    let rest = out(x.slice([in_seq..total, 0..d]), &from);
    Tensor::cat(vec![first, rest], 0)
}

/// Each env's state after the rows `rows` of `seq`, whose rows `x` holds
/// (`[rows.len(), width]`).
pub(super) fn states_after<B: Backend>(
    model: &ActorCritic<B>,
    x: Tensor<B, 2>,
    seq: &sebulba_fused::Sequence<'_>,
    rows: &[usize],
) -> Tensor<B, 2> {
    let on = on_device::<B>(seq, &x.device());
    model.states_after(x, &on, rows)
}

/// One replica's share of a minibatch of whole sequences: its rows
/// time-major over its sequences, their advantages and noise.
pub(super) struct Share {
    pub idx: Vec<usize>,
    pub adv: Vec<f32>,
    pub noise: Vec<f32>,
    /// Which of the data's sequences, in order.
    pub sequences: Vec<usize>,
}

/// `mb`'s sequences in `d` contiguous groups, one per replica.
pub(super) fn shares(mb: &Minibatch<'_>, d: usize, width: usize) -> Vec<Share> {
    let count = mb.sequences.len();
    let steps = mb.idx.len() / count.max(1);
    (0..d)
        .map(|i| {
            let k = i * count / d..(i + 1) * count / d;
            let mut s = Share {
                idx: Vec::new(),
                adv: Vec::new(),
                noise: Vec::new(),
                sequences: mb.sequences[k.clone()].to_vec(),
            };
            for t in 0..steps {
                for p in k.clone().map(|k| t * count + k) {
                    s.idx.push(mb.idx[p]);
                    s.adv.push(mb.adv[p]);
                    s.noise
                        .extend_from_slice(mb.noise.get(p * width..(p + 1) * width).unwrap_or(&[]));
                }
            }
            s
        })
        .collect()
}
