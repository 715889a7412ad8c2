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
//!
//! An env keeps the contract in `env` ([`Env`]); `registry` maps ids to
//! envs ([`make_env`], [`make_vector_env`]) and is the one module that
//! imports them all.

mod acrobot;
mod cartpole;
mod discounted_return;
mod env;
pub mod games;
mod ids;
pub mod minatar;
mod mountain_car;
mod mountain_car_continuous;
mod observations;
mod pendulum;
mod registry;
pub mod render;
mod spec;
pub mod stall;
mod time_limit;
mod vec_env;
mod vector;

pub use acrobot::Acrobot;
pub use cartpole::CartPole;
pub use discounted_return::DiscountedReturn;
pub use env::{Action, Env, EnvError, StateOrigin, StepResult};
pub use ids::ENV_IDS;
pub use mountain_car::MountainCar;
pub use mountain_car_continuous::MountainCarContinuous;
pub use observations::{ObsDtype, Observations, concat_f32};
pub use pendulum::Pendulum;
pub use registry::{
    MAX_STEP_COST_US, env_spec, env_spec_with, make_env, make_vector_env, native_step_cost,
};
pub use spec::{ActionSpace, EnvSpec};
pub use time_limit::{TimeLimit, TimeStep, time_limit_truncated};
pub use vec_env::*;
pub use vector::*;
