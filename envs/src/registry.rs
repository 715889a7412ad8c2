//! The registry: which env an id names, for one env ([`make_env`],
//! [`env_spec`]) and for E of them ([`make_vector_env`], [`env_spec_with`],
//! the prefixed ids through the installed provider). The one module that
//! imports every env; the envs know only their contract (`crate::env`).

use std::time::Duration;

use crate::acrobot::{self, Acrobot};
use crate::cartpole::{self, CartPole, Observed};
use crate::env::{Env, EnvError};
use crate::games::{GameOptions, GameVecEnv, game_spec};
use crate::minatar;
use crate::mountain_car::{self, MountainCar};
use crate::mountain_car_continuous::{self, MountainCarContinuous};
use crate::pendulum::{self, Pendulum};
use crate::spec::EnvSpec;
use crate::stall;
use crate::vec_env::NativeVecEnv;
use crate::vector::{Purpose, VectorEnv, is_external, provider};

/// A fresh environment `id` whose reset RNG is seeded with `seed`.
pub fn make_env(id: &str, seed: u64) -> Result<Box<dyn Env>, EnvError> {
    Ok(match id {
        "CartPole-v1" => Box::new(CartPole::new(seed)),
        "CartPoleNoVel-v1" => Box::new(CartPole::observing(Observed::Positions, seed)),
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
        "CartPole-v1" => cartpole::spec(Observed::Everything),
        "CartPoleNoVel-v1" => cartpole::spec(Observed::Positions),
        "Acrobot-v1" => acrobot::spec(),
        "MountainCar-v0" => mountain_car::spec(),
        "Pendulum-v1" => pendulum::spec(),
        "MountainCarContinuous-v0" => mountain_car_continuous::spec(),
        stall::STALL_ID => stall::spec(),
        _ => {
            return game_spec(id)
                .or_else(|| minatar::minatar_spec(id))
                .ok_or_else(|| EnvError::UnknownId(id.to_string()));
        }
    })
}

/// Made by id here, where ids are mapped, so that the vector env itself
/// needs no registry.
impl NativeVecEnv {
    /// `num_envs` copies of env `id`; env `i` is seeded with
    /// [`derive_env_seed`](crate::vec_env::derive_env_seed)`(seed, i)` so
    /// streams differ but are reproducible.
    pub fn new(id: &str, num_envs: usize, seed: u64) -> Result<Self, EnvError> {
        Self::from_envs(num_envs, seed, |s| make_env(id, s))
    }
}

/// The most a native env's synthetic step cost may be: one second a step.
pub const MAX_STEP_COST_US: u64 = 1_000_000;

/// A native env's kwargs: only `step_cost_us`, a synthetic cost of CPU time
/// per env step (an integer in [0, 1e6] microseconds, 0 without it) that
/// stands in for an expensive simulator when measuring how throughput scales
/// with actor processes. Anything else is for Python environments.
pub fn native_step_cost(id: &str, kwargs: &str) -> Result<Duration, EnvError> {
    let hint = "a native env takes only `step_cost_us` (other kwargs are for Python environments)";
    match only_kwarg(id, kwargs, "step_cost_us", hint)? {
        None => Ok(Duration::ZERO),
        Some(v) => v
            .as_u64()
            .filter(|&us| us <= MAX_STEP_COST_US)
            .map(Duration::from_micros)
            .ok_or_else(|| {
                kwargs_error(
                    id,
                    format!("env.kwargs.step_cost_us = {v}: must be an integer in [0, {MAX_STEP_COST_US}]"),
                )
            }),
    }
}

fn kwargs_error(id: &str, reason: String) -> EnvError {
    EnvError::External {
        id: id.to_string(),
        reason,
    }
}

/// The value of `key` in `kwargs` (a JSON object, `""` for none), which may
/// hold no other key (`hint` says so, naming the key found).
fn only_kwarg(
    id: &str,
    kwargs: &str,
    key: &str,
    hint: &str,
) -> Result<Option<serde_json::Value>, EnvError> {
    if kwargs.trim().is_empty() {
        return Ok(None);
    }
    let mut map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(kwargs).map_err(|e| kwargs_error(id, format!("env.kwargs: {e}")))?;
    if let Some(other) = map.keys().find(|k| *k != key) {
        return Err(kwargs_error(id, format!("env.kwargs.{other}: {hint}")));
    }
    Ok(map.remove(key))
}

/// The spec of any environment id, native or external.
pub fn env_spec_with(id: &str, kwargs: &str) -> Result<EnvSpec, EnvError> {
    if is_external(id) {
        provider(id)?.spec(id, kwargs)
    } else if let Some(spec) = game_spec(id) {
        GameOptions::from_kwargs(id, kwargs)?;
        Ok(spec)
    } else if let Some(spec) = minatar::minatar_spec(id) {
        minatar::Options::from_kwargs(id, kwargs)?;
        Ok(spec)
    } else {
        native_step_cost(id, kwargs)?;
        env_spec(id)
    }
}

/// `num_envs` copies of any environment id, native or external, made for
/// `purpose`.
pub fn make_vector_env(
    id: &str,
    kwargs: &str,
    num_envs: usize,
    seed: u64,
    purpose: Purpose,
) -> Result<Box<dyn VectorEnv>, EnvError> {
    if num_envs == 0 {
        return Err(EnvError::NoEnvs);
    }
    if is_external(id) {
        provider(id)?.make(id, kwargs, num_envs, seed, purpose)
    } else if game_spec(id).is_some() {
        let options = GameOptions::from_kwargs(id, kwargs)?;
        Ok(Box::new(GameVecEnv::new(id, num_envs, seed, options)?))
    } else if minatar::minatar_spec(id).is_some() {
        let options = minatar::Options::from_kwargs(id, kwargs)?;
        Ok(Box::new(NativeVecEnv::from_envs(num_envs, seed, |s| {
            Ok(Box::new(minatar::MinAtar::new(id, options, s)?))
        })?))
    } else {
        let cost = native_step_cost(id, kwargs)?;
        Ok(Box::new(
            NativeVecEnv::new(id, num_envs, seed)?.with_step_cost(cost),
        ))
    }
}

#[cfg(test)]
mod tests;
