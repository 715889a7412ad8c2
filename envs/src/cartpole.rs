//! CartPole-v1: Gymnasium 1.x dynamics (Euler integrator), all in float64;
//! and CartPoleNoVel-v1, the same env observed without its velocities
//! (`[x, theta]`, the Stable-Baselines3 zoo's memory task: a policy must
//! infer the velocities from the positions it remembers).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::env::{Action, Env, EnvError, StepResult, discrete_action, state_array};
use crate::spec::{ActionSpace, EnvSpec, make_spec};

const GRAVITY: f64 = 9.8;
const MASS_CART: f64 = 1.0;
const MASS_POLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASS_POLE + MASS_CART;
/// Half the pole's length, as Gymnasium's `length`.
const LENGTH: f64 = 0.5;
const POLE_MASS_LENGTH: f64 = MASS_POLE * LENGTH;
const FORCE_MAG: f64 = 10.0;
const TAU: f64 = 0.02;
const X_THRESHOLD: f64 = 2.4;
/// 12 degrees, computed the way Gymnasium writes it (`12 * 2 * pi / 360`).
const THETA_THRESHOLD: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;

/// What the env shows of its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observed {
    /// `[x, x_dot, theta, theta_dot]`: CartPole-v1.
    Everything,
    /// `[x, theta]`: CartPoleNoVel-v1.
    Positions,
}

impl Observed {
    /// The state components shown, in order.
    fn shown(self) -> &'static [usize] {
        match self {
            Observed::Everything => &[0, 1, 2, 3],
            Observed::Positions => &[0, 2],
        }
    }
}

pub(super) fn spec(observed: Observed) -> EnvSpec {
    let bounds = [
        (X_THRESHOLD * 2.0) as f32,
        f32::INFINITY,
        (THETA_THRESHOLD * 2.0) as f32,
        f32::INFINITY,
    ];
    let high: Vec<f32> = observed.shown().iter().map(|&i| bounds[i]).collect();
    let low = high.iter().map(|h| -h).collect();
    let id = match observed {
        Observed::Everything => "CartPole-v1",
        Observed::Positions => "CartPoleNoVel-v1",
    };
    make_spec(id, ActionSpace::Discrete { n: 2 }, 500, low, high)
}

/// State `[x, x_dot, theta, theta_dot]`; action 0 pushes left, 1 right.
pub struct CartPole {
    spec: EnvSpec,
    observed: Observed,
    state: [f64; 4],
    rng: StdRng,
}

impl CartPole {
    pub fn new(seed: u64) -> Self {
        Self::observing(Observed::Everything, seed)
    }

    /// The env showing `observed` of its state.
    pub fn observing(observed: Observed, seed: u64) -> Self {
        let mut env = Self {
            spec: spec(observed),
            observed,
            state: [0.0; 4],
            rng: StdRng::seed_from_u64(seed),
        };
        env.draw_initial_state();
        env
    }

    /// Gymnasium: every component uniform in [-0.05, 0.05).
    fn draw_initial_state(&mut self) {
        for s in &mut self.state {
            *s = self.rng.random_range(-0.05..0.05);
        }
    }
}

impl Env for CartPole {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [f32]) {
        self.draw_initial_state();
        self.observe(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<StepResult, EnvError> {
        let a = discrete_action(&self.spec, action)?;
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if a == 1 { FORCE_MAG } else { -FORCE_MAG };
        let (sin_t, cos_t) = (theta.sin(), theta.cos());
        // Same operation order as Gymnasium so results agree to the last bit
        // wherever sin/cos do.
        let temp = (force + POLE_MASS_LENGTH * (theta_dot * theta_dot) * sin_t) / TOTAL_MASS;
        let theta_acc = (GRAVITY * sin_t - cos_t * temp)
            / (LENGTH * (4.0 / 3.0 - MASS_POLE * (cos_t * cos_t) / TOTAL_MASS));
        let x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos_t / TOTAL_MASS;
        self.state = [
            x + TAU * x_dot,
            x_dot + TAU * x_acc,
            theta + TAU * theta_dot,
            theta_dot + TAU * theta_acc,
        ];
        let [x, _, theta, _] = self.state;
        let terminated = !(-X_THRESHOLD..=X_THRESHOLD).contains(&x)
            || !(-THETA_THRESHOLD..=THETA_THRESHOLD).contains(&theta);
        self.observe(obs);
        // Reward 1 on every step, the terminating one included.
        Ok(StepResult {
            reward: 1.0,
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
        Some(crate::render::classic::cartpole(&self.state))
    }

    fn observe(&self, obs: &mut [f32]) {
        for (o, &i) in obs.iter_mut().zip(self.observed.shown()) {
            *o = self.state[i] as f32;
        }
    }
}
