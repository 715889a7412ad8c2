//! Big Two with the opponents' passes remembered (`BigTwo-v2`): v1's
//! observation ([`super::planned`]) and, for each opponent, the lowest
//! combination of each size it has passed on this game.
//!
//! Why: a pass is the one move that says what a hand lacks. A player who
//! plays whenever it can (the greedy rule) and passes on a pair of kings
//! holds no higher pair for the rest of the game, since cards only leave
//! hands; a thinking player's pass says less, but still something. v1 shows
//! only the passes on the table now, so a network had to remember the rest
//! across moves it does not see.
//!
//! | offset | width | what |
//! | --- | --- | --- |
//! | 0 | 602 | v1's observation |
//! | 602 | 3 × 126 | per opponent seat (1 = next to act, 2 = across, 3 = before), see below |
//!
//! Per seat, four one-hot blocks, the first entry of each meaning "never
//! passed on this size": the single it passed on (1 + card, 53), the pair
//! (1 + the pair's top card, 53), the triple (1 + rank, 14), and the
//! five-card hand (1 + category: straight, flush, full house, four of a
//! kind, straight flush; 6). "Lowest" is the game's ranking ([`Combo`]):
//! the pass that says the most.

use super::PASS;
use super::combo::{Combo, DECK, Kind, RANKS};
use super::game::{BigTwo, MoveError, PLAYERS};
use super::planned::{PLANNED_OBS_DIM, Planned};

/// Floats in a `BigTwo-v2` observation.
pub const REMEMBERED_OBS_DIM: usize = PLANNED_OBS_DIM + (PLAYERS - 1) * PER_SEAT;

/// One-hot widths of the four size classes, "never" first in each.
const WIDTHS: [usize; 4] = [1 + DECK, 1 + DECK, 1 + RANKS, 1 + 5];
const PER_SEAT: usize = WIDTHS[0] + WIDTHS[1] + WIDTHS[2] + WIDTHS[3];

/// A game of Big Two, each player's plan, and each player's lowest pass
/// per size class.
#[derive(Clone, Debug)]
pub struct Remembered {
    planned: Planned,
    passed: [[Option<Combo>; 4]; PLAYERS],
}

impl Remembered {
    pub fn new(game: BigTwo) -> Self {
        Self {
            planned: Planned::new(game),
            passed: [[None; 4]; PLAYERS],
        }
    }

    pub fn game(&self) -> &BigTwo {
        self.planned.game()
    }

    /// [`Planned::step`]; a legal pass is remembered against the table.
    pub fn step(&mut self, action: usize) -> Result<Option<[f64; PLAYERS]>, MoveError> {
        let mover = self.game().to_move();
        let table = self.game().table();
        let out = self.planned.step(action)?;
        if let (PASS, Some(t)) = (action, table) {
            let lowest = &mut self.passed[mover][t.combo.kind.class()];
            if lowest.is_none_or(|l| (t.combo.kind, t.combo.key) < (l.kind, l.key)) {
                *lowest = Some(t.combo);
            }
        }
        Ok(out)
    }

    /// Writes what `player` sees into `out` (`REMEMBERED_OBS_DIM` floats).
    pub fn observe(&self, player: usize, out: &mut [f32]) {
        self.planned.observe(player, &mut out[..PLANNED_OBS_DIM]);
        out[PLANNED_OBS_DIM..REMEMBERED_OBS_DIM].fill(0.0);
        for seat in 1..PLAYERS {
            let passed = &self.passed[(player + seat) % PLAYERS];
            let mut base = PLANNED_OBS_DIM + (seat - 1) * PER_SEAT;
            for (k, width) in WIDTHS.into_iter().enumerate() {
                out[base + passed[k].map_or(0, |c| 1 + entry(c))] = 1.0;
                base += width;
            }
        }
    }
}

