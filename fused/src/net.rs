//! The actor-critic network on flat f32 buffers: where each weight lives in
//! the parameter vector ([`layout`]), and a forward pass that keeps every
//! block's output (the learner's fused engine runs its backward pass from
//! them). Dense weights are `[d_in, d_out]` row-major and a layer is `y =
//! act(x W + b)`, as in burn's `Linear`; image blocks work on NHWC
//! activations with `[kh, kw, c_in, c_out]` convolution weights
//! ([`crate::conv`]), so those weights and a dense layer reading an image are
//! reordered at burn's and the file's edges ([`crate::tensors`]).

mod layout;

pub use crate::block::{BlockAt, Torso};
pub use crate::conv::ConvAt;
pub use crate::places::{Dense, RecurrentAt};
pub use layout::{Head, Layout};

use crate::Activation;
use crate::Seats;
use crate::block::{Before, Forward, Input, Seq, dense_forward, seat_lanes};
use crate::conv::{self, f32_bytes};
use crate::kernels::add_bias_then;
use crate::kernels::{View, gemm};
use crate::sparse_input::SparseRows;

/// One torso's activations for a minibatch: each block's output (what the
/// backward pass reads, with the torso's input).
#[derive(Default)]
pub struct TorsoWork {
    /// `[m, out_len]` each block's output.
    pub outs: Vec<Vec<f32>>,
    /// `[m, inner_len]` what a block keeps besides its output (a residual
    /// block's activations; empty for the others).
    pub inner: Vec<Vec<f32>>,
    /// The convolutions' windows, a chunk at a time.
    pub conv: conv::Scratch,
    /// The observations' nonzero entries, when a torso whose first block is
    /// dense found them sparse enough to read that way
    /// ([`crate::sparse_input`]).
    pub input: SparseRows,
}

impl TorsoWork {
    /// Bytes its buffers hold.
    pub fn bytes(&self) -> usize {
        let layers: usize = self.outs.iter().chain(&self.inner).map(f32_bytes).sum();
        layers + self.conv.bytes() + self.input.bytes()
    }

    fn resize(&mut self, t: &Torso, m: usize) {
        self.outs.resize_with(t.blocks.len(), Vec::new);
        self.inner.resize_with(t.blocks.len(), Vec::new);
        for ((o, i), b) in self.outs.iter_mut().zip(&mut self.inner).zip(&t.blocks) {
            o.resize(m * b.out_len(), 0.0);
            i.resize(m * b.inner_len(), 0.0);
        }
    }

    /// Block `i`'s input: the previous block's output, or `x` for the first.
    pub fn input_of<'a>(&'a self, i: usize, x: &'a [f32]) -> &'a [f32] {
        match i {
            0 => x,
            _ => &self.outs[i - 1],
        }
    }

    /// The torso's output: its last block's, or `x` when it has none.
    pub fn top<'a>(&'a self, x: &'a [f32]) -> &'a [f32] {
        self.outs.last().map_or(x, |v| v.as_slice())
    }
}

/// Buffers for one minibatch of `m` rows, reused from step to step.
#[derive(Default)]
pub struct Work {
    pub m: usize,
    /// `[m, obs_dim]` the observations as the torsos read them
    /// ([`Layout::input_row`]): the caller fills it.
    pub x: Vec<f32>,
    pub actor: TorsoWork,
    /// The critic torso's (empty with a shared torso).
    pub critic: TorsoWork,
    /// `[m, head_dim]` policy-head outputs.
    pub head: Vec<f32>,
    /// `[m]` values.
    pub value: Vec<f32>,
    /// The rows as env sequences, for a network with memory: `m / envs`
    /// steps of `envs` envs, time-major ([`Work::set_sequence`]). After
    /// [`Work::resize`], each row is an env of its own at its episode's
    /// first step.
    pub envs: usize,
    /// `[m]`: 1 where an env's episode starts at that row; empty: none does.
    pub starts: Vec<u8>,
    /// `[lanes * state_width]`: each lane's state before the first row
    /// (an env's, or each seat's of a game's env).
    pub state: Vec<f32>,
    /// [`Layout::state_width`].
    state_width: usize,
    /// A game's sequence: each row's lane and what it reads (empty
    /// otherwise; [`crate::block::seat_lanes`]).
    lanes: Vec<u32>,
    before: Vec<Before>,
}

