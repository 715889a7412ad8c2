//! A real OTLP/gRPC trace receiver for tests, built on `opentelemetry-proto`'s
//! generated server: it records every exported span with its service name, so
//! a test can check which roles exported and how their spans connect.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub struct RecordedSpan {
    pub service: String,
    pub name: String,
    pub trace_id: Vec<u8>,
    pub span_id: Vec<u8>,
    pub parent_span_id: Vec<u8>,
    /// (trace id, span id) of each link.
    pub links: Vec<(Vec<u8>, Vec<u8>)>,
}

#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<RecordedSpan>>>);

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut out = Vec::new();
        for rs in request.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref())
                .and_then(|v| match &v.value {
                    Some(Value::StringValue(s)) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    out.push(RecordedSpan {
                        service: service.clone(),
                        name: s.name,
                        trace_id: s.trace_id,
                        span_id: s.span_id,
                        parent_span_id: s.parent_span_id,
                        links: s
                            .links
                            .into_iter()
                            .map(|l| (l.trace_id, l.span_id))
                            .collect(),
                    });
                }
            }
        }
        self.0
            .lock()
            .map_err(|_| tonic::Status::internal("sink poisoned"))?
            .extend(out);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// The receiver, serving on its own runtime until dropped.
pub struct Receiver {
    pub addr: SocketAddr,
    sink: Sink,
    _rt: tokio::runtime::Runtime,
}

impl Receiver {
    /// Listens on `bind` (`127.0.0.1:0` for local processes, `0.0.0.0:0` for containers).
    pub fn start(bind: &str) -> Receiver {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("receiver runtime");
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(bind))
            .expect("bind OTLP receiver");
        let addr = listener.local_addr().expect("receiver address");
        let sink = Sink::default();
        let service = TraceServiceServer::new(sink.clone());
        rt.spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await;
        });
        Receiver {
            addr,
            sink,
            _rt: rt,
        }
    }

    pub fn spans(&self) -> Vec<RecordedSpan> {
        self.sink.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// What a test checks of the spans the roles exported.
pub struct TraceReport {
    pub services: BTreeSet<String>,
    pub names: BTreeSet<(String, String)>,
    /// Traces with spans from more than one service.
    pub cross_service_traces: usize,
    /// Learner `ingest` spans whose parent is an actor `send` span.
    pub ingest_continuing_send: usize,
    /// Learner `update` spans linking to at least one recorded `ingest` span.
    pub updates_linking_ingest: usize,
    /// Actor `weight_refresh` spans whose parent is a learner `publish` span.
    pub refresh_continuing_publish: usize,
    /// gRPC server spans (`package.Service/Method`) that are the root of their
    /// trace: the caller made the call outside any span.
    pub server_spans_without_parent: BTreeSet<(String, String)>,
}

impl std::fmt::Display for TraceReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "services {:?}; cross-service traces {}; ingest<-send {}; update->ingest links {}; publish->refresh {}; server spans without parent {:?}; spans {:?}",
            self.services,
            self.cross_service_traces,
            self.ingest_continuing_send,
            self.updates_linking_ingest,
            self.refresh_continuing_publish,
            self.server_spans_without_parent,
            self.names
        )
    }
}

pub fn analyse(spans: &[RecordedSpan]) -> TraceReport {
    let by_id: HashMap<&[u8], &RecordedSpan> =
        spans.iter().map(|s| (s.span_id.as_slice(), s)).collect();
    let parent = |s: &RecordedSpan| by_id.get(s.parent_span_id.as_slice()).copied();
    let mut services_per_trace: HashMap<&[u8], BTreeSet<&str>> = HashMap::new();
    for s in spans {
        services_per_trace
            .entry(s.trace_id.as_slice())
            .or_default()
            .insert(s.service.as_str());
    }
    let is = |s: &RecordedSpan, name: &str| s.name == name;
    TraceReport {
        services: spans.iter().map(|s| s.service.clone()).collect(),
        names: spans
            .iter()
            .map(|s| (s.service.clone(), s.name.clone()))
            .collect(),
        cross_service_traces: services_per_trace.values().filter(|v| v.len() > 1).count(),
        ingest_continuing_send: spans
            .iter()
            .filter(|s| is(s, "ingest"))
            .filter(|s| {
                parent(s).is_some_and(|p| {
                    is(p, "send") && p.service != s.service && p.trace_id == s.trace_id
                })
            })
            .count(),
        updates_linking_ingest: spans
            .iter()
            .filter(|s| is(s, "update"))
            .filter(|s| {
                s.links
                    .iter()
                    .any(|(_, span)| by_id.get(span.as_slice()).is_some_and(|l| is(l, "ingest")))
            })
            .count(),
        refresh_continuing_publish: spans
            .iter()
            .filter(|s| is(s, "weight_refresh"))
            .filter(|s| parent(s).is_some_and(|p| is(p, "publish")))
            .count(),
        server_spans_without_parent: spans
            .iter()
            .filter(|s| s.name.contains('/'))
            .filter(|s| s.parent_span_id.iter().all(|b| *b == 0))
            .map(|s| (s.service.clone(), s.name.clone()))
            .collect(),
    }
}
