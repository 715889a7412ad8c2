//! Deterministic evaluation episodes: N envs from the evaluation seed's start
//! states, one counted episode each, greedy actions (argmax over the allowed
//! actions, or the squashed Gaussian mean); one batched inference call per step
//! over all N envs (an env whose episode is counted steps on uncounted).

use sebulba_core::distribution::{ActionDist, DistError, argmax, tanh_normal_mode};
use sebulba_core::policy::InferencePolicy;
use sebulba_envs::{ActionBatch, EnvError, Purpose, VectorEnv, make_vector_env};

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
    /// Envs replaced after they failed mid-episode.
    pub env_restarts: u64,
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

/// Plays `episodes` episodes (env i plays episode i from the seed's start
/// state). An env that fails (a Python env raised or returned NaN/Inf) is
/// replaced and plays a new episode in place of the one it broke, at most
/// `episodes` times in all; the results count the replacements.
pub fn play_episodes(
    policy: &InferencePolicy,
    env_id: &str,
    env_kwargs: &str,
    episodes: usize,
    seed: u64,
) -> Result<EpisodeResults, PlayError> {
    let spec = policy.spec();
    let dist = spec.dist();
    let mut venv = make_vector_env(env_id, env_kwargs, episodes, seed, Purpose::Evaluate)?;
    let mut obs = vec![0.0f32; episodes * spec.obs_dim];
    venv.reset(&mut obs)?;
    let mut out = venv.new_step_out();
    let mut greedy = Greedy::new(&dist, episodes);
    let mut returns = vec![None; episodes];
    let mut lengths = vec![0u32; episodes];
    let mut remaining = episodes;
    let mut restarts = 0;
    while remaining > 0 {
        let head = policy.head(&obs, episodes);
        let batch = greedy.actions(&dist, &head, venv.as_ref());
        match venv.step(batch, &mut out) {
            Ok(()) => obs.copy_from_slice(&out.obs),
            Err(EnvError::EnvFailed { index, .. } | EnvError::NonFinite { index, .. })
                if restarts < episodes =>
            {
                restarts += 1;
                venv.restart(index, &mut obs)?;
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        for ep in &out.episodes {
            if returns[ep.env_index].is_none() {
                returns[ep.env_index] = Some(ep.episode_return);
                lengths[ep.env_index] = ep.length;
                remaining -= 1;
            }
        }
    }
    Ok(EpisodeResults {
        returns: returns.into_iter().map(|r| r.unwrap_or(f64::NAN)).collect(),
        lengths,
        env_restarts: restarts as u64,
    })
}

/// Greedy actions for every env: argmax over the allowed actions, or the
/// squashed Gaussian mean; buffers sized once.
struct Greedy {
    discrete: Vec<u32>,
    continuous: Vec<f32>,
    masks: Vec<u8>,
}

impl Greedy {
    fn new(dist: &ActionDist, envs: usize) -> Self {
        Self {
            discrete: vec![0; envs],
            continuous: vec![0.0; envs * dist.action_width()],
            masks: match dist {
                ActionDist::Categorical { n } => vec![1u8; envs * n],
                ActionDist::TanhNormal { .. } => Vec::new(),
            },
        }
    }

    fn actions<'a>(
        &'a mut self,
        dist: &ActionDist,
        head: &[f32],
        venv: &dyn VectorEnv,
    ) -> ActionBatch<'a> {
        match dist {
            ActionDist::Categorical { n } => {
                let n = *n;
                let has_masks = venv.action_masks(&mut self.masks);
                for (e, a) in self.discrete.iter_mut().enumerate() {
                    let valid = has_masks.then(|| &self.masks[e * n..(e + 1) * n]);
                    *a = argmax(&head[e * n..(e + 1) * n], valid) as u32;
                }
                ActionBatch::Discrete(&self.discrete)
            }
            ActionDist::TanhNormal { dim, squash, .. } => {
                let h = 2 * dim;
                for (e, a) in self.continuous.chunks_exact_mut(*dim).enumerate() {
                    tanh_normal_mode(&head[e * h..(e + 1) * h], squash, a);
                }
                ActionBatch::Continuous(&self.continuous)
            }
        }
    }
}
