//! MLflow through its REST API (`/api/2.0/mlflow/...`): an experiment
//! (`MLFLOW_EXPERIMENT_NAME`, default `sebulba`), a run named after the run
//! directory, the configuration as params, every number as a metric at its
//! `env_steps`, and the videos, weights, summary and configuration as
//! artifacts through the server's artifact proxy (`mlflow server`'s
//! default). Credentials as MLflow's own client reads them:
//! `MLFLOW_TRACKING_TOKEN`, or `MLFLOW_TRACKING_USERNAME` and
//! `MLFLOW_TRACKING_PASSWORD`.

use crate::follow::{Record, now_ms};
use crate::{End, Ending, RunInfo, Sink, TrackError};
use base64::Engine;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// MLflow's limits on one `runs/log-batch` request.
const MAX_METRICS: usize = 1000;
const MAX_PARAMS: usize = 100;
/// The longest param value MLflow keeps.
const MAX_PARAM_VALUE: usize = 6000;

pub struct Mlflow {
    uri: String,
    agent: ureq::Agent,
    auth: Option<String>,
    experiment: String,
    run_id: String,
    /// Where artifacts are PUT (`.../mlflow-artifacts/artifacts/<exp>/<run>/artifacts`),
    /// or why they cannot be.
    artifacts: Result<String, String>,
}

impl Mlflow {
    pub fn new(uri: &str) -> Result<Self, TrackError> {
        let auth = match (
            std::env::var("MLFLOW_TRACKING_TOKEN"),
            std::env::var("MLFLOW_TRACKING_USERNAME"),
        ) {
            (Ok(token), _) => Some(format!("Bearer {token}")),
            (Err(_), Ok(user)) => {
                let password = std::env::var("MLFLOW_TRACKING_PASSWORD").unwrap_or_default();
                let pair =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                Some(format!("Basic {pair}"))
            }
            _ => None,
        };
        Ok(Self {
            uri: uri.to_string(),
            agent: ureq::AgentBuilder::new()
                .timeout_connect(Duration::from_secs(5))
                .timeout_read(Duration::from_secs(60))
                .timeout_write(Duration::from_secs(60))
                .build(),
            auth,
            experiment: std::env::var("MLFLOW_EXPERIMENT_NAME")
                .ok()
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "sebulba".into()),
            run_id: String::new(),
            artifacts: Err("the run is not open".into()),
        })
    }

    /// A request to `url` with our agent and credentials.
    fn request(&self, method: &str, url: &str) -> ureq::Request {
        let r = self.agent.request(method, url).set("User-Agent", "sebulba");
        match &self.auth {
            Some(a) => r.set("Authorization", a),
            None => r,
        }
    }

    fn post(&self, api: &str, body: &Value) -> Result<Value, TrackError> {
        answer(
            api,
            self.request("POST", &format!("{}/api/2.0/mlflow/{api}", self.uri))
                .send_json(body),
        )
    }

    fn get(&self, api: &str, query: &[(&str, &str)]) -> Result<Value, TrackError> {
        let mut r = self.request("GET", &format!("{}/api/2.0/mlflow/{api}", self.uri));
        for (k, v) in query {
            r = r.query(k, v);
        }
        answer(api, r.call())
    }

    fn experiment_id(&self) -> Result<String, TrackError> {
        let name = self.experiment.as_str();
        match self.get("experiments/get-by-name", &[("experiment_name", name)]) {
            Ok(v) => return id_in(&v["experiment"]["experiment_id"], "experiment_id"),
            Err(TrackError::Refused(e)) if e.contains("RESOURCE_DOES_NOT_EXIST") => {}
            Err(e) => return Err(e),
        }
        match self.post("experiments/create", &json!({ "name": name })) {
            Ok(v) => id_in(&v["experiment_id"], "experiment_id"),
            // Made by another tracker meanwhile.
            Err(TrackError::Refused(e)) if e.contains("RESOURCE_ALREADY_EXISTS") => {
                let v = self.get("experiments/get-by-name", &[("experiment_name", name)])?;
                id_in(&v["experiment"]["experiment_id"], "experiment_id")
            }
            Err(e) => Err(e),
        }
    }

    /// The run `saved` names, RUNNING again; `None` when this server does
    /// not have it (another server, or it was deleted).
    fn reopen(&mut self, saved: &Value) -> Result<Option<Value>, TrackError> {
        let (Some(uri), Some(run_id)) = (saved["uri"].as_str(), saved["run_id"].as_str()) else {
            return Ok(None);
        };
        if uri != self.uri {
            return Ok(None);
        }
        let info = match self.get("runs/get", &[("run_id", run_id)]) {
            Ok(v) => v["run"]["info"].clone(),
            Err(TrackError::Refused(e)) if e.contains("RESOURCE_DOES_NOT_EXIST") => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if info["lifecycle_stage"] == "deleted" {
            return Ok(None);
        }
        self.post(
            "runs/update",
            &json!({ "run_id": run_id, "status": "RUNNING" }),
        )?;
        Ok(Some(info))
    }

    fn use_run(&mut self, info: &Value) -> Result<Value, TrackError> {
        self.run_id = id_in(&info["run_id"], "run_id")?;
        let artifact_uri = info["artifact_uri"].as_str().unwrap_or_default();
        self.artifacts = match artifact_uri.strip_prefix("mlflow-artifacts:") {
            Some(rest) => Ok(format!(
                "{}/api/2.0/mlflow-artifacts/artifacts/{}",
                self.uri,
                rest.trim_start_matches('/')
            )),
            None => Err(format!(
                "the server keeps this run's artifacts at {artifact_uri}, out of a client's reach: start `mlflow server` with its artifact proxy (the default; not --no-serve-artifacts or --default-artifact-root)"
            )),
        };
        Ok(json!({
            "uri": self.uri,
            "experiment_id": info["experiment_id"],
            "run_id": self.run_id,
        }))
    }

    fn log_params(&self, params: &[(String, String)]) -> Result<(), TrackError> {
        for chunk in params.chunks(MAX_PARAMS) {
            let params: Vec<Value> = chunk
                .iter()
                .map(|(k, v)| {
                    let v: String = v.chars().take(MAX_PARAM_VALUE).collect();
                    json!({ "key": metric_key(k), "value": v })
                })
                .collect();
            self.post(
                "runs/log-batch",
                &json!({ "run_id": self.run_id, "params": params }),
            )?;
        }
        Ok(())
    }

    /// The leading scalar records that fit one request, logged; how many.
    fn log_scalars(&self, records: &[Record]) -> Result<usize, TrackError> {
        let (taken, metrics) = pack_scalars(records);
        if !metrics.is_empty() {
            self.post(
                "runs/log-batch",
                &json!({ "run_id": self.run_id, "metrics": metrics }),
            )?;
        }
        Ok(taken)
    }

    /// PUTs the run directory's file `rel` as the artifact of that path.
    fn upload(&self, run: &RunInfo, rel: &Path) -> Result<(), TrackError> {
        let base = self
            .artifacts
            .as_ref()
            .map_err(|e| TrackError::Refused(e.clone()))?;
        let path = run.dir.join(rel);
        let file = std::fs::File::open(&path)
            .map_err(|e| TrackError::Refused(format!("{}: {e}", path.display())))?;
        let name = rel.to_string_lossy().replace('\\', "/");
        let r = self
            .request("PUT", &format!("{base}/{name}"))
            .set("Content-Type", "application/octet-stream");
        answer(&format!("artifact {name}"), r.send(file)).map(|_| ())
    }
}

