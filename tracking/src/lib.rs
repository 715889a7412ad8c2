//! Experiment trackers: a run sent to MLflow (its REST API) or to Weights &
//! Biases (the `wandb` package, through the embedded Python) by following
//! its run directory: the configuration, every line of `metrics.jsonl` and
//! `eval.jsonl` (the same `train/...` and `eval/...` names TensorBoard
//! shows), the videos as they are made, and at the end the summary and the
//! weights.
//!
//! Following the files, rather than hooking the learner, is what keeps a
//! tracker from ever stopping or slowing training: it runs on its own
//! thread, reads only what the run has already written (the files are its
//! buffer, so a tracker that is down loses nothing and holds no more than
//! [`driver::AHEAD`] records in memory), retries with backoff, and counts
//! and logs its errors. What it has delivered is saved in
//! `<run>/tracking/<tracker>.json`, so a tracker started again (the run
//! resumed, or `sebulba track RUN_DIR` after the server came back) goes on
//! where it stopped, in the same remote run. The same code serves
//! `sebulba local --track` and `sebulba track RUN_DIR` beside a cluster's
//! runs volume.

mod driver;
pub mod follow;
pub mod mlflow;
mod state;
#[cfg(feature = "python")]
pub mod wandb;

pub use driver::{Outcome, Tracking, start};
pub use follow::Record;

use std::path::PathBuf;
use std::str::FromStr;

pub use sebulba_runfiles::TRACKING_DIR;

/// One tracker to send a run to (`--track`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Track {
    /// `mlflow=URI`: an MLflow tracking server (`http://host:5000`).
    Mlflow { uri: String },
    /// `wandb` or `wandb=PROJECT`: Weights & Biases.
    Wandb { project: Option<String> },
}

impl Track {
    /// The tracker's name: its state file, its log lines and its metrics'
    /// `tracker` label.
    pub fn name(&self) -> &'static str {
        match self {
            Track::Mlflow { .. } => "mlflow",
            Track::Wandb { .. } => "wandb",
        }
    }
}

impl FromStr for Track {
    type Err = TrackError;

    fn from_str(s: &str) -> Result<Self, TrackError> {
        let (kind, arg) = match s.split_once('=') {
            Some((k, a)) => (k, Some(a.trim())),
            None => (s, None),
        };
        let bad = |why: &str| TrackError::Spec(format!("--track {s}: {why}"));
        match (kind.trim(), arg) {
            ("mlflow", Some(uri)) if uri.starts_with("http://") || uri.starts_with("https://") => {
                Ok(Track::Mlflow {
                    uri: uri.trim_end_matches('/').to_string(),
                })
            }
            ("mlflow", Some(_)) => Err(bad(
                "the tracking URI is an http:// or https:// server (`mlflow server`)",
            )),
            ("mlflow", None) => Err(bad("name the server: mlflow=http://HOST:5000")),
            ("wandb", None) => Ok(Track::Wandb { project: None }),
            ("wandb", Some(p)) if !p.is_empty() => Ok(Track::Wandb {
                project: Some(p.to_string()),
            }),
            ("wandb", Some(_)) => Err(bad("an empty project name")),
            _ => Err(bad("trackers are mlflow=URI and wandb[=PROJECT]")),
        }
    }
}

/// Why a tracker could not do something.
#[derive(Debug, thiserror::Error)]
pub enum TrackError {
    /// A `--track` value that names no tracker.
    #[error("{0}")]
    Spec(String),
    /// Worth trying again: the server is down or overloaded, the network
    /// failed, a file could not be read yet.
    #[error("{0}")]
    Transient(String),
    /// The tracker refused what was sent (a 4xx answer, a value it cannot
    /// hold); sending it again would be refused again.
    #[error("{0}")]
    Refused(String),
}

/// How the run ended, as the tracker shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The run reached its budget.
    Finished,
    /// Stopped before it (SIGTERM, a time limit): it can be resumed.
    Stopped,
    /// Stopped by an error.
    Failed,
}

/// The end of a run: its summary and the files kept with it.
#[derive(Clone, Debug)]
pub struct End {
    pub ending: Ending,
    /// `summary.json`, when the run wrote one.
    pub summary: Option<serde_json::Value>,
    /// Files to keep with the run (weights, summary, configuration), as
    /// paths under the run directory.
    pub files: Vec<PathBuf>,
}

/// The run a tracker is opened for.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// The run directory (absolute).
    pub dir: PathBuf,
    /// Its name: the directory's.
    pub name: String,
}

/// A tracker's connection to its service.
pub trait Sink: Send {
    /// Opens the remote run, or reopens the one `saved` names (what an
    /// earlier `open` returned); returns what to save to reopen it.
    fn open(
        &mut self,
        run: &RunInfo,
        saved: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, TrackError>;
    /// Delivers the leading records of `records` (at least one when there
    /// are any) and says how many; an error delivered none of them.
    fn send(&mut self, run: &RunInfo, records: &[Record]) -> Result<usize, TrackError>;
    /// Records the end of the run: summary, files, status.
    fn finish(&mut self, run: &RunInfo, end: &End) -> Result<(), TrackError>;
}

/// The sink for `track`.
pub fn sink(track: &Track) -> Result<Box<dyn Sink>, TrackError> {
    match track {
        Track::Mlflow { uri } => Ok(Box::new(mlflow::Mlflow::new(uri)?)),
        #[cfg(feature = "python")]
        Track::Wandb { project } => Ok(Box::new(wandb::Wandb::new(project.clone())?)),
        #[cfg(not(feature = "python"))]
        Track::Wandb { .. } => Err(TrackError::Spec(
            "--track wandb needs a binary built with the `python` feature (the wandb package runs in its embedded Python)"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn track_values_parse_and_bad_ones_name_the_flag() {
        assert_eq!(
            "mlflow=http://h:5000/".parse::<Track>().unwrap(),
            Track::Mlflow {
                uri: "http://h:5000".into()
            }
        );
        assert_eq!(
            "wandb".parse::<Track>().unwrap(),
            Track::Wandb { project: None }
        );
        assert_eq!(
            "wandb=atari".parse::<Track>().unwrap(),
            Track::Wandb {
                project: Some("atari".into())
            }
        );
        for bad in ["mlflow", "mlflow=file:///tmp/x", "wandb=", "neptune", ""] {
            let e = bad.parse::<Track>().unwrap_err().to_string();
            assert!(e.starts_with(&format!("--track {bad}:")), "{e}");
        }
    }
}
