//! `StreamTrajectories` served off the HTTP request itself, in front of the
//! generated `LearnerServer`: each batch is read into an allocation of its
//! own ([`sebulba_transport::frames`]) rather than into tonic's per-stream
//! buffer, which keeps the size of the largest batch for the stream's life.
//! Everything else (the credentials, the checks, the acks) is the service's,
//! as on tonic's path.

use crate::service::LearnerService;
use futures::StreamExt;
use http_body_util::StreamBody;
use prost::Message;
use sebulba_proto::TrajectoryBatch;
use sebulba_transport::frames::{MessageReader, frame, trailers};
use sebulba_transport::security::Class;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::mpsc;
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Service, http};
use tonic::server::NamedService;
use tracing::{Instrument, info_span};

/// The method's path.
pub const PATH: &str = "/sebulba.v1.Learner/StreamTrajectories";

/// `inner` (the generated server) with [`PATH`] taken in front of it.
#[derive(Clone)]
pub struct TrajectoryRoute<S> {
    inner: S,
    service: Arc<LearnerService>,
    /// The run's message limit, checked on each length prefix.
    limit: usize,
}

impl<S> TrajectoryRoute<S> {
    pub fn new(inner: S, service: Arc<LearnerService>, limit: usize) -> Self {
        Self {
            inner,
            service,
            limit,
        }
    }
}

impl<S: NamedService> NamedService for TrajectoryRoute<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for TrajectoryRoute<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.uri().path() != PATH {
            return Box::pin(self.inner.call(req));
        }
        let response = open(&self.service, req, self.limit);
        Box::pin(async move { Ok(response) })
    }
}

/// Checks the caller, starts reading its batches, and answers with the
/// stream of acks (ending in the trailers of the stream's status).
fn open(service: &LearnerService, req: http::Request<Body>, limit: usize) -> http::Response<Body> {
    let (parts, body) = req.into_parts();
    if let Some(encoding) = parts.headers.get("grpc-encoding")
        && encoding != "identity"
    {
        let shown = String::from_utf8_lossy(encoding.as_bytes()).into_owned();
        return Status::unimplemented(format!(
            "header `grpc-encoding`: `{shown}`; this learner takes uncompressed batches"
        ))
        .into_http();
    }
    let metadata = tonic::metadata::MetadataMap::from_headers(parts.headers);
    let method = &PATH[1..];
    if let Err(status) = service.gate.check(&metadata, method, &[Class::Actor]) {
        return status.into_http();
    }
    let batches = MessageReader::new(body, limit).map(|message| {
        message.and_then(|bytes| {
            TrajectoryBatch::decode(bytes)
                .map_err(|e| Status::internal(format!("failed to decode Protobuf message: {e}")))
        })
    });
    let (ack_tx, ack_rx) = mpsc::channel(64);
    tokio::spawn(
        LearnerService::serve_stream(
            service.shared.clone(),
            service.queue.clone(),
            batches,
            ack_tx,
        )
        .instrument(info_span!("trajectory_stream")),
    );
    let frames = futures::stream::unfold(Some(ack_rx), |rx| async move {
        let mut rx = rx?;
        let (next, rx) = match rx.recv().await {
            Some(Ok(ack)) => (frame(&ack), Some(rx)),
            Some(Err(status)) => (trailers(&status), None),
            None => (trailers(&Status::ok("")), None),
        };
        Some((Ok::<_, Infallible>(next), rx))
    });
    let mut response = http::Response::new(Body::new(StreamBody::new(frames)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}
