//! The run's `summary.json`.

use crate::accounting::Counts;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub env_id: String,
    pub seed: u64,
    pub env_steps: u64,
    pub wall_seconds: f64,
    pub steps_per_second: f64,
    pub updates: u64,
    pub final_version: u64,
    /// Mean deterministic return of the final version (None if no evaluation came).
    pub final_eval_return_mean: Option<f64>,
    pub best_eval_return_mean: Option<f64>,
    pub best_eval_version: Option<u64>,
    pub batches: Counts,
    pub batches_per_actor: BTreeMap<String, Counts>,
    /// Peak resident memory of the learner's process (in local mode: every
    /// role together), MiB; None where the OS does not say.
    pub peak_rss_mib: Option<f64>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Lag {
    pub min: u64,
    pub mean: f64,
    pub max: u64,
}

impl Summary {
    /// The summary of a run that ended with `outcome` after `wall` time; its
    /// final and best evaluations are taken from `evals`.
    pub fn of_run(
        cfg: &sebulba_core::config::RunConfig,
        outcome: &crate::update::LoopOutcome,
        wall: std::time::Duration,
        evals: &[sebulba_proto::EvalReport],
        shared: &crate::state::Shared,
    ) -> Self {
        let wall = wall.as_secs_f64();
        let final_eval = evals
            .iter()
            .find(|r| r.version == outcome.final_version)
            .map(|r| r.return_mean);
        let best = evals
            .iter()
            .max_by(|a, b| a.return_mean.total_cmp(&b.return_mean));
        let (batches, batches_per_actor) = shared.accounting.snapshot();
        Self {
            env_id: cfg.env.id.clone(),
            seed: cfg.run.seed,
            env_steps: outcome.env_steps,
            wall_seconds: wall,
            steps_per_second: outcome.env_steps as f64 / wall.max(1e-9),
            updates: outcome.updates,
            final_version: outcome.final_version,
            final_eval_return_mean: final_eval,
            best_eval_return_mean: best.map(|r| r.return_mean),
            best_eval_version: best.map(|r| r.version),
            batches,
            batches_per_actor,
            peak_rss_mib: sebulba_core::memory::peak_rss_bytes()
                .map(|b| b as f64 / (1 << 20) as f64),
        }
    }
}
