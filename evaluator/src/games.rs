//! Scoring a version of a turn-based game: it plays `games` games against
//! each fixed opponent, the opponent's policy in every other seat: uniformly
//! random legal moves, each of the game's rule-based players
//! (`TurnGame::rules`, documented per game: Big Two's greedy and planner),
//! and an earlier checkpoint of the run. Game `i` of a
//! match is dealt from the evaluation seed at table `i`, so every version
//! and every opponent meets the same deals, and the evaluated seat is
//! `i mod P`, so no seat's advantage (Big Two's lead, Nim's first move)
//! favours it. The version plays greedily (the most probable legal move), as
//! the earlier checkpoint does.

use crate::cpu::Pacing;
use crate::episodes::{EpisodeResults, PlayError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_core::distribution::argmax;
use sebulba_core::policy::{InferencePolicy, PolicyState};
use sebulba_envs::games::GameVecEnv;
use sebulba_envs::games::{GameOptions, Scoring};
use sebulba_envs::{ActionBatch, VectorEnv};
use serde::{Deserialize, Serialize};

/// Who sits in a seat: the evaluated version, or an opponent.
#[derive(Clone, Copy)]
pub enum Player<'a> {
    Random,
    /// A rule-based player: its index in `TurnGame::rules`, its name.
    Rule(usize, &'static str),
    /// An earlier version of the run (its version number, its policy).
    Checkpoint(u64, &'a InferencePolicy),
    /// The version under evaluation.
    Policy(&'a InferencePolicy),
}

impl Player<'_> {
    pub fn name(&self) -> String {
        match self {
            Player::Random => "random".into(),
            Player::Rule(_, name) => (*name).into(),
            Player::Checkpoint(v, _) => format!("checkpoint-{v}"),
            Player::Policy(_) => "policy".into(),
        }
    }

    /// A zero policy state for each of `seats` seats (empty for a player
    /// without a network).
    fn states(&self, seats: usize) -> PolicyState {
        match self {
            Player::Policy(policy) | Player::Checkpoint(_, policy) => policy.state(seats),
            Player::Random | Player::Rule(..) => PolicyState::default(),
        }
    }
}

/// One match's result, as `eval.jsonl` and `summary.json` carry it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatchResult {
    /// `random`, a rule-based player's name (`greedy`, `planner`) or
    /// `checkpoint-<version>`.
    pub opponent: String,
    pub games: usize,
    pub wins: usize,
    pub win_rate: f64,
    /// Wilson score interval of the win rate, 95%.
    pub win_rate_low: f64,
    pub win_rate_high: f64,
    /// The evaluated seat's score per game, in the game's own units (Big
    /// Two: cards; not divided by the training normaliser).
    pub mean_score: f64,
    /// Moves per game, all seats.
    pub length_mean: f64,
}

impl MatchResult {
    /// As an `EvalReport` carries it.
    pub fn to_wire(&self) -> sebulba_proto::GameMatch {
        let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        sebulba_proto::GameMatch {
            opponent: self.opponent.clone(),
            games: clamp(self.games),
            wins: clamp(self.wins),
            win_rate_low: self.win_rate_low,
            win_rate_high: self.win_rate_high,
            mean_score: self.mean_score,
        }
    }
}

/// The 95% Wilson score interval of `wins` in `n` trials: unlike the
/// normal approximation it stays inside [0, 1] and is sound near 0 and 1.
pub fn wilson_interval(wins: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (z, n) = (1.959_963_984_540_054_f64, n as f64);
    let p = wins as f64 / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The matches of one evaluation: against random, each rule-based player
/// and (when there is one) the earlier checkpoint; with the first rule's
/// (greedy's) games as episodes (return 1 for a win, 0 otherwise) for the
/// evaluation's `return_*` fields.
pub fn play_matches(
    policy: &InferencePolicy,
    earlier: Option<&(u64, InferencePolicy)>,
    env_id: &str,
    env_kwargs: &str,
    games: usize,
    seed: u64,
    pacing: &mut Pacing<'_>,
) -> Result<(EpisodeResults, Vec<MatchResult>), PlayError> {
    let mut opponents = vec![Player::Random];
    opponents.extend(rule_players(env_id)?);
    if let Some((v, p)) = earlier {
        opponents.push(Player::Checkpoint(*v, p));
    }
    let mut results = Vec::new();
    let mut episodes = EpisodeResults::default();
    for o in opponents {
        let me = Player::Policy(policy);
        let (m, played) = play_match(me, o, env_id, env_kwargs, games, seed, pacing)?;
        if matches!(o, Player::Rule(0, _)) {
            episodes.returns = played
                .iter()
                .map(|(s, _)| f64::from(u8::from(*s > 0.0)))
                .collect();
            episodes.lengths = played.iter().map(|&(_, l)| l).collect();
        }
        results.push(m);
    }
    (episodes.cpu_seconds, episodes.throttled_seconds) = pacing.spent();
    Ok((episodes, results))
}

/// Plays `games` games of `env_id` between `me` (one seat) and `them`
/// (the others); see the module docs. Returns the match (named for `them`,
/// won or lost by `me`) and each game's (score, length); paced between two
/// moves, and stopped there when `pacing` is ([`PlayError::Stopped`]: a
/// match is not scored in part).
pub fn play_match(
    me: Player<'_>,
    them: Player<'_>,
    env_id: &str,
    env_kwargs: &str,
    games: usize,
    seed: u64,
    pacing: &mut Pacing<'_>,
) -> Result<(MatchResult, Vec<(f64, u32)>), PlayError> {
    // Matches report the game's own scores (Big Two: cards), whatever
    // `env.kwargs.scoring` trains on, so that mean scores compare across runs.
    let options = GameOptions {
        scoring: Scoring::Game,
        ..GameOptions::from_kwargs(env_id, env_kwargs)?
    };
    let normaliser = options.normaliser;
    let mut venv = GameVecEnv::new(env_id, games, seed, options)?;
    let spec = venv.spec().clone();
    let (p, d, n) = (spec.players, spec.obs_dim, spec.action_space.dim());
    let mut obs = vec![0.0f32; games * d];
    venv.reset(&mut obs)?;
    let mut out = venv.new_step_out();
    let (mut movers, mut masks) = (vec![0u8; games], vec![0u8; games * n]);
    let mut actions = vec![0u32; games];
    let mut rng = StdRng::seed_from_u64(seed ^ 0x0BB0_4E47);
    let mut results: Vec<Option<(f64, u32)>> = vec![None; games];
    let mut remaining = games;
    // Each seat of each table remembers its own moves (one game per table).
    let mut states = (me.states(games * p), them.states(games * p));
    while remaining > 0 {
        if !pacing.go_on() {
            return Err(PlayError::Stopped);
        }
        venv.to_move(&mut movers);
        venv.action_masks(&mut masks);
        let (ours, theirs): (Vec<usize>, Vec<usize>) =
            (0..games).partition(|&i| results[i].is_none() && usize::from(movers[i]) == i % p);
        let tables = Tables {
            venv: &venv,
            obs: &obs,
            masks: &masks,
            movers: &movers,
            dims: (d, n),
        };
        tables.moves(me, &mut states.0, &ours, &mut rng, &mut actions);
        tables.moves(them, &mut states.1, &theirs, &mut rng, &mut actions);
        venv.step(ActionBatch::Discrete(&actions), &mut out)?;
        obs.copy_from_slice(&out.obs);
        for ep in &out.episodes {
            let i = ep.env_index;
            if results[i].is_none() {
                let score = f64::from(out.scores[i * p + i % p]) * normaliser;
                results[i] = Some((score, ep.length));
                remaining -= 1;
            }
        }
    }
    let played: Vec<(f64, u32)> = results.into_iter().flatten().collect();
    Ok((summarise(them.name(), &played), played))
}

/// One step's tables: what a player needs to choose their moves.
struct Tables<'a> {
    venv: &'a GameVecEnv,
    obs: &'a [f32],
    masks: &'a [u8],
    /// The seat to move at each table.
    movers: &'a [u8],
    /// Observation floats and actions per table.
    dims: (usize, usize),
}

impl Tables<'_> {
    /// `player`'s move at each listed table, into `actions`; `states` are
    /// the player's per seat (`[tables * seats]`).
    fn moves(
        &self,
        player: Player<'_>,
        states: &mut PolicyState,
        tables: &[usize],
        rng: &mut StdRng,
        actions: &mut [u32],
    ) {
        match player {
            Player::Policy(policy) | Player::Checkpoint(_, policy) => {
                self.greedy_moves(policy, states, tables, actions);
            }
            Player::Rule(rule, _) => {
                for &i in tables {
                    actions[i] = self.venv.games()[i].rule_move(rule) as u32;
                }
            }
            Player::Random => {
                let n = self.dims.1;
                for &i in tables {
                    actions[i] = random_legal(&self.masks[i * n..(i + 1) * n], rng);
                }
            }
        }
    }
}

