//! How often, how long and how an evaluator scores a run's versions: its own
//! options first, then the schedule the run publishes with its weights
//! (`Weights.eval`, the learner's `eval` config), then the env's defaults.
//! Without the run's schedule an evaluator in a cluster would score an Atari
//! run 10 games every 10 versions, and take a core from the learner.

use crate::episodes::Plan;
use crate::versions;
use sebulba_core::config::ranges::{check_key, check_real};
use sebulba_core::config::{ConfigError, EvalConfig, EvalPolicy};
use sebulba_proto::EvalSchedule;

/// How often, how long and how an evaluator scores a run's versions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    /// Evaluate a version at least this many past the last one evaluated.
    pub interval: u64,
    pub episodes: usize,
    pub final_episodes: usize,
    /// A game's earlier versions kept as checkpoint opponents.
    pub earlier_versions: usize,
    /// How an evaluation acts, and ε for `epsilon`.
    pub policy: EvalPolicy,
    pub epsilon: f64,
    /// Env steps a periodic and the final evaluation may play.
    pub max_steps: u64,
    pub final_max_steps: u64,
    /// The share of the machine's cores a periodic evaluation may take.
    pub cpu_share: f64,
    /// Film every this many evaluations' first episode, and the final
    /// one's (0: never).
    pub video_every: u64,
}

/// An evaluator's own settings, each winning over the run's where given.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Overrides {
    pub interval: Option<u64>,
    pub episodes: Option<usize>,
    pub final_episodes: Option<usize>,
    pub earlier_versions: Option<usize>,
    pub policy: Option<EvalPolicy>,
    pub epsilon: Option<f64>,
    pub max_steps: Option<u64>,
    pub final_max_steps: Option<u64>,
    pub cpu_share: Option<f64>,
    pub video_every: Option<u64>,
}

impl Overrides {
    /// Every value from a run's `eval` config (local mode's evaluator).
    pub fn all(e: &EvalConfig) -> Self {
        Self {
            interval: Some(e.interval),
            episodes: Some(e.episodes),
            final_episodes: Some(e.final_episodes),
            earlier_versions: Some(e.earlier_versions),
            policy: Some(e.policy),
            epsilon: Some(e.epsilon),
            max_steps: Some(e.max_steps),
            final_max_steps: Some(e.final_max_steps),
            cpu_share: Some(e.cpu_share),
            video_every: Some(e.video_every),
        }
    }

    /// The schedule for a run of `env_id`: each value given here, else the
    /// run's published schedule (`run`), else the env's defaults.
    pub fn over(&self, env_id: &str, run: Option<Schedule>) -> Schedule {
        let d = run.unwrap_or_else(|| Schedule::default_for(env_id));
        Schedule {
            interval: self.interval.unwrap_or(d.interval),
            episodes: self.episodes.unwrap_or(d.episodes),
            final_episodes: self.final_episodes.unwrap_or(d.final_episodes),
            earlier_versions: self.earlier_versions.unwrap_or(d.earlier_versions),
            policy: self.policy.unwrap_or(d.policy),
            epsilon: self.epsilon.unwrap_or(d.epsilon),
            max_steps: self.max_steps.unwrap_or(d.max_steps),
            final_max_steps: self.final_max_steps.unwrap_or(d.final_max_steps),
            cpu_share: self.cpu_share.unwrap_or(d.cpu_share),
            video_every: self.video_every.unwrap_or(d.video_every),
        }
    }
}

impl Schedule {
    /// What one evaluation plays: the final one's episodes and budget, or a
    /// periodic one's, acting as `acted` says, from the evaluation `seed`'s
    /// start states. Only a periodic evaluation is held to the CPU share:
    /// the final one comes after training and takes what it needs.
    pub fn plan(&self, is_final: bool, acted: (EvalPolicy, f64), seed: u64) -> Plan {
        let (episodes, max_steps) = if is_final {
            (self.final_episodes, self.final_max_steps)
        } else {
            (self.episodes, self.max_steps)
        };
        Plan {
            episodes,
            max_steps,
            policy: acted.0,
            epsilon: acted.1,
            seed,
            cpu_share: (!is_final).then_some(self.cpu_share),
        }
    }

    /// What an evaluator uses for a run that publishes no schedule: a
    /// turn-based game plays matches of 1,000 games every 100 versions
    /// (narrow win-rate intervals); anything else 10 episodes every 10
    /// versions, 100 for the final one. The rest as the `eval` config's
    /// defaults (greedy, budgets of 100,000 and 1,000,000 steps, a quarter
    /// of the cores, a video every 10 evaluations).
    pub fn default_for(env_id: &str) -> Self {
        let base = Self {
            interval: 10,
            episodes: 10,
            final_episodes: 100,
            earlier_versions: versions::DEFAULT_KEEP,
            policy: EvalPolicy::Greedy,
            epsilon: 0.05,
            max_steps: 100_000,
            final_max_steps: 1_000_000,
            cpu_share: 0.25,
            video_every: 10,
        };
        if sebulba_envs::games::GAME_IDS.contains(&env_id) {
            Self {
                interval: 100,
                episodes: 1000,
                final_episodes: 1000,
                ..base
            }
        } else {
            base
        }
    }

    /// A run's published schedule, each value held to its config key's
    /// range: the learner's run file passed the same check, so a value
    /// outside is a peer's error (a learner asking for 10^9 episodes would
    /// hold the evaluator forever). Fields a learner before them leaves
    /// unset (`""`, 0) take the defaults.
    pub fn published(s: &EvalSchedule) -> Result<Self, ConfigError> {
        check_key("eval.interval", s.interval)?;
        check_key("eval.episodes", s.episodes.into())?;
        check_key("eval.final_episodes", s.final_episodes.into())?;
        check_key("eval.earlier_versions", s.earlier_versions.into())?;
        let d = Self::default_for("");
        let policy = match s.policy.as_str() {
            "" => d.policy,
            name => EvalPolicy::from_name(name).ok_or_else(|| ConfigError::BadValue {
                key: "eval.policy".into(),
                reason: format!(
                    "`{}`: expected one of {}",
                    name.escape_debug(),
                    EvalPolicy::NAMES.join(", ")
                ),
            })?,
        };
        check_real("eval.epsilon", s.epsilon)?;
        let or = |v: u64, default: u64| if v == 0 { default } else { v };
        let (max_steps, final_max_steps) = (
            or(s.max_steps, d.max_steps),
            or(s.final_max_steps, d.final_max_steps),
        );
        check_key("eval.max_steps", max_steps)?;
        check_key("eval.final_max_steps", final_max_steps)?;
        let cpu_share = if s.cpu_share == 0.0 {
            d.cpu_share
        } else {
            s.cpu_share
        };
        check_real("eval.cpu_share", cpu_share)?;
        check_key("eval.video_every", s.video_every)?;
        let n = |v: u32| usize::try_from(v).unwrap_or(usize::MAX);
        Ok(Self {
            interval: s.interval,
            episodes: n(s.episodes),
            final_episodes: n(s.final_episodes),
            earlier_versions: n(s.earlier_versions),
            policy,
            epsilon: s.epsilon,
            max_steps,
            final_max_steps,
            cpu_share,
            video_every: s.video_every,
        })
    }
}

#[cfg(test)]
mod tests;
