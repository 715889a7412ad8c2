//! Generalised advantage estimation for turn-based games with several
//! players sharing one policy: each player's moves are its own trajectory.
//!
//! Within an env's column of rows (one row per move, whoever made it), the
//! move a player makes at row t is bootstrapped by the value of that same
//! player's *next* move (row t' > t with the same player id), not by the next
//! row; the recursion carries along that player's moves only. The end of a
//! game (a `terminated` row) ends the trajectory of every player: moves
//! before it bootstrap 0 (the end-of-game score reaches each player as the
//! reward of its last move, attributed by the actor). A game that runs past
//! the end of the batch bootstraps each player from its next move in the
//! batch's overlap: rows T..R that follow the T trained rows (they are the
//! next batch's first rows), whose values bootstrap but whose advantages are
//! not computed. A trained move whose player has no later move and no game
//! end in the batch cannot be bootstrapped: the batch is refused.

/// Rows of one batch, laid out `[row * E + env]`: R = T + overlap rows, the
/// first T trained.
pub struct PlayerGaeInput<'a> {
    pub trained_rows: usize,
    pub rows: usize,
    pub envs_per_actor: usize,
    pub players: usize,
    pub player_ids: &'a [u8],
    pub rewards: &'a [f32],
    /// The game ended with this row's move.
    pub terminated: &'a [u8],
    pub values: &'a [f32],
}

#[derive(thiserror::Error, Debug, PartialEq)]
pub enum PlayerGaeError {
    #[error(
        "field `player_ids`: {id} at row {row}, env {env} is not a seat of this game (0..{players})"
    )]
    BadPlayer {
        row: usize,
        env: usize,
        id: u8,
        players: usize,
    },
    #[error(
        "row {row}, env {env}: player {player} has no later move and the game does not end in the batch (the overlap must hold every player's next move)"
    )]
    NoBootstrap { row: usize, env: usize, player: u8 },
}

/// What follows a player's move, seen from later rows.
#[derive(Clone, Copy)]
enum Next {
    /// Nothing in the batch yet.
    Unknown,
    /// The game ends before the player moves again.
    GameOver,
    /// The player's next move: its value, and its advantage (0 for overlap rows).
    Move { value: f64, advantage: f64 },
}

