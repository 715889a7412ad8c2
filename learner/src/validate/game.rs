//! What a batch of a turn-based game must also satisfy (see the proto's
//! `TrajectoryBatch` notes): seats in range, moving in turn within a game,
//! nothing truncated; then it is split into the T trained rows every
//! other part of the learner reads and the overlap that only bootstraps.

use super::{Rejection, check_flags, reject};
use crate::batch::{BatchActions, GameRows};
use sebulba_algorithms::gae_players::PlayerGaeError;
use sebulba_envs::Observations;
use sebulba_proto::{TrajectoryBatch, decode_i32, decode_u8};
use tonic::Code;

/// The batch's rows as decoded, `R = T + K` per-step rows (`R + 1`
/// observation rows), before the split.
pub(super) struct Rows {
    pub t: usize,
    pub r: usize,
    pub e: usize,
    pub d: usize,
}

/// For a game, checks what a game's batch must also satisfy and splits off
/// its overlap; for one player, refuses `player_ids` and `past_moves`.
/// `past_selves`: the run seats past versions or rule players
/// (`selfplay.past_fraction` or `rule_fraction > 0`).
pub(super) fn decode_game(
    b: &TrajectoryBatch,
    (players, past_selves): (usize, bool),
    rows: &Rows,
    mut split: Split<'_>,
) -> Result<Option<GameRows>, Rejection> {
    if players <= 1 {
        let field = if b.player_ids.is_some() {
            "player_ids"
        } else if b.past_moves.is_some() {
            "past_moves"
        } else {
            return Ok(None);
        };
        return Err(reject(
            Code::FailedPrecondition,
            "spec",
            format!("field `{field}`: this run's environment has one player"),
        ));
    }
    if split.action_masks.is_none() {
        return Err(reject(
            Code::InvalidArgument,
            "shape",
            "field `action_masks` is missing: a game's moves are masked to the legal ones",
        ));
    }
    let ids = decode_player_ids(b, rows, players, split.terminated, split.truncated)?;
    let past_moves = decode_past_moves(b, rows, past_selves)?;
    let mut game = self::split(&mut split, rows, ids);
    game.past_moves = past_moves;
    check_bootstrap(&game, rows, players, split.terminated)?;
    Ok(Some(game))
}

/// `player_ids` `[R+1, E]`: each a seat of the game, seat after seat
/// within a game; and no truncation.
fn decode_player_ids(
    b: &TrajectoryBatch,
    rows: &Rows,
    players: usize,
    terminated: &[u8],
    truncated: &[u8],
) -> Result<Vec<u8>, Rejection> {
    let (r, e) = (rows.r, rows.e);
    if let Some(i) = truncated.iter().position(|&x| x != 0) {
        return Err(reject(
            Code::InvalidArgument,
            "out_of_range",
            format!("field `truncated`: flat index {i} is set, but a game is never truncated"),
        ));
    }
    let Some(t) = b.player_ids.as_ref() else {
        return Err(reject(
            Code::InvalidArgument,
            "shape",
            format!(
                "field `player_ids` is missing: this run's environment is a game of {players} players"
            ),
        ));
    };
    let ids = decode_i32(Some(t), "player_ids", &[r as u32 + 1, e as u32])?;
    if let Some(i) = ids.iter().position(|&p| p < 0 || p as usize >= players) {
        return Err(reject(
            Code::InvalidArgument,
            "out_of_range",
            format!(
                "field `player_ids`: {} at flat index {i} is not a seat (0..{players})",
                ids[i]
            ),
        ));
    }
    for row in 0..r {
        for env in 0..e {
            let (now, next) = (ids[row * e + env], ids[(row + 1) * e + env]);
            let in_turn = next as usize == (now as usize + 1) % players;
            if terminated[row * e + env] == 0 && !in_turn {
                return Err(reject(
                    Code::InvalidArgument,
                    "out_of_range",
                    format!(
                        "field `player_ids`: row {}, env {env}: seat {next} moves after seat {now} in the same game (seats move in turn)",
                        row + 1
                    ),
                ));
            }
        }
    }
    Ok(ids.into_iter().map(|p| p as u8).collect())
}

