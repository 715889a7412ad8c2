//! The other seats of a game (`selfplay.past_fraction`,
//! `selfplay.rule_fraction`): which seats of each game a past version or a
//! rule-based player plays, the second forward pass that acts for past
//! seats, the rule players' moves, and the `past_moves` flags that keep
//! both out of training.
//!
//! At each game's start one seat, drawn at random, is the newest version's;
//! every other seat is a past version's with probability `past_fraction`,
//! else a rule player's (one of the game's, drawn) with probability
//! `rule_fraction`, else the newest version's too; so no game is played by
//! others alone. A seat keeps its player for the whole game. The past
//! version itself is drawn from the pool at each rollout's start, so a game
//! that spans rollouts may meet two of them.

use crate::memory::SeatStates;
use crate::pool::Pool;
use rand::Rng;
use rand::rngs::StdRng;
use sebulba_core::policy::InferencePolicy;
use sebulba_envs::VectorEnv;
use sebulba_proto::{Tensor, encode_u8};
use tokio::sync::watch;
use tracing::warn;

/// Who plays a seat for the current game.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seat {
    Newest,
    Past,
    /// The game's rule-based player of this index (`TurnGame::rules`).
    Rule(usize),
}

/// The fractions of seats given to others than the newest version.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fractions {
    pub past: f64,
    pub rule: f64,
}

/// What the run spec says of the other seats, and the pool of past
/// versions when some seats are past.
#[derive(Clone)]
pub(crate) struct Others {
    pub fractions: Fractions,
    pub pool: Option<watch::Receiver<Pool>>,
}

pub(crate) struct SelfPlay {
    fractions: Fractions,
    /// Rule-based players the game has.
    rules: usize,
    players: usize,
    e_len: usize,
    /// `[E * P]`: who plays seat s of env e's current game.
    seats: Vec<Seat>,
    /// `[rows * E]`: 1 where a past version or a rule player made the row's move.
    flags: Vec<u8>,
    /// The past version acting now (none loaded while the pool is empty).
    policy: InferencePolicy,
    /// Its state per env and seat, zeroed at each new game and each new
    /// past version.
    memory: SeatStates,
    /// The parameter server's pool (`None` when no seat is past).
    pool: Option<watch::Receiver<Pool>>,
    /// Gathered observations of the past seats to move, and their envs.
    obs: Vec<f32>,
    envs: Vec<usize>,
}

impl SelfPlay {
    pub(crate) fn new(
        fractions: Fractions,
        (players, e_len, rows, rules): (usize, usize, usize, usize),
        policy: InferencePolicy,
        pool: Option<watch::Receiver<Pool>>,
    ) -> Self {
        Self {
            fractions,
            rules,
            players,
            e_len,
            seats: vec![Seat::Newest; e_len * players],
            flags: vec![0; rows * e_len],
            memory: SeatStates::new(&policy, e_len, players),
            policy,
            pool,
            obs: Vec::new(),
            envs: Vec::new(),
        }
    }

    /// At a rollout's start: draws the past version to act with from the
    /// pool (the one loaded stays if the draw cannot be loaded).
    pub(crate) fn draw(&mut self, rng: &mut StdRng) {
        let Some(pool) = &self.pool else {
            return;
        };
        let pool = pool.borrow().clone();
        if pool.is_empty() {
            return;
        }
        let w = &pool[rng.random_range(0..pool.len())];
        if self.policy.version() == Some(w.version) {
            return;
        }
        match self.policy.load(w.version, w.safetensors.to_vec()) {
            Ok(()) => self.memory = SeatStates::new(&self.policy, self.e_len, self.players),
            Err(e) => warn!(version = w.version, "could not load a past version: {e}"),
        }
    }

    /// Seats env `e`'s new game: one seat the newest version's, each other
    /// as the module docs say (no past seat while no past version is
    /// loaded; no rule seat for a game without rule players).
    pub(crate) fn new_game(&mut self, e: usize, rng: &mut StdRng) {
        let p = self.players;
        let newest = rng.random_range(0..p);
        let loaded = self.policy.version().is_some();
        self.memory.end(e);
        let Fractions { past, rule } = self.fractions;
        for (s, seat) in self.seats[e * p..(e + 1) * p].iter_mut().enumerate() {
            let u: f64 = rng.random();
            *seat = if s == newest {
                Seat::Newest
            } else if u < past {
                if loaded { Seat::Past } else { Seat::Newest }
            } else if u < past + rule && self.rules > 0 {
                Seat::Rule(rng.random_range(0..self.rules))
            } else {
                Seat::Newest
            };
        }
    }

    /// Every env starts a new game (after a reset).
    pub(crate) fn new_games(&mut self, rng: &mut StdRng) {
        for e in 0..self.e_len {
            self.new_game(e, rng);
        }
    }

