//! The algorithms, apart from any service: a [`Trajectory`] in, an update of
//! the [`Trainer`] out. Batch preparation (reward scale, values, GAE or
//! V-trace, advantage normalisation), PPO, DQN with its replay memory, and
//! the engines that take a minibatch step (burn, and the fused CPU engine).
//! Nothing here knows gRPC, tokio or the run directory: the learner service
//! builds trajectories from validated batches and calls in, and
//! `examples/cartpole_ppo.rs` calls the same functions from a plain loop.

pub mod data;
pub mod dqn;
pub mod engine;
pub mod gae;
pub mod gae_players;
pub mod minibatches;
pub mod ppo;
pub mod prepare;
pub mod reward_scale;
pub mod rule;
pub mod trainer;
pub mod trajectory;
pub mod vtrace;

pub use rule::{UpdateAt, UpdateRule, UpdateStats};
pub use trainer::{Trainer, TrainerState};
pub use trajectory::{BatchActions, GameRows, Trajectory, TrajectoryBuilder};

/// burn-collective keeps one collective per backend per process: tests that
/// build several replicas take turns.
#[cfg(test)]
pub(crate) static COLLECTIVE_TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
