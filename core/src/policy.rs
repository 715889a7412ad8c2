//! Batched CPU inference for actors and the evaluator: the policy network on the
//! inference backend, reloaded in place when a new version arrives.

use crate::CpuBackend;
use crate::config::{Activation, NetworkConfig};
use crate::env::EnvSpec;
use crate::model::{ActorCritic, ModelSpec};
use crate::weights::{WeightsError, load_into};
use burn::tensor::{Tensor, TensorData};

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("field `network.activation`: unknown activation `{0}`")]
    Activation(String),
    #[error("field `network.hidden`: needs at least one non-zero layer size")]
    Hidden,
    #[error(transparent)]
    Weights(#[from] WeightsError),
}

/// The network spec as it travels in `RunSpec` and `Weights`.
pub fn network_from_wire(n: &sebulba_proto::NetworkSpec) -> Result<NetworkConfig, PolicyError> {
    let activation = Activation::parse(&n.activation)
        .ok_or_else(|| PolicyError::Activation(n.activation.clone()))?;
    if n.hidden.is_empty() || n.hidden.contains(&0) {
        return Err(PolicyError::Hidden);
    }
    Ok(NetworkConfig {
        hidden: n.hidden.iter().map(|&h| h as usize).collect(),
        activation,
    })
}

pub fn network_to_wire(n: &NetworkConfig) -> sebulba_proto::NetworkSpec {
    sebulba_proto::NetworkSpec {
        hidden: n.hidden.iter().map(|&h| h as u32).collect(),
        activation: n.activation.as_str().into(),
    }
}

pub struct InferencePolicy {
    spec: ModelSpec,
    model: ActorCritic<CpuBackend>,
    device: burn::tensor::Device<CpuBackend>,
    version: Option<u64>,
}

impl InferencePolicy {
    pub fn new(env: &EnvSpec, network: &NetworkConfig) -> Self {
        let spec = ModelSpec::new(env, network);
        let device = Default::default();
        let model = spec.init::<CpuBackend>(&device);
        Self {
            spec,
            model,
            device,
            version: None,
        }
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
        let mut fresh = self.spec.init::<CpuBackend>(&self.device);
        load_into(&mut fresh, bytes)?;
        self.model = fresh;
        self.version = Some(version);
        Ok(())
    }

    /// Policy-head outputs `[n * head_dim]` for `n` observations `[n * obs_dim]`.
    pub fn head(&self, obs: &[f32], n: usize) -> Vec<f32> {
        let x = Tensor::<CpuBackend, 2>::from_data(
            TensorData::new(obs.to_vec(), [n, self.spec.obs_dim]),
            &self.device,
        );
        self.model
            .policy(x)
            .into_data()
            .into_vec::<f32>()
            .unwrap_or_else(|_| vec![0.0; n * self.spec.head_dim()])
    }
}
