//! Big Two (Chinese poker, "Deuces") for four players: the rules
//! ([`game`]), combinations and their ranking ([`combo`]), the fixed
//! action space over hand positions ([`actions`]), what a player observes
//! ([`observe`]) and two rule-based opponents ([`greedy`], and
//! [`planner`], which plans its hand with [`partition`]). [`planned`] is
//! the game with each player's plan added to what it observes
//! (`BigTwo-v1`), and [`remembered`] adds each opponent's lowest passes
//! (`BigTwo-v2`).

pub mod actions;
pub mod combo;
pub mod game;
pub mod greedy;
pub mod observe;
pub mod partition;
pub mod planned;
pub mod planner;
pub mod remembered;

pub use actions::{ACTIONS, PASS};
pub use game::{BigTwo, MoveError, PLAYERS};
pub use greedy::greedy_move;
pub use observe::{OBS_DIM, observe};
pub use planned::{PLANNED_OBS_DIM, Planned};
pub use planner::planner_move;
pub use remembered::{REMEMBERED_OBS_DIM, Remembered};

#[cfg(test)]
mod tests {
    use super::actions::action_of;
    use super::combo::{Combo, cards, classify};
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Every legal move found the slow way: each subset of the hand of 1, 2,
    /// 3 or 5 cards that forms a combination, with the rules written out
    /// here (first play holds the 3♦; leading plays anything; following
    /// needs the same size and a higher ranking), mapped to its action.
    fn brute_force_legal(g: &BigTwo) -> Vec<usize> {
        let hand: Vec<u8> = cards(g.hand(g.to_move())).collect();
        let first = g.played() == 0;
        let mut legal = Vec::new();
        if g.table().is_some() {
            legal.push(PASS);
        }
        for subset in 1u32..(1 << hand.len()) {
            let n = subset.count_ones();
            if ![1, 2, 3, 5].contains(&n) {
                continue;
            }
            let positions: Vec<u8> = (0..hand.len() as u8)
                .filter(|p| subset & (1 << p) != 0)
                .collect();
            let set = positions
                .iter()
                .fold(0u64, |s, &p| s | 1 << hand[usize::from(p)]);
            let Some(combo) = classify(set) else { continue };
            if first && set & 1 == 0 {
                continue;
            }
            let ok = match g.table() {
                None => true,
                Some(t) => {
                    let higher = |a: &Combo, b: &Combo| (a.kind, a.key) > (b.kind, b.key);
                    combo.kind.size() == t.combo.kind.size() && higher(&combo, &t.combo)
                }
            };
            if ok {
                legal.push(action_of(&positions).expect("every combination has an action"));
            }
        }
        legal.sort_unstable();
        legal
    }

    fn mask_actions(g: &BigTwo) -> Vec<usize> {
        let mut mask = vec![true; ACTIONS];
        g.legal_mask(&mut mask);
        (0..ACTIONS).filter(|&a| mask[a]).collect()
    }

    /// Random deals played by random legal moves (with a bias towards
    /// playing, so games end): at every position the mask is the brute
    /// force's, and the game ends zero-sum with one empty hand.
    #[test]
    fn the_mask_is_the_brute_forces_over_random_games() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut positions = 0;
        for _ in 0..40 {
            let mut g = BigTwo::deal(&mut rng);
            let scores = loop {
                let legal = mask_actions(&g);
                assert_eq!(legal, brute_force_legal(&g), "position {positions}");
                positions += 1;
                let plays: Vec<usize> = legal.iter().copied().filter(|&a| a != PASS).collect();
                let a = if plays.is_empty() || rng.random_bool(0.2) && legal.contains(&PASS) {
                    PASS
                } else {
                    plays[rng.random_range(0..plays.len())]
                };
                if let Some(s) = g.step(a).expect("a legal move") {
                    break s;
                }
            };
            assert!(g.is_over());
            assert_eq!(scores.iter().sum::<f64>(), 0.0);
            let winners: Vec<usize> = (0..PLAYERS).filter(|&p| g.hand(p) == 0).collect();
            assert_eq!(winners.len(), 1);
            let w = winners[0];
            let others: f64 = (0..PLAYERS)
                .filter(|&p| p != w)
                .map(|p| f64::from(g.hand(p).count_ones()))
                .sum();
            assert_eq!(scores[w], others);
            assert!(mask_actions(&g).is_empty());
            assert_eq!(g.step(PASS), Err(MoveError::Over));
        }
        assert!(positions > 1000, "{positions} positions checked");
    }

    #[test]
    fn hand_worked_game_flow() {
        // Player 2 holds the 3♦: it leads, and must play it.
        let mut rng = StdRng::seed_from_u64(1);
        let mut g = BigTwo::deal(&mut rng);
        let leader = (0..PLAYERS).find(|&p| g.hand(p) & 1 != 0).unwrap();
        assert_eq!(g.to_move(), leader);
        assert_eq!(
            g.step(PASS),
            Err(MoveError::Illegal {
                action: PASS,
                player: leader
            })
        );
        let three = action_of(&[0]).unwrap();
        // A single other than the 3♦ is refused on the first play.
        assert!(matches!(
            g.step(action_of(&[1]).unwrap()),
            Err(MoveError::Illegal { .. })
        ));
        assert_eq!(g.step(three), Ok(None));
        assert_eq!(g.table().unwrap().cards, 1);
        // Three passes: control returns to the leader, who leads anew.
        for k in 1..=3 {
            assert_eq!(g.to_move(), (leader + k) % PLAYERS);
            assert_eq!(g.step(PASS), Ok(None));
        }
        assert_eq!(g.to_move(), leader);
        assert!(g.table().is_none());
        assert!(!mask_actions(&g).contains(&PASS), "the leader may not pass");
        // Positions beyond the hand (now 12 cards) are illegal.
        assert!(matches!(
            g.step(action_of(&[12]).unwrap()),
            Err(MoveError::Illegal { .. })
        ));
        assert_eq!(
            g.step(ACTIONS),
            Err(MoveError::OutOfRange { action: ACTIONS })
        );
    }

    #[test]
    fn a_bad_deal_is_refused() {
        assert!(BigTwo::from_hands([0, 0, 0, 0]).is_err());
        let overlapping = [0x1fff, 0x1fff, 0x1fff << 26, 0x1fff << 39];
        assert!(BigTwo::from_hands(overlapping).is_err());
    }
}
