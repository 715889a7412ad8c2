//! `check.safetensors`, which every format carries: observations for a few
//! steps of a few envs and the fused forward pass's outputs for them, so
//! that an export checks itself where it is used (`sebulba_policy.py`,
//! `check_onnx.py`).

use super::Written;
use super::tensors::{Tensor, safetensors_file};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_fused::{Arch, FusedPolicy};

/// Steps and envs of the check: enough steps for a recurrent core's state
/// to matter, an episode starting in the middle of one env's.
pub const STEPS: usize = 5;
pub const ENVS: usize = 3;

/// `check.safetensors` as every format writes it ([`file`]).
pub fn written(arch: &Arch, policy: &FusedPolicy) -> anyhow::Result<Written> {
    Ok(Written {
        name: "check.safetensors",
        bytes: file(arch, policy)?,
        what: format!("sebulba's outputs for {STEPS} steps of {ENVS} envs"),
    })
}

/// Observations for [`STEPS`] steps of [`ENVS`] envs (an env's bytes where
/// the network scales its input, values around zero otherwise), where
/// episodes start (`starts`, 1 or 0), and the policy-head outputs (`head`)
/// and values (`value`) of `policy`, each env's state carried from step to
/// step, as a safetensors file.
pub fn file(arch: &Arch, policy: &FusedPolicy) -> anyhow::Result<Vec<u8>> {
    let d = arch.obs_dim;
    let mut rng = StdRng::seed_from_u64(7);
    let bytes_in = !arch.obs_norm && arch.input_scale != 1.0;
    let obs: Vec<f32> = (0..STEPS * ENVS * d)
        .map(|_| match bytes_in {
            true => f32::from(rng.random::<u8>()),
            false => rng.random_range(-2.0..2.0),
        })
        .collect();
    // Every env starts at the first step; env 1 again at step 3.
    let starts: Vec<f32> = (0..STEPS * ENVS)
        .map(|i| f32::from(i < ENVS || i == 3 * ENVS + 1))
        .collect();
    let mut state = policy.state(ENVS);
    let (mut heads, mut values) = (Vec::new(), Vec::new());
    for t in 0..STEPS {
        state.reset_ended(starts[t * ENVS..(t + 1) * ENVS].iter().map(|&s| s > 0.0));
        let step = &obs[t * ENVS * d..(t + 1) * ENVS * d];
        let (head, value) = policy.step_evaluated(step, &mut state);
        heads.extend(head);
        values.extend(value);
    }
    let tensor = |name: &str, shape: Vec<usize>, values: Vec<f32>| Tensor {
        name: name.into(),
        shape,
        values,
    };
    safetensors_file(
        &[
            tensor("obs", vec![STEPS, ENVS, d], obs),
            tensor("starts", vec![STEPS, ENVS], starts),
            tensor("head", vec![STEPS, ENVS, arch.head_dim], heads),
            tensor("value", vec![STEPS, ENVS], values),
        ],
        None,
    )
}
