//! What actors and the evaluator step: E environments behind one call, either
//! [`NativeVecEnv`] or an external one (Gymnasium through embedded Python)
//! supplied by an [`EnvProvider`] the binary installs at start-up.
//!
//! The provider is a hook rather than a dependency so that this crate (and
//! everything built on it) never links Python: only a binary built with the
//! `python` feature installs one.

use super::{ActionBatch, EnvError, EnvSpec, NativeVecEnv, VecStepOut};
use std::sync::OnceLock;
use std::time::Duration;

/// E environments stepped together with Gymnasium's same-step auto-reset
/// (see [`VecStepOut`]).
pub trait VectorEnv: Send {
    fn spec(&self) -> &EnvSpec;
    fn num_envs(&self) -> usize;
    /// Resets every env and writes `[E*obs_dim]` observations.
    fn reset(&mut self, obs: &mut [f32]) -> Result<(), EnvError>;
    /// Steps every env; finished envs are reset. On an error no env's result
    /// is reported (the caller drops the rollout).
    fn step(&mut self, actions: ActionBatch<'_>, out: &mut VecStepOut) -> Result<(), EnvError>;
    /// Writes every env's current action mask (`[E * n]`); false when the
    /// env kind has no masks (then `mask` is untouched).
    fn action_masks(&self, mask: &mut [u8]) -> bool;
    /// Games: writes each env's seat to move now (`[E]`) and returns true;
    /// false for one-player envs (then `ids` is untouched).
    fn to_move(&self, ids: &mut [u8]) -> bool {
        let _ = ids;
        false
    }
    /// Games: how many rule-based players the game has
    /// (`TurnGame::rules`); 0 for one-player envs.
    fn rule_players(&self) -> usize {
        0
    }
    /// Games: rule-based player `rule`'s move at env `index` now (`None`
    /// for one-player envs, an env or a rule out of range).
    fn rule_move(&self, index: usize, rule: usize) -> Option<usize> {
        let _ = (index, rule);
        None
    }
    /// Envs restarted after they failed (external envs only), since creation.
    fn restarts(&self) -> u64 {
        0
    }
    /// Replaces env `index` after it failed ([`EnvError::EnvFailed`] or
    /// [`EnvError::NonFinite`]) with a fresh one, newly seeded, and writes
    /// every env's current observation (`[E*obs_dim]`). Native envs do not
    /// fail this way and cannot be restarted.
    fn restart(&mut self, index: usize, obs: &mut [f32]) -> Result<(), EnvError> {
        let _ = obs;
        Err(EnvError::EnvFailed {
            id: self.spec().id.clone(),
            index,
            reason: "this environment kind cannot be restarted".into(),
        })
    }
    /// Buffers sized for this vector env.
    fn new_step_out(&self) -> VecStepOut {
        VecStepOut::sized(self.num_envs(), self.spec().obs_dim)
    }
}

impl VectorEnv for NativeVecEnv {
    fn spec(&self) -> &EnvSpec {
        NativeVecEnv::spec(self)
    }
    fn num_envs(&self) -> usize {
        NativeVecEnv::num_envs(self)
    }
    fn reset(&mut self, obs: &mut [f32]) -> Result<(), EnvError> {
        NativeVecEnv::reset(self, obs);
        Ok(())
    }
    fn step(&mut self, actions: ActionBatch<'_>, out: &mut VecStepOut) -> Result<(), EnvError> {
        NativeVecEnv::step(self, actions, out)
    }
    fn action_masks(&self, mask: &mut [u8]) -> bool {
        NativeVecEnv::action_masks(self, mask)
    }
}

/// What a vector env is made for. Training may see the episode a learner
/// should learn from rather than the game a user scores: Atari's training
/// envs end an episode at each lost life and clip rewards to their sign,
/// its evaluation envs play whole games at their raw score. Native envs are
/// the same either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Purpose {
    #[default]
    Train,
    Evaluate,
}

impl Purpose {
    pub fn name(self) -> &'static str {
        match self {
            Purpose::Train => "train",
            Purpose::Evaluate => "evaluate",
        }
    }
}

/// Makes environments whose ids carry a prefix (`gym:`, `py:`, `ale:`, `envpool:`).
pub trait EnvProvider: Send + Sync {
    /// The spec of `id` built with `kwargs` (a JSON object, `""` for none).
    fn spec(&self, id: &str, kwargs: &str) -> Result<EnvSpec, EnvError>;
    /// `num_envs` copies of `id`, env `i` seeded from
    /// [`derive_env_seed`](super::derive_env_seed)`(seed, i)`.
    fn make(
        &self,
        id: &str,
        kwargs: &str,
        num_envs: usize,
        seed: u64,
        purpose: Purpose,
    ) -> Result<Box<dyn VectorEnv>, EnvError>;
}

