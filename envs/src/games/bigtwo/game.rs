//! One game of Big Two for four players: the deal, whose turn it is, the
//! legal moves, a move, and the end-of-game scores.
//!
//! Rules (see `combo` for the combinations and their ranking): 52 cards, 13
//! to each player. The holder of the 3♦ leads, and that first play must
//! include the 3♦. The player in control (leading) plays any combination;
//! each next player (seats in ascending order, wrapping) plays a combination
//! of the same size that beats the one on the table, or passes. After three
//! passes in a row control returns to the last player who played, who leads
//! anew (a player who passed may play again when the turn comes back). The
//! first player to empty the hand wins and the game ends: the winner scores
//! the sum of the cards the others still hold, each other player minus the
//! cards in their hand (zero-sum).

use super::actions::{ACTIONS, HAND, PASS, action_of_positions, table};
use super::combo::{Combo, DECK, classify, combos_in};
use rand::Rng;
use rand::seq::SliceRandom;

pub const PLAYERS: usize = 4;

/// The combination to beat and who played it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    pub combo: Combo,
    pub cards: u64,
    pub by: usize,
}

#[derive(thiserror::Error, Debug, PartialEq, Eq)]
pub enum MoveError {
    #[error("action {action} is outside the action space (0..{ACTIONS})")]
    OutOfRange { action: usize },
    #[error("action {action} is not a legal move for player {player} now")]
    Illegal { action: usize, player: usize },
    #[error("the game is over")]
    Over,
    #[error("bad deal: {0}")]
    BadDeal(String),
}

#[derive(Clone, Debug)]
pub struct BigTwo {
    hands: [u64; PLAYERS],
    to_move: usize,
    table: Option<Table>,
    passes: u8,
    played: u64,
    first: bool,
    over: bool,
}

impl BigTwo {
    /// A shuffled deal.
    pub fn deal(rng: &mut impl Rng) -> Self {
        let mut deck: Vec<u8> = (0..DECK as u8).collect();
        deck.shuffle(rng);
        let mut hands = [0u64; PLAYERS];
        for (i, c) in deck.iter().enumerate() {
            hands[i / HAND] |= 1 << c;
        }
        Self::from_hands(hands).unwrap_or_else(|_| unreachable!("a shuffled deck deals 4 x 13"))
    }

    /// A game from given hands: four disjoint sets of 13 covering the deck.
    pub fn from_hands(hands: [u64; PLAYERS]) -> Result<Self, MoveError> {
        let all = hands.iter().fold(0u64, |a, h| a | h);
        if hands.iter().any(|h| h.count_ones() as usize != HAND)
            || all.count_ones() as usize != DECK
        {
            return Err(MoveError::BadDeal("four disjoint hands of 13 cards".into()));
        }
        let leader = hands.iter().position(|h| h & 1 != 0).unwrap_or(0);
        Ok(Self {
            hands,
            to_move: leader,
            table: None,
            passes: 0,
            played: 0,
            first: true,
            over: false,
        })
    }

    pub fn to_move(&self) -> usize {
        self.to_move
    }

    pub fn hand(&self, player: usize) -> u64 {
        self.hands[player]
    }

    pub fn table(&self) -> Option<Table> {
        self.table
    }

    /// Passes since the last play (0 to 2).
    pub fn passes(&self) -> u8 {
        self.passes
    }

    /// Every card played so far.
    pub fn played(&self) -> u64 {
        self.played
    }

    pub fn is_over(&self) -> bool {
        self.over
    }

    /// The cards `action` plays from the mover's hand (none for pass, or for
    /// positions the hand does not have).
    pub fn cards_of(&self, action: usize) -> Option<u64> {
        let positions = table().get(action)?;
        let hand = self.hands[self.to_move];
        let sorted: Vec<u8> = super::combo::cards(hand).collect();
        positions
            .iter()
            .map(|&p| sorted.get(usize::from(p)).map(|c| 1u64 << c))
            .try_fold(0u64, |a, c| c.map(|c| a | c))
    }

    /// The legal moves of the player to move, as a mask over the action
    /// space (all false once the game is over).
    pub fn legal_mask(&self, mask: &mut [bool]) {
        mask.fill(false);
        if self.over {
            return;
        }
        let hand = self.hands[self.to_move];
        mask[PASS] = self.table.is_some();
        let need = self.table.map(|t| t.combo.kind.size());
        // The hand's combinations (a few dozen), not the 1,364 position sets.
        for (cards, combo) in combos_in(hand) {
            if need.is_some_and(|n| n != combo.kind.size())
                || self.first && cards & 1 == 0
                || self.table.is_some_and(|t| !combo.beats(&t.combo))
            {
                continue;
            }
            // A card's position is the number of lower cards held.
            let positions = super::combo::cards(cards).fold(0u16, |s, c| {
                s | 1 << (hand & ((1u64 << c) - 1)).count_ones()
            });
            if let Some(a) = action_of_positions(positions) {
                mask[a] = true;
            }
        }
    }

    /// Whether the mover may play `cards` now (cards from the mover's hand).
    pub fn allowed(&self, cards: u64) -> bool {
        let Some(combo) = classify(cards) else {
            return false;
        };
        if self.first && cards & 1 == 0 {
            return false;
        }
        self.table.is_none_or(|t| combo.beats(&t.combo))
    }

    /// Makes the mover's move; at the end of the game returns every player's
    /// score (see the module docs), unscaled.
    pub fn step(&mut self, action: usize) -> Result<Option<[f64; PLAYERS]>, MoveError> {
        if self.over {
            return Err(MoveError::Over);
        }
        if action >= ACTIONS {
            return Err(MoveError::OutOfRange { action });
        }
        let player = self.to_move;
        let illegal = MoveError::Illegal { action, player };
        if action == PASS {
            if self.table.is_none() {
                return Err(illegal);
            }
            self.passes += 1;
            if self.passes == 3 {
                self.table = None;
                self.passes = 0;
            }
        } else {
            let cards = self.cards_of(action).ok_or(illegal)?;
            let combo = classify(cards)
                .filter(|_| self.allowed(cards))
                .ok_or(MoveError::Illegal { action, player })?;
            self.hands[player] &= !cards;
            self.played |= cards;
            self.table = Some(Table {
                combo,
                cards,
                by: player,
            });
            self.passes = 0;
            self.first = false;
            if self.hands[player] == 0 {
                self.over = true;
                return Ok(Some(self.scores(player)));
            }
        }
        self.to_move = (player + 1) % PLAYERS;
        Ok(None)
    }

    fn scores(&self, winner: usize) -> [f64; PLAYERS] {
        let left = self.hands.map(|h| f64::from(h.count_ones()));
        let mut s = left.map(|l| -l);
        s[winner] = left.iter().sum();
        s
    }
}
