//! Batch accounting: every batch received is, at any moment, exactly one of
//! queued, used, dropped (with a reason) or rejected (with a reason), overall,
//! per actor, and for the departed actors folded together. One mutex keeps
//! the identity exact at every snapshot.
//!
//! An actor's entry lives while it may still send; once [`crate::actors`]
//! forgets a departed actor (past `learner.departed_actors_kept`), its entry
//! folds into `departed` as soon as nothing of it is queued, so the table
//! stays bounded however many actors come and go.

use metrics::{counter, gauge};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
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

    /// The outcomes of the identity, by their metric label.
    pub fn outcomes(&self) -> [(&'static str, u64); 5] {
        [
            ("received", self.received),
            ("used", self.used),
            ("dropped_stale", self.dropped_stale),
            ("dropped_shutdown", self.dropped_shutdown),
            ("rejected", self.rejected),
        ]
    }

    /// Mirrors the whole run's counts in the live metrics (`crate::metrics`;
    /// the per-actor series are rendered from the table at each scrape,
    /// [`Accounting::render_per_actor`]).
    pub fn export(&self) {
        let c = self;
        for (outcome, v) in c.outcomes() {
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
    }

    /// Adds `other`'s counts to these (folding an actor's entry).
    fn absorb(&mut self, other: &BatchCounts) {
        let add_map = |into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>| {
            for (k, v) in from {
                *into.entry(k.clone()).or_default() += v;
            }
        };
        self.received += other.received;
        self.used += other.used;
        self.dropped_stale += other.dropped_stale;
        self.dropped_shutdown += other.dropped_shutdown;
        self.rejected += other.rejected;
        add_map(&mut self.rejected_by_reason, &other.rejected_by_reason);
        self.queued += other.queued;
        self.env_steps_used += other.env_steps_used;
        self.streams_broken += other.streams_broken;
        add_map(
            &mut self.streams_broken_by_reason,
            &other.streams_broken_by_reason,
        );
        self.env_restarts += other.env_restarts;
        self.env_non_finite += other.env_non_finite;
        self.env_steps_discarded += other.env_steps_discarded;
        self.actor_time.add(&other.actor_time);
    }
}

/// The departed actors folded into one entry (`summary.json`'s
/// `batches_departed` and `actors_folded`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Departed {
    /// Actors whose entries were folded.
    pub actors: u64,
    pub batches: BatchCounts,
}

/// The accounting at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub total: BatchCounts,
    pub per_actor: BTreeMap<String, BatchCounts>,
    pub departed: Departed,
}

impl Snapshot {
    /// The identity, overall, per actor and for the folded actors; and
    /// the parts adding up to the whole.
    pub fn balanced(&self) -> bool {
        let mut sum = self.departed.batches.clone();
        for c in self.per_actor.values() {
            sum.absorb(c);
        }
        self.total.balanced()
            && self.departed.batches.balanced()
            && self.per_actor.values().all(BatchCounts::balanced)
            && sum.outcomes() == self.total.outcomes()
            && sum.queued == self.total.queued
    }
}

/// The counts a checkpoint keeps, so a resumed run's summary covers the
/// whole run, per actor too.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    pub total: BatchCounts,
    pub per_actor: BTreeMap<String, BatchCounts>,
    #[serde(default)]
    pub departed: Departed,
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
    departed: Departed,
    /// Forgotten actors whose entries fold once their queued batches leave.
    folding: BTreeSet<String>,
}

impl State {
    /// Applies `f` to the run's and `actor`'s counts, and mirrors the run's
    /// in the live metrics.
    fn both(&mut self, actor: &str, f: impl Fn(&mut BatchCounts)) {
        f(&mut self.total);
        let mine = self.per_actor.entry(actor.to_string()).or_default();
        f(mine);
        self.total.export();
    }

    /// Folds `actor`'s entry into `departed` if nothing of it is queued;
    /// otherwise it folds when its last queued batch leaves.
    fn fold(&mut self, actor: &str) {
        match self.per_actor.get(actor) {
            Some(c) if c.queued > 0 => {
                self.folding.insert(actor.to_string());
            }
            Some(_) => {
                self.folding.remove(actor);
                if let Some(c) = self.per_actor.remove(actor) {
                    self.departed.batches.absorb(&c);
                    self.departed.actors += 1;
                }
            }
            None => {
                self.folding.remove(actor);
            }
        }
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
            let fold = s.folding.contains(actor);
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
            });
            if fold {
                s.fold(actor);
            }
        });
    }

    /// The actors [`crate::actors::Actors`] forgot: their entries fold into
    /// `departed` (each once nothing of it is queued).
    pub fn fold(&self, actors: &[String]) {
        if actors.is_empty() {
            return;
        }
        self.with(|s| {
            for a in actors {
                s.fold(a);
            }
        });
    }

    pub fn snapshot(&self) -> Snapshot {
        self.with(|s| Snapshot {
            total: s.total.clone(),
            per_actor: s.per_actor.clone(),
            departed: s.departed.clone(),
        })
    }

    /// The whole run's counts.
    pub fn total(&self) -> BatchCounts {
        self.with(|s| s.total.clone())
    }

    /// The counts to keep in a checkpoint.
    pub fn saved(&self) -> Saved {
        let Snapshot {
            total,
            per_actor,
            departed,
        } = self.snapshot();
        Saved {
            total,
            per_actor,
            departed,
        }
    }

    /// Goes on from a checkpoint's counts (a resumed run). Batches queued when
    /// it was written died with that learner: they count as dropped at
    /// shutdown. Its actors are gone (they join this learner afresh): past
    /// the `kept` last in id order, their entries fold at once.
    pub fn restore(&self, saved: &Saved, kept: usize) {
        let requeue = |c: &BatchCounts| {
            let mut c = c.clone();
            c.dropped_shutdown += std::mem::take(&mut c.queued);
            c
        };
        self.with(|s| {
            s.total = requeue(&saved.total);
            s.departed = saved.departed.clone();
            s.departed.batches = requeue(&saved.departed.batches);
            s.per_actor = saved
                .per_actor
                .iter()
                .map(|(k, c)| (k.clone(), requeue(c)))
                .collect();
            let surplus = s.per_actor.len().saturating_sub(kept);
            let gone: Vec<String> = s.per_actor.keys().take(surplus).cloned().collect();
            for a in &gone {
                s.fold(a);
            }
            s.total.export();
        });
    }

    /// The per-actor series (`sebulba_learner_actor_batches_total`) in
    /// Prometheus's text format: one per outcome for each actor in the table
    /// and for `departed`, so a forgotten actor's series go with its entry.
    pub fn render_per_actor(&self, out: &mut String) {
        use std::fmt::Write;
        let name = "sebulba_learner_actor_batches_total";
        let snap = self.snapshot();
        let _ = writeln!(
            out,
            "# HELP {name} Trajectory batches per actor, by outcome (actors forgotten past learner.departed_actors_kept under actor=\"departed\")"
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        let departed = std::iter::once(("departed", &snap.departed.batches));
        let rows = snap
            .per_actor
            .iter()
            .map(|(a, c)| (a.as_str(), c))
            .chain(departed);
        for (actor, c) in rows {
            let actor = sebulba_transport::metrics::label_value(actor);
            for (outcome, v) in c.outcomes() {
                let _ = writeln!(out, "{name}{{actor=\"{actor}\",outcome=\"{outcome}\"}} {v}");
            }
        }
    }
}

impl sebulba_transport::metrics::Rendered for Accounting {
    fn render(&self, out: &mut String) {
        self.render_per_actor(out);
    }
}

#[cfg(test)]
mod tests;
