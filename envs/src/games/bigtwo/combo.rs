//! Cards and the combinations of Big Two, with their ranking.
//!
//! A card is `rank * 4 + suit` (0..52): ranks from 3 (0) up through 10, J,
//! Q, K, A (11) to 2 (12), the highest; suits ♦ < ♣ < ♥ < ♠. So the card id
//! orders single cards, and a hand is a 52-bit set whose ascending bits are
//! the hand sorted (the 3♦ is card 0).
//!
//! Combinations: a single; a pair (two cards of one rank); a triple; and the
//! five-card hands, lowest to highest category: straight (five consecutive
//! ranks from 3-4-5-6-7 to 10-J-Q-K-A; a 2 ends no straight), flush (five of
//! one suit), full house, four of a kind with any fifth card, straight flush.
//! A combination beats another of the same size: a higher single card; a pair
//! with the higher top card (so ♠ decides between equal ranks); a triple of a
//! higher rank; a five-card hand of a higher category, or of the same
//! category with a higher key (straights, flushes and straight flushes: the
//! top card; full houses: the triple's rank; four of a kind: the quad's rank).

/// Number of cards in a deck.
pub const DECK: usize = 52;
/// Ranks of the deck, 3 (0) to 2 (12).
pub const RANKS: usize = 13;

pub fn rank(card: u8) -> u8 {
    card / 4
}

pub fn suit(card: u8) -> u8 {
    card % 4
}

/// `3♦`, `10♠`, `A♥`, `2♣`: how logs and tests name cards.
pub fn name(card: u8) -> String {
    const RANK: [&str; RANKS] = [
        "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K", "A", "2",
    ];
    const SUIT: [&str; 4] = ["♦", "♣", "♥", "♠"];
    format!(
        "{}{}",
        RANK[usize::from(rank(card))],
        SUIT[usize::from(suit(card))]
    )
}

/// The card a name such as `3♦`, `10s` or `Ah` stands for (suits as symbols
/// or as d, c, h, s).
pub fn parse(name: &str) -> Option<u8> {
    let (r, s) = name.split_at(name.len() - name.chars().last()?.len_utf8());
    let rank = match r {
        "J" => 8,
        "Q" => 9,
        "K" => 10,
        "A" => 11,
        "2" => 12,
        n => n.parse::<u8>().ok().filter(|n| (3..=10).contains(n))? - 3,
    };
    let suit = match s {
        "♦" | "d" => 0,
        "♣" | "c" => 1,
        "♥" | "h" => 2,
        "♠" | "s" => 3,
        _ => return None,
    };
    Some(rank * 4 + suit)
}

/// The cards of a set, ascending (bits past the deck are not cards).
pub fn cards(set: u64) -> impl Iterator<Item = u8> {
    // One step per card held, not per card of the deck.
    let mut rest = set & ((1 << DECK) - 1);
    std::iter::from_fn(move || {
        (rest != 0).then(|| {
            let c = rest.trailing_zeros() as u8;
            rest &= rest - 1;
            c
        })
    })
}

/// What a combination is; five-card hands in ascending category order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Single,
    Pair,
    Triple,
    Straight,
    Flush,
    FullHouse,
    FourOfAKind,
    StraightFlush,
}

impl Kind {
    /// Cards in a combination of this kind.
    pub fn size(self) -> usize {
        match self {
            Kind::Single => 1,
            Kind::Pair => 2,
            Kind::Triple => 3,
            _ => 5,
        }
    }

    /// This kind's [`size_class`].
    pub fn class(self) -> usize {
        size_class(self.size())
    }
}

/// The size class of a play of `cards` cards, the index observations use
/// for it: single 0, pair 1, triple 2, five cards 3.
pub fn size_class(cards: usize) -> usize {
    cards.clamp(1, 4) - 1
}

/// A valid combination: its kind and its key within the kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Combo {
    pub kind: Kind,
    pub key: u8,
}

impl Combo {
    /// Whether `self` may be played on `other`: the same number of cards and
    /// higher (five-card hands: category first, then key).
    pub fn beats(&self, other: &Combo) -> bool {
        self.kind.size() == other.kind.size() && (self.kind, self.key) > (other.kind, other.key)
    }
}

/// The combination `set` forms, if any.
pub fn classify(set: u64) -> Option<Combo> {
    let n = set.count_ones();
    let top = 63 - set.leading_zeros() as u8;
    let mut per_rank = [0u8; RANKS];
    let mut per_suit = [0u8; 4];
    for c in cards(set) {
        per_rank[usize::from(rank(c))] += 1;
        per_suit[usize::from(suit(c))] += 1;
    }
    let same_rank = per_rank.iter().any(|&k| k as u32 == n);
    let combo = |kind, key| Some(Combo { kind, key });
    match n {
        1 => combo(Kind::Single, top),
        2 if same_rank => combo(Kind::Pair, top),
        3 if same_rank => combo(Kind::Triple, rank(top)),
        5 => five(&per_rank, &per_suit, top),
        _ => None,
    }
}

