//! The parameter server: a versioned weight store. The learner publishes; actors
//! and the evaluator follow with `Watch` (the current version at once, then each
//! newer one) or ask for the `Latest`. The evaluator files its scores here so the
//! learner's summary can read them.

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
mod tests {
    use super::*;

    fn w(version: u64) -> Weights {
        on("run-a", version)
    }

    fn on(run: &str, version: u64) -> Weights {
        Weights {
            version,
            run_id: run.into(),
            safetensors: tensors(&[0.5, -1.0]).into(),
            ..Default::default()
        }
    }

    /// A safetensors file with one f32 tensor holding `values`.
    fn tensors(values: &[f32]) -> Vec<u8> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let view = safetensors::tensor::TensorView::new(
            safetensors::Dtype::F32,
            vec![values.len()],
            &bytes,
        )
        .unwrap();
        safetensors::serialize([("w", view)], None).unwrap()
    }

    #[tokio::test]
    async fn garbage_or_non_finite_weights_are_refused() {
        let svc = Service {
            store: Arc::new(Store::default()),
            gate: Gate::default(),
        };
        for (bytes, why) in [
            (vec![1u8, 2, 3], "garbage"),
            (tensors(&[1.0, f32::NAN]), "non-finite"),
            (tensors(&[f32::INFINITY]), "non-finite"),
        ] {
            let mut w = on("run-a", 1);
            w.safetensors = bytes.into();
            let e = svc.publish(Request::new(w)).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{why}");
            assert!(
                e.message().contains("`safetensors`"),
                "{why}: {}",
                e.message()
            );
        }
        assert!(svc.store.latest().is_none());
    }

    #[tokio::test]
    async fn versions_only_move_forward_and_watchers_get_the_current_one_first() {
        let svc = Service {
            store: Arc::new(Store::default()),
            gate: Gate::default(),
        };
        assert_eq!(
            svc.latest(Request::new(LatestRequest::default()))
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
        // A hijack: far ahead of the run, or beyond any sane version.
        for (v, code) in [
            (5 + MAX_VERSION_JUMP + 1, tonic::Code::FailedPrecondition),
            (u64::MAX, tonic::Code::InvalidArgument),
        ] {
            let e = svc.publish(Request::new(w(v))).await.unwrap_err();
            assert_eq!(e.code(), code, "{}", e.message());
            assert!(e.message().contains("field `version`"), "{}", e.message());
        }
        let latest = |without_weights| svc.latest(Request::new(LatestRequest { without_weights }));
        let full = latest(false).await.unwrap().into_inner();
        assert_eq!((full.version, full.run_id.as_str()), (5, "run-a"));
        assert_eq!(full.safetensors, w(5).safetensors);
        let bare = latest(true).await.unwrap().into_inner();
        let expect = Weights {
            safetensors: Default::default(),
            ..full
        };
        assert_eq!(bare, expect, "all but the weights");
        assert!(svc.store.versions.len() as u64 <= store::KEEP_VERSIONS + 1);
        let empty = Weights {
            version: 9,
            ..Default::default()
        };
        assert_eq!(
            svc.publish(Request::new(empty)).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        for bad in ["", "../up", ".hidden", "a/b"] {
            let e = svc.publish(Request::new(on(bad, 9))).await.unwrap_err();
            assert!(
                e.message().contains("field `run_id`"),
                "{bad}: {}",
                e.message()
            );
        }
    }

    #[tokio::test]
    async fn a_new_run_starts_afresh_and_the_old_runs_reports_are_refused() {
        let svc = Service {
            store: Arc::new(Store::default()),
            gate: Gate::default(),
        };
        let report = |run: &str, version| EvalReport {
            version,
            run_id: run.into(),
            ..Default::default()
        };
        svc.publish(Request::new(on("old", 20))).await.unwrap();
        svc.report_eval(Request::new(report("old", 20)))
            .await
            .unwrap();
        // The new run's learner starts at version 0 on a server that held 20.
        svc.publish(Request::new(on("new", 0))).await.unwrap();
        assert_eq!(svc.store.latest().unwrap().run_id, "new");
        assert_eq!(svc.store.versions.len(), 1);
        let e = svc
            .report_eval(Request::new(report("old", 20)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        assert!(svc.store.reports("old", None).is_empty());
        assert!(svc.store.reports("new", None).is_empty());
        svc.report_eval(Request::new(report("new", 0)))
            .await
            .unwrap();
        assert_eq!(svc.store.reports("new", None).len(), 1);
    }

    #[tokio::test]
    async fn eval_reports_are_listed_in_version_order() {
        let svc = Service {
            store: Arc::new(Store::default()),
            gate: Gate::default(),
        };
        svc.publish(Request::new(w(0))).await.unwrap();
        for v in [3u64, 1, 2] {
            svc.report_eval(Request::new(EvalReport {
                version: v,
                return_mean: v as f64,
                run_id: "run-a".into(),
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
            .list_evals(Request::new(ListEvalsRequest {
                run_id: "run-a".into(),
                after_version: None,
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            list.reports.iter().map(|r| r.version).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        let after_1 = svc
            .list_evals(Request::new(ListEvalsRequest {
                run_id: "run-a".into(),
                after_version: Some(1),
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            after_1
                .reports
                .iter()
                .map(|r| r.version)
                .collect::<Vec<_>>(),
            vec![2, 3]
        );
    }

    #[tokio::test]
    async fn reports_are_bounded_and_listed_in_pages() {
        let store = Store::default();
        store.publish(w(0)).unwrap();
        let total = MAX_EVAL_REPORTS as u64 + 500;
        for v in 0..total {
            store
                .report(EvalReport {
                    version: v,
                    run_id: "run-a".into(),
                    ..Default::default()
                })
                .unwrap();
        }
        // Paging from the start reads exactly the newest MAX_EVAL_REPORTS.
        let (mut read, mut after, mut pages) = (Vec::new(), None, 0);
        loop {
            let page = store.reports("run-a", after);
            assert!(page.len() <= MAX_LISTED_REPORTS);
            let Some(last) = page.last() else { break };
            after = Some(last.version);
            read.extend(page.iter().map(|r| r.version));
            pages += 1;
        }
        assert_eq!(read, (500..total).collect::<Vec<_>>());
        assert_eq!(pages, MAX_EVAL_REPORTS.div_ceil(MAX_LISTED_REPORTS));
    }

    #[tokio::test]
    async fn a_games_matches_are_checked_field_by_field() {
        let svc = Service {
            store: Arc::new(Store::default()),
            gate: Gate::default(),
        };
        svc.publish(Request::new(w(0))).await.unwrap();
        let good = sebulba_proto::GameMatch {
            opponent: "greedy".into(),
            games: 10,
            wins: 4,
            win_rate_low: 0.17,
            win_rate_high: 0.69,
            mean_score: -1.5,
        };
        let broken = [
            sebulba_proto::GameMatch {
                wins: 11,
                ..good.clone()
            },
            sebulba_proto::GameMatch {
                win_rate_high: f64::NAN,
                ..good.clone()
            },
            sebulba_proto::GameMatch {
                win_rate_low: 0.8,
                ..good.clone()
            },
            sebulba_proto::GameMatch {
                mean_score: f64::INFINITY,
                ..good.clone()
            },
            sebulba_proto::GameMatch {
                opponent: "x".repeat(65),
                ..good.clone()
            },
        ];
        for (i, m) in broken.into_iter().enumerate() {
            let r = EvalReport {
                version: 4,
                run_id: "run-a".into(),
                matches: vec![good.clone(), m],
                ..Default::default()
            };
            let e = svc.report_eval(Request::new(r)).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "case {i}");
            assert!(
                e.message().contains("matches[1]"),
                "case {i}: {}",
                e.message()
            );
        }
        let nine = EvalReport {
            version: 4,
            run_id: "run-a".into(),
            matches: vec![good.clone(); 9],
            ..Default::default()
        };
        assert!(svc.report_eval(Request::new(nine)).await.is_err());
    }
}