/// The rule-based players of game `env_id`.
pub fn rule_players(env_id: &str) -> Result<Vec<Player<'static>>, PlayError> {
    let game = sebulba_envs::games::new_game(env_id, &mut sebulba_envs::games::game_rng(0))
        .ok_or_else(|| sebulba_envs::EnvError::UnknownId(env_id.to_string()))?;
    Ok(game
        .rules()
        .iter()
        .enumerate()
        .map(|(i, &name)| Player::Rule(i, name))
        .collect())
}

impl Tables<'_> {
    /// Each listed table's most probable legal move under `policy`, in one
    /// batched step of the movers' seats.
    fn greedy_moves(
        &self,
        policy: &InferencePolicy,
        states: &mut PolicyState,
        tables: &[usize],
        actions: &mut [u32],
    ) {
        if tables.is_empty() {
            return;
        }
        let ((d, n), (obs, masks)) = (self.dims, (self.obs, self.masks));
        let rows: Vec<f32> = tables
            .iter()
            .flat_map(|&i| obs[i * d..(i + 1) * d].iter().copied())
            .collect();
        let row_masks: Vec<u8> = tables
            .iter()
            .flat_map(|&i| masks[i * n..(i + 1) * n].iter().copied())
            .collect();
        let p = states.envs() / self.movers.len().max(1);
        let seats = || tables.iter().map(|&i| i * p + usize::from(self.movers[i]));
        let mut part = states.select(seats());
        let head = policy.step(&rows, &mut part, Some(&row_masks));
        states.put_back(&part, seats());
        for (k, &i) in tables.iter().enumerate() {
            let valid = &masks[i * n..(i + 1) * n];
            actions[i] = argmax(&head[k * n..(k + 1) * n], Some(valid)) as u32;
        }
    }
}

