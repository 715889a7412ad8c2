//! Progress while training: a live line on a terminal, plain log lines otherwise.

use indicatif::{ProgressBar, ProgressStyle};
use sebulba_learner::LiveStats;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::info;

pub fn spawn(
    live: Arc<LiveStats>,
    total_steps: u64,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let started = Instant::now();
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total_steps);
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {human_pos}/{human_len} steps  {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar
        });
        let period = if bar.is_some() {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(10)
        };
        loop {
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = stop.cancelled() => break,
            }
            let steps = live.env_steps.load(Ordering::Relaxed);
            let sps = steps as f64 / started.elapsed().as_secs_f64().max(1e-9);
            let ret = live.last_return();
            let msg = format!(
                "{sps:.0} SPS  return {}",
                if ret.is_nan() {
                    "-".into()
                } else {
                    format!("{ret:.1}")
                }
            );
            match &bar {
                Some(b) => {
                    b.set_position(steps.min(total_steps));
                    b.set_message(msg);
                }
                None => info!(
                    steps,
                    updates = live.updates.load(Ordering::Relaxed),
                    "{msg}"
                ),
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
    })
}
