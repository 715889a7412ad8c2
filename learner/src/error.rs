//! The learner role's one error type, apart from the crate root so the
//! modules that return it import it from where it is defined.

use sebulba_transport::grpc::ChannelError;

use crate::checkpoint;

/// Why the learner role stopped: every failure between the run directory
/// and the last publish, with its source.
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
