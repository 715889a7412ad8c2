//! The published safetensors file straight from and into the flat parameter
//! vector. The file is the one burn writes for the same model (tensor names,
//! shapes, dtype, metadata), so burn loads what this writes and the other way
//! round (`sebulba_core::weights::flat`'s tests); going through burn's tensors
//! instead cost a local run about a tenth of its CPU (an element-by-element
//! copy of every tensor at each publish and at each actor's and the
//! evaluator's load).

use crate::net::Layout;
use crate::tensors::{ParamTensor, param_tensors};
use crate::{Arch, ObsNorm, WeightsError};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::HashMap;

/// Where one tensor lives: in the parameter vector, or the normaliser.
#[derive(Clone, Debug, PartialEq)]
enum Source {
    Param(ParamTensor),
    Mean,
    Var,
}

/// Every tensor of the model: burn's name, its shape and where it lives.
fn tensors(layout: &Layout, obs_norm: bool) -> Vec<(String, Vec<usize>, Source)> {
    let mut out: Vec<_> = param_tensors(layout)
        .into_iter()
        .map(|t| (t.name.clone(), t.shape.clone(), Source::Param(t)))
        .collect();
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

/// The safetensors file of the network `arch` with parameters `params` (in
/// [`Layout`] order) and, when the network normalises observations, `norm`;
/// `metadata` joins burn's own keys. Non-finite values are refused, naming
/// the tensor.
pub fn write(
    arch: &Arch,
    params: &[f32],
    norm: Option<&ObsNorm>,
    metadata: &[(&str, String)],
) -> Result<Vec<u8>, WeightsError> {
    let store = |e: String| WeightsError::Store(e);
    let layout = &Layout::new(arch);
    if params.len() != layout.len {
        return Err(store(format!(
            "{} parameters for a layout of {}",
            params.len(),
            layout.len
        )));
    }
    let list = tensors(layout, arch.obs_norm);
    let stats = match (arch.obs_norm, norm) {
        (true, Some(s)) if s.mean().len() == layout.obs_dim && s.var().len() == layout.obs_dim => {
            Some(s)
        }
        (true, _) => return Err(store("the observation statistics do not fit".into())),
        (false, _) => None,
    };
    let mut bytes = Vec::with_capacity(list.len());
    for (name, _, source) in &list {
        let values = match (source, stats) {
            (Source::Param(t), _) => &t.gather(params),
            (Source::Mean, Some(s)) => s.mean(),
            (Source::Var, Some(s)) => s.var(),
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
    let mut keys = HashMap::from([
        ("format".to_string(), "safetensors".to_string()),
        ("producer".to_string(), "burn".to_string()),
        ("version".to_string(), "0.21.0".to_string()),
    ]);
    keys.extend(metadata.iter().map(|(k, v)| (k.to_string(), v.clone())));
    safetensors::serialize(views, Some(keys)).map_err(|e| store(e.to_string()))
}

/// The parameters (in [`Layout`] order) and the normaliser in `bytes`, a
/// file of the network `arch`. Every tensor must be there with its shape, as
/// f32, finite, and nothing else may be: the same checks as loading into a
/// burn model.
pub fn read(arch: &Arch, bytes: &[u8]) -> Result<(Vec<f32>, Option<ObsNorm>), WeightsError> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| WeightsError::Store(e.to_string()))?;
    let layout = &Layout::new(arch);
    let list = tensors(layout, arch.obs_norm);
    if file.len() != list.len() {
        let expected: Vec<&str> = list.iter().map(|t| t.0.as_str()).collect();
        return Err(WeightsError::Mismatch(format!(
            "{} tensors, the model has {}: {expected:?}",
            file.len(),
            list.len()
        )));
    }
    // Every tensor's name, dtype and shape first: the file's own sizes then
    // bound what is allocated, and a network description (a peer's, or a
    // file's own metadata) naming a far larger network is refused before
    // its parameters are.
    let mut views = Vec::with_capacity(list.len());
    for (name, shape, _) in &list {
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
        views.push(t);
    }
    let mut params = vec![0.0f32; layout.len];
    let mut stats = arch
        .obs_norm
        .then(|| (vec![0.0f32; layout.obs_dim], vec![0.0f32; layout.obs_dim]));
    for ((name, _, source), t) in list.iter().zip(&views) {
        let values: Vec<f32> = t
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if values.iter().any(|v| !v.is_finite()) {
            return Err(WeightsError::NonFinite(name.clone()));
        }
        match (source, stats.as_mut()) {
            (Source::Param(p), _) => p.scatter(&values, &mut params),
            (Source::Mean, Some(s)) => s.0.copy_from_slice(&values),
            (Source::Var, Some(s)) => s.1.copy_from_slice(&values),
            _ => unreachable!("statistics are listed only when present"),
        }
    }
    let norm = stats.map(|(mean, var)| ObsNorm::new(mean, var, arch.obs_clip));
    Ok((params, norm))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Activation;

    fn arch(obs_norm: bool) -> Arch {
        Arch {
            obs_dim: 3,
            head_dim: 2,
            image: None,
            torso: crate::torso_blocks(&[], &[], &[4], None),
            shared_torso: false,
            activation: Activation::Tanh,
            obs_norm,
            obs_clip: 5.0,
            input_scale: 1.0,
        }
    }

    /// What is written reads back bit for bit, with burn's names and shapes
    /// and the caller's metadata; a file of another network is refused.
    #[test]
    fn a_file_reads_back_what_was_written() {
        let a = arch(true);
        let n = Layout::new(&a).len;
        // actor 3x4+4, critic 3x4+4, policy 4x2+2, value 4x1+1.
        assert_eq!(n, 16 + 16 + 10 + 5);
        let params: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 3.0).collect();
        let norm = ObsNorm::new(vec![0.5, -1.0, 2.0], vec![1.0, 4.0, 0.25], 5.0);
        let meta = [("sebulba.note", "x".to_string())];
        let bytes = write(&a, &params, Some(&norm), &meta).unwrap();
        let (p, back) = read(&a, &bytes).unwrap();
        assert_eq!(p, params);
        assert_eq!(back, Some(norm));
        let file = SafeTensors::deserialize(&bytes).unwrap();
        let w = file.tensor("critic.layers.0.weight").unwrap();
        assert_eq!(w.shape(), [3, 4]);
        let first = f32::from_le_bytes(w.data()[..4].try_into().unwrap());
        assert_eq!(
            first, params[16],
            "the critic's weight follows the actor's layer"
        );
        let (_, m) = SafeTensors::read_metadata(&bytes).unwrap();
        let m = m.metadata().clone().unwrap();
        assert_eq!(m.get("sebulba.note").map(String::as_str), Some("x"));
        assert_eq!(m.get("producer").map(String::as_str), Some("burn"));
        let e = read(&arch(false), &bytes).unwrap_err();
        assert!(matches!(e, WeightsError::Mismatch(_)), "{e}");
    }

    /// A description naming a network of billions of parameters with the
    /// file's tensor names is refused by the values the file holds, before
    /// anything of that size is allocated.
    #[test]
    fn a_far_larger_network_is_refused_before_its_parameters_are_allocated() {
        let a = arch(false);
        let params = vec![0.5; Layout::new(&a).len];
        let bytes = write(&a, &params, None, &[]).unwrap();
        let huge = Arch {
            torso: crate::torso_blocks(&[], &[], &[1 << 30], None),
            ..a
        };
        let e = read(&huge, &bytes).unwrap_err();
        assert!(
            matches!(&e, WeightsError::Mismatch(m) if m.contains("the model has F32 [3, 1073741824]")),
            "{e}"
        );
    }
}
