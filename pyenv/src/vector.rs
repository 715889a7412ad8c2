//! A [`VectorEnv`] over helper.py's `VecEnv`: one Python call per step for
//! all E envs. Actions go into, and results come out of, numpy arrays that
//! live as long as the env, through their buffers (one copy each way); the
//! GIL is held only inside these calls, so the actor's gRPC never waits on
//! Python. A Python exception or a non-finite value names the env index; the
//! actor may then [`VectorEnv::restart`] that env.

use crate::interp;
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sebulba_envs::render::Frame;
use sebulba_envs::{
    ActionBatch, EnvError, EnvSpec, EpisodeStats, Purpose, VecStepOut, VectorEnv, derive_env_seed,
    validate_actions,
};

pub struct PyVecEnv {
    spec: EnvSpec,
    seeds: Vec<u64>,
    env: Py<PyAny>,
    /// Discrete actions as the actor holds them (u32): copied as they are.
    actions_u32: Option<PyBuffer<u32>>,
    actions_f32: Option<PyBuffer<f32>>,
    obs: PyBuffer<f32>,
    final_obs: PyBuffer<f32>,
    rewards: PyBuffer<f64>,
    terminated: PyBuffer<u8>,
    truncated: PyBuffer<u8>,
    /// Rewards and ends of whole episodes as a user scores them (an Atari
    /// game at its raw score, whatever training sees).
    raw_rewards: PyBuffer<f64>,
    ended: PyBuffer<u8>,
    /// Scratch for the u8 flags and f64 rewards.
    flags: Vec<u8>,
    rewards_f64: Vec<f64>,
    raw_f64: Vec<f64>,
    ended_u8: Vec<u8>,
    /// Running return and length of each env's episode.
    returns: Vec<f64>,
    lengths: Vec<u32>,
    restarts: u64,
    /// Envs whose current episode saw a failed step: its end is not
    /// reported (its return would miss what the failed call did).
    tainted: Vec<bool>,
}

impl PyVecEnv {
    /// E = `seeds.len()` envs of `spec.id` made for `purpose`; env i's first
    /// reset uses `seeds[i]`.
    pub fn new(
        spec: EnvSpec,
        kwargs: &str,
        seeds: Vec<u64>,
        purpose: Purpose,
    ) -> Result<Self, EnvError> {
        if seeds.is_empty() {
            return Err(EnvError::NoEnvs);
        }
        interp::start(&spec.id)?;
        let id = spec.id.clone();
        Python::attach(|py| -> PyResult<Self> {
            let helper = interp::helper(py)?;
            let env =
                helper
                    .getattr("make_vec")?
                    .call1((&id, kwargs, seeds.clone(), purpose.name()))?;
            let buf = |name: &str| env.getattr(name);
            let discrete = spec.action_space.is_discrete();
            let e = seeds.len();
            Ok(Self {
                actions_u32: discrete
                    .then(|| PyBuffer::get(&buf("actions")?))
                    .transpose()?,
                actions_f32: (!discrete)
                    .then(|| PyBuffer::get(&buf("actions")?))
                    .transpose()?,
                obs: PyBuffer::get(&buf("obs")?)?,
                final_obs: PyBuffer::get(&buf("final_obs")?)?,
                rewards: PyBuffer::get(&buf("rewards")?)?,
                terminated: PyBuffer::get(&buf("terminated")?)?,
                truncated: PyBuffer::get(&buf("truncated")?)?,
                raw_rewards: PyBuffer::get(&buf("raw_rewards")?)?,
                ended: PyBuffer::get(&buf("ended")?)?,
                env: env.unbind(),
                spec,
                seeds,
                flags: vec![0; e],
                rewards_f64: vec![0.0; e],
                raw_f64: vec![0.0; e],
                ended_u8: vec![0; e],
                returns: vec![0.0; e],
                lengths: vec![0; e],
                restarts: 0,
                tainted: vec![false; e],
            })
        })
        .map_err(|e| Python::attach(|py| interp::external(py, &id, &e)))
    }

