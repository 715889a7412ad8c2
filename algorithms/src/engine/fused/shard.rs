//! One thread's share of a fused minibatch step. A minibatch's rows are split
//! into shards ([`Part`]): contiguous rows, or, for a network with memory,
//! whole env sequences (each shard's rows time-major over its sequences,
//! read from their initial states); each shard runs the forward pass, the
//! per-sample loss gradients and the backward pass over its rows into a
//! gradient buffer of its own, and the engine adds the shards' gradients.
//! Every per-sample term is already divided by the whole minibatch's size,
//! so the sum is the minibatch's gradient: only the order of the
//! floating-point additions depends on the shard count.

use super::heads::{self, Support};
use crate::data::{Loss, LossTerms, Minibatch};
use crate::trajectory::BatchActions;
use sebulba_core::config::PpoConfig;
use sebulba_core::distribution::ActionDist;
use sebulba_fused::ObsNorm;
use sebulba_fused::backward::{self, Grads};
use sebulba_fused::net::{self, Layout, Work};
use sebulba_fused::sparse_head::{self, SparseHead};
use std::ops::Range;

/// What every shard of a step reads.
pub struct StepInputs<'a> {
    pub layout: &'a Layout,
    pub dist: &'a ActionDist,
    pub params: &'a [f32],
    pub norm: Option<&'a ObsNorm>,
    pub mb: &'a Minibatch<'a>,
    /// 1 / the minibatch's samples in the loss.
    pub inv_m: f64,
}

/// Which rows of a minibatch a shard takes.
#[derive(Clone, Debug)]
pub enum Part {
    /// Minibatch rows `rows`, each read on its own.
    Rows(Range<usize>),
    /// Sequences `k` of the minibatch's `mb.sequences` (all `steps` steps
    /// of each): minibatch rows `t * count + k`, time-major.
    Sequences {
        k: Range<usize>,
        count: usize,
        steps: usize,
    },
}

impl Part {
    /// The minibatch rows it takes, in the order the network reads them.
    fn positions(&self, out: &mut Vec<usize>) {
        out.clear();
        match self {
            Part::Rows(r) => out.extend(r.clone()),
            Part::Sequences { k, count, steps } => {
                for t in 0..*steps {
                    out.extend(k.clone().map(|k| t * count + k));
                }
            }
        }
    }
}

/// A shard's buffers, reused from step to step.
pub struct Shard {
    pub work: Work,
    grad_work: Grads,
    /// This shard's share of the gradient, in layout order.
    pub grads: Vec<f32>,
    /// The loss terms of the last [`Shard::run`], summed over its rows.
    pub sums: LossTerms,
    d_logp: Vec<f64>,
    d_ent: Vec<f64>,
    zeros: Vec<f32>,
    /// The policy head at the allowed actions only, for mostly masked rows.
    sparse: SparseHead,
    /// Whether the last [`Shard::run`] took the sparse head.
    sparse_on: bool,
    /// The minibatch rows of the last [`Shard::run`], in order.
    positions: Vec<usize>,
    /// Their samples' indices in the update's data.
    idx: Vec<usize>,
    /// For sequences: where episodes start, each one's initial state, and
    /// in a game each row's mover.
    starts: Vec<u8>,
    state: Vec<f32>,
    movers: Vec<u8>,
}

impl Shard {
    /// Bytes its buffers hold: the gradient, the forward pass's activations
    /// and the backward pass's, sized by the largest minibatch so far.
    pub fn bytes(&self) -> usize {
        use sebulba_fused::conv::f32_bytes;
        let f64s = (self.d_logp.capacity() + self.d_ent.capacity()) * 8;
        self.work.bytes()
            + self.grad_work.bytes()
            + f32_bytes(&self.grads)
            + f32_bytes(&self.zeros)
            + self.sparse.bytes()
            + f64s
    }

    pub fn new(layout: &Layout) -> Self {
        let width = layout.head_dim;
        Self {
            work: Work::default(),
            grad_work: Grads::default(),
            grads: vec![0.0; layout.len],
            sums: LossTerms::default(),
            d_logp: vec![0.0; width],
            d_ent: vec![0.0; width],
            zeros: vec![0.0; width],
            sparse: SparseHead::default(),
            sparse_on: false,
            positions: Vec::new(),
            idx: Vec::new(),
            starts: Vec::new(),
            state: Vec::new(),
            movers: Vec::new(),
        }
    }

    /// Fills `work.x` with the (normalised or scaled) rows of `obs` (`[rows * obs_dim]`).
    pub fn load_rows(&mut self, layout: &Layout, norm: Option<&ObsNorm>, obs: &[f32]) {
        let d = layout.obs_dim;
        let rows = obs.len() / d;
        self.work.resize(layout, rows);
        self.work.x.copy_from_slice(&obs[..rows * d]);
        self.work
            .x
            .chunks_exact_mut(d)
            .for_each(|row| layout.input_row(norm, row));
    }

