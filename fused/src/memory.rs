//! What a policy remembers between steps, and how its data is cut for an
//! update. A network whose blocks remember nothing (every network today)
//! has a state of width 0: an empty state that costs nothing and rows that
//! can be shuffled one by one. A recurrent core gives the state a width,
//! and then an update must read whole env sequences from their initial
//! state: [`Arch::batching`] says which, once, so that no algorithm
//! branches on the network.

use crate::Arch;

/// Each env's state, `[envs * width]` f32: zero at the start of every
/// episode, carried from step to step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyState {
    width: usize,
    envs: usize,
    values: Vec<f32>,
}

impl PolicyState {
    /// `envs` zero states of `width` floats each.
    pub fn zeros(width: usize, envs: usize) -> Self {
        Self {
            width,
            envs,
            values: vec![0.0; width * envs],
        }
    }

    /// `envs` states read from `values` (`[envs * width]`).
    pub fn from_values(width: usize, envs: usize, values: Vec<f32>) -> Option<Self> {
        (values.len() == width * envs).then_some(Self {
            width,
            envs,
            values,
        })
    }

    /// Floats per env (0 for a network without memory).
    pub fn width(&self) -> usize {
        self.width
    }

    pub fn envs(&self) -> usize {
        self.envs
    }

    /// Every env's state, env after env.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    pub fn values_mut(&mut self) -> &mut [f32] {
        &mut self.values
    }

    /// Env `e`'s state.
    pub fn row(&self, e: usize) -> &[f32] {
        &self.values[e * self.width..(e + 1) * self.width]
    }

    /// Env `e` starts a new episode: its state is zero again.
    pub fn reset(&mut self, e: usize) {
        let w = self.width;
        self.values[e * w..(e + 1) * w].fill(0.0);
    }

    /// Every env whose episode ended (`ended[e]`) starts anew.
    pub fn reset_ended(&mut self, ended: impl IntoIterator<Item = bool>) {
        for (e, end) in ended.into_iter().enumerate().take(self.envs) {
            if end {
                self.reset(e);
            }
        }
    }

    /// The states of envs `envs`, in that order: a step over some of the
    /// envs (the evaluator's unfinished episodes, a game's movers).
    pub fn select(&self, envs: impl Iterator<Item = usize>) -> Self {
        let mut values = Vec::new();
        let mut n = 0;
        for e in envs {
            values.extend_from_slice(self.row(e));
            n += 1;
        }
        Self {
            width: self.width,
            envs: n,
            values,
        }
    }

    /// Appends the states of `more` (of the same width) after these.
    pub fn extend(&mut self, more: &Self) {
        debug_assert_eq!(self.width, more.width, "states of another network");
        self.values.extend_from_slice(&more.values);
        self.envs += more.envs;
    }

    /// Writes `part` (made by [`Self::select`] over the same `envs`) back.
    pub fn put_back(&mut self, part: &Self, envs: impl Iterator<Item = usize>) {
        let w = self.width;
        for (k, e) in envs.enumerate().take(part.envs) {
            self.values[e * w..(e + 1) * w].copy_from_slice(part.row(k));
        }
    }
}

/// Observation rows as a network reads them at an update: the rows of a
/// [`Sequence`] first when there is one, then rows each read on its own
/// (the final observations of cut episodes, a game's overlap rows), each
/// continuing the sequence's row that [`Sequence::continues`] names. A
/// network without memory reads every row on its own, so rows of any
/// origin (a replay memory's draws) are [`Steps::rows`].
#[derive(Clone, Copy, Debug)]
pub struct Steps<'a> {
    /// `[rows * obs_dim]`.
    pub obs: &'a [f32],
    pub sequence: Option<Sequence<'a>>,
}

/// `steps` steps of `envs` envs, time-major: each env's state before the
/// first step, and a 1 in `starts` (`[steps * envs]`) where an env's
/// episode starts at that step (its state zeroed first).
#[derive(Clone, Copy, Debug)]
pub struct Sequence<'a> {
    pub steps: usize,
    pub envs: usize,
    pub starts: &'a [u8],
    pub state: &'a PolicyState,
    /// For the rows after the sequence's, in order: the sequence row each
    /// continues (a cut episode's final observation is read with the state
    /// after its env's last step, row `t * envs + e`). A row past its end
    /// is read from a zero state.
    pub continues: &'a [usize],
    /// A turn-based game's movers: each row reads and moves on its
    /// mover's state only; `None`: each row its env's.
    pub seats: Option<Seats<'a>>,
}

/// Whose move each row of a game's sequence is. Each seat remembers its
/// own moves only, so row `t * envs + e` reads and moves on the state of
/// lane `e * players + movers[t * envs + e]`, and a start at row `(t, e)`
/// zeroes every seat of env `e` (a new game). The sequence's `state` then
/// holds each env's seats' states one after another: an env's state is
/// `players` times the network's ([`PolicyState::width`]), as the actor
/// keeps them.
#[derive(Clone, Copy, Debug)]
pub struct Seats<'a> {
    pub players: usize,
    /// `[steps * envs]` the seat to move at each row.
    pub movers: &'a [u8],
}

impl Sequence<'_> {
    /// Lanes per env: the players of a game, else 1.
    pub fn players(&self) -> usize {
        self.seats.map_or(1, |s| s.players)
    }
}

impl<'a> Steps<'a> {
    /// Rows read each on its own.
    pub fn rows(obs: &'a [f32]) -> Self {
        Self {
            obs,
            sequence: None,
        }
    }

    /// The first `steps * envs` rows of `obs` as a sequence.
    pub fn sequence(obs: &'a [f32], sequence: Sequence<'a>) -> Self {
        Self {
            obs,
            sequence: Some(sequence),
        }
    }
}

/// How an update's data is cut into minibatches: what the network needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batching {
    /// Any rows in any order: a network without memory reads each row on
    /// its own (today's shuffling).
    Rows,
    /// Whole env sequences, each from its initial state (of `width` floats
    /// per env), read in time order: a network with memory.
    Sequences { width: usize },
}

impl Arch {
    /// Floats each env's state holds: what the blocks of every torso
    /// remember between steps.
    pub fn state_width(&self) -> usize {
        let torsos = if self.shared_torso { 1 } else { 2 };
        torsos * self.torso.iter().map(|b| b.state_width()).sum::<usize>()
    }

    /// How an update's data must be cut for this network.
    pub fn batching(&self) -> Batching {
        match self.state_width() {
            0 => Batching::Rows,
            width => Batching::Sequences { width },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_resets_selects_and_puts_back_by_env() {
        let values: Vec<f32> = (1..=8).map(|v| v as f32).collect();
        let mut s = PolicyState::from_values(2, 4, values).unwrap();
        assert!(PolicyState::from_values(2, 4, vec![0.0; 7]).is_none());
        s.reset_ended([false, true, false, false]);
        assert_eq!(s.values(), &[1.0, 2.0, 0.0, 0.0, 5.0, 6.0, 7.0, 8.0]);
        let mut part = s.select([3, 0].into_iter());
        assert_eq!(part.values(), &[7.0, 8.0, 1.0, 2.0]);
        part.values_mut()[0] = -7.0;
        part.reset(1);
        s.put_back(&part, [3, 0].into_iter());
        assert_eq!(s.values(), &[0.0, 0.0, 0.0, 0.0, 5.0, 6.0, -7.0, 8.0]);
        // Without memory: nothing to hold, whatever the envs.
        let mut empty = PolicyState::zeros(0, 64);
        empty.reset_ended([true; 64]);
        assert!(empty.values().is_empty() && empty.select(0..64).envs() == 64);
    }
}
