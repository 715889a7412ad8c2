//! Turn-based games for several players: the contract multi-player training
//! builds on (one player acts per step; the game says whose turn it is, which
//! actions are legal, and at its end a score per player), and the games.
//!
//! Actors and the evaluator step a game through [`GameVecEnv`], a
//! [`VectorEnv`](crate::VectorEnv) whose observation is the mover's.

pub mod bigtwo;
pub mod nim;
mod options;
mod vec;

pub use crate::ids::GAME_IDS;
pub use options::{GameOptions, Scoring};
pub use vec::{GameVecEnv, default_normaliser, game_spec};

use rand::SeedableRng;
use rand::rngs::StdRng;

/// A new game of `id` (a fresh deal drawn from `rng` where the game deals),
/// or `None` for an id that is not a game.
pub fn new_game(id: &str, rng: &mut StdRng) -> Option<Box<dyn TurnGame + Send>> {
    match id {
        "BigTwo-v0" => Some(Box::new(bigtwo::BigTwo::deal(rng))),
        "BigTwo-v1" => Some(Box::new(bigtwo::Planned::new(bigtwo::BigTwo::deal(rng)))),
        "BigTwo-v2" => Some(Box::new(bigtwo::Remembered::new(bigtwo::BigTwo::deal(rng)))),
        "Nim-v0" => Some(Box::new(nim::Nim::random(rng))),
        _ => None,
    }
}

/// A generator for [`new_game`] seeded from `seed`.
pub fn game_rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A turn-based game with a fixed action space.
pub trait TurnGame {
    /// Players (seats 0..players).
    fn players(&self) -> usize;
    /// Floats in one player's observation.
    fn obs_dim(&self) -> usize;
    /// Actions in the (fixed) action space.
    fn actions(&self) -> usize;
    /// The seat to act now.
    fn to_move(&self) -> usize;
    /// What `player` sees, written into `out` (`obs_dim` floats).
    fn observe(&self, player: usize, out: &mut [f32]);
    /// The legal actions of the player to move (`actions` flags).
    fn legal_mask(&self, mask: &mut [bool]);
    /// The game's rule-based players by name, each an evaluation opponent;
    /// the first is the game's "greedy" player (each game documents its
    /// rules).
    fn rules(&self) -> &'static [&'static str] {
        &["greedy"]
    }
    /// The move of rule-based player `rule` (an index into `rules`) for the
    /// player to move.
    fn rule_move(&self, rule: usize) -> usize;
    /// The mover plays `action`: `Ok(Some(scores))` when that ends the game
    /// (a score per seat), `Err` naming the action when it is not legal.
    fn play(&mut self, action: usize) -> Result<Option<Vec<f64>>, String>;
}

impl TurnGame for bigtwo::BigTwo {
    fn players(&self) -> usize {
        bigtwo::PLAYERS
    }

    fn obs_dim(&self) -> usize {
        bigtwo::OBS_DIM
    }

    fn actions(&self) -> usize {
        bigtwo::ACTIONS
    }

    fn to_move(&self) -> usize {
        bigtwo::BigTwo::to_move(self)
    }

    fn observe(&self, player: usize, out: &mut [f32]) {
        bigtwo::observe(self, player, out);
    }

    fn legal_mask(&self, mask: &mut [bool]) {
        bigtwo::BigTwo::legal_mask(self, mask);
    }

    fn rules(&self) -> &'static [&'static str] {
        &["greedy", "planner"]
    }

    fn rule_move(&self, rule: usize) -> usize {
        match rule {
            0 => bigtwo::greedy_move(self),
            _ => bigtwo::planner_move(self),
        }
    }

    fn play(&mut self, action: usize) -> Result<Option<Vec<f64>>, String> {
        self.step(action)
            .map(|s| s.map(|s| s.to_vec()))
            .map_err(|e| e.to_string())
    }
}

/// A Big Two game observed more fully than v0 (`BigTwo-v1`, `BigTwo-v2`):
/// the same rules and rule players, its own observation and width, and a
/// `step` that keeps what that observation remembers.
macro_rules! observed_big_two {
    ($game:ty, $obs_dim:expr) => {
        impl TurnGame for $game {
            fn players(&self) -> usize {
                bigtwo::PLAYERS
            }

            fn obs_dim(&self) -> usize {
                $obs_dim
            }

            fn actions(&self) -> usize {
                bigtwo::ACTIONS
            }

            fn to_move(&self) -> usize {
                self.game().to_move()
            }

            fn observe(&self, player: usize, out: &mut [f32]) {
                <$game>::observe(self, player, out);
            }

            fn legal_mask(&self, mask: &mut [bool]) {
                self.game().legal_mask(mask);
            }

            fn rules(&self) -> &'static [&'static str] {
                self.game().rules()
            }

            fn rule_move(&self, rule: usize) -> usize {
                self.game().rule_move(rule)
            }

            fn play(&mut self, action: usize) -> Result<Option<Vec<f64>>, String> {
                self.step(action)
                    .map(|s| s.map(|s| s.to_vec()))
                    .map_err(|e| e.to_string())
            }
        }
    };
}

observed_big_two!(bigtwo::Planned, bigtwo::PLANNED_OBS_DIM);
observed_big_two!(bigtwo::Remembered, bigtwo::REMEMBERED_OBS_DIM);
