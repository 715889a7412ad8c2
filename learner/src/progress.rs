//! The learner's progress line, in every mode (a container's log included):
//! steps, SPS over the whole run, updates, version, policy lag and the newest
//! evaluation, every `every`. Between lines it reads new evaluation reports
//! every `EVALS_EVERY`, so a param-server that restarts forgets little the
//! summary would report.

use crate::publish::Publisher;
use crate::state::{LiveProgress, RunClock, Shared};
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
            "progress"
        );
    }
}
