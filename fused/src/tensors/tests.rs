//! The tensor list against orders written out by hand.

use super::*;
use crate::{Activation, Arch, ConvLayer};

fn arch(conv: Vec<ConvLayer>, hidden: Vec<usize>, shared_torso: bool) -> Arch {
    Arch {
        obs_dim: 5 * 6 * 2,
        head_dim: 3,
        image: Some([5, 6, 2]),
        torso: crate::torso_blocks(&conv, &[], &hidden, None),
        shared_torso,
        activation: Activation::Relu,
        obs_norm: false,
        obs_clip: 10.0,
        input_scale: 1.0,
    }
}

fn layer(channels: usize, kernel: usize, stride: usize, padding: usize) -> ConvLayer {
    ConvLayer {
        channels,
        kernel,
        stride,
        padding,
    }
}

/// Every float of the flat vector belongs to exactly one tensor, the
/// tensors come in layout order, and each scatter undoes its gather.
#[test]
fn the_tensors_cover_the_vector_once_and_convert_both_ways() {
    for (conv, hidden, shared) in [
        (vec![layer(4, 3, 1, 0), layer(3, 2, 2, 1)], vec![7], false),
        (vec![layer(4, 3, 1, 1)], vec![], true),
        (vec![], vec![4, 5], false),
    ] {
        let layout = Layout::new(&arch(conv, hidden, shared));
        let list = param_tensors(&layout);
        let mut seen = vec![0u8; layout.len];
        let mut at = 0;
        for t in &list {
            assert_eq!(t.at, at, "{} follows the previous tensor", t.name);
            at += t.len();
            seen[t.at..t.at + t.len()].iter_mut().for_each(|s| *s += 1);
        }
        assert!(seen.iter().all(|&s| s == 1));
        let flat: Vec<f32> = (0..layout.len).map(|i| i as f32).collect();
        let mut back = vec![0.0; layout.len];
        for t in &list {
            t.scatter(&t.gather(&flat), &mut back);
        }
        assert_eq!(back, flat);
    }
}

/// Names and shapes as burn's model holds them; the dense layer after the
/// stem reads its input channels first: row `(ch, y, x)` of burn's weight is
/// our row `(y, x, ch)`.
#[test]
fn names_shapes_and_the_flattened_order() {
    let layout = Layout::new(&arch(vec![layer(4, 3, 1, 0)], vec![7], true));
    let list = param_tensors(&layout);
    let names: Vec<(&str, &[usize])> = list
        .iter()
        .map(|t| (t.name.as_str(), t.shape.as_slice()))
        .collect();
    // The stem's output: 3x4 pixels of 4 channels.
    assert_eq!(
        names,
        [
            ("actor.conv.0.weight", &[4usize, 2, 3, 3][..]),
            ("actor.conv.0.bias", &[4][..]),
            ("actor.layers.0.weight", &[48, 7][..]),
            ("actor.layers.0.bias", &[7][..]),
            ("policy_head.weight", &[7, 3][..]),
            ("policy_head.bias", &[3][..]),
            ("value_head.weight", &[7, 1][..]),
            ("value_head.bias", &[1][..]),
        ]
    );
    let dense = &list[2];
    let flat: Vec<f32> = (0..layout.len).map(|i| i as f32).collect();
    let burn = dense.gather(&flat);
    let (h, w, c, d_out) = (3, 4, 4, 7);
    for ch in 0..c {
        for y in 0..h {
            for x in 0..w {
                for j in 0..d_out {
                    let theirs = ((ch * h + y) * w + x) * d_out + j;
                    let ours = ((y * w + x) * c + ch) * d_out + j;
                    assert_eq!(burn[theirs], flat[dense.at + ours]);
                }
            }
        }
    }
    // A stem straight into the heads: their weights are reordered instead.
    let layout = Layout::new(&arch(vec![layer(4, 3, 1, 0)], vec![], false));
    let list = param_tensors(&layout);
    let heads: Vec<_> = list
        .iter()
        .filter(|t| t.name.ends_with("head.weight"))
        .collect();
    assert!(
        heads
            .iter()
            .all(|t| matches!(t.order, Order::Flattened { .. }))
    );
}

