//! The learner's progress line, in every mode (a container's log included):
//! steps, SPS over the whole run, updates, version, policy lag, the newest
//! evaluation, evaluation's share of the run's CPU time so far and each
//! actor's env steps/s since the last line, every
//! `every`. Between lines it reads new evaluation reports every `EVALS_EVERY`,
//! so a param-server that restarts forgets little the summary would report.

use crate::accounting::BatchCounts;
use crate::publish::Publisher;
use crate::state::{LiveProgress, RunClock, Shared};
use crate::summary::EvalCpu;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// How often new evaluation reports are read.
const EVALS_EVERY: Duration = Duration::from_secs(2);

/// What the progress task reads.
pub struct ProgressTask {
    pub shared: Arc<Shared>,
    pub live: Arc<LiveProgress>,
    pub publisher: Publisher,
    pub clock: RunClock,
    /// For evaluation's share of the run's CPU time ([`EvalCpu::measure`]).
    pub evaluator_in_process: bool,
}

impl ProgressTask {
    /// Logs a line every `every` until `stop` fires.
    pub async fn log_every(self, every: Duration, stop: CancellationToken) {
        let mut last_line = tokio::time::Instant::now();
        let mut since = (self.per_name_steps(), self.clock.wall_seconds());
        loop {
            tokio::select! {
                () = tokio::time::sleep(EVALS_EVERY.min(every)) => {}
                () = stop.cancelled() => return,
            }
            let read = self
                .shared
                .evals
                .read_new(&self.publisher, &self.shared.run_id);
            let _ = tokio::time::timeout(Duration::from_secs(2), read).await;
            if last_line.elapsed() >= every {
                last_line = tokio::time::Instant::now();
                since = self.log_line(&since);
            }
        }
    }

    /// Env steps trained on per actor name so far.
    fn per_name_steps(&self) -> BTreeMap<String, u64> {
        per_name_steps(&self.shared.accounting.snapshot().per_actor)
    }

    /// Logs one line; returns what the next line's per-actor rates start from.
    fn log_line(&self, since: &(BTreeMap<String, u64>, f64)) -> (BTreeMap<String, u64>, f64) {
        let now = (self.per_name_steps(), self.clock.wall_seconds());
        let steps = self.live.env_steps.load(Ordering::Relaxed);
        let budget = self.shared.config.budget_used(steps, now.1);
        let scores = self.shared.evals.scores();
        let cpu = EvalCpu::measure(scores.cpu_seconds, self.evaluator_in_process);
        let latest = scores.latest;
        let fmt = |x: f64| {
            if x.is_finite() {
                format!("{x:.1}")
            } else {
                "-".into()
            }
        };
        info!(
            env_steps = steps,
            percent = format!("{:.1}", 100.0 * budget.min(1.0)),
            sps = format!("{:.0}", steps as f64 / self.clock.wall_seconds().max(1e-9)),
            updates = self.live.updates.load(Ordering::Relaxed),
            version = self.shared.current_version(),
            lag = fmt(self.live.lag()),
            train_return = fmt(self.live.last_return()),
            eval_return = latest.as_ref().map_or("-".into(), |r| fmt(r.return_mean)),
            eval_version = latest.map(|r| r.version),
            eval_cpu_share = cpu.share.map_or("-".into(), |s| format!("{s:.3}")),
            per_actor = per_actor_sps(&since.0, &now.0, now.1 - since.1),
            "progress"
        );
        now
    }
}

/// Env steps trained on per actor name (an actor's reconnections and a
/// restarted process's ids under one name).
fn per_name_steps(per_id: &BTreeMap<String, BatchCounts>) -> BTreeMap<String, u64> {
    let mut per_name: BTreeMap<String, u64> = BTreeMap::new();
    for (id, c) in per_id {
        let name = id.split_once('#').map_or(id.as_str(), |(n, _)| n);
        *per_name.entry(name.to_string()).or_default() += c.env_steps_used;
    }
    per_name
}

/// Env steps/s trained on per actor name over the `seconds` between `before`
/// and `now`, `name=sps` by name, of the names that trained in it (an actor
/// gone before the interval is not shown); with more than [`SHOWN_ACTORS`]
/// names, their count and the slowest and fastest.
fn per_actor_sps(
    before: &BTreeMap<String, u64>,
    now: &BTreeMap<String, u64>,
    seconds: f64,
) -> String {
    let rates: Vec<(&str, f64)> = now
        .iter()
        .map(|(name, &steps)| {
            let new = steps.saturating_sub(before.get(name).copied().unwrap_or(0));
            (name.as_str(), new)
        })
        .filter(|&(_, new)| new > 0)
        .map(|(name, new)| (name, new as f64 / seconds.max(1e-9)))
        .collect();
    if rates.len() > SHOWN_ACTORS {
        let min = rates.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
        let max = rates.iter().map(|r| r.1).fold(0.0, f64::max);
        return format!("{} actors, {min:.0} to {max:.0}", rates.len());
    }
    let shown: Vec<String> = rates
        .iter()
        .map(|(name, sps)| format!("{name}={sps:.0}"))
        .collect();
    shown.join(" ")
}

/// Actors named one by one on the progress line.
const SHOWN_ACTORS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_actor_rates_sum_an_actors_ids_over_the_interval_and_summarise_many() {
        let counts = |steps| BatchCounts {
            env_steps_used: steps,
            ..Default::default()
        };
        let per: BTreeMap<String, BatchCounts> = [
            ("local-0#0.aa".to_string(), counts(300)),
            ("local-0#2.cc".to_string(), counts(100)),
            ("local-1#1.bb".to_string(), counts(200)),
            ("gone#3.dd".to_string(), counts(500)),
        ]
        .into();
        let now = per_name_steps(&per);
        assert_eq!(now["local-0"], 400);
        let before: BTreeMap<String, u64> =
            [("local-0".to_string(), 200), ("gone".to_string(), 500)].into();
        // local-0: 200 new steps in 2 s; local-1 new: 200; gone: none, not shown.
        assert_eq!(per_actor_sps(&before, &now, 2.0), "local-0=100 local-1=100");
        let many: BTreeMap<String, u64> =
            (0..10).map(|i| (format!("a{i}"), 100 * (i + 1))).collect();
        assert_eq!(
            per_actor_sps(&BTreeMap::new(), &many, 1.0),
            "10 actors, 100 to 1000"
        );
        assert_eq!(per_actor_sps(&many, &many, 1.0), "");
    }
}
