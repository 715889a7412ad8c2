//! The convolution against a direct one written out independently (f64
//! sums over every output and tap, PyTorch's weight order, padding as
//! bounds checks): outputs, and the exact gradients of `L = Σ out · r`,
//! which is linear in each of `w`, `b` and `x`.

use super::*;
use crate::kernels::{Isa, gemm_on};

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Shapes of every kind: the Nature CNN's first layer (smaller), MinAtar's
/// VALID 3x3, padding, a stride that leaves input over, 1x1, a window as big
/// as the padded input.
fn shapes() -> Vec<Conv> {
    let conv = |h, w, c_in, c_out, k, stride, pad| Conv {
        h,
        w,
        c_in,
        c_out,
        kh: k,
        kw: k,
        stride,
        pad,
    };
    vec![
        conv(20, 20, 4, 3, 8, 4, 0),
        conv(10, 10, 4, 16, 3, 1, 0),
        conv(5, 6, 2, 3, 3, 1, 1),
        conv(9, 7, 3, 2, 3, 3, 0),
        conv(4, 4, 5, 2, 1, 1, 0),
        // The direct kernel's (on AVX2 and AVX-512): forward and back, a patch over
        // 256 floats (two slices), two panels of outputs with the way back
        // laid out, a 2x2 kernel padded by 1.
        conv(6, 5, 16, 16, 3, 1, 1),
        conv(5, 5, 32, 32, 3, 1, 1),
        conv(7, 4, 16, 48, 3, 1, 2),
        conv(5, 6, 32, 16, 2, 1, 1),
        conv(3, 3, 2, 2, 5, 2, 1),
        Conv {
            kh: 2,
            kw: 3,
            ..conv(6, 5, 2, 3, 0, 2, 1)
        },
    ]
}

/// The direct convolution and the gradients of `Σ out · r`: `(out, dw in
/// PyTorch's order, db, dx)`.
fn direct(
    c: &Conv,
    w_torch: &[f32],
    b: &[f32],
    x: &[f32],
    m: usize,
    r: &[f32],
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let (oh, ow) = (c.out_h(), c.out_w());
    let mut out = vec![0.0f64; m * oh * ow * c.c_out];
    let mut dw = vec![0.0f64; c.weights()];
    let mut db = vec![0.0f64; c.c_out];
    let mut dx = vec![0.0f64; m * c.in_len()];
    for s in 0..m {
        for oy in 0..oh {
            for ox in 0..ow {
                for co in 0..c.c_out {
                    let o = ((s * oh + oy) * ow + ox) * c.c_out + co;
                    let mut sum = b[co] as f64;
                    db[co] += r[o] as f64;
                    for ci in 0..c.c_in {
                        for ky in 0..c.kh {
                            for kx in 0..c.kw {
                                let iy = (oy * c.stride + ky) as isize - c.pad as isize;
                                let ix = (ox * c.stride + kx) as isize - c.pad as isize;
                                if iy < 0 || ix < 0 || iy >= c.h as isize || ix >= c.w as isize {
                                    continue;
                                }
                                let xi =
                                    ((s * c.h + iy as usize) * c.w + ix as usize) * c.c_in + ci;
                                let wi = ((co * c.c_in + ci) * c.kh + ky) * c.kw + kx;
                                sum += w_torch[wi] as f64 * x[xi] as f64;
                                dw[wi] += r[o] as f64 * x[xi] as f64;
                                dx[xi] += r[o] as f64 * w_torch[wi] as f64;
                            }
                        }
                    }
                    out[o] = sum;
                }
            }
        }
    }
    (out, dw, db, dx)
}

fn close(what: &str, c: &Conv, got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what} of {c:?}");
    let scale = want.iter().fold(1e-3f64, |a, &b| a.max(b.abs()));
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-5 * scale,
            "{what} of {c:?} at {i}: {g} vs {w}"
        );
    }
}

