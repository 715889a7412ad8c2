//! State shared between the ingest service and the update loop.

use crate::accounting::Accounting;
use crate::actors::Actors;
use sebulba_core::config::RunConfig;
use sebulba_envs::EnvSpec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Live progress, readable from outside (the CLI's progress line).
#[derive(Default, Debug)]
pub struct LiveProgress {
    pub env_steps: AtomicU64,
    pub updates: AtomicU64,
    /// f64 bits of the mean return of the episodes in the latest update (NaN if none yet).
    last_return_bits: AtomicU64,
    /// f64 bits of the latest update's mean policy lag (NaN before the first).
    lag_bits: AtomicU64,
}

impl LiveProgress {
    pub fn new() -> Self {
        let s = Self::default();
        s.set_last_return(f64::NAN);
        s.set_lag(f64::NAN);
        s
    }
    pub fn set_lag(&self, lag: f64) {
        self.lag_bits.store(lag.to_bits(), Ordering::Relaxed);
    }
    pub fn lag(&self) -> f64 {
        f64::from_bits(self.lag_bits.load(Ordering::Relaxed))
    }
    pub fn set_last_return(&self, r: f64) {
        self.last_return_bits.store(r.to_bits(), Ordering::Relaxed);
    }
    pub fn last_return(&self) -> f64 {
        f64::from_bits(self.last_return_bits.load(Ordering::Relaxed))
    }
}

pub struct Shared {
    pub config: RunConfig,
    /// The run's identity: in the spec actors join with, on every published
    /// version and in checkpoints, so runs never mix.
    pub run_id: String,
    pub env: EnvSpec,
    /// The newest published policy version (a resumed learner, before its
    /// first publish: the newest its predecessor published).
    pub version: AtomicU64,
    /// A resumed learner that has not published yet: a batch beyond
    /// `version` is its predecessor's lost work (refused as `restart`), not a
    /// client's error.
    pub restarting: AtomicBool,
    /// Set once the step budget is reached: no more batches are taken, and
    /// actors are told the run is over.
    pub finished: AtomicBool,
    /// Set when the learner stops before the budget (SIGTERM, a failure): no
    /// more batches are taken, but the run is not over; actors wait for the
    /// learner to come back.
    pub stopping: AtomicBool,
    /// Shared with the metrics endpoint, which renders its per-actor series.
    pub accounting: std::sync::Arc<Accounting>,
    /// The best and newest evaluations read from the param-server.
    pub evals: crate::evals::EvalBook,
    /// The last finished training episodes' returns.
    pub train_returns: crate::returns::TrainReturns,
    /// Fired when the learner's server is about to stop: every open
    /// trajectory stream ends then (UNAVAILABLE when the run is not over), so
    /// the server need not wait out its shutdown grace for actors that keep
    /// their streams open waiting for it.
    pub streams_end: tokio_util::sync::CancellationToken,
    /// The actors that joined, their streams and sequence numbers.
    pub actors: Actors,
    /// A deterministic run's lanes (`run.deterministic`).
    pub deterministic: Option<crate::deterministic::Deterministic>,
}

impl Shared {
    pub fn new(config: RunConfig, env: EnvSpec, run_id: String) -> Self {
        crate::metrics::describe();
        let accounting = std::sync::Arc::new(Accounting::default());
        sebulba_transport::metrics::render_also("learner_actor_batches", accounting.clone());
        let kept = config.learner.departed_actors_kept;
        Self {
            config,
            run_id,
            env,
            version: AtomicU64::new(0),
            restarting: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            accounting,
            evals: Default::default(),
            train_returns: Default::default(),
            streams_end: Default::default(),
            actors: Actors::new(kept),
            deterministic: None,
        }
    }

    /// The same, as a deterministic run (`run.deterministic`).
    pub fn with_deterministic(mut self, plan: Option<crate::deterministic::Deterministic>) -> Self {
        self.deterministic = plan;
        self
    }

    /// Registers a new actor; returns its id, its own seed and, in a
    /// deterministic run, its lane. The seed follows join order, or the lane
    /// in a deterministic run (join order is a matter of timing); a name
    /// that is not one of a deterministic run's actors is refused.
    pub fn register_actor(&self, name: &str) -> Result<(String, u64, Option<usize>), String> {
        let lane = match &self.deterministic {
            None => None,
            Some(l) => Some(l.lane_of(name).ok_or_else(|| {
                format!(
                    "run.deterministic: this run's actors are {:?}, not `{name}`",
                    l.names()
                )
            })?),
        };
        let (id, n) = self.actors.register(name, lane);
        let index = lane.map_or(n, |l| l as u64);
        Ok((id, participant_seed(self.config.run.seed, index), lane))
    }

    pub fn current_version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// A resumed learner goes on from `checkpoint`'s version and takes its
    /// predecessor's batches of the versions up to `held` (the newest of this
    /// run the parameter server has): the actors acted with those weights
    /// honestly, and their behaviour log-probabilities let the update weigh
    /// them like any late batch.
    pub fn resume_at(&self, checkpoint: u64, held: Option<u64>) {
        let accept = held.map_or(checkpoint, |h| h.max(checkpoint));
        self.version.store(accept, Ordering::Release);
        self.restarting.store(true, Ordering::Release);
    }

    /// Whether a resumed learner has yet to publish.
    pub fn is_restarting(&self) -> bool {
        self.restarting.load(Ordering::Acquire)
    }

    /// The step budget was reached: the run is over.
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// No more batches are taken: the run is over or the learner is stopping.
    pub fn is_closed(&self) -> bool {
        self.is_finished() || self.stopping.load(Ordering::Acquire)
    }
}

/// Distinct, reproducible seeds per participant (SplitMix64 of run seed and index).
pub fn participant_seed(run_seed: u64, index: u64) -> u64 {
    let mut z = run_seed.wrapping_add(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(index + 1));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A fresh run identity: the environment, the start time and a random tag
/// (`cartpole-v1-19a4f3c2b10-7f3a`), unique across restarts of a cluster.
pub fn new_run_id(env_id: &str) -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let tag: u16 = rand::random();
    let env: String = env_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(48)
        .collect();
    format!("{env}-{ms:x}-{tag:04x}")
}

/// Wall time of a run across its segments (a resumed learner goes on from the
/// checkpoint's time), so SPS and summaries cover the whole run.
#[derive(Clone, Copy, Debug)]
pub struct RunClock {
    started: std::time::Instant,
    prior_seconds: f64,
    /// This learner's segment of the run, from 1 (2 after one resume, ...).
    pub segment: u32,
}

impl RunClock {
    /// A clock for segment `segment` that starts at `prior_seconds`.
    pub fn new(prior_seconds: f64, segment: u32) -> Self {
        Self {
            started: std::time::Instant::now(),
            prior_seconds: if prior_seconds.is_finite() {
                prior_seconds.max(0.0)
            } else {
                0.0
            },
            segment,
        }
    }

    /// Seconds of the whole run so far.
    pub fn wall_seconds(&self) -> f64 {
        self.prior_seconds + self.started.elapsed().as_secs_f64()
    }
}
