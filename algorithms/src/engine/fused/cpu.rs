//! The fused engine's step on flat f32 buffers: a minibatch's forward pass,
//! the PPO or DQN loss gradients per sample ([`super::heads`]), the backward
//! pass, global-norm clipping and Adam (`sebulba_fused`), the rows spread
//! over threads ([`super::shard`]).

use super::shard::{Part, Shard, StepInputs};
use super::team::Team;
use crate::data::{LossTerms, Minibatch, StepStats};
use sebulba_core::distribution::ActionDist;
use sebulba_core::model::ModelSpec;
use sebulba_fused::adam::clip_grads;
use sebulba_fused::net::{self, Layout};
use sebulba_fused::{ObsNorm, Seats, Sequence, TrainState};
use std::sync::{Mutex, PoisonError};

/// The fewest minibatch rows worth a thread of their own: below this the
/// hand-over costs more than the rows' arithmetic saves.
pub const MIN_SHARD_ROWS: usize = 32;

pub struct Fused {
    layout: Layout,
    dist: ActionDist,
    /// Parameters and Adam's moments, in layout order.
    state: TrainState,
    adam_eps: f32,
    /// Observation normaliser, when on.
    norm: Option<ObsNorm>,
    /// One per thread; the first one's gradient is the step's (the others'
    /// are added into it).
    shards: Vec<Shard>,
    /// The caller's thread and the engine's own that a step is spread over.
    team: Team,
}

