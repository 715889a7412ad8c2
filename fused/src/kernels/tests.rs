//! The kernels on every path against f64 and against each other.

use super::*;

#[test]
fn tanh_matches_f64_tanh_everywhere() {
    let mut worst = 0.0f64;
    let mut x = -20.0f64;
    while x <= 20.0 {
        let got = tanh(x as f32) as f64;
        let want = (x as f32 as f64).tanh();
        worst = worst.max((got - want).abs());
        x += 1.0 / 4096.0;
    }
    assert!(worst < 3e-7, "worst error {worst}");
    // Small inputs keep their sign and size; the ends saturate exactly.
    assert_eq!(tanh(0.0), 0.0);
    assert!((tanh(1e-6) - 1e-6).abs() < 2e-7 && tanh(-1e-6) < 0.0);
    assert_eq!(tanh(50.0), 1.0);
    assert_eq!(tanh(-50.0), -1.0);
    assert!(tanh(f32::NAN).is_nan());
}

/// tanh over a slice compiled on each path gives the scalar function's
/// bits, at every position of a slice of odd length; so do column sums.
#[test]
fn every_path_gives_the_scalar_bits_element_wise() {
    let xs: Vec<f32> = (0..4099).map(|i| (i as f32 - 2049.5) * 0.0061).collect();
    for isa in paths_to_test("every_path_gives_the_scalar_bits_element_wise") {
        let mut ys = xs.clone();
        wide_on(
            isa,
            #[inline(always)]
            || ys.iter_mut().for_each(|v| *v = tanh(*v)),
        );
        for (x, y) in xs.iter().zip(&ys) {
            assert_eq!(y.to_bits(), tanh(*x).to_bits(), "{isa:?}: tanh({x})");
        }
        let mut sums = vec![0.5f32; 17];
        wide_on(
            isa,
            #[inline(always)]
            || {
                for row in xs[..17 * 241].chunks_exact(17) {
                    for (o, &v) in sums.iter_mut().zip(row) {
                        *o += v;
                    }
                }
            },
        );
        let mut want = vec![0.5f32; 17];
        for row in xs[..17 * 241].chunks_exact(17) {
            for (o, &v) in want.iter_mut().zip(row) {
                *o += v;
            }
        }
        assert_eq!(sums, want, "{isa:?}: column sums");
    }
}

/// Every path's product of a layer-sized operand pair agrees with an f64
/// product to f32 rounding (the paths sum in different orders, so not
/// bit for bit), with and without accumulation and transposes.
/// Shapes for each product routine of the AVX-512 path: `k` 70 (our
/// blocks, or matrixmultiply with a transposed operand) and 600
/// (the `gemm` crate's when both operands are row-major).
#[test]
fn every_path_multiplies_like_f64() {
    for (m, k, n) in [(37, 70, 45), (37, 600, 45)] {
        multiplies_like_f64(m, k, n);
    }
}

/// Two operands of `a_len` and `b_len` values, spread over a few units,
/// without a pattern a product could line up with.
fn operands(a_len: usize, b_len: usize) -> (Vec<f32>, Vec<f32>) {
    let a = (0..a_len)
        .map(|i| ((i * 7919) % 113) as f32 / 37.0 - 1.5)
        .collect();
    let b = (0..b_len)
        .map(|i| ((i * 104_729) % 97) as f32 / 41.0 - 1.1)
        .collect();
    (a, b)
}

