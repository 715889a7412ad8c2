//! The bootstrap check against what it replaced: the update's own
//! per-player GAE run with zero values, whose refusals it must repeat.

use super::*;
use sebulba_algorithms::gae_players::{PlayerGaeInput, compute_player_gae};

/// The check as it was: a whole per-player GAE over zeros, its error the
/// refusal.
fn by_gae(
    game: &GameRows,
    rows: &Rows,
    players: usize,
    terminated: &[u8],
) -> Result<(), Rejection> {
    let n = (rows.r + 1) * rows.e;
    let terminated = game.all_terminated(terminated);
    let zeros = vec![0.0f32; n];
    let input = PlayerGaeInput {
        trained_rows: rows.t,
        rows: rows.r + 1,
        envs_per_actor: rows.e,
        players,
        player_ids: &game.player_ids,
        rewards: &zeros,
        terminated: &terminated,
        values: &zeros,
    };
    let (mut adv, mut ret) = (vec![0.0; rows.t * rows.e], vec![0.0; rows.t * rows.e]);
    compute_player_gae(&input, 0.0, 0.0, &mut adv, &mut ret)
        .map_err(|e| reject(Code::InvalidArgument, "out_of_range", e.to_string()))
}

/// A game's rows of T trained and K overlap moves in E envs: `ids`
/// `[(T + K + 1) * E]`, `ends` `[(T + K) * E]` (split into trained and
/// overlap as the decoder does).
fn rows_of(t: usize, k: usize, e: usize, ids: &[u8], ends: &[u8]) -> (GameRows, Rows, Vec<u8>) {
    let rows = Rows {
        t,
        r: t + k,
        e,
        d: 1,
    };
    let game = GameRows {
        player_ids: ids.to_vec(),
        overlap_observations: Observations::default(),
        overlap_terminated: ends[t * e..].to_vec(),
        past_moves: Vec::new(),
    };
    (game, rows, ends[..t * e].to_vec())
}

/// Row-major digits of `code` in base `base`, `len` of them.
fn digits(mut code: usize, base: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| {
            let d = code % base;
            code /= base;
            d as u8
        })
        .collect()
}

/// Every seat sequence (seats out of range too) and every pattern of game
/// ends of small batches, one and two envs: the direct check accepts and
/// refuses exactly the batches the GAE did, with the same reason.
#[test]
fn the_direct_check_decides_as_the_per_player_gae_did() {
    let (mut accepted, mut refused) = (0, 0);
    for (players, t, k, e) in [
        (2usize, 1, 1, 1),
        (2, 3, 1, 1),
        (3, 2, 2, 1),
        (3, 3, 0, 1),
        (2, 2, 1, 2),
    ] {
        let (r, seats) = (t + k, players + 1);
        for ids in 0..seats.pow(((r + 1) * e) as u32) {
            for ends in 0..1usize << (r * e) {
                let ids = digits(ids, seats, (r + 1) * e);
                let ends = digits(ends, 2, r * e);
                let (game, rows, trained) = rows_of(t, k, e, &ids, &ends);
                let want = by_gae(&game, &rows, players, &trained);
                let got = check_bootstrap(&game, &rows, players, &trained);
                assert_eq!(got, want, "{players} players, ids {ids:?}, ends {ends:?}");
                if got.is_ok() {
                    accepted += 1;
                } else {
                    refused += 1;
                }
            }
        }
    }
    assert!(
        accepted > 1000 && refused > 1000,
        "{accepted} accepted, {refused} refused"
    );
}

/// A trained move whose player never moves again in the batch, in a game
/// that does not end there, is refused by its row; the valid game batches
/// of the decoder's tests are accepted.
#[test]
fn a_move_without_its_players_next_is_refused_by_row() {
    // Two seats, T = 2, K = 0: seat 1 moves at row 1, then only seat 0.
    let (game, rows, trained) = rows_of(2, 0, 1, &[0, 1, 0], &[0, 0]);
    let err = check_bootstrap(&game, &rows, 2, &trained).expect_err("no bootstrap");
    assert_eq!(
        (err.code, err.reason),
        (Code::InvalidArgument, "out_of_range")
    );
    assert_eq!(
        err.message,
        "row 1, env 0: player 1 has no later move and the game does not end in the batch (the overlap must hold every player's next move)"
    );
    assert_eq!(Err(err), by_gae(&game, &rows, 2, &trained));
    // The same game ending with row 1's move bootstraps it.
    let (game, rows, trained) = rows_of(2, 0, 1, &[0, 1, 0], &[0, 1]);
    assert_eq!(check_bootstrap(&game, &rows, 2, &trained), Ok(()));
    // `game_batch` in validate's tests: env 1's game ends at row 1.
    let (game, rows, trained) = rows_of(2, 1, 2, &[0, 1, 1, 0, 0, 0, 1, 1], &[0, 0, 0, 1, 0, 0]);
    assert_eq!(check_bootstrap(&game, &rows, 2, &trained), Ok(()));
}