impl Sink for Mlflow {
    fn open(&mut self, run: &RunInfo, saved: Option<&Value>) -> Result<Value, TrackError> {
        if let Some(saved) = saved
            && let Some(info) = self.reopen(saved)?
        {
            return self.use_run(&info);
        }
        let experiment_id = self.experiment_id()?;
        let tags = json!([
            { "key": "mlflow.runName", "value": run.name },
            { "key": "mlflow.source.name", "value": "sebulba" },
            { "key": "sebulba.run_dir", "value": run.dir.display().to_string() },
        ]);
        let v = self.post(
            "runs/create",
            &json!({
                "experiment_id": experiment_id,
                "run_name": run.name,
                "start_time": now_ms(),
                "tags": tags,
            }),
        )?;
        self.use_run(&v["run"]["info"])
    }

    fn send(&mut self, run: &RunInfo, records: &[Record]) -> Result<usize, TrackError> {
        match records.first() {
            None => Ok(0),
            Some(Record::Params(p)) => self.log_params(p).map(|()| 1),
            Some(Record::Video { file, .. }) => self.upload(run, file).map(|()| 1),
            Some(Record::Scalars { .. }) => self.log_scalars(records),
        }
    }

    fn finish(&mut self, run: &RunInfo, end: &End) -> Result<(), TrackError> {
        if let Some(summary) = &end.summary {
            let values = sebulba_runfiles::tensorboard::scalars("summary", summary);
            let step = summary["env_steps"].as_u64().unwrap_or(0);
            let record = Record::Scalars {
                step,
                time_ms: now_ms(),
                values,
            };
            self.log_scalars(std::slice::from_ref(&record))?;
        }
        for f in &end.files {
            self.upload(run, f)?;
        }
        let status = match end.ending {
            Ending::Finished => "FINISHED",
            Ending::Stopped => "KILLED",
            Ending::Failed => "FAILED",
        };
        self.post(
            "runs/update",
            &json!({ "run_id": self.run_id, "status": status, "end_time": now_ms() }),
        )
        .map(|_| ())
    }
}

