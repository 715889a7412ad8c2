//! Weights & Biases through the `wandb` package in the embedded Python
//! (`wandb.py` beside this file): the run lives in `<run>/tracking/wandb`,
//! offline unless there are credentials (then `wandb sync` uploads it).

use crate::follow::Record;
use crate::{End, Ending, RunInfo, Sink, TrackError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;
use serde_json::{Value, json};
use std::ffi::CString;

static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

pub struct Wandb {
    project: Option<String>,
    tracker: Option<Py<PyAny>>,
}

impl Wandb {
    /// Checks now that the interpreter starts and `wandb` imports: a
    /// missing package fails the command at start, in one line.
    pub fn new(project: Option<String>) -> Result<Self, TrackError> {
        sebulba_pyenv::start().map_err(|e| TrackError::Spec(format!("--track wandb: {e}")))?;
        Python::attach(|py| module(py).map(|_| ())).map_err(|e| {
            let venv = std::env::var("VIRTUAL_ENV").unwrap_or_else(|_| "not set".into());
            TrackError::Spec(format!(
                "--track wandb: {e} (install it in the venv: pip install wandb; VIRTUAL_ENV is {venv})"
            ))
        })?;
        Ok(Self {
            project,
            tracker: None,
        })
    }

    /// Calls `method` of the open tracker.
    fn call<A>(&self, method: &str, args: A) -> Result<(), TrackError>
    where
        A: for<'py> pyo3::call::PyCallArgs<'py>,
    {
        let tracker = self
            .tracker
            .as_ref()
            .ok_or_else(|| TrackError::Transient("the wandb run is not open".into()))?;
        Python::attach(|py| tracker.bind(py).call_method1(method, args).map(|_| ()))
            .map_err(|e| python_error(method, &e))
    }
}

fn module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    MODULE
        .get_or_try_init(py, || {
            let code = CString::new(include_str!("wandb.py")).unwrap_or_default();
            PyModule::from_code(py, &code, c"sebulba_wandb.py", c"sebulba_wandb").map(Bound::unbind)
        })
        .map(|m| m.bind(py))
}

/// A Python error in one line. wandb's own errors (a refused value, a bad
/// setting) would fail again: refused; others (its service, the network)
/// may pass.
fn python_error(what: &str, e: &PyErr) -> TrackError {
    Python::attach(|py| {
        let kind = e
            .get_type(py)
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        let text = format!("wandb {what}: {kind}: {}", e.value(py));
        if matches!(
            kind.as_str(),
            "ValueError" | "TypeError" | "KeyError" | "UsageError"
        ) {
            TrackError::Refused(text)
        } else {
            TrackError::Transient(text)
        }
    })
}

impl Sink for Wandb {
    fn open(&mut self, run: &RunInfo, saved: Option<&Value>) -> Result<Value, TrackError> {
        let dir = run.dir.join(crate::TRACKING_DIR).join("wandb");
        let id = saved
            .and_then(|s| s["id"].as_str())
            .map(str::to_string)
            .unwrap_or_else(new_id);
        let tracker = Python::attach(|py| {
            let m = module(py)?;
            let t = m.getattr("Tracker")?.call1((
                self.project.clone(),
                run.name.clone(),
                id.clone(),
                dir.display().to_string(),
            ))?;
            Ok::<_, PyErr>(t.unbind())
        })
        .map_err(|e| python_error("init", &e))?;
        self.tracker = Some(tracker);
        Ok(json!({ "id": id }))
    }

    fn send(&mut self, run: &RunInfo, records: &[Record]) -> Result<usize, TrackError> {
        match records.first() {
            None => Ok(0),
            Some(Record::Params(p)) => {
                self.call("config", (serde_json::to_string(p).unwrap_or_default(),))?;
                Ok(1)
            }
            Some(Record::Video {
                step,
                file,
                caption,
                ..
            }) => {
                let path = run.dir.join(file).display().to_string();
                self.call("video", (*step, path, caption.clone()))?;
                Ok(1)
            }
            Some(Record::Scalars { .. }) => {
                let lines: Vec<Value> = records
                    .iter()
                    .map_while(|r| match r {
                        Record::Scalars { step, values, .. } => {
                            let values: serde_json::Map<String, Value> =
                                values.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                            Some(json!([step, values]))
                        }
                        _ => None,
                    })
                    .collect();
                self.call("log", (Value::Array(lines.clone()).to_string(),))?;
                Ok(lines.len())
            }
        }
    }

    fn finish(&mut self, run: &RunInfo, end: &End) -> Result<(), TrackError> {
        let summary: serde_json::Map<String, Value> = end
            .summary
            .as_ref()
            .map(|s| {
                sebulba_runfiles::tensorboard::scalars("summary", s)
                    .into_iter()
                    .map(|(k, v)| (k, json!(v)))
                    .collect()
            })
            .unwrap_or_default();
        let files: Vec<String> = end.files.iter().map(|f| f.display().to_string()).collect();
        let exit_code = i32::from(end.ending == Ending::Failed);
        self.call(
            "finish",
            (
                Value::Object(summary).to_string(),
                run.dir.display().to_string(),
                files,
                exit_code,
            ),
        )?;
        self.tracker = None;
        Ok(())
    }
}

/// A run id as W&B makes them: 8 characters of `[a-z0-9]`.
fn new_id() -> String {
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 32);
    (0..8)
        .map(|_| {
            // xorshift: ids need only differ, not be unpredictable.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[(x % 36) as usize])
        })
        .collect()
}