/// Every combination within `hand`, each once: built from the hand's ranks
/// and suits (the few five-card hands a hand holds, not its C(n, 5)
/// subsets), so a rule player can afford it on every move.
pub fn combos_in(hand: u64) -> Vec<(u64, Combo)> {
    let mut by_rank = [0u64; RANKS];
    let mut by_suit = [0u64; 4];
    for c in cards(hand) {
        by_rank[usize::from(rank(c))] |= 1 << c;
        by_suit[usize::from(suit(c))] |= 1 << c;
    }
    let mut out = Vec::new();
    let mut push = |set: u64| {
        if let Some(c) = classify(set) {
            out.push((set, c));
        }
    };
    // Singles, pairs and triples: the subsets of each rank's cards.
    for &r in &by_rank {
        within(r, &[1, 2, 3]).for_each(&mut push);
    }
    // Full houses and four of a kind with any fifth card.
    for (a, &ra) in by_rank.iter().enumerate() {
        for triple in within(ra, &[3]) {
            for (_, &rb) in by_rank.iter().enumerate().filter(|&(b, _)| b != a) {
                within(rb, &[2]).for_each(|pair| push(triple | pair));
            }
        }
        if ra.count_ones() == 4 {
            cards(hand & !ra).for_each(|k| push(ra | 1 << k));
        }
    }
    // Straights (straight flushes among them): one card of each of five
    // consecutive ranks, the highest an ace at most.
    for low in 0..RANKS - 5 {
        let [a, b, c, d, e] = [0, 1, 2, 3, 4].map(|i| by_rank[low + i]);
        for x in cards(a) {
            for y in cards(b) {
                for z in cards(c) {
                    for v in cards(d) {
                        for w in cards(e) {
                            push(1 << x | 1 << y | 1 << z | 1 << v | 1 << w);
                        }
                    }
                }
            }
        }
    }
    // Flushes that are not straights (those are above already).
    for &s in &by_suit {
        for set in subsets(s).filter(|x| x.count_ones() == 5) {
            if classify(set).is_some_and(|c| c.kind == Kind::Flush) {
                push(set);
            }
        }
    }
    out
}

/// The subsets of `set` of the given sizes.
fn within(set: u64, sizes: &'static [u32]) -> impl Iterator<Item = u64> {
    subsets(set).filter(move |s| sizes.contains(&s.count_ones()))
}

/// Every non-empty subset of `set` (at most 13 cards: 8,191 subsets).
fn subsets(set: u64) -> impl Iterator<Item = u64> {
    // The standard enumeration of a mask's submasks, descending.
    let mut next = Some(set).filter(|&s| s != 0);
    std::iter::from_fn(move || {
        let cur = next?;
        let down = (cur - 1) & set;
        next = Some(down).filter(|&d| d != 0);
        Some(cur)
    })
}

fn five(per_rank: &[u8; RANKS], per_suit: &[u8; 4], top: u8) -> Option<Combo> {
    let flush = per_suit.contains(&5);
    let low = per_rank.iter().position(|&k| k > 0)?;
    // Five distinct consecutive ranks, the highest an ace at most.
    let straight = low + 4 < RANKS - 1 && per_rank[low..low + 5].iter().all(|&k| k == 1);
    let with = |count: u8| per_rank.iter().position(|&k| k == count).map(|r| r as u8);
    let (kind, key) = match (straight, flush) {
        (true, true) => (Kind::StraightFlush, top),
        (true, false) => (Kind::Straight, top),
        (false, true) => (Kind::Flush, top),
        _ => match (with(4), with(3), with(2)) {
            (Some(quad), _, _) => (Kind::FourOfAKind, quad),
            (None, Some(triple), Some(_)) => (Kind::FullHouse, triple),
            _ => return None,
        },
    };
    Some(Combo { kind, key })
}

