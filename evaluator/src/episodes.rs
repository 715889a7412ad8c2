//! Deterministic evaluation episodes: N envs from the evaluation seed's start
//! states, one counted episode each, greedy actions (argmax over the allowed
//! actions, or the squashed Gaussian mean); one batched inference call per step
//! over all N envs (an env whose episode is counted steps on uncounted).

use sebulba_core::distribution::{ActionDist, DistError, argmax, tanh_normal_mode};
use sebulba_core::env::{ActionBatch, EnvError, make_vector_env};
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
    env_kwargs: &str,
    episodes: usize,
    seed: u64,
) -> Result<EpisodeResults, PlayError> {
    let spec = policy.spec();
    let dist = spec.dist();
    let mut venv = make_vector_env(env_id, env_kwargs, episodes, seed)?;
    let d = spec.obs_dim;
    let w = dist.action_width();
    let mut obs = vec![0.0f32; episodes * d];
    venv.reset(&mut obs)?;
    let mut out = venv.new_step_out();
    let mut discrete = vec![0u32; episodes];
    let mut continuous = vec![0.0f32; episodes * w];
    let mut masks = match dist {
        ActionDist::Categorical { n } => vec![1u8; episodes * n],
        ActionDist::TanhNormal { .. } => Vec::new(),
    };
    let mut returns = vec![None; episodes];
    let mut lengths = vec![0u32; episodes];
    let mut remaining = episodes;
    while remaining > 0 {
        let head = policy.head(&obs, episodes);
        let batch = match &dist {
            ActionDist::Categorical { n } => {
                let n = *n;
                let has_masks = venv.action_masks(&mut masks);
                for (e, a) in discrete.iter_mut().enumerate() {
                    let valid = has_masks.then(|| &masks[e * n..(e + 1) * n]);
                    *a = argmax(&head[e * n..(e + 1) * n], valid) as u32;
                }
                ActionBatch::Discrete(&discrete)
            }
            ActionDist::TanhNormal { dim, squash, .. } => {
                let h = 2 * dim;
                for e in 0..episodes {
                    tanh_normal_mode(
                        &head[e * h..(e + 1) * h],
                        squash,
                        &mut continuous[e * dim..(e + 1) * dim],
                    );
                }
                ActionBatch::Continuous(&continuous)
            }
        };
        venv.step(batch, &mut out)?;
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
