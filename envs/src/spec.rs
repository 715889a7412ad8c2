//! What an environment is, statically: its observation (shape, element
//! type, bounds), its actions, its time limit and its seats.

use crate::observations::ObsDtype;

/// The action space of an environment, as Gymnasium declares it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ActionSpace {
    /// Actions `0..n`.
    Discrete { n: usize },
    /// Real vectors inside `[low, high]` (element-wise).
    Box { low: Vec<f32>, high: Vec<f32> },
}

impl ActionSpace {
    pub fn is_discrete(&self) -> bool {
        matches!(self, ActionSpace::Discrete { .. })
    }

    /// Width of a policy head: the number of logits for a discrete space, the
    /// action dimension for a box.
    pub fn dim(&self) -> usize {
        match self {
            ActionSpace::Discrete { n } => *n,
            ActionSpace::Box { low, .. } => low.len(),
        }
    }
}

/// Static description of an environment.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EnvSpec {
    pub id: String,
    pub obs_dim: usize,
    /// The observation as an image `[H, W, C]`, channels last (`obs_dim = H
    /// * W * C`), which a convolutional network reads; `None`: a flat vector.
    #[serde(default)]
    pub image: Option<[usize; 3]>,
    /// The element type observations are kept and sent in (`u8` for an
    /// image of bytes); a network reads them widened to `f32`.
    #[serde(default)]
    pub obs_dtype: ObsDtype,
    pub action_space: ActionSpace,
    /// Gymnasium's registered `max_episode_steps` (applied by [`crate::time_limit::TimeLimit`]).
    pub max_episode_steps: u32,
    /// Observation-space bounds as `f32`, `f32::INFINITY` where Gymnasium has inf.
    pub obs_low: Vec<f32>,
    pub obs_high: Vec<f32>,
    /// Seats of a turn-based game (`crate::games`): one acts per step, in
    /// turn (seat after seat, cyclically); 1 for every other environment.
    #[serde(default = "one_player")]
    pub players: usize,
}

fn one_player() -> usize {
    1
}

impl EnvSpec {
    /// True for a turn-based game of several players.
    pub fn is_game(&self) -> bool {
        self.players > 1
    }

    /// What a network multiplies these observations by to bring them to a
    /// unit scale: the reciprocal of the space's upper bound for bytes that
    /// reach past 1 (1/255 for an Atari frame), 1 for everything else
    /// (MinAtar's 0/1 grids, float vectors).
    pub fn input_scale(&self) -> f32 {
        let top = self
            .obs_high
            .iter()
            .copied()
            .filter(|h| h.is_finite())
            .fold(0.0f32, f32::max);
        match self.obs_dtype {
            ObsDtype::U8 if top > 1.0 => 1.0 / top,
            _ => 1.0,
        }
    }

    /// Moves a batch of a game carries past its trained rows, so that each
    /// player's last trained move is bootstrapped by its next one: P - 1
    /// (0 for one player).
    pub fn overlap_rows(&self) -> usize {
        self.players.saturating_sub(1)
    }
}

/// A one-player spec of flat `f32` observations: a classic-control env's
/// (keeps the per-env `spec()` functions short).
pub(crate) fn make_spec(
    id: &str,
    action_space: ActionSpace,
    max_episode_steps: u32,
    obs_low: Vec<f32>,
    obs_high: Vec<f32>,
) -> EnvSpec {
    EnvSpec {
        obs_dtype: ObsDtype::F32,
        id: id.to_string(),
        obs_dim: obs_low.len(),
        image: None,
        action_space,
        max_episode_steps,
        obs_low,
        obs_high,
        players: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::env_spec;

    #[test]
    fn bytes_past_one_are_scaled_to_a_unit_range_and_nothing_else_is() {
        let mut spec = env_spec("CartPole-v1").expect("CartPole");
        assert_eq!(spec.input_scale(), 1.0, "floats stay as they are");
        spec.obs_dtype = ObsDtype::U8;
        spec.obs_low = vec![0.0; 4];
        spec.obs_high = vec![255.0, 255.0, 1.0, f32::INFINITY];
        assert_eq!(spec.input_scale(), 1.0 / 255.0, "an Atari frame");
        spec.obs_high = vec![1.0; 4];
        assert_eq!(spec.input_scale(), 1.0, "MinAtar's 0/1 grid");
    }

    #[test]
    fn action_space_dims() {
        assert_eq!(ActionSpace::Discrete { n: 3 }.dim(), 3);
        let b = ActionSpace::Box {
            low: vec![-1.0],
            high: vec![1.0],
        };
        assert_eq!(b.dim(), 1);
        assert!(!b.is_discrete());
    }
}
