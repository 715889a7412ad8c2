//! The learner service: trajectory ingest, the bounded on-policy pipeline,
//! the update loop (calling `sebulba-algorithms` for the arithmetic), weight
//! publishing, checkpoints, metrics and the run summary. [`run`] is the role's entry point; ARCHITECTURE.md walks a batch
//! and an update through the modules below in order.

pub mod accounting;
pub mod actors;
pub mod batch;
pub mod checkpoint;
pub mod deterministic;
pub mod evals;
pub mod metrics;
pub mod progress;
pub mod publish;
pub mod returns;
pub mod run;
pub mod run_dir;
pub mod service;
pub mod state;
pub mod stream;
pub mod summary;
pub mod update;
pub mod validate;

pub use run::{LearnerOptions, run};
pub use run_dir::RunStart;
pub use state::LiveProgress;

use sebulba_transport::grpc::ChannelError;

#[derive(Debug, thiserror::Error)]
pub enum LearnerError {
    #[error(transparent)]
    Config(#[from] sebulba_core::config::ConfigError),
    #[error(transparent)]
    Env(#[from] sebulba_envs::EnvError),
    #[error(transparent)]
    Model(#[from] sebulba_core::model::ModelError),
    #[error("run directory: {0}")]
    Resume(String),
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error(transparent)]
    Weights(#[from] sebulba_core::weights::WeightsError),
    #[error("publishing version {version} to the parameter server: {}", status.message())]
    Publish {
        version: u64,
        #[source]
        status: tonic::Status,
    },
    #[error("parameter server: {0}")]
    Channel(#[from] ChannelError),
    #[error("gRPC server: {0}")]
    Server(#[from] tonic::transport::Error),
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("training diverged: {0}")]
    Diverged(String),
    #[error("the update thread: {0}")]
    Thread(String),
    #[error(transparent)]
    Engine(#[from] sebulba_algorithms::engine::EngineError),
    #[error(transparent)]
    Checkpoint(#[from] checkpoint::CheckpointError),
}
