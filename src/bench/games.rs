//! Throughput of the turn-based games (`sebulba bench envs --env BigTwo-v0`):
//! what an actor pays per move, whoever moves: the mover's observation, the
//! legal-move mask and the move itself, here with a uniformly random legal
//! move (no policy); a finished game is dealt anew.

use super::EnvBench;
use rand::Rng;
use sebulba_envs::games::{TurnGame, game_rng, new_game};
use std::time::Instant;

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
