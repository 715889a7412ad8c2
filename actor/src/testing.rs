//! Test doubles shared by the actor's unit tests: a vector env that is
//! never stepped (sampling needs only its size, spec and masks), and the
//! decoding of a batch's tensors with the wire codecs.

use sebulba_envs::{ActionBatch, ActionSpace, EnvError, EnvSpec, VecStepOut, VectorEnv};
use sebulba_proto::{TrajectoryBatch, decode_f32, decode_i32, decode_u8};

/// A one-player env spec of `obs_dim` observations.
pub(crate) fn spec(obs_dim: usize, action_space: ActionSpace) -> EnvSpec {
    EnvSpec {
        obs_dtype: sebulba_envs::ObsDtype::F32,
        id: "test:fake".into(),
        obs_dim,
        image: None,
        action_space,
        max_episode_steps: 0,
        obs_low: vec![f32::NEG_INFINITY; obs_dim],
        obs_high: vec![f32::INFINITY; obs_dim],
        players: 1,
    }
}

/// `e_len` envs with the masks `masks` (`[E * n]`; `None`: the env kind has none).
pub(crate) struct FakeEnv {
    pub spec: EnvSpec,
    pub e_len: usize,
    pub masks: Option<Vec<u8>>,
}

impl FakeEnv {
    pub(crate) fn new(e_len: usize, action_space: ActionSpace, masks: Option<Vec<u8>>) -> Self {
        Self {
            spec: spec(1, action_space),
            e_len,
            masks,
        }
    }
}

impl VectorEnv for FakeEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }
    fn num_envs(&self) -> usize {
        self.e_len
    }
    fn reset(&mut self, _obs: &mut [f32]) -> Result<(), EnvError> {
        Ok(())
    }
    fn step(&mut self, _: ActionBatch<'_>, _: &mut VecStepOut) -> Result<(), EnvError> {
        unreachable!("a FakeEnv is never stepped")
    }
    fn action_masks(&self, mask: &mut [u8]) -> bool {
        match &self.masks {
            Some(m) => {
                mask.copy_from_slice(m);
                true
            }
            None => false,
        }
    }
}

/// A batch's per-step tensors as decoded by the learner's codecs, each
/// checked for its dtype and exact shape (`r` rows, `e` envs, `d` obs dims).
pub(crate) struct Decoded {
    pub observations: Vec<f32>,
    pub log_probs: Vec<f32>,
    pub rewards: Vec<f32>,
    pub terminated: Vec<u8>,
    pub truncated: Vec<u8>,
    /// `[K, d]`, K the number of truncated steps.
    pub final_observations: Vec<f32>,
}

pub(crate) fn decode(b: &TrajectoryBatch, r: u32, e: u32, d: u32) -> Decoded {
    let k = b
        .final_observations
        .as_ref()
        .and_then(|t| t.shape.first().copied())
        .expect("final_observations has a shape");
    Decoded {
        observations: decode_f32(b.observations.as_ref(), "observations", &[r + 1, e, d]).unwrap(),
        log_probs: decode_f32(b.log_probs.as_ref(), "log_probs", &[r, e]).unwrap(),
        rewards: decode_f32(b.rewards.as_ref(), "rewards", &[r, e]).unwrap(),
        terminated: decode_u8(b.terminated.as_ref(), "terminated", &[r, e]).unwrap(),
        truncated: decode_u8(b.truncated.as_ref(), "truncated", &[r, e]).unwrap(),
        final_observations: decode_f32(
            b.final_observations.as_ref(),
            "final_observations",
            &[k, d],
        )
        .unwrap(),
    }
}

/// The discrete actions `[r, e]` of a batch.
pub(crate) fn discrete_actions(b: &TrajectoryBatch, r: u32, e: u32) -> Vec<i32> {
    decode_i32(b.actions.as_ref(), "actions", &[r, e]).unwrap()
}

/// `ln N(x; mean, std)` in f64.
pub(crate) fn ln_normal(x: f64, mean: f64, std: f64) -> f64 {
    let z = (x - mean) / std;
    -0.5 * z * z - std.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln()
}

/// Log-softmax of `logits` at `a` in f64, over the entries `valid` allows.
pub(crate) fn ln_softmax_at(logits: &[f32], valid: Option<&[u8]>, a: usize) -> f64 {
    let ok = |i: usize| valid.is_none_or(|v| v[i] != 0);
    let sum: f64 = (0..logits.len())
        .filter(|&i| ok(i))
        .map(|i| f64::from(logits[i]).exp())
        .sum();
    f64::from(logits[a]) - sum.ln()
}
