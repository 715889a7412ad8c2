//! Action sampling for one rollout, per distribution kind, with buffers sized
//! once and reused: categorical (with the env's action masks when it has them)
//! or tanh-normal (the pre-tanh sample is what the batch carries); in a DQN
//! run, epsilon-greedy over the Q-values the policy head gives.

use rand::Rng;
use sebulba_core::distribution::{
    ActionDist, DistError, Squash, sample_categorical, sample_epsilon_greedy, sample_tanh_normal,
};
use sebulba_envs::{ActionBatch, VectorEnv};
use sebulba_proto::{Tensor, encode_f32, encode_i32, encode_u8};

pub enum Actions {
    Discrete {
        n: usize,
        /// `[T * E]`
        taken: Vec<i32>,
        step: Vec<u32>,
        scratch: Vec<f32>,
        /// `[T * E * n]` when the env has masks.
        masks: Option<Vec<u8>>,
    },
    Continuous {
        dim: usize,
        squash: Squash,
        min_std: f32,
        /// `[T * E * dim]` pre-tanh samples.
        pre_tanh: Vec<f32>,
        /// `[E * dim]` env actions of the current step.
        step: Vec<f32>,
    },
}

impl Actions {
    pub fn new(dist: &ActionDist, venv: &dyn VectorEnv, t_len: usize) -> Self {
        let e = venv.num_envs();
        match dist {
            ActionDist::Categorical { n } => {
                let mut probe = vec![1u8; e * n];
                let has_masks = venv.action_masks(&mut probe);
                Actions::Discrete {
                    n: *n,
                    taken: vec![0; t_len * e],
                    step: vec![0; e],
                    scratch: vec![0.0; *n],
                    masks: has_masks.then(|| vec![1u8; t_len * e * n]),
                }
            }
            ActionDist::TanhNormal {
                dim,
                squash,
                min_std,
            } => Actions::Continuous {
                dim: *dim,
                squash: squash.clone(),
                min_std: *min_std,
                pre_tanh: vec![0.0; t_len * e * dim],
                step: vec![0.0; e * dim],
            },
        }
    }

    /// Samples step `t`'s actions from the heads `[E * head_dim]`, writes their
    /// log-probabilities to `log_probs[E]`, and returns the batch for the env.
    /// With `epsilon` (a DQN run's weights carry it) discrete heads are
    /// Q-values, acted on epsilon-greedy.
    #[cfg(test)]
    pub fn sample<R: Rng + ?Sized>(
        &mut self,
        t: usize,
        head: &[f32],
        venv: &dyn VectorEnv,
        log_probs: &mut [f32],
        epsilon: Option<f32>,
        rng: &mut R,
    ) -> Result<ActionBatch<'_>, DistError> {
        self.load_masks(t, venv);
        self.sample_loaded(t, head, venv.num_envs(), log_probs, epsilon, rng)
    }

    /// Reads step `t`'s action masks (`[E * n]`) from the env into the
    /// rollout's buffer and returns them, when the env has masks: the
    /// policy can then compute only the allowed outputs, and
    /// [`Actions::sample_loaded`] samples within them.
    pub fn load_masks(&mut self, t: usize, venv: &dyn VectorEnv) -> Option<&[u8]> {
        let e_len = venv.num_envs();
        match self {
            Actions::Discrete {
                n, masks: Some(m), ..
            } => {
                let row = &mut m[t * e_len * *n..(t + 1) * e_len * *n];
                venv.action_masks(row);
                Some(&*row)
            }
            _ => None,
        }
    }

    /// [`Actions::sample`] with step `t`'s masks already loaded
    /// ([`Actions::load_masks`]), for `e_len` envs.
    pub fn sample_loaded<R: Rng + ?Sized>(
        &mut self,
        t: usize,
        head: &[f32],
        e_len: usize,
        log_probs: &mut [f32],
        epsilon: Option<f32>,
        rng: &mut R,
    ) -> Result<ActionBatch<'_>, DistError> {
        match self {
            Actions::Discrete {
                n,
                taken,
                step,
                scratch,
                masks,
            } => {
                let n = *n;
                let row_masks = masks
                    .as_deref()
                    .map(|m| &m[t * e_len * n..(t + 1) * e_len * n]);
                for e in 0..e_len {
                    let valid = row_masks.map(|m| &m[e * n..(e + 1) * n]);
                    let row = &head[e * n..(e + 1) * n];
                    let (a, lp) = match epsilon {
                        Some(eps) => sample_epsilon_greedy(row, valid, f64::from(eps), rng),
                        None => sample_categorical(row, valid, scratch, rng),
                    }
                    .map_err(|_| DistError::AllMasked { env: e })?;
                    step[e] = a as u32;
                    taken[t * e_len + e] = a as i32;
                    log_probs[e] = lp;
                }
                Ok(ActionBatch::Discrete(step))
            }
            Actions::Continuous {
                dim,
                squash,
                min_std,
                pre_tanh,
                step,
            } => {
                let d = *dim;
                for e in 0..e_len {
                    let u = &mut pre_tanh[(t * e_len + e) * d..(t * e_len + e + 1) * d];
                    log_probs[e] = sample_tanh_normal(
                        &head[e * 2 * d..(e + 1) * 2 * d],
                        *min_std,
                        squash,
                        rng,
                        u,
                        &mut step[e * d..(e + 1) * d],
                    );
                }
                Ok(ActionBatch::Continuous(step))
            }
        }
    }

    /// Rows `from..` to the front (a game's carried overlap).
    pub fn shift(&mut self, from: usize, e_len: usize) {
        use crate::turns::shift_rows;
        match self {
            Actions::Discrete {
                n, taken, masks, ..
            } => {
                shift_rows(taken, from, e_len);
                if let Some(m) = masks {
                    shift_rows(m, from, e_len * *n);
                }
            }
            Actions::Continuous { dim, pre_tanh, .. } => shift_rows(pre_tanh, from, e_len * *dim),
        }
    }

    /// The batch's `actions` and `action_masks` tensors.
    pub fn encode(&self, t_len: usize, e_len: usize) -> (Tensor, Option<Tensor>) {
        match self {
            Actions::Discrete {
                n, taken, masks, ..
            } => (
                encode_i32(&[t_len, e_len], taken),
                masks.as_ref().map(|m| encode_u8(&[t_len, e_len, *n], m)),
            ),
            Actions::Continuous { dim, pre_tanh, .. } => {
                (encode_f32(&[t_len, e_len, *dim], pre_tanh), None)
            }
        }
    }
}

#[cfg(test)]
mod tests;
