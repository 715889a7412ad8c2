//! The Prometheus endpoint. Roles record through the `metrics` facade; a
//! process started with `--metrics-addr` installs this recorder and serves
//! everything recorded at `http://ADDR/metrics` (in local mode one endpoint
//! carries every role). Without it nothing is installed and recording costs a
//! no-op call.

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("--metrics-addr `{0}`: expected IP:PORT, e.g. 0.0.0.0:9464")]
    Address(String),
    #[error("serving metrics on {addr}: {reason}")]
    Serve { addr: SocketAddr, reason: String },
}

/// Histogram buckets: durations in seconds, and policy lag in versions.
const SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
const LAG: &[f64] = &[0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0];

/// Installs the recorder and serves it at `addr` (port 0 picks one) from the
/// current tokio runtime; returns the address bound. Fails when the address
/// is malformed or taken, or a recorder is already installed.
pub async fn serve(addr: &str) -> Result<SocketAddr, MetricsError> {
    let parsed: SocketAddr = addr
        .parse()
        .map_err(|_| MetricsError::Address(addr.to_string()))?;
    let fail = |e: &dyn std::fmt::Display| MetricsError::Serve {
        addr: parsed,
        reason: e.to_string(),
    };
    let listener = tokio::net::TcpListener::bind(parsed)
        .await
        .map_err(|e| fail(&e))?;
    let bound = listener.local_addr().map_err(|e| fail(&e))?;
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)
        .map_err(|e| fail(&e))?
        .set_buckets_for_metric(Matcher::Full("sebulba_learner_policy_lag".into()), LAG)
        .map_err(|e| fail(&e))?
        .install_recorder()
        .map_err(|e| fail(&e))?;
    // Histograms' and summaries' bookkeeping, as the exporter asks of its users.
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let h = handle.clone();
            async move {
                let text_format = "text/plain; version=0.0.4; charset=utf-8";
                (
                    [(axum::http::header::CONTENT_TYPE, text_format)],
                    h.render(),
                )
            }
        }),
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("metrics endpoint stopped: {e}");
        }
    });
    Ok(bound)
}
