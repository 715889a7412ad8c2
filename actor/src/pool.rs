//! The pool of past versions an actor seats opponents with
//! (`selfplay.past_fraction`), followed from the parameter server: the
//! server decides which versions it keeps (`Weights.past_keep`), so every
//! actor, a newly joined one included, draws from the same recent history.

use sebulba_proto::parameter_server_client::ParameterServerClient;
use sebulba_proto::{PastRequest, VersionRequest, Weights};
use sebulba_transport::grpc::{MAX_MESSAGE_BYTES, SecureChannel, channel};
use sebulba_transport::security::{Class, Security};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// The past versions held, oldest first.
pub(crate) type Pool = Arc<Vec<Arc<Weights>>>;

/// The most past versions held.
const MAX_HELD: usize = 32;

/// How often the pool is listed: it changes every `past_stride` versions.
const POLL: Duration = Duration::from_secs(5);

/// Keeps `tx` holding `run_id`'s pool until `stop` fires: lists it every
/// [`POLL`], fetches the versions not held yet and forgets the ones gone.
/// A failed call is retried at the next poll; the pool held stays in use.
pub(crate) async fn follow_pool(
    url: String,
    security: Security,
    run_id: String,
    tx: watch::Sender<Pool>,
    stop: CancellationToken,
) {
    let mut held: BTreeMap<u64, Arc<Weights>> = BTreeMap::new();
    let mut client = None;
    let mut failures = 0u32;
    loop {
        match refresh(&url, &security, &run_id, &mut client, &mut held).await {
            Ok(true) => {
                failures = 0;
                tx.send_replace(Arc::new(held.values().cloned().collect()));
            }
            Ok(false) => failures = 0,
            Err(e) => {
                client = None;
                failures += 1;
                if failures == 3 {
                    warn!(%url, "cannot read the pool of past versions ({e}); keeping the {} held", held.len());
                } else {
                    debug!(%url, "pool of past versions: {e}");
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// One listing of the pool; true when what is held changed.
async fn refresh(
    url: &str,
    security: &Security,
    run_id: &str,
    client: &mut Option<ParameterServerClient<SecureChannel>>,
    held: &mut BTreeMap<u64, Arc<Weights>>,
) -> Result<bool, String> {
    if client.is_none() {
        let ch = channel(url, security, Some(Class::Actor)).map_err(|e| e.to_string())?;
        *client = Some(ParameterServerClient::new(ch).max_decoding_message_size(MAX_MESSAGE_BYTES));
    }
    let Some(c) = client.as_mut() else {
        return Err("no client".into());
    };
    let listed = c
        .past_versions(PastRequest {
            run_id: run_id.into(),
        })
        .await
        .map_err(|s| s.message().to_string())?
        .into_inner()
        .versions;
    // The server keeps at most 32; hold no more whatever it lists.
    let listed = &listed[listed.len().saturating_sub(MAX_HELD)..];
    let before = held.len();
    held.retain(|v, _| listed.contains(v));
    let mut changed = held.len() != before;
    let missing: Vec<u64> = listed
        .iter()
        .copied()
        .filter(|v| !held.contains_key(v))
        .collect();
    for version in missing {
        let request = VersionRequest {
            run_id: run_id.into(),
            version,
        };
        match c.version(request).await {
            Ok(w) => {
                let w = w.into_inner();
                if w.version == version && w.run_id == run_id {
                    held.insert(version, Arc::new(w));
                    changed = true;
                }
            }
            // Evicted since the listing: the next one will not name it.
            Err(s) if s.code() == tonic::Code::NotFound => {}
            Err(s) => return Err(s.message().to_string()),
        }
    }
    Ok(changed)
}
