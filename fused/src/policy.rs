//! Acting with the fused forward pass: actors and the evaluator hold a
//! [`FusedPolicy`] made straight from the published file.

use crate::net::{self, Layout, Work};
use crate::{Arch, ObsNorm, WeightsError};
use std::sync::Mutex;

/// A policy network for acting on CPU.
pub struct FusedPolicy {
    layout: Layout,
    params: Vec<f32>,
    norm: Option<ObsNorm>,
    work: Mutex<Work>,
}

impl FusedPolicy {
    /// The policy of `arch` with parameters `params` (in [`Layout`] order)
    /// and normaliser `norm`.
    pub fn new(arch: &Arch, params: Vec<f32>, norm: Option<ObsNorm>) -> Result<Self, WeightsError> {
        let layout = Layout::new(arch);
        if params.len() != layout.len {
            return Err(WeightsError::Mismatch(format!(
                "{} parameters for a layout of {}",
                params.len(),
                layout.len
            )));
        }
        Ok(Self {
            layout,
            params,
            norm,
            work: Mutex::new(Work::default()),
        })
    }

    /// The policy in a published file (`crate::file::read`'s checks).
    pub fn from_safetensors(arch: &Arch, bytes: &[u8]) -> Result<Self, WeightsError> {
        let (params, norm) = crate::file::read(arch, bytes)?;
        Self::new(arch, params, norm)
    }

    /// Policy-head outputs `[n * head_dim]` for `n` observations `[n * obs_dim]`.
    pub fn head(&self, obs: &[f32], n: usize) -> Vec<f32> {
        // A poisoned lock only means another call panicked mid-pass: the
        // buffers are rewritten before being read, so carry on.
        let mut work = self.work.lock().unwrap_or_else(|e| e.into_inner());
        work.resize(&self.layout, n);
        let d = self.layout.obs_dim;
        work.x.copy_from_slice(&obs[..n * d]);
        let norm = self.norm.as_ref();
        work.x
            .chunks_exact_mut(d)
            .for_each(|row| self.layout.input_row(norm, row));
        net::policy_forward(&self.layout, &self.params, &mut work);
        work.head.clone()
    }
}
