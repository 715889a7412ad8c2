//! How an evaluation picks each env's action from the policy head
//! (`eval.policy`): greedy (argmax over the allowed actions, the squashed
//! Gaussian's mean), sampled from the policy, or ε-greedy (a uniformly drawn
//! allowed action, or a uniform action within the bounds, with probability
//! ε). The draws come from one generator seeded by the evaluation seed, so a
//! version's evaluation repeats. Buffers are sized once.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_core::config::EvalPolicy;
use sebulba_core::distribution::{
    ActionDist, DistError, argmax, sample_categorical, sample_epsilon_greedy, sample_tanh_normal,
    tanh_normal_mode,
};
use sebulba_envs::{ActionBatch, VectorEnv};

pub(crate) struct Acting {
    policy: EvalPolicy,
    epsilon: f64,
    rng: StdRng,
    discrete: Vec<u32>,
    continuous: Vec<f32>,
    masks: Vec<u8>,
    /// A row's scratch: log-probabilities, or the pre-tanh sample.
    scratch: Vec<f32>,
}

impl Acting {
    pub(crate) fn new(
        dist: &ActionDist,
        envs: usize,
        policy: EvalPolicy,
        epsilon: f64,
        seed: u64,
    ) -> Self {
        let (masks, scratch) = match dist {
            ActionDist::Categorical { n } => (vec![1u8; envs * n], vec![0.0; *n]),
            ActionDist::TanhNormal { dim, .. } => (Vec::new(), vec![0.0; *dim]),
        };
        Self {
            policy,
            epsilon,
            rng: StdRng::seed_from_u64(seed ^ 0xE7A1_AC75),
            discrete: vec![0; envs],
            continuous: vec![0.0; envs * dist.action_width()],
            masks,
            scratch,
        }
    }

    /// Every env's action for the head rows `head`.
    pub(crate) fn actions<'a>(
        &'a mut self,
        dist: &ActionDist,
        head: &[f32],
        venv: &dyn VectorEnv,
    ) -> Result<ActionBatch<'a>, DistError> {
        match dist {
            ActionDist::Categorical { n } => {
                let n = *n;
                let has_masks = venv.action_masks(&mut self.masks);
                for (e, a) in self.discrete.iter_mut().enumerate() {
                    let valid = has_masks.then(|| &self.masks[e * n..(e + 1) * n]);
                    let row = &head[e * n..(e + 1) * n];
                    *a = match self.policy {
                        EvalPolicy::Greedy => argmax(row, valid),
                        EvalPolicy::Sample => {
                            sample_categorical(row, valid, &mut self.scratch, &mut self.rng)
                                .map_err(|_| DistError::AllMasked { env: e })?
                                .0
                        }
                        EvalPolicy::Epsilon => {
                            sample_epsilon_greedy(row, valid, self.epsilon, &mut self.rng)
                                .map_err(|_| DistError::AllMasked { env: e })?
                                .0
                        }
                    } as u32;
                }
                Ok(ActionBatch::Discrete(&self.discrete))
            }
            ActionDist::TanhNormal {
                dim,
                squash,
                min_std,
            } => {
                let h = 2 * dim;
                for (e, a) in self.continuous.chunks_exact_mut(*dim).enumerate() {
                    let row = &head[e * h..(e + 1) * h];
                    match self.policy {
                        EvalPolicy::Greedy => tanh_normal_mode(row, squash, a),
                        EvalPolicy::Sample => {
                            let u = &mut self.scratch;
                            sample_tanh_normal(row, *min_std, squash, &mut self.rng, u, a);
                        }
                        EvalPolicy::Epsilon if self.rng.random::<f64>() < self.epsilon => {
                            for (i, x) in a.iter_mut().enumerate() {
                                let w = squash.half_width[i];
                                *x = squash.center[i] + w * self.rng.random_range(-1.0f32..=1.0);
                            }
                        }
                        EvalPolicy::Epsilon => tanh_normal_mode(row, squash, a),
                    }
                }
                Ok(ActionBatch::Continuous(&self.continuous))
            }
        }
    }
}
