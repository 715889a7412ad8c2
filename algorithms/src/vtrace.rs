//! V-trace (Espeholt et al. 2018, with the λ of the paper's remark 2) along
//! the time axis of one batch acted by an older policy μ than the current π,
//! with the same episode ends as GAE (`crate::gae`): termination stops the
//! bootstrap, truncation bootstraps from the true final observation, and either
//! stops the trace.
//!
//! With `ρ_t = min(ρ̄, π/μ)`, `c_t = λ min(c̄, π/μ)` and the temporal difference
//! `δ_t = r_t + γ V(x_{t+1}) - V(x_t)`:
//!
//! - value targets `v_t = V(x_t) + ρ_t δ_t + γ c_t (v_{t+1} - V(x_{t+1}))`;
//! - advantages `Â_t = δ_t + γ λ (v_{t+1} - V(x_{t+1}))`, an estimate of
//!   `Q^π(x_t, a_t) - V(x_t)` whose next value mixes the V-trace target and the
//!   critic by λ, and the weight `ρ_t` that takes it from μ's samples to π.
//!
//! With π = μ (weights 1) these are exactly GAE(λ)'s returns and advantages.
//! The PPO ratio for such samples is taken against π at the update's start
//! (decoupled PPO, Hilton et al. 2021) and each sample's clipped objective is
//! scaled by its `ρ_t`, after the advantages are normalised: weighting before
//! normalising would give the samples of weight ~0 (actions π no longer takes)
//! minus the mean advantage, a steady push that collapses the policy.

use crate::gae::GaeInput;

/// The truncation levels and discounts.
#[derive(Clone, Copy, Debug)]
pub struct VtraceParams {
    pub gamma: f64,
    pub lambda: f64,
    /// ρ̄: truncates the weight of each temporal difference and of the advantage.
    pub rho_clip: f64,
    /// c̄: truncates the weights that carry the trace back in time.
    pub c_clip: f64,
}

/// What [`compute_vtrace`] writes, each `[T * E]`.
pub struct VtraceOut<'a> {
    /// `Â_t`, unweighted.
    pub advantages: &'a mut [f32],
    /// Value targets `v_t`.
    pub returns: &'a mut [f32],
    /// `ρ_t`, each sample's weight in the policy loss.
    pub weights: &'a mut [f32],
}

