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

/// Series a role renders itself at each scrape, in Prometheus's text format:
/// tables whose rows come and go (the `metrics` facade cannot drop a series
/// once recorded, so a row's series would outlive it).
pub trait Rendered: Send + Sync {
    fn render(&self, out: &mut String);
}

type Sources = std::collections::BTreeMap<&'static str, std::sync::Arc<dyn Rendered>>;

/// The sources [`serve`]'s endpoint appends, by name: the newest under a
/// name replaces the one before (a learner's table stays on the endpoint
/// after the learner ends, for the last scrape, until another replaces it).
static RENDERED: std::sync::Mutex<Sources> = std::sync::Mutex::new(Sources::new());

/// Appends `source`'s series to every scrape, in place of `name`'s before.
pub fn render_also(name: &'static str, source: std::sync::Arc<dyn Rendered>) {
    RENDERED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(name, source);
}

/// The rendered sources' series.
fn rendered() -> String {
    let sources: Vec<_> = RENDERED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .cloned()
        .collect();
    let mut out = String::new();
    for source in sources {
        source.render(&mut out);
    }
    out
}

/// `value` escaped for a label in the text format (backslash, quote, newline).
pub fn label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

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
                    h.render() + &rendered(),
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(&'static str);
    impl Rendered for Fixed {
        fn render(&self, out: &mut String) {
            out.push_str(self.0);
        }
    }

    #[test]
    fn a_rendered_source_is_scraped_until_another_takes_its_name() {
        render_also("test", std::sync::Arc::new(Fixed("x_total 1\n")));
        assert!(rendered().contains("x_total 1\n"));
        render_also("test", std::sync::Arc::new(Fixed("x_total 2\n")));
        let text = rendered();
        assert!(
            text.contains("x_total 2\n") && !text.contains("x_total 1\n"),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped_as_the_text_format_asks() {
        assert_eq!(label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(label_value("local-0#3.00ff"), "local-0#3.00ff");
    }
}
