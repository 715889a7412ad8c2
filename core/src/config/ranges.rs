//! The accepted range of every numeric config key, in one table that the
//! checks and the README's table are both read from. Ranges keep every size
//! the run derives (batch bytes, update memory, wire fields, timeouts) far from
//! overflow and from allocations no machine has.

use super::{ConfigError, RunConfig};

/// An inclusive range; `open_low` excludes `low` (for "> 0" floats).
#[derive(Clone, Copy, Debug)]
pub struct Range {
    pub key: &'static str,
    pub low: f64,
    pub high: f64,
    pub open_low: bool,
    /// The key takes whole numbers.
    pub integer: bool,
}

/// A whole-number key in `[low, high]`.
const fn int(key: &'static str, low: f64, high: f64) -> Range {
    Range {
        key,
        low,
        high,
        open_low: false,
        integer: true,
    }
}

/// A real-number key in `[low, high]`.
const fn closed(key: &'static str, low: f64, high: f64) -> Range {
    Range {
        key,
        low,
        high,
        open_low: false,
        integer: false,
    }
}

/// A real-number key in `(low, high]`.
const fn above(key: &'static str, low: f64, high: f64) -> Range {
    Range {
        key,
        low,
        high,
        open_low: true,
        integer: false,
    }
}

/// Steps in one trajectory batch (envs_per_actor x rollout_length), at most.
pub const MAX_BATCH_STEPS: usize = 1 << 20;
/// Samples in one update (batches x envs x steps), at most.
pub const MAX_UPDATE_SAMPLES: usize = 1 << 22;
/// Weights in the network's hidden layers (both torsos), at most.
pub const MAX_HIDDEN_WEIGHTS: usize = 1 << 26;

/// Every numeric key and its range.
pub const RANGES: &[Range] = &[
    int("env.envs_per_actor", 1.0, 4096.0),
    int("env.rollout_length", 1.0, 65_536.0),
    int("run.total_steps", 1.0, 1e13),
    int("run.time_limit_secs", 0.0, 1e9),
    int("run.local_actors", 1.0, 256.0),
    int("run.forced_lag", 0.0, 64.0),
    int("run.actor_restarts", 0.0, 1000.0),
    int("network.hidden", 1.0, 8192.0),
    int("network.conv.channels", 1.0, 1024.0),
    int("network.conv.kernel", 1.0, 32.0),
    int("network.conv.stride", 1.0, 32.0),
    int("network.conv.padding", 0.0, 32.0),
    int("network.stacks.channels", 1.0, 1024.0),
    int("network.stacks.blocks", 0.0, 16.0),
    int("network.core_size", 1.0, 4096.0),
    above("network.obs_clip", 0.0, 1e6),
    above("network.min_std", 0.0, 1e3),
    above("network.init_std", 0.0, 1e3),
    above("ppo.gamma", 0.0, 1.0),
    closed("ppo.gae_lambda", 0.0, 1.0),
    above("ppo.clip_coef", 0.0, 10.0),
    above("ppo.learning_rate", 0.0, 1.0),
    above("ppo.max_grad_norm", 0.0, 1e6),
    above("ppo.adam_eps", 0.0, 1.0),
    above("ppo.value_clip_coef", 0.0, 1e6),
    closed("ppo.vf_coef", 0.0, 1e3),
    closed("ppo.ent_coef", 0.0, 1e3),
    closed("ppo.target_kl", 0.0, 1e3),
    above("ppo.vtrace_rho_clip", 0.0, 1e3),
    above("ppo.vtrace_c_clip", 0.0, 1e3),
    int("ppo.epochs", 1.0, 1000.0),
    int("ppo.minibatches", 1.0, MAX_UPDATE_SAMPLES as f64),
    int("ppo.bptt", 0.0, 65_536.0),
    int("learner.batches_per_update", 1.0, 1024.0),
    int("learner.queue_capacity", 1.0, 4096.0),
    int("learner.max_policy_lag", 0.0, 1e6),
    int("learner.final_eval_timeout_secs", 0.0, 86_400.0),
    int("learner.checkpoint_interval", 0.0, 1e9),
    int("learner.threads", 0.0, 256.0),
    int("learner.departed_actors_kept", 0.0, 1e6),
    int("actor.send_queue", 1.0, 64.0),
    int("eval.interval", 1.0, 1e6),
    int("eval.episodes", 1.0, 10_000.0),
    int("eval.final_episodes", 1.0, 10_000.0),
    int("eval.earlier_versions", 2.0, 256.0),
    closed("eval.epsilon", 0.0, 1.0),
    int("eval.max_steps", 1.0, 1e9),
    int("eval.final_max_steps", 1.0, 1e9),
    above("eval.cpu_share", 0.0, 1.0),
    int("eval.video_every", 0.0, 1e6),
    closed("selfplay.past_fraction", 0.0, 1.0),
    closed("selfplay.rule_fraction", 0.0, 1.0),
    int("selfplay.past_versions", 1.0, 32.0),
    int("selfplay.past_stride", 1.0, 1e6),
    above("dqn.learning_rate", 0.0, 1.0),
    above("dqn.gamma", 0.0, 1.0),
    int("dqn.batch_size", 1.0, 65_536.0),
    int("dqn.buffer_size", 1.0, 1e7),
    above("dqn.replay_ratio", 0.0, 64.0),
    int("dqn.learning_starts", 0.0, 1e13),
    int("dqn.target_update_interval", 1.0, 1e9),
    above("dqn.huber_delta", 0.0, 1e6),
    above("dqn.max_grad_norm", 0.0, 1e6),
    above("dqn.adam_eps", 0.0, 1.0),
    closed("dqn.epsilon_start", 0.0, 1.0),
    closed("dqn.epsilon_end", 0.0, 1.0),
    closed("dqn.exploration_fraction", 0.0, 1.0),
];

