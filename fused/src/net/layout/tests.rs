//! The work a network's products do, against counts worked out by hand.

use super::*;
use crate::arch::{Cell, ConvLayer, Core};
use crate::torso_blocks;

fn layer(channels: usize, kernel: usize, stride: usize, padding: usize) -> ConvLayer {
    ConvLayer {
        channels,
        kernel,
        stride,
        padding,
    }
}

fn arch(image: [usize; 3], torso: Vec<crate::arch::Block>, heads: usize, shared: bool) -> Arch {
    Arch {
        obs_dim: image.iter().product(),
        head_dim: heads,
        image: (image[0] > 1).then_some(image),
        torso,
        shared_torso: shared,
        activation: Activation::Relu,
        obs_norm: false,
        obs_clip: 10.0,
        input_scale: 1.0,
    }
}

/// A 5x6x2 image through a 3x3 convolution to 4 channels (3x4 windows of
/// 18 floats), a dense layer of 7, heads of 3 and 1, two torsos.
#[test]
fn a_small_conv_net_counts_every_product() {
    let torso = torso_blocks(&[layer(4, 3, 1, 0)], &[], &[7], None);
    let layout = Layout::new(&arch([5, 6, 2], torso, 3, false));
    let conv = 12 * 18 * 4;
    let dense = 48 * 7;
    let heads = 7 * 3 + 7;
    assert_eq!(layout.forward_macs(), 2 * (conv + dense) + heads);
    // The forward products, then each again for the weights and, but for
    // each torso's convolution, for the input: 2 * (3 * 2428 - 2 * 864).
    assert_eq!(layout.gradient_flops(), 11_112);
}

/// The Nature CNN on 84x84x4, one torso, 6 actions: 20x20, 9x9 and 7x7
/// windows, then 3,136 inputs to 512.
#[test]
fn the_nature_cnn_does_49_5_mflop_a_sample() {
    let conv = [layer(32, 8, 4, 0), layer(64, 4, 2, 0), layer(64, 3, 1, 0)];
    let torso = torso_blocks(&conv, &[], &[512], None);
    let layout = Layout::new(&arch([84, 84, 4], torso, 6, true));
    let forward = 400 * 256 * 32 + 81 * 512 * 64 + 49 * 576 * 64 + 3136 * 512 + 512 * 7;
    assert_eq!(forward, 9_346_560);
    assert_eq!(layout.forward_macs(), forward);
    assert_eq!(layout.gradient_flops(), 2 * (3 * forward - 400 * 256 * 32));
}

/// The IMPALA ResNet's stacks count their convolutions, residual ones
/// included; pools and activations do no products.
#[test]
fn impala_stacks_count_their_convolutions() {
    let stacks = [16, 32, 32].map(|channels| crate::arch::Stack {
        channels,
        blocks: 2,
    });
    let torso = torso_blocks(&[], &stacks, &[256], None);
    let layout = Layout::new(&arch([84, 84, 4], torso, 6, true));
    let stack16 = 84 * 84 * 36 * 16 + 4 * (42 * 42 * 144 * 16);
    let stack32 = 42 * 42 * 144 * 32 + 4 * (21 * 21 * 288 * 32);
    let stack32b = 21 * 21 * 288 * 32 + 4 * (11 * 11 * 288 * 32);
    let dense = 11 * 11 * 32 * 256;
    let forward = stack16 + stack32 + stack32b + dense + 256 * 7;
    assert_eq!(layout.forward_macs(), forward);
    assert_eq!(
        layout.gradient_flops(),
        2 * (3 * forward - 84 * 84 * 36 * 16)
    );
}

/// A recurrent core's products: its input's and its hidden state's, every
/// gate.
#[test]
fn a_core_counts_both_of_its_products() {
    for (cell, gates) in [(Cell::Lstm, 4), (Cell::Gru, 3)] {
        let core = Core { cell, size: 128 };
        let torso = torso_blocks(&[], &[], &[64], Some(core));
        let layout = Layout::new(&arch([1, 1, 4], torso, 2, true));
        let forward = 4 * 64 + (64 + 128) * gates * 128 + 128 * 3;
        assert_eq!(layout.forward_macs(), forward, "{cell:?}");
        assert_eq!(layout.gradient_flops(), 2 * (3 * forward - 4 * 64));
    }
}
