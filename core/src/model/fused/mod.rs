//! The fused forward pass: the actor-critic network on flat f32 buffers, for
//! CPU. burn's ndarray backend spends most of a small network's time in
//! per-operation overhead (tensor handles, allocations, an f64 libm tanh per
//! element), while here a forward pass is a few matrix products and loops over
//! reused buffers. The learner's fused engine adds the backward pass; actors
//! and the evaluator act with [`FusedPolicy`]. Published weights go straight
//! between safetensors bytes and the flat buffers (`crate::weights::flat`),
//! in the file burn writes; the learner's burn model stays the source of
//! checkpoints, and [`params`] copies between the two.
//!
//! Covered: MLP torsos (separate or shared, tanh or relu) without LayerNorm,
//! with or without observation normalisation.

pub mod kernels;
pub mod net;
pub mod params;

use crate::model::{ActorCritic, ModelSpec, OBS_NORM_EPS};
use burn::tensor::backend::Backend;
use net::{Layout, Work};
use std::sync::Mutex;

/// The observation normaliser's tensors, as the model holds (and publishes)
/// them.
#[derive(Clone, Debug, PartialEq)]
pub struct ObsStats {
    pub mean: Vec<f32>,
    pub var: Vec<f32>,
}

impl ObsStats {
    /// The model's statistics (`None` when it has no normaliser).
    pub fn of_model<B: Backend>(m: &ActorCritic<B>) -> Result<Option<Self>, String> {
        m.obs_norm
            .as_ref()
            .map(|n| {
                Ok(Self {
                    mean: params::floats(n.mean.val(), "obs_norm.mean")?,
                    var: params::floats(n.var.val(), "obs_norm.var")?,
                })
            })
            .transpose()
    }
}

/// The observation normaliser as burn's `ObsNorm` applies it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObsScaler {
    mean: Vec<f32>,
    /// `sqrt(var + eps)`, computed in f32 as burn does.
    std: Vec<f32>,
    clip: f32,
}

impl ObsScaler {
    pub fn new(mean: &[f32], var: &[f32], clip: f64) -> Self {
        Self {
            mean: mean.to_vec(),
            std: var
                .iter()
                .map(|&v| (v + OBS_NORM_EPS as f32).sqrt())
                .collect(),
            clip: clip as f32,
        }
    }

    /// The model's normaliser (`None` when it has none).
    pub fn of_model<B: Backend>(m: &ActorCritic<B>) -> Result<Option<Self>, String> {
        let stats = ObsStats::of_model(m)?;
        Ok(stats
            .zip(m.obs_norm.as_ref())
            .map(|(s, n)| Self::new(&s.mean, &s.var, n.clip)))
    }

    /// `clip((x - mean) / std, +-clip)` over one row, in place.
    pub fn apply(&self, row: &mut [f32]) {
        for ((x, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
            *x = ((*x - m) / s).clamp(-self.clip, self.clip);
        }
    }
}

/// A policy network for acting on CPU: the fused copy of a burn model.
pub struct FusedPolicy {
    layout: Layout,
    params: Vec<f32>,
    scaler: Option<ObsScaler>,
    work: Mutex<Work>,
}

impl FusedPolicy {
    /// A copy of `model`'s weights (`spec.network` must be [`NetworkConfig::fused_covers`]ed).
    pub fn of_model<B: Backend>(spec: &ModelSpec, model: &ActorCritic<B>) -> Result<Self, String> {
        if !spec.network.fused_covers() {
            return Err("LayerNorm networks run on burn".into());
        }
        let params = params::read_params(&Layout::new(spec), model)?;
        Self::new(spec, params, ObsScaler::of_model(model)?)
    }

    /// The policy of `spec` with parameters `params` (in [`Layout`] order)
    /// and normaliser `scaler`.
    pub fn new(
        spec: &ModelSpec,
        params: Vec<f32>,
        scaler: Option<ObsScaler>,
    ) -> Result<Self, String> {
        if !spec.network.fused_covers() {
            return Err("LayerNorm networks run on burn".into());
        }
        let layout = Layout::new(spec);
        if params.len() != layout.len {
            return Err(format!(
                "{} parameters for a layout of {}",
                params.len(),
                layout.len
            ));
        }
        Ok(Self {
            layout,
            params,
            scaler,
            work: Mutex::new(Work::default()),
        })
    }

    /// Policy-head outputs `[n * head_dim]` for `n` observations `[n * obs_dim]`.
    pub fn head(&self, obs: &[f32], n: usize) -> Vec<f32> {
        // A poisoned lock only means another call panicked mid-pass: the
        // buffers are rewritten before being read, so carry on.
        let mut work = self.work.lock().unwrap_or_else(|e| e.into_inner());
        work.resize(&self.layout, n);
        let d = self.layout.obs_dim;
        work.x.copy_from_slice(&obs[..n * d]);
        if let Some(s) = &self.scaler {
            work.x.chunks_exact_mut(d).for_each(|row| s.apply(row));
        }
        net::policy_forward(&self.layout, &self.params, &mut work);
        work.head.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;
    use crate::config::{Activation, LayerNormPlacement, NetworkConfig};
    use crate::model::RunningMeanStd;
    use burn::tensor::{Tensor, TensorData};
    use sebulba_envs::env_spec;

    #[test]
    fn the_fused_policy_matches_burns_forward_pass() {
        let nets = [
            NetworkConfig::default(),
            NetworkConfig {
                hidden: vec![32, 16, 8],
                activation: Activation::Relu,
                shared_torso: true,
                obs_norm: true,
                obs_clip: 1.0,
                ..Default::default()
            },
        ];
        for (env, net) in [("CartPole-v1", &nets[0]), ("Pendulum-v1", &nets[1])] {
            let spec = ModelSpec::new(&env_spec(env).unwrap(), net);
            let dev = Default::default();
            let mut m = spec.init::<CpuBackend>(&dev);
            let n = 5;
            let obs: Vec<f32> = (0..n * spec.obs_dim)
                .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.3)
                .collect();
            let mut stats = RunningMeanStd::new(spec.obs_dim);
            stats.update(&obs[..2 * spec.obs_dim]);
            m.set_obs_stats(&stats);
            let fused = FusedPolicy::of_model(&spec, &m).unwrap();
            let x = Tensor::<CpuBackend, 2>::from_data(
                TensorData::new(obs.clone(), [n, spec.obs_dim]),
                &dev,
            );
            let want: Vec<f32> = m.policy(x).into_data().to_vec().unwrap();
            let got = fused.head(&obs, n);
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() < 1e-5 * (1.0 + w.abs()),
                    "{env}: {got:?} vs {want:?}"
                );
            }
            // A smaller batch afterwards reuses the buffers.
            assert_eq!(fused.head(&obs, 2).len(), 2 * spec.head_dim());
        }
        let mut spec = ModelSpec::new(&env_spec("CartPole-v1").unwrap(), &nets[0]);
        spec.network.layer_norm = LayerNormPlacement::Post;
        let m = spec.init::<CpuBackend>(&Default::default());
        assert!(FusedPolicy::of_model(&spec, &m).is_err());
    }
}
