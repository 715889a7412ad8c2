//! A batch of environments stepped together, with Gymnasium-style time limits
//! and auto-reset, writing into reusable buffers (no per-step allocation).

use crate::env::{Action, Env, EnvError};
use crate::spec::{ActionSpace, EnvSpec};
use crate::time_limit::TimeLimit;
use std::time::{Duration, Instant};

/// Actions for all `E` environments of a [`NativeVecEnv`].
#[derive(Clone, Copy, Debug)]
pub enum ActionBatch<'a> {
    /// One index per env (length `E`).
    Discrete(&'a [u32]),
    /// Row-major `[E * action_dim]`, in env units.
    Continuous(&'a [f32]),
}

/// An episode that finished during a step.
#[derive(Clone, Debug, PartialEq)]
pub struct EpisodeStats {
    pub env_index: usize,
    /// Undiscounted sum of rewards, accumulated in f64.
    pub episode_return: f64,
    pub length: u32,
}

/// Buffers filled by each step, reused (no per-step allocation).
#[derive(Clone, Debug, Default)]
pub struct VecStepOut {
    /// `[E*obs_dim]`: next observation; for finished envs already the reset one.
    pub obs: Vec<f32>,
    pub reward: Vec<f32>,
    pub terminated: Vec<bool>,
    /// TimeLimit truncation (may be true together with `terminated`).
    pub truncated: Vec<bool>,
    /// `[E*obs_dim]`: the true last observation where terminated||truncated
    /// (unspecified elsewhere).
    pub final_obs: Vec<f32>,
    /// Episodes that finished in this step.
    pub episodes: Vec<EpisodeStats>,
    /// `[E * players]`: a game's score per seat (normalised) where it ended
    /// in this step (unspecified elsewhere); empty for one-player envs.
    pub scores: Vec<f32>,
}

impl VecStepOut {
    /// Buffers for `num_envs` envs of `obs_dim` observations.
    pub fn sized(num_envs: usize, obs_dim: usize) -> Self {
        let (e, d) = (num_envs, obs_dim);
        VecStepOut {
            obs: vec![0.0; e * d],
            reward: vec![0.0; e],
            terminated: vec![false; e],
            truncated: vec![false; e],
            final_obs: vec![0.0; e * d],
            episodes: Vec::with_capacity(e),
            scores: Vec::new(),
        }
    }

    /// These buffers resized for `num_envs` envs of `obs_dim` observations
    /// and `players` seats (no scores for one player).
    pub fn resized(mut self, num_envs: usize, obs_dim: usize, players: usize) -> Self {
        let (e, d) = (num_envs, obs_dim);
        self.obs.resize(e * d, 0.0);
        self.reward.resize(e, 0.0);
        self.terminated.resize(e, false);
        self.truncated.resize(e, false);
        self.final_obs.resize(e * d, 0.0);
        self.scores
            .resize(if players > 1 { e * players } else { 0 }, 0.0);
        self
    }
}

/// SplitMix64 finaliser: a bijective mixer, so distinct inputs stay distinct.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of env `index` in a [`NativeVecEnv`] seeded with `seed`. Distinct
/// indices give distinct seeds for a given `seed`.
pub fn derive_env_seed(seed: u64, index: u64) -> u64 {
    splitmix64(splitmix64(seed) ^ index)
}

/// `E` copies of one environment behind Gymnasium's TimeLimit, auto-reset.
pub struct NativeVecEnv {
    spec: EnvSpec,
    envs: Vec<TimeLimit>,
    returns: Vec<f64>,
    /// CPU time burnt per env step (`env.kwargs.step_cost_us`): zero unless
    /// a benchmark asks for an expensive env.
    step_cost: Duration,
}

impl NativeVecEnv {
    /// `num_envs` envs made by `make` from their seeds ([`derive_env_seed`]),
    /// for an id whose envs take options.
    pub fn from_envs(
        num_envs: usize,
        seed: u64,
        make: impl Fn(u64) -> Result<Box<dyn Env>, EnvError>,
    ) -> Result<Self, EnvError> {
        if num_envs == 0 {
            return Err(EnvError::NoEnvs);
        }
        let envs = (0..num_envs)
            .map(|i| make(derive_env_seed(seed, i as u64)).map(TimeLimit::new))
            .collect::<Result<Vec<_>, _>>()?;
        let spec = envs[0].env().spec().clone();
        Ok(Self {
            spec,
            envs,
            returns: vec![0.0; num_envs],
            step_cost: Duration::ZERO,
        })
    }

    /// The same envs, each step also spinning the CPU for `cost` (the
    /// dynamics are unchanged): a synthetic expensive simulator.
    pub fn with_step_cost(mut self, cost: Duration) -> Self {
        self.step_cost = cost;
        self
    }

    pub fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    pub fn num_envs(&self) -> usize {
        self.envs.len()
    }

    /// Resets every env and writes `[E*obs_dim]` observations.
    pub fn reset(&mut self, obs: &mut [f32]) {
        let d = self.spec.obs_dim;
        for (env, o) in self.envs.iter_mut().zip(obs.chunks_exact_mut(d)) {
            env.reset(o);
        }
        self.returns.fill(0.0);
    }

    /// Writes every env's current action mask (`[E * n]`); false when the env
    /// kind has no masks (then `mask` is untouched).
    pub fn action_masks(&self, mask: &mut [u8]) -> bool {
        let ActionSpace::Discrete { n } = self.spec.action_space else {
            return false;
        };
        let mut any = false;
        for (env, m) in self.envs.iter().zip(mask.chunks_exact_mut(n)) {
            any |= env.env().action_mask(m);
        }
        any
    }

    /// A picture of env `index`'s current state, where the env draws itself.
    pub fn render(&self, index: usize) -> Option<crate::render::Frame> {
        self.envs.get(index)?.env().render()
    }

    /// Buffers sized for this vec env.
    pub fn new_step_out(&self) -> VecStepOut {
        VecStepOut::sized(self.num_envs(), self.spec.obs_dim)
    }

    /// Steps every env; finished envs are reset (see [`VecStepOut`]). The
    /// whole batch is validated first, so an error leaves every env untouched.
    pub fn step(&mut self, actions: ActionBatch<'_>, out: &mut VecStepOut) -> Result<(), EnvError> {
        validate_actions(&self.spec, self.num_envs(), actions)?;
        let (e, d) = (self.num_envs(), self.spec.obs_dim);
        // No-ops for buffers from `new_step_out`; repairs foreign ones.
        out.obs.resize(e * d, 0.0);
        out.final_obs.resize(e * d, 0.0);
        out.reward.resize(e, 0.0);
        out.terminated.resize(e, false);
        out.truncated.resize(e, false);
        out.episodes.clear();
        let a_dim = self.spec.action_space.dim();
        for (i, env) in self.envs.iter_mut().enumerate() {
            let action = match actions {
                ActionBatch::Discrete(a) => Action::Discrete(a[i] as usize),
                ActionBatch::Continuous(a) => Action::Continuous(&a[i * a_dim..(i + 1) * a_dim]),
            };
            let obs = &mut out.obs[i * d..(i + 1) * d];
            let started = (!self.step_cost.is_zero()).then(Instant::now);
            let r = env.step(action, obs)?;
            if let Some(t) = started {
                while t.elapsed() < self.step_cost {
                    std::hint::spin_loop();
                }
            }
            self.returns[i] += r.reward;
            out.reward[i] = r.reward as f32;
            out.terminated[i] = r.terminated;
            out.truncated[i] = r.truncated;
            if r.terminated || r.truncated {
                out.final_obs[i * d..(i + 1) * d].copy_from_slice(obs);
                out.episodes.push(EpisodeStats {
                    env_index: i,
                    episode_return: self.returns[i],
                    length: env.elapsed(),
                });
                self.returns[i] = 0.0;
                env.reset(obs);
            }
        }
        Ok(())
    }
}

/// Checks an action batch for `num_envs` envs against `spec`'s action space
/// (length, range, finiteness, kind): every vector env's first step.
pub fn validate_actions(
    spec: &EnvSpec,
    num_envs: usize,
    actions: ActionBatch<'_>,
) -> Result<(), EnvError> {
    let e = num_envs;
    let bad = |reason: String| EnvError::BadAction {
        id: spec.id.clone(),
        reason,
    };
    match (&spec.action_space, actions) {
        (ActionSpace::Discrete { n }, ActionBatch::Discrete(a)) => {
            if a.len() != e {
                return Err(bad(format!("expected {e} actions, got {}", a.len())));
            }
            if let Some(x) = a.iter().find(|&&x| x as usize >= *n) {
                return Err(bad(format!("index {x} outside 0..{n}")));
            }
        }
        (ActionSpace::Box { low, .. }, ActionBatch::Continuous(a)) => {
            if a.len() != e * low.len() {
                let want = e * low.len();
                return Err(bad(format!(
                    "expected {want} action values, got {}",
                    a.len()
                )));
            }
            if a.iter().any(|x| !x.is_finite()) {
                return Err(bad("non-finite action value".into()));
            }
        }
        _ => {
            return Err(bad(
                "action batch kind does not match the action space".into()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::make_env;

    fn pendulum_steps(seed: u64, steps: usize) -> Vec<f32> {
        let mut venv = NativeVecEnv::new("Pendulum-v1", 3, seed).expect("known id");
        let mut obs = vec![0.0; 9];
        venv.reset(&mut obs);
        let mut out = venv.new_step_out();
        let mut trace = obs.clone();
        for _ in 0..steps {
            venv.step(ActionBatch::Continuous(&[0.5, -1.0, 2.0]), &mut out)
                .expect("valid actions");
            trace.extend_from_slice(&out.obs);
        }
        trace
    }

    #[test]
    fn pendulum_truncates_at_exactly_200_with_true_final_obs() {
        let mut venv = NativeVecEnv::new("Pendulum-v1", 2, 7).expect("known id");
        let d = venv.spec().obs_dim;
        let mut obs = vec![0.0; 2 * d];
        venv.reset(&mut obs);
        let mut out = venv.new_step_out();
        let actions = [1.0f32, -0.5];
        let mut sums = [0.0f64; 2];
        // A twin env (same seed) replays env 0 to know its true final obs.
        let mut twin = make_env("Pendulum-v1", derive_env_seed(7, 0)).expect("known id");
        let mut twin_obs = vec![0.0; d];
        twin.reset(&mut twin_obs);
        assert_eq!(&obs[..d], &twin_obs[..]);
        for t in 1..=200u32 {
            venv.step(ActionBatch::Continuous(&actions), &mut out)
                .expect("valid actions");
            let r = twin
                .step(Action::Continuous(&actions[..1]), &mut twin_obs)
                .expect("valid action");
            assert_eq!(f64::from(out.reward[0]), f64::from(r.reward as f32));
            for (s, r) in sums.iter_mut().zip(&out.reward) {
                *s += f64::from(*r);
            }
            assert!(!out.terminated.iter().any(|&x| x));
            if t < 200 {
                assert!(!out.truncated.iter().any(|&x| x), "early truncation at {t}");
                assert!(out.episodes.is_empty());
                assert_eq!(&out.obs[..d], &twin_obs[..]);
            }
        }
        assert!(out.truncated.iter().all(|&x| x));
        // The final obs is the twin's last obs; `obs` already holds a reset.
        assert_eq!(&out.final_obs[..d], &twin_obs[..]);
        assert_ne!(&out.obs[..d], &out.final_obs[..d]);
        assert_eq!(out.episodes.len(), 2);
        for (k, ep) in out.episodes.iter().enumerate() {
            assert_eq!(ep.env_index, k);
            assert_eq!(ep.length, 200);
            // Rewards were handed out as f32; the return is summed in f64.
            assert!(
                (ep.episode_return - sums[k]).abs() < 1e-3,
                "{ep:?} vs {}",
                sums[k]
            );
        }
        // The next step continues the new episode without a stat.
        venv.step(ActionBatch::Continuous(&actions), &mut out)
            .expect("valid actions");
        assert!(out.episodes.is_empty() && !out.truncated[0]);
    }

    #[test]
    fn cartpole_terminates_and_auto_resets() {
        let mut venv = NativeVecEnv::new("CartPole-v1", 4, 3).expect("known id");
        let mut obs = vec![0.0; 16];
        venv.reset(&mut obs);
        let mut out = venv.new_step_out();
        let mut lengths = [0u32; 4];
        let mut finished = 0;
        for _ in 0..200 {
            // Always push right: the pole falls within a few dozen steps.
            venv.step(ActionBatch::Discrete(&[1, 1, 1, 1]), &mut out)
                .expect("valid actions");
            for l in &mut lengths {
                *l += 1;
            }
            for ep in &out.episodes {
                let i = ep.env_index;
                assert!(out.terminated[i]);
                assert_eq!(ep.length, lengths[i]);
                assert_eq!(ep.episode_return, f64::from(lengths[i]));
                // The final obs is out of bounds; the reset obs is near zero.
                let fin = &out.final_obs[i * 4..i * 4 + 4];
                assert!(fin[0].abs() > 2.4 || fin[2].abs() > 0.2094);
                assert!(out.obs[i * 4..i * 4 + 4].iter().all(|x| x.abs() <= 0.05));
                lengths[i] = 0;
                finished += 1;
            }
        }
        assert!(finished >= 4);
    }

    #[test]
    fn seeds_differ_across_envs_and_reproduce() {
        let a = pendulum_steps(11, 20);
        assert_eq!(a, pendulum_steps(11, 20));
        assert_ne!(a, pendulum_steps(12, 20));
        // Env streams within one vec env differ.
        assert_ne!(a[0..3], a[3..6]);
        assert_ne!(a[3..6], a[6..9]);
        let seeds: Vec<u64> = (0..100).map(|i| derive_env_seed(5, i)).collect();
        let mut dedup = seeds.clone();
        dedup.sort_unstable();
        dedup.dedup();
        assert_eq!(dedup.len(), seeds.len());
    }

    #[test]
    fn bad_batches_are_rejected_before_stepping() {
        let mut venv = NativeVecEnv::new("Acrobot-v1", 2, 0).expect("known id");
        let mut out = venv.new_step_out();
        assert!(venv.step(ActionBatch::Discrete(&[0]), &mut out).is_err());
        assert!(venv.step(ActionBatch::Discrete(&[0, 3]), &mut out).is_err());
        assert!(
            venv.step(ActionBatch::Continuous(&[0.0, 0.0]), &mut out)
                .is_err()
        );
        assert!(matches!(
            NativeVecEnv::new("Acrobot-v1", 0, 0),
            Err(EnvError::NoEnvs)
        ));
        assert!(NativeVecEnv::new("Nope", 1, 0).is_err());
    }
}
