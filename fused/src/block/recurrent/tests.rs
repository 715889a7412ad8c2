//! The recurrent cores against a reference written from PyTorch's formulas
//! in f64, reading the parameters through the published tensors (their
//! names, shapes and orders): the forward pass over sequences with episode
//! starts inside and initial states, every gradient against the
//! reference's central differences, and acting step by step against the
//! sequence.

use crate::arch::{Activation, Arch, Cell, Core, torso_blocks};
use crate::backward::{self, Grads};
use crate::net::{self, Layout, Work};
use crate::tensors::param_tensors;
use crate::{FusedPolicy, PolicyState};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

const OBS: usize = 3;
const HEADS: usize = 2;

fn arch(cell: Cell, hidden: &[usize], size: usize, shared: bool) -> Arch {
    Arch {
        obs_dim: OBS,
        head_dim: HEADS,
        image: None,
        torso: torso_blocks(&[], &[], hidden, Some(Core { cell, size })),
        shared_torso: shared,
        activation: Activation::Tanh,
        obs_norm: false,
        obs_clip: 10.0,
        input_scale: 1.0,
    }
}

/// The network as PyTorch would run it, in f64, from the published
/// tensors: each one's flat indices, found by gathering the indices.
struct Reference {
    tensors: HashMap<String, (Vec<usize>, Vec<usize>)>,
    hidden: Vec<usize>,
    cell: Cell,
    size: usize,
    shared: bool,
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

impl Reference {
    fn new(layout: &Layout, cell: Cell, hidden: &[usize], size: usize, shared: bool) -> Self {
        let index: Vec<f32> = (0..layout.len).map(|i| i as f32).collect();
        let tensors = param_tensors(layout)
            .into_iter()
            .map(|t| {
                let at = t.gather(&index).iter().map(|&i| i as usize).collect();
                (t.name.clone(), (t.shape.clone(), at))
            })
            .collect();
        Self {
            tensors,
            hidden: hidden.to_vec(),
            cell,
            size,
            shared,
        }
    }

    /// Tensor `name`'s values in its own (PyTorch's) order, and its shape.
    fn t(&self, p: &[f64], name: &str) -> (Vec<usize>, Vec<f64>) {
        let (shape, at) = &self.tensors[name];
        (shape.clone(), at.iter().map(|&i| p[i]).collect())
    }

    /// `x W + b` with burn's `[d_in, d_out]` weight.
    fn linear(&self, p: &[f64], name: &str, x: &[f64]) -> Vec<f64> {
        let (shape, w) = self.t(p, &format!("{name}.weight"));
        let (_, b) = self.t(p, &format!("{name}.bias"));
        let (d_in, d_out) = (shape[0], shape[1]);
        (0..d_out)
            .map(|j| b[j] + (0..d_in).map(|i| x[i] * w[i * d_out + j]).sum::<f64>())
            .collect()
    }

    /// `W v` with PyTorch's `[rows, cols]` weight, plus `b`.
    fn affine(&self, p: &[f64], core: &str, which: &str, v: &[f64]) -> Vec<f64> {
        let (shape, w) = self.t(p, &format!("{core}.weight_{which}_l0"));
        let (_, b) = self.t(p, &format!("{core}.bias_{which}_l0"));
        let cols = shape[1];
        (0..shape[0])
            .map(|r| b[r] + (0..cols).map(|c| w[r * cols + c] * v[c]).sum::<f64>())
            .collect()
    }

