//! Publishing weights to the parameter server, and reading evaluation reports
//! back for the summary. A param-server hiccup is retried, never fatal to training.

use sebulba_proto::parameter_server_client::ParameterServerClient;
use sebulba_proto::{EvalReport, LatestRequest, ListEvalsRequest, Weights};
use sebulba_transport::grpc::{ChannelError, MAX_MESSAGE_BYTES, SecureChannel, channel};
use sebulba_transport::security::{Class, Security};
use std::time::{Duration, Instant};
use tracing::warn;

#[derive(Clone)]
pub struct Publisher {
    client: ParameterServerClient<SecureChannel>,
}

impl Publisher {
    pub fn new(url: &str, security: &Security) -> Result<Self, ChannelError> {
        let client = ParameterServerClient::new(channel(url, security, Some(Class::Learner))?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Self { client })
    }

    /// Publishes `weights`, retrying with backoff for up to `patience`.
    pub async fn publish(&self, weights: Weights, patience: Duration) -> Result<(), tonic::Status> {
        let start = Instant::now();
        let mut delays =
            sebulba_transport::grpc::backoff(Duration::from_millis(50), Duration::from_secs(2));
        loop {
            let mut client = self.client.clone();
            let mut req = tonic::Request::new(weights.clone());
            req.set_timeout(Duration::from_secs(10));
            match client.publish(req).await {
                Ok(_) => return Ok(()),
                // Retrying cannot fix a refused version or refused credentials.
                Err(e)
                    if e.code() == tonic::Code::FailedPrecondition
                        || sebulba_transport::security::credentials_refused(&e) =>
                {
                    return Err(e);
                }
                Err(e) if start.elapsed() >= patience => return Err(e),
                Err(e) => {
                    let delay = delays.next().unwrap_or(Duration::from_secs(2));
                    warn!(
                        version = weights.version,
                        "publish failed ({}), retrying in {delay:?}",
                        e.message()
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// The newest version of run `run_id` the parameter server holds (`None`:
    /// none, another run's, or no answer).
    #[tracing::instrument(name = "latest", skip_all)]
    pub async fn latest_version(&self, run_id: &str) -> Option<u64> {
        let mut client = self.client.clone();
        let mut req = tonic::Request::new(LatestRequest {
            without_weights: true,
        });
        req.set_timeout(Duration::from_secs(10));
        match client.latest(req).await {
            Ok(w) if w.get_ref().run_id == run_id => Some(w.into_inner().version),
            Ok(_) => None,
            Err(e) if e.code() == tonic::Code::NotFound => None,
            Err(e) => {
                warn!(
                    "asking the parameter server for its latest version: {}",
                    e.message()
                );
                None
            }
        }
    }

    /// One page of the evaluation reports the parameter server holds for run
    /// `run_id`: those of versions above `after`, lowest first.
    #[tracing::instrument(name = "list_evals", skip_all)]
    pub async fn evals(
        &self,
        run_id: &str,
        after: Option<u64>,
    ) -> Result<Vec<EvalReport>, tonic::Status> {
        let mut client = self.client.clone();
        let mut req = tonic::Request::new(ListEvalsRequest {
            run_id: run_id.to_string(),
            after_version: after,
        });
        req.set_timeout(Duration::from_secs(10));
        Ok(client.list_evals(req).await?.into_inner().reports)
    }
}
