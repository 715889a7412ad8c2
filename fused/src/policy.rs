//! Acting with the fused forward pass: actors and the evaluator hold a
//! [`FusedPolicy`] made straight from the published file, and step it over
//! their envs with each env's [`PolicyState`].

use crate::net::{self, Layout, Work};
use crate::sparse_head::{self, SparseHead};
use crate::{Arch, ObsNorm, PolicyState, WeightsError};
use std::sync::Mutex;

/// A policy network for acting on CPU.
pub struct FusedPolicy {
    layout: Layout,
    /// Floats of each env's state ([`Arch::state_width`]).
    state_width: usize,
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
            state_width: arch.state_width(),
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

    /// A zero state for `envs` envs: each env's at an episode's start.
    pub fn state(&self, envs: usize) -> PolicyState {
        PolicyState::zeros(self.state_width, envs)
    }

    /// One step of `state.envs()` envs: policy-head outputs `[envs *
    /// head_dim]` for their observations `obs` (`[envs * obs_dim]`), each
    /// env's state moved on in place. With the envs' action masks (`[envs *
    /// head_dim]`, 0 = masked), only the allowed outputs of mostly masked
    /// rows are computed ([`Self::head_masked`]).
    ///
    /// # Panics
    /// On a state another network made (its width differs): a caller's bug.
    pub fn step(&self, obs: &[f32], state: &mut PolicyState, masks: Option<&[u8]>) -> Vec<f32> {
        self.assert_own(state);
        let n = state.envs();
        let mut b = self.buffers(obs, n);
        if self.state_width == 0 {
            return self.pass(&mut b, masks);
        }
        b.work.set_sequence(n, &[], state.values(), None);
        let head = self.pass(&mut b, masks);
        // A critic torso of its own carries a state too: moved on as well.
        net::critic_torso(&self.layout, &self.params, &mut b.work);
        net::final_state(&self.layout, &b.work, state.values_mut());
        head
    }

    /// [`FusedPolicy::step`] without masks, with the value head too: the
    /// policy-head outputs `[envs * head_dim]` and the values `[envs]` (what
    /// an exported network is checked against).
    pub fn step_evaluated(&self, obs: &[f32], state: &mut PolicyState) -> (Vec<f32>, Vec<f32>) {
        self.assert_own(state);
        let n = state.envs();
        let mut b = self.buffers(obs, n);
        let work = &mut b.work;
        if self.state_width > 0 {
            work.set_sequence(n, &[], state.values(), None);
        }
        net::forward(&self.layout, &self.params, work);
        if self.state_width > 0 {
            net::final_state(&self.layout, work, state.values_mut());
        }
        (work.head.clone(), work.value[..n].to_vec())
    }

    /// # Panics
    /// On a state another network made (its width differs): a caller's bug.
    fn assert_own(&self, state: &PolicyState) {
        assert_eq!(
            state.width(),
            self.state_width,
            "a state of another network"
        );
    }

    /// Policy-head outputs `[n * head_dim]` for `n` observations `[n *
    /// obs_dim]`, each read on its own (a network with memory reads each as
    /// an episode's first step).
    pub fn head(&self, obs: &[f32], n: usize) -> Vec<f32> {
        let mut b = self.buffers(obs, n);
        self.pass(&mut b, None)
    }

    /// [`FusedPolicy::head`] for rows whose allowed actions `masks` (`[n *
    /// head_dim]`, 0 = masked) gives: where few are allowed, only their
    /// outputs are computed and the masked entries are 0 (a sampler or an
    /// argmax that reads the mask never looks at them).
    pub fn head_masked(&self, obs: &[f32], n: usize, masks: &[u8]) -> Vec<f32> {
        let mut b = self.buffers(obs, n);
        self.pass(&mut b, Some(masks))
    }

    /// The policy head over the rows loaded in `b`, through the sparse head
    /// where `masks` allow few enough actions.
    fn pass(&self, b: &mut Buffers, masks: Option<&[u8]>) -> Vec<f32> {
        let (hd, n) = (self.layout.head_dim, b.work.m);
        let Buffers { work, sparse } = b;
        let Some(masks) = masks else {
            net::policy_forward(&self.layout, &self.params, work);
            return work.head.clone();
        };
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
