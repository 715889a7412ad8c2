//! What a run writes into its directory: files written atomically, append-only
//! JSON lines, TensorBoard event files that mirror the JSON lines, and videos. The
//! learner and the evaluator write through it; which run a directory holds is
//! the learner's concern (`learner/src/run_dir.rs`).

pub mod files;
pub mod tensorboard;
pub mod video;

/// Where experiment trackers keep what they have delivered of the run
/// (`sebulba-tracking`); `--fresh` removes it with the rest.
pub const TRACKING_DIR: &str = "tracking";
