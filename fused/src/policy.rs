//! Acting with the fused forward pass: actors and the evaluator hold a
//! [`FusedPolicy`] made straight from the published file.

use crate::net::{self, Layout, Work};
use crate::sparse_head::{self, SparseHead};
use crate::{Arch, ObsNorm, WeightsError};
use std::sync::Mutex;

/// A policy network for acting on CPU.
pub struct FusedPolicy {
    layout: Layout,
    params: Vec<f32>,
    norm: Option<ObsNorm>,
    work: Mutex<Buffers>,
}

/// A forward pass's buffers, and the allowed actions of mostly masked rows
/// ([`FusedPolicy::head_masked`]).
#[derive(Default)]
struct Buffers {
    work: Work,
    sparse: SparseHead,
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
            work: Mutex::new(Buffers {
                work: Work::default(),
                sparse: SparseHead::default(),
            }),
        })
    }

    /// The policy in a published file (`crate::file::read`'s checks).
    pub fn from_safetensors(arch: &Arch, bytes: &[u8]) -> Result<Self, WeightsError> {
        let (params, norm) = crate::file::read(arch, bytes)?;
        Self::new(arch, params, norm)
    }

    /// Policy-head outputs `[n * head_dim]` for `n` observations `[n * obs_dim]`.
    pub fn head(&self, obs: &[f32], n: usize) -> Vec<f32> {
        let mut b = self.buffers(obs, n);
        net::policy_forward(&self.layout, &self.params, &mut b.work);
        b.work.head.clone()
    }

    /// [`FusedPolicy::head`] for rows whose allowed actions `masks` (`[n *
    /// head_dim]`, 0 = masked) gives: where few are allowed, only their
    /// outputs are computed and the masked entries are 0 (a sampler or an
    /// argmax that reads the mask never looks at them).
    pub fn head_masked(&self, obs: &[f32], n: usize, masks: &[u8]) -> Vec<f32> {
        let hd = self.layout.head_dim;
        let mut b = self.buffers(obs, n);
        let Buffers { work, sparse } = &mut *b;
        sparse.allowed.clear();
        masks
            .chunks_exact(hd)
            .take(n)
            .for_each(|m| sparse.allowed.push_row(m));
        if sparse.allowed.rows() == n && sparse.allowed.worth_it(hd) {
            work.head.fill(0.0);
            sparse_head::policy_forward(&self.layout, &self.params, work, sparse);
        } else {
            net::policy_forward(&self.layout, &self.params, work);
        }
        work.head.clone()
    }

    /// The buffers, sized for `n` rows, with `obs` loaded as the torsos read it.
    fn buffers(&self, obs: &[f32], n: usize) -> std::sync::MutexGuard<'_, Buffers> {
        // A poisoned lock only means another call panicked mid-pass: the
        // buffers are rewritten before being read, so carry on.
        let mut b = self.work.lock().unwrap_or_else(|e| e.into_inner());
        b.work.resize(&self.layout, n);
        let d = self.layout.obs_dim;
        b.work.x.copy_from_slice(&obs[..n * d]);
        let norm = self.norm.as_ref();
        b.work
            .x
            .chunks_exact_mut(d)
            .for_each(|row| self.layout.input_row(norm, row));
        b
    }
}