    /// One torso's core step from `state` (h, then an LSTM's c), moved on in place.
    fn core_step(&self, p: &[f64], core: &str, x: &[f64], state: &mut [f64]) {
        let hs = self.size;
        let (h, c) = state.split_at_mut(hs);
        let gi = self.affine(p, core, "ih", x);
        let gh = self.affine(p, core, "hh", h);
        match self.cell {
            Cell::Lstm => {
                let a: Vec<f64> = gi.iter().zip(&gh).map(|(a, b)| a + b).collect();
                for j in 0..hs {
                    let (i, f) = (sigmoid(a[j]), sigmoid(a[hs + j]));
                    let (g, o) = (a[2 * hs + j].tanh(), sigmoid(a[3 * hs + j]));
                    c[j] = f * c[j] + i * g;
                    h[j] = o * c[j].tanh();
                }
            }
            Cell::Gru => {
                for j in 0..hs {
                    let r = sigmoid(gi[j] + gh[j]);
                    let z = sigmoid(gi[hs + j] + gh[hs + j]);
                    let n = (gi[2 * hs + j] + r * gh[2 * hs + j]).tanh();
                    h[j] = (1.0 - z) * n + z * h[j];
                }
            }
        }
    }

    /// A torso's output for one row, its core's state moved on.
    fn torso(&self, p: &[f64], name: &str, obs: &[f64], state: &mut [f64]) -> Vec<f64> {
        let mut x = obs.to_vec();
        for k in 0..self.hidden.len() {
            x = self.linear(p, &format!("{name}.layers.{k}"), &x);
            x.iter_mut().for_each(|v| *v = v.tanh());
        }
        self.core_step(p, &format!("{name}.core.0"), &x, state);
        state[..self.size].to_vec()
    }

    /// Heads and values of every row of the sequence: each row moving on
    /// its env's state, or in a game its mover's (`seats`: the players and
    /// each row's mover), every seat of an env zeroed where a game starts.
    fn run(
        &self,
        p: &[f64],
        obs: &[f64],
        seq: (usize, &[u8], &[f64]),
        seats: Seats,
    ) -> (Vec<f64>, Vec<f64>) {
        let (envs, starts, state) = seq;
        let players = seats.map_or(1, |s| s.0);
        let width = state.len() / (envs * players);
        let one = self.cell.carried() * self.size;
        let mut state = state.to_vec();
        let (mut heads, mut values) = (Vec::new(), Vec::new());
        for (row, x) in obs.chunks_exact(OBS).enumerate() {
            let e = row % envs;
            if starts.get(row).is_some_and(|&v| v != 0) {
                state[e * players * width..(e + 1) * players * width].fill(0.0);
            }
            let seat = seats.map_or(0, |s| s.1[row] as usize);
            let s = &mut state[(e * players + seat) * width..][..width];
            let (actor, critic) = s.split_at_mut(one);
            let ha = self.torso(p, "actor", x, actor);
            let hv = match self.shared {
                true => ha.clone(),
                false => self.torso(p, "critic", x, critic),
            };
            heads.extend(self.linear(p, "policy_head", &ha));
            values.extend(self.linear(p, "value_head", &hv));
        }
        (heads, values)
    }
}

/// A game's players and each row's mover; `None` for one player.
type Seats<'a> = Option<(usize, &'a [u8])>;

/// A sequence of `steps` steps of `envs` envs: observations, starts (some
/// inside the sequence when `resets`), initial states; in a game of
/// `players` seats (more than 1), each row's mover, drawn at random.
struct Case {
    envs: usize,
    obs: Vec<f32>,
    starts: Vec<u8>,
    state: Vec<f32>,
    players: usize,
    movers: Vec<u8>,
}

impl Case {
    fn seats(&self) -> Seats<'_> {
        (self.players > 1).then_some((self.players, &self.movers[..]))
    }
}

fn case(rng: &mut StdRng, layout: &Layout, (steps, envs): (usize, usize), resets: bool) -> Case {
    game_case(rng, layout, (steps, envs, 1), resets)
}

