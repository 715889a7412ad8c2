//! The learner's live metrics (Prometheus names; served when the process has
//! `--metrics-addr`, otherwise each call is a no-op). Counters mirror the
//! run's own figures as absolute values (the update loop's counters here,
//! the accounting in `BatchCounts::export`, the evaluations in `Scores::export`),
//! so a scrape after the run agrees with `summary.json` exactly, across
//! resumed segments too.

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};

/// Help texts, once per process.
pub fn describe() {
    describe_counter!(
        "sebulba_learner_batches_total",
        "Trajectory batches by outcome (received = used + dropped_stale + dropped_shutdown + rejected + queued)"
    );
    describe_counter!(
        "sebulba_learner_batches_rejected_total",
        "Refused batches by reason (the field or rule that failed)"
    );
    describe_counter!(
        "sebulba_learner_streams_broken_total",
        "Trajectory streams that broke mid-flight, by reason"
    );
    describe_counter!(
        "sebulba_learner_env_restarts_total",
        "Environments the actors replaced after a failure"
    );
    describe_gauge!(
        "sebulba_learner_queue_depth",
        "Accepted batches waiting for an update"
    );
    describe_counter!(
        "sebulba_learner_env_steps_total",
        "Env steps of the batches trained on"
    );
    describe_counter!("sebulba_learner_updates_total", "PPO updates done");
    describe_counter!(
        "sebulba_learner_past_moves_total",
        "A game's moves made by past versions or rule players, left out of training (this process)"
    );
    describe_counter!(
        "sebulba_learner_non_finite_steps_total",
        "Minibatch steps skipped for a non-finite loss or gradient (this process)"
    );
    describe_gauge!("sebulba_learner_version", "Newest published policy version");
    describe_gauge!(
        "sebulba_learner_steps_per_second",
        "Env steps trained on per second of the run's wall time"
    );
    describe_gauge!(
        "sebulba_learner_episode_return_mean",
        "Mean return of the training episodes that ended in the last update"
    );
    describe_histogram!(
        "sebulba_learner_policy_lag",
        "Versions between a used batch's policy and the learner's"
    );
    describe_histogram!(
        "sebulba_learner_update_seconds",
        "One update: preparation, SGD, publishing"
    );
    describe_histogram!(
        "sebulba_learner_publish_seconds",
        "The update thread's time on publishing a version: its bytes, and waiting for the previous version's publish (the final version's: until the param-server holds it)"
    );
    describe_gauge!(
        "sebulba_learner_eval_return_mean",
        "The run's latest and best evaluation (mean deterministic return)"
    );
    describe_gauge!(
        "sebulba_learner_eval_version",
        "The versions the latest and best evaluation scored"
    );
}

/// Where the run stands after an update.
pub fn progress(updates: u64, version: u64, env_steps: u64, wall_seconds: f64) {
    counter!("sebulba_learner_updates_total").absolute(updates);
    counter!("sebulba_learner_env_steps_total").absolute(env_steps);
    gauge!("sebulba_learner_version").set(version as f64);
    gauge!("sebulba_learner_steps_per_second").set(env_steps as f64 / wall_seconds.max(1e-9));
}

/// One update's timings, training episodes, moves of past selves and
/// minibatch steps skipped for a non-finite loss or gradient.
pub fn update(
    update_seconds: f64,
    episode_return_mean: Option<f64>,
    past_moves: u64,
    non_finite_steps: u64,
) {
    histogram!("sebulba_learner_update_seconds").record(update_seconds);
    counter!("sebulba_learner_past_moves_total").increment(past_moves);
    counter!("sebulba_learner_non_finite_steps_total").increment(non_finite_steps);
    if let Some(r) = episode_return_mean {
        gauge!("sebulba_learner_episode_return_mean").set(r);
    }
}

pub fn publish_seconds(s: f64) {
    histogram!("sebulba_learner_publish_seconds").record(s);
}

/// A batch taken for an update, `lag` versions behind.
pub fn policy_lag(lag: u64) {
    histogram!("sebulba_learner_policy_lag").record(lag as f64);
}
