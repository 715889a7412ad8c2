//! `--format onnx`: `policy.onnx`, the network as one ONNX graph that
//! onnxruntime (or any runtime of opset 17) runs without sebulba. Inputs:
//! `obs` `[batch, obs_dim]` as the env gives it and, for a network with a
//! recurrent core, `state` `[batch, state_width]`; outputs: `head` (the
//! policy head's raw output), `value` `[batch]` and `state_out`. The graph
//! does what sebulba's forward pass does, from the observation normaliser
//! or input scale to the heads, with the tensors in PyTorch's layouts
//! ([`super::tensors`]); `check_onnx.py` runs it on the check.

mod graph;
mod proto;

use super::tensors::Tensor;
use super::{Written, check};
use anyhow::{Context, anyhow};
use graph::{Dim, Graph, int, ints};
use sebulba_fused::{Activation, Arch, Block, Cell, FusedPolicy, OBS_NORM_EPS};

/// The script that runs `policy.onnx` on the check, shipped in the binary.
const CHECK: &str = include_str!("check_onnx.py");

pub fn files(
    arch: &Arch,
    policy: &FusedPolicy,
    tensors: &[Tensor],
) -> anyhow::Result<Vec<Written>> {
    Ok(vec![
        Written {
            name: "policy.onnx",
            bytes: model(arch, tensors)?,
            what: format!("the network, ONNX opset {}", graph::OPSET),
        },
        Written {
            name: "check_onnx.py",
            bytes: CHECK.as_bytes().to_vec(),
            what: "runs policy.onnx on the check (onnxruntime, numpy)".into(),
        },
        check::written(arch, policy)?,
    ])
}

/// The published tensors by name, for the graph to take as it goes.
struct Weights<'a>(&'a [Tensor]);

impl Weights<'_> {
    fn get(&self, name: &str) -> anyhow::Result<&Tensor> {
        self.0
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| anyhow!("the weights have no `{name}`"))
    }

    /// The tensor `name` as an initializer of the same name and shape.
    fn put(&self, g: &mut Graph, name: &str) -> anyhow::Result<String> {
        let t = self.get(name)?;
        Ok(g.weight(name, &t.shape, &t.values))
    }
}

fn model(arch: &Arch, tensors: &[Tensor]) -> anyhow::Result<Vec<u8>> {
    let w = Weights(tensors);
    let mut g = Graph::default();
    let width = arch.state_width();
    g.input("obs", &[Dim::Batch, Dim::Fixed(arch.obs_dim)]);
    if width > 0 {
        g.input("state", &[Dim::Batch, Dim::Fixed(width)]);
    }
    let x = input(&mut g, arch, &w)?;
    let mut states = Vec::new();
    let mut at = 0;
    let ha = torso(&mut g, &w, arch, ("actor", &x), (&mut at, &mut states))?;
    let hv = match arch.shared_torso {
        true => ha.clone(),
        false => torso(&mut g, &w, arch, ("critic", &x), (&mut at, &mut states))?,
    };
    let head = dense(&mut g, &w, "policy_head", &ha)?;
    g.output(&head, "head", &[Dim::Batch, Dim::Fixed(arch.head_dim)]);
    let value = dense(&mut g, &w, "value_head", &hv)?;
    let axis = g.ints("axis", &[1]);
    let value = g.op("Squeeze", &[&value, &axis], vec![]);
    g.output(&value, "value", &[Dim::Batch]);
    if width > 0 {
        let refs: Vec<&str> = states.iter().map(String::as_str).collect();
        let state = g.op("Concat", &refs, vec![int("axis", 1)]);
        g.output(&state, "state_out", &[Dim::Batch, Dim::Fixed(width)]);
    }
    Ok(g.encode("a sebulba policy: head, value and state_out for obs (and state)"))
}

