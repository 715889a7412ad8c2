//! Deterministic evaluation episodes: N envs, one episode each, argmax actions,
//! batched inference over the envs still playing.

use sebulba_core::distribution::{ActionDist, DistError, argmax};
use sebulba_core::env::{ActionBatch, EnvError, VecEnv};
use sebulba_core::policy::InferencePolicy;

#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Dist(#[from] DistError),
}

#[derive(Debug, Clone, Default)]
pub struct EpisodeResults {
    pub returns: Vec<f64>,
    pub lengths: Vec<u32>,
}

impl EpisodeResults {
    pub fn mean(&self) -> f64 {
        self.returns.iter().sum::<f64>() / self.returns.len().max(1) as f64
    }
    pub fn std(&self) -> f64 {
        let m = self.mean();
        (self.returns.iter().map(|r| (r - m).powi(2)).sum::<f64>()
            / self.returns.len().max(1) as f64)
            .sqrt()
    }
}

/// Plays `episodes` episodes (env i plays episode i from the seed's start state).
pub fn play_episodes(
    policy: &InferencePolicy,
    env_id: &str,
    episodes: usize,
    seed: u64,
) -> Result<EpisodeResults, PlayError> {
    let spec = policy.spec();
    let ActionDist::Categorical { n } = ActionDist::for_space(&spec.action_space)?;
    let mut venv = VecEnv::new(env_id, episodes, seed)?;
    let d = spec.obs_dim;
    let mut obs = vec![0.0f32; episodes * d];
    venv.reset(&mut obs);
    let mut out = venv.new_step_out();
    let mut actions = vec![0u32; episodes];
    let mut returns = vec![None; episodes];
    let mut lengths = vec![0u32; episodes];
    let mut remaining = episodes;
    while remaining > 0 {
        let head = policy.head(&obs, episodes);
        for (e, a) in actions.iter_mut().enumerate() {
            *a = argmax(&head[e * n..(e + 1) * n]) as u32;
        }
        venv.step(ActionBatch::Discrete(&actions), &mut out)?;
        for ep in &out.episodes {
            if returns[ep.env_index].is_none() {
                returns[ep.env_index] = Some(ep.episode_return);
                lengths[ep.env_index] = ep.length;
                remaining -= 1;
            }
        }
        obs.copy_from_slice(&out.obs);
    }
    Ok(EpisodeResults {
        returns: returns.into_iter().map(|r| r.unwrap_or(f64::NAN)).collect(),
        lengths,
    })
}
