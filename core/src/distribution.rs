//! Action distributions over the policy head's output. The categorical head is
//! here; the tanh-normal head for Box spaces plugs in as another `ActionDist`.
//! Each distribution has a tensor side (the learner, differentiable) and a CPU
//! side on plain slices (actors: sampling one small batch per step).

use crate::env::ActionSpace;
use burn::tensor::activation::log_softmax;
use burn::tensor::{Int, Tensor, backend::Backend};
use rand::Rng;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DistError {
    #[error(
        "action space {0:?} has no policy head yet (continuous actions come with the tanh-normal head)"
    )]
    Unsupported(ActionSpace),
}

/// How the policy head's output is read as a distribution over actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionDist {
    Categorical { n: usize },
}

impl ActionDist {
    pub fn for_space(space: &ActionSpace) -> Result<Self, DistError> {
        match space {
            ActionSpace::Discrete { n } => Ok(ActionDist::Categorical { n: *n }),
            other => Err(DistError::Unsupported(other.clone())),
        }
    }
}

/// Width of the policy head for an action space.
pub fn head_dim(space: &ActionSpace) -> usize {
    match space {
        ActionSpace::Discrete { n } => *n,
        ActionSpace::Box { low, .. } => 2 * low.len(),
    }
}

/// Log-probabilities of `actions` `[N]` and entropies, both `[N]`, under
/// categorical distributions with `logits` `[N, A]`.
pub fn categorical_logp_entropy<B: Backend>(
    logits: Tensor<B, 2>,
    actions: Tensor<B, 1, Int>,
) -> (Tensor<B, 1>, Tensor<B, 1>) {
    let [n, _] = logits.dims();
    let logp_all = log_softmax(logits, 1);
    let logp = logp_all
        .clone()
        .gather(1, actions.reshape([n, 1]))
        .reshape([n]);
    let entropy = -(logp_all.clone().exp() * logp_all).sum_dim(1).reshape([n]);
    (logp, entropy)
}

/// Numerically stable log-softmax of one row of logits into `out`.
pub fn log_softmax_row(logits: &[f32], out: &mut [f32]) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // Subtract the max before the log-sum, not after: `l - (max + ln s)` loses the
    // low bits of ln s when |max| is large.
    let ln_sum = logits.iter().map(|&l| (l - max).exp()).sum::<f32>().ln();
    for (o, &l) in out.iter_mut().zip(logits) {
        *o = (l - max) - ln_sum;
    }
}

/// Samples an action from one row of logits; returns it with its log-probability.
/// `scratch` must have the row's length (reused to avoid allocation).
pub fn sample_categorical<R: Rng + ?Sized>(
    logits: &[f32],
    scratch: &mut [f32],
    rng: &mut R,
) -> (usize, f32) {
    log_softmax_row(logits, scratch);
    let u: f32 = rng.random();
    let mut cdf = 0.0f32;
    for (i, &lp) in scratch.iter().enumerate() {
        cdf += lp.exp();
        if u < cdf {
            return (i, lp);
        }
    }
    // Rounding left the cdf just below 1: take the last action with mass.
    let last = scratch.iter().rposition(|lp| lp.is_finite()).unwrap_or(0);
    (last, scratch[last])
}

/// The most likely action (first on ties): deterministic evaluation.
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;
    use burn::tensor::TensorData;
    use rand::SeedableRng;

    #[test]
    fn categorical_matches_hand_values() {
        // logits [0, ln 3] -> p = [0.25, 0.75]; H = -(0.25 ln 0.25 + 0.75 ln 0.75) = 0.5623351446
        let dev = Default::default();
        let logits = Tensor::<CpuBackend, 2>::from_data(
            TensorData::new(vec![0.0f32, 3f32.ln(), 5.0, 5.0], [2, 2]),
            &dev,
        );
        let actions =
            Tensor::<CpuBackend, 1, Int>::from_data(TensorData::new(vec![1i64, 0], [2]), &dev);
        let (lp, h) = categorical_logp_entropy(logits, actions);
        let lp: Vec<f32> = lp.into_data().to_vec().unwrap();
        let h: Vec<f32> = h.into_data().to_vec().unwrap();
        assert!((lp[0] - 0.75f32.ln()).abs() < 1e-6);
        assert!((lp[1] - 0.5f32.ln()).abs() < 1e-6);
        assert!((h[0] - 0.562_335_1).abs() < 1e-6, "{}", h[0]);
        assert!((h[1] - std::f32::consts::LN_2).abs() < 1e-6);
    }

    #[test]
    fn cpu_log_softmax_is_stable_and_sampling_follows_probabilities() {
        let mut out = [0.0f32; 3];
        log_softmax_row(&[1000.0, 1000.0, -1000.0], &mut out);
        assert!((out[0] - 0.5f32.ln()).abs() < 1e-6 && out[2] < -1000.0);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let logits = [0.0f32, 3f32.ln()];
        let mut scratch = [0.0f32; 2];
        let n = 100_000;
        let mut ones = 0;
        for _ in 0..n {
            let (a, lp) = sample_categorical(&logits, &mut scratch, &mut rng);
            let want = if a == 1 { 0.75f32.ln() } else { 0.25f32.ln() };
            assert!((lp - want).abs() < 1e-6);
            ones += a;
        }
        // Binomial std at n=1e5 is ~0.0014; 5 sigma.
        assert!((ones as f64 / n as f64 - 0.75).abs() < 0.007, "{ones}");
        assert_eq!(argmax(&[0.1, 0.3, 0.3]), 1);
    }

    #[test]
    fn box_spaces_are_refused_until_their_head_exists() {
        let space = ActionSpace::Box {
            low: vec![-2.0],
            high: vec![2.0],
        };
        assert!(ActionDist::for_space(&space).is_err());
        assert_eq!(head_dim(&space), 2);
    }
}
