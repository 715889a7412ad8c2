//! What an evaluator finds and writes in a run directory: where that is
//! ([`Output`]), and what an earlier evaluator of the run left
//! (`eval.jsonl`'s newest version, best score and evaluations).

use crate::line;
use std::path::PathBuf;

/// The newest version, the best return and the evaluations in an
/// `eval.jsonl` (none, minus infinity and 0 for a missing or empty file). An evaluation that
/// finished no episode is no candidate for the best. One its evaluator was
/// stopped in counts as done: versions stay in order in `eval.jsonl`.
pub(crate) fn evaluated(path: &std::path::Path) -> (Option<u64>, f64, u64) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let count = sebulba_runfiles::files::json_lines(&text).count() as u64;
    let (last, best) = sebulba_runfiles::files::json_lines(&text).fold(
        (None, f64::NEG_INFINITY),
        |(last, best), v| {
            let version = v["version"].as_u64();
            let asked = v["episodes_asked"].as_u64().unwrap_or(0);
            let whole = line::scored_whole(v["episodes"].as_u64().unwrap_or(0), asked);
            let ret = v["return_mean"].as_f64().filter(|_| whole);
            (
                last.max(version),
                best.max(ret.unwrap_or(f64::NEG_INFINITY)),
            )
        },
    );
    (last, best, count)
}

/// Where an evaluator writes.
#[derive(Debug, Clone)]
pub enum Output {
    /// One run directory (`--run-dir`).
    Dir(PathBuf),
    /// A runs root (`--runs-root`): each run's files go to `<root>/<run id>`,
    /// the directory its learner uses under the same root.
    PerRun(PathBuf),
}

impl Output {
    /// The directory for run `run_id`, if its id is safe as a directory name.
    pub(crate) fn dir_for(&self, run_id: &str) -> Option<PathBuf> {
        match self {
            Output::Dir(d) => Some(d.clone()),
            Output::PerRun(root) => {
                let safe = !run_id.is_empty()
                    && !run_id.starts_with('.')
                    && run_id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
                safe.then(|| root.join(run_id))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_evaluation_of_cut_episodes_alone_is_never_the_best() {
        let dir = std::env::temp_dir().join(format!("sebulba-evaluated-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("eval.jsonl");
        let lines = [
            r#"{"version":10,"return_mean":5.0,"episodes":8,"episodes_asked":8}"#,
            r#"{"version":20,"return_mean":900.0,"episodes":0,"episodes_asked":8,"cut_by":"max_steps"}"#,
            r#"{"version":30,"return_mean":7.0,"episodes":3,"episodes_asked":8,"cut_by":"max_steps"}"#,
            r#"{"version":40,"return_mean":50.0,"episodes":2,"episodes_asked":30,"cut_by":"shutdown"}"#,
            // From an evaluator before the counts: whole episodes.
            r#"{"version":5,"return_mean":6.0,"episodes":10}"#,
        ];
        std::fs::write(&path, lines.join("\n")).expect("write");
        // Version 40's finished episodes count for the best; version 20's
        // cut ones do not. Five evaluations were made.
        assert_eq!(super::evaluated(&path), (Some(40), 50.0, 5));
        std::fs::remove_dir_all(&dir).ok();
    }
}
