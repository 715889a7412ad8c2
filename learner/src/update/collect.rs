//! Taking an update's batches off the queue: every batch taken is acked, those
//! too far behind the current policy are dropped (and counted; their envs'
//! discounted returns still go to the reward scale, as Gymnasium folds every
//! step in), and the rest are kept until `learner.batches_per_update` are in hand.
//! Batches are taken in arrival order, or in a deterministic run in lane order
//! ([`Order`]).

use crate::accounting::Outcome;
use crate::batch::{BatchOrigin, DecodedBatch, Trajectory, Verdict};
use crate::deterministic::LaneOrder;
use crate::state::{LiveProgress, Shared};
use std::sync::atomic::Ordering;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// What one update takes off the queue (acked already).
pub struct Taken {
    /// The fresh batches to train on, and where each came from.
    pub trajectories: Vec<Trajectory>,
    pub origins: Vec<BatchOrigin>,
    /// The discounted returns of the stale batches dropped meanwhile.
    pub stale_returns: Vec<f32>,
}

/// The update loop's end of the queue, and the order batches are taken in.
pub struct Intake {
    pub rx: mpsc::Receiver<DecodedBatch>,
    pub order: Order,
}

impl Intake {
    pub fn new(rx: mpsc::Receiver<DecodedBatch>, shared: &Shared) -> Self {
        let order = match &shared.deterministic {
            Some(l) => Order::Lanes(LaneOrder::new(l.lanes())),
            None => Order::Arrival,
        };
        Self { rx, order }
    }
}

/// The order batches are taken in.
#[derive(Debug)]
pub enum Order {
    /// As they arrive.
    Arrival,
    /// A deterministic run's lane order; early batches wait their turn.
    Lanes(LaneOrder),
}

impl Intake {
    /// The next batch to take; `None` when the queue closed or `stop` fired.
    fn next(
        &mut self,
        rt: &tokio::runtime::Handle,
        stop: &CancellationToken,
        shared: &Shared,
    ) -> Option<DecodedBatch> {
        loop {
            if let Order::Lanes(order) = &mut self.order
                && let Some(b) = order.pop()
            {
                return Some(b);
            }
            let rx = &mut self.rx;
            let b = rt.block_on(async {
                tokio::select! {
                    b = rx.recv() => b,
                    _ = stop.cancelled() => None,
                }
            })?;
            // Every actor of a deterministic run has a lane (Join refuses
            // other names); a batch without one is taken as it comes.
            match (&mut self.order, shared.actors.lane_of(&b.actor_id)) {
                (Order::Lanes(order), Some(lane)) => order.file(lane, b),
                _ => return Some(b),
            }
        }
    }
}

/// `k` fresh batches at policy `version`, counting their env steps into
/// `env_steps` (only batches trained on count towards the budget: a stale
/// batch dropped here does not); `None` when the queue closed or `stop` fired first (the batches
/// already taken are counted as dropped at shutdown).
pub fn collect(
    rt: &tokio::runtime::Handle,
    intake: &mut Intake,
    stop: &CancellationToken,
    shared: &Shared,
    live: &LiveProgress,
    version: u64,
    env_steps: &mut u64,
) -> Option<Taken> {
    let cfg = &shared.config;
    let k = cfg.learner.batches_per_update;
    let mut batches: Vec<DecodedBatch> = Vec::with_capacity(k);
    let mut stale_returns = Vec::new();
    while batches.len() < k {
        let Some(mut b) = intake.next(rt, stop, shared) else {
            for b in batches.drain(..) {
                shared
                    .accounting
                    .dequeued(&b.actor_id, Outcome::DroppedShutdown);
            }
            return None;
        };
        // Taken: its queue_wait span ends here.
        b.trace.queue_wait.take();
        let lag = version.saturating_sub(b.trajectory.policy_version);
        if lag > cfg.learner.max_policy_lag {
            debug!(actor = %b.actor_id, lag, "dropping stale batch");
            let why = format!(
                "dropped: policy lag {lag} exceeds max_policy_lag {}",
                cfg.learner.max_policy_lag
            );
            b.acknowledge(version, Verdict::Dropped(why), false);
            stale_returns.extend_from_slice(&b.trajectory.discounted_returns);
            shared
                .accounting
                .dequeued(&b.actor_id, Outcome::DroppedStale);
            continue;
        }
        b.acknowledge(version, Verdict::Used, false);
        crate::metrics::policy_lag(lag);
        *env_steps += b.env_steps();
        live.env_steps.store(*env_steps, Ordering::Relaxed);
        batches.push(b);
    }
    let (origins, trajectories) = batches.into_iter().map(DecodedBatch::into_parts).unzip();
    Some(Taken {
        trajectories,
        origins,
        stale_returns,
    })
}

/// When the loop ends: whatever is still queued (or waiting for its turn) is
/// acked as dropped and counted; actors are told the run is over only if it is.
pub fn drain(intake: &mut Intake, shared: &Shared, version: u64) {
    intake.rx.close();
    let waiting = match &mut intake.order {
        Order::Lanes(order) => order.drain(),
        Order::Arrival => Vec::new(),
    };
    let rx = &mut intake.rx;
    let queued = std::iter::from_fn(|| rx.try_recv().ok());
    for b in waiting.into_iter().chain(queued) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use sebulba_algorithms::TrajectoryBuilder;
    use sebulba_core::config::RunConfig;

    fn batch(actor: &str, policy_version: u64, returns: &[f32]) -> DecodedBatch {
        let trajectory = TrajectoryBuilder::new(1, returns.len(), 3)
            .policy_version(policy_version)
            .continuous(vec![0.0; returns.len()])
            .discounted_returns(returns.to_vec())
            .build();
        DecodedBatch::unsent(actor, 0, trajectory)
    }

    /// A stale batch is not trained on, but its envs' returns still reach
    /// the reward scale (Gymnasium folds in every step).
    #[test]
    fn stale_batches_are_dropped_but_their_returns_are_kept() {
        let mut cfg = RunConfig::preset("Pendulum-v1").unwrap();
        (cfg.learner.batches_per_update, cfg.learner.max_policy_lag) = (2, 1);
        let env = sebulba_envs::env_spec("Pendulum-v1").unwrap();
        let shared = Shared::new(cfg, env, "run".into());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (tx, rx) = mpsc::channel(8);
        for b in [
            batch("a", 8, &[-1.0, -1.9]),
            batch("b", 5, &[-7.0, -8.0]),
            batch("a", 9, &[-2.7, -3.4]),
        ] {
            shared.accounting.queued(&b.actor_id, &b.actor_time);
            tx.try_send(b).unwrap();
        }
        let mut env_steps = 0;
        let live = LiveProgress::default();
        let stop = CancellationToken::new();
        let mut intake = Intake::new(rx, &shared);
        let taken = collect(
            rt.handle(),
            &mut intake,
            &stop,
            &shared,
            &live,
            9,
            &mut env_steps,
        )
        .unwrap();
        let versions: Vec<u64> = taken
            .trajectories
            .iter()
            .map(|t| t.policy_version)
            .collect();
        assert_eq!(versions, [8, 9]);
        assert_eq!(taken.stale_returns, [-7.0, -8.0]);
        assert_eq!(env_steps, 4, "only batches trained on count");
        let total = shared.accounting.total();
        assert_eq!(total.dropped_stale, 1);
        assert!(total.balanced());
    }
}
