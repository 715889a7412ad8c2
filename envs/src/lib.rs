//! Classic-control environments with Gymnasium 1.x dynamics, plus a vectorised
//! wrapper with auto-reset.
//!
//! The raw environments carry no time limit; as in Gymnasium the limit lives in
//! a separate wrapper ([`TimeLimit`], used by [`NativeVecEnv`]), so that a state can be
//! set and stepped exactly like `env.unwrapped` in the reference data.
//!
//! Dynamics reproduce NumPy's dtype behaviour where it changes results (float32
//! reset states, float32 arithmetic under NEP 50 promotion); each environment
//! file documents which of its operations round through `f32` and why.

mod acrobot;
mod cartpole;
mod discounted_return;
pub mod games;
pub mod minatar;
mod mountain_car;
mod mountain_car_continuous;
mod observations;
mod pendulum;
mod spec;
pub mod stall;
mod vec_env;
mod vector;

pub use acrobot::Acrobot;
pub use cartpole::CartPole;
pub use discounted_return::DiscountedReturn;
pub use mountain_car::MountainCar;
pub use mountain_car_continuous::MountainCarContinuous;
pub use observations::{ObsDtype, Observations, concat_f32};
pub use pendulum::Pendulum;
pub use spec::{ActionSpace, EnvSpec};
pub use vec_env::*;
pub use vector::*;

/// The classic-control ids [`make_env`] knows (Gymnasium's twins), in a
/// stable order; it also makes MinAtar's games and [`stall::STALL_ID`].
pub const ENV_IDS: &[&str] = &[
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "Pendulum-v1",
    "MountainCarContinuous-v0",
];

/// One action for a single environment. Continuous actions are in env units
/// (already rescaled to the bounds); the env clips them as Gymnasium does.
#[derive(Clone, Copy, Debug)]
pub enum Action<'a> {
    Discrete(usize),
    Continuous(&'a [f32]),
}

/// Outcome of one raw step (truncation is the time limit's business).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepResult {
    pub reward: f64,
    pub terminated: bool,
}

/// Where a state handed to [`Env::set_state_from`] came from. Some Gymnasium
/// envs store a different dtype after `reset()` than after `step()`
/// (MountainCarContinuous: float64 vs float32), which changes later arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateOrigin {
    /// As stored by `reset()` (or assigned from a float64 array).
    Reset,
    /// As stored by `step()`.
    Step,
}

#[derive(thiserror::Error, Debug)]
pub enum EnvError {
    #[error("unknown environment id `{0}` (known: {known})", known = [ENV_IDS, crate::games::GAME_IDS, crate::minatar::MINATAR_IDS, &[stall::STALL_ID]].concat().join(", "))]
    UnknownId(String),
    #[error("bad state for `{id}`: {reason}")]
    BadState { id: String, reason: String },
    #[error("bad action for `{id}`: {reason}")]
    BadAction { id: String, reason: String },
    #[error("a vectorised environment needs at least one environment (num_envs = 0)")]
    NoEnvs,
    /// An external (Python) environment could not be made or failed.
    #[error("environment `{id}`: {reason}")]
    External { id: String, reason: String },
    /// One env of a vector env raised (its traceback is the reason).
    #[error("environment `{id}`, env {index} failed: {reason}")]
    EnvFailed {
        id: String,
        index: usize,
        reason: String,
    },
    /// An environment returned a non-finite observation or reward.
    #[error("environment `{id}`, env {index}: non-finite {what}")]
    NonFinite {
        id: String,
        index: usize,
        what: &'static str,
    },
}

