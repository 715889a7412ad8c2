//! Progress while training in local mode: a live line on a terminal. (The
//! learner itself logs a progress line every 10 s in every mode.)

use indicatif::{ProgressBar, ProgressStyle};
use sebulba_learner::LiveProgress;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub fn spawn(
    live: Arc<LiveProgress>,
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
        let Some(bar) = bar else { return };
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
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
            bar.set_position(steps.min(total_steps));
            bar.set_message(msg);
        }
        bar.finish_and_clear();
    })
}
