//! The actor-critic policy: an optional observation normaliser, actor and critic
//! torsos (or one shared torso; each the blocks of `sebulba_fused::Arch`:
//! convolutions, max-pools, residual blocks, dense layers), a policy head whose output a
//! [`crate::distribution::ActionDist`] interprets, and a value head. Orthogonal
//! init uses the PPO literature's gains (sqrt(2) hidden, 0.01 policy head, 1.0
//! value head); biases start at zero, except the continuous head's std half,
//! which starts at `init_std`.

pub mod flat;
mod obs_norm;
mod orthogonal;
mod recurrent;
mod torso;

pub use obs_norm::{ObsNorm, RunningMeanStd};
pub use recurrent::{Movers, Recurrent, Sequence};
pub use sebulba_fused::OBS_NORM_EPS;
pub use torso::{Residual, Torso, linear};

use crate::config::NetworkConfig;
use crate::distribution::{ActionDist, softplus_inverse};
use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::{Int, Tensor, TensorData, backend::Backend};
use sebulba_envs::{ActionSpace, EnvSpec};
use sebulba_fused::net::{BlockAt, Layout};
use serde::{Deserialize, Serialize};

/// Everything needed to build the network: what the weights' shapes follow from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub obs_dim: usize,
    /// The observation as an image `[H, W, C]`, which a convolution stem
    /// reads (the env's `EnvSpec::image`).
    #[serde(default)]
    pub image: Option<[usize; 3]>,
    pub action_space: ActionSpace,
    pub network: NetworkConfig,
    /// What observations are multiplied by before the first layer
    /// (`fused::Arch::input_scale`): the env's own (`EnvSpec::input_scale`,
    /// 1/255 for Atari's frames), or 1 when the network normalises them.
    #[serde(default = "unit_scale")]
    pub input_scale: f32,
}

fn unit_scale() -> f32 {
    1.0
}

/// A network that cannot be built for an environment.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A torso's blocks (`network.conv`, `network.stacks`, `network.hidden`)
    /// against the observation: the field is the one whose block failed.
    #[error("field `{field}`: {reason}")]
    Blocks { field: &'static str, reason: String },
}

/// Weights of a dense layer (or head) reading an image, at most.
pub const MAX_STEM_WEIGHTS: usize = 1 << 26;

impl ModelSpec {
    /// The network `network` for `env`'s observations and actions, refused
    /// when its blocks do not fit the observation.
    pub fn new(env: &EnvSpec, network: &NetworkConfig) -> Result<Self, ModelError> {
        let spec = Self {
            obs_dim: env.obs_dim,
            image: env.image,
            action_space: env.action_space.clone(),
            network: network.clone(),
            input_scale: if network.obs_norm {
                1.0
            } else {
                env.input_scale()
            },
        };
        spec.check()?;
        Ok(spec)
    }

    /// The torso's blocks against the observation, and the size of a dense
    /// layer reading an image: what [`Self::new`] refuses.
    pub fn check(&self) -> Result<(), ModelError> {
        let n = &self.network;
        let field = |block: usize| match block {
            b if b < n.conv.len() => "network.conv",
            _ if !n.stacks.is_empty() => "network.stacks",
            _ => "network.hidden",
        };
        let layout = Layout::try_new(&self.arch()).map_err(|e| ModelError::Blocks {
            field: field(e.block),
            reason: e.reason,
        })?;
        let mut outputs: Vec<usize> = n.hidden.clone();
        outputs.push(self.head_dim());
        let dense_inputs = layout.actor.blocks.iter().filter_map(|b| match b {
            BlockAt::Dense(d) => Some(d.input),
            _ => None,
        });
        let top = layout.actor.blocks.last().map(|b| b.output());
        for (input, d_out) in dense_inputs.chain(top).zip(outputs) {
            if input.image().is_some() && input.len() * d_out > MAX_STEM_WEIGHTS {
                return Err(ModelError::Blocks {
                    field: field(0),
                    reason: format!(
                        "the image blocks' {} outputs per sample times {d_out} give over {MAX_STEM_WEIGHTS} weights",
                        input.len()
                    ),
                });
            }
        }
        Ok(())
    }

    /// Width of the policy head's output (logits, or means then raw stds).
    pub fn head_dim(&self) -> usize {
        crate::distribution::head_dim(&self.action_space)
    }

    /// The network in the fused engine's terms.
    pub fn arch(&self) -> sebulba_fused::Arch {
        let n = &self.network;
        sebulba_fused::Arch {
            obs_dim: self.obs_dim,
            head_dim: self.head_dim(),
            image: self.image,
            torso: n.torso(),
            shared_torso: n.shared_torso,
            activation: n.activation,
            obs_norm: n.obs_norm,
            obs_clip: n.obs_clip,
            input_scale: self.input_scale,
        }
    }

    /// How the head's output is read.
    pub fn dist(&self) -> ActionDist {
        ActionDist::new(&self.action_space, &self.network)
    }

