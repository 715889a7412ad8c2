use super::*;
use crate::net::Dense;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A layer of `d_in` inputs and `d_out` outputs at offset 3 of a parameter
/// vector with random weights, and `m` rows of input where about one entry
/// in `one_in` is nonzero: 1, or a random value in row 1.
fn setup(m: usize, d_in: usize, d_out: usize, one_in: u32) -> (Dense, Vec<f32>, Vec<f32>) {
    let mut rng = StdRng::seed_from_u64(7);
    let d = Dense {
        w: 3,
        b: 3 + d_in * d_out,
        d_in,
        d_out,
    };
    let p = (0..d.b + d_out + 2)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let mut x = vec![0.0; m * d_in];
    for (i, v) in x.iter_mut().enumerate() {
        if rng.random_ratio(1, one_in) {
            *v = if i / d_in == 1 {
                rng.random_range(-2.0..2.0)
            } else {
                1.0
            };
        }
    }
    (d, p, x)
}

#[test]
fn rows_hold_the_nonzero_inputs_and_the_ratio_decides() {
    let mut rows = SparseRows::default();
    // Row 0: x[1] = 1, x[19] = -2.5 (past the first sixteen), -0.0 skipped.
    let mut x = vec![0.0f32; 2 * 20];
    (x[1], x[19], x[5]) = (1.0, -2.5, -0.0);
    x[20 + 16] = 0.5;
    assert!(rows.index(&x, 2, 20));
    assert!(rows.is_on());
    assert_eq!(rows.rows(), 2);
    assert_eq!(rows.row(0), (&[1, 19][..], &[1.0, -2.5][..]));
    assert_eq!(rows.row(1), (&[16][..], &[0.5][..]));
    // 12 of 40 nonzero: more than one in four, so nothing indexed.
    x[20..29].fill(3.0);
    assert!(!rows.index(&x, 2, 20));
    assert!(!rows.is_on());
    assert_eq!(rows.rows(), 0);
    assert!(!rows.index(&[], 0, 20), "no rows");
    // Only the first m rows are read.
    assert!(rows.index(&x, 1, 20));
    assert_eq!(rows.rows(), 1);
}

/// Against sums worked out in f64 straight from the definitions (`x W` and
/// `xᵀ dy`), for widths with a partial chunk of sixteen inputs and outputs,
/// with `out` and `dW` holding stale values first.
#[test]
fn product_and_weight_gradient_match_the_definitions() {
    for (m, d_in, d_out) in [(6, 150, 23), (5, 37, 64), (3, 9, 1)] {
        let (d, p, x) = setup(m, d_in, d_out, 8);
        let mut rows = SparseRows::default();
        assert!(rows.index(&x, m, d_in));
        let w = |i: usize, o: usize| f64::from(p[d.w + i * d_out + o]);
        let mut out = vec![7.0; m * d_out];
        rows.product(&p[d.w..d.b], d_out, &mut out);
        for r in 0..m {
            for o in 0..d_out {
                let want: f64 = (0..d_in)
                    .map(|i| f64::from(x[r * d_in + i]) * w(i, o))
                    .sum();
                let got = f64::from(out[r * d_out + o]);
                assert!(
                    (got - want).abs() < 1e-4,
                    "out[{r},{o}]: {got} against {want}"
                );
            }
        }
        let mut rng = StdRng::seed_from_u64(9);
        let dy: Vec<f32> = (0..m * d_out)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let mut dw = vec![5.0; d_in * d_out];
        rows.weight_grad(&dy, d_out, &mut dw);
        for i in 0..d_in {
            for o in 0..d_out {
                let want: f64 = (0..m)
                    .map(|r| f64::from(x[r * d_in + i]) * f64::from(dy[r * d_out + o]))
                    .sum();
                let got = f64::from(dw[i * d_out + o]);
                assert!(
                    (got - want).abs() < 1e-4,
                    "dW[{i},{o}]: {got} against {want}"
                );
            }
        }
    }
}

/// A row with no nonzero input gives a zero product and no gradient.
#[test]
fn an_all_zero_row_gives_zeros() {
    let (d, p, mut x) = setup(3, 40, 10, 8);
    x[40..80].fill(0.0);
    let mut rows = SparseRows::default();
    assert!(rows.index(&x, 3, 40));
    assert_eq!(rows.row(1).0.len(), 0);
    let mut out = vec![7.0; 30];
    rows.product(&p[d.w..d.b], 10, &mut out);
    assert!(out[10..20].iter().all(|&v| v == 0.0));
}
