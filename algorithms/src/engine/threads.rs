//! How many threads the fused engine spreads a minibatch step over when
//! `learner.threads` is 0 (auto).

use sebulba_core::model::ModelSpec;

/// The multiply-adds of a minibatch's forward pass from which `learner.threads
/// = 0` splits it over every core: below it the hand-over between threads
/// (tens of microseconds a step) eats what a second core saves, and in local
/// mode the actors want that core. CartPole's CleanRL settings (128 rows of a
/// 64x64 network, 1.2M) run faster on one thread end to end; Big Two's
/// preset (512 rows of 256x256, 380M) gains from two.
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
