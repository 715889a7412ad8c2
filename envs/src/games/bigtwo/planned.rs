//! Big Two with the mover's plan in view (`BigTwo-v1`): the same game and
//! rule players as `BigTwo-v0`, and an observation that appends to v0's
//! ([`super::observe`]) what the planner (`planner`) knows of the hand, so
//! that the network reads which cards belong together instead of having to
//! find a hand's fewest-plays split itself:
//!
//! | offset | width | what |
//! | --- | --- | --- |
//! | 0 | 496 | v0's observation |
//! | 496 | 13 × 6 | per hand position (lowest card first), see below |
//! | 574 | 14 | the plan's number of plays (one-hot 0..13) |
//! | 588 | 14 | its singles among them (one-hot 0..13) |
//!
//! Per position: the size class of the plan's play holding the card
//! (single, pair, triple, five cards), whether no combination of that size
//! among the unseen cards (neither held nor played) beats that play (five-
//! card plays never count as such, as for the planner), and the share of
//! the 39 cards outside the hand that are unseen and beat the card as a
//! single. Positions past the hand's end are all zero.
//!
//! The plan is the split of [`Partition::plays`], computed once per player
//! at the deal and again only when that player plays, so an observation
//! costs a few lookups.

use super::actions::HAND;
use super::combo::{DECK, cards, classify, size_class};
use super::game::{BigTwo, MoveError, PLAYERS};
use super::observe::{OBS_DIM, observe};
use super::partition::Partition;
use super::planner::unbeatable;

/// Floats in a `BigTwo-v1` observation.
pub const PLANNED_OBS_DIM: usize = PLAYS + 2 * (HAND + 1);

/// Flags per hand position: size class (4), unbeaten play, higher unseen.
const PER_POSITION: usize = 6;
const PLAYS: usize = OBS_DIM + HAND * PER_POSITION;
const SINGLES: usize = PLAYS + HAND + 1;

/// A game of Big Two and each player's plan of its current hand.
#[derive(Clone, Debug)]
pub struct Planned {
    game: BigTwo,
    plans: [Vec<u64>; PLAYERS],
}

impl Planned {
    pub fn new(game: BigTwo) -> Self {
        let plans = std::array::from_fn(|p| plan(game.hand(p)));
        Self { game, plans }
    }

    pub fn game(&self) -> &BigTwo {
        &self.game
    }

    /// [`BigTwo::step`], then the mover's plan again if it played cards.
    pub fn step(&mut self, action: usize) -> Result<Option<[f64; PLAYERS]>, MoveError> {
        let mover = self.game.to_move();
        let before = self.game.hand(mover);
        let out = self.game.step(action)?;
        let after = self.game.hand(mover);
        if after != before {
            self.plans[mover] = plan(after);
        }
        Ok(out)
    }

    /// Writes what `player` sees into `out` (`PLANNED_OBS_DIM` floats).
    pub fn observe(&self, player: usize, out: &mut [f32]) {
        observe(&self.game, player, &mut out[..OBS_DIM]);
        out[OBS_DIM..PLANNED_OBS_DIM].fill(0.0);
        let hand = self.game.hand(player);
        let plays = &self.plans[player];
        let unseen = !(self.game.played() | hand) & ((1u64 << DECK) - 1);
        let boss: Vec<bool> = plays
            .iter()
            .map(|&p| classify(p).is_some_and(|c| unbeatable(c, unseen)))
            .collect();
        for (i, c) in cards(hand).enumerate() {
            let at = &mut out[OBS_DIM + i * PER_POSITION..OBS_DIM + (i + 1) * PER_POSITION];
            if let Some(k) = plays.iter().position(|&p| p & (1 << c) != 0) {
                at[size_class(plays[k].count_ones() as usize)] = 1.0;
                at[4] = f32::from(u8::from(boss[k]));
            }
            let higher = (unseen >> c >> 1).count_ones();
            at[5] = higher as f32 / (DECK - HAND) as f32;
        }
        let singles = plays.iter().filter(|p| p.count_ones() == 1).count();
        out[PLAYS + plays.len()] = 1.0;
        out[SINGLES + singles] = 1.0;
    }
}

