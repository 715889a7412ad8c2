//! Following the parameter server: keep a `Watch` stream open and hand the newest
//! weights to a `tokio::sync::watch` channel. If the server goes away the
//! follower reconnects with backoff; the last weights stay in the channel, so
//! actors keep acting with them meanwhile.

use crate::grpc::{MAX_MESSAGE_BYTES, channel};
use crate::security::{Class, Security, credentials_refused};
use sebulba_proto::parameter_server_client::ParameterServerClient;
use sebulba_proto::{WatchRequest, Weights};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, warn};

/// Runs until `shutdown` fires or every receiver of `tx` is gone (`Ok`), or
/// until the server refuses this follower's credentials (`Err`: retrying cannot
/// help; dropping `tx` tells the receivers).
pub async fn follow_weights(
    url: String,
    security: Security,
    class: Class,
    tx: watch::Sender<Option<Arc<Weights>>>,
    shutdown: CancellationToken,
) -> Result<(), tonic::Status> {
    let new_backoff = || crate::grpc::backoff(Duration::from_millis(100), Duration::from_secs(5));
    let mut delays = new_backoff();
    let mut failures = 0u32;
    loop {
        let attempt = async {
            let ch = channel(&url, &security, Some(class))
                .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
            let mut client =
                ParameterServerClient::new(ch).max_decoding_message_size(MAX_MESSAGE_BYTES);
            let mut stream = client.watch(WatchRequest {}).await?.into_inner();
            while let Some(w) = stream.message().await? {
                failures = 0;
                debug!(version = w.version, "new weights");
                if tx.send(Some(Arc::new(w))).is_err() {
                    return Ok(true);
                }
            }
            Ok::<bool, tonic::Status>(false)
        }
        // One span per connection: it parents the param-server's `Watch` span.
        .instrument(tracing::info_span!("watch", %url));
        let result = tokio::select! {
            r = attempt => r,
            _ = shutdown.cancelled() => return Ok(()),
        };
        if failures == 0 {
            delays = new_backoff();
        }
        failures += 1;
        let delay = delays.next().unwrap_or(Duration::from_secs(5));
        match result {
            Ok(true) => return Ok(()),
            // Refused credentials, or a channel that cannot be built (a bad URL).
            Err(s) if credentials_refused(&s) || s.code() == tonic::Code::InvalidArgument => {
                error!(%url, "parameter-server watch refused: {}", s.message());
                return Err(s);
            }
            Ok(false) => warn!(%url, "parameter-server watch ended; reconnecting"),
            // The first failures are normal while the server starts.
            Err(s) if failures > 5 => {
                warn!(%url, "parameter-server watch failed: {}; retrying in {delay:?}", s.message())
            }
            Err(_) => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return Ok(()),
        }
    }
}
