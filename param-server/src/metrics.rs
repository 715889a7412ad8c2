//! The parameter server's live metrics (no-ops without `--metrics-addr`).

use metrics::{counter, describe_counter, describe_gauge, gauge};

pub(crate) fn describe() {
    describe_counter!(
        "sebulba_param_server_publishes_total",
        "Publish calls, by outcome (accepted, refused)"
    );
    describe_gauge!("sebulba_param_server_version", "The newest version held");
    describe_gauge!(
        "sebulba_param_server_env_steps",
        "Env steps the newest version was trained on"
    );
    describe_gauge!(
        "sebulba_param_server_weights_bytes",
        "Size of the newest version's safetensors"
    );
    describe_gauge!(
        "sebulba_param_server_watchers",
        "Open Watch streams (actors, the evaluator)"
    );
    describe_counter!(
        "sebulba_param_server_eval_reports_total",
        "Evaluation reports filed, by outcome (accepted, refused)"
    );
    describe_gauge!(
        "sebulba_param_server_eval_return_mean",
        "Mean return of the newest evaluation report accepted"
    );
}

/// A publish of `(version, env_steps, bytes)` was accepted (`Some`) or refused.
pub(crate) fn published(held: Option<(u64, u64, usize)>) {
    let Some((version, env_steps, bytes)) = held else {
        counter!("sebulba_param_server_publishes_total", "outcome" => "refused").increment(1);
        return;
    };
    counter!("sebulba_param_server_publishes_total", "outcome" => "accepted").increment(1);
    gauge!("sebulba_param_server_version").set(version as f64);
    gauge!("sebulba_param_server_env_steps").set(env_steps as f64);
    gauge!("sebulba_param_server_weights_bytes").set(bytes as f64);
}

pub(crate) fn watchers(n: usize) {
    gauge!("sebulba_param_server_watchers").set(n as f64);
}

/// An evaluation report with this mean return was accepted (`Some`) or refused.
pub(crate) fn reported(return_mean: Option<f64>) {
    let Some(return_mean) = return_mean else {
        counter!("sebulba_param_server_eval_reports_total", "outcome" => "refused").increment(1);
        return;
    };
    counter!("sebulba_param_server_eval_reports_total", "outcome" => "accepted").increment(1);
    gauge!("sebulba_param_server_eval_return_mean").set(return_mean);
}
