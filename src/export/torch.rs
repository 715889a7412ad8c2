//! `--format torch`: the weights in PyTorch's layouts, the network as data
//! and a module that builds it (`sebulba_policy.py`), so that `import
//! sebulba_policy; sebulba_policy.load(dir)` gives an `nn.Module` with no
//! sebulba installed; with the check, which `python sebulba_policy.py DIR`
//! compares it against.

use super::tensors::{Tensor, safetensors_file};
use super::{Written, check};
use sebulba_core::model::ModelSpec;
use sebulba_envs::ActionSpace;
use sebulba_fused::{Arch, FusedPolicy, OBS_NORM_EPS};
use serde_json::{Value, json};
use std::collections::HashMap;

/// The module `network.json` is built by, shipped in the binary.
const MODULE: &str = include_str!("sebulba_policy.py");

/// The four files and what each holds.
pub fn files(
    spec: &ModelSpec,
    arch: &Arch,
    policy: &FusedPolicy,
    tensors: &[Tensor],
) -> anyhow::Result<Vec<Written>> {
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    Ok(vec![
        Written {
            name: "model.safetensors",
            bytes: safetensors_file(tensors, Some(metadata))?,
            what: format!(
                "{} tensors in PyTorch's layouts (load_state_dict)",
                tensors.len()
            ),
        },
        Written {
            name: "network.json",
            bytes: serde_json::to_vec_pretty(&network(spec, arch))?,
            what: "the network the module builds".into(),
        },
        Written {
            name: "sebulba_policy.py",
            bytes: MODULE.as_bytes().to_vec(),
            what: "the nn.Module (torch only)".into(),
        },
        check::written(arch, policy)?,
    ])
}

/// `network.json`: everything `sebulba_policy.py` builds the module from.
fn network(spec: &ModelSpec, arch: &Arch) -> Value {
    let action_space = match &spec.action_space {
        ActionSpace::Discrete { n } => json!({ "discrete": n }),
        ActionSpace::Box { low, high } => json!({ "box": { "low": low, "high": high } }),
    };
    json!({
        "format": "sebulba-torch/1",
        "obs_dim": arch.obs_dim,
        "image": arch.image,
        "head_dim": arch.head_dim,
        "action_space": action_space,
        "min_std": spec.network.min_std,
        "activation": arch.activation.as_str(),
        "shared_torso": arch.shared_torso,
        "obs_norm": arch.obs_norm.then(|| json!({ "clip": arch.obs_clip, "eps": OBS_NORM_EPS })),
        "input_scale": arch.input_scale,
        "torso": arch.torso,
        "state_width": arch.state_width(),
    })
}
