//! DQN's replay memory: the last `capacity` transitions `(s, a, r, s', done)`
//! of every batch taken, overwritten oldest first. `s'` is the true next
//! observation: the next row of the batch, or at a truncation the true final
//! observation the actor sent (the next row then holds the reset observation).
//! `done` is termination only: a truncated step bootstraps from `s'`.
//! Memory grows with what is stored, up to the capacity, not up front.
//! Observations are kept in the batches' dtype (an image of bytes as bytes)
//! and widened as transitions are drawn.

use crate::trajectory::{BatchActions, Trajectory};
use rand::Rng;
use sebulba_envs::Observations;

pub struct Replay {
    obs_dim: usize,
    capacity: usize,
    obs: Observations,
    next_obs: Observations,
    actions: Vec<i32>,
    rewards: Vec<f32>,
    terminated: Vec<u8>,
    /// Where the next transition goes once the memory is full.
    next: usize,
}

/// Sampled transitions, flat: `obs` and `next_obs` are `[n * obs_dim]`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Transitions {
    pub obs: Vec<f32>,
    pub next_obs: Vec<f32>,
    pub actions: Vec<i32>,
    pub rewards: Vec<f32>,
    pub terminated: Vec<u8>,
}

impl Transitions {
    pub fn len(&self) -> usize {
        self.actions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

impl Replay {
    /// An empty memory of at most `capacity` transitions (at least 1).
    pub fn new(capacity: usize, obs_dim: usize) -> Self {
        Self {
            obs_dim,
            capacity: capacity.max(1),
            obs: Observations::default(),
            next_obs: Observations::default(),
            actions: Vec::new(),
            rewards: Vec::new(),
            terminated: Vec::new(),
            next: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.actions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// Bytes the stored transitions take (observations in their own dtype);
    /// at most `capacity` transitions' worth (`dqn.buffer_size`).
    pub fn bytes(&self) -> usize {
        let per = std::mem::size_of::<i32>() + std::mem::size_of::<f32>() + 1;
        self.obs.bytes() + self.next_obs.bytes() + self.len() * per
    }

    /// Stores batch `b`'s T x E transitions in (t, e) order; returns how many
    /// (0 for continuous actions, which DQN's config refuses).
    pub fn push_batch(&mut self, b: &Trajectory) -> usize {
        let BatchActions::Discrete(actions) = &b.actions else {
            return 0;
        };
        let (e_len, d) = (b.envs_per_actor, self.obs_dim);
        if self.is_empty() {
            let dtype = b.observations.dtype();
            self.obs = Observations::with_capacity(dtype, 0);
            self.next_obs = Observations::with_capacity(dtype, 0);
        }
        let mut finals = 0;
        for (i, &action) in actions.iter().enumerate().take(b.rollout_length * e_len) {
            let next = if b.truncated[i] != 0 {
                finals += 1;
                (&b.final_observations, (finals - 1) * d)
            } else {
                (&b.observations, (i + e_len) * d)
            };
            let t = Transition {
                obs: (&b.observations, i * d),
                next_obs: next,
                action,
                reward: b.rewards[i],
                terminated: b.terminated[i],
            };
            self.push(&t);
        }
        b.rollout_length * e_len
    }

    fn push(&mut self, t: &Transition<'_>) {
        let d = self.obs_dim;
        let ((obs, o), (next, n)) = (t.obs, t.next_obs);
        if self.len() < self.capacity {
            self.obs.extend_from(obs, o..o + d);
            self.next_obs.extend_from(next, n..n + d);
            self.actions.push(t.action);
            self.rewards.push(t.reward);
            self.terminated.push(t.terminated);
            return;
        }
        let j = self.next;
        self.obs.copy_from(j * d, obs, o..o + d);
        self.next_obs.copy_from(j * d, next, n..n + d);
        self.actions[j] = t.action;
        self.rewards[j] = t.reward;
        self.terminated[j] = t.terminated;
        self.next = (j + 1) % self.capacity;
    }

    /// `n` transitions drawn uniformly with replacement into `out`
    /// (cleared first); nothing when the memory is empty.
    pub fn sample<R: Rng + ?Sized>(&self, n: usize, rng: &mut R, out: &mut Transitions) {
        out.obs.clear();
        out.next_obs.clear();
        out.actions.clear();
        out.rewards.clear();
        out.terminated.clear();
        if self.is_empty() {
            return;
        }
        for _ in 0..n {
            let i = rng.random_range(0..self.len());
            self.copy_to(i, out);
        }
    }

    /// Transition `i` (0 = the oldest slot written) appended to `out`.
    pub fn copy_to(&self, i: usize, out: &mut Transitions) {
        let d = self.obs_dim;
        self.obs.extend_f32(i * d..(i + 1) * d, &mut out.obs);
        self.next_obs
            .extend_f32(i * d..(i + 1) * d, &mut out.next_obs);
        out.actions.push(self.actions[i]);
        out.rewards.push(self.rewards[i]);
        out.terminated.push(self.terminated[i]);
    }
}

/// A transition's observations as rows of the batch's arrays: (array,
/// offset of the row).
struct Transition<'a> {
    obs: (&'a Observations, usize),
    next_obs: (&'a Observations, usize),
    action: i32,
    reward: f32,
    terminated: u8,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::TrajectoryBuilder;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    /// T = 2 steps of E = 2 envs, obs_dim 1; observation row k holds 10 * k.
    /// Env 0 terminates at t = 0; env 1 is truncated at t = 1 with true final
    /// observation 99.
    fn batch() -> Trajectory {
        TrajectoryBuilder::new(2, 2, 1)
            .observations(vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0])
            .discrete(vec![1, 2, 0, 1])
            .rewards(vec![-1.0, -2.0, -3.0, -4.0])
            .terminate(0)
            .truncate(3, vec![99.0])
            .build()
    }

    fn all(r: &Replay) -> Transitions {
        let mut out = Transitions::default();
        (0..r.len()).for_each(|i| r.copy_to(i, &mut out));
        out
    }

    #[test]
    fn next_observations_are_the_true_ones() {
        let mut r = Replay::new(10, 1);
        assert_eq!(r.push_batch(&batch()), 4);
        let t = all(&r);
        assert_eq!(t.obs, vec![0.0, 10.0, 20.0, 30.0]);
        // (0, 0) terminated: the next row (the reset obs, masked by `done`);
        // (1, 1) truncated: the true final observation, not the reset row 50.
        assert_eq!(t.next_obs, vec![20.0, 30.0, 40.0, 99.0]);
        assert_eq!(t.actions, vec![1, 2, 0, 1]);
        assert_eq!(t.rewards, vec![-1.0, -2.0, -3.0, -4.0]);
        // Truncation is not termination.
        assert_eq!(t.terminated, vec![1, 0, 0, 0]);
    }

    /// A byte env's transitions stay bytes in the memory (a quarter of
    /// f32's) and are drawn as the same numbers.
    #[test]
    fn byte_observations_are_kept_as_bytes() {
        let mut bytes = batch();
        bytes.observations = Observations::U8(vec![0, 10, 20, 30, 40, 50]);
        bytes.final_observations = Observations::U8(vec![99]);
        let mut r = Replay::new(6, 1);
        r.push_batch(&bytes);
        r.push_batch(&bytes);
        assert_eq!((r.obs.bytes(), r.next_obs.bytes()), (6, 6));
        let mut floats = Replay::new(6, 1);
        floats.push_batch(&batch());
        floats.push_batch(&batch());
        assert_eq!(all(&r), all(&floats));
    }

    #[test]
    fn a_full_memory_overwrites_the_oldest() {
        let mut r = Replay::new(6, 1);
        r.push_batch(&batch());
        r.push_batch(&batch());
        assert_eq!(r.len(), 6);
        // Slots 0 and 1 now hold the second batch's last two transitions.
        let t = all(&r);
        assert_eq!(t.obs, vec![20.0, 30.0, 20.0, 30.0, 0.0, 10.0]);
        assert_eq!(t.next_obs, vec![40.0, 99.0, 40.0, 99.0, 20.0, 30.0]);
    }

    #[test]
    fn sampling_draws_stored_transitions() {
        let mut r = Replay::new(10, 1);
        let mut rng = StdRng::seed_from_u64(1);
        let mut out = Transitions::default();
        r.sample(5, &mut rng, &mut out);
        assert!(out.is_empty());
        r.push_batch(&batch());
        r.sample(64, &mut rng, &mut out);
        assert_eq!(out.len(), 64);
        for k in 0..64 {
            let i = (out.obs[k] / 10.0) as usize;
            assert_eq!(out.actions[k], [1, 2, 0, 1][i]);
            assert_eq!(out.next_obs[k], [20.0, 30.0, 40.0, 99.0][i]);
        }
        // Every transition turns up.
        for want in [0.0, 10.0, 20.0, 30.0] {
            assert!(out.obs.contains(&want), "{want} never drawn");
        }
    }
}
