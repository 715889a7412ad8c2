//! The parameter server: a versioned weight store. The learner publishes; actors
//! and the evaluator follow with `Watch` (the current version at once, then each
//! newer one) or ask for the `Latest`. The evaluator files its scores here so the
//! learner's summary can read them.

use dashmap::DashMap;
use sebulba_proto::parameter_server_server::{ParameterServer, ParameterServerServer};
use sebulba_proto::{
    EvalList, EvalReport, LatestRequest, ListEvalsRequest, PublishAck, ReportAck, WatchRequest,
    Weights,
};
use sebulba_transport::grpc::MAX_MESSAGE_BYTES;
use sebulba_transport::security::{Class, Gate, Security};
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tokio_stream::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};
use tracing::{debug, info};

/// Versions kept for `Latest` lookups beyond the newest (older ones are evicted).
const KEEP_VERSIONS: u64 = 4;

#[derive(Debug, thiserror::Error)]
pub enum ParamServerError {
    #[error("transport: {0}")]
    Transport(String),
}

pub struct Store {
    versions: DashMap<u64, Arc<Weights>>,
    latest: watch::Sender<Option<Arc<Weights>>>,
    evals: DashMap<u64, EvalReport>,
}

impl Default for Store {
    fn default() -> Self {
        Self {
            versions: DashMap::new(),
            latest: watch::channel(None).0,
            evals: DashMap::new(),
        }
    }
}

impl Store {
    /// Stores `w` if it is newer than everything held; returns the newest version.
    pub fn publish(&self, w: Weights) -> Result<u64, Status> {
        if w.safetensors.is_empty() {
            return Err(Status::invalid_argument("field `safetensors`: empty"));
        }
        let w = Arc::new(w);
        let mut accepted = Ok(w.version);
        self.latest.send_if_modified(|cur| match cur {
            Some(c) if c.version >= w.version => {
                accepted = Err(Status::failed_precondition(format!(
                    "field `version`: {} is not newer than the stored {}",
                    w.version, c.version
                )));
                false
            }
            _ => {
                *cur = Some(w.clone());
                true
            }
        });
        let v = accepted?;
        self.versions.insert(v, w);
        self.versions.retain(|&k, _| k + KEEP_VERSIONS >= v);
        Ok(v)
    }

    pub fn latest(&self) -> Option<Arc<Weights>> {
        self.latest.borrow().clone()
    }
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
        let v = self.store.publish(w)?;
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
        match self.store.latest() {
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
        let rx = self.store.latest.subscribe();
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
            return Err(Status::invalid_argument(
                "fields `return_mean`/`return_std`: must be finite",
            ));
        }
        self.store.evals.insert(r.version, r);
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
        let mut reports: Vec<EvalReport> = self.store.evals.iter().map(|e| *e.value()).collect();
        reports.sort_by_key(|r| r.version);
        Ok(Response::new(EvalList { reports }))
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
    let service = Service {
        store: Arc::new(Store::default()),
        gate: gate.clone(),
    };
    let reflection = sebulba_transport::grpc::reflection()
        .map_err(|e| ParamServerError::Transport(e.to_string()))?;
    let health = sebulba_transport::grpc::health(&["sebulba.v1.ParameterServer"]).await;
    info!(%local, tls = security.tls.identity.is_some(), auth = gate.is_enforcing(), "parameter server serving");
    sebulba_transport::grpc::server(security)
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
            shutdown.cancelled_owned(),
        )
        .await
        .map_err(|e| ParamServerError::Transport(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(version: u64) -> Weights {
        Weights {
            version,
            safetensors: vec![1u8, 2, 3].into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn versions_only_move_forward_and_watchers_get_the_current_one_first() {
        let svc = Service {
            store: Arc::new(Store::default()),
            gate: Gate::default(),
        };
        assert_eq!(
            svc.latest(Request::new(LatestRequest {}))
                .await
                .unwrap_err()
                .code(),
            tonic::Code::NotFound
        );
        svc.publish(Request::new(w(0))).await.unwrap();
        svc.publish(Request::new(w(1))).await.unwrap();
        let e = svc.publish(Request::new(w(1))).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        assert!(e.message().contains("`version`"));
        let mut stream = svc
            .watch(Request::new(WatchRequest {}))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(stream.next().await.unwrap().unwrap().version, 1);
        svc.publish(Request::new(w(5))).await.unwrap();
        assert_eq!(stream.next().await.unwrap().unwrap().version, 5);
        assert_eq!(
            svc.latest(Request::new(LatestRequest {}))
                .await
                .unwrap()
                .into_inner()
                .version,
            5
        );
        assert!(svc.store.versions.len() as u64 <= KEEP_VERSIONS + 1);
        let empty = Weights {
            version: 9,
            ..Default::default()
        };
        assert_eq!(
            svc.publish(Request::new(empty)).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }

    #[tokio::test]
    async fn eval_reports_are_listed_in_version_order() {
        let svc = Service {
            store: Arc::new(Store::default()),
            gate: Gate::default(),
        };
        for v in [3u64, 1, 2] {
            svc.report_eval(Request::new(EvalReport {
                version: v,
                return_mean: v as f64,
                ..Default::default()
            }))
            .await
            .unwrap();
        }
        let nan = EvalReport {
            version: 4,
            return_mean: f64::NAN,
            ..Default::default()
        };
        assert_eq!(
            svc.report_eval(Request::new(nan)).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        let list = svc
            .list_evals(Request::new(ListEvalsRequest {}))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            list.reports.iter().map(|r| r.version).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
    }
}