/// Every shape, whole (the default chunks) and a few samples at a time
/// (one, two with a shorter last chunk): the same output and gradients.
#[test]
fn forward_and_gradients_match_the_direct_convolution() {
    for (k, c) in shapes().into_iter().enumerate() {
        c.check().unwrap();
        let m = 5;
        let w = values(c.weights(), 1 + k as u64);
        let b = values(c.c_out, 10 + k as u64);
        let x = values(m * c.in_len(), 20 + k as u64);
        let r = values(m * c.out_len(), 30 + k as u64);
        let (want_out, want_dw, want_db, want_dx) = direct(&c, &c.to_torch(&w), &b, &x, m, &r);
        assert!(
            c.chunk_samples() >= m,
            "{c:?}: the default takes all in one chunk"
        );
        for per in [c.chunk_samples(), 1, 2] {
            let mut scratch = Scratch::default();
            let mut out = vec![f32::NAN; m * c.out_len()];
            let mut seen = Vec::new();
            let then = |s0: usize, o: &mut [f32]| seen.push((s0, o.len()));
            forward_in_chunks(&c, (&w, &b), (&x, m), per, &mut scratch, &mut out, then);
            close("output", &c, &out, &want_out);
            assert_eq!(
                seen,
                chunks(m, per, c.out_len()),
                "{c:?}: the output's chunks"
            );

            let (mut dw, mut db) = (vec![f32::NAN; c.weights()], vec![f32::NAN; c.c_out]);
            let mut dx = vec![f32::NAN; m * c.in_len()];
            let dwb = (dw.as_mut_slice(), db.as_mut_slice());
            let mut seen = Vec::new();
            let then = |s0: usize, d: &mut [f32]| seen.push((s0, d.len()));
            let wxr = (&w[..], &x[..], &r[..]);
            let into = Some(&mut dx[..]);
            backward_in_chunks(&c, wxr, (m, per), dwb, into, &mut scratch, then);
            close("dw", &c, &c.to_torch(&dw), &want_dw);
            close("db", &c, &db, &want_db);
            close("dx", &c, &dx, &want_dx);
            assert_eq!(seen, chunks(m, per, c.in_len()), "{c:?}: dx's chunks");
        }
    }
}

/// The `(first sample, floats)` of each chunk of `m` samples, `per` at a
/// time, of `len` floats per sample.
fn chunks(m: usize, per: usize, len: usize) -> Vec<(usize, usize)> {
    (0..m)
        .step_by(per)
        .map(|s0| (s0, per.min(m - s0) * len))
        .collect()
}

/// The Nature CNN's first layer is laid out a few samples at a time: a
/// chunk's windows fit the budget.

#[test]
fn large_layers_go_in_chunks() {
    let nature = Conv {
        h: 84,
        w: 84,
        c_in: 4,
        c_out: 32,
        kh: 8,
        kw: 8,
        stride: 4,
        pad: 0,
    };
    let per = nature.chunk_samples();
    assert_eq!(
        per, 2,
        "400 windows x 256 floats a sample, 256Ki floats a chunk"
    );
    assert!(per * nature.windows_per_sample() * nature.patch() <= CHUNK_FLOATS);
}

/// `col2im` is `im2col`'s transpose: `<im2col(x), y> = <x, col2im(y)>`.
#[test]
fn col2im_is_the_transpose_of_im2col() {
    for (k, c) in shapes().into_iter().enumerate() {
        let m = 3;
        let rows = m * c.out_h() * c.out_w();
        let x = values(m * c.in_len(), 40 + k as u64);
        let y = values(rows * c.patch(), 50 + k as u64);
        let mut cols = vec![f32::NAN; rows * c.patch()];
        im2col(&c, &x, m, &mut cols);
        let mut back = vec![f32::NAN; m * c.in_len()];
        col2im(&c, &y, m, &mut back);
        let dot = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum::<f64>()
        };
        let (lhs, rhs) = (dot(&cols, &y), dot(&x, &back));
        assert!(
            (lhs - rhs).abs() < 1e-4 * (1.0 + lhs.abs()),
            "{c:?}: {lhs} vs {rhs}"
        );
    }
}

#[test]
fn output_sizes_and_pytorch_order() {
    // The Nature CNN on an 84x84x4 frame: 20x20x32, 9x9x64, 7x7x64.
    let nature = [(84, 4, 32, 8, 4), (20, 32, 64, 4, 2), (9, 64, 64, 3, 1)];
    let sides: Vec<usize> = nature
        .iter()
        .map(|&(h, c_in, c_out, k, stride)| {
            let c = Conv {
                h,
                w: h,
                c_in,
                c_out,
                kh: k,
                kw: k,
                stride,
                pad: 0,
            };
            c.check().unwrap();
            c.out_h()
        })
        .collect();
    assert_eq!(sides, [20, 9, 7]);
    // MinAtar: 10x10 VALID 3x3 -> 8x8.
    let minatar = Conv {
        h: 10,
        w: 10,
        c_in: 4,
        c_out: 16,
        kh: 3,
        kw: 3,
        stride: 1,
        pad: 0,
    };
    assert_eq!((minatar.out_h(), minatar.out_len()), (8, 8 * 8 * 16));
    // Our [ky, kx, ci, co] against PyTorch's [co, ci, ky, kx], one weight.
    let c = Conv {
        h: 5,
        w: 5,
        c_in: 2,
        c_out: 3,
        kh: 2,
        kw: 4,
        stride: 1,
        pad: 0,
    };
    // ky = 1, kx = 3, ci = 1, co = 2.
    let ours = ((c.kw + 3) * c.c_in + 1) * c.c_out + 2;
    let mut w = vec![0.0; c.weights()];
    w[ours] = 1.0;
    let t = c.to_torch(&w);
    assert_eq!(
        t.iter().position(|&v| v == 1.0),
        Some(((2 * 2 + 1) * 2 + 1) * 4 + 3)
    );
    assert_eq!(c.from_torch(&t), w);
    // Shapes with no output are refused.
    assert!(Conv { kh: 6, ..c }.check().is_err());
    assert!(Conv { stride: 0, ..c }.check().is_err());
    assert!(Conv { c_in: 0, ..c }.check().is_err());
}

