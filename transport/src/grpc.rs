//! gRPC plumbing every role shares: client endpoints with deadlines and
//! keep-alives, message-size limits, and the health and reflection services.

use crate::security::{Class, Security, SecurityError};
use std::time::Duration;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint, Server, ServerTlsConfig};

/// Largest message any sebulba server or client accepts (a batch of 64 envs x
/// 256 steps of 100-float observations is ~6.6 MB).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Deadline of every call's response (headers, for streams): a peer that
/// accepted the connection but never answers is given up on.
pub const CALL_DEADLINE: Duration = Duration::from_secs(30);

/// A client channel: every call carries the caller's trace context and, when
/// configured, its class's bearer token.
pub type SecureChannel = InterceptedService<Channel, CallInterceptor>;

/// Client side of every call: trace context and `authorization` metadata.
#[derive(Clone, Default)]
pub struct CallInterceptor {
    bearer: Option<AsciiMetadataValue>,
}

impl tonic::service::Interceptor for CallInterceptor {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        crate::trace::inject_current(req.metadata_mut());
        if let Some(b) = &self.bearer {
            req.metadata_mut().insert("authorization", b.clone());
        }
        Ok(req)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error(transparent)]
    Security(#[from] SecurityError),
    #[error("{url}: {source}")]
    Transport {
        url: String,
        source: tonic::transport::Error,
    },
}

/// The URL to dial: a bare `host:port` gets `https://` when TLS is on and
/// `http://` otherwise; an explicit scheme must agree with the TLS setting, so
/// a typo never silently downgrades to plain text.
pub fn endpoint_url(url: &str, tls: bool) -> Result<String, SecurityError> {
    let invalid = |message: String| SecurityError::Invalid {
        field: "url",
        message,
    };
    match url.split_once("://") {
        None if tls => Ok(format!("https://{url}")),
        None => Ok(format!("http://{url}")),
        Some(("https", _)) if tls => Ok(url.to_string()),
        Some(("http", _)) if !tls => Ok(url.to_string()),
        Some(("http", _)) => Err(invalid(format!(
            "{url} is plain http but TLS is on (--tls-ca): use https://"
        ))),
        Some(("https", _)) => Err(invalid(format!(
            "{url} is https but no CA is given to verify it (--tls-ca)"
        ))),
        Some((scheme, _)) => Err(invalid(format!("{url}: unknown scheme `{scheme}`"))),
    }
}

/// A lazily connecting channel to `url`, speaking TLS when `security` has a CA
/// and sending `class`'s token when one is configured; with connect timeout, a
/// deadline per call, and TCP and HTTP/2 keep-alives so a dead peer is noticed.
pub fn channel(
    url: &str,
    security: &Security,
    class: Option<Class>,
) -> Result<SecureChannel, ChannelError> {
    let tls = security.tls.ca.as_ref();
    let url = endpoint_url(url, tls.is_some())?;
    let transport = |source| ChannelError::Transport {
        url: url.clone(),
        source,
    };
    let mut endpoint = Endpoint::from_shared(url.clone())
        .map_err(transport)?
        .connect_timeout(Duration::from_secs(5))
        .timeout(CALL_DEADLINE)
        .tcp_nodelay(true)
        .tcp_keepalive(Some(Duration::from_secs(30)))
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(20))
        .keep_alive_while_idle(true);
    if let Some(ca) = tls {
        let mut config = ClientTlsConfig::new().ca_certificate(ca.clone());
        if let Some(domain) = &security.tls.domain {
            config = config.domain_name(domain.clone());
        }
        endpoint = endpoint.tls_config(config).map_err(transport)?;
    }
    let bearer = match class.and_then(|c| security.tokens.get(c)) {
        Some(token) => {
            let mut v: AsciiMetadataValue = MetadataValue::try_from(format!("Bearer {token}"))
                .map_err(|_| SecurityError::Invalid {
                    field: "token",
                    message: "not sendable as a header".into(),
                })?;
            // Never indexed by HPACK, never printed by header debug output.
            v.set_sensitive(true);
            Some(v)
        }
        None => None,
    };
    Ok(InterceptedService::new(
        endpoint.connect_lazy(),
        CallInterceptor { bearer },
    ))
}

