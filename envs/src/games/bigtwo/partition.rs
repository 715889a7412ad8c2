//! The fewest plays a hand can be emptied in: the hand split into
//! combinations (an exact cover), found by a memoised search over the
//! subsets of the hand. The planner player (`planner`) reads a move's cost
//! from it: a play that belongs to a best split leaves the rest of the hand
//! one play shorter; a play that breaks the split (a single out of a pair,
//! a card out of a straight) costs a play more.

use super::combo::{Combo, DECK, Kind, combos_in};
use std::collections::HashMap;

/// How good a split is, lower first: plays, then singles among them (a
/// lone single is the hardest play to get rid of).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cost {
    pub plays: u8,
    pub singles: u8,
}

/// The splits of one hand and its subsets.
pub struct Partition {
    /// Every combination within the hand, by its lowest card.
    by_low: Vec<Vec<(u64, Combo)>>,
    /// A subset's best cost and the play covering its lowest card in it.
    memo: HashMap<u64, (Cost, u64)>,
}

impl Partition {
    pub fn new(hand: u64) -> Self {
        let mut by_low = vec![Vec::new(); DECK];
        for (set, combo) in combos_in(hand) {
            by_low[set.trailing_zeros() as usize].push((set, combo));
        }
        Self {
            by_low,
            memo: HashMap::new(),
        }
    }

    /// The best split's cost of `set` (a subset of the hand).
    pub fn cost(&mut self, set: u64) -> Cost {
        self.solve(set).0
    }

    /// The plays of a best split of `set`, each as its cards.
    pub fn plays(&mut self, mut set: u64) -> Vec<u64> {
        let mut out = Vec::new();
        while set != 0 {
            let (_, play) = self.solve(set);
            out.push(play);
            set &= !play;
        }
        out
    }

    fn solve(&mut self, set: u64) -> (Cost, u64) {
        if set == 0 {
            return (
                Cost {
                    plays: 0,
                    singles: 0,
                },
                0,
            );
        }
        if let Some(&known) = self.memo.get(&set) {
            return known;
        }
        let low = set.trailing_zeros() as usize;
        let mut best: Option<(Cost, u64)> = None;
        // Indexing, not iterating: the recursion borrows `self` mutably.
        for i in 0..self.by_low[low].len() {
            let (play, combo) = self.by_low[low][i];
            if play & !set != 0 {
                continue;
            }
            let rest = self.solve(set & !play).0;
            let cost = Cost {
                plays: rest.plays + 1,
                singles: rest.singles + u8::from(combo.kind == Kind::Single),
            };
            if best.is_none_or(|(b, _)| cost < b) {
                best = Some((cost, play));
            }
        }
        // The lowest card alone is always a play, so `best` is set.
        let found = best.unwrap_or((
            Cost {
                plays: u8::MAX,
                singles: u8::MAX,
            },
            1 << low,
        ));
        self.memo.insert(set, found);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::bigtwo::combo::{cards, classify, set_of as set};

    fn cost(names: &str) -> (u8, u8) {
        let hand = set(names);
        let c = Partition::new(hand).cost(hand);
        (c.plays, c.singles)
    }

    #[test]
    fn costs_of_hand_worked_hands() {
        assert_eq!(cost(""), (0, 0));
        assert_eq!(cost("7♣"), (1, 1));
        assert_eq!(cost("7♣ 7♠"), (1, 0));
        // A straight and a lone 3: two plays, not a pair and four singles.
        assert_eq!(cost("3♦ 3♣ 4♥ 5♠ 6♦ 7♣"), (2, 1));
        // A full house (triple + pair) beats a triple and a pair: 1 play.
        assert_eq!(cost("9♦ 9♣ 9♠ Q♥ Q♠"), (1, 0));
        // Four 5s and three singles: four of a kind takes one single along.
        assert_eq!(cost("5♦ 5♣ 5♥ 5♠ 8♦ J♣ 2♠"), (3, 2));
        // Nothing combines: one play per card.
        assert_eq!(cost("3♦ 5♣ 8♥ J♠ 2♦"), (5, 5));
        // A flush of five and a pair: two plays, no single.
        assert_eq!(cost("3♥ 6♥ 9♥ J♥ K♥ A♦ A♣"), (2, 0));
    }

    #[test]
    fn plays_cover_the_hand_exactly_at_the_cost() {
        let hand = set("3♦ 3♣ 4♥ 5♠ 6♦ 7♣ 9♦ 9♣ 9♠ Q♥ K♠ A♦ 2♠");
        let mut p = Partition::new(hand);
        let plays = p.plays(hand);
        let union = plays.iter().fold(0u64, |a, &b| {
            assert_eq!(a & b, 0, "plays overlap");
            a | b
        });
        assert_eq!(union, hand);
        assert!(plays.iter().all(|&c| classify(c).is_some()));
        assert_eq!(plays.len() as u8, p.cost(hand).plays);
        // The count itself, against a search without the memo or the table.
        assert_eq!(p.cost(hand), brute_cost(hand));
    }

    /// The cost by trying every combination covering the lowest card,
    /// without memo and without the action table.
    fn brute_cost(set: u64) -> Cost {
        if set == 0 {
            return Cost {
                plays: 0,
                singles: 0,
            };
        }
        let low = set.trailing_zeros();
        let others: Vec<u8> = cards(set & !(1 << low)).collect();
        let mut best = None;
        for mask in 0u32..(1 << others.len()) {
            if !matches!(mask.count_ones(), 0 | 1 | 2 | 4) {
                continue;
            }
            let play = others
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .fold(1u64 << low, |s, (_, &c)| s | 1 << c);
            let Some(combo) = classify(play) else {
                continue;
            };
            let rest = brute_cost(set & !play);
            let c = Cost {
                plays: rest.plays + 1,
                singles: rest.singles + u8::from(combo.kind == Kind::Single),
            };
            if best.is_none_or(|b| c < b) {
                best = Some(c);
            }
        }
        best.unwrap_or_else(|| unreachable!("a single always plays"))
    }

    #[test]
    fn the_search_agrees_with_brute_force_on_random_hands() {
        use rand::seq::SliceRandom;
        use rand::{SeedableRng, rngs::StdRng};
        let mut rng = StdRng::seed_from_u64(7);
        for size in [4usize, 7, 9] {
            for _ in 0..20 {
                let mut deck: Vec<u8> = (0..52).collect();
                deck.shuffle(&mut rng);
                let hand = deck[..size].iter().fold(0u64, |a, &c| a | 1 << c);
                assert_eq!(Partition::new(hand).cost(hand), brute_cost(hand));
            }
        }
    }
}
