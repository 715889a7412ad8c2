//! The parameter server: a versioned weight store. The learner publishes; actors
//! and the evaluator follow with `Watch` (the current version at once, then each
//! newer one) or ask for the `Latest`; actors that seat past selves read the
//! pool of past versions (`PastVersions`, `Version`). The evaluator files its scores here so the
//! learner's summary can read them.

use sebulba_proto::parameter_server_server::{ParameterServer, ParameterServerServer};
use sebulba_proto::{
    EvalList, EvalReport, LatestRequest, ListEvalsRequest, PastList, PastRequest, PublishAck,
    ReportAck, VersionRequest, WatchRequest, Weights,
};
use sebulba_transport::grpc::MAX_MESSAGE_BYTES;
use sebulba_transport::security::{Class, Gate, Security};
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_stream::wrappers::WatchStream;
use tokio_stream::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};
use tracing::{debug, info};

mod metrics;
mod store;

pub use store::{MAX_EVAL_REPORTS, MAX_LISTED_REPORTS, MAX_VERSION, MAX_VERSION_JUMP, Store};

#[derive(Debug, thiserror::Error)]
pub enum ParamServerError {
    #[error("transport: {0}")]
    Transport(String),
}

pub struct Service {
    pub store: Arc<Store>,
    /// Only the learner publishes; everyone with a token reads.
    pub gate: Gate,
}

const READERS: &[Class] = &[Class::Actor, Class::Learner, Class::ReadOnly];

#[tonic::async_trait]
impl ParameterServer for Service {
    async fn publish(&self, request: Request<Weights>) -> Result<Response<PublishAck>, Status> {
        self.gate.check(
            request.metadata(),
            "sebulba.v1.ParameterServer/Publish",
            &[Class::Learner],
        )?;
        let w = request.into_inner();
        let (version, final_, bytes) = (w.version, w.r#final, w.safetensors.len());
        let env_steps = w.env_steps;
        let v = self
            .store
            .publish(w)
            .inspect_err(|_| metrics::published(None))?;
        metrics::published(Some((v, env_steps, bytes)));
        metrics::watchers(self.store.watchers());
        if final_ {
            info!(version, bytes, "final version published");
        } else {
            debug!(version, bytes, "version published");
        }
        Ok(Response::new(PublishAck { version: v }))
    }

    async fn latest(&self, request: Request<LatestRequest>) -> Result<Response<Weights>, Status> {
        self.gate.check(
            request.metadata(),
            "sebulba.v1.ParameterServer/Latest",
            READERS,
        )?;
        let without_weights = request.get_ref().without_weights;
        match self.store.latest() {
            Some(w) if without_weights => Ok(Response::new(Weights {
                version: w.version,
                safetensors: Default::default(),
                network: w.network.clone(),
                env_id: w.env_id.clone(),
                env_steps: w.env_steps,
                r#final: w.r#final,
                trace_context: w.trace_context.clone(),
                run_id: w.run_id.clone(),
                env_kwargs: w.env_kwargs.clone(),
                wall_seconds: w.wall_seconds,
                past_keep: w.past_keep,
                past_stride: w.past_stride,
                epsilon: w.epsilon,
                eval: w.eval.clone(),
            })),
            Some(w) => Ok(Response::new((*w).clone())),
            None => Err(Status::not_found("no version published yet")),
        }
    }

    type WatchStream = Pin<Box<dyn Stream<Item = Result<Weights, Status>> + Send>>;

    async fn watch(
        &self,
        request: Request<WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        self.gate.check(
            request.metadata(),
            "sebulba.v1.ParameterServer/Watch",
            READERS,
        )?;
        let rx = self.store.subscribe();
        metrics::watchers(self.store.watchers());
        // WatchStream yields the current value first, then each change; a slow
        // subscriber skips to the newest, which is what a follower wants.
        let stream = WatchStream::new(rx).filter_map(|w| w.map(|w| Ok((*w).clone())));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn report_eval(
        &self,
        request: Request<EvalReport>,
    ) -> Result<Response<ReportAck>, Status> {
        // Scores come from the evaluator, which holds the read-only token.
        self.gate.check(
            request.metadata(),
            "sebulba.v1.ParameterServer/ReportEval",
            &[Class::ReadOnly],
        )?;
        let r = request.into_inner();
        if !r.return_mean.is_finite() || !r.return_std.is_finite() {
            metrics::reported(None);
            return Err(Status::invalid_argument(
                "fields `return_mean`/`return_std`: must be finite",
            ));
        }
        let return_mean = r.return_mean;
        self.store
            .report(r)
            .inspect_err(|_| metrics::reported(None))?;
        metrics::reported(Some(return_mean));
        Ok(Response::new(ReportAck {}))
    }

    async fn list_evals(
        &self,
        request: Request<ListEvalsRequest>,
    ) -> Result<Response<EvalList>, Status> {
        self.gate.check(
            request.metadata(),
            "sebulba.v1.ParameterServer/ListEvals",
            READERS,
        )?;
        let r = request.into_inner();
        Ok(Response::new(EvalList {
            reports: self.store.reports(&r.run_id, r.after_version),
        }))
    }

    async fn past_versions(
        &self,
        request: Request<PastRequest>,
    ) -> Result<Response<PastList>, Status> {
        self.gate.check(
            request.metadata(),
            "sebulba.v1.ParameterServer/PastVersions",
            READERS,
        )?;
        Ok(Response::new(PastList {
            versions: self.store.past_versions(&request.get_ref().run_id),
        }))
    }

    async fn version(&self, request: Request<VersionRequest>) -> Result<Response<Weights>, Status> {
        self.gate.check(
            request.metadata(),
            "sebulba.v1.ParameterServer/Version",
            READERS,
        )?;
        let r = request.get_ref();
        let w = self.store.version(&r.run_id, r.version)?;
        Ok(Response::new((*w).clone()))
    }
}

/// Serves the parameter server on `listener` until `shutdown` fires.
pub async fn run(
    listener: TcpListener,
    security: &Security,
    shutdown: CancellationToken,
) -> Result<(), ParamServerError> {
    let local = listener
        .local_addr()
        .map_err(|e| ParamServerError::Transport(e.to_string()))?;
    let gate = security.gate();
    metrics::describe();
    let service = Service {
        store: Arc::new(Store::default()),
        gate: gate.clone(),
    };
    let reflection = sebulba_transport::grpc::reflection()
        .map_err(|e| ParamServerError::Transport(e.to_string()))?;
    let health = sebulba_transport::grpc::health(&["sebulba.v1.ParameterServer"]).await;
    info!(%local, tls = security.tls.identity.is_some(), auth = gate.is_enforcing(), "parameter server serving");
    let server = sebulba_transport::grpc::server(security)
        .map_err(|e| ParamServerError::Transport(e.to_string()))?
        .add_service(health)
        .add_service(InterceptedService::new(reflection, gate.any_class()))
        .add_service(
            ParameterServerServer::new(service)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .serve_with_incoming_shutdown(
            sebulba_transport::grpc::incoming(listener),
            shutdown.clone().cancelled_owned(),
        );
    sebulba_transport::grpc::serve_until(server, shutdown)
        .await
        .map_err(|e| ParamServerError::Transport(e.to_string()))
}

#[cfg(test)]
mod tests;
