//! One line of `eval.jsonl`: what an evaluation scored, how it acted, what
//! it cut and what it cost; and the report filed with the parameter server.

use crate::episodes::{EpisodeResults, mean};
use crate::games::MatchResult;
use crate::schedule::Schedule;
use sebulba_core::config::EvalPolicy;
use sebulba_proto::{EvalReport, Weights};
use serde::Serialize;

/// One evaluation. For a turn-based game, the `return_*` fields are the
/// win/loss of the evaluated seat in the match against the greedy player
/// (`return_mean` is that win rate: the number a run is ranked by, and
/// `best.safetensors` follows), and `matches` has every match in full.
/// Otherwise the `return_*` fields are over the finished episodes, or,
/// where none finished (`episodes` 0), over the cut ones' returns so far.
#[derive(Debug, Clone, Serialize)]
pub struct EvalLine {
    pub version: u64,
    pub env_steps: u64,
    pub return_mean: f64,
    pub return_std: f64,
    pub return_min: f64,
    pub return_max: f64,
    pub length_mean: f64,
    /// Episodes finished, of `episodes_asked`.
    pub episodes: usize,
    pub episodes_asked: usize,
    /// Finished episodes that ended at the env's step cap.
    pub episodes_truncated: usize,
    /// Episodes cut unfinished, why (`max_steps`, `shutdown`; absent when
    /// none was), and their returns and lengths so far.
    pub episodes_cut: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_by: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_return_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_length_mean: Option<f64>,
    /// How the evaluation acted (`greedy`, `sample`, `epsilon`), and ε.
    pub policy: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon: Option<f64>,
    pub r#final: bool,
    pub eval_seconds: f64,
    /// CPU time of the evaluation's threads (its envs' included), and the
    /// time it slept to keep to `eval.cpu_share`.
    pub cpu_seconds: f64,
    pub throttled_seconds: f64,
    /// The learner's run clock (seconds of training) when it published this
    /// version.
    pub wall_seconds: f64,
    /// Envs replaced after they failed mid-episode (Python envs; absent when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub env_restarts: u64,
    /// A game's matches: against random, greedy, and an earlier checkpoint.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<MatchResult>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The clocks of one evaluation: its own, and the learner's at publish.
pub(crate) struct Clocks {
    pub eval_seconds: f64,
    pub wall_seconds: f64,
}

impl EvalLine {
    pub(crate) fn new(
        w: &Weights,
        results: &EpisodeResults,
        acted: (EvalPolicy, f64),
        clocks: Clocks,
    ) -> Self {
        let (returns, lengths) = results.scored();
        let lengths: Vec<f64> = lengths.iter().map(|&l| f64::from(l)).collect();
        let cut_lengths: Vec<f64> = results.cut_lengths.iter().map(|&l| f64::from(l)).collect();
        let cut = !results.cut_returns.is_empty();
        let (policy, epsilon) = acted;
        Self {
            version: w.version,
            env_steps: w.env_steps,
            return_mean: results.mean(),
            return_std: results.std(),
            return_min: returns.iter().copied().fold(f64::INFINITY, f64::min),
            return_max: returns.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            length_mean: mean(&lengths),
            episodes: results.returns.len(),
            episodes_asked: results.asked(),
            episodes_truncated: results.truncated,
            episodes_cut: results.cut_returns.len(),
            cut_by: results.cut_by.filter(|_| cut).map(|c| c.name()),
            cut_return_mean: cut.then(|| mean(&results.cut_returns)),
            cut_length_mean: cut.then(|| mean(&cut_lengths)),
            policy: policy.name(),
            epsilon: (policy == EvalPolicy::Epsilon).then_some(epsilon),
            r#final: w.r#final,
            eval_seconds: clocks.eval_seconds,
            cpu_seconds: results.cpu_seconds,
            throttled_seconds: results.throttled_seconds,
            wall_seconds: clocks.wall_seconds,
            env_restarts: results.env_restarts,
            matches: Vec::new(),
        }
    }

    /// The report filed with the parameter server.
    pub(crate) fn report(&self, run_id: &str) -> EvalReport {
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        EvalReport {
            version: self.version,
            env_steps: self.env_steps,
            return_mean: self.return_mean,
            return_std: self.return_std,
            episodes: n(self.episodes),
            r#final: self.r#final,
            run_id: run_id.to_string(),
            matches: self.matches.iter().map(MatchResult::to_wire).collect(),
            episodes_asked: n(self.episodes_asked),
            cut_by: self.cut_by.unwrap_or_default().to_string(),
            episodes_truncated: n(self.episodes_truncated),
            cpu_seconds: self.cpu_seconds,
        }
    }
}

/// An evaluation of `episodes` finished of `asked` scored whole episodes
/// (`asked` 0: a line from before the counts, every episode finished): one
/// of cut episodes alone is no candidate for the best.
pub(crate) fn scored_whole(episodes: u64, asked: u64) -> bool {
    episodes > 0 || asked == 0
}

/// How a schedule's policy acts on a run's head: a DQN's Q-values
/// (`dqn_head`) are never sampled, they are acted on greedily.
pub fn acting_for(schedule: &Schedule, dqn_head: bool) -> (EvalPolicy, f64) {
    let policy = match schedule.policy {
        EvalPolicy::Sample if dqn_head => EvalPolicy::Greedy,
        p => p,
    };
    (policy, schedule.epsilon)
}
