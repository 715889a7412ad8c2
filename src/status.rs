//! `sebulba status`: where a run stands, read from its parameter server, for
//! a person watching a cluster without a dashboard. Two reads of the newest
//! version (without the weights) `--sample-secs` apart give the current
//! throughput; the evaluation reports give the latest and best scores.

use crate::cli::StatusArgs;
use anyhow::Context;
use sebulba_proto::parameter_server_client::ParameterServerClient;
use sebulba_proto::{EvalReport, LatestRequest, ListEvalsRequest, Weights};
use sebulba_transport::grpc::{SecureChannel, channel};
use sebulba_transport::security::{Class, Security};
use serde::Serialize;
use std::time::Duration;

/// What `status` reports (also its `--json` output).
#[derive(Debug, Serialize)]
pub struct Status {
    pub run_id: String,
    pub env_id: String,
    pub version: u64,
    pub finished: bool,
    pub env_steps: u64,
    /// Seconds of training the learner's clock counts (across resumes).
    pub wall_seconds: f64,
    /// env_steps / wall_seconds.
    pub steps_per_second: Option<f64>,
    /// Between the two reads (absent when no new version came in between).
    pub recent_steps_per_second: Option<f64>,
    pub latest_eval: Option<Eval>,
    pub best_eval: Option<Eval>,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Eval {
    pub version: u64,
    pub env_steps: u64,
    pub return_mean: f64,
    pub return_std: f64,
    pub episodes: u32,
    pub r#final: bool,
}

impl From<&EvalReport> for Eval {
    fn from(r: &EvalReport) -> Self {
        Self {
            version: r.version,
            env_steps: r.env_steps,
            return_mean: r.return_mean,
            return_std: r.return_std,
            episodes: r.episodes,
            r#final: r.r#final,
        }
    }
}

#[tracing::instrument(name = "status", skip_all)]
pub async fn run(args: StatusArgs) -> anyhow::Result<()> {
    let security = args.security.load()?;
    let mut client = client(&args.param_server, &security)?;
    let at = || format!("parameter server {}", args.param_server);
    let first = latest(&mut client).await.with_context(at)?;
    let mut now = first.clone();
    if args.sample_secs > 0.0 && !first.r#final {
        tokio::time::sleep(Duration::from_secs_f64(args.sample_secs)).await;
        now = latest(&mut client).await.with_context(at)?;
    }
    let (latest_eval, best_eval) = evals(&mut client, &now.run_id).await.with_context(at)?;
    let status = Status {
        steps_per_second: rate(now.env_steps, now.wall_seconds),
        recent_steps_per_second: (now.run_id == first.run_id && now.version > first.version)
            .then(|| {
                rate(
                    now.env_steps.saturating_sub(first.env_steps),
                    now.wall_seconds - first.wall_seconds,
                )
            })
            .flatten(),
        run_id: now.run_id,
        env_id: now.env_id,
        version: now.version,
        finished: now.r#final,
        env_steps: now.env_steps,
        wall_seconds: now.wall_seconds,
        latest_eval,
        best_eval,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", render(&status));
    }
    Ok(())
}

/// A client sending the most modest token configured: read-only, else the
/// learner's, else an actor's (which reads weights but not evaluations).
fn client(url: &str, security: &Security) -> anyhow::Result<ParameterServerClient<SecureChannel>> {
    let class = [Class::ReadOnly, Class::Learner, Class::Actor]
        .into_iter()
        .find(|c| security.tokens.get(*c).is_some());
    let ch = channel(url, security, class).with_context(|| format!("parameter server {url}"))?;
    Ok(ParameterServerClient::new(ch))
}

async fn latest(client: &mut ParameterServerClient<SecureChannel>) -> anyhow::Result<Weights> {
    let mut req = tonic::Request::new(LatestRequest {
        without_weights: true,
    });
    req.set_timeout(Duration::from_secs(10));
    match client.latest(req).await {
        Ok(w) => Ok(w.into_inner()),
        Err(s) if s.code() == tonic::Code::NotFound => {
            anyhow::bail!("the parameter server holds no version yet (no learner has published)")
        }
        Err(s) => anyhow::bail!(
            "asking for the latest version: {} ({:?})",
            s.message(),
            s.code()
        ),
    }
}

/// The newest and the best report of run `run_id`, paging through them all
/// (the server holds a bounded number).
async fn evals(
    client: &mut ParameterServerClient<SecureChannel>,
    run_id: &str,
) -> anyhow::Result<(Option<Eval>, Option<Eval>)> {
    let (mut last, mut best): (Option<Eval>, Option<Eval>) = (None, None);
    let mut after = None;
    loop {
        let mut req = tonic::Request::new(ListEvalsRequest {
            run_id: run_id.to_string(),
            after_version: after,
        });
        req.set_timeout(Duration::from_secs(10));
        let page = match client.list_evals(req).await {
            Ok(p) => p.into_inner().reports,
            Err(s) => anyhow::bail!("listing evaluations: {} ({:?})", s.message(), s.code()),
        };
        let Some(end) = page.last() else { break };
        // Pages go up in version; a server that does not is not followed round.
        if after.is_some_and(|a| end.version <= a) {
            break;
        }
        after = Some(end.version);
        for r in &page {
            if best.as_ref().is_none_or(|b| r.return_mean > b.return_mean) {
                best = Some(r.into());
            }
        }
        last = Some(end.into());
    }
    Ok((last, best))
}

fn rate(steps: u64, seconds: f64) -> Option<f64> {
    (seconds.is_finite() && seconds > 0.0).then(|| steps as f64 / seconds)
}

/// The human-readable form.
pub fn render(s: &Status) -> String {
    let sps = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.0}"));
    let eval = |e: &Option<Eval>| match e {
        None => "none yet".to_string(),
        Some(e) => format!(
            "{:.2} ± {:.2} over {} episodes (version {}, {} env steps{})",
            e.return_mean,
            e.return_std,
            e.episodes,
            e.version,
            e.env_steps,
            if e.r#final { ", final" } else { "" }
        ),
    };
    let final_ = if s.finished {
        " (final: the run is done)"
    } else {
        ""
    };
    let steps = format!(
        "{} overall, {} recent",
        sps(s.steps_per_second),
        sps(s.recent_steps_per_second)
    );
    [
        ("run", format!("{} ({})", s.run_id, s.env_id)),
        ("version", format!("{}{final_}", s.version)),
        ("env steps", s.env_steps.to_string()),
        ("wall time", format!("{:.1} s", s.wall_seconds)),
        ("steps/s", steps),
        ("latest eval", eval(&s.latest_eval)),
        ("best eval", eval(&s.best_eval)),
    ]
    .iter()
    .map(|(label, value)| format!("{label:<12}{value}\n"))
    .collect()
}
