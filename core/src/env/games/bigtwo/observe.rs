//! What a player sees, as 210 floats (0 or 1), seats relative to the player
//! (1 = next to act after it, 2 = across, 3 = before it):
//!
//! | offset | width | what |
//! | --- | --- | --- |
//! | 0 | 52 | the player's own hand |
//! | 52 | 3 × 14 | each opponent's number of cards (one-hot 0..13), seats 1, 2, 3 |
//! | 94 | 52 | every card played so far |
//! | 146 | 52 | the combination to beat (none when leading) |
//! | 198 | 5 | its size class: none (leading), single, pair, triple, five cards |
//! | 203 | 4 | who played it, relative seat 0..3 (none when leading) |
//! | 207 | 3 | passes since it was played (one-hot 0..2) |

use super::combo::{DECK, cards};
use super::game::{BigTwo, PLAYERS};

pub const OBS_DIM: usize = 210;

const OPPONENTS: usize = 52;
const PLAYED: usize = OPPONENTS + 3 * 14;
const TABLE: usize = PLAYED + DECK;
const KIND: usize = TABLE + DECK;
const BY: usize = KIND + 5;
const PASSES: usize = BY + 4;

/// Writes what `player` sees into `out` (`OBS_DIM` floats).
pub fn observe(game: &BigTwo, player: usize, out: &mut [f32]) {
    out[..OBS_DIM].fill(0.0);
    let mut set = |base: usize, set: u64| {
        for c in cards(set) {
            out[base + usize::from(c)] = 1.0;
        }
    };
    set(0, game.hand(player));
    set(PLAYED, game.played());
    if let Some(t) = game.table() {
        set(TABLE, t.cards);
    }
    for k in 1..PLAYERS {
        let left = game.hand((player + k) % PLAYERS).count_ones() as usize;
        out[OPPONENTS + (k - 1) * 14 + left] = 1.0;
    }
    match game.table() {
        None => out[KIND] = 1.0,
        Some(t) => {
            let class = match t.combo.kind.size() {
                1 => 1,
                2 => 2,
                3 => 3,
                _ => 4,
            };
            out[KIND + class] = 1.0;
            out[BY + (t.by + PLAYERS - player) % PLAYERS] = 1.0;
            out[PASSES + usize::from(game.passes())] = 1.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::games::bigtwo::actions::action_of;
    use crate::env::games::bigtwo::combo::parse;

    #[test]
    fn a_hand_worked_position() {
        // Player 0 holds the 3♦ and the lowest 13 cards; it leads the 3♦.
        let hands = [0x1fff, 0x1fff << 13, 0x1fff << 26, 0x1fff << 39];
        let mut g = BigTwo::from_hands(hands).unwrap();
        g.step(action_of(&[0]).unwrap()).unwrap();
        let mut o = vec![9.0; OBS_DIM];
        observe(&g, 1, &mut o);
        assert!(o.iter().all(|&x| x == 0.0 || x == 1.0));
        // Player 1's own hand: cards 13..26.
        assert_eq!(o[..52].iter().filter(|&&x| x == 1.0).count(), 13);
        assert_eq!(o[13], 1.0);
        // Opponents of player 1: seat 1 (player 2) 13 cards, seat 2 (player 3)
        // 13, seat 3 (player 0) 12.
        assert_eq!(o[OPPONENTS + 13], 1.0);
        assert_eq!(o[OPPONENTS + 14 + 13], 1.0);
        assert_eq!(o[OPPONENTS + 28 + 12], 1.0);
        let three = usize::from(parse("3♦").unwrap());
        assert_eq!(o[PLAYED + three], 1.0);
        assert_eq!(o[TABLE + three], 1.0);
        assert_eq!(o[KIND + 1], 1.0, "a single to beat");
        assert_eq!(o[BY + 3], 1.0, "played by the seat before");
        assert_eq!(o[PASSES], 1.0);
        assert_eq!(
            o.iter().sum::<f32>(),
            13.0 + 3.0 + 1.0 + 1.0 + 1.0 + 1.0 + 1.0
        );
    }
}
