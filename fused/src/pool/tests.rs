//! Max-pooling against values worked out by hand, and its gradient against
//! finite differences.

use super::*;

fn pool(h: usize, w: usize, c: usize, k: usize, stride: usize, pad: usize) -> Pool {
    Pool {
        h,
        w,
        c,
        k,
        stride,
        pad,
    }
}

/// The IMPALA pool (3x3, stride 2, padding 1) on a 4x4 ramp of one channel:
/// windows centred on even pixels, clipped at the edges.
#[test]
fn the_impala_pool_by_hand() {
    let p = pool(4, 4, 1, 3, 2, 1);
    assert_eq!((p.out_h(), p.out_w()), (2, 2));
    let x: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let mut out = vec![0.0; 4];
    forward(&p, &x, 1, &mut out);
    // Window (0,0): rows 0-1, cols 0-1 -> 5; (0,1): rows 0-1, cols 1-3 -> 7;
    // (1,0): rows 1-3, cols 0-1 -> 13; (1,1): rows 1-3, cols 1-3 -> 15.
    assert_eq!(out, [5.0, 7.0, 13.0, 15.0]);
    // Negative values: the padding (-inf) never wins, where zeros would.
    let neg: Vec<f32> = x.iter().map(|v| -v - 1.0).collect();
    forward(&p, &neg, 1, &mut out);
    assert_eq!(out, [-1.0, -2.0, -5.0, -6.0]);
    // 84 -> 42 -> 21 -> 11: the IMPALA network's sizes on an Atari frame.
    let sizes: Vec<usize> = [84, 42, 21]
        .iter()
        .map(|&h| pool(h, h, 1, 3, 2, 1).out_h())
        .collect();
    assert_eq!(sizes, [42, 21, 11]);
}

/// Channels are pooled apart, and samples too.
#[test]
fn channels_and_samples_apart() {
    let p = pool(2, 2, 2, 2, 2, 0);
    // Two samples of 2x2x2: channel 0 ramps up, channel 1 down.
    let x = [
        0.0, 9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, //
        10.0, -1.0, 11.0, -2.0, 12.0, -3.0, 13.0, -4.0,
    ];
    let mut out = vec![0.0; 4];
    forward(&p, &x, 2, &mut out);
    assert_eq!(out, [3.0, 9.0, 13.0, -1.0]);
}

/// Of equal values the first in the window wins the gradient, as burn's
/// and PyTorch's scans choose it.
#[test]
fn ties_go_to_the_first() {
    let p = pool(2, 3, 1, 2, 1, 0);
    let x = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
    let dy = [1.0, 10.0];
    let mut y = vec![0.0; 2];
    forward(&p, &x, 1, &mut y);
    let mut dx = vec![0.0; 6];
    backward(&p, &x, &y, &dy, 1, &mut dx);
    assert_eq!(dx, [1.0, 10.0, 0.0, 0.0, 0.0, 0.0]);
}

/// The gradient of `Σ g ⊙ pool(x)` against central differences, on shapes
/// with padding, overlapping windows and a stride that leaves input over.
#[test]
fn the_gradient_matches_finite_differences() {
    for p in [
        pool(5, 6, 3, 3, 2, 1),
        pool(7, 5, 2, 2, 2, 0),
        pool(4, 4, 2, 3, 1, 1),
    ] {
        let m = 2;
        // Distinct values (no ties), so the loss is smooth around x.
        let x: Vec<f32> = (0..m * p.in_len())
            .map(|i| ((i * 7919 % 1009) as f32) * 0.01 - 5.0)
            .collect();
        let g: Vec<f32> = (0..m * p.out_len())
            .map(|i| ((i * 31 % 17) as f32) * 0.1 - 0.8)
            .collect();
        let loss = |x: &[f32]| {
            let mut out = vec![0.0; m * p.out_len()];
            forward(&p, x, m, &mut out);
            out.iter().zip(&g).map(|(o, g)| (o * g) as f64).sum::<f64>()
        };
        let mut y = vec![0.0; m * p.out_len()];
        forward(&p, &x, m, &mut y);
        let mut dx = vec![0.0; x.len()];
        backward(&p, &x, &y, &g, m, &mut dx);
        let eps = 1e-3;
        for i in 0..x.len() {
            let (mut a, mut b) = (x.clone(), x.clone());
            a[i] += eps;
            b[i] -= eps;
            let num = (loss(&a) - loss(&b)) / (2.0 * eps as f64);
            assert!(
                (num - dx[i] as f64).abs() < 1e-3,
                "{p:?} input {i}: {num} vs {}",
                dx[i]
            );
        }
    }
}

#[test]
fn shapes_that_do_not_fit_are_refused() {
    assert!(pool(4, 4, 1, 3, 2, 2).check().is_err(), "padding over half");
    assert!(pool(2, 2, 1, 5, 1, 1).check().is_err(), "window too large");
    assert!(pool(4, 4, 1, 3, 0, 1).check().is_err(), "zero stride");
    assert!(pool(84, 84, 16, 3, 2, 1).check().is_ok());
}
