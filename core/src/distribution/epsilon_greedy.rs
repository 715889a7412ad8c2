//! Epsilon-greedy acting over a Q-head (DQN): the greedy action (the largest
//! allowed Q-value, the lowest index on a tie) with probability `1 - ε`, else
//! an allowed action uniformly. The log-probability returned is that of the
//! mixture, `ln((1 - ε) [a = greedy] + ε / n_allowed)`, so a batch's
//! behaviour log-probabilities stay the true ones of the acting policy.

use super::DistError;
use rand::Rng;

/// ε after `steps` env steps of a run of `total` steps: linear from `start`
/// to `end` over the first `fraction` of the run, then `end`. A run of 0
/// steps or a fraction of 0 is at `end` from the start.
pub fn epsilon_at(steps: u64, total: u64, start: f64, end: f64, fraction: f64) -> f64 {
    let span = total as f64 * fraction;
    if span <= 0.0 || steps as f64 >= span {
        return end;
    }
    start + (end - start) * (steps as f64 / span)
}

/// The greedy action of one row of Q-values: the largest allowed value, the
/// lowest index on a tie; `None` when every action is masked. A NaN is never
/// the largest.
pub fn greedy_action(q: &[f32], valid: Option<&[u8]>) -> Option<usize> {
    let allowed = |i: &usize| valid.is_none_or(|v| v[*i] != 0);
    let better = |i: usize, b: usize| q[i] > q[b] || (q[b].is_nan() && !q[i].is_nan());
    let mut best: Option<usize> = None;
    for i in (0..q.len()).filter(allowed) {
        if best.is_none_or(|b| better(i, b)) {
            best = Some(i);
        }
    }
    best
}

/// Samples an epsilon-greedy action from one row of Q-values; returns it
/// with its log-probability under the mixture. A masked action is never
/// returned; a row with every action masked is an error.
pub fn sample_epsilon_greedy<R: Rng + ?Sized>(
    q: &[f32],
    valid: Option<&[u8]>,
    epsilon: f64,
    rng: &mut R,
) -> Result<(usize, f32), DistError> {
    let greedy = greedy_action(q, valid).ok_or(DistError::AllMasked { env: 0 })?;
    let is_allowed = |i: &usize| valid.is_none_or(|v| v[*i] != 0);
    let n_allowed = (0..q.len()).filter(is_allowed).count();
    // NaN explores never; the rate is a probability.
    let eps = if epsilon.is_nan() {
        0.0
    } else {
        epsilon.clamp(0.0, 1.0)
    };
    let explore = eps > 0.0 && rng.random::<f64>() < eps;
    let a = if explore {
        let k = rng.random_range(0..n_allowed);
        (0..q.len()).filter(is_allowed).nth(k).unwrap_or(greedy)
    } else {
        greedy
    };
    Ok((a, epsilon_greedy_log_prob(a == greedy, n_allowed, eps)))
}

/// `ln((1 - ε) [greedy] + ε / n)`: an action's log-probability under an
/// epsilon-greedy policy over `n` allowed actions.
pub fn epsilon_greedy_log_prob(greedy: bool, n: usize, epsilon: f64) -> f32 {
    let uniform = epsilon / n.max(1) as f64;
    let p = if greedy {
        1.0 - epsilon + uniform
    } else {
        uniform
    };
    p.ln() as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn the_schedule_is_linear_then_flat() {
        // 100k steps, 12% exploration: 1.0 -> 0.1 over the first 12,000.
        let e = |s| epsilon_at(s, 100_000, 1.0, 0.1, 0.12);
        assert_eq!(e(0), 1.0);
        assert!((e(6_000) - 0.55).abs() < 1e-12, "{}", e(6_000));
        assert!((e(3_000) - 0.775).abs() < 1e-12, "{}", e(3_000));
        assert_eq!(e(12_000), 0.1);
        assert_eq!(e(90_000), 0.1);
        // No span: at the end value from the start.
        assert_eq!(epsilon_at(0, 100_000, 1.0, 0.05, 0.0), 0.05);
        assert_eq!(epsilon_at(0, 0, 1.0, 0.05, 0.5), 0.05);
    }

    #[test]
    fn greedy_takes_the_largest_allowed_value_and_the_first_tie() {
        assert_eq!(greedy_action(&[0.1, 0.7, -2.0], None), Some(1));
        assert_eq!(greedy_action(&[0.5, 0.5, 0.2], None), Some(0));
        assert_eq!(greedy_action(&[0.1, 0.7, 0.3], Some(&[1, 0, 1])), Some(2));
        assert_eq!(greedy_action(&[0.1, 0.7], Some(&[0, 0])), None);
        assert_eq!(greedy_action(&[f32::NAN, 0.2, 0.1], None), Some(1));
    }

    #[test]
    fn log_probabilities_are_the_mixtures() {
        // eps 0.1 over 3 actions: greedy 0.9 + 0.1/3, others 0.1/3.
        let g = epsilon_greedy_log_prob(true, 3, 0.1);
        let o = epsilon_greedy_log_prob(false, 3, 0.1);
        assert!((g - (0.9f64 + 0.1 / 3.0).ln() as f32).abs() < 1e-7);
        assert!((o - (0.1f64 / 3.0).ln() as f32).abs() < 1e-7);
        // The probabilities sum to 1.
        let total = g.exp() + 2.0 * o.exp();
        assert!((total - 1.0).abs() < 1e-6, "{total}");
        // eps 0: the greedy action is certain, the others impossible.
        assert_eq!(epsilon_greedy_log_prob(true, 3, 0.0), 0.0);
        assert_eq!(epsilon_greedy_log_prob(false, 3, 0.0), f32::NEG_INFINITY);
    }

    #[test]
    fn sampling_follows_the_mixture_and_the_mask() {
        let mut rng = StdRng::seed_from_u64(3);
        let q = [0.0f32, 1.0, 0.5, 2.0];
        let mask = [1u8, 1, 1, 0];
        let mut counts = [0usize; 4];
        let n = 40_000;
        for _ in 0..n {
            let (a, lp) = sample_epsilon_greedy(&q, Some(&mask), 0.3, &mut rng).unwrap();
            counts[a] += 1;
            let expected = epsilon_greedy_log_prob(a == 1, 3, 0.3);
            assert_eq!(lp, expected);
        }
        assert_eq!(counts[3], 0, "a masked action was taken");
        // Greedy (1): 0.7 + 0.1 = 0.8; the two others 0.1 each.
        let f = |c: usize| c as f64 / n as f64;
        assert!((f(counts[1]) - 0.8).abs() < 0.01, "{counts:?}");
        assert!((f(counts[0]) - 0.1).abs() < 0.01, "{counts:?}");
        assert!((f(counts[2]) - 0.1).abs() < 0.01, "{counts:?}");
        assert_eq!(
            sample_epsilon_greedy(&q, Some(&[0, 0, 0, 0]), 0.3, &mut rng),
            Err(DistError::AllMasked { env: 0 })
        );
    }
}
