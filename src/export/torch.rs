//! `--format torch`: the weights in PyTorch's layouts, the network as data
//! and a module that builds it (`sebulba_policy.py`), so that `import
//! sebulba_policy; sebulba_policy.load(dir)` gives an `nn.Module` with no
//! sebulba installed; and sebulba's own outputs for a few observations
//! (`check.safetensors`), which `python sebulba_policy.py DIR` compares.
//!
//! The published file is burn's: a dense layer's weight `[d_in, d_out]`
//! where `nn.Linear` holds `[d_out, d_in]`; its convolutions and recurrent
//! cores already have `nn.Conv2d`'s and `nn.LSTM`/`nn.GRU`'s layouts and
//! names. So every 2-D tensor named `*.weight` (burn's `Linear` and
//! PyTorch's `nn.Linear` both call their matrix `weight`; a core's are
//! `weight_ih_l0`, a convolution's are 4-D) is transposed; the rest is
//! copied.

use anyhow::{Context, anyhow};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use sebulba_core::model::ModelSpec;
use sebulba_envs::ActionSpace;
use sebulba_fused::{Arch, FusedPolicy, OBS_NORM_EPS};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;

/// The module `network.json` is built by, shipped in the binary.
const MODULE: &str = include_str!("sebulba_policy.py");

/// Steps and envs of `check.safetensors`: enough steps for a recurrent
/// core's state to matter, an episode starting in the middle of one env's.
const CHECK_STEPS: usize = 5;
const CHECK_ENVS: usize = 3;

