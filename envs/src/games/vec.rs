//! E tables of one game behind the [`VectorEnv`] contract, so that actors
//! and the evaluator step games like any environment: the observation of an
//! env is what its player to move sees, its action mask is that player's
//! legal moves, and [`VectorEnv::to_move`] says who that is.
//!
//! A finished game reports `terminated` (never `truncated`: games end by
//! their rules) and each seat's score (as `env.kwargs.scoring` scores it),
//! divided by the normaliser, in
//! [`VecStepOut::scores`]; the step's own reward is 0. Which move each score
//! is credited to (every player's last one) is the actor's business: only
//! it holds the rows. The next game is dealt in the same step.

use super::{GameOptions, TurnGame, new_game};
use crate::env::EnvError;
use crate::observations::ObsDtype;
use crate::spec::{ActionSpace, EnvSpec};
use crate::vec_env::{ActionBatch, EpisodeStats, VecStepOut, derive_env_seed, validate_actions};
use crate::vector::VectorEnv;
use rand::SeedableRng;
use rand::rngs::StdRng;

type Game = Box<dyn TurnGame + Send>;

/// The spec of game `id` (`None` for an id that is not a game).
pub fn game_spec(id: &str) -> Option<EnvSpec> {
    let game = new_game(id, &mut StdRng::seed_from_u64(0))?;
    let d = game.obs_dim();
    Some(EnvSpec {
        obs_dtype: ObsDtype::F32,
        id: id.to_string(),
        obs_dim: d,
        image: None,
        action_space: ActionSpace::Discrete { n: game.actions() },
        // Games end by their rules; nothing truncates them.
        max_episode_steps: u32::MAX,
        obs_low: vec![0.0; d],
        obs_high: vec![1.0; d],
        players: game.players(),
    })
}

/// The score normaliser of game `id` when the run does not set one: Big
/// Two's scores are counts of cards (up to 39), Nim's are ±1.
pub fn default_normaliser(id: &str) -> f64 {
    match id {
        "BigTwo-v0" | "BigTwo-v1" | "BigTwo-v2" => 5.0,
        _ => 1.0,
    }
}

/// `E` tables of one game, each dealt from its own seeded generator.
pub struct GameVecEnv {
    spec: EnvSpec,
    games: Vec<Game>,
    rngs: Vec<StdRng>,
    /// How scores leave the env: scored, then divided by the normaliser.
    options: GameOptions,
    /// Moves in each env's current game.
    moves: Vec<u32>,
}

impl GameVecEnv {
    /// `num_envs` tables of game `id`; table `i` deals from
    /// [`derive_env_seed`]`(seed, i)`. Scores follow `options.scoring` and
    /// are divided by `options.normaliser` (finite, > 0).
    pub fn new(
        id: &str,
        num_envs: usize,
        seed: u64,
        options: GameOptions,
    ) -> Result<Self, EnvError> {
        let normaliser = options.normaliser;
        if num_envs == 0 {
            return Err(EnvError::NoEnvs);
        }
        let spec = game_spec(id).ok_or_else(|| EnvError::UnknownId(id.to_string()))?;
        if !(normaliser.is_finite() && normaliser > 0.0) {
            return Err(EnvError::External {
                id: id.to_string(),
                reason: format!(
                    "env.kwargs.score_normaliser = {normaliser}: must be finite and > 0"
                ),
            });
        }
        let mut rngs: Vec<StdRng> = (0..num_envs)
            .map(|i| StdRng::seed_from_u64(derive_env_seed(seed, i as u64)))
            .collect();
        let games = rngs
            .iter_mut()
            .map(|r| new_game(id, r).ok_or_else(|| EnvError::UnknownId(id.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            spec,
            games,
            rngs,
            options,
            moves: vec![0; num_envs],
        })
    }

    /// The games, for players that act without a policy (the evaluator's
    /// fixed opponents).
    pub fn games(&self) -> &[Game] {
        &self.games
    }

    fn deal(&mut self, i: usize) {
        if let Some(g) = new_game(&self.spec.id, &mut self.rngs[i]) {
            self.games[i] = g;
        }
        self.moves[i] = 0;
    }

    fn observe_all(&self, obs: &mut [f32]) {
        let d = self.spec.obs_dim;
        for (g, o) in self.games.iter().zip(obs.chunks_exact_mut(d)) {
            g.observe(g.to_move(), o);
        }
    }

    fn bad_action(&self, index: usize, reason: String) -> EnvError {
        EnvError::BadAction {
            id: self.spec.id.clone(),
            reason: format!("env {index}: {reason}"),
        }
    }
}

impl VectorEnv for GameVecEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn num_envs(&self) -> usize {
        self.games.len()
    }

