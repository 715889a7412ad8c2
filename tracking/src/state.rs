//! What a tracker has delivered of a run, kept in
//! `<run>/tracking/<tracker>.json`: the remote run to reopen, the clock's
//! zero its timestamps use, and the position delivered in each file.

use crate::follow::{Mark, Position};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// What the sink returned from `open`: how to reopen its run.
    #[serde(default)]
    pub remote: Option<Value>,
    /// The Unix time of the run's `wall_seconds` 0, fixed at the first
    /// open so that a line sent again carries the same time.
    #[serde(default)]
    pub origin: Option<f64>,
    #[serde(default)]
    pub params_sent: bool,
    /// Delivered positions by file name.
    #[serde(default)]
    pub files: BTreeMap<String, Position>,
    /// The end of the run was recorded.
    #[serde(default)]
    pub finished: bool,
}

impl State {
    pub fn path(dir: &Path, tracker: &str) -> PathBuf {
        dir.join(crate::TRACKING_DIR)
            .join(format!("{tracker}.json"))
    }

    /// The saved state; a missing file is a first start, and one that does
    /// not parse (a hand edit) starts over with a warning: a new remote run
    /// is better than none.
    pub fn load(dir: &Path, tracker: &str) -> Self {
        let path = Self::path(dir, tracker);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(file = %path.display(), "tracker state unreadable, starting over: {e}");
                Self::default()
            }),
            Err(_) => Self::default(),
        }
    }

    pub fn save(&self, dir: &Path, tracker: &str) -> std::io::Result<()> {
        let path = Self::path(dir, tracker);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        sebulba_runfiles::files::write_json_atomic(&path, self)
    }

    /// The record at `mark` was delivered (or refused for good).
    pub fn delivered(&mut self, mark: &Mark) {
        match mark.file {
            None => self.params_sent = true,
            Some(name) => {
                self.files.insert(name.to_string(), mark.position.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_a_bad_file_starts_over() {
        let dir = std::env::temp_dir().join(format!("sebulba-track-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(State::load(&dir, "mlflow"), State::default());
        let mut s = State {
            origin: Some(1.5),
            ..State::default()
        };
        s.delivered(&Mark {
            file: Some("metrics.jsonl"),
            position: Position {
                offset: 10,
                step: 3,
                line: "{}".into(),
            },
        });
        s.delivered(&Mark {
            file: None,
            position: Position::default(),
        });
        s.save(&dir, "mlflow").unwrap();
        let back = State::load(&dir, "mlflow");
        assert_eq!(back, s);
        assert!(back.params_sent && back.files["metrics.jsonl"].offset == 10);
        std::fs::write(State::path(&dir, "mlflow"), "{not json").unwrap();
        assert_eq!(State::load(&dir, "mlflow"), State::default());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