/// Writes the four files into `out`; what each holds, for the summary.
pub fn write(
    out: &Path,
    spec: &ModelSpec,
    bytes: &[u8],
) -> anyhow::Result<Vec<(&'static str, String)>> {
    let arch = spec.arch();
    let policy = FusedPolicy::from_safetensors(&arch, bytes)
        .map_err(|e| anyhow!("the weights do not fit their network: {e}"))?;
    let (state_dict, tensors) = torch_tensors(bytes)?;
    let files = [
        ("model.safetensors", state_dict),
        (
            "network.json",
            serde_json::to_vec_pretty(&network(spec, &arch))?,
        ),
        ("sebulba_policy.py", MODULE.as_bytes().to_vec()),
        ("check.safetensors", check(&arch, &policy)?),
    ];
    for (name, data) in &files {
        let path = out.join(name);
        std::fs::write(&path, data).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(vec![
        (
            "model.safetensors",
            format!("{tensors} tensors in PyTorch's layouts (load_state_dict)"),
        ),
        ("network.json", "the network the module builds".into()),
        ("sebulba_policy.py", "the nn.Module (torch only)".into()),
        (
            "check.safetensors",
            format!("sebulba's outputs for {CHECK_STEPS} steps of {CHECK_ENVS} envs"),
        ),
    ])
}

/// The published file's tensors as PyTorch's modules hold them, and how
/// many there are.
fn torch_tensors(bytes: &[u8]) -> anyhow::Result<(Vec<u8>, usize)> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| anyhow!("{e}"))?;
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, view) in file.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(anyhow!("`{name}` is {:?}, not F32", view.dtype()));
        }
        let shape = view.shape().to_vec();
        let data = view.data().to_vec();
        tensors.push(match shape[..] {
            [d_in, d_out] if name.ends_with(".weight") => {
                (name, vec![d_out, d_in], transpose(&data, d_in, d_out))
            }
            _ => (name, shape, data),
        });
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let views = tensors
        .iter()
        .map(|(name, shape, data)| {
            TensorView::new(Dtype::F32, shape.clone(), data)
                .map(|v| (name.as_str(), v))
                .map_err(|e| anyhow!("`{name}`: {e}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    let n = views.len();
    Ok((safetensors::serialize(views, Some(metadata))?, n))
}

/// `[rows, cols]` little-endian f32 bytes as `[cols, rows]`.
fn transpose(data: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    let mut out = vec![0u8; data.len()];
    for r in 0..rows {
        for c in 0..cols {
            let (from, to) = (4 * (r * cols + c), 4 * (c * rows + r));
            out[to..to + 4].copy_from_slice(&data[from..from + 4]);
        }
    }
    out
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

/// `check.safetensors`: observations for [`CHECK_STEPS`] steps of
/// [`CHECK_ENVS`] envs (an env's bytes where the network scales its input,
/// values around zero otherwise), where episodes start, and the fused
/// forward pass's policy-head outputs and values for them, each env's
/// state carried from step to step.
fn check(arch: &Arch, policy: &FusedPolicy) -> anyhow::Result<Vec<u8>> {
    let (steps, envs, d) = (CHECK_STEPS, CHECK_ENVS, arch.obs_dim);
    let mut rng = StdRng::seed_from_u64(7);
    let bytes_in = !arch.obs_norm && arch.input_scale != 1.0;
    let obs: Vec<f32> = (0..steps * envs * d)
        .map(|_| match bytes_in {
            true => f32::from(rng.random::<u8>()),
            false => rng.random_range(-2.0..2.0),
        })
        .collect();
    // Every env starts at the first step; env 1 again at step 3.
    let starts: Vec<f32> = (0..steps * envs)
        .map(|i| f32::from(i < envs || i == 3 * envs + 1))
        .collect();
    let mut state = policy.state(envs);
    let width = arch.state_width();
    let (mut heads, mut values) = (Vec::new(), Vec::new());
    for t in 0..steps {
        for e in 0..envs {
            if starts[t * envs + e] > 0.0 {
                state.values_mut()[e * width..(e + 1) * width].fill(0.0);
            }
        }
        let (head, value) =
            policy.step_evaluated(&obs[t * envs * d..(t + 1) * envs * d], &mut state);
        heads.extend(head);
        values.extend(value);
    }
    let le = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let data = [
        ("obs", vec![steps, envs, d], le(&obs)),
        ("starts", vec![steps, envs], le(&starts)),
        ("head", vec![steps, envs, arch.head_dim], le(&heads)),
        ("value", vec![steps, envs], le(&values)),
    ];
    let views = data
        .iter()
        .map(|(name, shape, bytes)| {
            TensorView::new(Dtype::F32, shape.clone(), bytes).map(|v| (*name, v))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(safetensors::serialize(views, None)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_moves_each_value_to_its_mirror() {
        let m: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let bytes: Vec<u8> = m.iter().flat_map(|x| x.to_le_bytes()).collect();
        let t = transpose(&bytes, 2, 3);
        let back: Vec<f32> = t
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        // [[0, 1, 2], [3, 4, 5]] -> [[0, 3], [1, 4], [2, 5]]
        assert_eq!(back, [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    }

    /// Dense weights turn into `nn.Linear`'s `[d_out, d_in]` with their
    /// values mirrored; convolutions, cores and biases keep theirs.
    #[test]
    fn only_dense_weights_are_transposed() {
        use sebulba_fused::{Activation, Cell, ConvLayer, Core, torso_blocks};
        let conv = ConvLayer {
            channels: 2,
            kernel: 3,
            stride: 1,
            padding: 0,
        };
        let core = Core {
            cell: Cell::Gru,
            size: 3,
        };
        let arch = Arch {
            obs_dim: 16,
            head_dim: 2,
            image: Some([4, 4, 1]),
            torso: torso_blocks(&[conv], &[], &[5], Some(core)),
            shared_torso: true,
            activation: Activation::Relu,
            obs_norm: false,
            obs_clip: 10.0,
            input_scale: 1.0,
        };
        let len = sebulba_fused::net::Layout::new(&arch).len;
        let params: Vec<f32> = (0..len).map(|i| i as f32 * 0.01).collect();
        let published = sebulba_fused::file::write(&arch, &params, None, &[]).expect("file");
        let (torch, n) = torch_tensors(&published).expect("torch");
        let (before, after) = (
            SafeTensors::deserialize(&published).expect("before"),
            SafeTensors::deserialize(&torch).expect("after"),
        );
        assert_eq!(n, before.len());
        let value = |t: &TensorView<'_>, i: usize| {
            let b = &t.data()[4 * i..4 * i + 4];
            f32::from_le_bytes([b[0], b[1], b[2], b[3]])
        };
        for (name, b) in before.tensors() {
            let a = after.tensor(&name).expect("every tensor kept");
            let dense = name.ends_with(".weight") && b.shape().len() == 2;
            if dense {
                let (d_in, d_out) = (b.shape()[0], b.shape()[1]);
                assert_eq!(a.shape(), [d_out, d_in], "{name}");
                for (i, j) in [(0, 0), (d_in - 1, 0), (0, d_out - 1), (d_in - 1, d_out - 1)] {
                    assert_eq!(value(&a, j * d_in + i), value(&b, i * d_out + j), "{name}");
                }
            } else {
                assert_eq!((a.shape(), a.data()), (b.shape(), b.data()), "{name}");
            }
        }
        let shape = |name: &str| after.tensor(name).expect(name).shape().to_vec();
        assert_eq!(shape("actor.layers.0.weight"), [5, 2 * 2 * 2]);
        assert_eq!(shape("actor.conv.0.weight"), [2, 1, 3, 3]);
        assert_eq!(shape("actor.core.0.weight_ih_l0"), [9, 5]);
        assert_eq!(shape("policy_head.weight"), [2, 3]);
        assert_eq!(shape("value_head.weight"), [1, 3]);
    }
}
