//! The parameter server's state: the versions and evaluation reports of the
//! one run it holds, and the checks a publish or a report must pass.

use dashmap::DashMap;
use sebulba_proto::{EvalReport, Weights};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use tokio::sync::watch;
use tonic::Status;
use tracing::info;

/// Versions kept for `Latest` lookups beyond the newest (older ones are evicted).
pub(crate) const KEEP_VERSIONS: u64 = 4;

/// The most past versions a run's self-play pool holds, whatever its
/// `past_keep` asks, and the most bytes they may take together.
pub const MAX_PAST_VERSIONS: usize = 32;
pub const MAX_PAST_BYTES: usize = 1 << 30;

/// How far past the newest version of its run a publish may jump. The learner
/// publishes consecutive versions; a jump beyond this is a stray or hostile
/// client, which must not push the run's versions out of its learner's reach.
pub const MAX_VERSION_JUMP: u64 = 1_000;

/// Evaluation reports held per run: the newest this many versions (a learner
/// reads them as they come, so it never needs old ones; and a client flooding
/// reports cannot grow the server without bound).
pub const MAX_EVAL_REPORTS: usize = 10_000;

/// Reports in one `ListEvals` answer: well inside the message limit.
pub const MAX_LISTED_REPORTS: usize = 2_000;

/// The largest version accepted: far from `u64::MAX`, so no follower's
/// arithmetic on it can overflow.
pub const MAX_VERSION: u64 = 1 << 53;

/// Published weights must be a safetensors file with at least one tensor and
/// only finite f32 values: what followers load is never garbage or NaN.
fn check_weights(bytes: &[u8]) -> Result<(), Status> {
    let bad = |why: String| Status::invalid_argument(format!("field `safetensors`: {why}"));
    let file = safetensors::SafeTensors::deserialize(bytes).map_err(|e| bad(e.to_string()))?;
    if file.is_empty() {
        return Err(bad("no tensors".into()));
    }
    for (name, view) in file.iter() {
        if view.dtype() != safetensors::Dtype::F32 {
            return Err(bad(format!(
                "tensor `{name}` is {:?}, not F32",
                view.dtype()
            )));
        }
        let finite = view
            .data()
            .chunks_exact(4)
            .all(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite());
        if !finite {
            return Err(bad(format!("tensor `{name}` has a non-finite value")));
        }
    }
    Ok(())
}

/// A game report's matches: few, named briefly, counts and rates that
/// hold together.
fn check_matches(matches: &[sebulba_proto::GameMatch]) -> Result<(), String> {
    if matches.len() > 8 {
        return Err(format!(
            "field `matches`: {} entries, at most 8",
            matches.len()
        ));
    }
    for (i, m) in matches.iter().enumerate() {
        let rate = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
        let bad = if m.opponent.len() > 64 {
            "`opponent` is over 64 bytes"
        } else if m.wins > m.games {
            "`wins` is more than `games`"
        } else if !rate(m.win_rate_low)
            || !rate(m.win_rate_high)
            || m.win_rate_low > m.win_rate_high
        {
            "`win_rate_low`/`win_rate_high` must be an interval within [0, 1]"
        } else if !m.mean_score.is_finite() {
            "`mean_score` must be finite"
        } else {
            continue;
        };
        return Err(format!("field `matches[{i}]`: {bad}"));
    }
    Ok(())
}

/// A report's episode counts, cut and CPU time: counts that hold together,
/// a known reason, a finite time.
fn check_episodes(r: &EvalReport) -> Result<(), String> {
    let bad = if r.episodes_asked > 0 && r.episodes > r.episodes_asked {
        "field `episodes`: more than `episodes_asked`"
    } else if r.episodes_truncated > r.episodes {
        "field `episodes_truncated`: more than `episodes`"
    } else if !matches!(r.cut_by.as_str(), "" | "max_steps" | "shutdown") {
        "field `cut_by`: expected \"\", \"max_steps\" or \"shutdown\""
    } else if !r.cut_by.is_empty() && r.episodes >= r.episodes_asked {
        "field `cut_by`: set, but no episode of `episodes_asked` was cut"
    } else if !(r.cpu_seconds.is_finite() && r.cpu_seconds >= 0.0) {
        "field `cpu_seconds`: must be finite and not negative"
    } else {
        return Ok(());
    };
    Err(bad.into())
}

/// The weights and evaluation reports of one run: the one being trained.
pub struct Store {
    /// The run the versions and reports belong to ("" before the first publish).
    /// Held while a publish decides, so a run switch and a publish never interleave.
    run_id: std::sync::Mutex<String>,
    pub(crate) versions: DashMap<u64, Arc<Weights>>,
    latest: watch::Sender<Option<Arc<Weights>>>,
    /// Reports by version: the newest `MAX_EVAL_REPORTS` are kept.
    evals: std::sync::Mutex<BTreeMap<u64, EvalReport>>,
    /// Past versions kept for self-play (`Weights.past_keep`), by version.
    pool: std::sync::Mutex<BTreeMap<u64, Arc<Weights>>>,
}

impl Default for Store {
    fn default() -> Self {
        Self {
            run_id: std::sync::Mutex::new(String::new()),
            versions: DashMap::new(),
            latest: watch::channel(None).0,
            evals: Default::default(),
            pool: Default::default(),
        }
    }
}

