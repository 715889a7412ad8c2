//! The running discounted return that reward scaling divides by the std of,
//! kept exactly as Gymnasium 1.x's `NormalizeReward` keeps it: per env, after
//! each step, `G = G * gamma * (1 - terminated) + reward`. A termination
//! restarts it at that step's reward; a truncation (time limit) does not
//! restart it. It lives with the envs (in the actor), so it stays contiguous
//! whatever the learner drops, and a new set of envs starts a new one.

/// One discounted return per env.
#[derive(Clone, Debug, PartialEq)]
pub struct DiscountedReturn {
    gamma: f64,
    g: Vec<f64>,
}

impl DiscountedReturn {
    pub fn new(gamma: f64, num_envs: usize) -> Self {
        Self {
            gamma,
            g: vec![0.0; num_envs],
        }
    }

    /// Env `index` starts a new episode (it was replaced after a failure).
    pub fn restart(&mut self, index: usize) {
        if let Some(g) = self.g.get_mut(index) {
            *g = 0.0;
        }
    }

    /// Folds in one step of every env; `out[e]` is env `e`'s return after it.
    pub fn step(&mut self, rewards: &[f32], terminated: &[bool], out: &mut [f32]) {
        for (e, g) in self.g.iter_mut().enumerate() {
            let keep = if terminated[e] { 0.0 } else { self.gamma };
            *g = *g * keep + f64::from(rewards[e]);
            out[e] = *g as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn termination_restarts_the_return_and_truncation_does_not() {
        // gamma 0.5, two envs, four steps.
        // env 0: rewards 1, 1, 1 (terminated), 2 -> 1, 1.5, 1 (restarted at the
        //        terminal step's own reward), 0.5 * 1 + 2 = 2.5.
        // env 1: rewards 4, 4 (truncated), 4, 4 -> 4, 6, 7, 7.5: the time limit
        //        does not restart it (Gymnasium's `1 - terminated` only).
        let mut g = DiscountedReturn::new(0.5, 2);
        let steps = [
            ([1.0, 4.0], [false, false]),
            ([1.0, 4.0], [false, false]),
            ([1.0, 4.0], [true, false]),
            ([2.0, 4.0], [false, false]),
        ];
        let mut got = Vec::new();
        for (r, term) in steps {
            let mut out = [0.0f32; 2];
            g.step(&r, &term, &mut out);
            got.push(out);
        }
        assert_eq!(got, [[1.0, 4.0], [1.5, 6.0], [1.0, 7.0], [2.5, 7.5]]);
    }
}
