//! Nim for two players, normal play: on a turn a player takes one or more
//! objects from one heap; whoever takes the last object wins (+1, the other
//! -1). Its optimal strategy is known (Bouton): leave a position whose heaps'
//! XOR (nim-sum) is 0; from a position with nim-sum 0 every move loses
//! against best play. That makes it the check that self-play learns.
//!
//! The classic board is [`START`], heaps `1, 3, 5, 7` (nim-sum 0: the first
//! player loses against best play). `Nim-v0` starts each game from a random
//! position of that board (each heap uniform from 0 to its start size, not
//! all empty), so that self-play meets every position of the board, the
//! positions the learned strategy is checked on. Action `h * 7 + (k - 1)`
//! takes k (1..=7) objects from heap h: 28 actions. The observation is each
//! heap's size one-hot (0..=7), 32 floats; a position looks the same to both
//! players, since only the mover's choice matters.

use super::TurnGame;

pub const HEAPS: usize = 4;
pub const MAX_HEAP: usize = 7;
pub const START: [u8; HEAPS] = [1, 3, 5, 7];
pub const ACTIONS: usize = HEAPS * MAX_HEAP;
pub const OBS_DIM: usize = HEAPS * (MAX_HEAP + 1);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nim {
    heaps: [u8; HEAPS],
    to_move: usize,
}

impl Default for Nim {
    fn default() -> Self {
        Self::new(START)
    }
}

impl Nim {
    /// A position with heaps of at most `MAX_HEAP`, player 0 to move.
    pub fn new(heaps: [u8; HEAPS]) -> Self {
        Self {
            heaps: heaps.map(|h| h.min(MAX_HEAP as u8)),
            to_move: 0,
        }
    }

    /// A position of the classic board: each heap uniform in 0..=its
    /// [`START`] size, drawn again while all are empty.
    pub fn random(rng: &mut impl rand::Rng) -> Self {
        loop {
            let heaps = START.map(|h| rng.random_range(0..=h));
            if heaps.iter().any(|&h| h > 0) {
                return Self::new(heaps);
            }
        }
    }

    pub fn heaps(&self) -> [u8; HEAPS] {
        self.heaps
    }

    /// The heap and the count action `a` takes.
    pub fn decode(a: usize) -> (usize, u8) {
        (a / MAX_HEAP, (a % MAX_HEAP) as u8 + 1)
    }

    pub fn encode(heap: usize, take: u8) -> usize {
        heap * MAX_HEAP + usize::from(take) - 1
    }

    /// Bouton's moves: every action that leaves nim-sum 0 (none when the
    /// mover faces nim-sum 0 already, a lost position).
    pub fn winning_moves(&self) -> Vec<usize> {
        let sum = self.heaps.iter().fold(0, |x, h| x ^ h);
        if sum == 0 {
            return Vec::new();
        }
        (0..HEAPS)
            .filter(|&h| self.heaps[h] ^ sum < self.heaps[h])
            .map(|h| Self::encode(h, self.heaps[h] - (self.heaps[h] ^ sum)))
            .collect()
    }
}

impl TurnGame for Nim {
    fn players(&self) -> usize {
        2
    }

    fn obs_dim(&self) -> usize {
        OBS_DIM
    }

    fn actions(&self) -> usize {
        ACTIONS
    }

    fn to_move(&self) -> usize {
        self.to_move
    }

    fn observe(&self, _player: usize, out: &mut [f32]) {
        out[..OBS_DIM].fill(0.0);
        for (h, &n) in self.heaps.iter().enumerate() {
            out[h * (MAX_HEAP + 1) + usize::from(n)] = 1.0;
        }
    }

    fn legal_mask(&self, mask: &mut [bool]) {
        for (a, m) in mask.iter_mut().enumerate().take(ACTIONS) {
            let (h, k) = Self::decode(a);
            *m = k <= self.heaps[h];
        }
    }

    /// Greedy: take the whole largest heap (the first of equals), the most
    /// objects one move can take; it ignores the nim-sum.
    fn rule_move(&self, _rule: usize) -> usize {
        let (h, &n) = self
            .heaps
            .iter()
            .enumerate()
            .max_by_key(|&(i, &n)| (n, std::cmp::Reverse(i)))
            .unwrap_or((0, &1));
        Self::encode(h, n.max(1))
    }

    fn play(&mut self, action: usize) -> Result<Option<Vec<f64>>, String> {
        if action >= ACTIONS {
            return Err(format!("action {action} is outside 0..{ACTIONS}"));
        }
        let (h, k) = Self::decode(action);
        if k > self.heaps[h] {
            return Err(format!(
                "action {action} takes {k} from heap {h}, which holds {}",
                self.heaps[h]
            ));
        }
        self.heaps[h] -= k;
        let mover = self.to_move;
        if self.heaps.iter().all(|&n| n == 0) {
            let mut scores = vec![-1.0; 2];
            scores[mover] = 1.0;
            return Ok(Some(scores));
        }
        self.to_move = 1 - mover;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bouton_moves_of_hand_worked_positions() {
        // 1^3^5^7 = 0: the first player has no winning move.
        assert!(Nim::default().winning_moves().is_empty());
        // [1, 3, 5, 6]: nim-sum 1^3^5^6 = 1; heaps where h^1 < h: 1 (take 1),
        // 3 (to 2, take 1), 5 (to 4, take 1); not 6 (6^1 = 7).
        let moves = Nim::new([1, 3, 5, 6]).winning_moves();
        assert_eq!(
            moves,
            [Nim::encode(0, 1), Nim::encode(1, 1), Nim::encode(2, 1)]
        );
        // [0, 0, 2, 5]: nim-sum 7; only heap 5 (to 2, take 3).
        assert_eq!(Nim::new([0, 0, 2, 5]).winning_moves(), [Nim::encode(3, 3)]);
    }

    #[test]
    fn a_game_to_the_end_and_illegal_moves() {
        let mut g = Nim::new([0, 0, 1, 2]);
        let mut mask = vec![false; ACTIONS];
        g.legal_mask(&mut mask);
        assert_eq!(mask.iter().filter(|&&m| m).count(), 3);
        assert!(g.play(Nim::encode(2, 2)).unwrap_err().contains("heap 2"));
        assert!(g.play(ACTIONS).is_err());
        assert_eq!(g.rule_move(0), Nim::encode(3, 2), "the whole largest heap");
        assert_eq!(g.play(Nim::encode(3, 1)), Ok(None)); // [0,0,1,1]: a win for player 0
        assert_eq!(
            g.rule_move(0),
            Nim::encode(2, 1),
            "the first of equal heaps"
        );
        assert_eq!(TurnGame::to_move(&g), 1);
        assert_eq!(g.play(Nim::encode(2, 1)), Ok(None));
        assert_eq!(g.play(Nim::encode(3, 1)), Ok(Some(vec![1.0, -1.0])));
        let mut o = vec![0.0; OBS_DIM];
        Nim::new([1, 3, 5, 7]).observe(0, &mut o);
        assert_eq!(o.iter().sum::<f32>(), 4.0);
        assert_eq!(o[1], 1.0);
        assert_eq!(o[8 + 3], 1.0);
        assert_eq!(o[24 + 7], 1.0);
    }
}
