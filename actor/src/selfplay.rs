//! Self-play against past selves (`selfplay.past_fraction`): which seats of
//! each game a past version plays, the second forward pass that acts for
//! them, and the `past_moves` flags that keep their moves out of training.
//!
//! At each game's start one seat, drawn at random, is the newest version's;
//! every other seat is a past version's with probability `past_fraction`,
//! so no game is played by the past alone. A past seat stays past for the
//! whole game. The past version itself is drawn from the pool at each
//! rollout's start, so a game that spans rollouts may meet two of them.

use crate::pool::Pool;
use rand::Rng;
use rand::rngs::StdRng;
use sebulba_core::policy::InferencePolicy;
use sebulba_proto::{Tensor, encode_u8};
use tokio::sync::watch;
use tracing::warn;

pub(crate) struct SelfPlay {
    fraction: f64,
    players: usize,
    e_len: usize,
    /// `[E * P]`: seat s of env e's current game is a past version's.
    past_seats: Vec<bool>,
    /// `[rows * E]`: 1 where a past version made the row's move.
    flags: Vec<u8>,
    /// The past version acting now (none loaded while the pool is empty).
    policy: InferencePolicy,
    pool: watch::Receiver<Pool>,
    /// Gathered observations of the past seats to move, and their envs.
    obs: Vec<f32>,
    envs: Vec<usize>,
}

impl SelfPlay {
    pub(crate) fn new(
        fraction: f64,
        (players, e_len, rows): (usize, usize, usize),
        policy: InferencePolicy,
        pool: watch::Receiver<Pool>,
    ) -> Self {
        Self {
            fraction,
            players,
            e_len,
            past_seats: vec![false; e_len * players],
            flags: vec![0; rows * e_len],
            policy,
            pool,
            obs: Vec::new(),
            envs: Vec::new(),
        }
    }

    /// At a rollout's start: draws the past version to act with from the
    /// pool (the one loaded stays if the draw cannot be loaded).
    pub(crate) fn draw(&mut self, rng: &mut StdRng) {
        let pool = self.pool.borrow().clone();
        if pool.is_empty() {
            return;
        }
        let w = &pool[rng.random_range(0..pool.len())];
        if self.policy.version() == Some(w.version) {
            return;
        }
        if let Err(e) = self.policy.load(w.version, w.safetensors.to_vec()) {
            warn!(version = w.version, "could not load a past version: {e}");
        }
    }

    /// Seats env `e`'s new game: one seat the newest version's, each other
    /// a past version's with probability `past_fraction` (none while no past
    /// version is loaded).
    pub(crate) fn new_game(&mut self, e: usize, rng: &mut StdRng) {
        let p = self.players;
        let newest = rng.random_range(0..p);
        let loaded = self.policy.version().is_some();
        for (s, past) in self.past_seats[e * p..(e + 1) * p].iter_mut().enumerate() {
            *past = loaded && s != newest && rng.random_bool(self.fraction);
        }
    }

    /// Every env starts a new game (after a reset).
    pub(crate) fn new_games(&mut self, rng: &mut StdRng) {
        for e in 0..self.e_len {
            self.new_game(e, rng);
        }
    }

    /// Row `t`'s moves: flags those of past seats (`movers`: the seat to
    /// move in each env) and overwrites their rows of `head` (`[E * width]`)
    /// with the past version's outputs for `obs` (`[E * obs_dim]`).
    pub(crate) fn act(&mut self, t: usize, movers: &[i32], obs: &[f32], head: &mut [f32]) {
        let (e_len, p) = (self.e_len, self.players);
        let d = obs.len() / e_len.max(1);
        self.envs.clear();
        self.obs.clear();
        for (e, &m) in movers.iter().enumerate() {
            let past = self.past_seats[e * p + m as usize % p];
            self.flags[t * e_len + e] = u8::from(past);
            if past {
                self.envs.push(e);
                self.obs.extend_from_slice(&obs[e * d..(e + 1) * d]);
            }
        }
        if self.envs.is_empty() {
            return;
        }
        let width = head.len() / e_len.max(1);
        let past_head = self.policy.head(&self.obs, self.envs.len());
        for (i, &e) in self.envs.iter().enumerate() {
            head[e * width..(e + 1) * width]
                .copy_from_slice(&past_head[i * width..(i + 1) * width]);
        }
    }

    /// Rows `from..` to the front (a game's carried overlap).
    pub(crate) fn shift(&mut self, from: usize) {
        crate::turns::shift_rows(&mut self.flags, from, self.e_len);
    }

