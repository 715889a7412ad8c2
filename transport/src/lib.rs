//! How sebulba roles reach each other: gRPC channels and listeners
//! ([`grpc`]), tokens and TLS ([`security`]), trace context across processes
//! ([`trace`]), the parameter-server follower ([`follow`]) and the tracing /
//! OTLP setup of every process ([`telemetry`]). The wire format itself is
//! `sebulba-proto`.

pub mod follow;
pub mod grpc;
pub mod security;
pub mod telemetry;
pub mod trace;