/// The observation as the first block reads it: normalised (or scaled),
/// and an image turned from `[H, W, C]` rows into NCHW.
fn input(g: &mut Graph, arch: &Arch, w: &Weights<'_>) -> anyhow::Result<String> {
    let mut x = "obs".to_string();
    if arch.obs_norm {
        let mean = w.put(g, "obs_norm.mean")?;
        let var = &w.get("obs_norm.var")?.values;
        // As sebulba computes it: sqrt(var + eps) in f32.
        let std: Vec<f32> = var
            .iter()
            .map(|&v| (v + OBS_NORM_EPS as f32).sqrt())
            .collect();
        let std = g.weight("obs_norm.std", &[std.len()], &std);
        let clip = arch.obs_clip as f32;
        let (lo, hi) = (g.scalar("clip_min", -clip), g.scalar("clip_max", clip));
        x = g.op("Sub", &[&x, &mean], vec![]);
        x = g.op("Div", &[&x, &std], vec![]);
        x = g.op("Clip", &[&x, &lo, &hi], vec![]);
    } else if arch.input_scale != 1.0 {
        let scale = g.scalar("input_scale", arch.input_scale);
        x = g.op("Mul", &[&x, &scale], vec![]);
    }
    if let Some([h, wd, c]) = arch.image {
        let shape = g.ints("image", &[-1, h as i64, wd as i64, c as i64]);
        x = g.op("Reshape", &[&x, &shape], vec![]);
        x = g.op("Transpose", &[&x], vec![ints("perm", &[0, 3, 1, 2])]);
    }
    Ok(x)
}

/// One torso's blocks from `x`: its output rows. A recurrent core reads
/// its state from `state` at `at` (moved past it) and pushes what it
/// carries to `states`.
fn torso(
    g: &mut Graph,
    w: &Weights<'_>,
    arch: &Arch,
    (name, x): (&str, &str),
    (at, states): (&mut usize, &mut Vec<String>),
) -> anyhow::Result<String> {
    let act = match arch.activation {
        Activation::Tanh => "Tanh",
        Activation::Relu => "Relu",
    };
    let mut x = x.to_string();
    let mut image = arch.image.is_some();
    let (mut conv, mut res, mut layers, mut cores) = (0, 0, 0, 0);
    for b in &arch.torso {
        x = match *b {
            Block::Conv { layer, activate } => {
                let k = layer.kernel as i64;
                let attributes = vec![
                    ints("kernel_shape", &[k, k]),
                    ints("strides", &[layer.stride as i64; 2]),
                    ints("pads", &[layer.padding as i64; 4]),
                ];
                let prefix = format!("{name}.conv.{conv}");
                conv += 1;
                let y = conv2d(g, w, &prefix, &x, attributes)?;
                if activate {
                    g.op(act, &[&y], vec![])
                } else {
                    y
                }
            }
            Block::MaxPool {
                kernel,
                stride,
                padding,
            } => {
                let attributes = vec![
                    ints("kernel_shape", &[kernel as i64; 2]),
                    ints("strides", &[stride as i64; 2]),
                    ints("pads", &[padding as i64; 4]),
                ];
                g.op("MaxPool", &[&x], attributes)
            }
            Block::Residual => {
                let prefix = format!("{name}.res.{res}");
                res += 1;
                residual(g, w, &prefix, &x, act)?
            }
            Block::Activate => g.op(act, &[&x], vec![]),
            Block::Dense { .. } => {
                let flat = flatten(g, &x, &mut image);
                let y = dense(g, w, &format!("{name}.layers.{layers}"), &flat)?;
                layers += 1;
                g.op(act, &[&y], vec![])
            }
            Block::Recurrent(core) => {
                let flat = flatten(g, &x, &mut image);
                let prefix = format!("{name}.core.{cores}");
                cores += 1;
                let (h, carried) = recurrent(g, w, &prefix, &flat, (core.cell, core.size), *at)?;
                *at += b.state_width();
                states.extend(carried);
                h
            }
        };
    }
    Ok(flatten(g, &x, &mut image))
}

/// `x` as rows: an image flattened channels first, as PyTorch's `flatten`.
fn flatten(g: &mut Graph, x: &str, image: &mut bool) -> String {
    if !std::mem::replace(image, false) {
        return x.to_string();
    }
    g.op("Flatten", &[x], vec![int("axis", 1)])
}

/// `x Wᵀ + b` with `nn.Linear`'s `[d_out, d_in]` weight.
fn dense(g: &mut Graph, w: &Weights<'_>, prefix: &str, x: &str) -> anyhow::Result<String> {
    let weight = w.put(g, &format!("{prefix}.weight"))?;
    let bias = w.put(g, &format!("{prefix}.bias"))?;
    Ok(g.op("Gemm", &[x, &weight, &bias], vec![int("transB", 1)]))
}