fn multiplies_like_f64(m: usize, k: usize, n: usize) {
    let (a, b) = operands(m * k, k * n);
    let c0: Vec<f32> = (0..m * n).map(|i| (i % 11) as f32 * 0.1).collect();
    for isa in paths_to_test("every_path_multiplies_like_f64") {
        for (b_t, beta) in [(false, 0.0), (true, 1.0), (false, 0.5)] {
            let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
            let bv = if b_t {
                View::transposed(&bt, k)
            } else {
                View::rows(&b, n)
            };
            let mut c = c0.clone();
            gemm_on(isa, m, k, n, View::rows(&a, k), bv, beta, &mut c);
            for i in 0..m {
                for j in 0..n {
                    let dot: f64 = (0..k)
                        .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                        .sum();
                    let want = dot + beta as f64 * c0[i * n + j] as f64;
                    let got = c[i * n + j] as f64;
                    assert!(
                        (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                        "{isa:?} b_t {b_t} beta {beta} at ({i},{j}): {got} vs {want}"
                    );
                }
            }
        }
    }
}

/// Every product our blocks take past the small ones gives matrixmultiply's
/// numbers to the bit on every path, since the blocks sum in its slices of
/// the inner dimension: a weight gradient (`xᵀ dy` over a long inner
/// dimension), a forward product through windows of 257 to 511 floats, an
/// input gradient through a wide transposed weight (`dy Wᵀ`), and wide
/// right operands that take several slabs and chunks of rows.
#[test]
fn long_products_keep_matrixmultiplys_numbers() {
    let gradients = [(36, 600, 16), (144, 513, 32), (7, 257, 45), (20, 1024, 1)];
    let forwards = [(441, 288, 32), (13, 300, 64), (5, 511, 7), (200, 64, 600)];
    let input_gradients = [(40, 512, 300), (130, 96, 520), (3, 700, 257)];
    let shapes = (gradients.map(|s| (s, true, false)).into_iter())
        .chain(forwards.map(|s| (s, false, false)))
        .chain(input_gradients.map(|s| (s, false, true)));
    for ((m, k, n), a_t, b_t) in shapes {
        let (x, y) = operands(k * m, k * n);
        let a = if a_t {
            View::transposed(&x, m)
        } else {
            View::rows(&x, k)
        };
        let b = if b_t {
            View::transposed(&y, k)
        } else {
            View::rows(&y, n)
        };
        for isa in paths_to_test("long_products_keep_matrixmultiplys_numbers") {
            for beta in [0.0, 1.0] {
                let c0: Vec<f32> = (0..m * n).map(|i| (i % 11) as f32 * 0.1).collect();
                let (mut got, mut want) = (c0.clone(), c0);
                gemm_on(isa, m, k, n, a, b, beta, &mut got);
                general(m, k, n, a, b, beta, &mut want);
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits()),
                    "{isa:?} [{m}, {k}] x [{k}, {n}] a_t {a_t} b_t {b_t} beta {beta}"
                );
            }
        }
    }
}

#[test]
fn gemm_matches_a_naive_product_with_transposes() {
    // a [2, 3], b [3, 2]; also a^T given as a [3, 2] row-major buffer.
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
    let mut c = [1.0f32; 4];
    gemm(2, 3, 2, View::rows(&a, 3), View::rows(&b, 2), 1.0, &mut c);
    // [1 2 3; 4 5 6] [7 8; 9 10; 11 12] = [58 64; 139 154], plus the 1s.
    assert_eq!(c, [59.0, 65.0, 140.0, 155.0]);
    // (a^T)^T b, with a^T stored row-major [3, 2]: same product.
    let at = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0];
    let mut d = [0.0f32; 4];
    gemm(
        2,
        3,
        2,
        View::transposed(&at, 2),
        View::rows(&b, 2),
        0.0,
        &mut d,
    );
    assert_eq!(d, [58.0, 64.0, 139.0, 154.0]);
    let mut s = [0.0f32; 3];
    add_column_sums(&a, 3, &mut s);
    assert_eq!(s, [5.0, 7.0, 9.0]);
}

#[test]
#[should_panic(expected = "gemm operands")]
fn gemm_refuses_short_operands() {
    let mut c = [0.0f32; 4];
    gemm(
        2,
        3,
        2,
        View::rows(&[0.0; 5], 3),
        View::rows(&[0.0; 6], 2),
        0.0,
        &mut c,
    );
}