impl Range {
    /// `value` against the range; `shown` is the value as the user wrote it
    /// (a large integer is not exact as an f64).
    fn check(&self, value: f64, shown: &dyn std::fmt::Display) -> Result<(), ConfigError> {
        let low_ok = if self.open_low {
            value > self.low
        } else {
            value >= self.low
        };
        if value.is_finite() && low_ok && value <= self.high {
            return Ok(());
        }
        Err(ConfigError::BadValue {
            key: self.key.into(),
            reason: format!("{shown} is outside {}", self.describe()),
        })
    }

    /// `[1, 4096]` or `(0, 1]`.
    pub fn describe(&self) -> String {
        let open = if self.open_low { '(' } else { '[' };
        format!("{open}{}, {}]", self.low, self.high)
    }
}

/// The configuration reference's range table (`docs/configuration.md`), one
/// row per key of [`RANGES`], so the documentation cannot drift from the checks.
pub fn reference_table() -> String {
    let mut out = String::from("| key | range | takes |\n| --- | --- | --- |\n");
    for r in RANGES {
        let open = if r.open_low { '(' } else { '[' };
        let takes = if r.integer { "whole numbers" } else { "reals" };
        out += &format!(
            "| `{}` | {open}{}, {}] | {takes} |\n",
            r.key,
            shown(r.low),
            shown(r.high)
        );
    }
    out
}

/// A bound as people write it: `2^22` for a large power of two, `1e13` for
/// a large power of ten, `65536` otherwise.
fn shown(x: f64) -> String {
    let exponent = |base: f64| {
        let e = x.log(base).round();
        (x >= 1e6 && base.powf(e) == x).then_some(e as i32)
    };
    if let Some(e) = exponent(2.0) {
        format!("2^{e}")
    } else if let Some(e) = exponent(10.0) {
        format!("1e{e}")
    } else {
        format!("{x}")
    }
}

/// Checks one key's value against its range (for flags that set a key).
pub fn check_key(key: &str, value: u64) -> Result<(), ConfigError> {
    range(key).check(value as f64, &value)
}

/// Checks one real-valued key's value against its range.
pub fn check_real(key: &str, value: f64) -> Result<(), ConfigError> {
    range(key).check(value, &value)
}

