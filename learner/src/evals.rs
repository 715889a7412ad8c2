//! The evaluations a run's summary reports: the best and the newest. The
//! parameter server holds reports in memory only, so a restarted param-server
//! has forgotten the run's earlier ones; the learner keeps the best and newest
//! it has read (with each progress line, and at the end) and saves them in its
//! checkpoint, so the summary covers the whole run across restarts of either.

use crate::publish::Publisher;
use metrics::gauge;
use sebulba_proto::EvalReport;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// One evaluation: the version scored and its mean deterministic return.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Score {
    pub version: u64,
    pub return_mean: f64,
    /// A game's evaluation matches (empty for other envs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<MatchScore>,
    /// Episodes finished, of those asked (an evaluator before these fields
    /// reports 0 asked: all finished), and why the rest were cut (`""`:
    /// none was).
    #[serde(default)]
    pub episodes: u32,
    #[serde(default)]
    pub episodes_asked: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cut_by: String,
}

impl Score {
    /// The score of a report.
    pub fn of(r: &EvalReport) -> Self {
        Self {
            version: r.version,
            return_mean: r.return_mean,
            matches: r.matches.iter().map(MatchScore::from).collect(),
            episodes: r.episodes,
            episodes_asked: r.episodes_asked,
            cut_by: r.cut_by.clone(),
        }
    }

    /// At least one episode finished: the return is a whole episode's (one
    /// scored over cut episodes alone is no candidate for the best).
    fn finished_any(&self) -> bool {
        self.episodes > 0 || self.episodes_asked == 0
    }
}

/// One evaluation match of a game, as `summary.json` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatchScore {
    pub opponent: String,
    pub games: u32,
    pub wins: u32,
    pub win_rate: f64,
    /// 95% Wilson interval of the win rate.
    pub win_rate_low: f64,
    pub win_rate_high: f64,
    pub mean_score: f64,
}

impl From<&sebulba_proto::GameMatch> for MatchScore {
    fn from(m: &sebulba_proto::GameMatch) -> Self {
        Self {
            opponent: m.opponent.clone(),
            games: m.games,
            wins: m.wins,
            win_rate: f64::from(m.wins) / f64::from(m.games.max(1)),
            win_rate_low: m.win_rate_low,
            win_rate_high: m.win_rate_high,
            mean_score: m.mean_score,
        }
    }
}

/// The best (highest mean return; the earlier version on a tie) and the
/// newest (highest version) evaluation seen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    pub best: Option<Score>,
    pub latest: Option<Score>,
    /// CPU seconds of the evaluations read, summed.
    #[serde(default)]
    pub cpu_seconds: f64,
}

impl Scores {
    /// Takes `s` into account; a non-finite score is ignored (the
    /// param-server refuses them, this is a second line).
    pub fn record(&mut self, s: Score) {
        if !s.return_mean.is_finite() {
            return;
        }
        let better = |old: &Score| {
            s.return_mean > old.return_mean
                || (s.return_mean == old.return_mean && s.version < old.version)
        };
        let newest = self
            .latest
            .as_ref()
            .is_none_or(|old| s.version >= old.version);
        if s.finished_any() && self.best.as_ref().is_none_or(better) {
            self.best = Some(s.clone());
        }
        if newest {
            self.latest = Some(s);
        }
    }

    /// The evaluation of `version`, when it is the newest seen.
    pub fn of_version(&self, version: u64) -> Option<Score> {
        self.latest.clone().filter(|s| s.version == version)
    }

    /// Mirrors the latest and best evaluation in the live metrics.
    pub fn export(&self) {
        let s = self;
        for (which, score) in [("latest", &s.latest), ("best", &s.best)] {
            if let Some(score) = score {
                gauge!("sebulba_learner_eval_return_mean", "which" => which).set(score.return_mean);
                gauge!("sebulba_learner_eval_version", "which" => which).set(score.version as f64);
            }
        }
    }
}

/// [`Scores`] shared between the progress task and the end of the run.
#[derive(Debug, Default)]
pub struct EvalBook(Mutex<Scores>);

impl EvalBook {
    /// Records every report of `reports` (the caller has asked for this run's).
    pub fn record(&self, reports: &[EvalReport]) {
        let mut scores = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for r in reports {
            if r.cpu_seconds.is_finite() && r.cpu_seconds > 0.0 {
                scores.cpu_seconds += r.cpu_seconds;
            }
            scores.record(Score::of(r));
        }
        scores.export();
    }

    /// Reads and records the reports of run `run_id` filed since the newest
    /// one seen, page by page.
    pub async fn read_new(&self, publisher: &Publisher, run_id: &str) -> Result<(), tonic::Status> {
        // A page per call, bounded by the server; the cap only stops a server
        // that keeps answering with the same page.
        for _ in 0..1_000 {
            let after = self.scores().latest.map(|s| s.version);
            let page = publisher.evals(run_id, after).await?;
            if page.is_empty() || page.iter().all(|r| after.is_some_and(|a| r.version <= a)) {
                break;
            }
            self.record(&page);
        }
        Ok(())
    }

