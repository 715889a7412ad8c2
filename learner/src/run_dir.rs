//! The run directory: one run per directory. A learner started on it resumes
//! the run there from its checkpoint, refuses another run's files, or starts
//! over (`--fresh`); under a runs root (`--runs-root`, what compose uses) it
//! picks the unfinished run to resume or makes a directory for a new one.

use crate::checkpoint::{self, Checkpoint};
use crate::error::LearnerError;
use sebulba_core::config::RunConfig;
use sebulba_runfiles::files::{each_json_line, write_atomic, write_atomic_with};
use std::path::{Path, PathBuf};
use tracing::info;

/// How a learner treats its run directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RunStart {
    /// Resume from `checkpoint.bin` when there is one (a restarted learner
    /// goes on by itself); refuse a directory holding another run's files.
    #[default]
    Auto,
    /// `--resume`: a checkpoint is required.
    Resume,
    /// `--fresh`: start over, removing the previous run's files.
    Fresh,
}

/// What a run directory holds of a run (`summary.json` and `metrics.jsonl`
/// mark one; `eval.jsonl` may be the evaluator's of this very start).
const RUN_FILES: &[&str] = &[
    "metrics.jsonl",
    "summary.json",
    "eval.jsonl",
    checkpoint::FILE,
    "final.safetensors",
    "best.safetensors",
];

/// Creates the run directory and decides how the run starts there (see
/// [`RunStart`]): reads (and checks) the checkpoint to resume from before
/// anything is served or written, and trims `metrics.jsonl` back to it; or
/// clears a previous run's files (and TensorBoard events, videos and
/// what trackers delivered of it) for `--fresh`. Writes `config.toml`.
pub fn open(
    run_dir: &Path,
    cfg: &RunConfig,
    start: RunStart,
) -> Result<Option<Checkpoint>, LearnerError> {
    std::fs::create_dir_all(run_dir)
        .map_err(|e| LearnerError::Io(run_dir.display().to_string(), e))?;
    let has = |f: &str| run_dir.join(f).exists();
    let ck = match start {
        RunStart::Fresh => {
            for f in RUN_FILES.iter().filter(|f| has(f)) {
                std::fs::remove_file(run_dir.join(f))
                    .map_err(|e| LearnerError::Io((*f).into(), e))?;
            }
            for dir in [
                sebulba_runfiles::tensorboard::DIR,
                sebulba_runfiles::video::DIR,
                sebulba_runfiles::TRACKING_DIR,
            ] {
                let dir = run_dir.join(dir);
                if dir.exists() {
                    std::fs::remove_dir_all(&dir)
                        .map_err(|e| LearnerError::Io(dir.display().to_string(), e))?;
                }
            }
            None
        }
        RunStart::Auto if !has(checkpoint::FILE) => {
            if let Some(f) = ["metrics.jsonl", "summary.json"]
                .into_iter()
                .find(|f| has(f))
            {
                return Err(LearnerError::Resume(format!(
                    "{} holds another run ({f}) and no {} to resume from: choose another --run-dir, or --fresh to start over there",
                    run_dir.display(),
                    checkpoint::FILE
                )));
            }
            None
        }
        RunStart::Auto | RunStart::Resume => Some(resume_from(run_dir, cfg)?),
    };
    write_atomic(&run_dir.join("config.toml"), cfg.to_toml().as_bytes())
        .map_err(|e| LearnerError::Io("config.toml".into(), e))?;
    Ok(ck)
}