/// Prefixes that name an external environment: Gymnasium ids, a user's
/// factory, Atari games on ALE's own vector env, and EnvPool's envs.
pub const EXTERNAL_PREFIXES: &[&str] = &["gym:", "py:", "ale:", "envpool:"];

static PROVIDER: OnceLock<Box<dyn EnvProvider>> = OnceLock::new();

/// Installs the provider of external environments (once per process; later
/// calls are ignored and return false).
pub fn install_provider(provider: Box<dyn EnvProvider>) -> bool {
    PROVIDER.set(provider).is_ok()
}

/// True for Atari games (`ale:Game` on ALE's vector env, `gym:ALE/...`
/// through Gymnasium, `envpool:ALE/...` on EnvPool): byte frames, the
/// Atari preset.
pub fn is_atari(id: &str) -> bool {
    ["ale:", "gym:ALE/", "envpool:ALE/"]
        .iter()
        .any(|p| id.starts_with(p))
}

/// True for ids an [`EnvProvider`] makes.
pub fn is_external(id: &str) -> bool {
    EXTERNAL_PREFIXES.iter().any(|p| id.starts_with(p))
}

fn provider(id: &str) -> Result<&'static dyn EnvProvider, EnvError> {
    PROVIDER
        .get()
        .map(|p| p.as_ref())
        .ok_or_else(|| EnvError::External {
            id: id.to_string(),
            reason: "this binary was built without Python environments (rebuild with `--features python`)"
                .into(),
        })
}

/// The most a native env's synthetic step cost may be: one second a step.
pub const MAX_STEP_COST_US: u64 = 1_000_000;

/// A native env's kwargs: only `step_cost_us`, a synthetic cost of CPU time
/// per env step (an integer in [0, 1e6] microseconds, 0 without it) that
/// stands in for an expensive simulator when measuring how throughput scales
/// with actor processes. Anything else is for Python environments.
pub fn native_step_cost(id: &str, kwargs: &str) -> Result<Duration, EnvError> {
    let hint = "a native env takes only `step_cost_us` (other kwargs are for Python environments)";
    match only_kwarg(id, kwargs, "step_cost_us", hint)? {
        None => Ok(Duration::ZERO),
        Some(v) => v
            .as_u64()
            .filter(|&us| us <= MAX_STEP_COST_US)
            .map(Duration::from_micros)
            .ok_or_else(|| {
                kwargs_error(
                    id,
                    format!("env.kwargs.step_cost_us = {v}: must be an integer in [0, {MAX_STEP_COST_US}]"),
                )
            }),
    }
}

fn kwargs_error(id: &str, reason: String) -> EnvError {
    EnvError::External {
        id: id.to_string(),
        reason,
    }
}

/// The value of `key` in `kwargs` (a JSON object, `""` for none), which may
/// hold no other key (`hint` says so, naming the key found).
fn only_kwarg(
    id: &str,
    kwargs: &str,
    key: &str,
    hint: &str,
) -> Result<Option<serde_json::Value>, EnvError> {
    if kwargs.trim().is_empty() {
        return Ok(None);
    }
    let mut map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(kwargs).map_err(|e| kwargs_error(id, format!("env.kwargs: {e}")))?;
    if let Some(other) = map.keys().find(|k| *k != key) {
        return Err(kwargs_error(id, format!("env.kwargs.{other}: {hint}")));
    }
    Ok(map.remove(key))
}

/// The spec of any environment id, native or external.
pub fn env_spec_with(id: &str, kwargs: &str) -> Result<EnvSpec, EnvError> {
    if is_external(id) {
        provider(id)?.spec(id, kwargs)
    } else if let Some(spec) = crate::games::game_spec(id) {
        crate::games::GameOptions::from_kwargs(id, kwargs)?;
        Ok(spec)
    } else if let Some(spec) = crate::minatar::minatar_spec(id) {
        crate::minatar::Options::from_kwargs(id, kwargs)?;
        Ok(spec)
    } else {
        native_step_cost(id, kwargs)?;
        super::env_spec(id)
    }
}