/// Writes advantages and returns (advantage + value) of the T trained rows,
/// each `[T * E]`.
pub fn compute_player_gae(
    input: &PlayerGaeInput<'_>,
    gamma: f64,
    lambda: f64,
    advantages: &mut [f32],
    returns: &mut [f32],
) -> Result<(), PlayerGaeError> {
    let (t_len, r_len, e_len) = (input.trained_rows, input.rows, input.envs_per_actor);
    let n = r_len * e_len;
    assert!(
        t_len <= r_len
            && [
                input.player_ids.len(),
                input.rewards.len(),
                input.terminated.len(),
                input.values.len()
            ]
            .iter()
            .all(|&l| l == n)
            && advantages.len() == t_len * e_len
            && returns.len() == t_len * e_len,
        "compute_player_gae: inconsistent lengths for T={t_len}, R={r_len}, E={e_len}"
    );
    for e in 0..e_len {
        let mut next = vec![Next::Unknown; input.players];
        for r in (0..r_len).rev() {
            let i = r * e_len + e;
            let id = input.player_ids[i];
            let p = usize::from(id);
            if p >= input.players {
                return Err(PlayerGaeError::BadPlayer {
                    row: r,
                    env: e,
                    id,
                    players: input.players,
                });
            }
            if input.terminated[i] != 0 {
                next.fill(Next::GameOver);
            }
            let value = f64::from(input.values[i]);
            if r >= t_len {
                next[p] = Next::Move {
                    value,
                    advantage: 0.0,
                };
                continue;
            }
            let (next_value, carry) = match next[p] {
                Next::GameOver => (0.0, 0.0),
                Next::Move { value, advantage } => (value, advantage),
                Next::Unknown => {
                    return Err(PlayerGaeError::NoBootstrap {
                        row: r,
                        env: e,
                        player: id,
                    });
                }
            };
            let delta = f64::from(input.rewards[i]) + gamma * next_value - value;
            let advantage = delta + gamma * lambda * carry;
            advantages[r * e_len + e] = advantage as f32;
            returns[r * e_len + e] = (advantage + value) as f32;
            next[p] = Next::Move { value, advantage };
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One env; returns the advantages of the trained rows.
    #[allow(clippy::too_many_arguments)]
    fn gae(
        trained: usize,
        players: usize,
        ids: &[u8],
        rewards: &[f32],
        terminated: &[u8],
        values: &[f32],
        gamma: f64,
        lambda: f64,
    ) -> Result<Vec<f32>, PlayerGaeError> {
        let input = PlayerGaeInput {
            trained_rows: trained,
            rows: ids.len(),
            envs_per_actor: 1,
            players,
            player_ids: ids,
            rewards,
            terminated,
            values,
        };
        let mut adv = vec![0.0; trained];
        let mut ret = vec![0.0; trained];
        compute_player_gae(&input, gamma, lambda, &mut adv, &mut ret)?;
        for ((a, r), v) in adv.iter().zip(&ret).zip(values) {
            assert!((r - (a + v)).abs() < 1e-6, "return = advantage + value");
        }
        Ok(adv)
    }

    fn close(got: &[f32], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((f64::from(*g) - w).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn each_player_bootstraps_from_its_own_next_move() {
        // Two players alternating, a game across the batch end; values 1..6,
        // gamma 0.5, lambda 1, no rewards. By hand:
        //   row 2 (p0): 0 + .5*V4 - V2 = -0.5 (row 4 is overlap: no carry)
        //   row 3 (p1): .5*V5 - V3 = -1
        //   row 0 (p0): .5*V2 - V0 = 0.5, plus .5*A2 = 0.25
        //   row 1 (p1): .5*V3 - V1 = 0, plus .5*A3 = -0.5
        let adv = gae(
            4,
            2,
            &[0, 1, 0, 1, 0, 1],
            &[0.0; 6],
            &[0; 6],
            &[1., 2., 3., 4., 5., 6.],
            0.5,
            1.0,
        );
        close(&adv.unwrap(), &[0.25, -0.5, -0.5, -1.0]);
    }

    #[test]
    fn a_game_ending_mid_rollout_ends_every_players_trajectory() {
        // p0 wins with its move at row 2 (score +3, p1 -3, normalised by 5 and
        // credited to each player's last move: rows 2 and 1); a new game
        // starts with p1 at row 3. Values 1..6, gamma 0.5, lambda 1:
        //   row 3 (p1): .5*V5 - V3 = -1
        //   row 2 (p0): 0.6 + 0 - 3 = -2.4
        //   row 1 (p1): the game ends before it moves again: -0.6 - 2 = -2.6
        //   row 0 (p0): .5*V2 - V0 = 0.5, plus .5*A2 = -0.7
        let adv = gae(
            4,
            2,
            &[0, 1, 0, 1, 0, 1],
            &[0.0, -0.6, 0.6, 0.0, 0.0, 0.0],
            &[0, 0, 1, 0, 0, 0],
            &[1., 2., 3., 4., 5., 6.],
            0.5,
            1.0,
        );
        close(&adv.unwrap(), &[-0.7, -2.6, -2.4, -1.0]);
    }

    #[test]
    fn passes_interleave_with_four_players_and_lambda_discounts_the_carry() {
        // Four seats in turn (a pass is a move like any other), two rounds
        // trained and one round of overlap; only player 2 sees rewards.
        // gamma 0.9, lambda 0.8, values: row r has value r/10.
        let ids: Vec<u8> = (0..12).map(|r| (r % 4) as u8).collect();
        let values: Vec<f32> = (0..12).map(|r| r as f32 / 10.0).collect();
        let mut rewards = vec![0.0f32; 12];
        rewards[2] = 1.0;
        rewards[6] = -0.5;
        let adv = gae(8, 4, &ids, &rewards, &[0; 12], &values, 0.9, 0.8).unwrap();
        // Player 2, by hand: A6 = -0.5 + .9*V10 - V6 = -0.5 + 0.9 - 0.6 = -0.2;
        // A2 = 1 + .9*V6 - V2 + .72*A6 = 1 + 0.54 - 0.2 - 0.144 = 1.196.
        // Player 0: A4 = .9*V8 - V4 = 0.72 - 0.4 = 0.32;
        // A0 = .9*V4 - V0 + .72*A4 = 0.36 + 0.2304 = 0.5904.
        close(
            &[adv[2], adv[6], adv[0], adv[4]],
            &[1.196, -0.2, 0.5904, 0.32],
        );
    }

    #[test]
    fn two_games_in_one_env_column_and_a_game_ending_in_the_overlap() {
        // Game 1: rows 0-1 (p1 wins at row 1); game 2: rows 2-4, p0 wins at
        // row 4, an overlap row: the batch still credits p1's last move (row
        // 3) and ends its trajectory there. gamma 1, lambda 1, values 0.
        let adv = gae(
            4,
            2,
            &[0, 1, 0, 1, 0],
            &[-2.0, 2.0, 0.0, -1.0, 1.0],
            &[0, 1, 0, 0, 1],
            &[0.0; 5],
            1.0,
            1.0,
        );
        // Row 2 (p0) bootstraps from its move at row 4 (overlap): value 0, no carry.
        close(&adv.unwrap(), &[-2.0, 2.0, 0.0, -1.0]);
    }

    #[test]
    fn a_move_without_a_bootstrap_or_a_foreign_seat_is_refused() {
        let err = gae(2, 2, &[0, 1], &[0.0; 2], &[0; 2], &[0.0; 2], 0.9, 0.9).unwrap_err();
        assert_eq!(
            err,
            PlayerGaeError::NoBootstrap {
                row: 1,
                env: 0,
                player: 1
            }
        );
        let err = gae(1, 2, &[0, 2], &[0.0; 2], &[0; 2], &[0.0; 2], 0.9, 0.9).unwrap_err();
        assert!(
            matches!(err, PlayerGaeError::BadPlayer { id: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("field `player_ids`"));
    }
}
