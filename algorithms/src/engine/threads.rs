//! How many threads the fused engine spreads a minibatch step over when
//! `learner.threads` is 0 (auto).

use sebulba_core::model::ModelSpec;

/// The multiply-adds of a minibatch's forward pass from which `learner.threads
/// = 0` splits it over every core. The hand-over between the engine's
/// threads is about a microsecond since they spin (`fused::team`), and
/// CartPole's CleanRL-shaped update (128 rows of a 64x64 network, 1.2M) runs
/// 1.1-1.5x faster on two threads alone; but in local mode the actors want
/// the second core, and end to end on two cores it only breaks even. Big
/// Two's preset (512 rows of 256x256, 380M) gains from two.
pub const AUTO_SPLIT_MACS: usize = 8_000_000;

/// Threads for the fused engine when `learner.threads` is 0: every core this
/// process may use when a minibatch of `rows` rows is worth splitting, else one.
pub fn auto_threads(spec: &ModelSpec, rows: usize) -> usize {
    // A row's forward pass multiplies each weight once.
    let weights = sebulba_fused::net::Layout::new(&spec.arch()).len;
    if rows.saturating_mul(weights) < AUTO_SPLIT_MACS {
        return 1;
    }
    cores()
}

/// The cores this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
