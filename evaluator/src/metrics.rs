//! The evaluator's live metrics (no-ops without `--metrics-addr`).

use crate::EvalLine;
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};

pub(crate) fn describe() {
    describe_counter!("sebulba_evaluator_evaluations_total", "Versions evaluated");
    describe_counter!(
        "sebulba_evaluator_episodes_total",
        "Evaluation episodes played"
    );
    describe_counter!(
        "sebulba_evaluator_env_restarts_total",
        "Evaluation envs replaced after they failed"
    );
    describe_counter!(
        "sebulba_evaluator_schedules_refused_total",
        "Runs whose published evaluation schedule was out of range (the defaults scored them)"
    );
    describe_gauge!(
        "sebulba_evaluator_return_mean",
        "Mean deterministic return of the newest evaluation"
    );
    describe_gauge!(
        "sebulba_evaluator_return_std",
        "Spread of the newest evaluation's returns"
    );
    describe_gauge!(
        "sebulba_evaluator_version",
        "The version the newest evaluation scored"
    );
    describe_gauge!(
        "sebulba_evaluator_env_steps",
        "Env steps the newest evaluated version was trained on"
    );
    describe_counter!(
        "sebulba_evaluator_episodes_cut_total",
        "Evaluation episodes cut unfinished (the step budget, a stop)"
    );
    describe_gauge!(
        "sebulba_evaluator_cpu_seconds",
        "CPU time of this evaluator's evaluations (their envs' threads included), seconds"
    );
    describe_gauge!(
        "sebulba_evaluator_cpu_share",
        "The evaluations' CPU time over this evaluator's wall time times the machine's cores"
    );
    describe_counter!(
        "sebulba_evaluator_videos_total",
        "Evaluations filmed into the run's videos/"
    );
    describe_counter!(
        "sebulba_evaluator_videos_failed_total",
        "Evaluations due a video that has none (the env cannot draw itself, encoding or disk failed)"
    );
    describe_histogram!(
        "sebulba_evaluator_eval_seconds",
        "Playing one evaluation's episodes"
    );
}

/// One evaluation, as written to `eval.jsonl`, and the evaluator's CPU
/// account after it: its evaluations' CPU seconds, and their share of the
/// machine's cores over the evaluator's wall time.
pub(crate) fn evaluated(line: &EvalLine, cpu_seconds: f64, cpu_share: f64) {
    counter!("sebulba_evaluator_episodes_cut_total").increment(line.episodes_cut as u64);
    gauge!("sebulba_evaluator_cpu_seconds").set(cpu_seconds);
    gauge!("sebulba_evaluator_cpu_share").set(cpu_share);
    counter!("sebulba_evaluator_evaluations_total").increment(1);
    counter!("sebulba_evaluator_episodes_total").increment(line.episodes as u64);
    counter!("sebulba_evaluator_env_restarts_total").increment(line.env_restarts);
    gauge!("sebulba_evaluator_return_mean").set(line.return_mean);
    gauge!("sebulba_evaluator_return_std").set(line.return_std);
    gauge!("sebulba_evaluator_version").set(line.version as f64);
    gauge!("sebulba_evaluator_env_steps").set(line.env_steps as f64);
    histogram!("sebulba_evaluator_eval_seconds").record(line.eval_seconds);
}

/// A run's published schedule refused.
pub(crate) fn schedule_refused() {
    counter!("sebulba_evaluator_schedules_refused_total").increment(1);
}

/// An evaluation due a video: filmed, or not.
pub(crate) fn filmed(ok: bool) {
    if ok {
        counter!("sebulba_evaluator_videos_total").increment(1);
    } else {
        counter!("sebulba_evaluator_videos_failed_total").increment(1);
    }
}
