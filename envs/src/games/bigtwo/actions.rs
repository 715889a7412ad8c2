//! The fixed action space: positions in the player's hand sorted ascending
//! (position 0 is the lowest card held; a hand of n cards has positions
//! 0..n), plus pass. 1,365 actions:
//!
//! | actions | what |
//! | --- | --- |
//! | 0 | pass |
//! | 1-13 | a single: position i |
//! | 14-46 | a pair: positions i < j with j - i <= 3 (cards of one rank sit within four positions), 33 |
//! | 47-77 | a triple: positions i < j < k with k - i <= 3, 31 |
//! | 78-1364 | five cards: any 5 of the 13 positions, C(13, 5) = 1,287, in lexicographic order |
//!
//! (The reference design's 1,695 also enumerates four-card sets, which
//! these rules never play.) An action names positions, not cards: whether it
//! is a valid, legal combination depends on the hand and the table, which
//! the legal-move mask says.

use std::sync::OnceLock;

/// Hand positions: 13 cards dealt to each of four players.
pub const HAND: usize = 13;
/// Actions in the space.
pub const ACTIONS: usize = 1 + 13 + 33 + 31 + 1287;
pub const PASS: usize = 0;

/// The positions each action plays (none for pass), in action order.
pub fn table() -> &'static [Vec<u8>] {
    static TABLE: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    TABLE.get_or_init(build)
}

fn build() -> Vec<Vec<u8>> {
    let n = HAND as u8;
    let mut out = vec![Vec::new()];
    out.extend((0..n).map(|i| vec![i]));
    for i in 0..n {
        for j in i + 1..n.min(i + 4) {
            out.push(vec![i, j]);
        }
    }
    for i in 0..n {
        for j in i + 1..n.min(i + 4) {
            for k in j + 1..n.min(i + 4) {
                out.push(vec![i, j, k]);
            }
        }
    }
    let mut five = [0u8, 1, 2, 3, 4];
    loop {
        out.push(five.to_vec());
        // The next 5-subset in lexicographic order.
        let Some(at) = (0..5).rev().find(|&p| five[p] < n - 5 + p as u8) else {
            break;
        };
        five[at] += 1;
        for p in at + 1..5 {
            five[p] = five[p - 1] + 1;
        }
    }
    out
}

/// The action that plays `positions` (ascending), if the space has one.
pub fn action_of(positions: &[u8]) -> Option<usize> {
    static INDEX: OnceLock<std::collections::HashMap<Vec<u8>, usize>> = OnceLock::new();
    let index = INDEX.get_or_init(|| {
        table()
            .iter()
            .enumerate()
            .skip(1)
            .map(|(a, p)| (p.clone(), a))
            .collect()
    });
    index.get(positions).copied()
}

/// The action that plays the positions set in `positions` (bit p for
/// position p), if the space has one: a table lookup, for the legal mask.
pub fn action_of_positions(positions: u16) -> Option<usize> {
    const NONE: u16 = u16::MAX;
    static BY_SET: OnceLock<Vec<u16>> = OnceLock::new();
    let by_set = BY_SET.get_or_init(|| {
        let mut by_set = vec![NONE; 1 << HAND];
        for (a, p) in table().iter().enumerate().skip(1) {
            by_set[p.iter().fold(0usize, |s, &q| s | 1 << q)] = a as u16;
        }
        by_set
    });
    by_set
        .get(usize::from(positions))
        .filter(|&&a| a != NONE)
        .map(|&a| usize::from(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_space_is_as_documented() {
        let t = table();
        assert_eq!(t.len(), ACTIONS);
        assert_eq!(ACTIONS, 1365);
        assert!(t[PASS].is_empty());
        assert_eq!(t[1], [0]);
        assert_eq!(t[13], [12]);
        assert_eq!(t[14], [0, 1]);
        assert_eq!(t[46], [11, 12]);
        assert_eq!(t[47], [0, 1, 2]);
        assert_eq!(t[77], [10, 11, 12]);
        assert_eq!(t[78], [0, 1, 2, 3, 4]);
        assert_eq!(t[1364], [8, 9, 10, 11, 12]);
        let sizes: Vec<usize> = [1, 2, 3, 5]
            .iter()
            .map(|&k| t.iter().filter(|p| p.len() == k).count())
            .collect();
        assert_eq!(sizes, [13, 33, 31, 1287]);
        // Every action once, positions ascending.
        let mut seen = std::collections::HashSet::new();
        for (a, p) in t.iter().enumerate().skip(1) {
            assert!(p.windows(2).all(|w| w[0] < w[1]), "{a}: {p:?}");
            assert!(seen.insert(p.clone()), "{a} repeats {p:?}");
            assert_eq!(action_of(p), Some(a));
            let set = p.iter().fold(0u16, |s, &q| s | 1 << q);
            assert_eq!(action_of_positions(set), Some(a));
        }
        assert_eq!(action_of(&[0, 4]), None, "a pair four apart");
        assert_eq!(action_of_positions(0b1_0001), None, "a pair four apart");
        assert_eq!(action_of_positions(0), None, "no position");
    }
}
