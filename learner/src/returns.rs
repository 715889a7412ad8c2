//! The returns of the run's last finished training episodes: the headline
//! figure a run has even without an evaluation, as CleanRL and cleanba
//! report it. They are the actors' episode statistics, so for Atari whole
//! games at the raw score (the actors' envs end a learner's episode at each
//! lost life and clip its rewards, but score the game whole and raw).

use std::collections::VecDeque;
use std::sync::Mutex;

/// Episodes the mean is over (fewer before that many have finished).
pub const KEPT: usize = 100;

#[derive(Debug, Default)]
pub struct TrainReturns(Mutex<VecDeque<f64>>);

impl TrainReturns {
    /// Adds an update's finished episodes, in the order they finished;
    /// non-finite returns are left out (validation refuses them first).
    pub fn extend(&self, returns: &[f64]) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.extend(returns.iter().copied().filter(|r| r.is_finite()));
        while kept.len() > KEPT {
            kept.pop_front();
        }
    }

    /// The mean of the last [`KEPT`] episodes' returns (`None` before any
    /// finished) and how many it is over.
    pub fn mean(&self) -> (Option<f64>, usize) {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = kept.len();
        ((n > 0).then(|| kept.iter().sum::<f64>() / n as f64), n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_is_over_the_last_hundred_finished_episodes() {
        let r = TrainReturns::default();
        assert_eq!(r.mean(), (None, 0));
        r.extend(&[1.0, 2.0, f64::NAN, 3.0]);
        assert_eq!(r.mean(), (Some(2.0), 3));
        // 150 more: 0..150; the last 100 are 50..150, mean 99.5.
        let more: Vec<f64> = (0..150).map(f64::from).collect();
        r.extend(&more);
        assert_eq!(r.mean(), (Some(99.5), 100));
        r.extend(&[]);
        assert_eq!(r.mean(), (Some(99.5), 100));
    }
}
