//! The learner's progress line, in every mode (a container's log included):
//! steps, SPS over the whole run, updates, version, policy lag, the newest
//! evaluation and each actor's share of the SPS, every `every`. Between lines it reads new evaluation reports
//! every `EVALS_EVERY`, so a param-server that restarts forgets little the
//! summary would report.

use crate::accounting::BatchCounts;
use crate::publish::Publisher;
use crate::state::{LiveProgress, RunClock, Shared};
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
}

impl ProgressTask {
    /// Logs a line every `every` until `stop` fires.
    pub async fn log_every(self, every: Duration, stop: CancellationToken) {
        let mut last_line = tokio::time::Instant::now();
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
                self.log_line();
            }
        }
    }

    fn log_line(&self) {
        let steps = self.live.env_steps.load(Ordering::Relaxed);
        let total = self.shared.config.run.total_steps;
        let latest = self.shared.evals.scores().latest;
        let fmt = |x: f64| {
            if x.is_finite() {
                format!("{x:.1}")
            } else {
                "-".into()
            }
        };
        info!(
            env_steps = steps,
            percent = format!("{:.1}", 100.0 * steps as f64 / total.max(1) as f64),
            sps = format!("{:.0}", steps as f64 / self.clock.wall_seconds().max(1e-9)),
            updates = self.live.updates.load(Ordering::Relaxed),
            version = self.shared.current_version(),
            lag = fmt(self.live.lag()),
            train_return = fmt(self.live.last_return()),
            eval_return = latest.as_ref().map_or("-".into(), |r| fmt(r.return_mean)),
            eval_version = latest.map(|r| r.version),
            per_actor = per_actor_sps(
                &self.shared.accounting.snapshot().1,
                self.clock.wall_seconds()
            ),
            "progress"
        );
    }
}

/// Env steps/s trained on per actor name (an actor's reconnections and a
/// restarted process's ids under one name), `name=sps` by name; with more
/// than [`SHOWN_ACTORS`] names, their count and the slowest and fastest.
fn per_actor_sps(per_id: &BTreeMap<String, BatchCounts>, wall_seconds: f64) -> String {
    let mut per_name: BTreeMap<&str, u64> = BTreeMap::new();
    for (id, c) in per_id {
        let name = id.split_once('#').map_or(id.as_str(), |(n, _)| n);
        *per_name.entry(name).or_default() += c.env_steps_used;
    }
    let sps = |steps: u64| steps as f64 / wall_seconds.max(1e-9);
    if per_name.len() > SHOWN_ACTORS {
        let rates: Vec<f64> = per_name.values().map(|&s| sps(s)).collect();
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let max = rates.iter().copied().fold(0.0, f64::max);
        return format!("{} actors, {min:.0} to {max:.0}", rates.len());
    }
    let shown: Vec<String> = per_name
        .iter()
        .map(|(name, &steps)| format!("{name}={:.0}", sps(steps)))
        .collect();
    shown.join(" ")
}

/// Actors named one by one on the progress line.
const SHOWN_ACTORS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_actor_rates_sum_an_actors_ids_and_summarise_many() {
        let counts = |steps| BatchCounts {
            env_steps_used: steps,
            ..Default::default()
        };
        let per: BTreeMap<String, BatchCounts> = [
            ("local-0#0.aa".to_string(), counts(300)),
            ("local-0#2.cc".to_string(), counts(100)),
            ("local-1#1.bb".to_string(), counts(200)),
        ]
        .into();
        assert_eq!(per_actor_sps(&per, 2.0), "local-0=200 local-1=100");
        let many: BTreeMap<String, BatchCounts> = (0..10)
            .map(|i| (format!("a{i}#{i}"), counts(100 * (i + 1))))
            .collect();
        assert_eq!(per_actor_sps(&many, 1.0), "10 actors, 100 to 1000");
    }
}