fn conv2d(
    g: &mut Graph,
    w: &Weights<'_>,
    prefix: &str,
    x: &str,
    attributes: Vec<proto::AttributeProto>,
) -> anyhow::Result<String> {
    let weight = w.put(g, &format!("{prefix}.weight"))?;
    let bias = w.put(g, &format!("{prefix}.bias"))?;
    Ok(g.op("Conv", &[x, &weight, &bias], attributes))
}

/// `x + conv1(act(conv0(act(x))))`, both 3x3 with padding 1.
fn residual(
    g: &mut Graph,
    w: &Weights<'_>,
    prefix: &str,
    x: &str,
    act: &str,
) -> anyhow::Result<String> {
    let same = || vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])];
    let y = g.op(act, &[x], vec![]);
    let y = conv2d(g, w, &format!("{prefix}.conv0"), &y, same())?;
    let y = g.op(act, &[&y], vec![]);
    let y = conv2d(g, w, &format!("{prefix}.conv1"), &y, same())?;
    Ok(g.op("Add", &[x, &y], vec![]))
}

/// One step of an LSTM or GRU core over the rows `x`, from the state's
/// floats at `at` (`h`, then an LSTM's `c`): its output `h` and what it
/// carries to the next step, in the state's order.
fn recurrent(
    g: &mut Graph,
    w: &Weights<'_>,
    prefix: &str,
    x: &str,
    (cell, size): (Cell, usize),
    at: usize,
) -> anyhow::Result<(String, Vec<String>)> {
    // ONNX orders the gates i, o, f, c (LSTM) and z, r, h (GRU), PyTorch
    // i, f, g, o and r, z, n: PyTorch's gate blocks in ONNX's order.
    let (order, op): (&[usize], _) = match cell {
        Cell::Lstm => (&[0, 3, 1, 2], "LSTM"),
        Cell::Gru => (&[1, 0, 2], "GRU"),
    };
    let gates = |name: &str| -> anyhow::Result<Vec<f32>> {
        let t = w.get(&format!("{prefix}.{name}"))?;
        let block = t.values.len() / order.len();
        Ok(order
            .iter()
            .flat_map(|&k| t.values[k * block..(k + 1) * block].iter().copied())
            .collect())
    };
    let gw = order.len() * size;
    let d_in = w.get(&format!("{prefix}.weight_ih_l0"))?.shape[1];
    let wx = g.weight(
        &format!("{prefix}.W"),
        &[1, gw, d_in],
        &gates("weight_ih_l0")?,
    );
    let wh = g.weight(
        &format!("{prefix}.R"),
        &[1, gw, size],
        &gates("weight_hh_l0")?,
    );
    let bias = [gates("bias_ih_l0")?, gates("bias_hh_l0")?].concat();
    let b = g.weight(&format!("{prefix}.B"), &[1, 2 * gw], &bias);
    let axis0 = g.ints("axis", &[0]);
    let seq = g.op("Unsqueeze", &[x, &axis0], vec![]);
    let mut from_state = |offset: usize| {
        let (lo, hi) = (at + offset, at + offset + size);
        let starts = g.ints("start", &[lo as i64]);
        let ends = g.ints("end", &[hi as i64]);
        let axis1 = g.ints("axis", &[1]);
        let part = g.op("Slice", &["state", &starts, &ends, &axis1], vec![]);
        g.op("Unsqueeze", &[&part, &axis0], vec![])
    };
    let h0 = from_state(0);
    let mut inputs = vec![
        seq.as_str(),
        wx.as_str(),
        wh.as_str(),
        b.as_str(),
        "",
        h0.as_str(),
    ];
    let c0 = (cell == Cell::Lstm).then(|| from_state(size));
    inputs.extend(c0.as_deref());
    let mut attributes = vec![int("hidden_size", size as i64)];
    if cell == Cell::Gru {
        // PyTorch's GRU applies the reset gate after the recurrent product.
        attributes.push(int("linear_before_reset", 1));
    }
    let outs = g.outputs(&op.to_lowercase(), 1 + cell.carried());
    let mut names: Vec<&str> = vec![""];
    names.extend(outs[1..].iter().map(String::as_str));
    g.node(op, &inputs, attributes, &names);
    let carried: Vec<String> = outs[1..]
        .iter()
        .map(|o| g.op("Squeeze", &[o, &axis0], vec![]))
        .collect();
    let h = carried.first().cloned().context("a core carries h")?;
    Ok((h, carried))
}