/// Raw dynamics without a time limit (the time limit lives in [`TimeLimit`] /
/// [`NativeVecEnv`], as Gymnasium's TimeLimit wrapper).
pub trait Env: Send {
    fn spec(&self) -> &EnvSpec;
    /// Draws a new initial state from the env's own seeded RNG and writes the
    /// observation (`obs.len() == spec().obs_dim`).
    fn reset(&mut self, obs: &mut [f32]);
    /// Advances one step and writes the next observation.
    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<StepResult, EnvError>;
    /// The unwrapped state, laid out as Gymnasium's `env.unwrapped.state`.
    fn state(&self) -> Vec<f64>;
    /// Sets the state as if assigned a float64 array (wrong length or
    /// non-finite values give [`EnvError::BadState`]).
    fn set_state(&mut self, state: &[f64]) -> Result<(), EnvError>;
    /// Sets the state together with the dtype Gymnasium would have stored for
    /// it. Only envs whose dtype matters override this.
    fn set_state_from(&mut self, state: &[f64], origin: StateOrigin) -> Result<(), EnvError> {
        let _ = origin;
        self.set_state(state)
    }
    /// Writes the observation of the current state.
    fn observe(&self, obs: &mut [f32]);
    /// Envs with action masks write which discrete actions are allowed now
    /// (1 = allowed) and return true; the rest return false.
    fn action_mask(&self, mask: &mut [u8]) -> bool {
        let _ = mask;
        false
    }
}

/// A fresh environment `id` whose reset RNG is seeded with `seed`.
pub fn make_env(id: &str, seed: u64) -> Result<Box<dyn Env>, EnvError> {
    Ok(match id {
        "CartPole-v1" => Box::new(CartPole::new(seed)),
        "Acrobot-v1" => Box::new(Acrobot::new(seed)),
        "MountainCar-v0" => Box::new(MountainCar::new(seed)),
        "Pendulum-v1" => Box::new(Pendulum::new(seed)),
        "MountainCarContinuous-v0" => Box::new(MountainCarContinuous::new(seed)),
        stall::STALL_ID => Box::new(stall::Stall::new()),
        _ if minatar::minatar_spec(id).is_some() => Box::new(minatar::MinAtar::new(
            id,
            minatar::Options::default(),
            seed,
        )?),
        _ => return Err(EnvError::UnknownId(id.to_string())),
    })
}

/// The spec of environment `id` (a game's too) without building one.
pub fn env_spec(id: &str) -> Result<EnvSpec, EnvError> {
    Ok(match id {
        "CartPole-v1" => cartpole::spec(),
        "Acrobot-v1" => acrobot::spec(),
        "MountainCar-v0" => mountain_car::spec(),
        "Pendulum-v1" => pendulum::spec(),
        "MountainCarContinuous-v0" => mountain_car_continuous::spec(),
        stall::STALL_ID => stall::spec(),
        _ => {
            return crate::games::game_spec(id)
                .or_else(|| minatar::minatar_spec(id))
                .ok_or_else(|| EnvError::UnknownId(id.to_string()));
        }
    })
}

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
/// code path for truncation (used by [`NativeVecEnv`] and the reference test).
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

/// Validates a discrete action against `spec` and returns its index.
fn discrete_action(spec: &EnvSpec, action: Action<'_>) -> Result<usize, EnvError> {
    let n = spec.action_space.dim();
    match action {
        Action::Discrete(a) if a < n => Ok(a),
        Action::Discrete(a) => Err(bad_action(spec, format!("index {a} outside 0..{n}"))),
        Action::Continuous(_) => Err(bad_action(
            spec,
            "continuous action for a discrete space".into(),
        )),
    }
}

/// Validates a continuous action (length, finiteness) and returns it.
fn continuous_action<'a>(spec: &EnvSpec, action: Action<'a>) -> Result<&'a [f32], EnvError> {
    let dim = spec.action_space.dim();
    match action {
        Action::Continuous(a) if a.len() != dim => Err(bad_action(
            spec,
            format!("expected {dim} components, got {}", a.len()),
        )),
        Action::Continuous(a) if a.iter().any(|x| !x.is_finite()) => {
            Err(bad_action(spec, format!("non-finite component in {a:?}")))
        }
        Action::Continuous(a) => Ok(a),
        Action::Discrete(_) => Err(bad_action(spec, "discrete action for a box space".into())),
    }
}

fn bad_action(spec: &EnvSpec, reason: String) -> EnvError {
    EnvError::BadAction {
        id: spec.id.clone(),
        reason,
    }
}