/// The run directory's checkpoint, checked against this run's config.
fn resume_from(run_dir: &Path, cfg: &RunConfig) -> Result<Checkpoint, LearnerError> {
    let ck = Checkpoint::read(run_dir)?.ok_or_else(|| {
        LearnerError::Resume(format!("no {} in {}", checkpoint::FILE, run_dir.display()))
    })?;
    if ck.meta.env_id != cfg.env.id {
        return Err(LearnerError::Resume(format!(
            "field `env.id`: the checkpoint is for {}, this run is {}",
            ck.meta.env_id, cfg.env.id
        )));
    }
    if ck.meta.network != cfg.network {
        return Err(LearnerError::Resume(
            "section `network` differs from the checkpoint's; the weights cannot be loaded".into(),
        ));
    }
    let (steps, wall) = (ck.meta.env_steps, ck.meta.wall_seconds);
    if cfg.budget_spent(steps, wall) {
        let (spent, key) = if steps >= cfg.run.total_steps {
            let total = cfg.run.total_steps;
            (format!("{steps} of {total} steps"), "run.total_steps")
        } else {
            let limit = cfg.run.time_limit_secs;
            (format!("{wall:.0} of {limit} s"), "run.time_limit_secs")
        };
        return Err(LearnerError::Resume(format!(
            "the run in {} is finished ({spent}); --fresh to start over there, or raise {key} to go on",
            run_dir.display()
        )));
    }
    info!(
        run_id = %ck.meta.run_id,
        env_steps = ck.meta.env_steps,
        updates = ck.meta.updates,
        "checkpoint found: resuming (--fresh starts over)"
    );
    // Updates after the checkpoint are done again: their old lines go.
    trim_metrics(&run_dir.join("metrics.jsonl"), ck.meta.updates)
        .map_err(|e| LearnerError::Io("metrics.jsonl".into(), e))?;
    Ok(ck)
}

/// Keeps the lines of `metrics.jsonl` up to update `updates` (atomically,
/// a line at a time: a long run's file is never held whole).
fn trim_metrics(path: &Path, updates: u64) -> std::io::Result<()> {
    if !path.exists() {
        return Ok(());
    }
    write_atomic_with(path, |out| {
        each_json_line(path, |line, v| {
            if v["update"].as_u64().is_some_and(|u| u <= updates) {
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")?;
            }
            Ok(())
        })
    })
}

/// Where a learner under `root` runs: the unfinished run of this
/// environment there whose checkpoint is newest (unless `fresh`), or a new
/// directory named for a new run id. Returns the directory and, for a new
/// run, its id.
pub fn in_root(root: &Path, env_id: &str, fresh: bool) -> (PathBuf, Option<String>) {
    if !fresh && let Some(dir) = unfinished(root, env_id) {
        info!(run_dir = %dir.display(), "an unfinished run of this environment: resuming it");
        return (dir, None);
    }
    let id = crate::state::new_run_id(env_id);
    (root.join(&id), Some(id))
}

/// The newest unfinished run of `env_id` under `root`: a checkpoint for that
/// environment, and no summary saying the run completed.
fn unfinished(root: &Path, env_id: &str) -> Option<PathBuf> {
    let completed = |dir: &Path| {
        std::fs::read(dir.join("summary.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v["completed"] == true)
    };
    std::fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|dir| !completed(dir))
        .filter_map(|dir| {
            let ck = std::fs::metadata(dir.join(checkpoint::FILE)).ok()?;
            let meta = Checkpoint::read(&dir).ok()??.meta;
            (meta.env_id == env_id).then_some((ck.modified().ok()?, dir))
        })
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, dir)| dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_keeps_the_updates_up_to_the_checkpoint_and_drops_torn_lines() {
        let dir = std::env::temp_dir().join(format!("sebulba-trim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("metrics.jsonl");
        let mut text: String = (1..=5)
            .map(|u| format!("{{\"update\":{u},\"loss\":0.5}}\n"))
            .collect();
        text.push_str("{\"update\":6,\"lo");
        std::fs::write(&p, text).expect("write");
        trim_metrics(&p, 3).expect("trim");
        assert_eq!(
            std::fs::read_to_string(&p).expect("read"),
            "{\"update\":1,\"loss\":0.5}\n{\"update\":2,\"loss\":0.5}\n{\"update\":3,\"loss\":0.5}\n"
        );
        // No file, nothing to trim (and none made).
        trim_metrics(&dir.join("none.jsonl"), 3).expect("no file");
        assert!(!dir.join("none.jsonl").exists());
        std::fs::remove_dir_all(&dir).expect("clean");
    }
}
