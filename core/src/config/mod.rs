//! The typed run configuration: per-environment presets, overridden by a TOML run
//! file and then by `--set section.key=value`. Every key must already exist in the
//! preset and keep its type, so a typo or a bad value is refused with its name.

mod eval;
mod mujoco_presets;
mod overrides;
mod ppo;
mod presets;
pub mod ranges;
mod sections;

pub use eval::*;
use overrides::{merge_table, parse_override, set_key};
pub use ppo::*;
pub use sections::*;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown config key `{0}`")]
    UnknownKey(String),
    #[error("config key `{key}`: expected {expected}, got `{got}`")]
    WrongType {
        key: String,
        expected: &'static str,
        got: String,
    },
    #[error("config key `{key}`: {reason}")]
    BadValue { key: String, reason: String },
    #[error("`--set {0}`: expected section.key=value")]
    BadOverride(String),
    #[error("reading config file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("parsing config file {path}: {source}")]
    Toml {
        path: String,
        source: toml::de::Error,
    },
    #[error(transparent)]
    Env(#[from] sebulba_envs::EnvError),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    pub env: EnvConfig,
    pub run: RunSection,
    pub network: NetworkConfig,
    pub ppo: PpoConfig,
    pub learner: LearnerConfig,
    pub actor: ActorConfig,
    pub eval: EvalConfig,
    #[serde(default)]
    pub selfplay: SelfPlayConfig,
    #[serde(default)]
    pub dqn: DqnConfig,
}