/// A combination's place within its class's one-hot block, after "never":
/// singles and pairs by their key card, triples by rank, five-card hands by
/// category.
fn entry(c: Combo) -> usize {
    match c.kind {
        Kind::Single | Kind::Pair | Kind::Triple => usize::from(c.key),
        five => five as usize - Kind::Straight as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::bigtwo::ACTIONS;
    use crate::games::bigtwo::actions::action_of;
    use crate::games::bigtwo::combo::classify;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// The four one-hot blocks of `seat` in `o`, each as the index of its
    /// one set entry.
    fn seat_blocks(o: &[f32], seat: usize) -> Vec<usize> {
        let mut base = PLANNED_OBS_DIM + (seat - 1) * PER_SEAT;
        WIDTHS
            .iter()
            .map(|&w| {
                let block = &o[base..base + w];
                base += w;
                let ones: Vec<usize> = (0..w).filter(|&i| block[i] == 1.0).collect();
                assert_eq!(ones.len(), 1, "one-hot {block:?}");
                assert_eq!(block.iter().sum::<f32>(), 1.0);
                ones[0]
            })
            .collect()
    }

    /// The deck dealt in order: player 0 holds cards 0-12 (3♦ .. 6♦),
    /// player 3 cards 39-51 (Q♠ .. 2♠). Player 0 leads the 3♦; players 1
    /// and 2 pass on it; player 3 plays the Q♠; players 0, 1 and 2 pass on
    /// that; player 3 leads K♦ K♣ and player 0 passes on the pair.
    #[test]
    fn a_hand_worked_game() {
        let hands = [0x1fff, 0x1fff << 13, 0x1fff << 26, 0x1fff << 39];
        let mut g = Remembered::new(BigTwo::from_hands(hands).expect("deal"));
        let single = |p: u8| action_of(&[p]).expect("single");
        for a in [single(0), PASS, PASS, single(0), PASS, PASS, PASS] {
            assert_eq!(g.step(a), Ok(None));
        }
        assert_eq!(g.game().to_move(), 3);
        assert_eq!(g.step(action_of(&[0, 1]).expect("pair")), Ok(None));
        assert_eq!(g.step(PASS), Ok(None));
        let mut o = vec![9.0; REMEMBERED_OBS_DIM];
        // Player 0: player 1 (seat 1) and player 2 (seat 2) passed on the
        // 3♦ (card 0) and later on the Q♠ (card 39): the 3♦ is the lower.
        // Player 3 never passed.
        g.observe(0, &mut o);
        assert_eq!(seat_blocks(&o, 1), [1, 0, 0, 0]);
        assert_eq!(seat_blocks(&o, 2), [1, 0, 0, 0]);
        assert_eq!(seat_blocks(&o, 3), [0, 0, 0, 0]);
        let mut v1 = vec![0.0; PLANNED_OBS_DIM];
        g.planned.observe(0, &mut v1);
        assert_eq!(o[..PLANNED_OBS_DIM], v1[..], "v1's observation comes first");
        // Player 3: player 0 (seat 1) passed on the Q♠ (card 39) and on
        // the pair K♦ K♣ (top card K♣, card 41).
        g.observe(3, &mut o);
        assert_eq!(seat_blocks(&o, 1), [1 + 39, 1 + 41, 0, 0]);
        assert_eq!(seat_blocks(&o, 2), [1, 0, 0, 0]);
        assert_eq!(seat_blocks(&o, 3), [1, 0, 0, 0]);
        // An illegal move (player 1 may not put a single on the pair)
        // changes nothing remembered.
        let before = g.passed;
        assert!(g.step(action_of(&[12]).expect("an action")).is_err());
        assert_eq!(g.passed, before);
    }

    /// Over random games of random legal moves, each opponent block shows
    /// the lowest combination that opponent passed on, found here from a
    /// log of every pass by comparing categories and keys as the rules
    /// rank them.
    #[test]
    fn the_blocks_are_the_lowest_passes_over_random_games() {
        let mut rng = StdRng::seed_from_u64(11);
        let mut mask = vec![false; ACTIONS];
        let mut o = vec![0.0; REMEMBERED_OBS_DIM];
        let (mut checked, mut fives) = (0, 0);
        for _ in 0..30 {
            let mut g = Remembered::new(BigTwo::deal(&mut rng));
            let mut log: Vec<(usize, u64)> = Vec::new();
            loop {
                for player in 0..PLAYERS {
                    g.observe(player, &mut o);
                    for seat in 1..PLAYERS {
                        let who = (player + seat) % PLAYERS;
                        let want: Vec<usize> = [1, 2, 3, 5]
                            .iter()
                            .map(|&size| lowest_pass(&log, who, size))
                            .collect();
                        assert_eq!(seat_blocks(&o, seat), want);
                        checked += 1;
                    }
                }
                let mover = g.game().to_move();
                g.game().legal_mask(&mut mask);
                let legal: Vec<usize> = (0..ACTIONS).filter(|&a| mask[a]).collect();
                let a = legal[rng.random_range(0..legal.len())];
                if a == PASS {
                    let t = g.game().table().expect("a pass follows a play");
                    fives += usize::from(t.cards.count_ones() == 5);
                    log.push((mover, t.cards));
                }
                if g.step(a).expect("a legal move").is_some() {
                    break;
                }
            }
        }
        assert!(checked > 5000, "{checked} blocks checked");
        assert!(fives > 10, "{fives} passes on five-card hands");
    }

    /// The expected one-hot index for `who`'s passes on `size`-card plays:
    /// 0 when none; else 1 + the lowest one's card, rank or category. The
    /// small plays are ranked from their cards (a single by its card, a pair
    /// by its top card, a triple by its rank); five-card hands by category,
    /// then key.
    fn lowest_pass(log: &[(usize, u64)], who: usize, size: u32) -> usize {
        let passes = log
            .iter()
            .filter(|(p, cards)| *p == who && cards.count_ones() == size)
            .map(|&(_, cards)| cards);
        let top = |cards: u64| 63 - cards.leading_zeros() as usize;
        let lowest = match size {
            1 | 2 => passes.map(top).min(),
            3 => passes.map(|c| top(c) / 4).min(),
            _ => passes
                .map(|c| classify(c).expect("the table is a combination"))
                .map(|c| (c.kind as usize - Kind::Straight as usize, c.key))
                .min()
                .map(|(category, _)| category),
        };
        lowest.map_or(0, |x| 1 + x)
    }
}
