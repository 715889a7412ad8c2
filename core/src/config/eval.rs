//! The `[eval]` section: how often, how long and how the evaluator scores a
//! run's versions (`docs/configuration.md`, Evaluation protocols).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalConfig {
    /// Evaluate every this many policy versions (and always the final one).
    pub interval: u64,
    /// Episodes per evaluation.
    pub episodes: usize,
    /// Episodes for the final version (default 100): the
    /// figure a run is judged by, so measured more closely than the ones
    /// along the way (10 episodes of Acrobot leave about +-4 of noise).
    #[serde(default = "hundred")]
    pub final_episodes: usize,
    /// A game's earlier versions the evaluator keeps as opponents (default
    /// 16), spread over the run: each is one copy of the weights in the
    /// evaluator's memory.
    #[serde(default = "sixteen")]
    pub earlier_versions: usize,
    /// How evaluation acts (default `greedy`): see [`EvalPolicy`].
    #[serde(default)]
    pub policy: EvalPolicy,
    /// The random action's probability under `policy = "epsilon"` (default
    /// 0.05, the Nature DQN's; Dopamine and Rainbow evaluate at 0.001).
    #[serde(default = "nature_epsilon")]
    pub epsilon: f64,
    /// The most env steps a periodic evaluation plays, summed over its
    /// episodes (default 100,000): episodes unfinished then are cut, reported
    /// as cut and never counted as finished.
    #[serde(default = "hundred_thousand")]
    pub max_steps: u64,
    /// The same for the final evaluation (default 1,000,000).
    #[serde(default = "million")]
    pub final_max_steps: u64,
    /// The largest share of the machine's cores (0-1] a periodic evaluation
    /// may take while training runs (default 0.25): the evaluator sleeps
    /// whenever its threads' CPU time passes this share of its wall time.
    /// The final evaluation, after training, is not held back.
    #[serde(default = "quarter")]
    pub cpu_share: f64,
    /// Film the first episode of every this many evaluations, and of the
    /// final one, into `videos/` and TensorBoard (default 10; 0: never).
    /// Only envs that draw themselves are filmed.
    #[serde(default = "ten")]
    pub video_every: u64,
}

/// How an evaluation picks actions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvalPolicy {
    /// The most likely action (argmax; the squashed Gaussian's mean): the
    /// deterministic policy. A greedy Atari policy that never presses FIRE
    /// never ends its game.
    #[default]
    Greedy,
    /// An action drawn from the policy, as it acts in training (CleanRL's
    /// PPO evaluations).
    Sample,
    /// Greedy with probability `1 - eval.epsilon`, else an allowed action
    /// uniformly (a uniform action within the bounds, for continuous
    /// actions): Mnih et al. 2015 (ε = 0.05), Machado et al. 2018, Dopamine.
    Epsilon,
}

impl EvalPolicy {
    pub const NAMES: [&str; 3] = ["greedy", "sample", "epsilon"];

    pub fn name(self) -> &'static str {
        match self {
            EvalPolicy::Greedy => "greedy",
            EvalPolicy::Sample => "sample",
            EvalPolicy::Epsilon => "epsilon",
        }
    }

    /// The policy a name (as on the wire) stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "greedy" => Some(EvalPolicy::Greedy),
            "sample" => Some(EvalPolicy::Sample),
            "epsilon" => Some(EvalPolicy::Epsilon),
            _ => None,
        }
    }
}

fn hundred() -> usize {
    100
}

fn sixteen() -> usize {
    16
}

fn nature_epsilon() -> f64 {
    0.05
}

fn hundred_thousand() -> u64 {
    100_000
}

fn million() -> u64 {
    1_000_000
}

fn ten() -> u64 {
    10
}

fn quarter() -> f64 {
    0.25
}
