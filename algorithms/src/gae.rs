//! Generalised advantage estimation along the time axis of one trajectory batch,
//! per environment, with Gymnasium's two kinds of episode end kept apart:
//! termination stops the bootstrap (the true end has value 0); truncation
//! bootstraps from the value of the true final observation (not from the reset
//! observation stored in the next row). Either end stops the recursion, since the
//! next row belongs to a new episode.

/// One batch of T steps x E envs, laid out `[t * E + e]`.
pub struct GaeInput<'a> {
    pub rollout_length: usize,
    pub envs_per_actor: usize,
    pub rewards: &'a [f32],
    pub terminated: &'a [u8],
    pub truncated: &'a [u8],
    /// Values of the T+1 observation rows, `[(T+1) * E]`.
    pub values: &'a [f32],
    /// Values of the true final observations, `[T * E]`; read only where truncated.
    pub final_values: &'a [f32],
}

impl GaeInput<'_> {
    /// The value that bootstraps step `i` and whether the episode goes on
    /// into the next row: 0 after a termination, the true final
    /// observation's value after a truncation, else the next row's.
    pub fn next_value(&self, i: usize) -> (f64, bool) {
        if self.terminated[i] != 0 {
            (0.0, false)
        } else if self.truncated[i] != 0 {
            (self.final_values[i] as f64, false)
        } else {
            (self.values[i + self.envs_per_actor] as f64, true)
        }
    }

    /// Panics, naming `what`, unless every array (and every output in
    /// `outputs`) has its length for T steps of E envs.
    pub fn check_lengths(&self, what: &str, outputs: &[usize]) {
        let (t_len, e_len) = (self.rollout_length, self.envs_per_actor);
        let n = t_len * e_len;
        assert!(
            self.rewards.len() == n
                && self.terminated.len() == n
                && self.truncated.len() == n
                && self.final_values.len() == n
                && self.values.len() == n + e_len
                && outputs.iter().all(|&len| len == n),
            "{what}: inconsistent lengths for T={t_len}, E={e_len}"
        );
    }
}

