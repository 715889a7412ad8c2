//! What a player sees, as 496 floats (0 or 1), seats relative to the player
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
//! | 210 | 13 × 22 | the hand by position (lowest card first), see below |
//!
//! The by-position block is there because actions name hand positions
//! ([`super::actions`]): the network reads, for position i, the card it
//! holds and what it can combine into, instead of having to count the
//! 52-bit hand up to position i. Each position has 22 flags: the card's rank
//! (13, 3 to 2), its suit (4), and whether the hand holds a pair, a triple or
//! four of its rank, a straight through it (five consecutive ranks, none a
//! 2), and a flush in its suit (five cards of one suit). Positions past the
//! hand's end are all zero.

use super::actions::HAND;
use super::combo::{DECK, RANKS, cards, rank, suit};
use super::game::{BigTwo, PLAYERS};

pub const OBS_DIM: usize = POSITIONS + HAND * PER_POSITION;

const OPPONENTS: usize = 52;
const PLAYED: usize = OPPONENTS + 3 * 14;
const TABLE: usize = PLAYED + DECK;
const KIND: usize = TABLE + DECK;
const BY: usize = KIND + 5;
const PASSES: usize = BY + 4;
const POSITIONS: usize = PASSES + 3;
/// Flags per hand position: rank, suit, pair, triple, four, straight, flush.
const PER_POSITION: usize = RANKS + 4 + 5;

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
            out[KIND + 1 + t.combo.kind.class()] = 1.0;
            out[BY + (t.by + PLAYERS - player) % PLAYERS] = 1.0;
            out[PASSES + usize::from(game.passes())] = 1.0;
        }
    }
    by_position(game.hand(player), &mut out[POSITIONS..OBS_DIM]);
}

/// The by-position block of a hand (`HAND * PER_POSITION` floats, zeroed).
fn by_position(hand: u64, out: &mut [f32]) {
    let mut per_rank = [0u8; RANKS];
    let mut per_suit = [0u8; 4];
    for c in cards(hand) {
        per_rank[usize::from(rank(c))] += 1;
        per_suit[usize::from(suit(c))] += 1;
    }
    // Ranks 3 (0) to A (11) that some held straight runs through: a
    // straight's lowest rank is 0..=7.
    let mut in_straight = [false; RANKS];
    for low in 0..=7 {
        if per_rank[low..low + 5].iter().all(|&k| k > 0) {
            in_straight[low..low + 5].fill(true);
        }
    }
    for (p, c) in cards(hand).enumerate() {
        let (r, s) = (usize::from(rank(c)), usize::from(suit(c)));
        let at = &mut out[p * PER_POSITION..(p + 1) * PER_POSITION];
        at[r] = 1.0;
        at[RANKS + s] = 1.0;
        let flags = [
            per_rank[r] >= 2,
            per_rank[r] >= 3,
            per_rank[r] == 4,
            in_straight[r],
            per_suit[s] >= 5,
        ];
        for (k, f) in flags.into_iter().enumerate() {
            at[RANKS + 4 + k] = f32::from(u8::from(f));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::bigtwo::actions::action_of;
    use crate::games::bigtwo::combo::parse;

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
        // Player 1 holds cards 13..=25: the 6♣ 6♥ 6♠ triple (positions
        // 0-2), four 7s (3-6), four 8s (7-10) and the 9♦ 9♣ pair (11-12).
        // Four ranks make no straight; no suit has five cards.
        let pos = |p: usize| &o[POSITIONS + p * PER_POSITION..POSITIONS + (p + 1) * PER_POSITION];
        let flags = |p: usize| pos(p)[RANKS + 4..].to_vec();
        // Position 0: 6♣ (card 13: rank 3, suit 1), of a triple.
        assert_eq!(pos(0)[3], 1.0);
        assert_eq!(pos(0)[RANKS + 1], 1.0);
        assert_eq!(flags(0), [1.0, 1.0, 0.0, 0.0, 0.0]);
        // Positions 3..=6: the four 7s.
        assert_eq!(flags(3), [1.0, 1.0, 1.0, 0.0, 0.0]);
        // Position 12: 9♣ (card 25: rank 6, suit 1), of a pair.
        assert_eq!(pos(12)[6], 1.0);
        assert_eq!(pos(12)[RANKS + 1], 1.0);
        assert_eq!(flags(12), [1.0, 0.0, 0.0, 0.0, 0.0]);
        let by_position: f32 = o[POSITIONS..].iter().sum();
        assert_eq!(by_position, 13.0 * 2.0 + 3.0 * 2.0 + 8.0 * 3.0 + 2.0);
        assert_eq!(
            o.iter().sum::<f32>(),
            13.0 + 3.0 + 1.0 + 1.0 + 1.0 + 1.0 + 1.0 + by_position
        );
    }

    /// Straights and flushes by position, hand-worked: 3♦ 4♣ 5♥ 6♠ 7♦ (a
    /// straight), 9♦ J♦ K♦ (five diamonds with the 3♦ and 7♦), a lone A♥
    /// and the 2♣ 2♠ pair: eleven cards.
    #[test]
    fn straights_and_flushes_by_position() {
        let hand = [
            "3♦", "4♣", "5♥", "6♠", "7♦", "9♦", "J♦", "K♦", "A♥", "2♣", "2♠",
        ]
        .iter()
        .map(|n| 1u64 << parse(n).unwrap())
        .fold(0, |a, b| a | b);
        let mut o = vec![0.0; HAND * PER_POSITION];
        by_position(hand, &mut o);
        let flags = |p: usize| o[p * PER_POSITION + RANKS + 4..(p + 1) * PER_POSITION].to_vec();
        // pair, triple, four, straight, flush
        assert_eq!(flags(0), [0.0, 0.0, 0.0, 1.0, 1.0], "3♦");
        assert_eq!(flags(1), [0.0, 0.0, 0.0, 1.0, 0.0], "4♣");
        assert_eq!(flags(4), [0.0, 0.0, 0.0, 1.0, 1.0], "7♦");
        assert_eq!(flags(5), [0.0, 0.0, 0.0, 0.0, 1.0], "9♦");
        assert_eq!(flags(8), [0.0; 5], "A♥");
        assert_eq!(flags(9), [1.0, 0.0, 0.0, 0.0, 0.0], "2♣");
        assert_eq!(flags(10), [1.0, 0.0, 0.0, 0.0, 0.0], "2♠");
        // Positions 11 and 12 are past the hand's end.
        assert!(o[11 * PER_POSITION..].iter().all(|&x| x == 0.0));
    }
}
