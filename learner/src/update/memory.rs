//! What the update loop holds in memory as it ends: the summary's `memory`
//! section.

use super::UpdateLoop;
use prost::Message as _;
use sebulba_algorithms::UpdateRule;

/// Bytes the update loop holds (the summary's `memory` section), and the
/// process's as the loop ends (its engine still allocated).
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopMemory {
    /// Resident bytes of the process.
    pub rss: Option<u64>,
    /// The allocator's account of the process.
    pub heap: Option<sebulba_core::memory::Heap>,
    /// The engine: parameters, Adam's moments, gradients and activations;
    /// with the rule's copy of the parameters (DQN's target network).
    pub engine: u64,
    /// The rule's own: DQN's replay memory.
    pub replay: u64,
    /// Versions held back by `run.forced_lag`.
    pub held_versions: u64,
}

impl UpdateLoop {
    /// What the loop holds now, in bytes.
    pub(super) fn memory(&self, rule: &UpdateRule) -> LoopMemory {
        LoopMemory {
            rss: sebulba_core::memory::rss_bytes(),
            heap: sebulba_core::memory::heap(),
            engine: self.trainer.memory_bytes() + rule.target_bytes(),
            replay: rule.memory_bytes(),
            held_versions: self.held.iter().map(|w| w.encoded_len() as u64).sum(),
        }
    }
}
