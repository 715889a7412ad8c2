//! The arguments of the commands that are tools rather than services: a
//! health check, certificates, a run's status, learning curves, export.

use super::SecurityArgs;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Parameter server address, e.g. http://localhost:50052.
    #[arg(long, env = "SEBULBA_PARAM_SERVER")]
    pub param_server: String,
    /// Seconds between the two reads that give the current steps/s (0: one read).
    #[arg(long, default_value_t = 3.0, value_parser = parse_sample_secs)]
    pub sample_secs: f64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub security: SecurityArgs,
}

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// Run directories (each with `config.toml` and `eval.jsonl` or `metrics.jsonl`).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// The PNG to write.
    #[arg(long, default_value = "curves.png")]
    pub out: PathBuf,
    /// Plot the training episodes' mean return (`metrics.jsonl`) instead of
    /// the deterministic evaluations (`eval.jsonl`).
    #[arg(long, conflicts_with = "opponent")]
    pub train: bool,
    /// For a game: plot the win rate against this evaluation opponent
    /// (`random`, `greedy`, or `checkpoint`, the earlier version), from
    /// `eval.jsonl`'s matches. Without it a game plots `return_mean`, which
    /// is the win rate against `greedy`.
    #[arg(long)]
    pub opponent: Option<String>,
    /// Title above the panels (default: the environments plotted).
    #[arg(long)]
    pub title: Option<String>,
    /// Names for the settings, one per setting in the order their first run
    /// is given (repeatable; default: the env and the keys that differ).
    #[arg(long)]
    pub label: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// A run directory, or a weights file sebulba published (`*.safetensors`).
    pub path: PathBuf,
    /// What to write: `torch`, a directory PyTorch loads without sebulba
    /// (`model.safetensors` in PyTorch's layouts, `network.json`,
    /// `sebulba_policy.py`); `onnx`, `policy.onnx` for onnxruntime and
    /// other ONNX runtimes (`check_onnx.py` runs it). Each with
    /// `check.safetensors`: sebulba's own outputs for a few observations.
    #[arg(long, value_enum, default_value = "torch")]
    pub format: ExportFormat,
    /// Which of a run directory's weights: `final` or `best`.
    #[arg(long, value_enum, default_value = "final")]
    pub weights: WhichWeights,
    /// Where to write (default `<run dir>/export-<format>`, or beside the
    /// weights file).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// A run directory (its `config.toml` and weights).
    pub run_dir: PathBuf,
    /// Which weights play: `final` or `best`.
    #[arg(long, value_enum, default_value = "final")]
    pub weights: WhichWeights,
    /// Episodes to play (default: the run's `eval.final_episodes`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub episodes: Option<u64>,
    /// Print one JSON line instead of text.
    #[arg(long)]
    pub json: bool,
    /// Film the first episode into this file: `.mp4` (H.264, needs
    /// `ffmpeg` on the PATH) or `.gif`.
    #[arg(long, conflicts_with = "live")]
    pub out: Option<PathBuf>,
    /// Draw the first episode in the terminal as it plays (24-bit colour).
    #[arg(long, conflicts_with = "json")]
    pub live: bool,
    /// Frames a second `--live` shows.
    #[arg(long, default_value_t = 10, requires = "live",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub fps: u32,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    Torch,
    Onnx,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhichWeights {
    Final,
    Best,
}

impl WhichWeights {
    /// The file in a run directory.
    pub fn file_name(self) -> &'static str {
        match self {
            WhichWeights::Final => "final.safetensors",
            WhichWeights::Best => "best.safetensors",
        }
    }
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The sweep file: `env`, `seeds`, optional `config`, `set` and `target`,
    /// and one `[[setting]]` (`name`, `set`) per point (docs/operations.md).
    pub spec: PathBuf,
    /// Where the runs, `summary.md` and `curves.png` go (default
    /// `runs/sweep-<the sweep file's name>`). Runs finished there earlier are
    /// kept, not run again.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Runs at once. Each local run uses about `run.local_actors` + 1 cores.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub jobs: u64,
}

#[derive(Args, Debug)]
pub struct CertsArgs {
    /// Directory to write into (created if missing).
    #[arg(long, default_value = "deploy/certs")]
    pub out: PathBuf,
    /// Names and addresses servers are reached by (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "learner,param-server,localhost,127.0.0.1"
    )]
    pub names: Vec<String>,
}

#[derive(Args, Debug)]
pub struct HealthArgs {
    /// Server address, `host:port` or `http://host:port`.
    #[arg(long, env = "SEBULBA_HEALTH_ADDR", default_value = "127.0.0.1:50051")]
    pub addr: String,
    /// Service name to ask about ("" = the whole server).
    #[arg(long, default_value = "")]
    pub service: String,
    #[arg(long, default_value_t = 3)]
    pub timeout_secs: u64,
    #[command(flatten)]
    pub security: SecurityArgs,
}

/// `status --sample-secs`: 0 to 600 seconds.
fn parse_sample_secs(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.0..=600.0).contains(&s) => Ok(s),
        _ => Err(format!("expected seconds from 0 to 600, got `{text}`")),
    }
}

#[derive(Args, Debug)]
pub struct TrackArgs {
    /// The run directory (with its `config.toml` and `metrics.jsonl`).
    pub run_dir: PathBuf,
    #[command(flatten)]
    pub track: super::TrackFlag,
}
