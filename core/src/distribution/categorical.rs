//! The categorical head, with optional action masks. A masked action's logit is
//! replaced by [`MASKED_LOGIT`] before the softmax, both when acting and when
//! learning, so it is never sampled, gets no gradient, and adds nothing to the
//! entropy (which is over the valid actions only).

use super::DistError;
use burn::tensor::activation::log_softmax;
use burn::tensor::{Bool, Int, Tensor, backend::Backend};
use rand::Rng;

/// A large negative logit rather than -inf: `p * ln p` stays `0 * -1e9 = 0`
/// where -inf would give NaN.
pub const MASKED_LOGIT: f32 = -1e9;

/// Log-probabilities of `actions` `[N]` and entropies, both `[N]`, under
/// categorical distributions with `logits` `[N, A]`; `valid` `[N, A]` marks the
/// allowed actions (all allowed when `None`).
pub fn categorical_logp_entropy<B: Backend>(
    logits: Tensor<B, 2>,
    actions: Tensor<B, 1, Int>,
    valid: Option<Tensor<B, 2, Bool>>,
) -> (Tensor<B, 1>, Tensor<B, 1>) {
    let [n, _] = logits.dims();
    let (logits, invalid) = match valid {
        Some(v) => {
            let invalid = v.bool_not();
            (
                logits.mask_fill(invalid.clone(), MASKED_LOGIT),
                Some(invalid),
            )
        }
        None => (logits, None),
    };
    let logp_all = log_softmax(logits, 1);
    let logp = logp_all
        .clone()
        .gather(1, actions.reshape([n, 1]))
        .reshape([n]);
    let mut plogp = logp_all.clone().exp() * logp_all;
    if let Some(invalid) = invalid {
        plogp = plogp.mask_fill(invalid, 0.0);
    }
    let entropy = -plogp.sum_dim(1).reshape([n]);
    (logp, entropy)
}

/// Numerically stable log-softmax of one row of logits into `out`; entries with
/// `valid[i] == 0` are treated as [`MASKED_LOGIT`].
pub fn log_softmax_row(logits: &[f32], valid: Option<&[u8]>, out: &mut [f32]) {
    let allowed = |i: usize| valid.is_none_or(|v| v[i] != 0);
    for (i, (o, &l)) in out.iter_mut().zip(logits).enumerate() {
        *o = if allowed(i) { l } else { MASKED_LOGIT };
    }
    let max = out.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // A masked entry's exp is exactly 0 beside an allowed one, so the sum
    // skips it: the same bits, without libm's slow underflow path for each
    // of a game's thousand masked actions. A row with none allowed sums all.
    let none_allowed = valid.is_some_and(|v| v.iter().all(|&x| x == 0));
    let counted = |i: usize| none_allowed || allowed(i);
    // Subtract the max before the log-sum, not after: `l - (max + ln s)` loses the
    // low bits of ln s when |max| is large.
    let terms = out.iter().enumerate().filter(|&(i, _)| counted(i));
    let ln_sum = terms.map(|(_, &l)| (l - max).exp()).sum::<f32>().ln();
    for o in out.iter_mut() {
        *o = (*o - max) - ln_sum;
    }
}

/// Samples an action from one row of logits; returns it with its log-probability.
/// `scratch` must have the row's length (reused to avoid allocation). A masked
/// action is never returned; a row with every action masked is an error.
pub fn sample_categorical<R: Rng + ?Sized>(
    logits: &[f32],
    valid: Option<&[u8]>,
    scratch: &mut [f32],
    rng: &mut R,
) -> Result<(usize, f32), DistError> {
    let allowed = |i: usize| valid.is_none_or(|v| v[i] != 0);
    if !(0..logits.len()).any(allowed) {
        return Err(DistError::AllMasked { env: 0 });
    }
    log_softmax_row(logits, valid, scratch);
    let u: f32 = rng.random();
    let mut cdf = 0.0f32;
    for (i, &lp) in scratch.iter().enumerate() {
        if !allowed(i) {
            continue;
        }
        cdf += lp.exp();
        if u < cdf {
            return Ok((i, lp));
        }
    }
    // Rounding left the cdf just below 1: take the last allowed action.
    let last = (0..logits.len()).rev().find(|&i| allowed(i)).unwrap_or(0);
    Ok((last, scratch[last]))
}

