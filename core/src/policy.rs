//! Batched inference for actors and the evaluator: the policy network on CPU
//! (acting through the fused forward pass where it covers the network) or on a
//! CUDA device, reloaded in place when a new version arrives and checked first.
//! Also the network section's wire form ([`network_to_wire`],
//! [`network_from_wire`]), which every role builds the same network from.

use crate::CpuBackend;
use crate::config::ranges::check_key;
use crate::config::{
    Activation, ConvLayer, CoreKind, Init, LayerNormPlacement, NetworkConfig, Stack,
};
use crate::devices::DeviceKind;
use crate::model::{ActorCritic, ModelSpec};
use crate::weights::{WeightsError, load_into};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use sebulba_envs::EnvSpec;
use sebulba_fused::FusedPolicy;
/// What a policy remembers per env between steps (the fused crate's, made by
/// [`InferencePolicy::state`]).
pub use sebulba_fused::PolicyState;
use sebulba_fused::net::Layout;

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("field `network.{field}`: unknown value `{value}`")]
    Unknown { field: &'static str, value: String },
    #[error("field `network.hidden`: needs at least one non-zero layer size")]
    Hidden,
    #[error("field `network.{0}`: must be a finite number > 0 (init_std > min_std)")]
    Number(&'static str),
    #[error("field `network.conv`: layer {layer}: {reason}")]
    Conv { layer: usize, reason: String },
    #[error("field `network.stacks`: stack {stack}: {reason}")]
    Stack { stack: usize, reason: String },
    /// `network.core_size` out of its range (the message names the key).
    #[error("{0}")]
    Core(String),
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    #[error(transparent)]
    Weights(#[from] WeightsError),
    #[error(transparent)]
    Dist(#[from] crate::distribution::DistError),
    #[error("device `{0}`: inference on cuda needs a binary built with `--features cuda`")]
    Device(DeviceKind),
}

/// The network spec as it travels in `RunSpec` and `Weights`.
pub fn network_from_wire(n: &sebulba_proto::NetworkSpec) -> Result<NetworkConfig, PolicyError> {
    let unknown = |field: &'static str, value: &str| PolicyError::Unknown {
        field,
        value: value.to_string(),
    };
    let activation =
        Activation::parse(&n.activation).ok_or_else(|| unknown("activation", &n.activation))?;
    let layer_norm = LayerNormPlacement::parse(&n.layer_norm)
        .ok_or_else(|| unknown("layer_norm", &n.layer_norm))?;
    let init = Init::parse(&n.init).ok_or_else(|| unknown("init", &n.init))?;
    let core = CoreKind::parse(&n.core).ok_or_else(|| unknown("core", &n.core))?;
    if core != CoreKind::None {
        check_key("network.core_size", u64::from(n.core_size))
            .map_err(|e| PolicyError::Core(e.to_string()))?;
    }
    if n.hidden.is_empty() || n.hidden.contains(&0) {
        return Err(PolicyError::Hidden);
    }
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !positive(n.obs_clip) {
        return Err(PolicyError::Number("obs_clip"));
    }
    if !positive(n.min_std) {
        return Err(PolicyError::Number("min_std"));
    }
    if !(positive(n.init_std) && n.init_std > n.min_std) {
        return Err(PolicyError::Number("init_std"));
    }
    Ok(NetworkConfig {
        conv: conv_from_wire(&n.conv)?,
        stacks: stacks_from_wire(&n.stacks)?,
        hidden: n.hidden.iter().map(|&h| h as usize).collect(),
        core,
        core_size: n.core_size as usize,
        activation,
        layer_norm,
        init,
        shared_torso: n.shared_torso,
        obs_norm: n.obs_norm,
        obs_clip: n.obs_clip,
        min_std: n.min_std,
        init_std: n.init_std,
    })
}

/// Each layer within `network.conv`'s ranges (the config's own).
fn conv_from_wire(layers: &[sebulba_proto::ConvLayer]) -> Result<Vec<ConvLayer>, PolicyError> {
    if layers.len() > 8 {
        return Err(PolicyError::Conv {
            layer: 8,
            reason: "at most 8 layers".into(),
        });
    }
    let mut out = Vec::with_capacity(layers.len());
    for (i, l) in layers.iter().enumerate() {
        let fields = [
            ("channels", l.channels),
            ("kernel", l.kernel),
            ("stride", l.stride),
            ("padding", l.padding),
        ];
        for (field, v) in fields {
            let key = format!("network.conv.{field}");
            check_key(&key, u64::from(v)).map_err(|e| PolicyError::Conv {
                layer: i,
                reason: e.to_string(),
            })?;
        }
        out.push(ConvLayer {
            channels: l.channels as usize,
            kernel: l.kernel as usize,
            stride: l.stride as usize,
            padding: l.padding as usize,
        });
    }
    Ok(out)
}

/// Each stack within `network.stacks`' ranges (the config's own).
fn stacks_from_wire(stacks: &[sebulba_proto::ResidualStack]) -> Result<Vec<Stack>, PolicyError> {
    if stacks.len() > 8 {
        return Err(PolicyError::Stack {
            stack: 8,
            reason: "at most 8 stacks".into(),
        });
    }
    let mut out = Vec::with_capacity(stacks.len());
    for (i, s) in stacks.iter().enumerate() {
        for (field, v) in [("channels", s.channels), ("blocks", s.blocks)] {
            let key = format!("network.stacks.{field}");
            check_key(&key, u64::from(v)).map_err(|e| PolicyError::Stack {
                stack: i,
                reason: e.to_string(),
            })?;
        }
        out.push(Stack {
            channels: s.channels as usize,
            blocks: s.blocks as usize,
        });
    }
    Ok(out)
}

pub fn network_to_wire(n: &NetworkConfig) -> sebulba_proto::NetworkSpec {
    let wire = |l: &ConvLayer| sebulba_proto::ConvLayer {
        channels: l.channels as u32,
        kernel: l.kernel as u32,
        stride: l.stride as u32,
        padding: l.padding as u32,
    };
    sebulba_proto::NetworkSpec {
        conv: n.conv.iter().map(wire).collect(),
        stacks: n
            .stacks
            .iter()
            .map(|s| sebulba_proto::ResidualStack {
                channels: s.channels as u32,
                blocks: s.blocks as u32,
            })
            .collect(),
        hidden: n.hidden.iter().map(|&h| h as u32).collect(),
        core: n.core.as_str().into(),
        core_size: n.core_size as u32,
        activation: n.activation.as_str().into(),
        layer_norm: n.layer_norm.as_str().into(),
        init: n.init.as_str().into(),
        shared_torso: n.shared_torso,
        obs_norm: n.obs_norm,
        obs_clip: n.obs_clip,
        min_std: n.min_std,
        init_std: n.init_std,
    }
}

/// The inference model on the backend of its device. On CPU, a network the
/// fused forward pass covers acts through it (several times faster at actor
/// batch sizes) and loads each version straight from the safetensors bytes;
/// burn runs the rest. (One per policy, made once: the variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
enum Model {
    Fused(FusedPolicy),
    Cpu(ActorCritic<CpuBackend>),
    #[cfg(feature = "cuda")]
    Cuda(ActorCritic<crate::CudaBackend>, burn_cuda::CudaDevice),
}

pub struct InferencePolicy {
    spec: ModelSpec,
    /// Floats of each env's state (`Arch::state_width`).
    state_width: usize,
    model: Model,
    version: Option<u64>,
}

impl InferencePolicy {
    /// A policy for `env` on `device` (`cuda:N` needs the `cuda` feature).
    pub fn new(
        env: &EnvSpec,
        network: &NetworkConfig,
        device: DeviceKind,
    ) -> Result<Self, PolicyError> {
        let spec = ModelSpec::new(env, network)?;
        let model = match device {
            // Zeros until the first version loads (actors and the evaluator
            // act only with a loaded version): an initialisation would be
            // thrown away, and an orthogonal one of Big Two's network takes
            // seconds, at every actor's start and every evaluation.
            DeviceKind::Cpu if spec.network.fused_covers() => {
                let arch = spec.arch();
                let zeros = vec![0.0; Layout::new(&arch).len];
                Model::Fused(FusedPolicy::new(&arch, zeros, None)?)
            }
            DeviceKind::Cpu => Model::Cpu(spec.init::<CpuBackend>(&Default::default())),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(n) => {
                let dev = burn_cuda::CudaDevice::new(n);
                Model::Cuda(spec.init::<crate::CudaBackend>(&dev), dev)
            }
            #[cfg(not(feature = "cuda"))]
            DeviceKind::Cuda(_) => return Err(PolicyError::Device(device)),
        };
        Ok(Self {
            state_width: spec.arch().state_width(),
            spec,
            model,
            version: None,
        })
    }

    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The version currently loaded (None before the first load).
    pub fn version(&self) -> Option<u64> {
        self.version
    }

    /// Loads `bytes` as `version`; on error the previous weights stay in use.
    pub fn load(&mut self, version: u64, bytes: Vec<u8>) -> Result<(), PolicyError> {
        match &mut self.model {
            Model::Fused(f) => *f = FusedPolicy::from_safetensors(&self.spec.arch(), &bytes)?,
            // Loaded into a copy of the current model (tensor handles are shared,
            // so the copy is cheap), not a freshly initialised one: an
            // orthogonal init per version is costly (docs/performance.md).
            // The copy is swapped in only when every tensor loaded.
            Model::Cpu(m) => {
                let mut next = m.clone();
                load_into(&mut next, bytes)?;
                *m = next;
            }
            #[cfg(feature = "cuda")]
            Model::Cuda(m, _) => {
                let mut next = m.clone();
                load_into(&mut next, bytes)?;
                *m = next;
            }
        }
        self.version = Some(version);
        Ok(())
    }

    /// A zero state for `envs` envs: each env's at an episode's start
    /// (empty for a network without memory).
    pub fn state(&self, envs: usize) -> PolicyState {
        PolicyState::zeros(self.state_width, envs)
    }

    /// One step of `state.envs()` envs, as [`FusedPolicy::step`] says
    /// (burn's model, acting on a CUDA device or where the fused passes do
    /// not reach, ignores the masks); a caller zeroes an env's state when
    /// its episode ends ([`PolicyState::reset`]).
    pub fn step(&self, obs: &[f32], state: &mut PolicyState, masks: Option<&[u8]>) -> Vec<f32> {
        debug_assert_eq!(
            state.width(),
            self.state_width,
            "a state of another network"
        );
        match &self.model {
            Model::Fused(fused) => fused.step(obs, state, masks),
            Model::Cpu(m) => head_on(m, &self.spec, obs, state, &Default::default()),
            #[cfg(feature = "cuda")]
            Model::Cuda(m, dev) => head_on(m, &self.spec, obs, state, dev),
        }
    }
}

/// One step of burn's model over `state.envs()` envs, each env's state
/// moved on in place (a network with memory).
fn head_on<B: Backend>(
    model: &ActorCritic<B>,
    spec: &ModelSpec,
    obs: &[f32],
    state: &mut PolicyState,
    device: &B::Device,
) -> Vec<f32> {
    let (n, w) = (state.envs(), state.width());
    let x = Tensor::<B, 2>::from_data(TensorData::new(obs.to_vec(), [n, spec.obs_dim]), device);
    let head = match w {
        0 => model.policy(x),
        _ => {
            let seq = crate::model::Sequence {
                envs: n,
                keep: Tensor::ones([n, 1], device),
                state: Tensor::from_data(TensorData::new(state.values().to_vec(), [n, w]), device),
                seats: None,
            };
            let all: Vec<usize> = (0..n).collect();
            let next = model.states_after(x.clone(), &seq, &all).into_data();
            if let Ok(next) = next.into_vec::<f32>() {
                state.values_mut().copy_from_slice(&next);
            }
            model.policy_in(x, Some(&seq))
        }
    };
    head.into_data()
        .into_vec::<f32>()
        .unwrap_or_else(|_| vec![0.0; n * spec.head_dim()])
}

#[cfg(test)]
mod tests;
