//! Publishing a version on the runtime while the update loop trains the next
//! one. Waiting for each publish to be acknowledged cost the update thread a
//! gRPC round trip through runtime threads busy stepping environments
//! (measured in docs/performance.md); it waits only for the previous
//! version's publish, before starting the next, so versions still reach the
//! parameter server one at a time and in order.

use crate::error::LearnerError;
use crate::publish::Publisher;
use crate::state::Shared;
use sebulba_proto::Weights;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Publishes `weights` as its version, or above it when the parameter server
/// already holds that version of this run (someone else published there, and
/// the run goes on above them); returns the version published. `stop` ends a
/// publish still retrying (the version is then not published).
pub async fn publish(
    publisher: Publisher,
    shared: Arc<Shared>,
    stop: CancellationToken,
    mut weights: Weights,
) -> Result<u64, LearnerError> {
    for _ in 0..3 {
        // Accept batches of this version before actors can see it.
        shared.version.store(weights.version, Ordering::Release);
        let version = weights.version;
        let status = tokio::select! {
            r = publisher.publish(weights.clone(), Duration::from_secs(60)) => match r {
                Ok(()) => {
                    shared.restarting.store(false, Ordering::Release);
                    return Ok(version);
                }
                Err(status) => status,
            },
            () = stop.cancelled() => {
                warn!(version, "shutdown while publishing: version not published");
                return Ok(version);
            }
        };
        let held = match status.code() {
            tonic::Code::FailedPrecondition => publisher.latest_version(&weights.run_id).await,
            _ => None,
        };
        let Some(held) = held.filter(|&held| held >= version) else {
            return Err(LearnerError::Publish { version, status });
        };
        warn!(
            version,
            held,
            "the parameter server holds a newer version of this run that this learner did not publish; going on above it"
        );
        weights.version = held + 1;
    }
    Err(LearnerError::Publish {
        version: weights.version,
        status: tonic::Status::aborted("versions kept being taken by another publisher"),
    })
}