fn game_case(
    rng: &mut StdRng,
    layout: &Layout,
    (steps, envs, players): (usize, usize, usize),
    resets: bool,
) -> Case {
    let m = steps * envs;
    let obs = (0..m * OBS).map(|_| rng.random_range(-2.0..2.0)).collect();
    let starts = (0..m)
        .map(|_| u8::from(resets && rng.random_bool(0.2)))
        .collect();
    let state = (0..envs * players * layout.state_width)
        .map(|_| rng.random_range(-0.9..0.9))
        .collect();
    let movers = (0..m).map(|_| rng.random_range(0..players) as u8).collect();
    Case {
        envs,
        obs,
        starts,
        state,
        players,
        movers,
    }
}

fn params(rng: &mut StdRng, layout: &Layout) -> Vec<f32> {
    (0..layout.len)
        .map(|_| rng.random_range(-0.6..0.6))
        .collect()
}

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// The loss `Σ dh · head + Σ dv · value` and its gradient, through our
/// passes.
fn ours(layout: &Layout, p: &[f32], c: &Case, (dh, dv): (&[f32], &[f32])) -> (Work, Vec<f32>) {
    let m = c.starts.len();
    let mut work = Work::default();
    work.resize(layout, m);
    work.x.copy_from_slice(&c.obs);
    let seats = c
        .seats()
        .map(|(players, movers)| crate::Seats { players, movers });
    work.set_sequence(c.envs, &c.starts, &c.state, seats);
    net::forward(layout, p, &mut work);
    let mut grads = Grads::default();
    grads.resize(layout, m);
    grads.d_head.copy_from_slice(dh);
    grads.d_value.copy_from_slice(dv);
    let mut g = vec![f32::NAN; layout.len];
    backward::backward(layout, p, &mut g, &work, &mut grads, None);
    (work, g)
}

fn check(cell: Cell, hidden: &[usize], shared: bool, (steps, envs): (usize, usize), resets: bool) {
    check_game(cell, hidden, shared, (steps, envs, 1), resets);
}

fn check_game(
    cell: Cell,
    hidden: &[usize],
    shared: bool,
    (steps, envs, players): (usize, usize, usize),
    resets: bool,
) {
    let what = format!(
        "{cell:?} hidden {hidden:?} shared {shared} {steps}x{envs}x{players} resets {resets}"
    );
    let size = 4;
    let layout = Layout::new(&arch(cell, hidden, size, shared));
    let reference = Reference::new(&layout, cell, hidden, size, shared);
    let mut rng = StdRng::seed_from_u64(steps as u64 * 31 + envs as u64);
    let p = params(&mut rng, &layout);
    let c = game_case(&mut rng, &layout, (steps, envs, players), resets);
    let m = steps * envs;
    let dh: Vec<f32> = (0..m * HEADS)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let dv: Vec<f32> = (0..m).map(|_| rng.random_range(-1.0..1.0)).collect();
    let (work, g) = ours(&layout, &p, &c, (&dh, &dv));

    // Forward: every head and value as PyTorch's formulas give them.
    let (obs, state) = (f64s(&c.obs), f64s(&c.state));
    let seq = (envs, &c.starts[..], &state[..]);
    let (heads, values) = reference.run(&f64s(&p), &obs, seq, c.seats());
    for (k, (a, b)) in work.head.iter().zip(&heads).enumerate() {
        assert!((*a as f64 - b).abs() < 2e-5, "{what}: head {k}: {a} vs {b}");
    }
    for (k, (a, b)) in work.value.iter().zip(&values).enumerate() {
        assert!(
            (*a as f64 - b).abs() < 2e-5,
            "{what}: value {k}: {a} vs {b}"
        );
    }

    // Backward: every parameter's gradient against central differences.
    let loss = |p: &[f64]| {
        let (h, v) = reference.run(p, &obs, seq, c.seats());
        let a: f64 = h.iter().zip(&dh).map(|(h, &d)| h * d as f64).sum();
        a + v.iter().zip(&dv).map(|(v, &d)| v * d as f64).sum::<f64>()
    };
    let mut p64 = f64s(&p);
    let eps = 1e-6;
    for i in 0..layout.len {
        let x = p64[i];
        p64[i] = x + eps;
        let up = loss(&p64);
        p64[i] = x - eps;
        let down = loss(&p64);
        p64[i] = x;
        let numeric = (up - down) / (2.0 * eps);
        let tol = 1e-4 * (1.0 + numeric.abs());
        assert!(
            (g[i] as f64 - numeric).abs() < tol,
            "{what}: parameter {i}: {} vs {numeric}",
            g[i]
        );
    }
}

