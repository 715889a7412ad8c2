//! The run's `summary.json`.

use crate::accounting::BatchCounts;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub run_id: String,
    pub env_id: String,
    pub seed: u64,
    pub env_steps: u64,
    pub wall_seconds: f64,
    pub steps_per_second: f64,
    /// Learner segments the run took (1, plus one per resume); the counters
    /// and `wall_seconds` cover them all.
    pub segments: u32,
    /// The budget was reached: `run.total_steps`, or `run.time_limit_secs`
    /// when that came first (`env_steps` is then below the step budget);
    /// false: stopped before it.
    pub completed: bool,
    pub updates: u64,
    pub final_version: u64,
    /// Mean return of the final version's evaluation (None if no evaluation
    /// came, or the run stopped before its budget): over its finished
    /// episodes, or, where none finished, its cut episodes' returns so far.
    pub final_eval_return_mean: Option<f64>,
    /// The final evaluation's episodes finished, of those it set out to
    /// play, and why the rest were cut (`max_steps`, `shutdown`; absent
    /// when none was).
    pub final_eval_episodes: Option<u32>,
    pub final_eval_episodes_asked: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_eval_cut_by: Option<String>,
    pub best_eval_return_mean: Option<f64>,
    pub best_eval_version: Option<u64>,
    /// A game's evaluation matches of the final and the best version (win
    /// rates with 95% intervals, mean scores); absent for other envs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub final_eval_matches: Vec<crate::evals::MatchScore>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub best_eval_matches: Vec<crate::evals::MatchScore>,
    /// The newest evaluation filed, whether or not the run completed.
    pub latest_eval_return_mean: Option<f64>,
    pub latest_eval_version: Option<u64>,
    /// Mean return of the last finished training episodes (at most
    /// `returns::KEPT`; whole games at the raw score for Atari), and how many.
    pub train_return_mean: Option<f64>,
    pub train_episodes: usize,
    /// What evaluation cost in CPU time, beside the whole run's.
    pub eval_cpu: EvalCpu,
    pub batches: BatchCounts,
    /// Each actor's counts: the live ones and the last
    /// `learner.departed_actors_kept` to leave...
    pub batches_per_actor: BTreeMap<String, BatchCounts>,
    /// ... and the departed actors before them, folded into one entry
    /// (`actors_folded` of them). The identity holds for each entry, and the
    /// entries add up to `batches`.
    pub actors_folded: u64,
    pub batches_departed: BatchCounts,
    /// Why the run stopped before its budget, when it could not go on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by_error: Option<String>,
    /// Peak resident memory of the run, MiB: the learner's process (in local
    /// mode every role in it) plus, in a local run with actor processes,
    /// each child slot's peak (`actor_processes.peak_rss_mib`); None where
    /// the OS does not say.
    pub peak_rss_mib: Option<f64>,
    /// The learner's process alone, MiB.
    pub process_peak_rss_mib: Option<f64>,
    /// Where the learner's process memory goes as training ends.
    pub memory: MemoryReport,
    /// A local run's actor child processes: each slot's processes,
    /// restarts, memory and last failure, and the slots given up; absent
    /// where the actors are threads or other hosts' processes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor_processes: Option<crate::processes::ProcessesReport>,
    /// The fused kernels' instruction-set path (`SEBULBA_KERNELS`): runs give
    /// the same bits across machines only on the same path.
    pub kernels: &'static str,
    /// What took the update steps: `fused` or `burn`.
    pub engine: &'static str,
    /// The learner's replicas as run (`learner.devices` with `auto`
    /// resolved), and why those (`as configured`, or what `auto` found).
    pub learner_devices: Vec<String>,
    pub device_choice: String,
}

/// Evaluation's CPU time beside the run's.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct EvalCpu {
    /// The evaluations' threads (their envs' included), summed over the
    /// evaluations filed.
    pub eval_seconds: f64,
    /// The whole run: this process and its children (local mode: every
    /// role, actor processes included), plus the evaluator's where it runs
    /// elsewhere; None where the OS does not say.
    pub run_seconds: Option<f64>,
    /// `eval_seconds` over `run_seconds`.
    pub share: Option<f64>,
}

impl EvalCpu {
    /// Measured now: `eval_seconds` from the reports, the run's from the
    /// OS (`evaluator_in_process`: this process's time holds the
    /// evaluator's already).
    pub fn measure(eval_seconds: f64, evaluator_in_process: bool) -> Self {
        let own = sebulba_core::cpu::process_tree_seconds();
        let run_seconds = own.map(|s| {
            if evaluator_in_process {
                s
            } else {
                s + eval_seconds
            }
        });
        Self {
            eval_seconds,
            run_seconds,
            share: run_seconds
                .filter(|r| *r > 0.0)
                .map(|r| (eval_seconds / r).min(1.0)),
        }
    }
}

/// Where the learner process's memory goes as its update loop ends, in MiB.
/// The parts named are the ones that grow with the run's settings; the rest
/// of the heap is the runtime's, the transport's and the code's own.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryReport {
    /// Resident now (the whole process); None where the OS does not say.
    pub rss_mib: Option<f64>,
    /// Resident now in a local run's actor child processes, all together
    /// (absent for other runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children_rss_mib: Option<f64>,
    /// The allocator's account (glibc): bytes in use, and bytes freed but
    /// kept for reuse; None off glibc.
    pub heap_in_use_mib: Option<f64>,
    pub heap_free_mib: Option<f64>,
    /// The update engine: parameters, Adam's moments, each thread's gradient
    /// and activations (burn: an estimate from the parameter count), and
    /// DQN's target network.
    pub engine_mib: f64,
    /// DQN's replay memory (bounded by `dqn.buffer_size`); 0 for PPO.
    pub replay_mib: f64,
    /// Versions held back by `run.forced_lag`.
    pub held_versions_mib: f64,
    /// The largest batch message the run accepts (its transport limit).
    pub batch_limit_mib: f64,
    /// The batch queue's bound: `learner.queue_capacity` batches of at most
    /// `batch_limit_mib` each (their messages' size; decoded, about the same).
    pub queue_bound_mib: f64,
}

/// Bytes as MiB, to the nearest thousandth (about a KiB).
pub fn mib(bytes: u64) -> f64 {
    (bytes as f64 / f64::from(1u32 << 20) * 1000.0).round() / 1000.0
}

/// A return for a log line: the number, or `none` (never Rust's `Some(..)`).
pub fn shown(value: Option<f64>) -> String {
    value.map_or_else(|| "none".to_string(), |v| format!("{v:.2}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn mib_is_mebibytes_to_a_thousandth() {
        assert_eq!(super::mib(1 << 20), 1.0);
        assert_eq!(super::mib(3 << 19), 1.5);
        assert_eq!(super::mib(1_000_000), 0.954);
        assert_eq!(super::mib(0), 0.0);
    }

    #[test]
    fn shown_is_a_plain_number_or_none() {
        assert_eq!(super::shown(Some(500.0)), "500.00");
        assert_eq!(super::shown(Some(-163.456)), "-163.46");
        assert_eq!(super::shown(None), "none");
    }
}
