//! `sebulba track RUN_DIR --track ...`: a run directory sent to experiment
//! trackers from outside the run (a cluster's runs volume, or a run whose
//! tracker was down): what is there, then what comes, until the run ends.

use crate::cli::TrackArgs;
use crate::cli::TrackFlag;
use sebulba_tracking::{Outcome, Tracking};
use std::path::Path;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;
use tracing::info;

pub fn run(args: &TrackArgs, shutdown: &CancellationToken) -> anyhow::Result<()> {
    let dir = &args.run_dir;
    anyhow::ensure!(
        !args.track.track.is_empty(),
        "--track: name a tracker (mlflow=http://HOST:5000, wandb[=PROJECT])"
    );
    anyhow::ensure!(
        dir.join("config.toml").is_file(),
        "{}: no config.toml: not a run directory",
        dir.display()
    );
    let tracking = sebulba_tracking::start(dir, &args.track.track, None)?;
    info!(run_dir = %dir.display(), "following the run until it ends");
    while !over(dir) {
        if shutdown.is_cancelled() {
            report(&tracking.leave());
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let outcomes = tracking.finish(Duration::from_secs(args.track.track_wait_secs));
    report(&outcomes);
    let left: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.finished)
        .map(|o| o.tracker.as_str())
        .collect();
    anyhow::ensure!(
        left.is_empty(),
        "{} did not take the whole run in {} s: run `sebulba track` again to send the rest",
        left.join(", "),
        args.track.track_wait_secs
    );
    Ok(())
}

/// The run has ended: its `summary.json` was written after its last
/// metrics (a resumed run's old summary is older than its new lines).
fn over(dir: &Path) -> bool {
    let modified = |f: &str| std::fs::metadata(dir.join(f)).and_then(|m| m.modified());
    match (modified("summary.json"), modified("metrics.jsonl")) {
        (Ok(summary), Ok(metrics)) => summary >= metrics,
        (Ok(_), Err(_)) => true,
        _ => false,
    }
}

/// Trackers for the run this process is about to open (`local`,
/// `learner`): they start reading once the learner has opened it.
pub fn start_for_run(dir: &Path, flag: &TrackFlag) -> anyhow::Result<Option<Tracking>> {
    if flag.track.is_empty() {
        return Ok(None);
    }
    // A second back: file times are coarser than the clock.
    let after = SystemTime::now() - Duration::from_secs(1);
    Ok(Some(sebulba_tracking::start(
        dir,
        &flag.track,
        Some(after),
    )?))
}

/// The run is over (`ended`: it wrote its summary): the trackers deliver
/// the rest and record its end, or stop where they are when it failed.
pub fn end_of_run(tracking: Option<Tracking>, flag: &TrackFlag, ended: bool) {
    let Some(t) = tracking else { return };
    let wait = Duration::from_secs(flag.track_wait_secs);
    let outcomes = tokio::task::block_in_place(|| if ended { t.finish(wait) } else { t.leave() });
    for o in outcomes {
        info!(tracker = %o.tracker, delivered = o.delivered, refused = o.refused, errors = o.errors, finished = o.finished, "tracker");
    }
}

fn report(outcomes: &[Outcome]) {
    for o in outcomes {
        println!(
            "{}: {} records delivered, {} refused, {} errors{}",
            o.tracker,
            o.delivered,
            o.refused,
            o.errors,
            if o.finished { ", run finished" } else { "" }
        );
    }
}
