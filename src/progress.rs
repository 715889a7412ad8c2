//! Progress while training in local mode: a live line on a terminal. (The
//! learner itself logs a progress line every 10 s in every mode.) The bar
//! fills as the budget is spent, the step budget or the time limit,
//! whichever is further along, as the learner's own line counts it.

use indicatif::{HumanCount, ProgressBar, ProgressStyle};
use sebulba_core::config::RunConfig;
use sebulba_learner::LiveProgress;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub fn spawn(
    live: Arc<LiveProgress>,
    config: RunConfig,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let started = Instant::now();
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(BAR_LENGTH);
            bar.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {percent:>3}%  {msg}")
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
            let seconds = started.elapsed().as_secs_f64();
            let sps = steps as f64 / seconds.max(1e-9);
            let ret = live.last_return();
            let msg = format!(
                "{} steps  {sps:.0} SPS  return {}",
                HumanCount(steps),
                if ret.is_nan() {
                    "-".into()
                } else {
                    format!("{ret:.1}")
                }
            );
            bar.set_position(bar_position(config.budget_used(steps, seconds)));
            bar.set_message(msg);
        }
        bar.finish_and_clear();
    })
}

/// The bar's length: it counts the budget spent in thousandths.
const BAR_LENGTH: u64 = 1000;

/// Where the bar stands with `used` of the budget spent (full from 1 on).
fn bar_position(used: f64) -> u64 {
    (used.clamp(0.0, 1.0) * BAR_LENGTH as f64).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time-limited run whose clock binds fills the bar by the clock, not
    /// by its far-off step budget.
    #[test]
    fn the_bar_follows_whichever_budget_is_further_spent() {
        let mut c = RunConfig::preset("CartPole-v1").expect("preset");
        c.run.total_steps = 100_000_000;
        c.run.time_limit_secs = 1800;
        assert_eq!(bar_position(c.budget_used(20_000_000, 900.0)), 500);
        assert_eq!(bar_position(c.budget_used(60_000_000, 900.0)), 600);
        assert_eq!(bar_position(c.budget_used(20_000_000, 2000.0)), BAR_LENGTH);
        c.run.time_limit_secs = 0;
        assert_eq!(bar_position(c.budget_used(20_000_000, 2000.0)), 200);
        assert_eq!(bar_position(f64::NAN), 0);
    }
}