/// The plays of a best split of `hand`.
fn plan(hand: u64) -> Vec<u64> {
    Partition::new(hand).plays(hand)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::bigtwo::ACTIONS;
    use crate::games::bigtwo::actions::action_of;
    use crate::games::bigtwo::combo::set_of;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Player 0 holds `hand` (with the 3♦); the rest of the deck goes to
    /// players 1-3 in order.
    fn deal_with(hand: &str) -> BigTwo {
        let h0 = set_of(hand);
        let rest: Vec<u8> = (0..52u8).filter(|c| h0 & (1 << c) == 0).collect();
        let mut hands = [h0, 0, 0, 0];
        for (i, c) in rest.iter().enumerate() {
            hands[1 + i / 13] |= 1 << c;
        }
        BigTwo::from_hands(hands).unwrap_or_else(|e| panic!("{e}"))
    }

    fn position(o: &[f32], p: usize) -> &[f32] {
        &o[OBS_DIM + p * PER_POSITION..OBS_DIM + (p + 1) * PER_POSITION]
    }

    /// The straight 3♦-7♦, the full house J♦ J♥ J♠ 9♦ 9♣ (one play, not a
    /// triple and a pair) and three singles K♣ A♥ 2♠: five plays, three of
    /// them singles; nothing unseen beats the 2♠.
    #[test]
    fn a_hand_worked_plan() {
        let g = Planned::new(deal_with("3♦ 4♣ 5♥ 6♠ 7♦ 9♦ 9♣ J♦ J♥ J♠ K♣ A♥ 2♠"));
        let mut o = vec![9.0; PLANNED_OBS_DIM];
        g.observe(0, &mut o);
        let mut v0 = vec![0.0; OBS_DIM];
        observe(g.game(), 0, &mut v0);
        assert_eq!(o[..OBS_DIM], v0[..], "v0's observation comes first");
        // Positions 0-4: the straight; 5-9: the full house; 10-12 singles.
        for p in 0..10 {
            assert_eq!(position(&o, p)[..5], [0.0, 0.0, 0.0, 1.0, 0.0], "{p}");
        }
        for p in 10..12 {
            assert_eq!(position(&o, p)[..5], [1.0, 0.0, 0.0, 0.0, 0.0], "{p}");
        }
        assert_eq!(position(&o, 12)[..5], [1.0, 0.0, 0.0, 0.0, 1.0], "2♠");
        // Unseen cards above the 3♦: the 39 not in the hand; above the A♥:
        // A♠, 2♦, 2♣, 2♥; above the 2♠: none.
        assert_eq!(position(&o, 0)[5], 1.0);
        assert_eq!(position(&o, 11)[5], 4.0 / 39.0);
        assert_eq!(position(&o, 12)[5], 0.0);
        let one_hot =
            |base: usize| -> Vec<usize> { (0..=HAND).filter(|&k| o[base + k] == 1.0).collect() };
        assert_eq!(one_hot(PLAYS), [5]);
        assert_eq!(one_hot(SINGLES), [3]);
    }

    /// Over random games (random legal moves), the plan kept up to date by
    /// `step` observes the same as one computed afresh from the position,
    /// for every player, and stays a split of the hand.
    #[test]
    fn the_kept_plan_is_the_fresh_one_over_random_games() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut mask = vec![false; ACTIONS];
        let (mut kept, mut fresh) = (vec![0.0; PLANNED_OBS_DIM], vec![0.0; PLANNED_OBS_DIM]);
        let mut positions = 0;
        for _ in 0..20 {
            let mut g = Planned::new(BigTwo::deal(&mut rng));
            loop {
                for p in 0..PLAYERS {
                    g.observe(p, &mut kept);
                    Planned::new(g.game().clone()).observe(p, &mut fresh);
                    assert_eq!(kept, fresh, "player {p}, position {positions}");
                    let union = g.plans[p].iter().fold(0, |a, &b| a | b);
                    assert_eq!(union, g.game().hand(p));
                }
                positions += 1;
                g.game().legal_mask(&mut mask);
                let legal: Vec<usize> = (0..ACTIONS).filter(|&a| mask[a]).collect();
                let a = legal[rng.random_range(0..legal.len())];
                if g.step(a).expect("a legal move").is_some() {
                    break;
                }
            }
        }
        assert!(positions > 500, "{positions} positions");
        // An illegal move changes nothing.
        let mut g = Planned::new(BigTwo::deal(&mut rng));
        let before = g.plans.clone();
        assert!(g.step(action_of(&[12]).expect("an action")).is_err());
        assert_eq!(g.plans, before);
    }
}
