//! Weights as safetensors bytes: how they cross the wire and rest on disk. The
//! model spec rides along in the safetensors metadata so a file explains itself
//! (and PyTorch's `safetensors.torch.load` reads the tensors directly).

pub mod flat;

use crate::model::{ActorCritic, ModelSpec};
use burn::tensor::backend::Backend;
use burn_store::{ModuleSnapshot, SafetensorsStore};

pub use sebulba_fused::WeightsError;

/// Serialises `model` to safetensors bytes, with the spec as metadata. A model
/// with a non-finite parameter is refused: such weights never leave a process.
pub fn to_safetensors<B: Backend>(
    model: &ActorCritic<B>,
    spec: &ModelSpec,
) -> Result<Vec<u8>, WeightsError> {
    check_finite(model)?;
    let spec_json = serde_json::to_string(spec).map_err(|e| WeightsError::Store(e.to_string()))?;
    let mut store = SafetensorsStore::from_bytes(None).metadata("sebulba.model_spec", spec_json);
    model
        .save_into(&mut store)
        .map_err(|e| WeightsError::Store(e.to_string()))?;
    store
        .get_bytes()
        .map_err(|e| WeightsError::Store(e.to_string()))
}

/// Loads safetensors bytes into `model` in place. Every parameter must be present
/// with the right shape and finite values; nothing extra may be in the file.
pub fn load_into<B: Backend>(
    model: &mut ActorCritic<B>,
    bytes: Vec<u8>,
) -> Result<(), WeightsError> {
    let mut store = SafetensorsStore::from_bytes(Some(bytes));
    let result = model
        .load_from(&mut store)
        .map_err(|e| WeightsError::Mismatch(e.to_string()))?;
    if !result.is_success() || !result.unused.is_empty() || !result.missing.is_empty() {
        return Err(WeightsError::Mismatch(format!(
            "missing {:?}, unused {:?}, errors {:?}",
            result.missing, result.unused, result.errors
        )));
    }
    check_finite(model)
}

/// A fresh model of `spec` carrying the given weights.
pub fn from_safetensors<B: Backend>(
    spec: &ModelSpec,
    bytes: Vec<u8>,
    device: &B::Device,
) -> Result<ActorCritic<B>, WeightsError> {
    let mut model = spec.init::<B>(device);
    load_into(&mut model, bytes)?;
    Ok(model)
}

/// Every parameter of `model` is finite (else the first bad one is named).
pub fn check_finite<B: Backend>(model: &ActorCritic<B>) -> Result<(), WeightsError> {
    use burn::module::{ModuleVisitor, Param};
    use burn::tensor::Tensor;
    struct Finite {
        bad: Option<String>,
        index: usize,
    }
    impl<B: Backend> ModuleVisitor<B> for Finite {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let ok = param.val().is_finite().all().into_scalar();
            if !burn::tensor::ElementConversion::elem::<bool>(ok) && self.bad.is_none() {
                self.bad = Some(format!("parameter #{}", self.index));
            }
            self.index += 1;
        }
    }
    let mut v = Finite {
        bad: None,
        index: 0,
    };
    burn::module::Module::visit(model, &mut v);
    match v.bad {
        Some(name) => Err(WeightsError::NonFinite(name)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;
    use crate::config::{Activation, NetworkConfig};
    use burn::tensor::{Tensor, TensorData};
    use sebulba_envs::ActionSpace;

    fn spec(hidden: Vec<usize>) -> ModelSpec {
        ModelSpec {
            input_scale: 1.0,
            obs_dim: 4,
            image: None,
            action_space: ActionSpace::Discrete { n: 2 },
            network: NetworkConfig {
                hidden,
                activation: Activation::Tanh,
                ..Default::default()
            },
        }
    }

    #[test]
    fn round_trip_gives_the_same_outputs() {
        let dev = Default::default();
        let s = spec(vec![8, 8]);
        let a = s.init::<CpuBackend>(&dev);
        let bytes = to_safetensors(&a, &s).unwrap();
        let b: ActorCritic<CpuBackend> = from_safetensors(&s, bytes, &dev).unwrap();
        let obs = Tensor::<CpuBackend, 2>::from_data(
            TensorData::new(vec![0.3f32, -0.2, 0.1, 0.9], [1, 4]),
            &dev,
        );
        let pa: Vec<f32> = a.policy(obs.clone()).into_data().to_vec().unwrap();
        let pb: Vec<f32> = b.policy(obs.clone()).into_data().to_vec().unwrap();
        assert_eq!(pa, pb);
        let va: Vec<f32> = a.value(obs.clone()).into_data().to_vec().unwrap();
        let vb: Vec<f32> = b.value(obs).into_data().to_vec().unwrap();
        assert_eq!(va, vb);
    }

    #[test]
    fn wrong_shapes_and_garbage_are_refused() {
        let dev = Default::default();
        let bytes =
            to_safetensors(&spec(vec![8]).init::<CpuBackend>(&dev), &spec(vec![8])).unwrap();
        assert!(from_safetensors::<CpuBackend>(&spec(vec![16]), bytes, &dev).is_err());
        assert!(
            from_safetensors::<CpuBackend>(&spec(vec![8]), b"not safetensors".to_vec(), &dev)
                .is_err()
        );
    }

    #[test]
    fn obs_norm_statistics_and_layer_norms_travel_with_the_weights() {
        let dev = Default::default();
        let mut s = spec(vec![8]);
        s.network.obs_norm = true;
        s.network.layer_norm = crate::config::LayerNormPlacement::Post;
        let mut a = s.init::<CpuBackend>(&dev);
        let mut stats = crate::model::RunningMeanStd::new(4);
        stats.update(&[1.0, 2.0, 3.0, 4.0, 3.0, 0.0, -1.0, 8.0]);
        a.set_obs_stats(&stats);
        let bytes = to_safetensors(&a, &s).unwrap();
        let b: ActorCritic<CpuBackend> = from_safetensors(&s, bytes.clone(), &dev).unwrap();
        let mean: Vec<f32> = b.obs_norm.unwrap().mean.val().into_data().to_vec().unwrap();
        assert_eq!(mean, vec![2.0, 1.0, 1.0, 6.0]);
        // A receiver built without the normaliser refuses the file (extra tensors).
        assert!(from_safetensors::<CpuBackend>(&spec(vec![8]), bytes, &dev).is_err());
    }
}
