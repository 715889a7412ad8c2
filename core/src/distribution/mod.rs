//! Action distributions over the policy head's output: a (maskable) categorical
//! for discrete spaces and a tanh-squashed Gaussian for boxes. Each has a tensor
//! side (the learner, differentiable) and a CPU side on plain slices (actors and
//! the evaluator: one small batch per step).

mod categorical;
mod epsilon_greedy;
mod tanh_normal;

pub use categorical::*;
pub use epsilon_greedy::*;
pub use tanh_normal::*;

use crate::config::NetworkConfig;
use sebulba_envs::ActionSpace;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DistError {
    #[error("field `action_masks`: every action of env {env} is masked")]
    AllMasked { env: usize },
}

/// How the policy head's output is read as a distribution over actions.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionDist {
    Categorical {
        n: usize,
    },
    /// `a = low + (tanh(u) + 1) / 2 * (high - low)`, `u ~ N(mean, std)`,
    /// `std = softplus(raw) + min_std`; the head is `[mean (dim), raw (dim)]`.
    TanhNormal {
        dim: usize,
        squash: Squash,
        min_std: f32,
    },
}

impl ActionDist {
    pub fn new(space: &ActionSpace, network: &NetworkConfig) -> Self {
        match space {
            ActionSpace::Discrete { n } => ActionDist::Categorical { n: *n },
            ActionSpace::Box { low, high } => ActionDist::TanhNormal {
                dim: low.len(),
                squash: Squash::new(low, high),
                min_std: network.min_std as f32,
            },
        }
    }

    /// Values per action in a batch: 1 for discrete, `dim` for continuous.
    pub fn action_width(&self) -> usize {
        match self {
            ActionDist::Categorical { .. } => 1,
            ActionDist::TanhNormal { dim, .. } => *dim,
        }
    }
}

/// Width of the policy head for an action space.
pub fn head_dim(space: &ActionSpace) -> usize {
    match space {
        ActionSpace::Discrete { n } => *n,
        ActionSpace::Box { low, .. } => 2 * low.len(),
    }
}

/// `ln(1 + e^x)` without overflow for large `x` or loss for very negative `x`.
pub fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// The `raw` whose softplus is `y > 0`: `ln(e^y - 1)`, stable for large `y`.
pub fn softplus_inverse(y: f64) -> f64 {
    y + (-(-y).exp_m1()).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softplus_and_its_inverse() {
        // softplus(0) = ln 2; softplus(40) = 40 + ln(1 + e^-40) ~ 40; softplus(-40) ~ e^-40.
        assert!((softplus(0.0) - std::f64::consts::LN_2).abs() < 1e-15);
        assert!((softplus(1000.0) - 1000.0).abs() < 1e-12);
        assert!((softplus(-40.0) / (-40.0f64).exp() - 1.0).abs() < 1e-12);
        for y in [1e-3, 0.5, 1.0, 3.0, 50.0] {
            assert!(
                (softplus(softplus_inverse(y)) - y).abs() < 1e-12 * y.max(1.0),
                "{y}"
            );
        }
    }
}