    /// A freshly initialised model. Burn's init draws from the backend's global RNG,
    /// so the caller seeds it (`B::seed`): the same seed, the same initial weights.
    pub fn init<B: Backend>(&self, device: &B::Device) -> ActorCritic<B> {
        let n = &self.network;
        let layout = Layout::new(&self.arch());
        // Each torso from its own placing: the same blocks, but a critic's
        // core keeps its state after the actor's.
        let torso = |t| Torso::new(t, n.activation, n.layer_norm, n.init, device);
        let width = layout.width();
        let head_bias = match &self.action_space {
            ActionSpace::Discrete { .. } => None,
            ActionSpace::Box { low, .. } => {
                let raw = softplus_inverse(n.init_std - n.min_std) as f32;
                let mut b = vec![0.0f32; 2 * low.len()];
                b[low.len()..].iter_mut().for_each(|x| *x = raw);
                Some(b)
            }
        };
        let model = ActorCritic {
            input_scale: self.input_scale,
            obs_norm: n
                .obs_norm
                .then(|| ObsNorm::new(self.obs_dim, n.obs_clip, device)),
            actor: torso(&layout.actor),
            critic: layout.critic.as_ref().map(torso),
            policy_head: linear(width, self.head_dim(), n.init, 0.01, head_bias, device),
            value_head: linear(width, 1, n.init, 1.0, None, device),
        };
        materialize(&model);
        model
    }
}

/// Draws every lazily initialised parameter now. Burn defers initialisation to
/// first use, and a clone (or a `valid()` copy) of a still-lazy parameter draws
/// its own values: the published weights would then differ from the ones trained.
fn materialize<B: Backend>(model: &ActorCritic<B>) {
    struct Touch;
    impl<B: Backend> burn::module::ModuleVisitor<B> for Touch {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<B, D>>) {
            let _ = param.val();
        }
    }
    model.visit(&mut Touch);
}

#[derive(Module, Debug)]
pub struct ActorCritic<B: Backend> {
    /// `ModelSpec::input_scale`, applied when there is no normaliser.
    #[module(skip)]
    pub input_scale: f32,
    pub obs_norm: Option<ObsNorm<B>>,
    pub actor: Torso<B>,
    /// `None`: the critic shares the actor's torso.
    pub critic: Option<Torso<B>>,
    pub policy_head: Linear<B>,
    pub value_head: Linear<B>,
}

impl<B: Backend> ActorCritic<B> {
    /// Observations as the torsos see them: normalised when the normaliser
    /// is on, else scaled by the input scale.
    pub fn input(&self, obs: Tensor<B, 2>) -> Tensor<B, 2> {
        match &self.obs_norm {
            Some(n) => n.forward(obs),
            None if self.input_scale != 1.0 => obs.mul_scalar(self.input_scale),
            None => obs,
        }
    }

    /// Raw policy-head output `[N, head_dim]` for observations `[N,
    /// obs_dim]`, each read on its own (a network with memory reads each as
    /// an episode's first step).
    pub fn policy(&self, obs: Tensor<B, 2>) -> Tensor<B, 2> {
        self.policy_in(obs, None)
    }

    /// [`Self::policy`] of the rows of `seq` (a network with memory reads
    /// them in time order from each env's state).
    pub fn policy_in(&self, obs: Tensor<B, 2>, seq: Option<&Sequence<B>>) -> Tensor<B, 2> {
        self.policy_head
            .forward(self.actor.forward(self.input(obs), seq))
    }

    /// State values `[N]` for observations `[N, obs_dim]`.
    pub fn value(&self, obs: Tensor<B, 2>) -> Tensor<B, 1> {
        self.value_in(obs, None)
    }

    /// [`Self::value`] of the rows of `seq`.
    pub fn value_in(&self, obs: Tensor<B, 2>, seq: Option<&Sequence<B>>) -> Tensor<B, 1> {
        let x = self.input(obs);
        let h = match &self.critic {
            Some(c) => c.forward(x, seq),
            None => self.actor.forward(x, seq),
        };
        flatten(self.value_head.forward(h))
    }

    /// Policy head and values together: one normalisation, and one torso pass
    /// when the torso is shared.
    pub fn policy_value(&self, obs: Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 1>) {
        self.policy_value_in(obs, None)
    }

    /// [`Self::policy_value`] of the rows of `seq`.
    pub fn policy_value_in(
        &self,
        obs: Tensor<B, 2>,
        seq: Option<&Sequence<B>>,
    ) -> (Tensor<B, 2>, Tensor<B, 1>) {
        let x = self.input(obs);
        let ha = self.actor.forward(x.clone(), seq);
        let hv = match &self.critic {
            Some(c) => c.forward(x, seq),
            None => ha.clone(),
        };
        (
            self.policy_head.forward(ha),
            flatten(self.value_head.forward(hv)),
        )
    }

    /// The state after each of `rows` of `seq` (`[rows.len(), width]`, in
    /// each env's state's order): where a row read on its own continues an
    /// env's sequence (a cut episode's final observation).
    pub fn states_after(
        &self,
        obs: Tensor<B, 2>,
        seq: &Sequence<B>,
        rows: &[usize],
    ) -> Tensor<B, 2> {
        let x = self.input(obs);
        let device = x.device();
        let (_, mut states) = self.actor.forward_keeping(x.clone(), Some(seq));
        if let Some(c) = &self.critic {
            states.extend(c.forward_keeping(x, Some(seq)).1);
        }
        states.sort_by_key(|(at, _)| *at);
        let k = rows.len();
        let at: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
        let at = Tensor::<B, 1, Int>::from_data(TensorData::new(at, [k]), &device);
        let parts: Vec<Tensor<B, 2>> = states
            .into_iter()
            .map(|(_, s)| s.select(0, at.clone()))
            .collect();
        Tensor::cat(parts, 1)
    }

    /// Sets the observation normaliser's statistics (no-op when it is off).
    pub fn set_obs_stats(&mut self, stats: &RunningMeanStd) {
        if let Some(n) = &mut self.obs_norm {
            n.set(&stats.mean_f32(), &stats.var_f32());
        }
    }
}

fn flatten<B: Backend>(v: Tensor<B, 2>) -> Tensor<B, 1> {
    let n = v.dims()[0];
    v.reshape([n])
}

#[cfg(test)]
mod tests;