impl Work {
    /// Bytes its buffers hold.
    pub fn bytes(&self) -> usize {
        [&self.x, &self.head, &self.value]
            .into_iter()
            .map(f32_bytes)
            .sum::<usize>()
            + self.actor.bytes()
            + self.critic.bytes()
    }

    /// Sizes every buffer for `m` rows (allocates only when `m` or the
    /// layout grows); each row an env of its own, from a zero state.
    pub fn resize(&mut self, layout: &Layout, m: usize) {
        self.m = m;
        self.envs = m;
        self.state_width = layout.state_width;
        self.starts.clear();
        self.lanes.clear();
        self.before.clear();
        self.state.clear();
        self.state.resize(m * layout.state_width, 0.0);
        self.x.resize(m * layout.obs_dim, 0.0);
        self.actor.resize(&layout.actor, m);
        match &layout.critic {
            Some(c) => self.critic.resize(c, m),
            None => self.critic = TorsoWork::default(),
        }
        self.head.resize(m * layout.head_dim, 0.0);
        self.value.resize(m, 0.0);
    }
}

impl Work {
    /// The rows (already sized by [`Work::resize`]) are `m / envs` steps of
    /// `envs` envs, time-major, from each env's `state` (`[envs *
    /// state_width]`, or for a game's `seats` `[envs * players *
    /// state_width]`, each seat's), with episodes starting where `starts`
    /// (`[m]`, or empty) says.
    ///
    /// # Panics
    /// When the rows are not whole steps or the buffers' lengths differ: a
    /// caller's bug.
    pub fn set_sequence(
        &mut self,
        envs: usize,
        starts: &[u8],
        state: &[f32],
        seats: Option<Seats<'_>>,
    ) {
        assert!(
            envs > 0 && self.m.is_multiple_of(envs),
            "{} rows are not whole steps of {envs} envs",
            self.m
        );
        assert!(
            starts.is_empty() || starts.len() == self.m,
            "starts per row"
        );
        let players = seats.map_or(1, |s| s.players);
        assert_eq!(
            state.len(),
            envs * players * self.state_width,
            "a state per lane"
        );
        self.envs = envs;
        self.starts.clear();
        self.starts.extend_from_slice(starts);
        self.state.clear();
        self.state.extend_from_slice(state);
        match seats {
            Some(s) => {
                assert_eq!(s.movers.len(), self.m, "a mover per row");
                let lanes = (&mut self.lanes, &mut self.before);
                seat_lanes(envs, (s.players, s.movers), starts, lanes);
            }
            None => {
                self.lanes.clear();
                self.before.clear();
            }
        }
    }

    /// The sequence the rows form, as blocks read it.
    pub(crate) fn seq(&self) -> Seq<'_> {
        Seq {
            envs: self.envs,
            starts: &self.starts,
            state: &self.state,
            width: self.state_width,
            lanes: &self.lanes,
            before: &self.before,
        }
    }
}

/// Each env's state after the last step of the last forward pass into
/// `out` (`[envs * state_width]`): what it carries to its next step. The
/// critic's part is only moved on by a pass that ran the critic torso.
pub fn final_state(layout: &Layout, work: &Work, out: &mut [f32]) {
    assert!(
        work.lanes.is_empty(),
        "a game's lanes end at their own rows"
    );
    let last: Vec<usize> = (work.m - work.envs..work.m).collect();
    states_after(layout, work, &last, out);
}

/// The state after each of `rows` of the last forward pass into `out`
/// (`[rows.len() * state_width]`): where a row read on its own continues an
/// env's sequence (a cut episode's final observation).
pub fn states_after(layout: &Layout, work: &Work, rows: &[usize], out: &mut [f32]) {
    let width = layout.state_width;
    assert_eq!(out.len(), rows.len() * width, "a state per row");
    assert!(rows.iter().all(|&r| r < work.m), "rows of the pass");
    let torsos = [(&layout.actor, &work.actor)]
        .into_iter()
        .chain(layout.critic.as_ref().map(|c| (c, &work.critic)));
    for (t, w) in torsos {
        for (i, b) in t.blocks.iter().enumerate() {
            let pass = (work.m, &w.outs[i][..], &w.inner[i][..]);
            b.pass().state_after(pass, rows, width, out);
        }
    }
}

