//! Gymnasium's TimeLimit wrapper: the one place an episode is truncated.

use crate::env::{Action, Env, EnvError};

/// Gymnasium's TimeLimit rule: after incrementing the elapsed-step counter,
/// the episode is truncated once it reaches the limit (even if it also
/// terminated in that step).
pub fn time_limit_truncated(elapsed_after_step: u32, max_episode_steps: u32) -> bool {
    elapsed_after_step >= max_episode_steps
}

/// Result of a step through [`TimeLimit`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeStep {
    pub reward: f64,
    pub terminated: bool,
    pub truncated: bool,
}

/// An environment with Gymnasium's TimeLimit wrapper around it; the single
/// code path for truncation (used by [`NativeVecEnv`](crate::NativeVecEnv) and the reference test).
pub struct TimeLimit {
    env: Box<dyn Env>,
    max_episode_steps: u32,
    elapsed: u32,
}

impl TimeLimit {
    /// Wraps `env` with the limit from its spec.
    pub fn new(env: Box<dyn Env>) -> Self {
        let max_episode_steps = env.spec().max_episode_steps;
        Self::with_limit(env, max_episode_steps)
    }

    pub fn with_limit(env: Box<dyn Env>, max_episode_steps: u32) -> Self {
        Self {
            env,
            max_episode_steps,
            elapsed: 0,
        }
    }

    pub fn reset(&mut self, obs: &mut [f32]) {
        self.elapsed = 0;
        self.env.reset(obs);
    }

    pub fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<TimeStep, EnvError> {
        let r = self.env.step(action, obs)?;
        self.elapsed = self.elapsed.saturating_add(1);
        Ok(TimeStep {
            reward: r.reward,
            terminated: r.terminated,
            truncated: time_limit_truncated(self.elapsed, self.max_episode_steps),
        })
    }

    /// Steps taken since the last reset.
    pub fn elapsed(&self) -> u32 {
        self.elapsed
    }

    /// Overrides the elapsed-step counter (for replaying recorded episodes).
    pub fn set_elapsed(&mut self, elapsed: u32) {
        self.elapsed = elapsed;
    }

    pub fn max_episode_steps(&self) -> u32 {
        self.max_episode_steps
    }

    pub fn env(&self) -> &dyn Env {
        self.env.as_ref()
    }

    pub fn env_mut(&mut self) -> &mut dyn Env {
        self.env.as_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_rule() {
        assert!(!time_limit_truncated(199, 200));
        assert!(time_limit_truncated(200, 200));
    }
}