fn range(key: &str) -> Range {
    RANGES
        .iter()
        .copied()
        .find(|r| r.key == key)
        .unwrap_or(closed("<unlisted>", f64::MIN, f64::MAX))
}

/// Checks every key of [`RANGES`] against `c`, then the sizes derived from
/// several keys.
pub fn check(c: &RunConfig) -> Result<(), ConfigError> {
    let (n, p, l) = (&c.network, &c.ppo, &c.learner);
    // Integers go through f64 for the bounds (above 2^53 they round, but stay
    // above every bound); messages show them as written.
    let int = |key: &str, v: u64| range(key).check(v as f64, &v);
    let real = |key: &str, v: f64| range(key).check(v, &v);
    int("env.envs_per_actor", c.env.envs_per_actor as u64)?;
    int("env.rollout_length", c.env.rollout_length as u64)?;
    int("run.total_steps", c.run.total_steps)?;
    int("run.time_limit_secs", c.run.time_limit_secs)?;
    int("run.local_actors", c.run.local_actors as u64)?;
    int("run.forced_lag", c.run.forced_lag)?;
    int("run.actor_restarts", u64::from(c.run.actor_restarts))?;
    int("network.core_size", n.core_size as u64)?;
    real("network.obs_clip", n.obs_clip)?;
    real("network.min_std", n.min_std)?;
    real("network.init_std", n.init_std)?;
    real("ppo.gamma", p.gamma)?;
    real("ppo.gae_lambda", p.gae_lambda)?;
    real("ppo.clip_coef", p.clip_coef)?;
    real("ppo.learning_rate", p.learning_rate)?;
    real("ppo.max_grad_norm", p.max_grad_norm)?;
    real("ppo.adam_eps", p.adam_eps)?;
    real("ppo.value_clip_coef", p.value_clip_coef)?;
    real("ppo.vf_coef", p.vf_coef)?;
    real("ppo.ent_coef", p.ent_coef)?;
    real("ppo.target_kl", p.target_kl)?;
    real("ppo.vtrace_rho_clip", p.vtrace_rho_clip)?;
    real("ppo.vtrace_c_clip", p.vtrace_c_clip)?;
    int("ppo.epochs", p.epochs as u64)?;
    int("ppo.minibatches", p.minibatches as u64)?;
    int("ppo.bptt", p.bptt as u64)?;
    int("learner.batches_per_update", l.batches_per_update as u64)?;
    int("learner.queue_capacity", l.queue_capacity as u64)?;
    int("learner.max_policy_lag", l.max_policy_lag)?;
    int("learner.final_eval_timeout_secs", l.final_eval_timeout_secs)?;
    int("learner.checkpoint_interval", l.checkpoint_interval)?;
    int("learner.threads", l.threads as u64)?;
    int(
        "learner.departed_actors_kept",
        l.departed_actors_kept as u64,
    )?;
    int("actor.send_queue", c.actor.send_queue as u64)?;
    int("eval.interval", c.eval.interval)?;
    int("eval.episodes", c.eval.episodes as u64)?;
    int("eval.final_episodes", c.eval.final_episodes as u64)?;
    int("eval.earlier_versions", c.eval.earlier_versions as u64)?;
    real("eval.epsilon", c.eval.epsilon)?;
    int("eval.max_steps", c.eval.max_steps)?;
    int("eval.video_every", c.eval.video_every)?;
    int("eval.final_max_steps", c.eval.final_max_steps)?;
    real("eval.cpu_share", c.eval.cpu_share)?;
    real("selfplay.past_fraction", c.selfplay.past_fraction)?;
    real("selfplay.rule_fraction", c.selfplay.rule_fraction)?;
    int(
        "selfplay.past_versions",
        u64::from(c.selfplay.past_versions),
    )?;
    int("selfplay.past_stride", c.selfplay.past_stride)?;
    check_dqn(c)?;
    check_eval_policy(c)?;
    check_network_size(c)?;
    check_derived(c)
}

