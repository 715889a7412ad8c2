//! Orthogonal initialisation as PyTorch's `orthogonal_` (and burn's): a
//! standard normal `rows x cols` draw (`rows` the shape's first dimension,
//! `cols` the rest), transposed when wide, made orthonormal by its QR
//! decomposition with R's diagonal made positive, times the gain. The draw
//! is burn's (its seeded RNG: a run's initial weights follow `run.seed`); the
//! QR is done here in f64 by modified Gram-Schmidt, because burn 0.21's runs
//! one tensor operation per pair of columns and takes 40 s on the Nature
//! CNN's 3136x512 dense layer.

use burn::module::Param;
use burn::tensor::{Distribution, Tensor, TensorData, backend::Backend};

/// An orthogonal tensor of `shape` times `gain`.
pub fn orthogonal<B: Backend, const D: usize>(
    shape: [usize; D],
    gain: f64,
    device: &B::Device,
) -> Param<Tensor<B, D>> {
    let rows = shape[0];
    let cols = shape.iter().product::<usize>() / rows.max(1);
    let draw: Tensor<B, 2> = Tensor::random([rows, cols], Distribution::Normal(0.0, 1.0), device);
    let a: Vec<f64> = draw
        .into_data()
        .convert::<f64>()
        .to_vec()
        .unwrap_or_else(|e| panic!("a {rows}x{cols} draw as f64: {e:?}"));
    let q = orthonormal(&a, rows, cols);
    let values: Vec<f32> = q.iter().map(|&x| (x * gain) as f32).collect();
    Param::from_tensor(Tensor::from_data(TensorData::new(values, shape), device))
}

/// `a` (`rows x cols`, row-major) with its longer side's columns made
/// orthonormal: Q of `a = QR` (or of `a`'s transpose when it is wide, then
/// transposed back), each column's sign that of R's diagonal element.
pub fn orthonormal(a: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let wide = rows < cols;
    let (m, n) = if wide { (cols, rows) } else { (rows, cols) };
    // Column j of the tall matrix, contiguous.
    let mut c: Vec<Vec<f64>> = (0..n)
        .map(|j| {
            (0..m)
                .map(|i| {
                    if wide {
                        a[j * cols + i]
                    } else {
                        a[i * cols + j]
                    }
                })
                .collect()
        })
        .collect();
    for j in 0..n {
        let (done, rest) = c.split_at_mut(j);
        let v = &mut rest[0];
        for q in done.iter() {
            let r: f64 = q.iter().zip(v.iter()).map(|(a, b)| a * b).sum();
            v.iter_mut().zip(q).for_each(|(x, q)| *x -= r * q);
        }
        // R's diagonal is this norm, positive: Q's column keeps v's sign.
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
    }
    let mut out = vec![0.0; rows * cols];
    for (j, col) in c.iter().enumerate() {
        for (i, &x) in col.iter().enumerate() {
            if wide {
                out[j * cols + i] = x;
            } else {
                out[i * cols + j] = x;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gram(q: &[f64], rows: usize, cols: usize) -> Vec<f64> {
        let mut g = vec![0.0; cols * cols];
        for a in 0..cols {
            for b in 0..cols {
                g[a * cols + b] = (0..rows).map(|i| q[i * cols + a] * q[i * cols + b]).sum();
            }
        }
        g
    }

    #[test]
    fn a_worked_qr_keeps_the_columns_direction() {
        // Columns (3, 4) and (1, 2): q1 = (0.6, 0.8); the second less its
        // projection 2.2 * q1 = (1.32, 1.76) is (-0.32, 0.24), norm 0.4.
        let q = orthonormal(&[3.0, 1.0, 4.0, 2.0], 2, 2);
        let want = [0.6, -0.8, 0.8, 0.6];
        for (a, b) in q.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{q:?}");
        }
        // A wide matrix: its rows are made orthonormal, the first kept in direction.
        let q = orthonormal(&[0.0, 2.0, 0.0, 1.0, 1.0, 0.0], 2, 3);
        let want = [0.0, 1.0, 0.0, 1.0, 0.0, 0.0];
        for (a, b) in q.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{q:?}");
        }
    }

    #[test]
    fn tall_and_wide_draws_become_orthonormal_and_scaled_by_the_gain() {
        type B = crate::CpuBackend;
        let dev = Default::default();
        <B as Backend>::seed(&dev, 3);
        let t: Tensor<B, 2> = orthogonal([300, 40], 2.0, &dev).val();
        let q: Vec<f64> = t.into_data().convert::<f64>().to_vec().unwrap();
        let g = gram(&q, 300, 40);
        for a in 0..40 {
            for b in 0..40 {
                let want = if a == b { 4.0 } else { 0.0 };
                assert!(
                    (g[a * 40 + b] - want).abs() < 1e-4,
                    "Q'Q[{a},{b}] = {}",
                    g[a * 40 + b]
                );
            }
        }
        // A conv weight [out, in, kh, kw] = [4, 2, 3, 3]: 4 orthonormal rows of 18.
        let w: Tensor<B, 4> = orthogonal([4, 2, 3, 3], 1.0, &dev).val();
        assert_eq!(w.dims(), [4, 2, 3, 3]);
        let w: Vec<f64> = w.into_data().convert::<f64>().to_vec().unwrap();
        for a in 0..4 {
            for b in 0..4 {
                let dot: f64 = (0..18).map(|i| w[a * 18 + i] * w[b * 18 + i]).sum();
                assert!((dot - f64::from(u8::from(a == b))).abs() < 1e-5);
            }
        }
    }
}