impl Store {
    fn current_run(&self) -> std::sync::MutexGuard<'_, String> {
        self.run_id.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn reports_held(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, EvalReport>> {
        self.evals.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pool_held(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Weights>>> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `w` to the self-play pool when its version is on the stride,
    /// then trims the pool to the newest `past_keep` (at most
    /// [`MAX_PAST_VERSIONS`], [`MAX_PAST_BYTES`]); `past_keep = 0` empties it.
    fn keep_past(&self, w: &Arc<Weights>) {
        let mut pool = self.pool_held();
        let keep = (w.past_keep as usize).min(MAX_PAST_VERSIONS);
        if keep > 0 && w.past_stride > 0 && w.version.is_multiple_of(w.past_stride) {
            pool.insert(w.version, w.clone());
        }
        let bytes = |p: &BTreeMap<u64, Arc<Weights>>| {
            p.values().map(|w| w.safetensors.len()).sum::<usize>()
        };
        while pool.len() > keep || bytes(&pool) > MAX_PAST_BYTES {
            pool.pop_first();
        }
    }

    /// The versions in `run_id`'s self-play pool, oldest first (none if
    /// another run is held).
    pub fn past_versions(&self, run_id: &str) -> Vec<u64> {
        let run = self.current_run();
        if run_id != *run {
            return Vec::new();
        }
        self.pool_held().keys().copied().collect()
    }

    /// Version `v` of `run_id`, if held: in the pool or among the newest.
    pub fn version(&self, run_id: &str, v: u64) -> Result<Arc<Weights>, Status> {
        let run = self.current_run();
        if run_id != *run {
            return Err(Status::failed_precondition(format!(
                "field `run_id`: `{run_id}` is not the run this server holds (`{}`)",
                *run
            )));
        }
        if let Some(w) = self.pool_held().get(&v) {
            return Ok(w.clone());
        }
        self.versions
            .get(&v)
            .map(|w| w.clone())
            .ok_or_else(|| Status::not_found(format!("field `version`: {v} is not held")))
    }

    /// Stores `w`: a version newer than (and not far past) its run's newest, or
    /// the first version of another run, which replaces the run held (its
    /// versions and reports). Returns the stored version.
    pub fn publish(&self, w: Weights) -> Result<u64, Status> {
        check_weights(&w.safetensors)?;
        // Every follower and the evaluator read it as a trace's parent.
        sebulba_transport::trace::check_context_map(&w.trace_context)
            .map_err(|e| Status::invalid_argument(format!("field `trace_context`: {e}")))?;
        // A run id names a directory under a runs root: keep it safe as one.
        let safe = w
            .run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if w.run_id.is_empty() || w.run_id.len() > 128 || !safe || w.run_id.starts_with('.') {
            return Err(Status::invalid_argument(
                "field `run_id`: must name the run (1 to 128 letters, digits, `.`, `_` or `-`, not starting with `.`)",
            ));
        }
        if w.version > MAX_VERSION {
            return Err(Status::invalid_argument(format!(
                "field `version`: {} is beyond the largest version, 2^53",
                w.version
            )));
        }
        if let Some(e) = w.epsilon
            && !(0.0..=1.0).contains(&e)
        {
            return Err(Status::invalid_argument(format!(
                "field `epsilon`: {e} is not an exploration rate in [0, 1]"
            )));
        }
        let mut run = self.current_run();
        if *run != w.run_id {
            if !run.is_empty() {
                info!(old = %*run, new = %w.run_id, "a new run publishes: the old run's versions and reports are dropped");
            }
            self.versions.clear();
            self.reports_held().clear();
            self.pool_held().clear();
            self.latest.send_replace(None);
            *run = w.run_id.clone();
        }
        if let Some(c) = self.latest.borrow().as_ref() {
            if c.version >= w.version {
                return Err(Status::failed_precondition(format!(
                    "field `version`: {} is not newer than the stored {} of run `{}`",
                    w.version, c.version, w.run_id
                )));
            }
            if w.version - c.version > MAX_VERSION_JUMP {
                return Err(Status::failed_precondition(format!(
                    "field `version`: {} is more than {MAX_VERSION_JUMP} past the stored {} of run `{}`",
                    w.version, c.version, w.run_id
                )));
            }
        }
        let (v, w) = (w.version, Arc::new(w));
        self.latest.send_replace(Some(w.clone()));
        self.keep_past(&w);
        self.versions.insert(v, w);
        self.versions.retain(|&k, _| k + KEEP_VERSIONS >= v);
        Ok(v)
    }

    pub fn latest(&self) -> Option<Arc<Weights>> {
        self.latest.borrow().clone()
    }

    /// The newest weights now and each newer one as it is published.
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<Weights>>> {
        self.latest.subscribe()
    }

    /// Open subscriptions (Watch streams).
    pub fn watchers(&self) -> usize {
        self.latest.receiver_count()
    }

    /// Files an evaluation report of the run held (its game matches checked).
    pub fn report(&self, r: EvalReport) -> Result<(), Status> {
        check_matches(&r.matches).map_err(Status::invalid_argument)?;
        check_episodes(&r).map_err(Status::invalid_argument)?;
        let run = self.current_run();
        if r.run_id != *run {
            return Err(Status::failed_precondition(format!(
                "field `run_id`: `{}` is not the run this server holds (`{}`)",
                r.run_id, *run
            )));
        }
        let mut held = self.reports_held();
        held.insert(r.version, r);
        while held.len() > MAX_EVAL_REPORTS {
            held.pop_first();
        }
        Ok(())
    }

    /// The reports of `run_id` of versions above `after` (all, for `None`), in
    /// version order, `MAX_LISTED_REPORTS` at most (the lowest versions: ask
    /// again after the last one for more); none if another run is held.
    pub fn reports(&self, run_id: &str, after: Option<u64>) -> Vec<EvalReport> {
        let run = self.current_run();
        if run_id != *run {
            return Vec::new();
        }
        let from = match after {
            None => Bound::Unbounded,
            Some(v) => Bound::Excluded(v),
        };
        self.reports_held()
            .range((from, Bound::Unbounded))
            .take(MAX_LISTED_REPORTS)
            .map(|(_, r)| r.clone())
            .collect()
    }
}
