//! Reward scaling as Gymnasium 1.x's `NormalizeReward`: rewards are divided
//! by the running std of the envs' discounted returns. The returns themselves
//! are kept by the actors, with their envs (`envs::DiscountedReturn`:
//! restarted at termination only), and arrive with every batch; the learner
//! keeps their statistics, from Gymnasium's prior (mean 0, var 1, weight
//! 1e-4), over every step of every batch taken, stale ones included. Only the
//! scale changes, never the sign or the optimum.

use sebulba_core::model::RunningMeanStd;

/// Gymnasium's `epsilon` in `reward / sqrt(var + epsilon)`.
const EPS: f64 = 1e-8;
/// The weight of Gymnasium's `RunningMeanStd` prior (mean 0, var 1).
const PRIOR_COUNT: f64 = 1e-4;

/// Checkpointed whole: the statistics of the discounted returns.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RewardScaler {
    stats: RunningMeanStd,
}

impl Default for RewardScaler {
    fn default() -> Self {
        Self {
            stats: RunningMeanStd {
                count: PRIOR_COUNT,
                mean: vec![0.0],
                var: vec![1.0],
            },
        }
    }
}

impl RewardScaler {
    /// Folds in one batch's discounted returns (`[T * E]`).
    pub fn observe(&mut self, returns: &[f32]) {
        self.stats.update(returns);
    }

    /// The factor rewards are multiplied by: `1 / sqrt(var + eps)`.
    pub fn factor(&self) -> f32 {
        (1.0 / (self.stats.var[0] + EPS).sqrt()) as f32
    }

    pub fn return_std(&self) -> f64 {
        self.stats.var[0].sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variance of `xs` together with the prior, from the raw moments
    /// (not the parallel update the statistics use): the prior weighs 1e-4
    /// with E[x] = 0 and E[x^2] = var + mean^2 = 1.
    fn with_prior(xs: &[f64]) -> f64 {
        let n = xs.len() as f64 + PRIOR_COUNT;
        let mean = xs.iter().sum::<f64>() / n;
        let second = (PRIOR_COUNT + xs.iter().map(|x| x * x).sum::<f64>()) / n;
        second - mean * mean
    }

    #[test]
    fn the_scale_is_the_std_of_every_return_seen_with_gymnasiums_prior() {
        // Returns from envs::DiscountedReturn's test (gamma 0.5): env 0
        // 1, 1.5, 1, 2.5 (terminated at the third step), env 1 4, 6, 7, 7.5.
        let batch = [1.0f32, 4.0, 1.5, 6.0, 1.0, 7.0, 2.5, 7.5];
        let stale = [8.0f32, 3.0];
        let mut s = RewardScaler::default();
        s.observe(&batch);
        s.observe(&stale);
        let all: Vec<f64> = batch.iter().chain(&stale).map(|&x| f64::from(x)).collect();
        let var = with_prior(&all);
        assert!(
            (s.return_std() - var.sqrt()).abs() < 1e-12,
            "{}",
            s.return_std()
        );
        let want = 1.0 / (var + EPS).sqrt();
        assert!((f64::from(s.factor()) - want).abs() < 1e-6);
        // Before any return, the prior alone: var 1, factor ~1.
        assert!((RewardScaler::default().factor() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn a_checkpoint_of_the_old_format_still_loads() {
        // Before the returns moved to the actors, the scaler also kept them.
        let old = r#"{"gamma":0.99,"returns":{"a#0":[1.0]},"stats":{"count":4.0,"mean":[1.0],"var":[2.0]}}"#;
        let s: RewardScaler = serde_json::from_str(old).expect("loads");
        assert!((s.return_std() - 2f64.sqrt()).abs() < 1e-12);
    }
}
