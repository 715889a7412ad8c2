//! Logging and tracing setup shared by every role.
//!
//! Logs: `tracing` with `RUST_LOG`-style filtering (default `info`) to stderr.
//! Traces: when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set,
//! sebulba's own spans are exported over OTLP/gRPC in batches from a background
//! thread, with `service.name` from `OTEL_SERVICE_NAME` or `sebulba-<role>`.
//! Spans are per rollout, update and call, never per env step, so export costs
//! the hot loops nothing.

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("OTLP exporter for {endpoint}: {reason}")]
    Exporter { endpoint: String, reason: String },
}

/// Keeps the trace exporter alive; [`Telemetry::shutdown`] flushes it.
#[derive(Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    endpoint: Option<String>,
}

impl Telemetry {
    /// Where spans go, if anywhere.
    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    /// Exports what is still queued and stops the exporter. Call it after the
    /// role has finished, while the tokio runtime is still alive.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            tracing::warn!("trace export did not shut down cleanly: {e}");
        }
    }
}

/// The OTLP endpoint from the environment: the traces-specific variable first,
/// then the general one; empty values (compose passes them through) mean off.
pub fn otlp_endpoint() -> Option<String> {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok())
    .map(|v| v.trim().to_string())
    .find(|v| !v.is_empty())
}

/// `OTEL_SERVICE_NAME` if set, else `sebulba-<role>`.
pub fn service_name(role: &str) -> String {
    std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| format!("sebulba-{role}"))
}

fn log_layer<S>() -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let exporter_noise = RateLimit::new(EXPORTER_LOG_PERIOD);
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        // Colour codes only on a terminal: container logs and files stay plain.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter)
        .with_filter(
            // Decided per event (a plain `filter_fn` is cached per callsite).
            tracing_subscriber::filter::dynamic_filter_fn(move |m, _| {
                let noise = m.target().starts_with("opentelemetry")
                    && m.is_event()
                    && *m.level() <= tracing::Level::WARN;
                !noise || exporter_noise.allow(Instant::now())
            })
            .with_callsite_filter(|m| {
                if m.target().starts_with("opentelemetry") {
                    tracing::subscriber::Interest::sometimes()
                } else {
                    tracing::subscriber::Interest::always()
                }
            }),
        )
}

/// At most one line of the OpenTelemetry SDK's own logging per this period:
/// with no collector up, its export errors would repeat every few seconds.
const EXPORTER_LOG_PERIOD: Duration = Duration::from_secs(60);

/// Lets one event through per `period` (the first at once).
struct RateLimit {
    period: Duration,
    last: Mutex<Option<Instant>>,
}

impl RateLimit {
    fn new(period: Duration) -> Self {
        Self {
            period,
            last: Mutex::new(None),
        }
    }

    fn allow(&self, now: Instant) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match *last {
            Some(t) if now.saturating_duration_since(t) < self.period => false,
            _ => {
                *last = Some(now);
                true
            }
        }
    }
}

/// Installs the global subscriber once; later calls are no-ops (tests call it often).
pub fn init_logging() {
    let _ = tracing_subscriber::registry().with(log_layer()).try_init();
}

/// Logging as [`init_logging`], plus OTLP trace export when an endpoint is
/// configured. Must run inside a tokio runtime (the exporter is a tonic client).
pub fn init(role: &str) -> Result<Telemetry, TelemetryError> {
    let Some(endpoint) = otlp_endpoint() else {
        init_logging();
        return Ok(Telemetry::default());
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint.clone())
        .build()
        .map_err(|e| TelemetryError::Exporter {
            endpoint: endpoint.clone(),
            reason: e.to_string(),
        })?;
    let instance = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| format!("pid-{}", std::process::id()));
    let resource = Resource::builder()
        .with_service_name(service_name(role))
        .with_attributes([
            KeyValue::new("service.instance.id", instance),
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        ])
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("sebulba");
    // Only sebulba's spans: tonic, h2 and hyper would add one per frame.
    let spans = Targets::new().with_target("sebulba", LevelFilter::INFO);
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(spans);
    let _ = tracing_subscriber::registry()
        .with(log_layer())
        .with(otel)
        .try_init();
    tracing::info!(%endpoint, service = %service_name(role), "exporting traces over OTLP");
    Ok(Telemetry {
        provider: Some(provider),
        endpoint: Some(endpoint),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exporter_noise_is_one_line_a_period() {
        let limit = RateLimit::new(Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(limit.allow(t0), "the first error is shown");
        for s in [1, 5, 30, 59] {
            assert!(!limit.allow(t0 + Duration::from_secs(s)), "{s} s later");
        }
        assert!(limit.allow(t0 + Duration::from_secs(61)));
        assert!(!limit.allow(t0 + Duration::from_secs(62)));
    }
}
