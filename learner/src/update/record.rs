//! One line of `metrics.jsonl` per update: the algorithm's statistics, the
//! data it trained on, and the run's counters at that point.

use crate::state::Shared;
use sebulba_algorithms::UpdateStats;
use sebulba_algorithms::data::Lag;
use sebulba_algorithms::prepare::Prepared;
use serde::Serialize;

#[derive(Serialize)]
pub struct MetricsLine {
    update: u64,
    version: u64,
    env_steps: u64,
    wall_seconds: f64,
    steps_per_second: f64,
    samples: usize,
    /// A game's moves made by past versions: not among the samples.
    past_moves: u64,
    #[serde(flatten)]
    stats: UpdateStats,
    explained_variance: f64,
    policy_lag: Lag,
    /// Batches whose lag V-trace corrected (`ppo.lag_correction = vtrace`).
    lag_corrected_batches: usize,
    reward_scale: f32,
    episodes: usize,
    episode_return_mean: Option<f64>,
    episode_length_mean: Option<f64>,
    update_seconds: f64,
    batches_received: u64,
    batches_used: u64,
    batches_dropped_stale: u64,
    batches_rejected: u64,
}

/// Where the run stands after an update.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub updates: u64,
    pub version: u64,
    pub env_steps: u64,
}

impl MetricsLine {
    pub fn new(
        at: Progress,
        wall_seconds: f64,
        update_seconds: f64,
        prepared: &Prepared,
        stats: UpdateStats,
        shared: &Shared,
    ) -> Self {
        let counts = shared.accounting.total();
        let lengths: Vec<f64> = prepared.episode_lengths.iter().map(|&l| l as f64).collect();
        Self {
            update: at.updates,
            version: at.version,
            env_steps: at.env_steps,
            wall_seconds,
            steps_per_second: at.env_steps as f64 / wall_seconds.max(1e-9),
            samples: stats.samples(prepared),
            past_moves: prepared.past_moves,
            stats,
            explained_variance: prepared.explained_variance,
            policy_lag: prepared.lag,
            lag_corrected_batches: prepared.lag_corrected,
            reward_scale: prepared.reward_scale,
            episodes: prepared.episode_returns.len(),
            episode_return_mean: mean(&prepared.episode_returns),
            episode_length_mean: mean(&lengths),
            update_seconds,
            batches_received: counts.received,
            batches_used: counts.used,
            batches_dropped_stale: counts.dropped_stale,
            batches_rejected: counts.rejected,
        }
    }

    pub fn episode_return_mean(&self) -> Option<f64> {
        self.episode_return_mean
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}