/// The policy head's outputs `out = x Wᵀ + b` for `m` rows (`W` is
/// `[d_out, d_in]`).
fn head_forward(p: &[f32], h: &Head, x: &[f32], m: usize, out: &mut [f32]) {
    let out = &mut out[..m * h.d_out];
    let wt = View::transposed(&p[h.w..h.w + h.d_in * h.d_out], h.d_in);
    gemm(m, h.d_in, h.d_out, View::rows(x, h.d_in), wt, 0.0, out);
    add_bias_then(out, &p[h.b..h.b + h.d_out], |v| v);
}

fn torso_forward(
    p: &[f32],
    t: &Torso,
    (x, seq): (&[f32], Seq<'_>),
    m: usize,
    act: Activation,
    w: &mut TorsoWork,
) {
    // The observations themselves: read as nonzero entries when sparse.
    let sparse = match t.blocks.first() {
        Some(BlockAt::Dense(d)) => w.input.index(x, m, d.at.d_in),
        _ => {
            w.input.clear();
            false
        }
    };
    let TorsoWork {
        outs,
        inner,
        conv,
        input,
    } = w;
    for (i, b) in t.blocks.iter().enumerate() {
        let (done, rest) = outs.split_at_mut(i);
        let x = match done.last() {
            Some(h) => Input::Dense(h),
            None if sparse => Input::Sparse(input),
            None => Input::Dense(x),
        };
        let f = Forward {
            m,
            act,
            seq,
            out: &mut rest[0],
            inner: &mut inner[i],
            scratch: conv,
        };
        b.pass().forward(p, x, f);
    }
}

/// Torso `t`'s block outputs for the rows in `work.x` (as `work`'s
/// sequence), into the critic's buffers when `critic`, else the actor's.
fn run_torso(p: &[f32], t: &Torso, act: Activation, work: &mut Work, critic: bool) {
    let Work {
        m,
        x,
        actor,
        critic: critic_work,
        envs,
        starts,
        state,
        state_width,
        lanes,
        before,
        ..
    } = work;
    let seq = Seq {
        envs: *envs,
        starts,
        state,
        width: *state_width,
        lanes,
        before,
    };
    let w = if critic { critic_work } else { actor };
    torso_forward(p, t, (x, seq), *m, act, w);
}

/// The actor torso's block outputs for the rows in `work.x`.
pub(crate) fn actor_torso(layout: &Layout, p: &[f32], work: &mut Work) {
    run_torso(p, &layout.actor, layout.activation, work, false);
}

/// Policy-head outputs for the rows in `work.x` (no value head: acting).
pub fn policy_forward(layout: &Layout, p: &[f32], work: &mut Work) {
    actor_torso(layout, p, work);
    let ha = work.actor.top(&work.x);
    head_forward(p, &layout.policy, ha, work.m, &mut work.head);
}

/// The critic torso (when separate) and the value head; with a shared torso,
/// from the actor torso's outputs already in `work`.
pub(crate) fn value_from_torso(layout: &Layout, p: &[f32], work: &mut Work) {
    critic_torso(layout, p, work);
    let hv = match &layout.critic {
        Some(_) => &work.critic,
        None => &work.actor,
    };
    let hv = Input::Dense(hv.top(&work.x));
    dense_forward(p, &layout.value, hv, work.m, None, &mut work.value);
}

/// The critic torso's block outputs for the rows in `work.x`, when it has
/// one of its own.
pub(crate) fn critic_torso(layout: &Layout, p: &[f32], work: &mut Work) {
    if let Some(critic) = &layout.critic {
        run_torso(p, critic, layout.activation, work, true);
    }
}

/// Policy-head outputs and values for the rows in `work.x`.
pub fn forward(layout: &Layout, p: &[f32], work: &mut Work) {
    policy_forward(layout, p, work);
    value_from_torso(layout, p, work);
}

/// Values only for the rows in `work.x` (the learner's bootstrap pass).
pub fn value_forward(layout: &Layout, p: &[f32], work: &mut Work) {
    if layout.critic.is_none() {
        actor_torso(layout, p, work);
    }
    value_from_torso(layout, p, work);
}
