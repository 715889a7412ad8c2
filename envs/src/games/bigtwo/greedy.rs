//! A rule-based opponent (the evaluation's "greedy" player). Its rule: when
//! leading, shed as many cards as possible, as cheaply as possible: the
//! lowest five-card hand if it has one, else the lowest triple, else the
//! lowest pair, else the lowest single. When following, play the lowest
//! combination that beats the table; pass only when nothing does. ("Lowest"
//! is the ranking of `combo`: category, then key.)

use super::actions::{ACTIONS, PASS};
use super::combo::classify;
use super::game::BigTwo;

/// The greedy player's move for the player to move (pass when nothing is
/// legal, which only happens once the game is over).
pub fn greedy_move(game: &BigTwo) -> usize {
    let mut mask = vec![false; ACTIONS];
    game.legal_mask(&mut mask);
    let leading = game.table().is_none();
    let mut best: Option<(usize, (i8, super::combo::Kind, u8))> = None;
    for a in (0..ACTIONS).filter(|&a| a != PASS && mask[a]) {
        let Some(combo) = game.cards_of(a).and_then(classify) else {
            continue;
        };
        // Leading: more cards first; then lower.
        let size = if leading {
            -(combo.kind.size() as i8)
        } else {
            0
        };
        let rank = (size, combo.kind, combo.key);
        if best.is_none_or(|(_, b)| rank < b) {
            best = Some((a, rank));
        }
    }
    best.map_or(PASS, |(a, _)| a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::bigtwo::combo::{name, parse};

    fn hand(names: &str) -> u64 {
        names
            .split_whitespace()
            .map(|n| 1u64 << parse(n).unwrap())
            .fold(0, |a, b| a | b)
    }

    /// Deals `first` to player 0 and the rest of the deck to the others.
    fn game_with(first: &str) -> BigTwo {
        let h0 = hand(first);
        let rest: Vec<u8> = (0..52u8).filter(|c| h0 & (1 << c) == 0).collect();
        let mut hands = [h0, 0, 0, 0];
        for (i, c) in rest.iter().enumerate() {
            hands[1 + i / 13] |= 1 << c;
        }
        BigTwo::from_hands(hands).unwrap()
    }

    fn played(g: &BigTwo, a: usize) -> Vec<String> {
        let cards = g.cards_of(a).unwrap();
        crate::games::bigtwo::combo::cards(cards)
            .map(name)
            .collect()
    }

    #[test]
    fn leading_it_sheds_the_most_cards_lowest_first() {
        // The 3♦ must be played: the only five-card hand with it is the straight.
        let g = game_with("3♦ 4♣ 5♥ 6♠ 7♦ 9♦ 9♣ 9♥ J♠ J♥ Q♣ K♦ 2♠");
        assert_eq!(played(&g, greedy_move(&g)), ["3♦", "4♣", "5♥", "6♠", "7♦"]);
        // The 3s and the 9s make a full house with the 3♦.
        let g = game_with("3♦ 3♣ 3♥ 5♠ 7♦ 9♦ 9♣ 10♥ J♠ Q♥ K♣ A♦ 2♠");
        assert_eq!(played(&g, greedy_move(&g)), ["3♦", "3♣", "3♥", "9♦", "9♣"]);
        // Without the pair (the straight 7-J does not hold the 3♦): the triple.
        let g = game_with("3♦ 3♣ 3♥ 5♠ 7♦ 9♦ 8♣ 10♥ J♠ Q♥ K♣ A♦ 2♠");
        assert_eq!(played(&g, greedy_move(&g)), ["3♦", "3♣", "3♥"]);
    }

    #[test]
    fn following_it_plays_the_lowest_that_beats() {
        let mut g = game_with("3♦ 4♣ 6♥ 8♠ 10♦ Q♣ K♥ A♠ 2♦ 5♣ 7♥ 9♠ J♦");
        // Player 0 leads the 3♦ alone (a legal single), then player 1 follows.
        g.step(crate::games::bigtwo::actions::action_of(&[0]).unwrap())
            .unwrap();
        let a = greedy_move(&g);
        let cards = played(&g, a);
        assert_eq!(cards.len(), 1);
        // Player 1 holds the lowest cards the others did not get: 3♣ is its lowest.
        assert_eq!(cards, ["3♣"]);
    }

    /// The greedy rule against three uniform-random legal players, seat 0,
    /// 400 deals: it should win well above chance (25%).
    #[test]
    fn greedy_beats_random_players() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let mut rng = StdRng::seed_from_u64(3);
        let mut mask = vec![false; ACTIONS];
        let mut wins = 0;
        for _ in 0..400 {
            let mut g = BigTwo::deal(&mut rng);
            let scores = loop {
                let a = if g.to_move() == 0 {
                    greedy_move(&g)
                } else {
                    g.legal_mask(&mut mask);
                    let legal: Vec<usize> = (0..ACTIONS).filter(|&a| mask[a]).collect();
                    legal[rng.random_range(0..legal.len())]
                };
                if let Some(s) = g.step(a).unwrap() {
                    break s;
                }
            };
            wins += usize::from(scores[0] > 0.0);
        }
        assert!(
            wins > 160,
            "greedy won {wins} of 400 against random players"
        );
        eprintln!("greedy won {wins} of 400 games against three random players");
    }
}