/// `past_moves` `[R, E]` of 0/1, cut to the T trained rows; empty when
/// absent or all 0. Refused in a run that seats no past versions.
fn decode_past_moves(
    b: &TrajectoryBatch,
    rows: &Rows,
    past_selves: bool,
) -> Result<Vec<u8>, Rejection> {
    let Some(t) = b.past_moves.as_ref() else {
        return Ok(Vec::new());
    };
    if !past_selves {
        return Err(reject(
            Code::FailedPrecondition,
            "spec",
            "field `past_moves`: this run seats no past versions or rule players (selfplay.past_fraction = rule_fraction = 0)",
        ));
    }
    let (r, e) = (rows.r as u32, rows.e as u32);
    let mut past = decode_u8(Some(t), "past_moves", &[r, e])?;
    check_flags("past_moves", &past)?;
    past.truncate(rows.t * rows.e);
    if past.iter().all(|&x| x == 0) {
        past.clear();
    }
    Ok(past)
}

/// Checks every trained move can be bootstrapped as the update's per-player
/// GAE (`gae_players`) will: walking each env's rows back from the last
/// observation row, a trained move needs a later row with its player's next
/// move (trained or in the overlap) or a game end at or after its own row.
/// The first move without one, env by env from the last row, is refused by
/// row and env in `PlayerGaeError`'s words, the update's own.
fn check_bootstrap(
    game: &GameRows,
    rows: &Rows,
    players: usize,
    terminated_trained: &[u8],
) -> Result<(), Rejection> {
    let terminated = game.all_terminated(terminated_trained);
    let refuse = |e: PlayerGaeError| reject(Code::InvalidArgument, "out_of_range", e.to_string());
    for env in 0..rows.e {
        // Per seat: a later row holds its next move or the game's end.
        let mut followed = vec![false; players];
        for row in (0..=rows.r).rev() {
            let i = row * rows.e + env;
            let id = game.player_ids[i];
            let seat = usize::from(id);
            if seat >= players {
                return Err(refuse(PlayerGaeError::BadPlayer {
                    row,
                    env,
                    id,
                    players,
                }));
            }
            if terminated[i] != 0 {
                followed.fill(true);
            }
            if row < rows.t && !followed[seat] {
                return Err(refuse(PlayerGaeError::NoBootstrap {
                    row,
                    env,
                    player: id,
                }));
            }
            followed[seat] = true;
        }
    }
    Ok(())
}

/// Arrays decoded with R rows, cut to the T trained rows; the overlap's
/// observations and game ends go to the returned [`GameRows`].
pub(super) struct Split<'a> {
    pub observations: &'a mut Observations,
    pub actions: &'a mut BatchActions,
    pub action_masks: &'a mut Option<Vec<u8>>,
    pub log_probs: &'a mut Vec<f32>,
    pub rewards: &'a mut Vec<f32>,
    pub terminated: &'a mut Vec<u8>,
    pub truncated: &'a mut Vec<u8>,
}

fn split(s: &mut Split<'_>, rows: &Rows, player_ids: Vec<u8>) -> GameRows {
    let (t, e, d) = (rows.t, rows.e, rows.d);
    let te = t * e;
    let overlap_observations = s.observations.split_off((t + 1) * e * d);
    let overlap_terminated = s.terminated.split_off(te);
    s.truncated.truncate(te);
    s.rewards.truncate(te);
    s.log_probs.truncate(te);
    match &mut *s.actions {
        BatchActions::Discrete(a) => a.truncate(te),
        BatchActions::Continuous(a) => {
            let w = a.len() / (rows.r * e).max(1);
            a.truncate(te * w);
        }
    }
    if let Some(m) = &mut *s.action_masks {
        let w = m.len() / (rows.r * e).max(1);
        m.truncate(te * w);
    }
    GameRows {
        player_ids,
        overlap_observations,
        overlap_terminated,
        past_moves: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