    /// A failed call as an error naming the env (helper.py's `EnvFailure`).
    fn failure(&self, py: Python<'_>, e: &PyErr) -> EnvError {
        let v = e.value(py);
        match (v.getattr("index"), v.getattr("text")) {
            (Ok(i), Ok(t)) => EnvError::EnvFailed {
                id: self.spec.id.clone(),
                index: i.extract().unwrap_or(usize::MAX),
                reason: t.extract().unwrap_or_default(),
            },
            _ => interp::external(py, &self.spec.id, e),
        }
    }

    fn non_finite(&self, index: usize, what: &'static str) -> EnvError {
        EnvError::NonFinite {
            id: self.spec.id.clone(),
            index,
            what,
        }
    }

    /// Reads one step's results into `out` and checks them.
    fn collect(&mut self, py: Python<'_>, out: &mut VecStepOut) -> PyResult<()> {
        let e = self.seeds.len();
        self.obs.copy_to_slice(py, &mut out.obs)?;
        self.final_obs.copy_to_slice(py, &mut out.final_obs)?;
        self.rewards.copy_to_slice(py, &mut self.rewards_f64)?;
        self.terminated.copy_to_slice(py, &mut self.flags)?;
        for (t, f) in out.terminated.iter_mut().zip(&self.flags) {
            *t = *f != 0;
        }
        self.truncated.copy_to_slice(py, &mut self.flags)?;
        for (t, f) in out.truncated.iter_mut().zip(&self.flags) {
            *t = *f != 0;
        }
        self.raw_rewards.copy_to_slice(py, &mut self.raw_f64)?;
        self.ended.copy_to_slice(py, &mut self.ended_u8)?;
        out.reward.clear();
        out.reward
            .extend(self.rewards_f64.iter().map(|&r| r as f32));
        debug_assert_eq!(out.reward.len(), e);
        Ok(())
    }

    /// The first env with a non-finite reward or observation, if any.
    fn check_finite(&self, out: &VecStepOut) -> Result<(), EnvError> {
        let d = self.spec.obs_dim;
        for i in 0..self.seeds.len() {
            if !(self.rewards_f64[i].is_finite() && self.raw_f64[i].is_finite()) {
                return Err(self.non_finite(i, "reward"));
            }
            if out.obs[i * d..(i + 1) * d].iter().any(|x| !x.is_finite()) {
                return Err(self.non_finite(i, "observation"));
            }
            let done = out.terminated[i] || out.truncated[i];
            if done
                && out.final_obs[i * d..(i + 1) * d]
                    .iter()
                    .any(|x| !x.is_finite())
            {
                return Err(self.non_finite(i, "final observation"));
            }
        }
        Ok(())
    }

    fn write_actions(&self, py: Python<'_>, actions: ActionBatch<'_>) -> Result<(), EnvError> {
        validate_actions(&self.spec, self.seeds.len(), actions)?;
        let copied = match actions {
            ActionBatch::Discrete(a) => self.actions_u32.as_ref().map(|b| b.copy_from_slice(py, a)),
            ActionBatch::Continuous(a) => {
                self.actions_f32.as_ref().map(|b| b.copy_from_slice(py, a))
            }
        };
        match copied {
            Some(Ok(())) => Ok(()),
            Some(Err(err)) => Err(interp::external(py, &self.spec.id, &err)),
            None => Err(EnvError::BadAction {
                id: self.spec.id.clone(),
                reason: "no action buffer for this space".into(),
            }),
        }
    }

    /// Episode bookkeeping after a checked step: whole episodes at the raw
    /// score (an Atari game, not the lives training ends episodes at).
    fn count_episodes(&mut self, out: &mut VecStepOut) {
        out.episodes.clear();
        for i in 0..self.seeds.len() {
            self.returns[i] += self.raw_f64[i];
            self.lengths[i] = self.lengths[i].saturating_add(1);
            if self.ended_u8[i] != 0 {
                if std::mem::take(&mut self.tainted[i]) {
                    self.returns[i] = 0.0;
                    self.lengths[i] = 0;
                    continue;
                }
                out.episodes.push(EpisodeStats {
                    env_index: i,
                    episode_return: self.returns[i],
                    length: self.lengths[i],
                });
                self.returns[i] = 0.0;
                self.lengths[i] = 0;
            }
        }
    }
}