    /// Minibatch rows `part`: the forward pass, each sample's loss terms and
    /// their gradients at the heads, and the backward pass into `self.grads`
    /// (overwritten); the terms' sums into `self.sums`.
    pub fn run(&mut self, s: &StepInputs<'_>, part: Part) {
        let mb = s.mb;
        part.positions(&mut self.positions);
        let mut idx = std::mem::take(&mut self.idx);
        idx.clear();
        idx.extend(self.positions.iter().map(|&p| mb.idx[p]));
        self.gather_obs(s, &idx);
        if let Part::Sequences { k, .. } = &part {
            self.load_sequences(s, k.clone(), &idx);
        }
        self.run_rows(s, &idx);
        self.idx = idx;
    }

    /// The sequences `k` of the minibatch as the network reads them: where
    /// their episodes start (rows `idx`), and the states they start from.
    fn load_sequences(&mut self, s: &StepInputs<'_>, k: Range<usize>, idx: &[usize]) {
        let seqs =
            s.mb.data
                .sequences
                .as_ref()
                .expect("a minibatch of sequences is cut from data that keeps them");
        self.starts.clear();
        self.starts.extend(idx.iter().map(|&i| seqs.starts[i]));
        self.state.clear();
        for &q in &s.mb.sequences[k.clone()] {
            self.state.extend_from_slice(s.mb.states.row(q));
        }
        self.movers.clear();
        if let Some(g) = &seqs.seats {
            self.movers.extend(idx.iter().map(|&i| g.movers[i]));
        }
        let seats = seqs.seats_of(&self.movers);
        self.work
            .set_sequence(k.len(), &self.starts, &self.state, seats);
    }

    /// The step's passes over the rows loaded for samples `idx`.
    fn run_rows(&mut self, s: &StepInputs<'_>, idx: &[usize]) {
        let (layout, mb) = (s.layout, s.mb);
        let sparse = self.sparse_worth_it(s, idx);
        self.sparse_on = sparse;
        if sparse {
            sparse_head::forward(layout, s.params, &mut self.work, &self.sparse);
        } else {
            net::forward(layout, s.params, &mut self.work);
        }
        self.grad_work.resize(layout, idx.len());
        let mut sums = LossTerms::default();
        match mb.loss {
            Loss::Ppo { cfg, clip } => self.ppo_rows(s, (cfg, clip), idx, &mut sums),
            Loss::Q { huber_delta } => self.q_rows(s, idx, huber_delta, &mut sums),
        }
        self.sums = sums;
        backward::backward(
            layout,
            s.params,
            &mut self.grads,
            &self.work,
            &mut self.grad_work,
            sparse.then_some(&self.sparse),
        );
    }

    /// Whether samples `idx` take the sparse policy head: a PPO step on
    /// masked categorical rows that allow few enough actions
    /// ([`sebulba_fused::sparse_head::Allowed::worth_it`]); their allowed
    /// actions are then in `self.sparse`. DQN reads every Q-value: dense.
    fn sparse_worth_it(&mut self, s: &StepInputs<'_>, idx: &[usize]) -> bool {
        let (Loss::Ppo { .. }, ActionDist::Categorical { .. }, Some(masks)) =
            (&s.mb.loss, s.dist, &s.mb.data.masks)
        else {
            return false;
        };
        let hd = s.layout.head_dim;
        let allowed = &mut self.sparse.allowed;
        allowed.clear();
        idx.iter()
            .for_each(|&i| allowed.push_row(&masks[i * hd..(i + 1) * hd]));
        allowed.worth_it(hd)
    }