    /// The batch's `past_moves` tensor, `[rows, E]`.
    pub(crate) fn encode(&self) -> Tensor {
        encode_u8(&[self.flags.len() / self.e_len, self.e_len], &self.flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use sebulba_core::config::NetworkConfig;
    use sebulba_core::devices::DeviceKind;
    use sebulba_core::model::ModelSpec;
    use sebulba_envs::{EnvSpec, env_spec};
    use sebulba_proto::Weights;
    use std::sync::Arc;

    fn nim() -> (EnvSpec, NetworkConfig) {
        let net = NetworkConfig {
            hidden: vec![8],
            ..Default::default()
        };
        (env_spec("Nim-v0").expect("Nim"), net)
    }

    /// A pool of one version, 7, of a freshly initialised network.
    fn pool_of_one(env: &EnvSpec, net: &NetworkConfig) -> Pool {
        let spec = ModelSpec::new(env, net).unwrap();
        let model = spec.init::<sebulba_core::CpuBackend>(&Default::default());
        let bytes = sebulba_core::weights::to_safetensors(&model, &spec).expect("bytes");
        Arc::new(vec![Arc::new(Weights {
            version: 7,
            safetensors: bytes.into(),
            ..Default::default()
        })])
    }

    fn selfplay(fraction: f64, pool: Pool, e_len: usize) -> SelfPlay {
        let (env, net) = nim();
        let policy = InferencePolicy::new(&env, &net, DeviceKind::Cpu).expect("policy");
        let (_tx, rx) = watch::channel(pool);
        SelfPlay::new(fraction, (2, e_len, 3), policy, rx)
    }

    #[test]
    fn one_seat_of_every_game_is_the_newest_and_the_others_past_as_drawn() {
        let (env, net) = nim();
        let mut rng = StdRng::seed_from_u64(1);
        // Nothing loaded yet: no past seat.
        let mut sp = selfplay(1.0, Pool::default(), 64);
        sp.draw(&mut rng);
        sp.new_games(&mut rng);
        assert!(sp.past_seats.iter().all(|&p| !p));
        // Fraction 1 with two seats: exactly one past seat per game, and
        // either seat may be it.
        let mut sp = selfplay(1.0, pool_of_one(&env, &net), 64);
        sp.draw(&mut rng);
        assert_eq!(sp.policy.version(), Some(7));
        sp.new_games(&mut rng);
        for game in sp.past_seats.chunks(2) {
            assert_eq!(game.iter().filter(|&&p| p).count(), 1, "{game:?}");
        }
        let first_past = sp.past_seats.chunks(2).filter(|g| g[0]).count();
        assert!((10..=54).contains(&first_past), "{first_past} of 64");
        // Fraction 0: none.
        let mut sp = selfplay(0.0, pool_of_one(&env, &net), 64);
        sp.draw(&mut rng);
        sp.new_games(&mut rng);
        assert!(sp.past_seats.iter().all(|&p| !p));
    }

    #[test]
    fn past_seats_act_with_the_past_version_and_are_flagged() {
        let (env, net) = nim();
        let pool = pool_of_one(&env, &net);
        let mut sp = selfplay(1.0, pool.clone(), 2);
        let mut rng = StdRng::seed_from_u64(2);
        sp.draw(&mut rng);
        // Env 0: seat 1 is past; env 1: seat 0 is past.
        sp.past_seats = vec![false, true, true, false];
        let d = env.obs_dim;
        let obs: Vec<f32> = (0..2 * d).map(|i| (i % 5) as f32 * 0.25).collect();
        let width = env.action_space.dim();
        let mut head = vec![9.0; 2 * width];
        // Row 1: seat 1 moves in env 0 (past), seat 1 in env 1 (newest).
        sp.act(1, &[1, 1], &obs, &mut head);
        let mut past = InferencePolicy::new(&env, &net, DeviceKind::Cpu).expect("policy");
        past.load(7, pool[0].safetensors.to_vec()).expect("load");
        let expected = past.head(&obs[..d], 1);
        assert_eq!(head[..width], expected[..]);
        assert!(head[width..].iter().all(|&x| x == 9.0), "env 1 untouched");
        assert_eq!(sp.flags[2..4], [1, 0]);
        sp.shift(1);
        assert_eq!(sp.flags[..2], [1, 0], "row 1 carried to the front");
        let t = sp.encode();
        assert_eq!(t.shape, [3, 2]);
    }
}
