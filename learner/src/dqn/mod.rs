//! DQN's learner side: the replay memory and the Q-learning targets and loss.

pub mod replay;
pub mod targets;
pub mod train;

#[cfg(test)]
mod tests;
