//! An actor's live metrics, labelled with its name (stable across rejoins;
//! the learner's per-actor series use the id of each join). Without a
//! Prometheus endpoint in the process (`--metrics-addr`) every handle is a
//! no-op.

use metrics::{
    Counter, Gauge, Histogram, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};

/// The handles one actor records through, made once.
#[derive(Clone)]
pub(crate) struct ActorMetrics {
    pub env_steps: Counter,
    pub episodes: Counter,
    pub env_restarts: Counter,
    pub version: Gauge,
    pub rollout_seconds: Histogram,
    pub credit_wait_seconds: Histogram,
    pub acked_used: Counter,
    pub acked_not_used: Counter,
    pub acked_refused: Counter,
    pub sessions: Counter,
    pub stream_breaks: Counter,
}

impl ActorMetrics {
    pub(crate) fn new(name: &str) -> Self {
        describe();
        let a = || metrics::Label::new("actor", name.to_string());
        let acked = |verdict: &'static str| counter!("sebulba_actor_batches_acked_total", "actor" => name.to_string(), "verdict" => verdict);
        Self {
            env_steps: counter!("sebulba_actor_env_steps_total", vec![a()]),
            episodes: counter!("sebulba_actor_episodes_total", vec![a()]),
            env_restarts: counter!("sebulba_actor_env_restarts_total", vec![a()]),
            version: gauge!("sebulba_actor_policy_version", vec![a()]),
            rollout_seconds: histogram!("sebulba_actor_rollout_seconds", vec![a()]),
            credit_wait_seconds: histogram!("sebulba_actor_credit_wait_seconds", vec![a()]),
            acked_used: acked("used"),
            acked_not_used: acked("not_used"),
            acked_refused: acked("refused"),
            sessions: counter!("sebulba_actor_sessions_total", vec![a()]),
            stream_breaks: counter!("sebulba_actor_stream_breaks_total", vec![a()]),
        }
    }
}

fn describe() {
    describe_counter!(
        "sebulba_actor_env_steps_total",
        "Env steps of the rollouts this actor completed"
    );
    describe_counter!(
        "sebulba_actor_episodes_total",
        "Episodes that ended in this actor's rollouts"
    );
    describe_counter!(
        "sebulba_actor_env_restarts_total",
        "Environments replaced after they failed (the rollout was dropped)"
    );
    describe_gauge!(
        "sebulba_actor_policy_version",
        "The version the latest rollout acted with"
    );
    describe_histogram!(
        "sebulba_actor_rollout_seconds",
        "Acting one rollout: env steps and inference"
    );
    describe_histogram!(
        "sebulba_actor_credit_wait_seconds",
        "Waiting for a credit (the learner taking an earlier batch) and fresh weights"
    );
    describe_counter!(
        "sebulba_actor_batches_acked_total",
        "Batches the learner acknowledged, by verdict"
    );
    describe_counter!(
        "sebulba_actor_sessions_total",
        "Joins (1, plus one per reconnection)"
    );
    describe_counter!(
        "sebulba_actor_stream_breaks_total",
        "Sessions that ended with the learner unreachable or the stream broken"
    );
}
