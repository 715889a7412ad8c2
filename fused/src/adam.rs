//! What a learner keeps of the network: the parameters and Adam's moments in
//! [`crate::net::Layout`] order, and the two steps that change them
//! (global-norm clipping, Adam). Both engines save and load this state, the
//! burn engine converting at its own edge, so a checkpoint written by either
//! resumes on the other.

use crate::kernels::wide;

/// Adam's hyper-parameters: burn's defaults, with the run's epsilon.
const BETA_1: f32 = 0.9;
const BETA_2: f32 = 0.999;
/// The most steps a state may count (the bias correction's power is an i32).
pub const MAX_STEPS: usize = i32::MAX as usize - 1;

/// Parameters and Adam's state, in layout order.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainState {
    pub params: Vec<f32>,
    /// Adam's first and second moments (zero before the first step).
    pub m1: Vec<f32>,
    pub m2: Vec<f32>,
    /// Adam steps taken.
    pub time: usize,
}

impl TrainState {
    /// `params` before any step: zero moments.
    pub fn new(params: Vec<f32>) -> Self {
        let n = params.len();
        Self {
            params,
            m1: vec![0.0; n],
            m2: vec![0.0; n],
            time: 0,
        }
    }

    /// Refuses what no learner writes (naming the part): vectors of other
    /// lengths than `len`, non-finite values, a negative second moment, moments
    /// before any step, or more steps than Adam's bias correction counts.
    pub fn check(&self, len: usize) -> Result<(), String> {
        for (name, v) in [("params", &self.params), ("m1", &self.m1), ("m2", &self.m2)] {
            if v.len() != len {
                return Err(format!(
                    "`{name}` has {} values, the network {len}",
                    v.len()
                ));
            }
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                return Err(format!("`{name}` holds a non-finite value at {i}"));
            }
        }
        if let Some(i) = self.m2.iter().position(|&v| v < 0.0) {
            return Err(format!("`m2` holds a negative value at {i}"));
        }
        if self.time > MAX_STEPS {
            return Err(format!("`time`: {} steps (at most {MAX_STEPS})", self.time));
        }
        let moved = self.m1.iter().chain(&self.m2).any(|&v| v != 0.0);
        if self.time == 0 && moved {
            return Err("`time`: 0 steps with non-zero moments".into());
        }
        Ok(())
    }

    /// burn's Adam, term for term: `p -= lr * m * c / (sqrt(v) + eps * b2)` with
    /// `b2 = sqrt(1 - beta2^t)` and `c = b2 / (1 - beta1^t)`.
    pub fn adam_step(&mut self, grads: &[f32], lr: f64, eps: f32) {
        self.time += 1;
        let t = self.time as i32;
        let bc2 = (1.0 - BETA_2.powi(t)).sqrt();
        let combined = bc2 / (1.0 - BETA_1.powi(t));
        let eps = eps * bc2;
        let lr = lr as f32;
        let (params, m1, m2) = (&mut self.params, &mut self.m1, &mut self.m2);
        wide(
            #[inline(always)]
            || {
                let moments = m1.iter_mut().zip(m2.iter_mut());
                for ((p, &g), (m, v)) in params.iter_mut().zip(grads).zip(moments) {
                    *m = *m * BETA_1 + g * (1.0 - BETA_1);
                    *v = *v * BETA_2 + g * g * (1.0 - BETA_2);
                    *p -= lr * (*m * combined / (v.sqrt() + eps));
                }
            },
        );
    }
}

/// Scales `grads` to global norm `max_norm` when above it (as burn's
/// engine's `clip_global_norm`); returns the norm before.
pub fn clip_grads(grads: &mut [f32], max_norm: f64) -> f64 {
    // Eight running sums, one per lane, not one sum whose every addition
    // waits on the last (a twelfth of a small network's step went there).
    let mut lanes = [0.0f64; 8];
    wide(
        #[inline(always)]
        || {
            for c in grads.chunks(8) {
                for (s, &g) in lanes.iter_mut().zip(c) {
                    *s += g as f64 * g as f64;
                }
            }
        },
    );
    let norm = lanes.iter().sum::<f64>().sqrt();
    if norm > max_norm && norm.is_finite() {
        let factor = (max_norm / (norm + 1e-6)) as f32;
        grads.iter_mut().for_each(|g| *g *= factor);
    }
    norm
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adam's first two steps on one parameter, worked out by hand from the
    /// textbook form `p -= lr * m_hat / (sqrt(v_hat) + eps)` (with burn's
    /// placement of eps: `eps * sqrt(1 - b2^t)` against `sqrt(v)`, which is
    /// the same thing scaled).
    #[test]
    fn adam_matches_the_bias_corrected_update() {
        let mut s = TrainState::new(vec![1.0]);
        let (lr, eps) = (0.1, 1e-8f32);
        s.adam_step(&[0.5], lr, eps);
        // m = 0.05, v = 0.00025; m_hat = 0.5, v_hat = 0.25: step = 0.1 * 0.5 / 0.5.
        assert!((s.params[0] - 0.9).abs() < 1e-6, "{:?}", s.params);
        s.adam_step(&[-1.0], lr, eps);
        let (m, v) = (0.9 * 0.05 - 0.1, 0.999 * 0.00025 + 0.001);
        let (m_hat, v_hat) = (m / (1.0 - 0.81), v / (1.0 - 0.998_001));
        let want = 0.9 - 0.1 * m_hat / (f64::sqrt(v_hat) + 1e-8);
        assert!(
            (s.params[0] as f64 - want).abs() < 1e-5,
            "{} vs {want}",
            s.params[0]
        );
        assert_eq!(s.time, 2);
        assert!((s.m1[0] as f64 - m).abs() < 1e-7 && (s.m2[0] as f64 - v).abs() < 1e-7);
    }

    #[test]
    fn clipping_scales_to_the_global_norm_only_above_it() {
        let mut g = vec![3.0, 4.0];
        assert_eq!(clip_grads(&mut g, 10.0), 5.0);
        assert_eq!(g, [3.0, 4.0]);
        let norm = clip_grads(&mut g, 1.0);
        assert_eq!(norm, 5.0);
        assert!(
            (g[0] - 0.6).abs() < 1e-6 && (g[1] - 0.8).abs() < 1e-6,
            "{g:?}"
        );
        let mut bad = vec![f32::NAN, 1.0];
        assert!(clip_grads(&mut bad, 1.0).is_nan());
        assert_eq!(bad[1], 1.0, "a non-finite norm scales nothing");
    }

    #[test]
    fn a_state_of_another_size_or_with_a_nan_is_refused_by_name() {
        let mut s = TrainState::new(vec![0.0; 3]);
        assert!(s.check(3).is_ok());
        assert!(s.check(4).unwrap_err().contains("`params`"));
        s.m2[1] = f32::INFINITY;
        assert!(s.check(3).unwrap_err().contains("`m2`"));
        s.m2[1] = -1e-9;
        assert!(s.check(3).unwrap_err().contains("negative"));
        s.m2[1] = 0.5;
        assert!(s.check(3).unwrap_err().contains("0 steps"));
        s.time = MAX_STEPS + 1;
        assert!(s.check(3).unwrap_err().contains("`time`"));
        s.time = 7;
        assert!(s.check(3).is_ok());
    }
}
