//! The contract every native environment keeps ([`Env`]): one env's raw
//! dynamics, its actions, its outcome and its errors, apart from the registry
//! that maps ids to envs (`crate::registry`), so an env depends only on the
//! contract it implements.

use crate::ids::known_ids;
use crate::render::Frame;
use crate::spec::EnvSpec;

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

/// Why an env could not be made, set or stepped.
#[derive(thiserror::Error, Debug)]
pub enum EnvError {
    #[error("unknown environment id `{0}` (known: {known})", known = known_ids())]
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

/// Raw dynamics without a time limit (the time limit lives in
/// [`TimeLimit`](crate::time_limit::TimeLimit) /
/// [`NativeVecEnv`](crate::vec_env::NativeVecEnv), as Gymnasium's TimeLimit wrapper).
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
    /// A picture of the current state for videos (`crate::render`); `None`
    /// for an env that cannot draw itself.
    fn render(&self) -> Option<Frame> {
        None
    }
}

/// Validates a discrete action against `spec` and returns its index.
pub(crate) fn discrete_action(spec: &EnvSpec, action: Action<'_>) -> Result<usize, EnvError> {
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
pub(crate) fn continuous_action<'a>(
    spec: &EnvSpec,
    action: Action<'a>,
) -> Result<&'a [f32], EnvError> {
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
pub(crate) fn state_array<const N: usize>(
    spec: &EnvSpec,
    state: &[f64],
) -> Result<[f64; N], EnvError> {
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