/// `num_envs` copies of any environment id, native or external, made for
/// `purpose`.
pub fn make_vector_env(
    id: &str,
    kwargs: &str,
    num_envs: usize,
    seed: u64,
    purpose: Purpose,
) -> Result<Box<dyn VectorEnv>, EnvError> {
    if num_envs == 0 {
        return Err(EnvError::NoEnvs);
    }
    if is_external(id) {
        provider(id)?.make(id, kwargs, num_envs, seed, purpose)
    } else if crate::games::game_spec(id).is_some() {
        let options = crate::games::GameOptions::from_kwargs(id, kwargs)?;
        Ok(Box::new(crate::games::GameVecEnv::new(
            id, num_envs, seed, options,
        )?))
    } else if crate::minatar::minatar_spec(id).is_some() {
        let options = crate::minatar::Options::from_kwargs(id, kwargs)?;
        Ok(Box::new(NativeVecEnv::from_envs(num_envs, seed, |s| {
            Ok(Box::new(crate::minatar::MinAtar::new(id, options, s)?))
        })?))
    } else {
        let cost = native_step_cost(id, kwargs)?;
        Ok(Box::new(
            NativeVecEnv::new(id, num_envs, seed)?.with_step_cost(cost),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_ids_go_through_the_vec_env_and_refuse_kwargs() {
        let mut v = make_vector_env("CartPole-v1", "", 3, 1, Purpose::Train).expect("native");
        assert_eq!(v.num_envs(), 3);
        let mut obs = vec![0.0; 12];
        v.reset(&mut obs).expect("reset");
        assert!(obs.iter().all(|x| x.abs() <= 0.05));
        assert!(make_vector_env("CartPole-v1", "{}", 1, 1, Purpose::Train).is_ok());
        let err = make_vector_env("CartPole-v1", r#"{"a":1}"#, 1, 1, Purpose::Train)
            .err()
            .expect("kwargs refused");
        assert!(err.to_string().contains("native"), "{err}");
        assert!(matches!(
            make_vector_env("CartPole-v1", "", 0, 1, Purpose::Train),
            Err(EnvError::NoEnvs)
        ));
        assert_eq!(
            env_spec_with("Pendulum-v1", "").expect("spec"),
            super::super::env_spec("Pendulum-v1").expect("spec")
        );
    }

    /// `step_cost_us` burns that much CPU time per env step and changes
    /// nothing else; bad values and other keys are refused by name.
    #[test]
    fn a_native_step_cost_spins_without_changing_the_dynamics() {
        let (e, steps, cost_us) = (2, 10, 300);
        let kwargs = format!(r#"{{"step_cost_us":{cost_us}}}"#);
        let mut slow = make_vector_env("CartPole-v1", &kwargs, e, 5, Purpose::Train).expect("slow");
        let mut fast = make_vector_env("CartPole-v1", "", e, 5, Purpose::Train).expect("fast");
        let (mut a, mut b) = (vec![0.0; 4 * e], vec![0.0; 4 * e]);
        slow.reset(&mut a).expect("reset");
        fast.reset(&mut b).expect("reset");
        let (mut oa, mut ob) = (slow.new_step_out(), fast.new_step_out());
        let started = std::time::Instant::now();
        for t in 0..steps {
            let actions = [(t % 2) as u32, ((t / 3) % 2) as u32];
            slow.step(ActionBatch::Discrete(&actions), &mut oa)
                .expect("step");
            fast.step(ActionBatch::Discrete(&actions), &mut ob)
                .expect("step");
            assert_eq!(oa.obs, ob.obs);
            assert_eq!(oa.reward, ob.reward);
            assert_eq!(oa.terminated, ob.terminated);
        }
        let spent = started.elapsed();
        let least = Duration::from_micros(cost_us * (e * steps) as u64);
        assert!(spent >= least, "{spent:?} < {least:?}");
        assert_eq!(
            native_step_cost("CartPole-v1", "{}").expect("none"),
            Duration::ZERO
        );
        for (bad, names) in [
            (r#"{"step_cost_us":-1}"#, "step_cost_us"),
            (r#"{"step_cost_us":1.5}"#, "step_cost_us"),
            (r#"{"step_cost_us":1000001}"#, "step_cost_us"),
            (r#"{"step_cost_us":"fast"}"#, "step_cost_us"),
            (r#"{"gravity":9.8}"#, "env.kwargs.gravity"),
            ("[1]", "env.kwargs"),
        ] {
            let e = native_step_cost("CartPole-v1", bad).expect_err(bad);
            assert!(e.to_string().contains(names), "{bad}: {e}");
            assert!(env_spec_with("CartPole-v1", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn external_ids_without_a_provider_say_how_to_get_one() {
        // No test in this crate installs a provider.
        assert!(is_external("gym:HalfCheetah-v5") && is_external("py:m:f"));
        assert!(!is_external("CartPole-v1"));
        let err = env_spec_with("gym:CartPole-v1", "").expect_err("no provider");
        assert!(err.to_string().contains("--features python"), "{err}");
    }
}