/// Stride-1 shapes for the direct kernel: a window of two slices, a
/// block's tail rows, two panels of outputs, taps in the padding.
fn direct_shapes() -> Vec<Conv> {
    let conv = |h, w, c_in, c_out, k, pad| Conv {
        h,
        w,
        c_in,
        c_out,
        kh: k,
        kw: k,
        stride: 1,
        pad,
    };
    vec![
        conv(7, 5, 16, 16, 3, 1),
        conv(6, 6, 32, 32, 3, 1),
        conv(5, 4, 16, 48, 3, 0),
        conv(9, 7, 32, 8, 3, 2),
        conv(4, 4, 64, 20, 2, 1),
    ]
}

/// The paths with our blocks that can run here (one lacking is said loudly).
fn block_paths(test: &str) -> Vec<Isa> {
    let paths = crate::kernels::paths_to_test(test);
    paths
        .into_iter()
        .filter(|&isa| isa != Isa::Scalar)
        .collect()
}

/// On the AVX2 and AVX-512 paths the direct kernel's forward pass gives the
/// bits of the laid-out windows through our blocks.
#[test]
fn the_direct_kernel_keeps_the_windows_numbers() {
    for isa in block_paths("the_direct_kernel_keeps_the_windows_numbers") {
        direct_forward_on(isa);
    }
}

fn direct_forward_on(isa: Isa) {
    let m = 3;
    for (i, c) in direct_shapes().into_iter().enumerate() {
        let (w, x) = (
            values(c.weights(), 40 + i as u64),
            values(m * c.in_len(), 50 + i as u64),
        );
        let mut cols = vec![0.0; m * c.windows_per_sample() * c.patch()];
        im2col(&c, &x, m, &mut cols);
        let rows = m * c.windows_per_sample();
        let mut want = vec![f32::NAN; m * c.out_len()];
        let (a, b) = (View::rows(&cols, c.patch()), View::rows(&w, c.c_out));
        gemm_on(isa, rows, c.patch(), c.c_out, a, b, 0.0, &mut want);
        let mut got = vec![f32::NAN; m * c.out_len()];
        let t = c.taps().expect("stride 1");
        Direct::on(isa, t).expect("taken").conv(&x, m, &w, &mut got);
        let same = got
            .iter()
            .zip(&want)
            .all(|(g, w)| g.to_bits() == w.to_bits());
        assert!(
            same,
            "{isa:?} {c:?}: the direct forward pass differs from the windows'"
        );
    }
}

/// On the AVX2 and AVX-512 paths the way back through the direct kernel
/// (the flipped kernel over the output's gradient) gives the windows'
/// gradients added back by `col2im`, to rounding; a way back with channels
/// no slice holds whole is left to the windows.
#[test]
fn the_direct_way_back_matches_the_windows() {
    for isa in block_paths("the_direct_way_back_matches_the_windows") {
        direct_backward_on(isa);
    }
}

fn direct_backward_on(isa: Isa) {
    let m = 3;
    for (i, c) in direct_shapes().into_iter().enumerate() {
        let t = c.taps().expect("stride 1");
        let w = values(c.weights(), 40 + i as u64);
        let dy = values(m * c.out_len(), 60 + i as u64);
        let rows = m * c.windows_per_sample();
        let mut dcols = vec![0.0; rows * c.patch()];
        let (a, b) = (View::rows(&dy, c.c_out), View::transposed(&w, c.c_out));
        gemm_on(isa, rows, c.c_out, c.patch(), a, b, 0.0, &mut dcols);
        let mut want = vec![f32::NAN; m * c.in_len()];
        col2im(&c, &dcols, m, &mut want);
        let back = t
            .backward()
            .expect("a square kernel longer than its padding");
        let Some(direct) = Direct::on(isa, back) else {
            // Only these read an output gradient of channels no slice holds whole.
            assert!(
                [48, 8, 20].contains(&c.c_out),
                "{c:?}: the way back not taken"
            );
            continue;
        };
        let mut flipped = Vec::new();
        direct_conv::flip(&t, &w, &mut flipped);
        let mut got = vec![f32::NAN; m * c.in_len()];
        direct.conv(&dy, m, &flipped, &mut got);
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            let near = (g - w).abs() <= 1e-5 * (1.0 + w.abs());
            assert!(near, "{isa:?} {c:?} dx at {j}: {g} vs {w}");
        }
    }
}