fn check_dqn(c: &RunConfig) -> Result<(), ConfigError> {
    let q = &c.dqn;
    let int = |key: &str, v: u64| range(key).check(v as f64, &v);
    let real = |key: &str, v: f64| range(key).check(v, &v);
    real("dqn.learning_rate", q.learning_rate)?;
    real("dqn.gamma", q.gamma)?;
    int("dqn.batch_size", q.batch_size as u64)?;
    int("dqn.buffer_size", q.buffer_size as u64)?;
    real("dqn.replay_ratio", q.replay_ratio)?;
    int("dqn.learning_starts", q.learning_starts)?;
    int("dqn.target_update_interval", q.target_update_interval)?;
    real("dqn.huber_delta", q.huber_delta)?;
    real("dqn.max_grad_norm", q.max_grad_norm)?;
    real("dqn.adam_eps", q.adam_eps)?;
    real("dqn.epsilon_start", q.epsilon_start)?;
    real("dqn.epsilon_end", q.epsilon_end)?;
    real("dqn.exploration_fraction", q.exploration_fraction)
}

/// A DQN's head is Q-values: there is no distribution to sample.
fn check_eval_policy(c: &RunConfig) -> Result<(), ConfigError> {
    if c.run.algorithm == super::Algorithm::Dqn && c.eval.policy == super::EvalPolicy::Sample {
        return bad(
            "eval.policy",
            "`sample` draws from a policy's distribution, and a DQN's outputs are Q-values: use `greedy` or `epsilon`".into(),
        );
    }
    Ok(())
}

fn bad(key: &str, reason: String) -> Result<(), ConfigError> {
    Err(ConfigError::BadValue {
        key: key.into(),
        reason,
    })
}

fn check_network_size(c: &RunConfig) -> Result<(), ConfigError> {
    if c.network.conv.len() > 8 {
        return bad("network.conv", "at most 8 layers".into());
    }
    for l in &c.network.conv {
        let int = |key: &str, v: usize| range(key).check(v as f64, &v);
        int("network.conv.channels", l.channels)?;
        int("network.conv.kernel", l.kernel)?;
        int("network.conv.stride", l.stride)?;
        int("network.conv.padding", l.padding)?;
    }
    if c.network.stacks.len() > 8 {
        return bad("network.stacks", "at most 8 stacks".into());
    }
    for s in &c.network.stacks {
        let int = |key: &str, v: usize| range(key).check(v as f64, &v);
        int("network.stacks.channels", s.channels)?;
        int("network.stacks.blocks", s.blocks)?;
    }
    let hidden = &c.network.hidden;
    if hidden.is_empty() || hidden.len() > 8 {
        return bad("network.hidden", "needs 1 to 8 layers".into());
    }
    for &h in hidden {
        range("network.hidden").check(h as f64, &h)?;
    }
    let weights: usize = hidden.windows(2).map(|w| w[0] * w[1]).sum::<usize>() * 2;
    if weights > MAX_HIDDEN_WEIGHTS {
        return bad(
            "network.hidden",
            format!("{weights} hidden-to-hidden weights, over the {MAX_HIDDEN_WEIGHTS} limit"),
        );
    }
    Ok(())
}