impl Fused {
    /// An engine with zero parameters and no Adam state (load them with
    /// [`Fused::load`]), stepping Adam with epsilon `adam_eps`. A minibatch
    /// step is spread over up to `threads` threads (the caller's and
    /// `threads - 1` of its own, see [`Team`]); if threads cannot be made it
    /// runs on fewer, and says so.
    pub fn new(spec: &ModelSpec, threads: usize, adam_eps: f64) -> Self {
        let layout = Layout::new(&spec.arch());
        let team = Team::new(threads.saturating_sub(1), "learner-shard");
        Self {
            shards: (0..team.threads()).map(|_| Shard::new(&layout)).collect(),
            state: TrainState::new(vec![0.0; layout.len]),
            layout,
            dist: spec.dist(),
            adam_eps: adam_eps as f32,
            norm: None,
            team,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Bytes held: parameters, Adam's moments, and each thread's gradient and
    /// activations.
    pub fn bytes(&self) -> usize {
        use sebulba_fused::conv::f32_bytes;
        let s = &self.state;
        let state = f32_bytes(&s.params) + f32_bytes(&s.m1) + f32_bytes(&s.m2);
        state + self.shards.iter().map(Shard::bytes).sum::<usize>()
    }

    /// Threads a minibatch step may use.
    pub fn threads(&self) -> usize {
        self.team.threads()
    }

    pub fn params(&self) -> &[f32] {
        &self.state.params
    }

    /// Gradients of the last step, before clipping.
    pub fn grads(&self) -> &[f32] {
        &self.shards[0].grads
    }

    /// The parameters and Adam's state.
    pub fn state(&self) -> &TrainState {
        &self.state
    }

    /// Replaces the parameters and Adam's state (of this layout's size).
    pub fn load(&mut self, state: &TrainState) -> Result<(), String> {
        state.check(self.layout.len)?;
        self.state = state.clone();
        Ok(())
    }

    /// The observation normaliser (`None`: off).
    pub fn set_norm(&mut self, norm: Option<ObsNorm>) {
        self.norm = norm;
    }

    /// The observation normaliser in use.
    pub fn norm(&self) -> Option<&ObsNorm> {
        self.norm.as_ref()
    }

    /// State values of the observation rows `obs` (`[rows * obs_dim]`), in
    /// chunks of [`pass_rows`] rows.
    pub fn values(&mut self, obs: &[f32]) -> Vec<f32> {
        self.values_in_chunks(obs, pass_rows(&self.layout))
    }

    /// [`Fused::values`], `rows` rows at a time.
    pub(super) fn values_in_chunks(&mut self, obs: &[f32], rows: usize) -> Vec<f32> {
        let (layout, shard) = (&self.layout, &mut self.shards[0]);
        let mut out = Vec::with_capacity(obs.len() / layout.obs_dim);
        for chunk in obs.chunks(rows.max(1) * layout.obs_dim) {
            shard.load_rows(layout, self.norm.as_ref(), chunk);
            net::value_forward(layout, &self.state.params, &mut shard.work);
            out.extend_from_slice(&shard.work.value);
        }
        out
    }

    /// Policy-head outputs of the observation rows `obs`.
    pub fn heads(&mut self, obs: &[f32]) -> Vec<f32> {
        let shard = &mut self.shards[0];
        policy_rows(
            &self.layout,
            &self.state.params,
            self.norm.as_ref(),
            shard,
            obs,
        )
    }

    /// Policy-head outputs of the observation rows `obs` under parameters
    /// `params` (in layout order) and normaliser `norm`: DQN's target network.
    pub fn heads_with(&mut self, params: &[f32], norm: Option<&ObsNorm>, obs: &[f32]) -> Vec<f32> {
        policy_rows(&self.layout, params, norm, &mut self.shards[0], obs)
    }

    /// State values of the rows `obs` (`[rows * obs_dim]`) of `seq` (a
    /// network with memory): its rows in time order from each env's state,
    /// then each row after them from the state after the row it continues.
    pub fn values_in(&mut self, obs: &[f32], seq: &Sequence<'_>) -> Vec<f32> {
        self.sequence_pass(obs, seq, Output::Values, pass_rows(&self.layout))
    }

    /// Policy-head outputs of the rows `obs` of `seq`, as [`Fused::values_in`].
    pub fn heads_in(&mut self, obs: &[f32], seq: &Sequence<'_>) -> Vec<f32> {
        self.sequence_pass(obs, seq, Output::Heads, pass_rows(&self.layout))
    }

    /// Each env's state after the rows `rows` of `seq` (`[rows.len() *
    /// state_width]`): where the chunks of `ppo.bptt` steps start.
    pub fn states_in(&mut self, obs: &[f32], seq: &Sequence<'_>, rows: &[usize]) -> Vec<f32> {
        let w = self.layout.state_width;
        let mut states = vec![0.0f32; rows.len() * w];
        let mut values = vec![0.0f32; seq.steps * seq.envs];
        let chunk = pass_rows(&self.layout);
        self.through_sequence(
            obs,
            seq,
            (Output::Values, chunk),
            rows,
            (&mut values, &mut states),
        );
        states
    }

    /// A forward pass over the rows of `seq` in chunks of whole env
    /// sequences of at most `rows` rows (at least one env's), then over the
    /// rows after them `rows` at a time; `what` each row gives.
    pub(super) fn sequence_pass(
        &mut self,
        obs: &[f32],
        seq: &Sequence<'_>,
        what: Output,
        rows: usize,
    ) -> Vec<f32> {
        let layout = &self.layout;
        let (d, w) = (layout.obs_dim, layout.state_width);
        let per_row = what.per_row(layout);
        let in_seq = seq.steps * seq.envs;
        let total = obs.len() / d;
        let mut out = vec![0.0f32; total * per_row];
        // Each later row's state: the state after the row it continues.
        let after = &seq.continues[..total - in_seq];
        let mut later_state = vec![0.0f32; after.len() * w];
        let (seq_out, _) = out.split_at_mut(in_seq * per_row);
        self.through_sequence(obs, seq, (what, rows), after, (seq_out, &mut later_state));
        let (layout, params) = (&self.layout, &self.state.params);
        let (norm, work) = (self.norm.as_ref(), &mut self.shards[0].work);
        // The rows after the sequence, each one step from its state.
        let later = &obs[in_seq * d..];
        for (c, chunk) in later.chunks(rows.max(1) * d).enumerate() {
            let n = chunk.len() / d;
            let first = c * rows.max(1);
            work.resize(layout, n);
            work.x.copy_from_slice(chunk);
            work.x
                .chunks_exact_mut(d)
                .for_each(|row| layout.input_row(norm, row));
            work.set_sequence(n, &[], &later_state[first * w..(first + n) * w], None);
            net::forward(layout, params, work);
            for r in 0..n {
                let at = (in_seq + first + r) * per_row;
                out[at..at + per_row].copy_from_slice(what.row(work, r));
            }
        }
        out
    }

    /// The forward pass over the `steps * envs` rows of `seq` in chunks of
    /// whole env sequences of at most `rows` rows: `what` each row gives
    /// into `out`, and the state after each of the sequence's rows `after`
    /// (a row past the sequence's end leaves a zero state) into `states`.
    fn through_sequence(
        &mut self,
        obs: &[f32],
        seq: &Sequence<'_>,
        (what, rows): (Output, usize),
        after: &[usize],
        (out, states): (&mut [f32], &mut [f32]),
    ) {
        let (layout, params) = (&self.layout, &self.state.params);
        let (norm, work) = (self.norm.as_ref(), &mut self.shards[0].work);
        let (d, w) = (layout.obs_dim, layout.state_width);
        let per_row = what.per_row(layout);
        let (steps, envs) = (seq.steps, seq.envs);
        let in_seq = steps * envs;
        let per_chunk = (rows / steps.max(1)).clamp(1, envs.max(1));
        // Each env's state in the sequence: every seat's in a game.
        let sw = seq.state.width();
        let (mut starts, mut movers) = (Vec::new(), Vec::new());
        for e0 in (0..envs).step_by(per_chunk) {
            let k = per_chunk.min(envs - e0);
            // Row (t, e) of the sequence is row (t, e - e0) of the chunk.
            let chunk_rows =
                || (0..steps).flat_map(move |t| (e0..e0 + k).map(move |e| t * envs + e));
            work.resize(layout, steps * k);
            starts.clear();
            movers.clear();
            for (dst, src) in chunk_rows().enumerate() {
                let row = &mut work.x[dst * d..(dst + 1) * d];
                row.copy_from_slice(&obs[src * d..(src + 1) * d]);
                layout.input_row(norm, row);
                starts.push(seq.starts[src]);
                movers.extend(seq.seats.map(|s| s.movers[src]));
            }
            let seats = seq.seats.map(|s| Seats {
                players: s.players,
                movers: &movers,
            });
            let state = &seq.state.values()[e0 * sw..(e0 + k) * sw];
            work.set_sequence(k, &starts, state, seats);
            net::forward(layout, params, work);
            for (dst, src) in chunk_rows().enumerate() {
                out[src * per_row..(src + 1) * per_row].copy_from_slice(what.row(work, dst));
            }
            let local = |c: usize| (c / envs) * k + (c % envs - e0);
            let mine: Vec<usize> = (0..after.len())
                .filter(|&i| after[i] < in_seq && (e0..e0 + k).contains(&(after[i] % envs)))
                .collect();
            let local_rows: Vec<usize> = mine.iter().map(|&i| local(after[i])).collect();
            let mut found = vec![0.0f32; local_rows.len() * w];
            net::states_after(layout, work, &local_rows, &mut found);
            for (j, &i) in mine.iter().enumerate() {
                states[i * w..(i + 1) * w].copy_from_slice(&found[j * w..(j + 1) * w]);
            }
        }
    }

    /// One minibatch step: the loss of the samples `mb.idx`, its gradient,
    /// global-norm clipping and an Adam step at `mb.lr`; no step when the
    /// approximate KL is past `target_kl`. The same contract as a single burn
    /// replica's step.
    pub fn step(&mut self, mb: &Minibatch<'_>) -> StepStats {
        // Means over the samples in the loss (a game's moves by others, kept
        // in their seats' sequences, are not).
        let inv_m = 1.0 / mb.data.trained_in(mb.idx).max(1) as f64;
        let sums = self.forward_backward(mb, inv_m);
        let approx_kl = sums.approx_kl * inv_m;
        let target_kl = mb.loss.target_kl();
        if target_kl > 0.0 && approx_kl > target_kl {
            let terms = LossTerms {
                approx_kl,
                ..Default::default()
            };
            return StepStats {
                terms,
                ..Default::default()
            };
        }
        let grad_norm = clip_grads(&mut self.shards[0].grads, mb.max_grad_norm);
        let loss = sums.policy_loss + sums.value_loss + sums.entropy + sums.q_mean;
        if !grad_norm.is_finite() || !loss.is_finite() {
            return StepStats::skipped_non_finite();
        }
        self.state
            .adam_step(&self.shards[0].grads, mb.lr, self.adam_eps);
        StepStats {
            terms: LossTerms {
                approx_kl,
                ..sums.times(inv_m)
            },
            grad_norm,
            stepped: true,
            non_finite: false,
        }
    }

    /// The minibatch's summed loss terms, and its gradient in the first
    /// shard's buffer: its rows split into shards of at least
    /// [`MIN_SHARD_ROWS`], one per thread (contiguous rows, or whole
    /// sequences for a network with memory), the gradients added up after.
    fn forward_backward(&mut self, mb: &Minibatch<'_>, inv_m: f64) -> LossTerms {
        let m = mb.idx.len();
        let units = match self.layout.state_width {
            0 => m,
            _ => mb.sequences.len(),
        };
        let n = (m / MIN_SHARD_ROWS).clamp(1, self.shards.len().min(units.max(1)));
        let chunk = units.div_ceil(n);
        let range = |s: usize| s * chunk..((s + 1) * chunk).min(units);
        let rows = |s: usize| match self.layout.state_width {
            0 => Part::Rows(range(s)),
            _ => Part::Sequences {
                k: range(s),
                count: units,
                steps: m / units.max(1),
            },
        };
        let shared = StepInputs {
            layout: &self.layout,
            dist: &self.dist,
            params: &self.state.params,
            norm: self.norm.as_ref(),
            mb,
            inv_m,
        };
        // Each shard's buffers behind a lock of its own: shard `i` is taken
        // once, by the thread that claimed part `i`, so no lock ever waits.
        let shards: Vec<Mutex<&mut Shard>> = self.shards[..n].iter_mut().map(Mutex::new).collect();
        self.team.run(n, &|i| {
            let mut shard = shards[i].lock().unwrap_or_else(PoisonError::into_inner);
            shard.run(&shared, rows(i));
        });
        drop(shards);
        let (first, rest) = self.shards[..n].split_at_mut(1);
        let mut sums = first[0].sums;
        for shard in rest.iter() {
            sums.add(&shard.sums);
            let total = first[0].grads.iter_mut();
            total.zip(&shard.grads).for_each(|(g, &o)| *g += o);
        }
        sums
    }
}

/// What a pass over rows gives per row.
#[derive(Clone, Copy, Debug)]
pub(super) enum Output {
    Values,
    Heads,
}

impl Output {
    fn per_row(self, layout: &Layout) -> usize {
        match self {
            Output::Values => 1,
            Output::Heads => layout.head_dim,
        }
    }

    /// Row `r`'s outputs in `work` after a forward pass.
    fn row(self, work: &net::Work, r: usize) -> &[f32] {
        match self {
            Output::Values => &work.value[r..r + 1],
            Output::Heads => {
                let hd = work.head.len() / work.m.max(1);
                &work.head[r * hd..(r + 1) * hd]
            }
        }
    }
}

/// Floats a pass over rows keeps at most (256 MiB): a value or policy pass
/// over a trajectory's rows goes in chunks that fit, so that a deep image
/// network's activations (the IMPALA ResNet keeps 2 MB per 84x84 frame)
/// stay bounded; a small network's rows are never split.
const PASS_FLOATS: usize = 1 << 26;

/// Rows of one chunk of a pass.
fn pass_rows(layout: &Layout) -> usize {
    (PASS_FLOATS / layout.floats_per_sample()).max(1)
}

/// The policy forward pass of `obs` in `shard`'s buffers, in chunks of
/// [`pass_rows`] rows.
fn policy_rows(
    layout: &Layout,
    params: &[f32],
    norm: Option<&ObsNorm>,
    shard: &mut Shard,
    obs: &[f32],
) -> Vec<f32> {
    let mut out = Vec::with_capacity(obs.len() / layout.obs_dim * layout.head_dim);
    for chunk in obs.chunks(pass_rows(layout) * layout.obs_dim) {
        shard.load_rows(layout, norm, chunk);
        net::policy_forward(layout, params, &mut shard.work);
        out.extend_from_slice(&shard.work.head);
    }
    out
}