#[test]
fn the_lstm_matches_pytorchs_formulas_forward_and_back() {
    for shared in [true, false] {
        check(Cell::Lstm, &[5], shared, (6, 3), true);
        check(Cell::Lstm, &[], shared, (1, 2), false);
        check(Cell::Lstm, &[5, 3], shared, (24, 2), true);
    }
    check(Cell::Lstm, &[5], true, (24, 2), false);
}

#[test]
fn the_gru_matches_pytorchs_formulas_forward_and_back() {
    for shared in [true, false] {
        check(Cell::Gru, &[5], shared, (6, 3), true);
        check(Cell::Gru, &[], shared, (1, 2), false);
        check(Cell::Gru, &[5, 3], shared, (24, 2), true);
    }
    check(Cell::Gru, &[5], true, (24, 2), false);
}

/// A game's sequence: each row moves on its mover's state only, a game's
/// start zeroes every seat of its env, and the gradients go back seat by
/// seat (movers drawn at random, so a seat may move twice in a row or not
/// for many steps).
#[test]
fn each_seat_of_a_game_remembers_its_own_moves_forward_and_back() {
    for cell in [Cell::Lstm, Cell::Gru] {
        check_game(cell, &[5], true, (12, 3, 4), true);
        check_game(cell, &[5], false, (9, 2, 2), true);
        check_game(cell, &[], true, (16, 2, 3), false);
    }
}

/// An episode's start cuts the sequence: what came before it changes
/// nothing after it, forward or back.
#[test]
fn nothing_crosses_an_episodes_start() {
    for cell in [Cell::Lstm, Cell::Gru] {
        let layout = Layout::new(&arch(cell, &[5], 4, false));
        let mut rng = StdRng::seed_from_u64(7);
        let p = params(&mut rng, &layout);
        let (steps, envs) = (8, 2);
        let mut c = case(&mut rng, &layout, (steps, envs), false);
        c.starts[4 * envs] = 1; // env 0's episode starts at step 4
        let m = steps * envs;
        // A loss on env 0's rows from step 4 on only.
        let mut dh = vec![0.0; m * HEADS];
        let mut dv = vec![0.0; m];
        for t in 4..steps {
            dh[t * envs * HEADS] = 1.0;
            dv[t * envs] = -0.5;
        }
        let (work, g) = ours(&layout, &p, &c, (&dh, &dv));
        // Other observations and states before the start: the same outputs
        // from step 4 on, the same gradient.
        let mut other = Case {
            obs: c.obs.clone(),
            starts: c.starts.clone(),
            state: c.state.iter().map(|v| -v).collect(),
            movers: c.movers.clone(),
            ..c
        };
        for t in 0..4 {
            other.obs[t * envs * OBS..(t * envs + 1) * OBS].fill(1.5);
        }
        let (work2, g2) = ours(&layout, &p, &other, (&dh, &dv));
        for t in 4..steps {
            let r = t * envs;
            assert_eq!(
                work.head[r * HEADS..(r + 1) * HEADS],
                work2.head[r * HEADS..(r + 1) * HEADS]
            );
            assert_eq!(work.value[r], work2.value[r]);
        }
        assert_eq!(g, g2, "{cell:?}");
    }
}

