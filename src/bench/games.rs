//! The turn-based games. Throughput (`sebulba bench envs --env BigTwo-v0`):
//! what an actor pays per move, whoever moves: the mover's observation, the
//! legal-move mask and the move itself, here with a uniformly random legal
//! move (no policy); a finished game is dealt anew. And the strength of the
//! evaluation's fixed players against each other (`sebulba bench rules`).

use super::EnvBench;
use rand::Rng;
use sebulba_envs::games::{TurnGame, game_rng, new_game};
use sebulba_evaluator::{MatchResult, Player, play_match, rule_players};
use std::time::Instant;

/// One pairing of `sebulba bench rules`: `player` in one seat, the match's
/// `opponent` in the others, as the evaluator plays its matches.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RuleMatch {
    pub player: String,
    /// Won or lost by `player`; the mean score is `player`'s.
    #[serde(flatten)]
    pub result: MatchResult,
    pub seconds: f64,
}

/// Every pairing of random and the game's rule-based players, the same
/// player on both sides included (a fair game gives it one game in
/// `players`).
pub fn bench_rules(id: &str, games: usize, seed: u64) -> anyhow::Result<Vec<RuleMatch>> {
    anyhow::ensure!(games > 0, "--games must be at least 1");
    anyhow::ensure!(
        sebulba_envs::games::GAME_IDS.contains(&id),
        "--env {id}: not a turn-based game (the games: {})",
        sebulba_envs::games::GAME_IDS.join(", ")
    );
    let mut players = vec![Player::Random];
    players.extend(rule_players(id)?);
    let mut rows = Vec::new();
    // A bench runs its matches to the end, at full speed.
    let never = tokio_util::sync::CancellationToken::new();
    let mut pacing = sebulba_evaluator::Pacing::new(&never, None);
    for &me in &players {
        for &them in &players {
            let t0 = Instant::now();
            let (m, _) = play_match(me, them, id, "", games, seed, &mut pacing)?;
            rows.push(RuleMatch {
                player: me.name(),
                result: m,
                seconds: t0.elapsed().as_secs_f64(),
            });
        }
    }
    Ok(rows)
}

/// `None` when `id` is not a game.
pub fn bench_game(id: &str, num_envs: usize, seconds: f64) -> Option<Result<EnvBench, String>> {
    let mut rng = game_rng(1);
    let mut games: Vec<Box<dyn TurnGame + Send>> = (0..num_envs)
        .map(|_| new_game(id, &mut rng))
        .collect::<Option<_>>()?;
    let (obs_dim, actions) = (games[0].obs_dim(), games[0].actions());
    let mut obs = vec![0.0f32; obs_dim];
    let mut mask = vec![false; actions];
    let mut legal = Vec::with_capacity(actions);
    let (mut steps, mut finished) = (0u64, 0u64);
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < seconds {
        for _ in 0..20 {
            for g in games.iter_mut() {
                g.observe(g.to_move(), &mut obs);
                g.legal_mask(&mut mask);
                legal.clear();
                legal.extend((0..actions).filter(|&a| mask[a]));
                let a = legal[rng.random_range(0..legal.len())];
                match g.play(a) {
                    Ok(None) => {}
                    Ok(Some(_)) => {
                        finished += 1;
                        *g = new_game(id, &mut rng)?;
                    }
                    Err(e) => return Some(Err(e)),
                }
                std::hint::black_box(&obs);
                steps += 1;
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    Some(Ok(EnvBench {
        env_id: id.to_string(),
        num_envs,
        processes: 1,
        steps,
        seconds: secs,
        steps_per_second: steps as f64 / secs,
        games_per_second: Some(finished as f64 / secs),
    }))
}
