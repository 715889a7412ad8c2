//! Reward scaling by the running std of the discounted return (as Gymnasium's
//! NormalizeReward): each (actor, env) keeps its discounted return across
//! batches, reset at episode ends; rewards are divided by the std of those
//! returns. Only the scale changes, never the sign or the optimum.

use sebulba_core::model::RunningMeanStd;
use std::collections::HashMap;

const EPS: f64 = 1e-8;

/// Checkpointed whole: the returns carried per (actor, env) and their statistics.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RewardScaler {
    gamma: f64,
    /// Discounted return so far per actor, per env.
    returns: HashMap<String, Vec<f64>>,
    stats: RunningMeanStd,
}

impl RewardScaler {
    pub fn new(gamma: f64) -> Self {
        Self {
            gamma,
            returns: HashMap::new(),
            stats: RunningMeanStd::new(1),
        }
    }

    /// Folds one batch (`[T * E]` arrays, time-major) into the statistics.
    pub fn observe(
        &mut self,
        actor: &str,
        num_envs: usize,
        rewards: &[f32],
        terminated: &[u8],
        truncated: &[u8],
    ) {
        let g = self
            .returns
            .entry(actor.to_string())
            .or_insert_with(|| vec![0.0; num_envs]);
        g.resize(num_envs, 0.0);
        let mut seen = Vec::with_capacity(rewards.len());
        for (i, &r) in rewards.iter().enumerate() {
            let e = i % num_envs;
            g[e] = g[e] * self.gamma + r as f64;
            seen.push(g[e] as f32);
            if terminated[i] == 1 || truncated[i] == 1 {
                g[e] = 0.0;
            }
        }
        self.stats.update(&seen);
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

    #[test]
    fn returns_carry_across_batches_and_reset_at_episode_ends() {
        // gamma 0.5, one env: rewards 1, 1, 1 (terminated), then 2 in the next batch.
        // Returns: 1, 1.5, 1.75, then a fresh episode: 2.
        // mean 1.5625, population var = (0.31640625 + 0.00390625 + 0.03515625 + 0.19140625) / 4
        //                              = 0.13671875
        let mut s = RewardScaler::new(0.5);
        s.observe("a", 1, &[1.0, 1.0, 1.0], &[0, 0, 1], &[0, 0, 0]);
        s.observe("a", 1, &[2.0], &[0], &[0]);
        let want = 1.0 / (0.136_718_75f64 + EPS).sqrt();
        assert!(
            (s.factor() as f64 - want).abs() < 1e-5,
            "{} vs {want}",
            s.factor()
        );
        // Another actor has its own returns; truncation also ends an episode.
        let mut s = RewardScaler::new(0.5);
        s.observe("a", 2, &[1.0, 4.0, 1.0, 4.0], &[0, 0, 0, 0], &[0, 1, 0, 0]);
        s.observe("b", 2, &[1.0, 4.0], &[0, 0], &[0, 0]);
        // Returns: a: env0 1, 1.5; env1 4 (truncated), 4; b: 1, 4.
        let v = [1.0f64, 4.0, 1.5, 4.0, 1.0, 4.0];
        let m = v.iter().sum::<f64>() / 6.0;
        let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 6.0;
        assert!((s.return_std() - var.sqrt()).abs() < 1e-9);
    }
}