fn random_legal(mask: &[u8], rng: &mut StdRng) -> u32 {
    let legal = mask.iter().filter(|&&m| m != 0).count().max(1);
    let pick = rng.random_range(0..legal);
    mask.iter()
        .enumerate()
        .filter(|&(_, &m)| m != 0)
        .nth(pick)
        .map_or(0, |(a, _)| a as u32)
}

fn summarise(opponent: String, played: &[(f64, u32)]) -> MatchResult {
    let games = played.len();
    // A game's winner is the one seat with a positive score (zero-sum).
    let wins = played.iter().filter(|(s, _)| *s > 0.0).count();
    let (low, high) = wilson_interval(wins, games);
    let g = games.max(1) as f64;
    MatchResult {
        opponent,
        games,
        wins,
        win_rate: wins as f64 / g,
        win_rate_low: low,
        win_rate_high: high,
        mean_score: played.iter().map(|(s, _)| s).sum::<f64>() / g,
        length_mean: played.iter().map(|&(_, l)| f64::from(l)).sum::<f64>() / g,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_intervals_of_hand_worked_counts() {
        // 50 of 100: p = .5, z^2/n = .0384; centre .5, half
        // 1.96 * sqrt(.0025 + .0000960) / 1.0384 = .0962: [.4038, .5962].
        let (lo, hi) = wilson_interval(50, 100);
        assert!(
            (lo - 0.4038).abs() < 1e-3 && (hi - 0.5962).abs() < 1e-3,
            "{lo} {hi}"
        );
        // 0 of 10: [0, z^2/(n + z^2)] = [0, .2775].
        let (lo, hi) = wilson_interval(0, 10);
        assert!(lo == 0.0 && (hi - 0.2775).abs() < 1e-3, "{lo} {hi}");
        assert_eq!(wilson_interval(0, 0), (0.0, 1.0));
    }
}