    /// The PPO loss terms of samples `idx` (minibatch rows
    /// `self.positions`) and their gradients at the heads.
    fn ppo_rows(
        &mut self,
        s: &StepInputs<'_>,
        (cfg, clip): (&PpoConfig, f64),
        idx: &[usize],
        sums: &mut LossTerms,
    ) {
        let hd = s.layout.head_dim;
        for (k, &i) in idx.iter().enumerate() {
            if !s.mb.data.trains(i) {
                // Read for its seat's sequence only: no loss, no gradient.
                self.grad_work.d_head[k * hd..(k + 1) * hd].fill(0.0);
                self.grad_work.d_value[k] = 0.0;
                continue;
            }
            let at = self.positions[k];
            let (eval, t) = self.sample_terms(s, (cfg, clip), (k, at, i));
            sums.policy_loss += t.policy;
            sums.value_loss += t.value;
            sums.entropy += eval.entropy;
            sums.approx_kl += t.approx_kl;
            sums.clip_fraction += f64::from(u8::from(t.clipped));
            // total = policy - ent_coef * entropy + vf_coef * value, each a mean.
            let d_head = &mut self.grad_work.d_head[k * hd..(k + 1) * hd];
            let d = |j: usize| {
                ((t.d_logp * self.d_logp[j] - cfg.ent_coef * self.d_ent[j]) * s.inv_m) as f32
            };
            if self.sparse_on {
                // The sparse head reads the allowed entries alone.
                for &j in self.sparse.allowed.row(k) {
                    d_head[j as usize] = d(j as usize);
                }
            } else {
                for (j, g) in d_head.iter_mut().enumerate() {
                    *g = d(j);
                }
            }
            self.grad_work.d_value[k] = (cfg.vf_coef * t.d_value * s.inv_m) as f32;
        }
    }

    /// The Q-learning loss of samples `idx` (DQN): the Huber loss of
    /// `Q(s, a) - y` (`y` in `data.returns`), its gradient at the taken
    /// action's output only; the value head gets none.
    fn q_rows(&mut self, s: &StepInputs<'_>, idx: &[usize], delta: f64, sums: &mut LossTerms) {
        let data = s.mb.data;
        let BatchActions::Discrete(actions) = &data.actions else {
            unreachable!("Q-learning runs on discrete actions only (config)");
        };
        let hd = s.layout.head_dim;
        for (k, &i) in idx.iter().enumerate() {
            let a = actions[i] as usize;
            let q = self.work.head[k * hd + a] as f64;
            let (loss, d_q) = heads::huber(q - data.returns[i] as f64, delta);
            sums.value_loss += loss;
            sums.q_mean += q;
            let d_head = &mut self.grad_work.d_head[k * hd..(k + 1) * hd];
            d_head.fill(0.0);
            d_head[a] = (d_q * s.inv_m) as f32;
            self.grad_work.d_value[k] = 0.0;
        }
    }

    /// Fills `work.x` with the (normalised or scaled) observations of samples `idx`.
    fn gather_obs(&mut self, s: &StepInputs<'_>, idx: &[usize]) {
        let data = s.mb.data;
        let d = data.obs_dim;
        self.work.resize(s.layout, idx.len());
        for (row, &i) in self.work.x.chunks_exact_mut(d).zip(idx) {
            data.observations.read(i * d, row);
            s.layout.input_row(s.norm, row);
        }
    }

    /// Sample `i`, row `k` of this shard and row `at` of the minibatch: its
    /// log-probability and entropy with their gradients (into `d_logp`,
    /// `d_ent`) and its PPO loss terms.
    fn sample_terms(
        &mut self,
        s: &StepInputs<'_>,
        (cfg, clip): (&PpoConfig, f64),
        (k, at, i): (usize, usize, usize),
    ) -> (heads::Eval, heads::Terms) {
        let (mb, hd) = (s.mb, s.layout.head_dim);
        let data = mb.data;
        let head = &self.work.head[k * hd..(k + 1) * hd];
        let eval = match (s.dist, &data.actions) {
            (ActionDist::Categorical { .. }, BatchActions::Discrete(a)) => {
                let support = match &data.masks {
                    _ if self.sparse_on => Support::List(self.sparse.allowed.row(k)),
                    Some(mk) => Support::Mask(&mk[i * hd..(i + 1) * hd]),
                    None => Support::All,
                };
                heads::categorical(
                    head,
                    a[i] as usize,
                    support,
                    &mut self.d_logp,
                    &mut self.d_ent,
                )
            }
            (
                ActionDist::TanhNormal {
                    squash, min_std, ..
                },
                BatchActions::Continuous(u),
            ) => {
                let w = hd / 2;
                // No noise given: the entropy estimate at the mean (as burn's path).
                let eps = match mb.noise.get(at * w..(at + 1) * w) {
                    Some(e) => e,
                    None => &self.zeros[..w],
                };
                heads::tanh_normal(
                    head,
                    &u[i * w..(i + 1) * w],
                    eps,
                    *min_std as f64,
                    squash,
                    cfg.gaussian_entropy,
                    &mut self.d_logp,
                    &mut self.d_ent,
                )
            }
            _ => unreachable!("update data is built for the run's action space"),
        };
        let terms = heads::ppo_terms(
            eval.logp,
            data.old_log_probs[i] as f64,
            mb.adv[at] as f64,
            self.work.value[k] as f64,
            data.returns[i] as f64,
            data.old_values[i] as f64,
            clip,
            cfg.clip_value_loss.then_some(cfg.value_clip_coef),
        );
        (eval, terms)
    }
}