    /// Row `t`'s moves: flags those of past and rule seats (`movers`: the
    /// seat to move in each env) and overwrites their rows of `head`
    /// (`[E * width]`): a past seat's with the past version's outputs for
    /// `obs` (`[E * obs_dim]`), a rule seat's with logits that put all the
    /// probability on the rule player's move in `venv`.
    pub(crate) fn act(
        &mut self,
        t: usize,
        movers: &[i32],
        obs: &[f32],
        head: &mut [f32],
        venv: &dyn VectorEnv,
    ) {
        let (e_len, p) = (self.e_len, self.players);
        let d = obs.len() / e_len.max(1);
        let width = head.len() / e_len.max(1);
        self.envs.clear();
        self.obs.clear();
        for (e, &m) in movers.iter().enumerate() {
            let seat = self.seats[e * p + m as usize % p];
            self.flags[t * e_len + e] = u8::from(seat != Seat::Newest);
            match seat {
                Seat::Newest => {}
                Seat::Past => {
                    self.envs.push(e);
                    self.obs.extend_from_slice(&obs[e * d..(e + 1) * d]);
                }
                Seat::Rule(r) => {
                    let row = &mut head[e * width..(e + 1) * width];
                    match venv.rule_move(e, r).filter(|&a| a < width) {
                        Some(a) => {
                            row.fill(RULED_OUT);
                            row[a] = 0.0;
                        }
                        // Not a game after all: the newest version acts,
                        // and the move is trained on.
                        None => self.flags[t * e_len + e] = 0,
                    }
                }
            }
        }
        if self.envs.is_empty() {
            return;
        }
        let past_head = self.memory.step(
            &self.policy,
            &self.obs,
            Some(&self.envs),
            Some(movers),
            None,
        );
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

/// The logit of every move but a rule player's: its probability underflows
/// to 0 in the sampler's softmax (finite, so no NaN can arise).
const RULED_OUT: f32 = -1e30;

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
        with_rules(fraction, 0.0, Some(pool), e_len)
    }

    /// Nim's two seats, its one rule player (greedy).
    fn with_rules(past: f64, rule: f64, pool: Option<Pool>, e_len: usize) -> SelfPlay {
        let (env, net) = nim();
        let policy = InferencePolicy::new(&env, &net, DeviceKind::Cpu).expect("policy");
        let pool = pool.map(|p| watch::channel(p).1);
        SelfPlay::new(Fractions { past, rule }, (2, e_len, 3, 1), policy, pool)
    }

    fn past_seats(sp: &SelfPlay) -> Vec<bool> {
        sp.seats.iter().map(|&s| s == Seat::Past).collect()
    }

    #[test]
    fn one_seat_of_every_game_is_the_newest_and_the_others_past_as_drawn() {
        let (env, net) = nim();
        let mut rng = StdRng::seed_from_u64(1);
        // Nothing loaded yet: no past seat.
        let mut sp = selfplay(1.0, Pool::default(), 64);
        sp.draw(&mut rng);
        sp.new_games(&mut rng);
        assert!(sp.seats.iter().all(|&s| s == Seat::Newest));
        // Fraction 1 with two seats: exactly one past seat per game, and
        // either seat may be it.
        let mut sp = selfplay(1.0, pool_of_one(&env, &net), 64);
        sp.draw(&mut rng);
        assert_eq!(sp.policy.version(), Some(7));
        sp.new_games(&mut rng);
        let past = past_seats(&sp);
        for game in past.chunks(2) {
            assert_eq!(game.iter().filter(|&&p| p).count(), 1, "{game:?}");
        }
        let first_past = past.chunks(2).filter(|g| g[0]).count();
        assert!((10..=54).contains(&first_past), "{first_past} of 64");
        // Fraction 0: none.
        let mut sp = selfplay(0.0, pool_of_one(&env, &net), 64);
        sp.draw(&mut rng);
        sp.new_games(&mut rng);
        assert!(sp.seats.iter().all(|&s| s == Seat::Newest));
    }