/// The policy head's weight is ours an action per row: burn's `(i, a)` is
/// our `(a, i)`, and its rows follow the stem's `[h, w, c]` when it reads
/// the stem directly; the value head's is as burn's (or only flattened).
#[test]
fn the_policy_heads_weight_is_an_action_per_row() {
    let flat_of = |layout: &Layout| (0..layout.len).map(|i| i as f32).collect::<Vec<f32>>();
    let layout = Layout::new(&arch(vec![], vec![4, 5], false));
    let list = param_tensors(&layout);
    let head = list
        .iter()
        .find(|t| t.name == "policy_head.weight")
        .expect("a policy head");
    assert_eq!(head.shape, [5, 3]);
    let flat = flat_of(&layout);
    let burn = head.gather(&flat);
    for i in 0..5 {
        for a in 0..3 {
            assert_eq!(burn[i * 3 + a], flat[head.at + a * 5 + i]);
        }
    }
    let value = list.iter().find(|t| t.name == "value_head.weight");
    assert_eq!(value.map(|t| t.order), Some(Order::Plain));
    // A stem (3x4 pixels of 4 channels) straight into the heads.
    let layout = Layout::new(&arch(vec![layer(4, 3, 1, 0)], vec![], false));
    let list = param_tensors(&layout);
    let head = list
        .iter()
        .find(|t| t.name == "policy_head.weight")
        .expect("a policy head");
    let flat = flat_of(&layout);
    let burn = head.gather(&flat);
    let (h, w, c, d_in) = (3, 4, 4, 48);
    for ch in 0..c {
        for y in 0..h {
            for x in 0..w {
                for a in 0..3 {
                    let theirs = ((ch * h + y) * w + x) * 3 + a;
                    let ours = a * d_in + (y * w + x) * c + ch;
                    assert_eq!(burn[theirs], flat[head.at + ours]);
                }
            }
        }
    }
}

/// An IMPALA torso's tensors: each stack's convolution among the
/// convolutions, each residual block's two, the dense layer reading the
/// last stack's image flattened; max-pools and the activation hold none.
#[test]
fn impala_stacks_are_named_block_by_block() {
    let stacks = [
        crate::Stack {
            channels: 4,
            blocks: 2,
        },
        crate::Stack {
            channels: 3,
            blocks: 1,
        },
    ];
    let a = Arch {
        torso: crate::torso_blocks(&[], &stacks, &[7], None),
        ..arch(vec![], vec![], true)
    };
    let layout = Layout::new(&a);
    let list = param_tensors(&layout);
    let names: Vec<(&str, &[usize])> = list
        .iter()
        .map(|t| (t.name.as_str(), t.shape.as_slice()))
        .collect();
    // 5x6 -> pooled 3x3 -> pooled 2x2, 3 channels: 12 inputs to the dense layer.
    assert_eq!(
        names,
        [
            ("actor.conv.0.weight", &[4usize, 2, 3, 3][..]),
            ("actor.conv.0.bias", &[4][..]),
            ("actor.res.0.conv0.weight", &[4, 4, 3, 3][..]),
            ("actor.res.0.conv0.bias", &[4][..]),
            ("actor.res.0.conv1.weight", &[4, 4, 3, 3][..]),
            ("actor.res.0.conv1.bias", &[4][..]),
            ("actor.res.1.conv0.weight", &[4, 4, 3, 3][..]),
            ("actor.res.1.conv0.bias", &[4][..]),
            ("actor.res.1.conv1.weight", &[4, 4, 3, 3][..]),
            ("actor.res.1.conv1.bias", &[4][..]),
            ("actor.conv.1.weight", &[3, 4, 3, 3][..]),
            ("actor.conv.1.bias", &[3][..]),
            ("actor.res.2.conv0.weight", &[3, 3, 3, 3][..]),
            ("actor.res.2.conv0.bias", &[3][..]),
            ("actor.res.2.conv1.weight", &[3, 3, 3, 3][..]),
            ("actor.res.2.conv1.bias", &[3][..]),
            ("actor.layers.0.weight", &[12, 7][..]),
            ("actor.layers.0.bias", &[7][..]),
            ("policy_head.weight", &[7, 3][..]),
            ("policy_head.bias", &[3][..]),
            ("value_head.weight", &[7, 1][..]),
            ("value_head.bias", &[1][..]),
        ]
    );
    let dense = list.iter().find(|t| t.name == "actor.layers.0.weight");
    assert_eq!(
        dense.map(|t| t.order),
        Some(Order::Flattened {
            h: 2,
            w: 2,
            c: 3,
            d_out: 7,
            transposed: false
        })
    );
    // Every float once, in layout order.
    let at: usize = list.iter().map(ParamTensor::len).sum();
    assert_eq!(at, layout.len);
}
