//! MountainCarContinuous-v0: Gymnasium 1.x dynamics with NumPy 2 dtypes.
//!
//! Gymnasium keeps the state as float64 after `reset()` but stores it as a
//! float32 array after every `step()`, and the step mixes float32 NumPy
//! scalars, float64 NumPy scalars and Python floats. Under NEP 50 a Python
//! float is "weak" (it takes the other operand's dtype), so most of the step
//! runs in float32 from the second step of an episode on. [`Num`] tracks the
//! three kinds so every operation rounds exactly where NumPy's would.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::env::{Action, Env, EnvError, StateOrigin, StepResult, continuous_action, state_array};
use crate::spec::{ActionSpace, EnvSpec, make_spec};

const MIN_ACTION: f64 = -1.0;
const MAX_ACTION: f64 = 1.0;
const MIN_POSITION: f64 = -1.2;
const MAX_POSITION: f64 = 0.6;
const MAX_SPEED: f64 = 0.07;
const GOAL_POSITION: f64 = 0.45;
const GOAL_VELOCITY: f64 = 0.0;
const POWER: f64 = 0.0015;

pub(super) fn spec() -> EnvSpec {
    make_spec(
        "MountainCarContinuous-v0",
        ActionSpace::Box {
            low: vec![MIN_ACTION as f32],
            high: vec![MAX_ACTION as f32],
        },
        999,
        vec![MIN_POSITION as f32, -MAX_SPEED as f32],
        vec![MAX_POSITION as f32, MAX_SPEED as f32],
    )
}

/// A scalar as NumPy 2 / Python see it.
#[derive(Clone, Copy, Debug)]
enum Num {
    /// A Python float (weak: adopts a NumPy operand's dtype).
    Py(f64),
    F32(f32),
    F64(f64),
}

/// Which precision a binary operation between two [`Num`]s runs in.
enum Prec {
    Single,
    Double(bool),
}

impl Num {
    fn value(self) -> f64 {
        match self {
            Num::Py(v) | Num::F64(v) => v,
            Num::F32(v) => f64::from(v),
        }
    }

    /// NEP 50: float64 wins, float32 absorbs Python floats, two Python floats
    /// stay a Python float (`Double(true)`).
    fn prec(self, other: Num) -> Prec {
        match (self, other) {
            (Num::F64(_), _) | (_, Num::F64(_)) => Prec::Double(false),
            (Num::Py(_), Num::Py(_)) => Prec::Double(true),
            _ => Prec::Single,
        }
    }

    fn op(self, other: Num, f32_op: fn(f32, f32) -> f32, f64_op: fn(f64, f64) -> f64) -> Num {
        match self.prec(other) {
            Prec::Single => Num::F32(f32_op(self.value() as f32, other.value() as f32)),
            Prec::Double(true) => Num::Py(f64_op(self.value(), other.value())),
            Prec::Double(false) => Num::F64(f64_op(self.value(), other.value())),
        }
    }

    fn add(self, other: Num) -> Num {
        self.op(other, |a, b| a + b, |a, b| a + b)
    }

    fn sub(self, other: Num) -> Num {
        self.op(other, |a, b| a - b, |a, b| a - b)
    }

    fn mul(self, other: Num) -> Num {
        self.op(other, |a, b| a * b, |a, b| a * b)
    }

    /// Compares as NumPy does: in float32 when a float32 meets a Python
    /// float (the Python float is cast first), otherwise in float64.
    fn cmp(self, other: Num) -> Option<std::cmp::Ordering> {
        match self.prec(other) {
            Prec::Single => (self.value() as f32).partial_cmp(&(other.value() as f32)),
            Prec::Double(_) => self.value().partial_cmp(&other.value()),
        }
    }

    fn gt(self, other: Num) -> bool {
        self.cmp(other) == Some(std::cmp::Ordering::Greater)
    }

    fn lt(self, other: Num) -> bool {
        self.cmp(other) == Some(std::cmp::Ordering::Less)
    }

    fn ge(self, other: Num) -> bool {
        self.gt(other) || self.eq(other)
    }

    fn eq(self, other: Num) -> bool {
        self.cmp(other) == Some(std::cmp::Ordering::Equal)
    }
}

/// State `[position, velocity]`; the action is the force in [-1, 1].
pub struct MountainCarContinuous {
    spec: EnvSpec,
    state: [f64; 2],
    /// True when Gymnasium would hold the state as float32 (after a step).
    state_is_f32: bool,
    rng: StdRng,
}

impl MountainCarContinuous {
    pub fn new(seed: u64) -> Self {
        let mut env = Self {
            spec: spec(),
            state: [0.0; 2],
            state_is_f32: false,
            rng: StdRng::seed_from_u64(seed),
        };
        env.draw_initial_state();
        env
    }

