//! Taking an update's batches off the queue: every batch taken is acked, those
//! too far behind the current policy are dropped (and counted), and the rest
//! are kept until `learner.batches_per_update` are in hand.

use crate::accounting::Outcome;
use crate::batch::{DecodedBatch, Verdict};
use crate::state::{LiveStats, Shared};
use std::sync::atomic::Ordering;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// `k` fresh batches at policy `version`, counting their env steps into
/// `env_steps` (only batches trained on count towards the budget: a stale
/// batch dropped here does not); `None` when the queue closed or `stop` fired first (the batches
/// already taken are counted as dropped at shutdown).
pub fn collect(
    rt: &tokio::runtime::Handle,
    rx: &mut mpsc::Receiver<DecodedBatch>,
    stop: &CancellationToken,
    shared: &Shared,
    live: &LiveStats,
    version: u64,
    env_steps: &mut u64,
) -> Option<Vec<DecodedBatch>> {
    let cfg = &shared.config;
    let k = cfg.learner.batches_per_update;
    let mut batches: Vec<DecodedBatch> = Vec::with_capacity(k);
    while batches.len() < k {
        let next = rt.block_on(async {
            tokio::select! {
                b = rx.recv() => b,
                _ = stop.cancelled() => None,
            }
        });
        let Some(mut b) = next else {
            for b in batches.drain(..) {
                shared
                    .accounting
                    .dequeued(&b.actor_id, Outcome::DroppedShutdown);
            }
            return None;
        };
        // Taken: its queue_wait span ends here.
        b.trace.queue_wait.take();
        let lag = version.saturating_sub(b.policy_version);
        if lag > cfg.learner.max_policy_lag {
            debug!(actor = %b.actor_id, lag, "dropping stale batch");
            let why = format!(
                "dropped: policy lag {lag} exceeds max_policy_lag {}",
                cfg.learner.max_policy_lag
            );
            b.acknowledge(version, Verdict::Dropped(why), false);
            shared
                .accounting
                .dequeued(&b.actor_id, Outcome::DroppedStale);
            continue;
        }
        b.acknowledge(version, Verdict::Used, false);
        *env_steps += b.env_steps();
        live.env_steps.store(*env_steps, Ordering::Relaxed);
        batches.push(b);
    }
    Some(batches)
}

/// When the loop ends: whatever is still queued is acked as dropped and
/// counted; actors are told the run is over only if it is.
pub fn drain(rx: &mut mpsc::Receiver<DecodedBatch>, shared: &Shared, version: u64) {
    rx.close();
    while let Ok(b) = rx.try_recv() {
        let (why, over) = if shared.is_finished() {
            ("dropped: the run finished", true)
        } else {
            (
                "dropped: the learner is stopping; the run is not over",
                false,
            )
        };
        b.acknowledge(version, Verdict::Dropped(why.into()), over);
        shared
            .accounting
            .dequeued(&b.actor_id, Outcome::DroppedShutdown);
    }
}
