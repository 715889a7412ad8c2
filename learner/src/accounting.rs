//! Batch accounting: every batch received is, at any moment, exactly one of
//! queued, used, dropped (with a reason) or rejected (with a reason), overall and
//! per actor. One mutex keeps the identity exact at every snapshot.

use metrics::{counter, gauge};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchCounts {
    pub received: u64,
    pub used: u64,
    pub dropped_stale: u64,
    pub dropped_shutdown: u64,
    pub rejected: u64,
    /// Rejections by reason (`shape`, `non_finite`, ...).
    pub rejected_by_reason: BTreeMap<String, u64>,
    /// Accepted and waiting in the pipeline.
    pub queued: u64,
    /// The env steps of the `used` batches: what the actor (in local mode
    /// with `run.local_actors_as = "processes"`, its process) contributed.
    #[serde(default)]
    pub env_steps_used: u64,
    /// Streams that broke mid-flight (an actor killed or cut off while sending).
    /// A half-sent batch is never received, so it is outside the identity.
    pub streams_broken: u64,
    /// Broken streams by reason (`undecodable`, `oversize`, `transport`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub streams_broken_by_reason: BTreeMap<String, u64>,
    /// The actors' env failures (outside the identity: no batch was made of
    /// them): envs replaced after they raised or returned NaN/Inf, ...
    pub env_restarts: u64,
    /// ... of which non-finite observations or rewards, ...
    pub env_non_finite: u64,
    /// ... and the env steps of the rollouts the actors dropped for them.
    pub env_steps_discarded: u64,
    /// Where the actors' time went, summed over the batches accepted
    /// (`TrajectoryBatch.actor_time`; zero from actors that do not say).
    pub actor_time: ActorTime,
}

/// Seconds of actor time: wall-clock, and the parts of it stepping envs, in
/// the policy, and waiting for the learner's credit (the rest is sending
/// and taking weights).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ActorTime {
    pub wall_seconds: f64,
    pub env_seconds: f64,
    pub inference_seconds: f64,
    pub waiting_seconds: f64,
}

impl ActorTime {
    fn add(&mut self, t: &ActorTime) {
        self.wall_seconds += t.wall_seconds;
        self.env_seconds += t.env_seconds;
        self.inference_seconds += t.inference_seconds;
        self.waiting_seconds += t.waiting_seconds;
    }
}

impl BatchCounts {
    /// received = used + dropped + rejected + queued.
    pub fn balanced(&self) -> bool {
        self.received
            == self.used + self.dropped_stale + self.dropped_shutdown + self.rejected + self.queued
    }

    /// Mirrors these counts in the live metrics (`crate::metrics`): the whole
    /// run's (`actor: None`) or one actor's.
    pub fn export(&self, actor: Option<&str>) {
        let c = self;
        let outcomes = [
            ("received", c.received),
            ("used", c.used),
            ("dropped_stale", c.dropped_stale),
            ("dropped_shutdown", c.dropped_shutdown),
            ("rejected", c.rejected),
        ];
        let Some(actor) = actor else {
            for (outcome, v) in outcomes {
                counter!("sebulba_learner_batches_total", "outcome" => outcome).absolute(v);
            }
            for (reason, &v) in &c.rejected_by_reason {
                counter!("sebulba_learner_batches_rejected_total", "reason" => reason.clone())
                    .absolute(v);
            }
            for (reason, &v) in &c.streams_broken_by_reason {
                counter!("sebulba_learner_streams_broken_total", "reason" => reason.clone())
                    .absolute(v);
            }
            counter!("sebulba_learner_env_restarts_total").absolute(c.env_restarts);
            gauge!("sebulba_learner_queue_depth").set(c.queued as f64);
            return;
        };
        for (outcome, v) in outcomes {
            counter!("sebulba_learner_actor_batches_total", "actor" => actor.to_string(), "outcome" => outcome)
                .absolute(v);
        }
    }
}

/// The counts a checkpoint keeps, so a resumed run's summary covers the
/// whole run, per actor too.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    pub total: BatchCounts,
    pub per_actor: BTreeMap<String, BatchCounts>,
}

#[derive(Clone, Copy, Debug)]
pub enum Outcome {
    /// Trained on: a batch of this many env steps.
    Used(u64),
    DroppedStale,
    DroppedShutdown,
}

#[derive(Default)]
pub struct Accounting {
    inner: Mutex<State>,
}

#[derive(Default)]
struct State {
    total: BatchCounts,
    per_actor: BTreeMap<String, BatchCounts>,
}

impl State {
    /// Applies `f` to the run's and `actor`'s counts, and mirrors both in the
    /// live metrics.
    fn both(&mut self, actor: &str, f: impl Fn(&mut BatchCounts)) {
        f(&mut self.total);
        let mine = self.per_actor.entry(actor.to_string()).or_default();
        f(mine);
        mine.export(Some(actor));
        self.total.export(None);
    }
}

