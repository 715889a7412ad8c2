//! What a rollout of a turn-based game adds: whose move each row is, the
//! end-of-game scores credited to each player's last move, and the overlap.
//!
//! A batch of a P-player game carries K = P - 1 moves past its T trained
//! rows: with seats in turn, the move a player makes at trained row t is
//! bootstrapped by its next move at row t + P, which for the last trained
//! rows lies in the overlap. Those K moves (and the observation after them)
//! are the next batch's first rows, carried over rather than played again,
//! so every move is trained exactly once. A score reaches the move that
//! earned it even when the game ends in the next batch: the move is still
//! in the buffer then, as a carried row.

use sebulba_envs::{VecStepOut, VectorEnv};
use sebulba_proto::{Tensor, encode_i32};

pub(crate) struct Turns {
    players: usize,
    e_len: usize,
    /// `[(rows + 1) * E]`: the seat to move at each observation row.
    ids: Vec<i32>,
    /// The first row of each env's current game in the buffer (0 when it
    /// began before the buffer's first row).
    game_start: Vec<usize>,
    /// The env's answer to `to_move`, reused step to step.
    scratch: Vec<u8>,
}

impl Turns {
    /// For a game env (`None` for one player).
    pub(crate) fn new(venv: &dyn VectorEnv, rows: usize) -> Option<Self> {
        let players = venv.spec().players;
        let e_len = venv.num_envs();
        let mut probe = vec![0u8; e_len];
        (players > 1 && venv.to_move(&mut probe)).then(|| Self {
            players,
            e_len,
            ids: vec![0; (rows + 1) * e_len],
            game_start: vec![0; e_len],
            scratch: probe.clone(),
        })
    }

    /// Notes who moves at observation row `t`.
    pub(crate) fn record_movers(&mut self, t: usize, venv: &dyn VectorEnv) {
        let e = self.e_len;
        venv.to_move(&mut self.scratch);
        for (slot, &id) in self.ids[t * e..(t + 1) * e].iter_mut().zip(&self.scratch) {
            *slot = i32::from(id);
        }
    }

    /// The seat to move in each env at observation row `t`.
    pub(crate) fn movers(&self, t: usize) -> &[i32] {
        &self.ids[t * self.e_len..(t + 1) * self.e_len]
    }

    /// Credits the scores of the games that ended with row `t`'s moves to
    /// each player's last move in that game (`rewards` is `[rows * E]`).
    pub(crate) fn credit(&mut self, t: usize, out: &VecStepOut, rewards: &mut [f32]) {
        let (e_len, p) = (self.e_len, self.players);
        for e in 0..e_len {
            if !out.terminated[e] {
                continue;
            }
            let scores = &out.scores[e * p..(e + 1) * p];
            let mut credited = vec![false; p];
            // Seats move in turn, so each player's last move is within the
            // last P rows of its game.
            for r in (self.game_start[e]..=t).rev().take(p) {
                let seat = self.ids[r * e_len + e] as usize;
                if seat < p && !credited[seat] {
                    credited[seat] = true;
                    rewards[r * e_len + e] += scores[seat];
                }
            }
            self.game_start[e] = t + 1;
        }
    }

    /// Moves rows `from..` (and the observation row after them) to the
    /// front: the next batch starts with the overlap.
    pub(crate) fn shift(&mut self, from: usize) {
        let e = self.e_len;
        self.ids.copy_within(from * e.., 0);
        for s in &mut self.game_start {
            *s = s.saturating_sub(from);
        }
    }

    /// Forgets where games began (after a dropped rollout: the buffer
    /// starts again at row 0).
    pub(crate) fn restart(&mut self) {
        self.game_start.fill(0);
    }

    /// The batch's `player_ids` tensor, `[rows + 1, E]`.
    pub(crate) fn encode(&self) -> Tensor {
        let rows = self.ids.len() / self.e_len;
        encode_i32(&[rows, self.e_len], &self.ids)
    }
}

/// Moves rows `from..` of a `[rows * width]` array to the front.
pub(crate) fn shift_rows<T: Copy>(v: &mut [T], from: usize, width: usize) {
    v.copy_within(from * width.., 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turns(players: usize, ids: &[i32]) -> Turns {
        Turns {
            players,
            e_len: 1,
            ids: ids.to_vec(),
            game_start: vec![0],
            scratch: vec![0],
        }
    }

    fn ended(scores: &[f32]) -> VecStepOut {
        let mut out = VecStepOut::sized(1, 1).resized(1, 1, scores.len());
        out.terminated[0] = true;
        out.scores.copy_from_slice(scores);
        out
    }

    #[test]
    fn each_players_score_goes_to_its_last_move_of_the_game() {
        // Four seats; the game ends with seat 3's move at row 5: seats 3, 2,
        // 1, 0 made rows 5, 4, 3, 2; rows 0-1 are earlier moves of seats 2-3.
        let mut t = turns(4, &[2, 3, 0, 1, 2, 3, 0, 1]);
        let mut rewards = vec![0.0; 7];
        t.credit(5, &ended(&[-0.4, 1.2, -0.2, -0.6]), &mut rewards);
        assert_eq!(rewards, [0.0, 0.0, -0.4, 1.2, -0.2, -0.6, 0.0]);
        assert_eq!(t.game_start, [6]);
        // A game of two moves with four seats: only its own rows are credited.
        let mut rewards = vec![0.0; 8];
        t.credit(7, &ended(&[1.0, 2.0, 3.0, 4.0]), &mut rewards);
        assert_eq!(rewards[..6], [0.0; 6]);
        assert_eq!(rewards[6..], [1.0, 2.0], "rows 6 and 7: seats 0 and 1");
    }

    #[test]
    fn the_overlap_moves_to_the_front_and_is_still_credited_there() {
        // Two seats, T = 4 trained rows and K = 1: rows 0-4, observation row 5.
        let mut t = turns(2, &[0, 1, 0, 1, 0, 1]);
        t.game_start = vec![1];
        t.shift(4);
        assert_eq!(t.ids[..2], [0, 1], "row 4 and the last observation row");
        assert_eq!(t.game_start, [0], "the game began before the new first row");
        // The game ends with seat 1's move at new row 1: seat 0's last move is
        // the carried row 0.
        let mut rewards = vec![0.0; 5];
        t.credit(1, &ended(&[-1.0, 1.0]), &mut rewards);
        assert_eq!(rewards[..2], [-1.0, 1.0]);
        let mut v = vec![1, 2, 3, 4, 5, 6];
        shift_rows(&mut v, 2, 2);
        assert_eq!(v[..2], [5, 6]);
    }
}