/// A bound listener as a server's connection stream, with TCP_NODELAY and
/// keep-alive set on every accepted socket. (`Server::tcp_nodelay` does not
/// reach sockets passed in this way: without this, Nagle's algorithm against
/// delayed ACKs held small responses, such as a Publish reply, for 40 ms.)
pub fn incoming(listener: tokio::net::TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(Duration::from_secs(30)))
}

/// The server builder every role uses: request spans, TCP and HTTP/2
/// keep-alives, and TLS when `security` has a certificate. Serve it with
/// [`incoming`] (or a bound address).
pub fn server(security: &Security) -> Result<Server, tonic::transport::Error> {
    let builder = Server::builder()
        .trace_fn(crate::trace::server_span)
        .tcp_nodelay(true)
        .tcp_keepalive(Some(Duration::from_secs(30)))
        .http2_keepalive_interval(Some(Duration::from_secs(10)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)));
    match &security.tls.identity {
        Some(identity) => builder.tls_config(ServerTlsConfig::new().identity(identity.clone())),
        None => Ok(builder),
    }
}

/// How long a server waits, once told to stop, for its open connections to
/// finish before it drops them: a silent or half-open connection must not
/// hold a process past SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Runs `serve` (a server with graceful shutdown on `shutdown`) until it ends,
/// or until [`SHUTDOWN_GRACE`] after `shutdown` fired, whichever is first;
/// dropping the server then closes every connection it still holds.
pub async fn serve_until<E>(
    serve: impl std::future::Future<Output = Result<(), E>>,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), E> {
    tokio::pin!(serve);
    tokio::select! {
        r = &mut serve => r,
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {
            tracing::warn!("connections still open {SHUTDOWN_GRACE:?} after shutdown: closing them");
            Ok(())
        }
    }
}

/// Jittered exponential backoff delays from `min` to `max`, without end: every
/// client retry loop (actors rejoining, followers re-watching, publishing) uses it.
pub fn backoff(min: Duration, max: Duration) -> impl Iterator<Item = Duration> + Send {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(max)
        .with_jitter()
        .without_max_times()
        .build()
}

/// The `grpc.health.v1` service, with `services` marked serving.
pub async fn health(
    services: &[&str],
) -> tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health> {
    let (reporter, service) = tonic_health::server::health_reporter();
    for name in services {
        reporter
            .set_service_status(*name, tonic_health::ServingStatus::Serving)
            .await;
    }
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    service
}

/// gRPC reflection (v1) over sebulba.proto and the health service.
pub fn reflection() -> Result<
    tonic_reflection::server::v1::ServerReflectionServer<
        impl tonic_reflection::server::v1::ServerReflection,
    >,
    tonic_reflection::server::Error,
> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(sebulba_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
}

/// Asks `url`'s `grpc.health.v1` whether `service` ("" = the whole server) is
/// serving: what container healthchecks run (`sebulba health`).
/// Health is served without a token (probes carry none; it reveals only
/// SERVING), but over TLS when the server speaks it.
pub async fn check_health(
    url: &str,
    service: &str,
    timeout: Duration,
    security: &Security,
) -> Result<(), String> {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let channel = channel(url, security, None).map_err(|e| format!("{url}: {e}"))?;
    let mut client = HealthClient::new(channel);
    let request = HealthCheckRequest {
        service: service.to_string(),
    };
    let response = tokio::time::timeout(timeout, client.check(request))
        .await
        .map_err(|_| format!("{url}: no answer within {timeout:?}"))?
        .map_err(|s| format!("{url}: {} ({:?})", s.message(), s.code()))?;
    match ServingStatus::try_from(response.into_inner().status) {
        Ok(ServingStatus::Serving) => Ok(()),
        other => Err(format!("{url}: status {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_get_the_scheme_tls_implies_and_a_mismatch_is_refused() {
        assert_eq!(endpoint_url("h:1", false).ok(), Some("http://h:1".into()));
        assert_eq!(endpoint_url("h:1", true).ok(), Some("https://h:1".into()));
        assert_eq!(
            endpoint_url("https://h:1", true).ok(),
            Some("https://h:1".into())
        );
        assert_eq!(
            endpoint_url("http://h:1", false).ok(),
            Some("http://h:1".into())
        );
        for (url, tls) in [
            ("http://h:1", true),
            ("https://h:1", false),
            ("ftp://h:1", false),
        ] {
            let e = endpoint_url(url, tls).expect_err(url).to_string();
            assert!(e.starts_with("url:"), "{e}");
        }
    }
}