    /// Reads new reports every 20 ms until one of `version` or later has
    /// come (true), `wait` has passed or `stop` fired (false). Failed reads
    /// are logged and retried. The 20 ms poll: an evaluation usually lands a
    /// few milliseconds after its version, and a coarser poll added its whole
    /// period to the run's wall time whenever it lost that race.
    pub async fn wait_for(
        &self,
        publisher: &Publisher,
        run_id: &str,
        version: u64,
        wait: Duration,
        stop: &CancellationToken,
    ) -> bool {
        let deadline = Instant::now() + wait;
        let arrived = || self.scores().latest.is_some_and(|s| s.version >= version);
        loop {
            if let Err(e) = self.read_new(publisher, run_id).await {
                warn!("reading evaluations: {}", e.message());
            }
            if arrived() {
                return true;
            }
            if Instant::now() >= deadline || stop.is_cancelled() {
                return false;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                _ = stop.cancelled() => {}
            }
        }
    }

    pub fn scores(&self) -> Scores {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Starts from the scores a checkpoint saved (a resumed run).
    pub fn restore(&self, saved: Scores) {
        saved.export();
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = saved;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(version: u64, return_mean: f64) -> EvalReport {
        EvalReport {
            version,
            return_mean,
            ..Default::default()
        }
    }

    fn score(version: u64, return_mean: f64) -> Option<Score> {
        Some(Score {
            version,
            return_mean,
            matches: Vec::new(),
            episodes: 0,
            episodes_asked: 0,
            cut_by: String::new(),
        })
    }

    #[test]
    fn an_evaluation_cut_before_any_episode_finished_is_never_the_best() {
        let book = EvalBook::default();
        let cut = |version, return_mean, episodes| EvalReport {
            episodes,
            episodes_asked: 8,
            cut_by: "max_steps".into(),
            cpu_seconds: 1.5,
            ..report(version, return_mean)
        };
        book.record(&[report(5, 2.0), cut(10, 900.0, 0), cut(15, 3.0, 2)]);
        let s = book.scores();
        assert_eq!(s.best.as_ref().map(|b| b.version), Some(15));
        let latest = s.latest.expect("latest");
        assert_eq!(
            (latest.version, latest.episodes, latest.episodes_asked),
            (15, 2, 8)
        );
        assert_eq!(latest.cut_by, "max_steps");
        // CPU seconds add up; a non-finite or negative figure is left out.
        assert_eq!(s.cpu_seconds, 3.0);
        let bad = |cpu| EvalReport {
            cpu_seconds: cpu,
            ..report(20, 1.0)
        };
        book.record(&[bad(f64::NAN), bad(-1.0), bad(f64::INFINITY)]);
        assert_eq!(book.scores().cpu_seconds, 3.0);
    }

    #[test]
    fn best_and_latest_survive_a_param_server_that_forgot_the_early_reports() {
        let book = EvalBook::default();
        book.record(&[report(5, 20.0), report(10, 180.0), report(15, 90.0)]);
        // A restarted param-server lists only what came after its restart.
        book.record(&[report(25, 120.0), report(30, 150.0)]);
        let s = book.scores();
        assert_eq!(s.best, score(10, 180.0));
        assert_eq!(s.latest, score(30, 150.0));
        assert_eq!(s.of_version(30), score(30, 150.0));
        assert_eq!(s.of_version(35), None);
    }

    #[test]
    fn repeated_reports_and_ties_keep_the_earlier_best() {
        let book = EvalBook::default();
        book.record(&[report(5, 500.0), report(10, 500.0)]);
        book.record(&[report(5, 500.0), report(10, 500.0), report(15, 499.0)]);
        let s = book.scores();
        assert_eq!(s.best, score(5, 500.0));
        assert_eq!(s.latest, score(15, 499.0));
    }

    #[test]
    fn non_finite_scores_are_ignored() {
        let book = EvalBook::default();
        book.record(&[report(5, f64::NAN), report(6, f64::INFINITY)]);
        assert_eq!(book.scores(), Scores::default());
        book.record(&[report(7, -3.0), report(8, f64::NEG_INFINITY)]);
        assert_eq!(book.scores().best, score(7, -3.0));
        assert_eq!(book.scores().latest, score(7, -3.0));
    }

    #[test]
    fn a_resumed_run_starts_from_the_saved_scores() {
        let first = EvalBook::default();
        first.record(&[report(10, 300.0), report(20, 250.0)]);
        let saved: Scores =
            serde_json::from_str(&serde_json::to_string(&first.scores()).expect("encode"))
                .expect("decode");
        let resumed = EvalBook::default();
        resumed.restore(saved);
        resumed.record(&[report(30, 260.0)]);
        assert_eq!(resumed.scores().best, score(10, 300.0));
        assert_eq!(resumed.scores().latest, score(30, 260.0));
    }
}