/// The leading scalar records whose metrics fit one request (at least one
/// record; a line of more than the limit is cut to it), and those metrics.
fn pack_scalars(records: &[Record]) -> (usize, Vec<Value>) {
    let mut metrics = Vec::new();
    let mut taken = 0;
    for r in records {
        let Record::Scalars {
            step,
            time_ms,
            values,
        } = r
        else {
            break;
        };
        if taken > 0 && metrics.len() + values.len() > MAX_METRICS {
            break;
        }
        taken += 1;
        for (k, v) in values.iter().take(MAX_METRICS) {
            metrics.push(
                json!({ "key": metric_key(k), "value": v, "timestamp": time_ms, "step": step }),
            );
        }
    }
    (taken, metrics)
}

/// A JSON answer, or the error: 429 and 5xx and a failed connection are
/// worth retrying; another refusal is not, and says MLflow's own reason.
fn answer(what: &str, r: Result<ureq::Response, ureq::Error>) -> Result<Value, TrackError> {
    match r {
        Ok(resp) => {
            let text = resp
                .into_string()
                .map_err(|e| TrackError::Transient(format!("{what}: reading the answer: {e}")))?;
            Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
        }
        Err(ureq::Error::Status(code, resp)) => {
            let body = resp.into_string().unwrap_or_default();
            let reason = serde_json::from_str::<Value>(&body)
                .ok()
                .map(|v| {
                    format!(
                        "{} {}",
                        v["error_code"].as_str().unwrap_or(""),
                        v["message"].as_str().unwrap_or("")
                    )
                })
                .unwrap_or_else(|| body.chars().take(300).collect());
            let e = format!("{what}: HTTP {code}: {}", reason.trim());
            if code == 429 || code >= 500 {
                Err(TrackError::Transient(e))
            } else {
                Err(TrackError::Refused(e))
            }
        }
        Err(ureq::Error::Transport(t)) => Err(TrackError::Transient(format!("{what}: {t}"))),
    }
}

fn id_in(v: &Value, field: &str) -> Result<String, TrackError> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| TrackError::Refused(format!("the server's answer has no {field}")))
}

/// A name as MLflow takes it: alphanumerics, `_ - . : /` and spaces; any
/// other character becomes `_`.
fn metric_key(k: &str) -> String {
    k.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-.:/ ".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(250)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_what_mlflow_accepts() {
        assert_eq!(metric_key("train/policy_loss"), "train/policy_loss");
        assert_eq!(
            metric_key("eval/matches/actor#0.x y"),
            "eval/matches/actor_0.x y"
        );
        assert_eq!(metric_key("é"), "_");
        assert_eq!(metric_key(&"k".repeat(300)).len(), 250);
    }

    #[test]
    fn scalar_lines_are_packed_to_the_batch_limit() {
        let line = |n: usize| Record::Scalars {
            step: 7,
            time_ms: 1234,
            values: (0..n).map(|i| (format!("m#{i}"), 0.5)).collect(),
        };
        let (n, m) = pack_scalars(&[line(600), line(600), line(10)]);
        assert_eq!((n, m.len()), (1, 600));
        assert_eq!(
            m[3],
            json!({"key": "m_3", "value": 0.5, "timestamp": 1234, "step": 7})
        );
        let (n, m) = pack_scalars(&[line(400), line(600), line(1)]);
        assert_eq!((n, m.len()), (2, 1000));
        let (n, m) = pack_scalars(&[line(1), line(2), Record::Params(vec![]), line(1)]);
        assert_eq!(
            (n, m.len()),
            (2, 3),
            "a record of another kind ends the batch"
        );
        let (n, m) = pack_scalars(&[line(1500)]);
        assert_eq!((n, m.len()), (1, 1000));
        assert_eq!(pack_scalars(&[]).0, 0);
    }
}