/// Checks a state vector's length and finiteness and copies it into an array.
fn state_array<const N: usize>(spec: &EnvSpec, state: &[f64]) -> Result<[f64; N], EnvError> {
    let bad = |reason: String| EnvError::BadState {
        id: spec.id.clone(),
        reason,
    };
    let arr: [f64; N] = state
        .try_into()
        .map_err(|_| bad(format!("expected {N} values, got {}", state.len())))?;
    if arr.iter().any(|x| !x.is_finite()) {
        return Err(bad(format!("non-finite value in {state:?}")));
    }
    Ok(arr)
}

/// Builds a spec (keeps the per-env `spec()` functions short).
fn make_spec(
    id: &str,
    action_space: ActionSpace,
    max_episode_steps: u32,
    obs_low: Vec<f32>,
    obs_high: Vec<f32>,
) -> EnvSpec {
    EnvSpec {
        obs_dtype: crate::ObsDtype::F32,
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
    use std::f64::consts::PI;

    #[test]
    fn every_id_builds_and_matches_its_spec() {
        for id in ENV_IDS {
            let env = make_env(id, 1).expect("known id");
            let spec = env_spec(id).expect("known id");
            assert_eq!(env.spec(), &spec);
            assert_eq!(spec.id, *id);
            assert_eq!(spec.obs_low.len(), spec.obs_dim);
            assert_eq!(spec.obs_high.len(), spec.obs_dim);
        }
    }

    #[test]
    fn unknown_id_lists_known_ids() {
        let err = make_env("Nope-v0", 0).err().expect("unknown id");
        let msg = err.to_string();
        assert!(
            msg.contains("Nope-v0") && msg.contains("Pendulum-v1"),
            "{msg}"
        );
        assert!(env_spec("Nope-v0").is_err());
    }

    #[test]
    fn bad_state_and_action_are_errors() {
        let mut env = make_env("CartPole-v1", 0).expect("known id");
        assert!(matches!(
            env.set_state(&[0.0; 3]),
            Err(EnvError::BadState { .. })
        ));
        assert!(matches!(
            env.set_state(&[0.0, f64::NAN, 0.0, 0.0]),
            Err(EnvError::BadState { .. })
        ));
        let mut obs = [0.0f32; 4];
        assert!(env.step(Action::Discrete(2), &mut obs).is_err());
        assert!(env.step(Action::Continuous(&[0.0]), &mut obs).is_err());
        let mut pend = make_env("Pendulum-v1", 0).expect("known id");
        let mut obs = [0.0f32; 3];
        assert!(
            pend.step(Action::Continuous(&[0.0, 1.0]), &mut obs)
                .is_err()
        );
        assert!(
            pend.step(Action::Continuous(&[f32::NAN]), &mut obs)
                .is_err()
        );
        assert!(pend.step(Action::Discrete(0), &mut obs).is_err());
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

    #[test]
    fn resets_follow_gymnasium_distributions() {
        let in_range = |v: &[f64], lo: &[f64], hi: &[f64]| {
            v.iter().zip(lo).zip(hi).all(|((x, l), h)| l <= x && x <= h)
        };
        for seed in 0..50 {
            let mut obs = [0.0f32; 6];
            for id in ENV_IDS {
                let mut env = make_env(id, seed).expect("known id");
                let d = env.spec().obs_dim;
                env.reset(&mut obs[..d]);
                let s = env.state();
                let ok = match *id {
                    "CartPole-v1" => in_range(&s, &[-0.05; 4], &[0.05; 4]),
                    // float32 draw: may round onto the bound itself.
                    "Acrobot-v1" => {
                        in_range(&s, &[-0.1; 4], &[f64::from(0.1f32); 4])
                            && s.iter().all(|&x| f64::from(x as f32) == x)
                    }
                    "Pendulum-v1" => in_range(&s, &[-PI, -1.0], &[PI, 1.0]),
                    _ => in_range(&s, &[-0.6, 0.0], &[-0.4, 0.0]),
                };
                assert!(ok, "{id}: reset state {s:?}");
                let mut expected = vec![0.0f32; d];
                env.observe(&mut expected);
                assert_eq!(obs[..d], expected[..], "{id}");
            }
        }
    }

    #[test]
    fn truncation_rule() {
        assert!(!time_limit_truncated(199, 200));
        assert!(time_limit_truncated(200, 200));
    }
}
