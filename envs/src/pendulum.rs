//! Pendulum-v1: Gymnasium 1.x dynamics.
//!
//! The state is float64, but the clipped torque `u` is a float32 NumPy scalar,
//! and under NEP 50 `3.0 * u` and `0.001 * u**2` stay float32; those two terms
//! are computed in `f32` here before joining the float64 arithmetic.

use std::f64::consts::{PI, TAU};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::env::{Action, Env, EnvError, StepResult, continuous_action, state_array};
use crate::spec::{ActionSpace, EnvSpec, make_spec};

const MAX_SPEED: f64 = 8.0;
const MAX_TORQUE: f32 = 2.0;
const DT: f64 = 0.05;
const G: f64 = 10.0;
const M: f64 = 1.0;
const L: f64 = 1.0;

pub(super) fn spec() -> EnvSpec {
    make_spec(
        "Pendulum-v1",
        ActionSpace::Box {
            low: vec![-MAX_TORQUE],
            high: vec![MAX_TORQUE],
        },
        200,
        vec![-1.0, -1.0, -MAX_SPEED as f32],
        vec![1.0, 1.0, MAX_SPEED as f32],
    )
}

/// State `[theta, thetadot]`; theta is not wrapped (only inside the cost).
pub struct Pendulum {
    spec: EnvSpec,
    state: [f64; 2],
    rng: StdRng,
}

impl Pendulum {
    pub fn new(seed: u64) -> Self {
        let mut env = Self {
            spec: spec(),
            state: [0.0; 2],
            rng: StdRng::seed_from_u64(seed),
        };
        env.draw_initial_state();
        env
    }

    /// Gymnasium: theta uniform in [-pi, pi), thetadot uniform in [-1, 1).
    fn draw_initial_state(&mut self) {
        self.state = [
            self.rng.random_range(-PI..PI),
            self.rng.random_range(-1.0..1.0),
        ];
    }
}

/// `((x + pi) mod 2pi) - pi` with Python's (floored) modulo.
fn angle_normalize(x: f64) -> f64 {
    let mut r = (x + PI) % TAU;
    if r < 0.0 {
        r += TAU;
    }
    r - PI
}

impl Env for Pendulum {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [f32]) {
        self.draw_initial_state();
        self.observe(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<StepResult, EnvError> {
        let u = continuous_action(&self.spec, action)?[0].clamp(-MAX_TORQUE, MAX_TORQUE);
        let [th, thdot] = self.state;
        // Cost from the state before the step and the clipped torque.
        let an = angle_normalize(th);
        // NumPy evaluates the float32 `u**2` with libm's `powf`, which is not
        // always correctly rounded; calling it too matches the reference bit
        // for bit (black_box stops LLVM rewriting `powf(u, 2.0)` as `u * u`).
        let torque_cost = f64::from(0.001f32 * u.powf(std::hint::black_box(2.0)));
        let costs = an * an + 0.1 * (thdot * thdot) + torque_cost;
        let torque_acc = f64::from((3.0 / (M * L * L)) as f32 * u);
        let newthdot = thdot + (3.0 * G / (2.0 * L) * th.sin() + torque_acc) * DT;
        let newthdot = newthdot.clamp(-MAX_SPEED, MAX_SPEED);
        let newth = th + newthdot * DT;
        self.state = [newth, newthdot];
        self.observe(obs);
        Ok(StepResult {
            reward: -costs,
            terminated: false,
        })
    }

    fn state(&self) -> Vec<f64> {
        self.state.to_vec()
    }

    fn set_state(&mut self, state: &[f64]) -> Result<(), EnvError> {
        self.state = state_array(&self.spec, state)?;
        Ok(())
    }

    /// `[cos theta, sin theta, thetadot]` as float32.
    fn render(&self) -> Option<crate::render::Frame> {
        Some(crate::render::classic::pendulum(&self.state))
    }

    fn observe(&self, obs: &mut [f32]) {
        let [th, thdot] = self.state;
        for (o, v) in obs.iter_mut().zip([th.cos(), th.sin(), thdot]) {
            *o = v as f32;
        }
    }
}
