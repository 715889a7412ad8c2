//! gRPC plumbing every role shares: client endpoints with deadlines and
//! keep-alives, message-size limits, and the health and reflection services.

use crate::trace::{TraceInterceptor, TracedChannel};
use std::time::Duration;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Endpoint;

/// Largest message any sebulba server or client accepts (a batch of 64 envs x
/// 256 steps of 100-float observations is ~6.6 MB).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// A lazily connecting channel to `url` (`http://host:port`; a bare `host:port`
/// gets `http://`), with connect timeout and HTTP/2 keep-alives so a dead peer
/// is noticed, carrying the caller's trace context on every call.
pub fn channel(url: &str) -> Result<TracedChannel, tonic::transport::Error> {
    let url = if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    };
    Ok(Endpoint::from_shared(url)?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(20))
        .keep_alive_while_idle(true)
        .connect_lazy())
    .map(|ch| InterceptedService::new(ch, TraceInterceptor))
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
        .register_encoded_file_descriptor_set(crate::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
}

/// Asks `url`'s `grpc.health.v1` whether `service` ("" = the whole server) is
/// serving: what container healthchecks run (`sebulba health`).
pub async fn check_health(url: &str, service: &str, timeout: Duration) -> Result<(), String> {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let channel = channel(url).map_err(|e| format!("{url}: {e}"))?;
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
