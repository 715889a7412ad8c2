//! The policy's state per env, and per seat in a game (each player remembers
//! its own moves only): zero at the start of every episode or game, carried
//! from step to step and across rollouts. A network without memory has
//! states of width 0, and stepping it costs what a stateless forward pass did.
//! A batch's initial states are the states at its first row, every seat's
//! in a game (whose first K rows are the previous batch's overlap: the
//! states before row T of the previous rollout, `Buffers::before_row`).

use sebulba_core::policy::{InferencePolicy, PolicyState};

pub(crate) struct SeatStates {
    /// `[E * seats]` states, env after env.
    states: PolicyState,
    seats: usize,
    /// The rows of `states` the current step reads.
    rows: Vec<usize>,
}

impl SeatStates {
    /// Zero states of `policy`'s width for `envs` envs of `seats` seats.
    pub(crate) fn new(policy: &InferencePolicy, envs: usize, seats: usize) -> Self {
        let seats = seats.max(1);
        Self {
            states: policy.state(envs * seats),
            seats,
            rows: Vec::with_capacity(envs),
        }
    }

    /// One step of `policy` for envs `envs` (every env when `None`; their
    /// observation rows in `obs`, in that order), each env's mover (its
    /// seat, `movers[e]`; none for one player) reading and moving on its own
    /// state. Returns the head rows in `envs`' order.
    pub(crate) fn step(
        &mut self,
        policy: &InferencePolicy,
        obs: &[f32],
        envs: Option<&[usize]>,
        movers: Option<&[i32]>,
        masks: Option<&[u8]>,
    ) -> Vec<f32> {
        let p = self.seats;
        if p == 1 && envs.is_none() {
            return policy.step(obs, &mut self.states, masks);
        }
        let seat = |e: usize| e * p + movers.map_or(0, |m| m[e] as usize % p);
        self.rows.clear();
        match envs {
            Some(envs) => self.rows.extend(envs.iter().map(|&e| seat(e))),
            None => self.rows.extend((0..self.states.envs() / p).map(seat)),
        }
        let mut part = self.states.select(self.rows.iter().copied());
        let head = policy.step(obs, &mut part, masks);
        self.states.put_back(&part, self.rows.iter().copied());
        head
    }

    /// Every env's (and seat's) state, env after env: what a batch carries
    /// as its initial states.
    pub(crate) fn values(&self) -> &[f32] {
        self.states.values()
    }

    /// Every env starts anew (a reset, a dropped rollout).
    pub(crate) fn end_all(&mut self) {
        let all = self.states.envs();
        for row in 0..all {
            self.states.reset(row);
        }
    }

    /// Env `e`'s episode or game ended: every seat starts anew.
    pub(crate) fn end(&mut self, e: usize) {
        for s in 0..self.seats {
            self.states.reset(e * self.seats + s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sebulba_core::config::NetworkConfig;
    use sebulba_core::devices::DeviceKind;

    #[test]
    fn a_step_over_every_env_or_some_seats_gives_each_its_own_head_row() {
        let env = sebulba_envs::env_spec("CartPole-v1").unwrap();
        let policy =
            InferencePolicy::new(&env, &NetworkConfig::default(), DeviceKind::Cpu).unwrap();
        let obs: Vec<f32> = (0..12).map(|i| i as f32 * 0.1 - 0.5).collect();
        let mut all = SeatStates::new(&policy, 3, 1);
        let whole = all.step(&policy, &obs, None, None, None);
        assert_eq!(whole.len(), 6);
        // Seats of a 2-player game, env 2 and env 0 moving: their rows.
        let mut seats = SeatStates::new(&policy, 3, 2);
        let some = seats.step(
            &policy,
            &[&obs[8..12], &obs[0..4]].concat(),
            Some(&[2, 0]),
            Some(&[1, 0, 0]),
            None,
        );
        assert_eq!(some, [&whole[4..6], &whole[0..2]].concat());
    }
}
