//! How often and how long an evaluator scores a run's versions: its own
//! options first, then the schedule the run publishes with its weights
//! (`Weights.eval`, the learner's `eval` config), then the env's defaults.
//! Without the run's schedule an evaluator in a cluster would score an Atari
//! run 10 games every 10 versions, and take a core from the learner.

use crate::{EvaluatorOptions, versions};
use sebulba_core::config::ConfigError;
use sebulba_core::config::ranges::check_key;
use sebulba_proto::EvalSchedule;

/// How often and how long an evaluator scores a run's versions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    /// Evaluate a version at least this many past the last one evaluated.
    pub interval: u64,
    pub episodes: usize,
    pub final_episodes: usize,
    /// A game's earlier versions kept as checkpoint opponents.
    pub earlier_versions: usize,
}

impl Schedule {
    /// What an evaluator uses for a run that publishes no schedule: a
    /// turn-based game plays matches of 1,000 games every 100 versions
    /// (narrow win-rate intervals); anything else 10 episodes every 10
    /// versions, 100 for the final one.
    pub fn default_for(env_id: &str) -> Self {
        let earlier_versions = versions::DEFAULT_KEEP;
        if sebulba_envs::games::GAME_IDS.contains(&env_id) {
            Self {
                interval: 100,
                episodes: 1000,
                final_episodes: 1000,
                earlier_versions,
            }
        } else {
            Self {
                interval: 10,
                episodes: 10,
                final_episodes: 100,
                earlier_versions,
            }
        }
    }

    /// A run's published schedule, each value held to its config key's
    /// range: the learner's run file passed the same check, so a value
    /// outside is a peer's error (a learner asking for 10^9 episodes would
    /// hold the evaluator forever).
    pub fn published(s: &EvalSchedule) -> Result<Self, ConfigError> {
        check_key("eval.interval", s.interval)?;
        check_key("eval.episodes", s.episodes.into())?;
        check_key("eval.final_episodes", s.final_episodes.into())?;
        check_key("eval.earlier_versions", s.earlier_versions.into())?;
        let n = |v: u32| usize::try_from(v).unwrap_or(usize::MAX);
        Ok(Self {
            interval: s.interval,
            episodes: n(s.episodes),
            final_episodes: n(s.final_episodes),
            earlier_versions: n(s.earlier_versions),
        })
    }
}

impl EvaluatorOptions {
    /// The schedule for a run of `env_id`: each of this evaluator's options
    /// where given, else the run's published schedule (`run`), else the
    /// env's defaults.
    pub fn schedule(&self, env_id: &str, run: Option<Schedule>) -> Schedule {
        let d = run.unwrap_or_else(|| Schedule::default_for(env_id));
        Schedule {
            interval: self.interval.unwrap_or(d.interval),
            episodes: self.episodes.unwrap_or(d.episodes),
            final_episodes: self.final_episodes.unwrap_or(d.final_episodes),
            earlier_versions: self.earlier_versions.unwrap_or(d.earlier_versions),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Output;
    use sebulba_transport::security::Security;
    use std::path::PathBuf;

    fn opts(interval: Option<u64>, episodes: Option<usize>) -> EvaluatorOptions {
        EvaluatorOptions {
            param_server: String::new(),
            output: Output::Dir(PathBuf::new()),
            interval,
            episodes,
            final_episodes: None,
            earlier_versions: None,
            seed: 1,
            device: sebulba_core::devices::DeviceKind::Cpu,
            security: Security::default(),
        }
    }

    fn wire(interval: u64, episodes: u32, final_episodes: u32, earlier: u32) -> EvalSchedule {
        EvalSchedule {
            interval,
            episodes,
            final_episodes,
            earlier_versions: earlier,
        }
    }

    #[test]
    fn without_a_run_schedule_a_game_plays_matches_of_a_thousand_games() {
        let game = opts(None, None).schedule("BigTwo-v0", None);
        assert_eq!(
            game,
            Schedule {
                interval: 100,
                episodes: 1000,
                final_episodes: 1000,
                earlier_versions: 16
            }
        );
        let other = opts(None, None).schedule("CartPole-v1", None);
        assert_eq!(
            (other.interval, other.episodes, other.final_episodes),
            (10, 10, 100)
        );
    }

    #[test]
    fn the_evaluators_own_options_win_over_the_runs_which_win_over_the_defaults() {
        // The Atari preset's schedule, as its learner publishes it.
        let run = Schedule::published(&wire(250, 8, 30, 16)).expect("in range");
        let followed = opts(None, None).schedule("ale:Breakout", Some(run));
        assert_eq!(followed, run);
        let mixed = opts(Some(40), None).schedule("ale:Breakout", Some(run));
        assert_eq!(
            (mixed.interval, mixed.episodes, mixed.final_episodes),
            (40, 8, 30)
        );
        assert_eq!(opts(None, Some(3)).schedule("Nim-v0", None).episodes, 3);
    }

    #[test]
    fn a_published_schedule_out_of_range_is_refused_naming_the_key() {
        let cases = [
            (wire(0, 8, 30, 16), "eval.interval"),
            (wire(1_000_001, 8, 30, 16), "eval.interval"),
            (wire(250, 0, 30, 16), "eval.episodes"),
            (wire(250, 10_001, 30, 16), "eval.episodes"),
            (wire(250, 8, 0, 16), "eval.final_episodes"),
            (wire(250, 8, u32::MAX, 16), "eval.final_episodes"),
            (wire(250, 8, 30, 1), "eval.earlier_versions"),
            (wire(250, 8, 30, 257), "eval.earlier_versions"),
        ];
        for (s, key) in cases {
            let e = Schedule::published(&s).expect_err(key).to_string();
            assert!(e.contains(key), "{key}: {e}");
        }
        // The ranges' edges are accepted.
        assert!(Schedule::published(&wire(1, 1, 1, 2)).is_ok());
        assert!(Schedule::published(&wire(1_000_000, 10_000, 10_000, 256)).is_ok());
    }
}
