//! Acrobot-v1: Gymnasium 1.x "book" dynamics, one RK4 step over dt = 0.2.
//!
//! Gymnasium draws the reset state as float32, but appends the (Python) torque
//! with `np.append`, which promotes to float64; everything after the reset is
//! therefore float64 and only the reset draw is rounded through `f32` here.

use std::f64::consts::{FRAC_PI_2, PI};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::env::{Action, Env, EnvError, StepResult, discrete_action, state_array};
use crate::spec::{ActionSpace, EnvSpec, make_spec};

const DT: f64 = 0.2;
const LINK_LENGTH_1: f64 = 1.0;
const LINK_MASS_1: f64 = 1.0;
const LINK_MASS_2: f64 = 1.0;
const LINK_COM_POS_1: f64 = 0.5;
const LINK_COM_POS_2: f64 = 0.5;
const LINK_MOI: f64 = 1.0;
const MAX_VEL_1: f64 = 4.0 * PI;
const MAX_VEL_2: f64 = 9.0 * PI;
const GRAVITY: f64 = 9.8;
/// Torque for actions 0, 1, 2.
const AVAIL_TORQUE: [f64; 3] = [-1.0, 0.0, 1.0];

pub(super) fn spec() -> EnvSpec {
    let high = vec![1.0, 1.0, 1.0, 1.0, MAX_VEL_1 as f32, MAX_VEL_2 as f32];
    let low = high.iter().map(|h| -h).collect();
    make_spec("Acrobot-v1", ActionSpace::Discrete { n: 3 }, 500, low, high)
}

/// State `[theta1, theta2, dtheta1, dtheta2]`.
pub struct Acrobot {
    spec: EnvSpec,
    state: [f64; 4],
    rng: StdRng,
}

impl Acrobot {
    pub fn new(seed: u64) -> Self {
        let mut env = Self {
            spec: spec(),
            state: [0.0; 4],
            rng: StdRng::seed_from_u64(seed),
        };
        env.draw_initial_state();
        env
    }

    /// Gymnasium: uniform in [-0.1, 0.1) per component, then `astype(float32)`.
    fn draw_initial_state(&mut self) {
        for s in &mut self.state {
            *s = f64::from(self.rng.random_range(-0.1..0.1f64) as f32);
        }
    }
}

/// Time derivative of `[theta1, theta2, dtheta1, dtheta2, torque]`, with the
/// operations in Gymnasium's order so rounding matches.
fn dsdt(s: [f64; 5]) -> [f64; 5] {
    let (m1, m2, l1) = (LINK_MASS_1, LINK_MASS_2, LINK_LENGTH_1);
    let (lc1, lc2, i1, i2, g) = (LINK_COM_POS_1, LINK_COM_POS_2, LINK_MOI, LINK_MOI, GRAVITY);
    let [theta1, theta2, dtheta1, dtheta2, a] = s;
    let (cos_t2, sin_t2) = (theta2.cos(), theta2.sin());
    let d1 = m1 * (lc1 * lc1) + m2 * (l1 * l1 + lc2 * lc2 + 2.0 * l1 * lc2 * cos_t2) + i1 + i2;
    let d2 = m2 * (lc2 * lc2 + l1 * lc2 * cos_t2) + i2;
    let phi2 = m2 * lc2 * g * (theta1 + theta2 - FRAC_PI_2).cos();
    let phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * sin_t2
        - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin_t2
        + (m1 * lc1 + m2 * l1) * g * (theta1 - FRAC_PI_2).cos()
        + phi2;
    // "book" variant: includes the dtheta1^2 term the NIPS paper omits.
    let ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * sin_t2 - phi2)
        / (m2 * (lc2 * lc2) + i2 - (d2 * d2) / d1);
    let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    [dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0]
}

/// One classical Runge-Kutta step of length `dt` (Gymnasium's `rk4` over `[0, dt]`).
fn rk4(y0: [f64; 5], dt: f64) -> [f64; 5] {
    let dt2 = dt / 2.0;
    let add =
        |y: [f64; 5], h: f64, k: [f64; 5]| -> [f64; 5] { std::array::from_fn(|i| y[i] + h * k[i]) };
    let k1 = dsdt(y0);
    let k2 = dsdt(add(y0, dt2, k1));
    let k3 = dsdt(add(y0, dt2, k2));
    let k4 = dsdt(add(y0, dt, k3));
    let sum: [f64; 5] = std::array::from_fn(|i| k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
    add(y0, dt / 6.0, sum)
}

/// Gymnasium's `wrap`: shift by whole periods into `[m, M]`.
fn wrap(mut x: f64, m: f64, big_m: f64) -> f64 {
    let diff = big_m - m;
    while x > big_m {
        x -= diff;
    }
    while x < m {
        x += diff;
    }
    x
}

/// Gymnasium's `bound`: `min(max(x, m), M)` with Python's builtins.
fn bound(x: f64, m: f64, big_m: f64) -> f64 {
    let lo = if m > x { m } else { x };
    if big_m < lo { big_m } else { lo }
}

impl Acrobot {
    fn is_terminal(&self) -> bool {
        let [t1, t2, _, _] = self.state;
        -t1.cos() - (t2 + t1).cos() > 1.0
    }
}

impl Env for Acrobot {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [f32]) {
        self.draw_initial_state();
        self.observe(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<StepResult, EnvError> {
        let a = discrete_action(&self.spec, action)?;
        let [t1, t2, dt1, dt2] = self.state;
        let ns = rk4([t1, t2, dt1, dt2, AVAIL_TORQUE[a]], DT);
        self.state = [
            wrap(ns[0], -PI, PI),
            wrap(ns[1], -PI, PI),
            bound(ns[2], -MAX_VEL_1, MAX_VEL_1),
            bound(ns[3], -MAX_VEL_2, MAX_VEL_2),
        ];
        let terminated = self.is_terminal();
        self.observe(obs);
        Ok(StepResult {
            reward: if terminated { 0.0 } else { -1.0 },
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

    /// `[cos t1, sin t1, cos t2, sin t2, dt1, dt2]` as float32.
    fn render(&self) -> Option<crate::render::Frame> {
        Some(crate::render::classic::acrobot(&self.state))
    }

    fn observe(&self, obs: &mut [f32]) {
        let [t1, t2, dt1, dt2] = self.state;
        let o = [t1.cos(), t1.sin(), t2.cos(), t2.sin(), dt1, dt2];
        for (dst, v) in obs.iter_mut().zip(o) {
            *dst = v as f32;
        }
    }
}
