//! How sebulba roles reach each other: gRPC channels and listeners
//! ([`grpc`]), tokens and TLS ([`security`]), trace context across processes
//! ([`trace`]), the parameter-server follower ([`follow`]), the tracing /
//! OTLP setup of every process ([`telemetry`]) and its Prometheus endpoint
//! ([`metrics`]), and gRPC messages read off a request body each in an
//! allocation of its own ([`frames`]). The wire format itself is
//! `sebulba-proto`.

pub mod follow;
pub mod frames;
pub mod grpc;
pub mod metrics;
pub mod security;
pub mod telemetry;
pub mod trace;
