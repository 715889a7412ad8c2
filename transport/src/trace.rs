//! W3C trace context across processes. Every client injects the caller's span
//! into its request metadata ([`inject_current`], on every `SecureChannel`);
//! every server starts its request span from that metadata ([`server_span`]).
//! Long-lived streams carry many rollouts, so a rollout's context also travels
//! inside its `TrajectoryBatch` (and a publish's inside `Weights`): one trace
//! then follows one rollout from the actor into the learner.
//!
//! Without an OpenTelemetry layer installed every function here is a no-op:
//! spans have no valid context, so nothing is injected and no parent is set.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::collections::HashMap;
use tonic::codegen::http;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The span's W3C context (`traceparent`, `tracestate`) as a string map, the
/// shape of the `trace_context` fields in sebulba.proto. Empty when the span is
/// not exported.
pub fn context_map(span: &Span) -> HashMap<String, String> {
    let mut map = HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut map);
    map
}

/// The remote span a `trace_context` map names, if it names a valid one.
pub fn span_context(map: &HashMap<String, String>) -> Option<SpanContext> {
    let cx = TraceContextPropagator::new().extract(map);
    let sc = cx.span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// W3C Trace Context's limits on what a `trace_context` map may hold: its
/// two headers only, `traceparent` as long as version 00 writes it (the
/// one version defined), `tracestate` of at most 512 characters and 32
/// list members.
pub const TRACEPARENT_LEN: usize = 55;
pub const TRACESTATE_LEN: usize = 512;
pub const TRACESTATE_MEMBERS: usize = 32;

/// Why a `trace_context` map is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceContextError {
    #[error("key `{0}` is neither `traceparent` nor `tracestate`")]
    UnknownKey(String),
    #[error("`traceparent` of {0} bytes, over W3C's {TRACEPARENT_LEN}")]
    LongParent(usize),
    #[error("`tracestate` of {0} bytes, over W3C's {TRACESTATE_LEN}")]
    LongState(usize),
    #[error("`tracestate` of {0} list members, over W3C's {TRACESTATE_MEMBERS}")]
    StateMembers(usize),
}

/// Checks `map` against W3C Trace Context's limits. A peer's map is read
/// only through this (nothing past the limits reaches a propagator or a
/// log); what [`context_map`] writes always passes.
pub fn check_context_map(map: &HashMap<String, String>) -> Result<(), TraceContextError> {
    for (key, value) in map {
        match key.as_str() {
            "traceparent" if value.len() > TRACEPARENT_LEN => {
                return Err(TraceContextError::LongParent(value.len()));
            }
            "tracestate" if value.len() > TRACESTATE_LEN => {
                return Err(TraceContextError::LongState(value.len()));
            }
            "tracestate" if value.split(',').count() > TRACESTATE_MEMBERS => {
                return Err(TraceContextError::StateMembers(value.split(',').count()));
            }
            "traceparent" | "tracestate" => {}
            other => {
                // Named, but never echoed whole: a key may be megabytes.
                let shown: String = other.chars().take(40).collect();
                return Err(TraceContextError::UnknownKey(shown));
            }
        }
    }
    Ok(())
}