/// The most likely allowed action (first on ties): deterministic evaluation.
pub fn argmax(logits: &[f32], valid: Option<&[u8]>) -> usize {
    let allowed = |i: usize| valid.is_none_or(|v| v[i] != 0);
    let mut best: Option<usize> = None;
    for (i, &l) in logits.iter().enumerate() {
        if allowed(i) && best.is_none_or(|b| l > logits[b]) {
            best = Some(i);
        }
    }
    best.unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;
    use burn::tensor::TensorData;
    use rand::SeedableRng;

    fn t2(v: Vec<f32>, shape: [usize; 2]) -> Tensor<CpuBackend, 2> {
        Tensor::from_data(TensorData::new(v, shape), &Default::default())
    }

    #[test]
    fn categorical_matches_hand_values() {
        // logits [0, ln 3] -> p = [0.25, 0.75]; H = -(0.25 ln 0.25 + 0.75 ln 0.75) = 0.5623351446
        let logits = t2(vec![0.0f32, 3f32.ln(), 5.0, 5.0], [2, 2]);
        let actions = Tensor::<CpuBackend, 1, Int>::from_data(
            TensorData::new(vec![1i64, 0], [2]),
            &Default::default(),
        );
        let (lp, h) = categorical_logp_entropy(logits, actions, None);
        let lp: Vec<f32> = lp.into_data().to_vec().unwrap();
        let h: Vec<f32> = h.into_data().to_vec().unwrap();
        assert!((lp[0] - 0.75f32.ln()).abs() < 1e-6);
        assert!((lp[1] - 0.5f32.ln()).abs() < 1e-6);
        assert!((h[0] - 0.562_335_1).abs() < 1e-6, "{}", h[0]);
        assert!((h[1] - std::f32::consts::LN_2).abs() < 1e-6);
    }

    #[test]
    fn masked_categorical_is_over_valid_actions_only() {
        // Row 0: logits [0, ln 3, 7] with action 2 masked -> p = [0.25, 0.75, 0],
        // H = 0.5623351446 (as if the third action did not exist).
        // Row 1: logits [1, 2, 3], only action 1 valid -> p = [0, 1, 0], H = 0, ln p(1) = 0.
        let logits = t2(vec![0.0, 3f32.ln(), 7.0, 1.0, 2.0, 3.0], [2, 3]).require_grad();
        let valid = Tensor::<CpuBackend, 2, Bool>::from_data(
            TensorData::new(vec![true, true, false, false, true, false], [2, 3]),
            &Default::default(),
        );
        let actions = Tensor::<CpuBackend, 1, Int>::from_data(
            TensorData::new(vec![1i64, 1], [2]),
            &Default::default(),
        );
        let (lp, h) = categorical_logp_entropy(logits.clone(), actions, Some(valid));
        let lpv: Vec<f32> = lp.clone().into_data().to_vec().unwrap();
        let hv: Vec<f32> = h.clone().into_data().to_vec().unwrap();
        assert!((lpv[0] - 0.75f32.ln()).abs() < 1e-6, "{lpv:?}");
        assert!(lpv[1].abs() < 1e-6, "{lpv:?}");
        assert!((hv[0] - 0.562_335_1).abs() < 1e-6, "{hv:?}");
        assert!(
            hv[1].abs() < 1e-6 && hv.iter().all(|x| x.is_finite()),
            "{hv:?}"
        );
    }

    #[test]
    fn masked_logits_get_no_gradient() {
        type AD = crate::CpuAutodiff;
        let dev = Default::default();
        let logits =
            Tensor::<AD, 2>::from_data(TensorData::new(vec![0.3f32, -0.2, 0.9], [1, 3]), &dev)
                .require_grad();
        let valid = Tensor::<AD, 2, Bool>::from_data(
            TensorData::new(vec![true, true, false], [1, 3]),
            &dev,
        );
        let actions = Tensor::<AD, 1, Int>::from_data(TensorData::new(vec![0i64], [1]), &dev);
        let (lp, h) = categorical_logp_entropy(logits.clone(), actions, Some(valid));
        let grads = (lp + h).sum().backward();
        let g: Vec<f32> = logits.grad(&grads).unwrap().into_data().to_vec().unwrap();
        assert_eq!(g[2], 0.0, "{g:?}");
        assert!(g[0] != 0.0 && g.iter().all(|x| x.is_finite()), "{g:?}");
    }

    #[test]
    fn cpu_log_softmax_is_stable_and_sampling_follows_probabilities() {
        let mut out = [0.0f32; 3];
        log_softmax_row(&[1000.0, 1000.0, -1000.0], None, &mut out);
        assert!((out[0] - 0.5f32.ln()).abs() < 1e-6 && out[2] < -1000.0);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let logits = [0.0f32, 3f32.ln()];
        let mut scratch = [0.0f32; 2];
        let n = 100_000;
        let mut ones = 0;
        for _ in 0..n {
            let (a, lp) = sample_categorical(&logits, None, &mut scratch, &mut rng).unwrap();
            let want = if a == 1 { 0.75f32.ln() } else { 0.25f32.ln() };
            assert!((lp - want).abs() < 1e-6);
            ones += a;
        }
        // Binomial std at n=1e5 is ~0.0014; 5 sigma.
        assert!((ones as f64 / n as f64 - 0.75).abs() < 0.007, "{ones}");
        assert_eq!(argmax(&[0.1, 0.3, 0.3], None), 1);
    }

    #[test]
    fn a_masked_action_is_never_sampled_or_chosen() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        // The masked action has by far the largest logit.
        let logits = [0.0f32, 50.0, 0.0];
        let valid = [1u8, 0, 1];
        let mut scratch = [0.0f32; 3];
        let mut counts = [0usize; 3];
        for _ in 0..20_000 {
            let (a, lp) =
                sample_categorical(&logits, Some(&valid), &mut scratch, &mut rng).unwrap();
            assert!((lp - 0.5f32.ln()).abs() < 1e-6, "{lp}");
            counts[a] += 1;
        }
        assert_eq!(counts[1], 0, "{counts:?}");
        assert!(counts[0] > 9_000 && counts[2] > 9_000, "{counts:?}");
        assert_eq!(argmax(&logits, Some(&valid)), 0);
        assert_eq!(
            sample_categorical(&logits, Some(&[0, 0, 0]), &mut scratch, &mut rng),
            Err(DistError::AllMasked { env: 0 })
        );
    }

    /// Masked entries count for nothing in the log-sum: against the sum
    /// over every entry with each masked one at [`MASKED_LOGIT`], to the
    /// bit; a row with none allowed is uniform, as it was.
    #[test]
    fn masked_entries_are_left_out_of_the_log_sum_to_the_bit() {
        let logits = [0.3f32, 7.0, -2.5, 1.0, 40.0];
        let valid = [1u8, 0, 1, 1, 0];
        let mut out = [0.0f32; 5];
        log_softmax_row(&logits, Some(&valid), &mut out);
        let with_masked: Vec<f32> = (0..5)
            .map(|i| {
                if valid[i] == 1 {
                    logits[i]
                } else {
                    MASKED_LOGIT
                }
            })
            .collect();
        let max = 1.0f32;
        let sum: f32 = with_masked.iter().map(|&l| (l - max).exp()).sum();
        for i in 0..5 {
            assert_eq!(
                out[i].to_bits(),
                ((with_masked[i] - max) - sum.ln()).to_bits()
            );
        }
        log_softmax_row(&logits, Some(&[0; 5]), &mut out);
        assert!(
            out.iter().all(|&l| (l - 0.2f32.ln()).abs() < 1e-6),
            "{out:?}"
        );
    }
}