/// Acting one step at a time, with the state zeroed at each episode's start
/// as actors do, gives the sequence's outputs and ends in its final state,
/// both torsos' parts.
#[test]
fn acting_step_by_step_is_the_sequence() {
    for (cell, shared) in [(Cell::Lstm, false), (Cell::Gru, true), (Cell::Lstm, true)] {
        let a = arch(cell, &[5], 4, shared);
        let layout = Layout::new(&a);
        let mut rng = StdRng::seed_from_u64(11);
        let p = params(&mut rng, &layout);
        let (steps, envs) = (10, 3);
        let c = case(&mut rng, &layout, (steps, envs), true);
        let m = steps * envs;
        let mut work = Work::default();
        work.resize(&layout, m);
        work.x.copy_from_slice(&c.obs);
        work.set_sequence(envs, &c.starts, &c.state, None);
        net::forward(&layout, &p, &mut work);
        let mut end = vec![0.0; envs * layout.state_width];
        net::final_state(&layout, &work, &mut end);

        let policy = FusedPolicy::new(&a, p.clone(), None).unwrap();
        let mut state =
            PolicyState::from_values(layout.state_width, envs, c.state.clone()).unwrap();
        // With the value head too (what an export is checked against).
        let mut evaluated = state.clone();
        for t in 0..steps {
            let rows = t * envs..(t + 1) * envs;
            state.reset_ended(c.starts[rows.clone()].iter().map(|&s| s != 0));
            evaluated.reset_ended(c.starts[rows.clone()].iter().map(|&s| s != 0));
            let obs = &c.obs[rows.start * OBS..rows.end * OBS];
            let head = policy.step(obs, &mut state, None);
            let (head_too, values) = policy.step_evaluated(obs, &mut evaluated);
            assert_eq!(head, head_too, "{cell:?} step {t}");
            for (e, (a, b)) in values.iter().zip(&work.value[rows.clone()]).enumerate() {
                assert!(
                    (a - b).abs() < 1e-6,
                    "{cell:?} step {t} value of env {e}: {a} vs {b}"
                );
            }
            for (k, (a, b)) in head
                .iter()
                .zip(&work.head[rows.start * HEADS..])
                .enumerate()
            {
                assert!(
                    (a - b).abs() < 1e-6,
                    "{cell:?} step {t} head {k}: {a} vs {b}"
                );
            }
        }
        for (k, (a, b)) in state.values().iter().zip(&end).enumerate() {
            assert!(
                (a - b).abs() < 1e-6,
                "{cell:?} shared {shared}: state {k}: {a} vs {b}"
            );
        }
        assert_eq!(
            state.values(),
            evaluated.values(),
            "{cell:?} shared {shared}"
        );
    }
}

/// PyTorch's names and shapes, `[gates * size, d_in]` weights.
#[test]
fn the_cores_tensors_are_pytorchs() {
    let layout = Layout::new(&arch(Cell::Lstm, &[5], 4, true));
    let names: Vec<(String, Vec<usize>)> = param_tensors(&layout)
        .into_iter()
        .map(|t| (t.name, t.shape))
        .collect();
    let core: Vec<_> = names.iter().filter(|(n, _)| n.contains(".core.")).collect();
    assert_eq!(
        core,
        [
            &("actor.core.0.weight_ih_l0".to_string(), vec![16, 5]),
            &("actor.core.0.weight_hh_l0".to_string(), vec![16, 4]),
            &("actor.core.0.bias_ih_l0".to_string(), vec![16]),
            &("actor.core.0.bias_hh_l0".to_string(), vec![16]),
        ]
    );
    let gru = Layout::new(&arch(Cell::Gru, &[], 6, false));
    assert_eq!(gru.state_width, 12, "one h per torso");
    let t = param_tensors(&gru);
    assert_eq!(
        (t[0].name.as_str(), &t[0].shape[..]),
        ("actor.core.0.weight_ih_l0", &[18, OBS][..])
    );
    assert!(
        Layout::try_new(&Arch {
            image: Some([1, 1, 3]),
            ..arch(Cell::Gru, &[], 6, true)
        })
        .is_err_and(|e| e.reason.contains("dense layer"))
    );
}