/// Sizes several keys make together.
fn check_derived(c: &RunConfig) -> Result<(), ConfigError> {
    let steps = c.env.envs_per_actor * c.env.rollout_length;
    if steps > MAX_BATCH_STEPS {
        return bad(
            "env.envs_per_actor",
            format!(
                "x env.rollout_length = {steps} steps per batch, over the {MAX_BATCH_STEPS} limit"
            ),
        );
    }
    let samples = steps * c.learner.batches_per_update;
    if samples > MAX_UPDATE_SAMPLES {
        return bad(
            "learner.batches_per_update",
            format!(
                "{samples} samples per update (x envs_per_actor x rollout_length), over the {MAX_UPDATE_SAMPLES} limit"
            ),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(key: &str, value: &str) -> Result<RunConfig, ConfigError> {
        RunConfig::resolve(Some("CartPole-v1"), None, &[format!("{key}={value}")])
    }

    #[test]
    fn each_key_is_refused_outside_its_range_by_name() {
        for r in RANGES {
            let above = if r.integer {
                format!("{}", (r.high as u64).saturating_mul(2).saturating_add(1))
            } else {
                format!("{:e}", r.high * 2.0 + 1.0)
            };
            let (key, above) = match r.key {
                "network.hidden" => (r.key.to_string(), format!("[{above}]")),
                k if k.starts_with("network.conv.") => {
                    let field = &k["network.conv.".len()..];
                    let mut layer = vec![("channels", "8"), ("kernel", "3")];
                    layer.retain(|(f, _)| *f != field);
                    layer.push((field, &above));
                    let fields: Vec<String> =
                        layer.iter().map(|(f, v)| format!("{f} = {v}")).collect();
                    (
                        "network.conv".to_string(),
                        format!("[{{{}}}]", fields.join(", ")),
                    )
                }
                k if k.starts_with("network.stacks.") => {
                    let field = &k["network.stacks.".len()..];
                    let fields = match field {
                        "channels" => format!("channels = {above}"),
                        _ => format!("channels = 8, {field} = {above}"),
                    };
                    ("network.stacks".to_string(), format!("[{{{fields}}}]"))
                }
                _ => (r.key.to_string(), above),
            };
            match with(&key, &above) {
                Err(ConfigError::BadValue { key, .. }) => assert_eq!(key, r.key),
                other => panic!("{} = {above}: {other:?}", r.key),
            }
        }
    }

    #[test]
    fn the_reported_repros_are_refused() {
        for (key, value) in [
            ("learner.queue_capacity", "4611686018427387904"),
            ("actor.send_queue", "4611686018427387904"),
            ("env.rollout_length", "4294967297"),
            ("learner.batches_per_update", "1000000000"),
            ("network.hidden", "[100000,100000]"),
            ("learner.final_eval_timeout_secs", "9223372036854775807"),
            ("ppo.learning_rate", "1e30"),
        ] {
            match with(key, value) {
                Err(ConfigError::BadValue { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{key} = {value}: {other:?}"),
            }
        }
        // Several keys together.
        let e = RunConfig::resolve(
            Some("CartPole-v1"),
            None,
            &[
                "env.envs_per_actor=4096".into(),
                "env.rollout_length=4096".into(),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains("env.envs_per_actor"), "{e}");
        let e = with("network.hidden", "[8192,8192,8192]").unwrap_err();
        assert!(e.to_string().contains("network.hidden"), "{e}");
    }

    /// Keys that travel as `uint32` in the run spec fit it at their largest.
    #[test]
    fn wire_fields_cannot_overflow() {
        for key in [
            "env.envs_per_actor",
            "env.rollout_length",
            "network.hidden",
            "eval.interval",
            "eval.episodes",
        ] {
            assert!(range(key).high <= f64::from(u32::MAX), "{key}");
        }
    }

    #[test]
    fn the_reference_writes_bounds_as_people_do() {
        assert_eq!(shown(1e13), "1e13");
        assert_eq!(shown((1u64 << 22) as f64), "2^22");
        assert_eq!(shown(65_536.0), "65536");
        assert_eq!(shown(86_400.0), "86400");
        assert_eq!(shown(0.0), "0");
        assert_eq!(shown(1e6), "1e6");
        let table = reference_table();
        assert!(
            table.contains("| `ppo.gamma` | (0, 1] | reals |\n"),
            "{table}"
        );
        assert!(table.contains("| `run.total_steps` | [1, 1e13] | whole numbers |\n"));
        assert_eq!(table.lines().count(), RANGES.len() + 2);
    }

    #[test]
    fn every_preset_is_inside_the_ranges() {
        let minatar = sebulba_envs::minatar::MINATAR_IDS;
        for id in [
            sebulba_envs::ENV_IDS,
            sebulba_envs::games::GAME_IDS,
            minatar,
        ]
        .concat()
        {
            let c = RunConfig::preset(id).expect("preset");
            c.validate().unwrap_or_else(|e| panic!("{id}: {e}"));
        }
    }
}
