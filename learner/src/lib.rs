//! The learner service: trajectory ingest, the bounded on-policy pipeline,
//! the update loop (calling `sebulba-algorithms` for the arithmetic), weight
//! publishing, checkpoints, metrics and the run summary. [`run`] is the role's entry point; ARCHITECTURE.md walks a batch
//! and an update through the modules below in order.

pub mod accounting;
pub mod actors;
pub mod batch;
pub mod checkpoint;
pub mod deterministic;
pub mod error;
pub mod evals;
pub mod metrics;
pub mod processes;
pub mod progress;
pub mod publish;
pub mod returns;
pub mod route;
pub mod run;
pub mod run_dir;
pub mod service;
pub mod state;
pub mod stream;
pub mod summary;
pub mod update;
pub mod validate;

pub use error::LearnerError;
pub use run::{LearnerOptions, run};
pub use run_dir::RunStart;
pub use state::LiveProgress;