impl RunConfig {
    /// Preset for `env_id`, then the TOML file (if any), then `--set` overrides.
    /// The file may also change `env.id`: the preset is then that env's.
    pub fn resolve(
        env_id: Option<&str>,
        file: Option<&Path>,
        sets: &[String],
    ) -> Result<Self, ConfigError> {
        let file_table = match file {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Io {
                    path: p.display().to_string(),
                    source,
                })?;
                Some(
                    toml::from_str::<toml::Table>(&text).map_err(|source| ConfigError::Toml {
                        path: p.display().to_string(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        let overrides = sets
            .iter()
            .map(|s| parse_override(s))
            .collect::<Result<Vec<_>, _>>()?;
        // The env id decides the preset: --set env.id beats the file, which beats --env.
        let from_file = file_table
            .as_ref()
            .and_then(|t| t.get("env"))
            .and_then(|e| e.get("id"))
            .and_then(|v| v.as_str().map(str::to_string));
        let from_set = overrides
            .iter()
            .rev()
            .find(|(k, _)| k == "env.id")
            .and_then(|(_, v)| v.as_str().map(str::to_string));
        let id = from_set
            .or(from_file)
            .or(env_id.map(str::to_string))
            .unwrap_or_else(|| "CartPole-v1".into());
        let preset = Self::preset(&id)?;
        let mut value = toml::Table::try_from(&preset).map_err(|e| ConfigError::BadValue {
            key: "<preset>".into(),
            reason: e.to_string(),
        })?;
        if let Some(t) = file_table {
            merge_table(&mut value, t, "")?;
        }
        for (key, v) in overrides {
            set_key(&mut value, &key, v)?;
        }
        let config: RunConfig =
            toml::Value::Table(value)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::BadValue {
                    key: "<config>".into(),
                    reason: e.to_string(),
                })?;
        config.validate()?;
        Ok(config)
    }

    /// Range checks that types alone do not catch: every numeric key's range
    /// ([`ranges::RANGES`]), then the relations between keys.
    pub fn validate(&self) -> Result<(), ConfigError> {
        ranges::check(self)?;
        self.check_relations()?;
        self.check_learner()
    }

    /// The env exists; the relations between keys that ranges cannot express.
    fn check_relations(&self) -> Result<(), ConfigError> {
        let spec = sebulba_envs::env_spec_with(&self.env.id, &self.env.kwargs_json())?;
        if self.run.algorithm == Algorithm::Dqn {
            self.check_dqn(&spec)?;
        }
        if self.network.is_recurrent() {
            self.check_recurrent()?;
        } else {
            self.check_memoryless()?;
        }
        if spec.is_game() {
            self.check_game()?;
        } else if self.selfplay.seats_others() {
            let key = match self.selfplay.past_fraction > 0.0 {
                true => "selfplay.past_fraction",
                false => "selfplay.rule_fraction",
            };
            return bad(
                key,
                &format!(
                    "`{}` has one player: other seats need a turn-based game",
                    self.env.id
                ),
            );
        }
        if self.selfplay.past_fraction + self.selfplay.rule_fraction > 1.0 {
            return bad(
                "selfplay.rule_fraction",
                &format!(
                    "{} with selfplay.past_fraction {}: the two share the seats, so their sum must be at most 1",
                    self.selfplay.rule_fraction, self.selfplay.past_fraction
                ),
            );
        }
        if self.selfplay.past_fraction > 0.0 && self.run.deterministic {
            return bad(
                "selfplay.past_fraction",
                "a deterministic run cannot seat past versions: the pool reaches actors as it is published, not in the run's fixed order",
            );
        }
        if self.run.time_limit_secs > 0 && self.run.deterministic {
            return bad(
                "run.time_limit_secs",
                "a deterministic run cannot stop by the clock: where it stops would differ between two runs (set run.total_steps instead)",
            );
        }
        if self.run.forced_lag > 0 && !self.run.deterministic {
            return bad(
                "run.forced_lag",
                "needs run.deterministic = true: only a deterministic run makes the lag exact",
            );
        }
        if self.run.forced_lag > self.learner.max_policy_lag {
            return bad(
                "run.forced_lag",
                "above learner.max_policy_lag: every lagged batch would be dropped as stale",
            );
        }
        if self.network.init_std <= self.network.min_std {
            return bad(
                "network.init_std",
                "must be a finite number > network.min_std",
            );
        }
        Ok(())
    }

    /// DQN's Q-head needs discrete actions and one player; its replay memory
    /// stays within memory; it learns from the env's own rewards.
    fn check_dqn(&self, spec: &sebulba_envs::EnvSpec) -> Result<(), ConfigError> {
        let key = "run.algorithm";
        if !matches!(
            spec.action_space,
            sebulba_envs::ActionSpace::Discrete { .. }
        ) {
            return bad(
                key,
                &format!(
                    "`dqn` needs discrete actions; `{}` has continuous ones",
                    self.env.id
                ),
            );
        }
        if spec.is_game() {
            return bad(
                key,
                &format!(
                    "`dqn` learns single-player envs; `{}` is a turn-based game",
                    self.env.id
                ),
            );
        }
        if self.ppo.scale_rewards {
            return bad(
                "ppo.scale_rewards",
                "`dqn` learns from the env's own rewards: set it to false",
            );
        }
        if self.dqn.batch_size > self.dqn.buffer_size {
            return bad(
                "dqn.batch_size",
                "above dqn.buffer_size: the memory never holds a minibatch, so no step would be taken",
            );
        }
        let floats = self.dqn.buffer_size.saturating_mul(spec.obs_dim);
        if floats > MAX_REPLAY_FLOATS {
            return bad(
                "dqn.buffer_size",
                &format!(
                    "x {} observation floats = {floats}, over the {MAX_REPLAY_FLOATS} limit (the memory keeps each observation and the next)",
                    spec.obs_dim
                ),
            );
        }
        Ok(())
    }

    /// What a recurrent core does not combine with: DQN's transitions drawn
    /// one by one (a core reads whole env sequences).
    fn check_recurrent(&self) -> Result<(), ConfigError> {
        if self.run.algorithm == Algorithm::Dqn {
            return bad(
                "network.core",
                "`dqn` trains on single transitions drawn from its replay memory, a recurrent core on whole env sequences: use run.algorithm = \"ppo\" or network.core = \"none\"",
            );
        }
        self.check_sequences()
    }

    /// A network with memory's minibatches are env sequences: `ppo.bptt`
    /// cuts the rollout into whole chunks, and there must be a sequence for
    /// every minibatch.
    fn check_sequences(&self) -> Result<(), ConfigError> {
        let (t, p) = (self.env.rollout_length, &self.ppo);
        if p.bptt > 0 && (p.bptt > t || !t.is_multiple_of(p.bptt)) {
            return bad(
                "ppo.bptt",
                &format!(
                    "{} does not cut env.rollout_length = {t} into whole chunks: use a divisor of it, or 0 for the whole rollout",
                    p.bptt
                ),
            );
        }
        let sequences = self.learner.batches_per_update
            * self.env.envs_per_actor
            * (t / p.sequence_steps(t).max(1));
        if p.minibatches > sequences {
            return bad(
                "ppo.minibatches",
                &format!(
                    "{} minibatches of whole env sequences, but an update holds {sequences} (learner.batches_per_update x env.envs_per_actor x the chunks of ppo.bptt)",
                    p.minibatches
                ),
            );
        }
        Ok(())
    }

    /// What only a network with memory has.
    fn check_memoryless(&self) -> Result<(), ConfigError> {
        let key = match (self.ppo.bptt, self.ppo.refresh_states) {
            (0, false) => return Ok(()),
            (0, true) => "ppo.refresh_states",
            _ => "ppo.bptt",
        };
        bad(
            key,
            "cuts a network with memory's env sequences, and network.core is \"none\"",
        )
    }

    /// What a turn-based game's per-player advantages do not combine with.
    fn check_game(&self) -> Result<(), ConfigError> {
        if self.ppo.scale_rewards {
            return bad(
                "ppo.scale_rewards",
                "a game's rewards are its end scores (scaled by env.kwargs.score_normaliser): turn it off",
            );
        }
        if self.ppo.lag_correction == LagCorrection::Vtrace {
            return bad(
                "ppo.lag_correction",
                "V-trace runs along env rows, a game's advantages along each player's moves: use `off`",
            );
        }
        Ok(())
    }

    /// Samples per update against minibatches (DQN's: its own batch size)
    /// and devices; the engine.
    fn check_learner(&self) -> Result<(), ConfigError> {
        let p = &self.ppo;
        let samples =
            self.env.envs_per_actor * self.env.rollout_length * self.learner.batches_per_update;
        let minibatch = if self.run.algorithm == Algorithm::Dqn {
            self.dqn.batch_size
        } else if p.minibatches == 0 || p.minibatches > samples {
            return bad(
                "ppo.minibatches",
                &format!("must be in 1..={samples} (samples per update)"),
            );
        } else {
            samples / p.minibatches
        };
        let auto = crate::devices::is_auto(&self.learner.devices);
        match crate::devices::LearnerDevices::parse(&self.learner.devices) {
            // `auto` becomes one device, `cpu` under the fused engine.
            Err(_) if auto => {}
            Err(reason) => return bad("learner.devices", &reason),
            Ok(d) if d.count() > minibatch => {
                return bad(
                    "learner.devices",
                    "more devices than samples in a minibatch: each device needs a shard",
                );
            }
            Ok(_) => {}
        }
        if self.learner.engine == LearnerEngine::Fused
            && !(auto && self.network.fused_covers()
                || LearnerEngine::fused_applies(&self.learner.devices, &self.network))
        {
            return bad(
                "learner.engine",
                "`fused` runs on one `cpu` device without LayerNorm (use `auto` or `burn`)",
            );
        }
        Ok(())
    }

    /// How much of the run's budget is spent at `env_steps` and
    /// `wall_seconds`: the further along of `run.total_steps` and, when set,
    /// `run.time_limit_secs` (1 or more once either is reached). What
    /// annealed settings follow.
    pub fn budget_used(&self, env_steps: u64, wall_seconds: f64) -> f64 {
        let steps = env_steps as f64 / self.run.total_steps.max(1) as f64;
        match self.run.time_limit_secs {
            0 => steps,
            limit => steps.max(wall_seconds / limit as f64),
        }
    }

    /// Whether training is over at `env_steps` and `wall_seconds`: the step
    /// budget reached, or the time limit when one is set.
    pub fn budget_spent(&self, env_steps: u64, wall_seconds: f64) -> bool {
        let limit = self.run.time_limit_secs;
        env_steps >= self.run.total_steps || (limit > 0 && wall_seconds >= limit as f64)
    }

    /// Samples in one update: batches x E x T.
    pub fn samples_per_update(&self) -> usize {
        self.learner.batches_per_update * self.env.envs_per_actor * self.env.rollout_length
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }
}
/// Observation floats DQN's replay memory may hold (each stored twice: the
/// observation and the next): 2 GiB at most.
pub const MAX_REPLAY_FLOATS: usize = 1 << 28;

/// Seed of the evaluation environments for a run seed: fixed per run, so every
/// version is scored from the same start states, and apart from the actors' seeds.
pub fn eval_seed(run_seed: u64) -> u64 {
    run_seed ^ 0x00E7_A15E_ED00_0000
}

/// A refusal naming the key.
fn bad(key: &str, reason: &str) -> Result<(), ConfigError> {
    Err(ConfigError::BadValue {
        key: key.into(),
        reason: reason.into(),
    })
}

#[cfg(test)]
mod tests;