/// V-trace of `input` (laid out as for GAE) with `log_ratios[i] =
/// ln π(a_i|x_i) - ln μ(a_i|x_i)`.
pub fn compute_vtrace(
    input: &GaeInput<'_>,
    log_ratios: &[f32],
    p: VtraceParams,
    out: VtraceOut<'_>,
) {
    let VtraceOut {
        advantages,
        returns,
        weights,
    } = out;
    let (t_len, e_len) = (input.rollout_length, input.envs_per_actor);
    let lengths = [
        log_ratios.len(),
        advantages.len(),
        returns.len(),
        weights.len(),
    ];
    input.check_lengths("compute_vtrace", &lengths);
    let VtraceParams {
        gamma,
        lambda,
        rho_clip,
        c_clip,
    } = p;
    for e in 0..e_len {
        // v_{t+1} - V(x_{t+1}) of the step after the current one.
        let mut next_excess = 0.0f64;
        for t in (0..t_len).rev() {
            let i = t * e_len + e;
            let value = input.values[i] as f64;
            let (next_value, episode_continues) = input.next_value(i);
            // exp of a log ratio the learner computed; a huge one only means
            // the weights are truncated at rho_clip and c_clip.
            let ratio = (log_ratios[i] as f64).exp();
            let rho = ratio.min(rho_clip);
            let c = lambda * ratio.min(c_clip);
            let delta = input.rewards[i] as f64 + gamma * next_value - value;
            let carry = if episode_continues { next_excess } else { 0.0 };
            let excess = rho * delta + gamma * c * carry;
            advantages[i] = (delta + gamma * lambda * carry) as f32;
            returns[i] = (value + excess) as f32;
            weights[i] = rho as f32;
            next_excess = excess;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gae::compute_gae;

    const G: f64 = 0.9;
    const L: f64 = 0.8;

    fn params(rho_clip: f64, c_clip: f64) -> VtraceParams {
        VtraceParams {
            gamma: G,
            lambda: L,
            rho_clip,
            c_clip,
        }
    }

    struct Case {
        t: usize,
        e: usize,
        rewards: Vec<f32>,
        term: Vec<u8>,
        trunc: Vec<u8>,
        values: Vec<f32>,
        finals: Vec<f32>,
    }

    impl Case {
        /// The batch of `gae.rs`'s hand-worked cases: rewards 1, V(obs_0..3) =
        /// 0.5, 0.4, 0.3, 0.2.
        fn three_steps(term: [u8; 3], trunc: [u8; 3], finals: [f32; 3]) -> Self {
            Case {
                t: 3,
                e: 1,
                rewards: vec![1.0; 3],
                term: term.to_vec(),
                trunc: trunc.to_vec(),
                values: vec![0.5, 0.4, 0.3, 0.2],
                finals: finals.to_vec(),
            }
        }

        fn input(&self) -> GaeInput<'_> {
            GaeInput {
                rollout_length: self.t,
                envs_per_actor: self.e,
                rewards: &self.rewards,
                terminated: &self.term,
                truncated: &self.trunc,
                values: &self.values,
                final_values: &self.finals,
            }
        }

        /// Advantages, targets and weights for log ratios `logs`.
        fn run(&self, logs: &[f32], p: VtraceParams) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
            let n = self.t * self.e;
            let (mut adv, mut ret, mut w) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            let out = VtraceOut {
                advantages: &mut adv,
                returns: &mut ret,
                weights: &mut w,
            };
            compute_vtrace(&self.input(), logs, p, out);
            (adv, ret, w)
        }

        fn vtrace(&self, ratios: &[f64], p: VtraceParams) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
            let logs: Vec<f32> = ratios.iter().map(|r| r.ln() as f32).collect();
            self.run(&logs, p)
        }
    }

    fn close(a: &[f32], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((*x as f64 - y).abs() < 1e-5, "{a:?} vs {b:?}");
        }
    }

    /// On-policy (every ratio 1) V-trace is GAE, for any clips of at least
    /// 1, at every kind of episode end and over several envs.
    #[test]
    fn on_policy_it_is_gae() {
        let cases = [
            Case::three_steps([0; 3], [0; 3], [9.0; 3]),
            Case::three_steps([0, 1, 0], [0; 3], [9.0; 3]),
            Case::three_steps([0; 3], [0, 1, 0], [9.0, 0.35, 9.0]),
            Case::three_steps([0; 3], [0, 0, 1], [9.0, 9.0, 0.7]),
            Case {
                t: 3,
                e: 3,
                rewards: vec![1.0, 1.0, 2.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0],
                term: vec![0, 0, 0, 1, 0, 0, 0, 0, 0],
                trunc: vec![0, 0, 0, 0, 1, 0, 0, 0, 0],
                values: vec![0.5, 0.5, 0.0, 0.4, 0.4, 0.0, 0.3, 0.3, 0.0, 0.2, 0.2, 0.0],
                finals: vec![9.0, 9.0, 9.0, 9.0, 0.35, 9.0, 9.0, 9.0, 9.0],
            },
        ];
        for case in &cases {
            let n = case.t * case.e;
            let (mut adv, mut ret) = (vec![0.0; n], vec![0.0; n]);
            compute_gae(&case.input(), G, L, &mut adv, &mut ret);
            let want = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
            for p in [params(1.0, 1.0), params(2.0, 1.5)] {
                let (a, r, w) = case.vtrace(&vec![1.0; n], p);
                close(&a, &want(&adv));
                close(&r, &want(&ret));
                close(&w, &vec![1.0; n]);
            }
        }
    }

    /// Worked by hand: ratios 2, 0.5, 1.5 with ρ̄ = c̄ = 1 give ρ = c/λ =
    /// 1, 0.5, 1. δ = 0.86, 0.87, 0.88 (as in `gae.rs`).
    /// t=2: v-V = 0.88; Â = 0.88.
    /// t=1: v-V = 0.5*0.87 + 0.9*(0.8*0.5)*0.88 = 0.435 + 0.3168 = 0.7518;
    ///      Â = 0.87 + 0.72*0.88 = 1.5036 (weight 0.5: ρÂ = v-V, as ρ̄ = c̄).
    /// t=0: v-V = 0.86 + 0.9*0.8*0.7518 = 1.401296; Â = 1.401296.
    #[test]
    fn truncated_weights_by_hand() {
        let case = Case::three_steps([0; 3], [0; 3], [9.0; 3]);
        let (adv, ret, w) = case.vtrace(&[2.0, 0.5, 1.5], params(1.0, 1.0));
        close(&adv, &[1.401296, 1.5036, 0.88]);
        close(&ret, &[1.901296, 1.1518, 1.18]);
        close(&w, &[1.0, 0.5, 1.0]);
    }

    /// ρ̄ = 2, c̄ = 0.5 with the same ratios: ρ = 2, 0.5, 1.5; c = 0.4, 0.4, 0.4.
    /// t=2: v-V = 1.5*0.88 = 1.32; Â = 0.88.
    /// t=1: v-V = 0.435 + 0.9*0.4*1.32 = 0.9102; Â = 0.87 + 0.72*1.32 = 1.8204.
    /// t=0: v-V = 2*0.86 + 0.36*0.9102 = 2.047672; Â = 0.86 + 0.72*0.9102 = 1.515344.
    #[test]
    fn separate_rho_and_c_clips_by_hand() {
        let case = Case::three_steps([0; 3], [0; 3], [9.0; 3]);
        let (adv, ret, w) = case.vtrace(&[2.0, 0.5, 1.5], params(2.0, 0.5));
        close(&adv, &[1.515344, 1.8204, 0.88]);
        close(&ret, &[2.547672, 1.3102, 1.62]);
        close(&w, &[2.0, 0.5, 1.5]);
    }

    /// A termination at t=1 cuts the trace: t=1 has no bootstrap and no carry,
    /// whatever the ratio after it. Ratios 1, 0.5, 4 (ρ̄ = c̄ = 1):
    /// t=2: v-V = Â = 0.88. t=1: δ = 1 - 0.4 = 0.6 = Â; v-V = 0.5*0.6 = 0.3.
    /// t=0: v-V = Â = 0.86 + 0.72*0.3 = 1.076.
    /// A truncation at t=1 bootstraps from V(final) = 0.35:
    /// t=1: δ = Â = 1 + 0.315 - 0.4 = 0.915, v-V = 0.4575; t=0: 0.86 + 0.72*0.4575 = 1.1894.
    #[test]
    fn episode_ends_cut_the_trace() {
        let ratios = [1.0, 0.5, 4.0];
        let ended = Case::three_steps([0, 1, 0], [0; 3], [9.0; 3]);
        let (adv, ret, w) = ended.vtrace(&ratios, params(1.0, 1.0));
        close(&adv, &[1.076, 0.6, 0.88]);
        close(&ret, &[1.576, 0.7, 1.18]);
        close(&w, &[1.0, 0.5, 1.0]);
        let truncated = Case::three_steps([0; 3], [0, 1, 0], [9.0, 0.35, 9.0]);
        let (adv, _, _) = truncated.vtrace(&ratios, params(1.0, 1.0));
        close(&adv, &[1.1894, 0.915, 0.88]);
    }

    /// A log ratio far out of range is truncated, not a NaN or an infinity:
    /// weights 1, ~0, 1; the trace through t=1 is cut (its excess ~0), so
    /// Â_0 = δ_0 = 0.86.
    #[test]
    fn extreme_ratios_stay_finite() {
        let case = Case::three_steps([0; 3], [0; 3], [9.0; 3]);
        let (adv, ret, w) = case.run(&[80.0, -80.0, 0.0], params(1.0, 1.0));
        let all = adv.iter().chain(&ret).chain(&w);
        assert!(
            all.into_iter().all(|x| x.is_finite()),
            "{adv:?} {ret:?} {w:?}"
        );
        close(&adv, &[0.86, 1.5036, 0.88]);
        close(&w, &[1.0, 0.0, 1.0]);
    }
}
