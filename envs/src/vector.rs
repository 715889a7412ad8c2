//! What actors and the evaluator step: E environments behind one call, either
//! [`NativeVecEnv`] or an external one (Gymnasium through embedded Python)
//! supplied by an [`EnvProvider`] the binary installs at start-up.
//!
//! The provider is a hook rather than a dependency so that this crate (and
//! everything built on it) never links Python: only a binary built with the
//! `python` feature installs one.

use crate::env::EnvError;
use crate::render::Frame;
use crate::spec::EnvSpec;
use crate::vec_env::{ActionBatch, NativeVecEnv, VecStepOut};
use std::sync::OnceLock;

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
    /// A picture of env `index`'s current state (`crate::render`); `None`
    /// for an env kind that cannot draw itself or an index out of range.
    fn render(&self, index: usize) -> Option<Frame> {
        let _ = index;
        None
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
    fn render(&self, index: usize) -> Option<Frame> {
        NativeVecEnv::render(self, index)
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
    /// [`derive_env_seed`](crate::vec_env::derive_env_seed)`(seed, i)`.
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

/// The installed provider, or an error naming the feature that brings one.
pub(crate) fn provider(id: &str) -> Result<&'static dyn EnvProvider, EnvError> {
    PROVIDER
        .get()
        .map(|p| p.as_ref())
        .ok_or_else(|| EnvError::External {
            id: id.to_string(),
            reason: "this binary was built without Python environments (rebuild with `--features python`)"
                .into(),
        })
}