impl VectorEnv for PyVecEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn num_envs(&self) -> usize {
        self.seeds.len()
    }

    fn reset(&mut self, obs: &mut [f32]) -> Result<(), EnvError> {
        let r = Python::attach(|py| {
            self.env
                .bind(py)
                .call_method0("reset")
                .map_err(|e| self.failure(py, &e))?;
            self.obs
                .copy_to_slice(py, obs)
                .map_err(|e| interp::external(py, &self.spec.id, &e))
        });
        self.returns.fill(0.0);
        self.lengths.fill(0);
        self.tainted.fill(false);
        r?;
        let d = self.spec.obs_dim;
        match obs
            .chunks_exact(d)
            .position(|o| o.iter().any(|x| !x.is_finite()))
        {
            Some(i) => Err(self.non_finite(i, "reset observation")),
            None => Ok(()),
        }
    }

    fn step(&mut self, actions: ActionBatch<'_>, out: &mut VecStepOut) -> Result<(), EnvError> {
        let (e, d) = (self.seeds.len(), self.spec.obs_dim);
        out.obs.resize(e * d, 0.0);
        out.final_obs.resize(e * d, 0.0);
        out.terminated.resize(e, false);
        out.truncated.resize(e, false);
        let stepped = Python::attach(|py| -> Result<(), EnvError> {
            self.write_actions(py, actions)?;
            self.env
                .bind(py)
                .call_method0("step")
                .map_err(|err| self.failure(py, &err))?;
            self.collect(py, out)
                .map_err(|err| interp::external(py, &self.spec.id, &err))
        })
        .and_then(|()| self.check_finite(out));
        if let Err(e) = stepped {
            // Envs that stepped in the failed call (all of them when the
            // values came back non-finite, those before the one that raised
            // otherwise) lost a step nobody saw.
            let stepped = match &e {
                EnvError::NonFinite { .. } => self.tainted.len(),
                EnvError::EnvFailed { index, .. } => (*index).min(self.tainted.len()),
                _ => 0,
            };
            self.tainted[..stepped].fill(true);
            return Err(e);
        }
        self.count_episodes(out);
        Ok(())
    }

    fn action_masks(&self, _mask: &mut [u8]) -> bool {
        false
    }

    /// helper.py's `render_rgb`: the env's `rgb_array` picture (evaluation
    /// envs of `gym:` ids are made in that mode).
    fn render(&self, index: usize) -> Option<Frame> {
        Python::attach(|py| {
            let r = self
                .env
                .bind(py)
                .call_method1("render_rgb", (index,))
                .ok()?;
            let (height, width, rgb): (u32, u32, Bound<'_, PyBytes>) = r.extract().ok()?;
            let rgb = rgb.as_bytes();
            (rgb.len() == 3 * width as usize * height as usize).then(|| Frame {
                width,
                height,
                rgb: rgb.to_vec(),
            })
        })
    }

    fn restarts(&self) -> u64 {
        self.restarts
    }

    fn restart(&mut self, index: usize, obs: &mut [f32]) -> Result<(), EnvError> {
        let d = self.spec.obs_dim;
        if index >= self.seeds.len() || obs.len() != self.seeds.len() * d {
            return Err(EnvError::EnvFailed {
                id: self.spec.id.clone(),
                index,
                reason: "restart of an env this vector env does not hold".into(),
            });
        }
        self.restarts += 1;
        // A new seed per restart: the failed episode is not replayed.
        let seed = derive_env_seed(self.seeds[index], self.restarts);
        Python::attach(|py| {
            self.env
                .bind(py)
                .call_method1("restart", (index, seed))
                .map_err(|e| self.failure(py, &e))?;
            self.obs
                .copy_to_slice(py, obs)
                .map_err(|e| interp::external(py, &self.spec.id, &e))
        })?;
        self.returns[index] = 0.0;
        self.lengths[index] = 0;
        self.tainted[index] = false;
        if obs[index * d..(index + 1) * d]
            .iter()
            .any(|x| !x.is_finite())
        {
            return Err(self.non_finite(index, "reset observation"));
        }
        Ok(())
    }
}