    fn reset(&mut self, obs: &mut [f32]) -> Result<(), EnvError> {
        for i in 0..self.games.len() {
            self.deal(i);
        }
        self.observe_all(obs);
        Ok(())
    }

    /// Each game checks its move and refuses an illegal one without playing
    /// it (the tables before it have moved: the caller drops the rollout).
    fn step(&mut self, actions: ActionBatch<'_>, out: &mut VecStepOut) -> Result<(), EnvError> {
        validate_actions(&self.spec, self.games.len(), actions)?;
        let ActionBatch::Discrete(actions) = actions else {
            return Err(self.bad_action(0, "a game takes discrete actions".into()));
        };
        let (e, d, p) = (self.games.len(), self.spec.obs_dim, self.spec.players);
        *out = std::mem::take(out).resized(e, d, p);
        out.episodes.clear();
        for (i, &a) in actions.iter().enumerate() {
            let played = self.games[i].play(a as usize);
            let ended = played.map_err(|reason| self.bad_action(i, reason))?;
            self.moves[i] += 1;
            out.reward[i] = 0.0;
            out.truncated[i] = false;
            out.terminated[i] = ended.is_some();
            if let Some(scores) = ended {
                let scores = self.options.scoring.apply(&scores);
                let row = &mut out.scores[i * p..(i + 1) * p];
                for (s, &raw) in row.iter_mut().zip(&scores) {
                    *s = (raw / self.options.normaliser) as f32;
                }
                // A game's episode return is seat 0's score (zero-sum: its
                // mean under self-play is 0; evaluation gives win rates).
                out.episodes.push(EpisodeStats {
                    env_index: i,
                    episode_return: scores[0] / self.options.normaliser,
                    length: self.moves[i],
                });
                self.deal(i);
            }
            let g = &self.games[i];
            g.observe(g.to_move(), &mut out.obs[i * d..(i + 1) * d]);
        }
        Ok(())
    }

    fn action_masks(&self, mask: &mut [u8]) -> bool {
        let n = self.spec.action_space.dim();
        let mut legal = vec![false; n];
        for (g, m) in self.games.iter().zip(mask.chunks_exact_mut(n)) {
            g.legal_mask(&mut legal);
            for (m, &l) in m.iter_mut().zip(&legal) {
                *m = u8::from(l);
            }
        }
        true
    }

    fn to_move(&self, ids: &mut [u8]) -> bool {
        for (id, g) in ids.iter_mut().zip(&self.games) {
            *id = g.to_move() as u8;
        }
        true
    }

    fn rule_players(&self) -> usize {
        self.games.first().map_or(0, |g| g.rules().len())
    }

    fn rule_move(&self, index: usize, rule: usize) -> Option<usize> {
        let game = self.games.get(index)?;
        (rule < game.rules().len()).then(|| game.rule_move(rule))
    }

    /// A fresh deal at table `index` (a game fails only on a caller's bug,
    /// but the actor's recovery path is the same for every env).
    fn restart(&mut self, index: usize, obs: &mut [f32]) -> Result<(), EnvError> {
        if index >= self.games.len() {
            return Err(self.bad_action(index, "no such env".into()));
        }
        self.deal(index);
        self.observe_all(obs);
        Ok(())
    }

