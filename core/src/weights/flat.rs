//! The published file straight from the flat parameter vector
//! ([`sebulba_fused::file`]) with the model spec in its metadata, as
//! [`super::to_safetensors`] writes it from a burn model: the fused engine
//! publishes through here, and the tests below check the two files are one.

use super::WeightsError;
use crate::model::ModelSpec;
use sebulba_fused::ObsNorm;

/// The safetensors file of the model `spec` with parameters `params` (in
/// layout order) and, when the network normalises observations, `norm`.
pub fn to_safetensors(
    spec: &ModelSpec,
    params: &[f32],
    norm: Option<&ObsNorm>,
) -> Result<Vec<u8>, WeightsError> {
    let spec_json = serde_json::to_string(spec).map_err(|e| WeightsError::Store(e.to_string()))?;
    sebulba_fused::file::write(
        &spec.arch(),
        params,
        norm,
        &[("sebulba.model_spec", spec_json)],
    )
}

#[cfg(test)]
mod tests;