/// Writes advantages and returns (advantage + value), each `[T * E]`.
pub fn compute_gae(
    input: &GaeInput<'_>,
    gamma: f64,
    lambda: f64,
    advantages: &mut [f32],
    returns: &mut [f32],
) {
    let (t_len, e_len) = (input.rollout_length, input.envs_per_actor);
    input.check_lengths("compute_gae", &[advantages.len(), returns.len()]);
    for e in 0..e_len {
        let mut next_adv = 0.0f64;
        for t in (0..t_len).rev() {
            let i = t * e_len + e;
            let value = input.values[i] as f64;
            let (next_value, episode_continues) = input.next_value(i);
            let delta = input.rewards[i] as f64 + gamma * next_value - value;
            let carry = if episode_continues {
                gamma * lambda * next_adv
            } else {
                0.0
            };
            next_adv = delta + carry;
            advantages[i] = next_adv as f32;
            returns[i] = (next_adv + value) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: f64 = 0.9;
    const L: f64 = 0.8;

    fn run(
        t: usize,
        e: usize,
        rewards: &[f32],
        term: &[u8],
        trunc: &[u8],
        values: &[f32],
        finals: &[f32],
    ) -> (Vec<f32>, Vec<f32>) {
        let mut adv = vec![0.0; t * e];
        let mut ret = vec![0.0; t * e];
        let input = GaeInput {
            rollout_length: t,
            envs_per_actor: e,
            rewards,
            terminated: term,
            truncated: trunc,
            values,
            final_values: finals,
        };
        compute_gae(&input, G, L, &mut adv, &mut ret);
        (adv, ret)
    }

    fn close(a: &[f32], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((*x as f64 - y).abs() < 1e-6, "{a:?} vs {b:?}");
        }
    }

    // Worked by hand with gamma 0.9, lambda 0.8 (gamma*lambda = 0.72), rewards 1,
    // V(obs_0..obs_3) = 0.5, 0.4, 0.3, 0.2 where obs_2 is the reset observation
    // when the episode ends at t = 1.

    #[test]
    fn no_episode_end_bootstraps_from_the_last_row() {
        // d2 = 1 + 0.9*0.2 - 0.3 = 0.88; d1 = 1 + 0.27 - 0.4 = 0.87; d0 = 1 + 0.36 - 0.5 = 0.86
        // A2 = 0.88; A1 = 0.87 + 0.72*0.88 = 1.5036; A0 = 0.86 + 0.72*1.5036 = 1.942592
        let (adv, ret) = run(
            3,
            1,
            &[1.0; 3],
            &[0; 3],
            &[0; 3],
            &[0.5, 0.4, 0.3, 0.2],
            &[9.0; 3],
        );
        close(&adv, &[1.942592, 1.5036, 0.88]);
        close(&ret, &[2.442592, 1.9036, 1.18]);
    }

    #[test]
    fn termination_inside_the_rollout_stops_bootstrap_and_recursion() {
        // d1 = 1 + 0 - 0.4 = 0.6 (no bootstrap); A1 = 0.6 (no carry from the next episode)
        // A0 = 0.86 + 0.72*0.6 = 1.292
        let (adv, ret) = run(
            3,
            1,
            &[1.0; 3],
            &[0, 1, 0],
            &[0; 3],
            &[0.5, 0.4, 0.3, 0.2],
            &[9.0; 3],
        );
        close(&adv, &[1.292, 0.6, 0.88]);
        close(&ret, &[1.792, 1.0, 1.18]);
    }

    #[test]
    fn truncation_bootstraps_from_the_final_observation_not_the_reset_one() {
        // V(final obs at t=1) = 0.35, V(reset obs) = 0.3.
        // d1 = 1 + 0.9*0.35 - 0.4 = 0.915; A1 = 0.915; A0 = 0.86 + 0.72*0.915 = 1.5188
        let (adv, ret) = run(
            3,
            1,
            &[1.0; 3],
            &[0; 3],
            &[0, 1, 0],
            &[0.5, 0.4, 0.3, 0.2],
            &[9.0, 0.35, 9.0],
        );
        close(&adv, &[1.5188, 0.915, 0.88]);
        close(&ret, &[2.0188, 1.315, 1.18]);
    }

    #[test]
    fn terminated_and_truncated_together_is_a_termination() {
        let (adv, _) = run(
            3,
            1,
            &[1.0; 3],
            &[0, 1, 0],
            &[0, 1, 0],
            &[0.5, 0.4, 0.3, 0.2],
            &[9.0, 0.35, 9.0],
        );
        close(&adv, &[1.292, 0.6, 0.88]);
    }

    #[test]
    fn end_on_the_last_step_of_the_rollout() {
        // Truncated at t = 2 (last step): bootstrap from V(final) = 0.7, not V(obs_3) = 0.2.
        // d2 = 1 + 0.63 - 0.3 = 1.33; A1 = 0.87 + 0.72*1.33 = 1.8276; A0 = 0.86 + 0.72*1.8276 = 2.175872
        let (adv, _) = run(
            3,
            1,
            &[1.0; 3],
            &[0; 3],
            &[0, 0, 1],
            &[0.5, 0.4, 0.3, 0.2],
            &[9.0, 9.0, 0.7],
        );
        close(&adv, &[2.175872, 1.8276, 1.33]);
        // Terminated at t = 2: d2 = 1 - 0.3 = 0.7; A1 = 0.87 + 0.504 = 1.374; A0 = 0.86 + 0.72*1.374 = 1.84928
        let (adv, _) = run(
            3,
            1,
            &[1.0; 3],
            &[0, 0, 1],
            &[0; 3],
            &[0.5, 0.4, 0.3, 0.2],
            &[9.0; 3],
        );
        close(&adv, &[1.84928, 1.374, 0.7]);
    }

    #[test]
    fn several_envs_are_independent_in_the_interleaved_layout() {
        // env 0: terminates at t=1 (case above); env 1: truncates at t=1 with V(final) = 0.35;
        // env 2: no end, values 0 and reward 2 at t=0 only -> A0 = 2, A1 = A2 = 0.
        let rewards = [1.0, 1.0, 2.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0];
        let term = [0, 0, 0, 1, 0, 0, 0, 0, 0];
        let trunc = [0, 0, 0, 0, 1, 0, 0, 0, 0];
        let values = [0.5, 0.5, 0.0, 0.4, 0.4, 0.0, 0.3, 0.3, 0.0, 0.2, 0.2, 0.0];
        let finals = [9.0, 9.0, 9.0, 9.0, 0.35, 9.0, 9.0, 9.0, 9.0];
        let (adv, _) = run(3, 3, &rewards, &term, &trunc, &values, &finals);
        close(
            &adv,
            &[1.292, 1.5188, 2.0, 0.6, 0.915, 0.0, 0.88, 0.88, 0.0],
        );
    }
}
