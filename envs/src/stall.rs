//! `Stall-v0`: an env built to stall, for testing evaluation protocols. Its
//! episodes never end by themselves, whatever the policy does: only the time
//! limit (27,000 steps, ALE's cap on an Atari game) truncates them, as an
//! Atari game is held by a greedy policy that never presses FIRE. Action 1
//! pays 1 and action 0 pays 0, so an episode's return counts its 1s: what a
//! fixed policy's action statistics can be read from. The observation is
//! the constant `[1.0]`.

pub use crate::ids::STALL_ID;

use crate::env::{Action, Env, EnvError, StepResult, discrete_action};
use crate::spec::{ActionSpace, EnvSpec, make_spec};

/// ALE's cap on a game (108,000 frames at frame skip 4).
const MAX_EPISODE_STEPS: u32 = 27_000;

pub(super) fn spec() -> EnvSpec {
    make_spec(
        STALL_ID,
        ActionSpace::Discrete { n: 2 },
        MAX_EPISODE_STEPS,
        vec![0.0],
        vec![1.0],
    )
}

/// Stateless: the env is the same at every step.
pub struct Stall {
    spec: EnvSpec,
}

impl Stall {
    pub fn new() -> Self {
        Self { spec: spec() }
    }
}

impl Default for Stall {
    fn default() -> Self {
        Self::new()
    }
}

impl Env for Stall {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [f32]) {
        self.observe(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<StepResult, EnvError> {
        let a = discrete_action(&self.spec, action)?;
        self.observe(obs);
        Ok(StepResult {
            reward: a as f64,
            terminated: false,
        })
    }

    fn state(&self) -> Vec<f64> {
        Vec::new()
    }

    fn set_state(&mut self, state: &[f64]) -> Result<(), EnvError> {
        if state.is_empty() {
            Ok(())
        } else {
            Err(EnvError::BadState {
                id: STALL_ID.into(),
                reason: format!("it has no state, got {} values", state.len()),
            })
        }
    }

    fn observe(&self, obs: &mut [f32]) {
        obs[0] = 1.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time_limit::TimeLimit;

    #[test]
    fn it_never_ends_but_at_the_cap_and_pays_its_action() {
        let mut env = TimeLimit::new(Box::new(Stall::new()));
        let mut obs = [0.0f32];
        env.reset(&mut obs);
        assert_eq!(obs, [1.0]);
        let mut ret = 0.0;
        for t in 1..=MAX_EPISODE_STEPS {
            let s = env
                .step(Action::Discrete((t % 2) as usize), &mut obs)
                .expect("step");
            ret += s.reward;
            assert!(!s.terminated);
            assert_eq!(s.truncated, t == MAX_EPISODE_STEPS, "step {t}");
            assert_eq!(obs, [1.0]);
        }
        assert_eq!(ret, f64::from(MAX_EPISODE_STEPS / 2));
        assert!(env.step(Action::Discrete(2), &mut obs).is_err());
        assert!(env.env_mut().set_state(&[1.0]).is_err());
    }
}