    #[test]
    fn rule_seats_take_their_share_beside_past_ones() {
        let (env, net) = nim();
        let mut rng = StdRng::seed_from_u64(3);
        // Rules alone, no pool: every game's other seat is the rule player.
        let mut sp = with_rules(0.0, 1.0, None, 64);
        sp.draw(&mut rng);
        sp.new_games(&mut rng);
        for game in sp.seats.chunks(2) {
            let rules = game.iter().filter(|&&s| s == Seat::Rule(0)).count();
            assert_eq!(rules, 1, "{game:?}");
            assert!(game.contains(&Seat::Newest), "{game:?}");
        }
        // Half past, a quarter rules: of 4,000 other seats about 2,000 past,
        // 1,000 rule players', 1,000 the newest's.
        let mut sp = with_rules(0.5, 0.25, Some(pool_of_one(&env, &net)), 4000);
        sp.draw(&mut rng);
        sp.new_games(&mut rng);
        let count = |kind: Seat| sp.seats.iter().filter(|&&s| s == kind).count();
        let (past, rule) = (count(Seat::Past), count(Seat::Rule(0)));
        assert!((1850..=2150).contains(&past), "{past}");
        assert!((880..=1120).contains(&rule), "{rule}");
        assert_eq!(count(Seat::Newest), 8000 - past - rule);
        // While no past version is loaded, past seats are the newest's and
        // rule seats keep their share.
        let mut sp = with_rules(0.5, 0.25, Some(Pool::default()), 4000);
        sp.new_games(&mut rng);
        assert_eq!(past_seats(&sp).iter().filter(|&&p| p).count(), 0);
        let rule = sp.seats.iter().filter(|&&s| s == Seat::Rule(0)).count();
        assert!((880..=1120).contains(&rule), "{rule}");
    }

    #[test]
    fn a_rule_seat_plays_the_rule_move_and_is_flagged() {
        use sebulba_envs::games::GameVecEnv;
        let venv = GameVecEnv::new(
            "Nim-v0",
            2,
            5,
            sebulba_envs::games::GameOptions::of("Nim-v0"),
        )
        .expect("Nim");
        let mut sp = with_rules(0.0, 1.0, None, 2);
        // Env 0: seat 1 is the rule player's; env 1: both the newest's.
        sp.seats = vec![Seat::Newest, Seat::Rule(0), Seat::Newest, Seat::Newest];
        let env = venv.spec().clone();
        let width = env.action_space.dim();
        let obs = vec![0.5f32; 2 * env.obs_dim];
        let mut head = vec![9.0; 2 * width];
        sp.act(0, &[1, 1], &obs, &mut head, &venv);
        let rule = venv.games()[0].rule_move(0);
        for (a, &x) in head[..width].iter().enumerate() {
            assert_eq!(x, if a == rule { 0.0 } else { RULED_OUT }, "action {a}");
        }
        assert!(head[width..].iter().all(|&x| x == 9.0), "env 1 untouched");
        assert_eq!(sp.flags[..2], [1, 0]);
        // Sampled through the categorical distribution, the rule move is
        // certain: probability 1, log-probability 0.
        let mut scratch = vec![0.0; width];
        for seed in 0..20 {
            let mut rng = StdRng::seed_from_u64(seed);
            let (a, lp) = sebulba_core::distribution::sample_categorical(
                &head[..width],
                None,
                &mut scratch,
                &mut rng,
            )
            .expect("a move");
            assert_eq!((a, lp), (rule, 0.0));
        }
        assert!(scratch.iter().all(|x| x.is_finite()), "{scratch:?}");
    }

    #[test]
    fn past_seats_act_with_the_past_version_and_are_flagged() {
        let (env, net) = nim();
        let pool = pool_of_one(&env, &net);
        let mut sp = selfplay(1.0, pool.clone(), 2);
        let mut rng = StdRng::seed_from_u64(2);
        sp.draw(&mut rng);
        // Env 0: seat 1 is past; env 1: seat 0 is past.
        sp.seats = vec![Seat::Newest, Seat::Past, Seat::Past, Seat::Newest];
        let d = env.obs_dim;
        let obs: Vec<f32> = (0..2 * d).map(|i| (i % 5) as f32 * 0.25).collect();
        let width = env.action_space.dim();
        let mut head = vec![9.0; 2 * width];
        // Row 1: seat 1 moves in env 0 (past), seat 1 in env 1 (newest).
        let venv = sebulba_envs::games::GameVecEnv::new(
            "Nim-v0",
            2,
            5,
            sebulba_envs::games::GameOptions::of("Nim-v0"),
        )
        .expect("Nim");
        sp.act(1, &[1, 1], &obs, &mut head, &venv);
        let mut past = InferencePolicy::new(&env, &net, DeviceKind::Cpu).expect("policy");
        past.load(7, pool[0].safetensors.to_vec()).expect("load");
        let expected = past.step(&obs[..d], &mut past.state(1), None);
        assert_eq!(head[..width], expected[..]);
        assert!(head[width..].iter().all(|&x| x == 9.0), "env 1 untouched");
        assert_eq!(sp.flags[2..4], [1, 0]);
        sp.shift(1);
        assert_eq!(sp.flags[..2], [1, 0], "row 1 carried to the front");
        let t = sp.encode();
        assert_eq!(t.shape, [3, 2]);
    }
}