    fn new_step_out(&self) -> VecStepOut {
        VecStepOut::default().resized(self.games.len(), self.spec.obs_dim, self.spec.players)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{env_spec, env_spec_with, make_vector_env};
    use crate::vector::Purpose;

    /// Plays the first legal move of every table until `games` have ended,
    /// checking turns, masks and scores on the way.
    #[test]
    fn nim_tables_take_turns_end_with_scores_and_deal_again() {
        let mut v = make_vector_env("Nim-v0", r#"{"score_normaliser": 2}"#, 3, 7, Purpose::Train)
            .expect("nim");
        assert_eq!(v.spec().players, 2);
        assert_eq!(v.spec().overlap_rows(), 1);
        let (e, d, n) = (3, v.spec().obs_dim, v.spec().action_space.dim());
        let mut obs = vec![0.0; e * d];
        v.reset(&mut obs).expect("reset");
        let mut out = v.new_step_out();
        assert_eq!(out.scores.len(), e * 2);
        let (mut ids, mut before) = (vec![9u8; e], vec![0u8; e]);
        let mut mask = vec![0u8; e * n];
        let mut ended = 0;
        for _ in 0..200 {
            assert!(v.to_move(&mut before) && v.action_masks(&mut mask));
            let actions: Vec<u32> = mask
                .chunks_exact(n)
                .map(|m| m.iter().position(|&x| x == 1).expect("a legal move") as u32)
                .collect();
            v.step(ActionBatch::Discrete(&actions), &mut out)
                .expect("legal");
            v.to_move(&mut ids);
            for i in 0..e {
                assert_eq!(out.reward[i], 0.0);
                assert!(!out.truncated[i]);
                if out.terminated[i] {
                    ended += 1;
                    // The mover took the last object: +1/2, the other -1/2.
                    let s = &out.scores[i * 2..i * 2 + 2];
                    assert_eq!(s[usize::from(before[i])], 0.5);
                    assert_eq!(s[1 - usize::from(before[i])], -0.5);
                    assert_eq!(ids[i], 0, "a new game starts with seat 0");
                } else {
                    assert_eq!(ids[i], 1 - before[i], "turns alternate");
                }
            }
            for s in &out.episodes {
                assert!(s.length >= 1 && s.episode_return.abs() == 0.5);
            }
        }
        assert!(ended > 20, "{ended} games");
        // An illegal move is refused, naming the table.
        v.action_masks(&mut mask);
        let bad = mask[..n]
            .iter()
            .position(|&x| x == 0)
            .expect("an illegal move") as u32;
        let err = v
            .step(ActionBatch::Discrete(&[bad, 0, 0]), &mut out)
            .expect_err("illegal");
        assert!(err.to_string().contains("env 0"), "{err}");
    }

    /// Under `scoring = "wins"` a finished Big Two game scores its winner
    /// 3 and each other seat -1 (normaliser 1), in `scores` and in the
    /// episode's return alike.
    #[test]
    fn big_two_tables_score_wins_when_asked() {
        let kwargs = r#"{"scoring": "wins"}"#;
        let mut v = make_vector_env("BigTwo-v1", kwargs, 2, 3, Purpose::Train).expect("v1");
        let (e, d, n) = (2, v.spec().obs_dim, v.spec().action_space.dim());
        let mut obs = vec![0.0; e * d];
        v.reset(&mut obs).expect("reset");
        let mut out = v.new_step_out();
        let mut mask = vec![0u8; e * n];
        let mut ended = 0;
        for _ in 0..10_000 {
            v.action_masks(&mut mask);
            // The highest legal action plays the most cards: games end.
            let actions: Vec<u32> = mask
                .chunks_exact(n)
                .map(|m| m.iter().rposition(|&x| x == 1).expect("a legal move") as u32)
                .collect();
            v.step(ActionBatch::Discrete(&actions), &mut out)
                .expect("legal");
            for i in (0..e).filter(|&i| out.terminated[i]) {
                ended += 1;
                let mut s = out.scores[i * 4..i * 4 + 4].to_vec();
                s.sort_by(f32::total_cmp);
                assert_eq!(s, [-1.0, -1.0, -1.0, 3.0]);
            }
            for ep in &out.episodes {
                assert!([3.0, -1.0].contains(&ep.episode_return), "{ep:?}");
            }
            if ended >= 6 {
                return;
            }
        }
        panic!("{ended} games ended in 10,000 moves");
    }

    #[test]
    fn big_two_spec_and_kwargs() {
        let s = env_spec_with("BigTwo-v0", "").expect("spec");
        assert_eq!((s.players, s.obs_dim, s.action_space.dim()), (4, 496, 1365));
        assert_eq!(env_spec("BigTwo-v0").expect("spec"), s);
        let v1 = env_spec_with("BigTwo-v1", "").expect("spec");
        assert_eq!(
            (v1.players, v1.obs_dim, v1.action_space.dim()),
            (4, 602, 1365)
        );
        let v2 = env_spec_with("BigTwo-v2", "").expect("spec");
        assert_eq!(
            (v2.players, v2.obs_dim, v2.action_space.dim()),
            (4, 602 + 3 * 126, 1365)
        );
        for bad in [
            r#"{"score_normaliser": 0}"#,
            r#"{"score_normaliser": "x"}"#,
            r#"{"seats": 3}"#,
        ] {
            let err = env_spec_with("BigTwo-v0", bad).expect_err(bad);
            assert!(err.to_string().contains("env.kwargs."), "{err}");
        }
        let mut v = make_vector_env("BigTwo-v0", "", 2, 1, Purpose::Train).expect("big two");
        let mut obs = vec![0.0; 2 * 496];
        v.reset(&mut obs).expect("reset");
        let mut ids = [9u8; 2];
        v.to_move(&mut ids);
        // The holder of the 3♦ (card 0) leads: its own hand shows it.
        for (i, &p) in ids.iter().enumerate() {
            assert!(p < 4);
            assert_eq!(obs[i * 496], 1.0, "env {i}: the mover holds the 3♦");
        }
    }
}