/// Makes the span a child of the remote span named by `map` (if any; a map
/// past W3C's limits names none).
pub fn set_parent_from_map(span: &Span, map: &HashMap<String, String>) {
    if span.is_disabled() || map.is_empty() || check_context_map(map).is_err() {
        return;
    }
    let cx = TraceContextPropagator::new().extract(map);
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// Links the span to the remote span named by `map` (if any): how an update
/// points at the rollouts it consumed without swallowing their traces.
pub fn link_from_map(span: &Span, map: &HashMap<String, String>) {
    if let Some(sc) = span_context(map) {
        span.add_link(sc);
    }
}

/// Client side: puts the current span's context into request metadata (every
/// call of a [`crate::grpc::SecureChannel`] does).
pub fn inject_current(metadata: &mut MetadataMap) {
    let span = Span::current();
    if !span.is_disabled() {
        TraceContextPropagator::new()
            .inject_context(&span.context(), &mut MetadataInjector(metadata));
    }
}

struct MetadataInjector<'a>(&'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            MetadataKey::from_bytes(key.as_bytes()),
            MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(k, v);
        }
    }
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Server side (tonic's `trace_fn`): one span per call, the child of the
/// caller's span when the metadata names one. Health checks and reflection get
/// none: container healthchecks would otherwise fill the trace store.
pub fn server_span(req: &http::Request<()>) -> Span {
    let path = req.uri().path();
    if path.starts_with("/grpc.health.") || path.starts_with("/grpc.reflection.") {
        return Span::none();
    }
    let span = tracing::info_span!(
        "grpc.server",
        otel.name = %path.trim_start_matches('/'),
        otel.kind = "server",
        rpc.system = "grpc",
    );
    if !span.is_disabled() {
        let cx = TraceContextPropagator::new().extract(&HeaderExtractor(req.headers()));
        if cx.span().span_context().is_valid() {
            let _ = span.set_parent(cx);
        }
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};

    fn remote() -> SpanContext {
        SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").expect("trace id"),
            SpanId::from_hex("00f067aa0ba902b7").expect("span id"),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        )
    }

    #[test]
    fn a_w3c_traceparent_round_trips_through_a_map() {
        // The example from the W3C Trace Context spec, section 3.2.
        let map = HashMap::from([(
            "traceparent".to_string(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string(),
        )]);
        let sc = span_context(&map).expect("valid context");
        assert_eq!(sc, remote());
        let mut back = HashMap::new();
        let cx = opentelemetry::Context::new().with_remote_span_context(sc);
        TraceContextPropagator::new().inject_context(&cx, &mut back);
        assert_eq!(back["traceparent"], map["traceparent"]);
    }

    #[test]
    fn malformed_or_missing_contexts_name_no_span() {
        assert!(span_context(&HashMap::new()).is_none());
        for bad in [
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        ] {
            let map = HashMap::from([("traceparent".to_string(), bad.to_string())]);
            assert!(span_context(&map).is_none(), "{bad} accepted");
        }
    }

    #[test]
    fn maps_past_w3c_limits_are_refused_and_ours_pass() {
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(parent.len(), TRACEPARENT_LEN);
        let map = |pairs: &[(&str, String)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect()
        };
        let members = |n: usize| {
            (0..n)
                .map(|i| format!("v{i}=x"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let good = map(&[("traceparent", parent.into()), ("tracestate", members(32))]);
        assert_eq!(check_context_map(&good), Ok(()));
        assert_eq!(check_context_map(&HashMap::new()), Ok(()));
        let refused = [
            (map(&[("padding", "x".repeat(1 << 20))]), "padding"),
            (map(&[("traceparent", format!("{parent}-00"))]), "58 bytes"),
            (
                map(&[("tracestate", "k=".to_string() + &"v".repeat(511))]),
                "513 bytes",
            ),
            (map(&[("tracestate", members(33))]), "33 list members"),
        ];
        for (m, said) in refused {
            let e = check_context_map(&m).unwrap_err().to_string();
            assert!(e.contains(said) && e.len() < 200, "{e}");
        }
        // What a sender writes: its span's context, always within them.
        let cx = opentelemetry::Context::new().with_remote_span_context(remote());
        let mut ours = HashMap::new();
        TraceContextPropagator::new().inject_context(&cx, &mut ours);
        assert!(!ours.is_empty());
        assert_eq!(check_context_map(&ours), Ok(()));
    }

    #[test]
    fn the_server_span_skips_health_checks() {
        let req = |path: &str| {
            http::Request::builder()
                .uri(format!("http://x{path}"))
                .body(())
                .expect("request")
        };
        let registry = tracing_subscriber::registry();
        tracing::subscriber::with_default(registry, || {
            assert!(server_span(&req("/grpc.health.v1.Health/Check")).is_none());
            assert!(server_span(&req("/grpc.reflection.v1.ServerReflection/Info")).is_none());
            assert!(!server_span(&req("/sebulba.v1.Learner/Join")).is_none());
        });
    }

    #[test]
    fn the_interceptor_writes_traceparent_into_metadata() {
        let mut md = MetadataMap::new();
        let cx = opentelemetry::Context::new().with_remote_span_context(remote());
        TraceContextPropagator::new().inject_context(&cx, &mut MetadataInjector(&mut md));
        assert_eq!(
            md.get("traceparent").and_then(|v| v.to_str().ok()),
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        );
        let headers = md.into_headers();
        let back = TraceContextPropagator::new().extract(&HeaderExtractor(&headers));
        assert_eq!(back.span().span_context(), &remote());
    }
}