/// The set of the named cards (`"3♦ 10♠ Ah"`), for tests.
#[cfg(test)]
pub(crate) fn set_of(names: &str) -> u64 {
    names
        .split_whitespace()
        .map(|n| 1u64 << parse(n).unwrap_or_else(|| panic!("card {n}")))
        .fold(0, |a, b| a | b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &str) -> u64 {
        set_of(names)
    }

    fn kind(names: &str) -> Option<Kind> {
        classify(set(names)).map(|c| c.kind)
    }

    /// `combos_in` finds exactly the subsets of 1, 2, 3 or 5 cards that
    /// classify, each once.
    #[test]
    fn combos_in_a_hand_are_its_classified_subsets() {
        use rand::seq::SliceRandom;
        use rand::{SeedableRng, rngs::StdRng};
        let mut rng = StdRng::seed_from_u64(5);
        let mut hands = vec![
            set("3♦ 4♦ 5♦ 6♦ 7♦ 8♦ 9♦ 10♦ J♦ Q♦ K♦ A♦ 2♦"),
            set("5♦ 5♣ 5♥ 5♠ 9♦ 9♣ 9♥ 9♠ K♦ K♣ K♥ 2♠ 3♦"),
        ];
        for _ in 0..30 {
            let mut deck: Vec<u8> = (0..52).collect();
            deck.shuffle(&mut rng);
            hands.push(deck[..13].iter().fold(0u64, |a, &c| a | 1 << c));
        }
        for hand in hands {
            let mut found: Vec<u64> = combos_in(hand).into_iter().map(|(s, _)| s).collect();
            found.sort_unstable();
            let n = found.len();
            found.dedup();
            assert_eq!(found.len(), n, "a combination listed twice");
            let mut all: Vec<u64> = subsets(hand)
                .filter(|s| matches!(s.count_ones(), 1 | 2 | 3 | 5) && classify(*s).is_some())
                .collect();
            all.sort_unstable();
            assert_eq!(found, all);
        }
    }

    #[test]
    fn names_round_trip_and_order_the_deck() {
        assert_eq!(parse("3♦"), Some(0));
        assert_eq!(parse("2♠"), Some(51));
        assert_eq!(parse("10h"), Some(7 * 4 + 2));
        assert_eq!(parse("1♦"), None);
        assert_eq!(parse("Kx"), None);
        for c in 0..52u8 {
            assert_eq!(parse(&name(c)), Some(c));
        }
    }

    #[test]
    fn kinds_of_hand_worked_sets() {
        assert_eq!(kind("7♣"), Some(Kind::Single));
        assert_eq!(kind("9♦ 9♠"), Some(Kind::Pair));
        assert_eq!(kind("9♦ 10♠"), None);
        assert_eq!(kind("K♦ K♣ K♠"), Some(Kind::Triple));
        assert_eq!(kind("3♦ 4♣ 5♥ 6♠ 7♦"), Some(Kind::Straight));
        assert_eq!(kind("10♦ J♣ Q♥ K♠ A♦"), Some(Kind::Straight));
        // A 2 ends no straight, and ranks do not wrap round.
        assert_eq!(kind("J♦ Q♣ K♥ A♠ 2♦"), None);
        assert_eq!(kind("A♦ 2♣ 3♥ 4♠ 5♦"), None);
        assert_eq!(kind("3♥ 7♥ 9♥ J♥ 2♥"), Some(Kind::Flush));
        assert_eq!(kind("5♦ 5♣ 5♠ 8♥ 8♠"), Some(Kind::FullHouse));
        assert_eq!(kind("Q♦ Q♣ Q♥ Q♠ 3♦"), Some(Kind::FourOfAKind));
        assert_eq!(kind("4♠ 5♠ 6♠ 7♠ 8♠"), Some(Kind::StraightFlush));
        assert_eq!(kind("4♠ 5♠ 6♠ 7♠"), None);
        assert_eq!(kind("4♠ 4♦ 6♠ 6♣ 8♥"), None);
    }

    #[test]
    fn size_classes_are_single_pair_triple_five() {
        let classes = [
            "7♣",
            "9♦ 9♠",
            "K♦ K♣ K♠",
            "3♦ 4♣ 5♥ 6♠ 7♦",
            "4♠ 5♠ 6♠ 7♠ 8♠",
        ]
        .map(|s| classify(set(s)).unwrap().kind.class());
        assert_eq!(classes, [0, 1, 2, 3, 3]);
        assert_eq!([1, 2, 3, 5].map(size_class), [0, 1, 2, 3]);
    }

    #[test]
    fn ranking_of_hand_worked_pairs_of_combinations() {
        let beats = |a: &str, b: &str| classify(set(a)).unwrap().beats(&classify(set(b)).unwrap());
        assert!(beats("3♠", "3♥"));
        assert!(beats("2♦", "A♠"));
        assert!(!beats("A♠", "2♦"));
        // A pair: the top card decides, suit between equal ranks.
        assert!(beats("9♦ 9♠", "9♣ 9♥"));
        assert!(beats("10♦ 10♣", "9♥ 9♠"));
        assert!(beats("4♦ 4♣ 4♥", "3♣ 3♥ 3♠"));
        // Five cards: category first, then the key.
        assert!(beats("3♥ 7♥ 9♥ J♥ K♥", "10♦ J♣ Q♥ K♠ A♠"));
        assert!(beats("3♦ 3♣ 3♠ 4♥ 4♠", "5♠ 8♠ 9♠ J♠ 2♠"));
        assert!(beats("4♦ 4♣ 4♥ 4♠ 3♦", "2♦ 2♣ 2♠ A♥ A♠"));
        assert!(beats("3♦ 4♦ 5♦ 6♦ 7♦", "2♦ 2♣ 2♥ 2♠ A♠"));
        assert!(beats("4♦ 5♣ 6♥ 7♠ 8♥", "4♠ 5♠ 6♥ 7♠ 8♦"));
        assert!(beats("6♦ 6♣ 6♥ 3♦ 3♣", "5♦ 5♣ 5♥ A♦ A♠"));
        // Different sizes never beat each other.
        assert!(!beats("2♠", "3♦ 3♣"));
        assert!(!beats("3♦ 3♣", "2♠"));
    }
}
