//! Safetensors bytes straight from and into the flat parameter vector, for the
//! networks the fused pass covers. The file is the one burn writes for the same
//! model (tensor names, shapes, dtype, metadata), so burn loads what this writes
//! and the other way round; going through burn's tensors instead cost a local
//! run about a tenth of its CPU (an element-by-element copy of every tensor at
//! each publish and at each actor's and the evaluator's load).

use super::WeightsError;
use crate::model::ModelSpec;
/// The normaliser's statistics travel as the model holds them.
pub use crate::model::fused::ObsStats;
use crate::model::fused::net::{Dense, Layout};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::HashMap;

/// Where one tensor lives: in the parameter vector, or the normaliser.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Source {
    Param(usize),
    Mean,
    Var,
}

/// Every tensor of the model: burn's name, its shape and where it lives.
fn tensors(layout: &Layout, obs_norm: bool) -> Vec<(String, Vec<usize>, Source)> {
    let mut out = Vec::new();
    let mut linear = |name: String, d: &Dense| {
        out.push((
            format!("{name}.weight"),
            vec![d.d_in, d.d_out],
            Source::Param(d.w),
        ));
        out.push((format!("{name}.bias"), vec![d.d_out], Source::Param(d.b)));
    };
    for (i, d) in layout.actor.iter().enumerate() {
        linear(format!("actor.layers.{i}"), d);
    }
    for (i, d) in layout.critic.iter().flatten().enumerate() {
        linear(format!("critic.layers.{i}"), d);
    }
    linear("policy_head".into(), &layout.policy);
    linear("value_head".into(), &layout.value);
    if obs_norm {
        let dim = vec![layout.obs_dim];
        out.push(("obs_norm.mean".into(), dim.clone(), Source::Mean));
        out.push(("obs_norm.var".into(), dim, Source::Var));
    }
    out
}

fn le_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The safetensors file of the model `spec` with parameters `params` (in
/// `layout` order) and, when the network normalises observations, `obs`.
/// Non-finite values are refused, naming the tensor.
pub fn to_safetensors(
    spec: &ModelSpec,
    layout: &Layout,
    params: &[f32],
    obs: Option<&ObsStats>,
) -> Result<Vec<u8>, WeightsError> {
    let store = |e: String| WeightsError::Store(e);
    if params.len() != layout.len {
        return Err(store(format!(
            "{} parameters for a layout of {}",
            params.len(),
            layout.len
        )));
    }
    let list = tensors(layout, spec.network.obs_norm);
    let stats = match (spec.network.obs_norm, obs) {
        (true, Some(s)) if s.mean.len() == layout.obs_dim && s.var.len() == layout.obs_dim => {
            Some(s)
        }
        (true, _) => return Err(store("the observation statistics do not fit".into())),
        (false, _) => None,
    };
    let mut bytes = Vec::with_capacity(list.len());
    for (name, shape, source) in &list {
        let n: usize = shape.iter().product();
        let values = match (source, stats) {
            (Source::Param(at), _) => &params[*at..*at + n],
            (Source::Mean, Some(s)) => &s.mean[..],
            (Source::Var, Some(s)) => &s.var[..],
            _ => unreachable!("statistics are listed only when present"),
        };
        if values.iter().any(|v| !v.is_finite()) {
            return Err(WeightsError::NonFinite(name.clone()));
        }
        bytes.push(le_bytes(values));
    }
    let views = list
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), b)| {
            TensorView::new(Dtype::F32, shape.clone(), b)
                .map(|v| (name.as_str(), v))
                .map_err(|e| store(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let spec_json = serde_json::to_string(spec).map_err(|e| store(e.to_string()))?;
    let metadata = HashMap::from([
        ("format".to_string(), "safetensors".to_string()),
        ("producer".to_string(), "burn".to_string()),
        ("version".to_string(), "0.21.0".to_string()),
        ("sebulba.model_spec".to_string(), spec_json),
    ]);
    safetensors::serialize(views, Some(metadata)).map_err(|e| store(e.to_string()))
}

/// The parameters (in `layout` order) and normaliser statistics in `bytes`.
/// Every tensor must be there with its shape, as f32, finite, and nothing
/// else may be: the same checks as loading into a burn model.
pub fn from_safetensors(
    layout: &Layout,
    obs_norm: bool,
    bytes: &[u8],
) -> Result<(Vec<f32>, Option<ObsStats>), WeightsError> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| WeightsError::Store(e.to_string()))?;
    let list = tensors(layout, obs_norm);
    if file.len() != list.len() {
        let expected: Vec<&str> = list.iter().map(|t| t.0.as_str()).collect();
        return Err(WeightsError::Mismatch(format!(
            "{} tensors, the model has {}: {expected:?}",
            file.len(),
            list.len()
        )));
    }
    let mut params = vec![0.0f32; layout.len];
    let mut stats = obs_norm.then(|| ObsStats {
        mean: vec![0.0; layout.obs_dim],
        var: vec![0.0; layout.obs_dim],
    });
    for (name, shape, source) in &list {
        let t = file
            .tensor(name)
            .map_err(|_| WeightsError::Mismatch(format!("missing `{name}`")))?;
        if t.dtype() != Dtype::F32 || t.shape() != &shape[..] {
            return Err(WeightsError::Mismatch(format!(
                "`{name}` is {:?} {:?}, the model has F32 {shape:?}",
                t.dtype(),
                t.shape()
            )));
        }
        let n: usize = shape.iter().product();
        let out = match (source, stats.as_mut()) {
            (Source::Param(at), _) => &mut params[*at..*at + n],
            (Source::Mean, Some(s)) => &mut s.mean[..],
            (Source::Var, Some(s)) => &mut s.var[..],
            _ => unreachable!("statistics are listed only when present"),
        };
        for (o, b) in out.iter_mut().zip(t.data().chunks_exact(4)) {
            *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        if out.iter().any(|v| !v.is_finite()) {
            return Err(WeightsError::NonFinite(name.clone()));
        }
    }
    Ok((params, stats))
}

#[cfg(test)]
mod tests;