impl Accounting {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        // A panic elsewhere while holding the lock must not stop the counting.
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// A batch arrived and was queued; `time` is the actor's account of the
    /// time since its previous batch.
    pub fn queued(&self, actor: &str, time: &ActorTime) {
        self.with(|s| {
            s.both(actor, |c| {
                c.received += 1;
                c.queued += 1;
                c.actor_time.add(time);
            })
        });
    }

    /// A batch arrived and was refused; returns how many of `actor`'s were.
    pub fn rejected(&self, actor: &str, reason: &str) -> u64 {
        self.with(|s| {
            s.both(actor, |c| {
                c.received += 1;
                c.rejected += 1;
                *c.rejected_by_reason.entry(reason.to_string()).or_default() += 1;
            });
            s.per_actor.get(actor).map_or(0, |c| c.rejected)
        })
    }

    /// A batch arrived after the run finished: received and dropped at once.
    pub fn arrived_after_finish(&self, actor: &str) {
        self.with(|s| {
            s.both(actor, |c| {
                c.received += 1;
                c.dropped_shutdown += 1;
            })
        });
    }

    /// A trajectory stream ended with an error, for `reason`.
    pub fn stream_broken(&self, actor: &str, reason: &str) {
        self.with(|s| {
            s.both(actor, |c| {
                c.streams_broken += 1;
                *c.streams_broken_by_reason
                    .entry(reason.to_string())
                    .or_default() += 1;
            })
        });
    }

    /// An actor reports env failures since its previous batch (counted
    /// whatever becomes of the batch that carries them).
    pub fn env_faults(&self, actor: &str, restarts: u64, non_finite: u64, discarded_steps: u64) {
        self.with(|s| {
            s.both(actor, |c| {
                c.env_restarts = c.env_restarts.saturating_add(restarts);
                c.env_non_finite = c.env_non_finite.saturating_add(non_finite);
                c.env_steps_discarded = c.env_steps_discarded.saturating_add(discarded_steps);
            })
        });
    }

    /// A queued batch left the pipeline.
    pub fn dequeued(&self, actor: &str, outcome: Outcome) {
        self.with(|s| {
            s.both(actor, |c| {
                c.queued = c.queued.saturating_sub(1);
                match outcome {
                    Outcome::Used(steps) => {
                        c.used += 1;
                        c.env_steps_used = c.env_steps_used.saturating_add(steps);
                    }
                    Outcome::DroppedStale => c.dropped_stale += 1,
                    Outcome::DroppedShutdown => c.dropped_shutdown += 1,
                }
            })
        });
    }

    pub fn snapshot(&self) -> (BatchCounts, BTreeMap<String, BatchCounts>) {
        self.with(|s| (s.total.clone(), s.per_actor.clone()))
    }

    /// The counts to keep in a checkpoint.
    pub fn saved(&self) -> Saved {
        let (total, per_actor) = self.snapshot();
        Saved { total, per_actor }
    }

    /// Goes on from a checkpoint's counts (a resumed run). Batches queued when
    /// it was written died with that learner: they count as dropped at shutdown.
    pub fn restore(&self, saved: &Saved) {
        let requeue = |c: &BatchCounts| {
            let mut c = c.clone();
            c.dropped_shutdown += std::mem::take(&mut c.queued);
            c
        };
        self.with(|s| {
            s.total = requeue(&saved.total);
            s.per_actor = saved
                .per_actor
                .iter()
                .map(|(k, c)| (k.clone(), requeue(c)))
                .collect();
            s.total.export(None);
            for (actor, c) in &s.per_actor {
                c.export(Some(actor));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_holds_through_every_transition() {
        let a = Accounting::default();
        a.queued("a", &ActorTime::default());
        a.queued("a", &ActorTime::default());
        a.queued("b", &ActorTime::default());
        a.rejected("b", "shape");
        a.arrived_after_finish("b");
        a.dequeued("a", Outcome::Used(256));
        a.dequeued("a", Outcome::DroppedStale);
        let (t, per) = a.snapshot();
        assert!(t.balanced(), "{t:?}");
        assert_eq!(
            (
                t.received,
                t.used,
                t.dropped_stale,
                t.rejected,
                t.queued,
                t.dropped_shutdown
            ),
            (5, 1, 1, 1, 1, 1)
        );
        assert_eq!(per["b"].rejected_by_reason["shape"], 1);
        assert_eq!((t.env_steps_used, per["a"].env_steps_used), (256, 256));
        assert_eq!(per["b"].env_steps_used, 0);
        assert!(per.values().all(BatchCounts::balanced));
        // A resumed run goes on from the saved counts; what was queued died.
        let resumed = Accounting::default();
        resumed.restore(&a.saved());
        let (r, per) = resumed.snapshot();
        assert_eq!((r.received, r.queued, r.dropped_shutdown), (5, 0, 2));
        assert!(r.balanced() && per.values().all(BatchCounts::balanced));
    }
}