    /// Gymnasium: position uniform in [-0.6, -0.4), velocity 0, as float64.
    fn draw_initial_state(&mut self) {
        self.state = [self.rng.random_range(-0.6..-0.4), 0.0];
        self.state_is_f32 = false;
    }

    /// Whether the state is currently held as float32 (see module docs).
    pub fn state_is_f32(&self) -> bool {
        self.state_is_f32
    }
}

impl Env for MountainCarContinuous {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [f32]) {
        self.draw_initial_state();
        self.observe(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<StepResult, EnvError> {
        let a = continuous_action(&self.spec, action)?[0];
        let stored = |v: f64| {
            if self.state_is_f32 {
                Num::F32(v as f32)
            } else {
                Num::F64(v)
            }
        };
        let mut position = stored(self.state[0]);
        let mut velocity = stored(self.state[1]);
        // `min(max(a, -1.0), 1.0)` with Python builtins: the result is the
        // float32 action itself unless a bound (a Python float) replaces it.
        let mut force = Num::F32(a);
        if Num::Py(MIN_ACTION).gt(force) {
            force = Num::Py(MIN_ACTION);
        }
        if Num::Py(MAX_ACTION).lt(force) {
            force = Num::Py(MAX_ACTION);
        }
        // `math.cos` takes and returns Python floats.
        let cos3p = Num::Py(Num::Py(3.0).mul(position).value().cos());
        let accel = force.mul(Num::Py(POWER)).sub(Num::Py(0.0025).mul(cos3p));
        velocity = velocity.add(accel);
        if velocity.gt(Num::Py(MAX_SPEED)) {
            velocity = Num::Py(MAX_SPEED);
        }
        if velocity.lt(Num::Py(-MAX_SPEED)) {
            velocity = Num::Py(-MAX_SPEED);
        }
        position = position.add(velocity);
        if position.gt(Num::Py(MAX_POSITION)) {
            position = Num::Py(MAX_POSITION);
        }
        if position.lt(Num::Py(MIN_POSITION)) {
            position = Num::Py(MIN_POSITION);
        }
        if position.eq(Num::Py(MIN_POSITION)) && velocity.lt(Num::Py(0.0)) {
            velocity = Num::Py(0.0);
        }
        let terminated = position.ge(Num::Py(GOAL_POSITION)) && velocity.ge(Num::Py(GOAL_VELOCITY));
        // `math.pow(action[0], 2) * 0.1` in Python floats, on the raw action.
        let a64 = f64::from(a);
        let base = if terminated { 100.0 } else { 0.0 };
        let reward = base - a64 * a64 * 0.1;
        self.state = [
            f64::from(position.value() as f32),
            f64::from(velocity.value() as f32),
        ];
        self.state_is_f32 = true;
        self.observe(obs);
        Ok(StepResult { reward, terminated })
    }

    fn state(&self) -> Vec<f64> {
        self.state.to_vec()
    }

    /// Treats the state as float64, like a freshly reset env.
    fn set_state(&mut self, state: &[f64]) -> Result<(), EnvError> {
        self.set_state_from(state, StateOrigin::Reset)
    }

    /// After a step Gymnasium holds float32, so the values are rounded to
    /// `f32` and later arithmetic runs as NumPy's would on that state.
    fn set_state_from(&mut self, state: &[f64], origin: StateOrigin) -> Result<(), EnvError> {
        let s: [f64; 2] = state_array(&self.spec, state)?;
        self.state_is_f32 = origin == StateOrigin::Step;
        self.state = if self.state_is_f32 {
            s.map(|v| f64::from(v as f32))
        } else {
            s
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nep50_promotion() {
        assert!(matches!(Num::F32(1.0).add(Num::Py(1e-10)), Num::F32(v) if v == 1.0));
        assert!(matches!(Num::F64(1.0).add(Num::F32(1.0)), Num::F64(_)));
        assert!(matches!(Num::Py(1.0).add(Num::Py(1.0)), Num::Py(_)));
        // float32(0.45) == 0.45 under NumPy 2 (the Python float is cast).
        assert!(Num::F32(0.45).ge(Num::Py(0.45)));
        assert!(!Num::F64(f64::from(0.45f32)).ge(Num::Py(0.45)));
    }

    #[test]
    fn state_dtype_follows_origin() {
        let mut env = MountainCarContinuous::new(0);
        env.set_state_from(&[-0.5, 0.0], StateOrigin::Reset)
            .expect("valid state");
        assert!(!env.state_is_f32());
        let mut obs = [0.0f32; 2];
        env.step(Action::Continuous(&[0.3]), &mut obs)
            .expect("valid action");
        assert!(env.state_is_f32());
        assert!(env.state().iter().all(|&v| f64::from(v as f32) == v));
    }
}
