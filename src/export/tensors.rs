//! The published file's tensors in PyTorch's layouts, which every format
//! starts from, and safetensors files written from f32 values.
//!
//! The published file is burn's: a dense layer's weight `[d_in, d_out]`
//! where `nn.Linear` holds `[d_out, d_in]`; its convolutions and recurrent
//! cores already have `nn.Conv2d`'s and `nn.LSTM`/`nn.GRU`'s layouts and
//! names. So every 2-D tensor named `*.weight` (burn's `Linear` and
//! PyTorch's `nn.Linear` both call their matrix `weight`; a core's are
//! `weight_ih_l0`, a convolution's are 4-D) is transposed; the rest is
//! copied.

use anyhow::anyhow;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::HashMap;

/// One tensor, its values in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub values: Vec<f32>,
}

/// Every tensor of the published file `bytes` as PyTorch's modules hold
/// it, sorted by name.
pub fn torch_layout(bytes: &[u8]) -> anyhow::Result<Vec<Tensor>> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| anyhow!("{e}"))?;
    let mut out = Vec::new();
    for (name, view) in file.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(anyhow!("`{name}` is {:?}, not F32", view.dtype()));
        }
        let values: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let shape = view.shape().to_vec();
        out.push(match shape[..] {
            [d_in, d_out] if name.ends_with(".weight") => Tensor {
                name,
                shape: vec![d_out, d_in],
                values: transpose(&values, d_in, d_out),
            },
            _ => Tensor {
                name,
                shape,
                values,
            },
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// `[rows, cols]` as `[cols, rows]`.
pub fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = values[r * cols + c];
        }
    }
    out
}

/// A safetensors file of `tensors` (f32) with `metadata`.
pub fn safetensors_file(
    tensors: &[Tensor],
    metadata: Option<HashMap<String, String>>,
) -> anyhow::Result<Vec<u8>> {
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|t| t.values.iter().flat_map(|v| v.to_le_bytes()).collect())
        .collect();
    let views = tensors
        .iter()
        .zip(&bytes)
        .map(|(t, b)| {
            TensorView::new(Dtype::F32, t.shape.clone(), b)
                .map(|v| (t.name.as_str(), v))
                .map_err(|e| anyhow!("`{}`: {e}", t.name))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(safetensors::serialize(views, metadata)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sebulba_fused::{Activation, Arch, Cell, ConvLayer, Core, torso_blocks};

    #[test]
    fn transpose_moves_each_value_to_its_mirror() {
        let m: Vec<f32> = (0..6).map(|i| i as f32).collect();
        // [[0, 1, 2], [3, 4, 5]] -> [[0, 3], [1, 4], [2, 5]]
        assert_eq!(transpose(&m, 2, 3), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    }

    /// Dense weights turn into `nn.Linear`'s `[d_out, d_in]` with their
    /// values mirrored; convolutions, cores and biases keep theirs.
    #[test]
    fn only_dense_weights_are_transposed() {
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
        let before = SafeTensors::deserialize(&published).expect("before");
        let after = torch_layout(&published).expect("torch");
        assert_eq!(after.len(), before.len());
        for t in &after {
            let b = before.tensor(&t.name).expect("every tensor kept");
            let old: Vec<f32> = b
                .data()
                .chunks_exact(4)
                .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                .collect();
            if t.name.ends_with(".weight") && b.shape().len() == 2 {
                let (d_in, d_out) = (b.shape()[0], b.shape()[1]);
                assert_eq!(t.shape, [d_out, d_in], "{}", t.name);
                for (i, j) in [(0, 0), (d_in - 1, 0), (0, d_out - 1), (d_in - 1, d_out - 1)] {
                    assert_eq!(t.values[j * d_in + i], old[i * d_out + j], "{}", t.name);
                }
            } else {
                assert_eq!((&t.shape[..], &t.values), (b.shape(), &old), "{}", t.name);
            }
        }
        let shape = |name: &str| {
            let t = after.iter().find(|t| t.name == name).expect(name);
            t.shape.clone()
        };
        assert_eq!(shape("actor.layers.0.weight"), [5, 2 * 2 * 2]);
        assert_eq!(shape("actor.conv.0.weight"), [2, 1, 3, 3]);
        assert_eq!(shape("actor.core.0.weight_ih_l0"), [9, 5]);
        assert_eq!(shape("policy_head.weight"), [2, 3]);
        assert_eq!(shape("value_head.weight"), [1, 3]);
    }
}
