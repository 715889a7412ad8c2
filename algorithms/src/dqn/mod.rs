//! DQN's learner side: the replay memory, the target network, the
//! Q-learning targets and loss, and a DQN run's update.

pub mod replay;
pub mod target_network;
pub mod targets;
pub mod train;
pub mod update;

pub use target_network::TargetNetwork;
pub use update::{DqnLearner, DqnStats, epsilon};

#[cfg(test)]
mod tests;
