//! MountainCar-v0: Gymnasium 1.x dynamics, all in float64 (the env stores a
//! tuple of float64 after each step).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::env::{Action, Env, EnvError, StepResult, discrete_action, state_array};
use crate::spec::{ActionSpace, EnvSpec, make_spec};

const MIN_POSITION: f64 = -1.2;
const MAX_POSITION: f64 = 0.6;
const MAX_SPEED: f64 = 0.07;
const GOAL_POSITION: f64 = 0.5;
const GOAL_VELOCITY: f64 = 0.0;
const FORCE: f64 = 0.001;
const GRAVITY: f64 = 0.0025;

pub(super) fn spec() -> EnvSpec {
    make_spec(
        "MountainCar-v0",
        ActionSpace::Discrete { n: 3 },
        200,
        vec![MIN_POSITION as f32, -MAX_SPEED as f32],
        vec![MAX_POSITION as f32, MAX_SPEED as f32],
    )
}

/// State `[position, velocity]`; actions 0/1/2 push left / nothing / right.
pub struct MountainCar {
    spec: EnvSpec,
    state: [f64; 2],
    rng: StdRng,
}

impl MountainCar {
    pub fn new(seed: u64) -> Self {
        let mut env = Self {
            spec: spec(),
            state: [0.0; 2],
            rng: StdRng::seed_from_u64(seed),
        };
        env.draw_initial_state();
        env
    }

    /// Gymnasium: position uniform in [-0.6, -0.4), velocity 0.
    fn draw_initial_state(&mut self) {
        self.state = [self.rng.random_range(-0.6..-0.4), 0.0];
    }
}

impl Env for MountainCar {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [f32]) {
        self.draw_initial_state();
        self.observe(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<StepResult, EnvError> {
        let a = discrete_action(&self.spec, action)?;
        let [mut position, mut velocity] = self.state;
        // `action - 1` is an integer in Gymnasium, so the push is exact.
        let push = (a as f64 - 1.0) * FORCE;
        velocity += push + (3.0 * position).cos() * (-GRAVITY);
        velocity = velocity.clamp(-MAX_SPEED, MAX_SPEED);
        position += velocity;
        position = position.clamp(MIN_POSITION, MAX_POSITION);
        if position == MIN_POSITION && velocity < 0.0 {
            velocity = 0.0;
        }
        let terminated = position >= GOAL_POSITION && velocity >= GOAL_VELOCITY;
        self.state = [position, velocity];
        self.observe(obs);
        Ok(StepResult {
            reward: -1.0,
            terminated,
        })
    }

    fn state(&self) -> Vec<f64> {
        self.state.to_vec()
    }

    fn set_state(&mut self, state: &[f64]) -> Result<(), EnvError> {
        self.state = state_array(&self.spec, state)?;
        Ok(())
    }

    fn render(&self) -> Option<crate::render::Frame> {
        Some(crate::render::classic::mountain_car(
            &self.state,
            GOAL_POSITION as f32,
        ))
    }

    fn observe(&self, obs: &mut [f32]) {
        for (o, s) in obs.iter_mut().zip(self.state) {
            *o = s as f32;
        }
    }
}
