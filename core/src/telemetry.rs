//! Logging setup shared by every role: `tracing` with `RUST_LOG`-style filtering
//! (default `info`), written to stderr.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber once; later calls are no-ops (tests call it often).
pub fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        // Colour codes only on a terminal: container logs and files stay plain.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
