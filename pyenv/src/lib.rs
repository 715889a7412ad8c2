//! Python environments for sebulba's actors and evaluator: `gym:ID` makes a
//! Gymnasium environment (`gymnasium.make(ID, **env.kwargs)`), and
//! `py:package.module:factory` calls a user's factory with the same keyword
//! arguments, `ale:Game` steps Atari games on ALE's own vector env (the
//! fast path; `gym:ALE/...` ids get the same preprocessing through
//! Gymnasium's wrappers), and `envpool:ID` steps EnvPool's envs in its C++
//! threads (`envpool.py`; its Atari games as `envpool:ALE/Game-v5`). The interpreter is embedded (one per process); which Python and
//! which packages follow the usual conventions: `PYTHONHOME` picks the
//! installation, `VIRTUAL_ENV` adds a venv's packages.
//!
//! [`install`] registers the provider with `sebulba_envs`; from then on
//! every `make_vector_env`/`env_spec_with` of such an id lands here.

mod interp;
mod vector;

use sebulba_envs::{
    ActionSpace, EnvError, EnvProvider, EnvSpec, ObsDtype, Purpose, VectorEnv, derive_env_seed,
    install_provider,
};
use std::collections::HashMap;
use std::sync::Mutex;

pub use vector::PyVecEnv;

/// The provider of `gym:`, `py:`, `ale:` and `envpool:` environments.
#[derive(Default)]
pub struct PythonEnvs {
    /// Specs by (id, kwargs): making an env to read its spaces costs time.
    specs: Mutex<HashMap<(String, String), EnvSpec>>,
}

/// Starts the embedded interpreter now (it otherwise starts on the first
/// Python env): `PYTHONHOME` and `VIRTUAL_ENV` are read here, once.
pub fn start() -> Result<(), EnvError> {
    interp::start("python")
}

/// Installs [`PythonEnvs`] as this process's provider of external
/// environments (false when one was installed already).
pub fn install() -> bool {
    install_provider(Box::new(PythonEnvs::default()))
}

impl EnvProvider for PythonEnvs {
    fn spec(&self, id: &str, kwargs: &str) -> Result<EnvSpec, EnvError> {
        let key = (id.to_string(), kwargs.to_string());
        if let Some(s) = self.specs.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(s);
        }
        let described = interp::describe(id, kwargs)?;
        let spec = spec_from(id, &described)?;
        if let Ok(mut m) = self.specs.lock() {
            m.insert(key, spec.clone());
        }
        Ok(spec)
    }

    fn make(
        &self,
        id: &str,
        kwargs: &str,
        num_envs: usize,
        seed: u64,
        purpose: Purpose,
    ) -> Result<Box<dyn VectorEnv>, EnvError> {
        let spec = self.spec(id, kwargs)?;
        let seeds = (0..num_envs as u64)
            .map(|i| derive_env_seed(seed, i))
            .collect();
        Ok(Box::new(PyVecEnv::new(spec, kwargs, seeds, purpose)?))
    }
}

/// What `describe` in helper.py reports of an env's spaces.
#[derive(serde::Deserialize)]
struct Described {
    obs_dim: usize,
    /// `None`: unbounded (-inf below, +inf above).
    obs_low: Vec<Option<f64>>,
    obs_high: Vec<Option<f64>>,
    max_episode_steps: u64,
    discrete: Option<usize>,
    box_low: Option<Vec<f64>>,
    box_high: Option<Vec<f64>>,
    /// `[H, W, C]`, channels last as helper.py writes the rows.
    image: Option<[usize; 3]>,
    dtype: ObsDtype,
}

fn spec_from(id: &str, text: &str) -> Result<EnvSpec, EnvError> {
    let bad = |reason: String| EnvError::External {
        id: id.to_string(),
        reason,
    };
    let d: Described = serde_json::from_str(text)
        .map_err(|e| bad(format!("unreadable space description: {e}")))?;
    let action_space = match (d.discrete, d.box_low, d.box_high) {
        (Some(n), _, _) if n > 0 => ActionSpace::Discrete { n },
        (None, Some(low), Some(high)) if !low.is_empty() && low.len() == high.len() => {
            ActionSpace::Box {
                low: low.iter().map(|&x| x as f32).collect(),
                high: high.iter().map(|&x| x as f32).collect(),
            }
        }
        _ => return Err(bad("empty action space".into())),
    };
    if d.obs_dim == 0 || d.obs_low.len() != d.obs_dim || d.obs_high.len() != d.obs_dim {
        return Err(bad(format!(
            "observation space of {} values with {} bounds",
            d.obs_dim,
            d.obs_low.len()
        )));
    }
    if let Some([h, w, c]) = d.image
        && h * w * c != d.obs_dim
    {
        return Err(bad(format!("an image {h}x{w}x{c} of {} values", d.obs_dim)));
    }
    Ok(EnvSpec {
        obs_dtype: d.dtype,
        id: id.to_string(),
        obs_dim: d.obs_dim,
        image: d.image,
        action_space,
        // No limit registered: episodes end when the env says so.
        max_episode_steps: u32::try_from(d.max_episode_steps)
            .ok()
            .filter(|&m| m > 0)
            .unwrap_or(u32::MAX),
        obs_low: d
            .obs_low
            .iter()
            .map(|x| x.map_or(f32::NEG_INFINITY, |x| x as f32))
            .collect(),
        obs_high: d
            .obs_high
            .iter()
            .map(|x| x.map_or(f32::INFINITY, |x| x as f32))
            .collect(),
        players: 1,
    })
}
