//! Products of a few rows with a wide matrix: a recurrent core's step,
//! where the `E` envs of a minibatch's sequences (often 2 to 16) meet its
//! `[size, gates * size]` hidden weights (or their transpose, on the way
//! back), once per step. A general routine packs the whole right operand
//! (256 KiB for an LSTM of 128) at every call, which costs several times
//! the arithmetic; here the right operand is read once a call where it
//! lies: on the AVX2 and AVX-512 paths in our blocks (`small_gemm`), on the
//! portable one row by row, every row of the left operand summed against
//! it in the same pass.

use super::simd::{Simd, WithSimd};
use super::{Isa, active, small_gemm, wide_on, with_simd};

/// The most rows these products are worth taking for: beyond, a general
/// routine's packing is paid back.
pub const FEW_ROWS: usize = 16;

/// `c = a · b + beta · c`, `beta` 0 or 1: `a` `[m, k]` (`m` at most
/// [`FEW_ROWS`]), `b` `[k, n]` and `c` `[m, n]`, all row-major.
pub fn rows_by(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], beta: f32, c: &mut [f32]) {
    rows_by_on(active(), (m, k, n), a, b, beta, c);
}

/// [`rows_by`] on the instruction set `isa`. The blocks of AVX2 and
/// AVX-512 give the same bits (each sum in the same order of fused
/// multiply-adds); the portable loop multiplies and adds apart.
pub fn rows_by_on(
    isa: Isa,
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    b: &[f32],
    beta: f32,
    c: &mut [f32],
) {
    let blocks = Blocks {
        shape: (m, k, n),
        a,
        b,
        beta,
        c: &mut *c,
    };
    if with_simd(isa, blocks) == Some(true) {
        return;
    }
    let c = &mut c[..m * n];
    if beta == 0.0 {
        c.fill(0.0);
    }
    wide_on(
        isa,
        #[inline(always)]
        || {
            for (kk, b_row) in b[..k * n].chunks_exact(n).enumerate() {
                for (r, c_row) in c.chunks_exact_mut(n).enumerate() {
                    let s = a[r * k + kk];
                    c_row.iter_mut().zip(b_row).for_each(|(c, &b)| *c += s * b);
                }
            }
        },
    );
}

/// The product in our blocks ([`small_gemm::try_few_rows`]).
struct Blocks<'a> {
    shape: (usize, usize, usize),
    a: &'a [f32],
    b: &'a [f32],
    beta: f32,
    c: &'a mut [f32],
}

impl WithSimd for Blocks<'_> {
    type Output = bool;

    unsafe fn run<S: Simd>(self) -> bool {
        small_gemm::try_few_rows::<S>(self.shape, self.a, self.b, self.beta, self.c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{View, gemm_on};

    /// The product against matrixmultiply's on every instruction-set path
    /// the CPU has, for row counts up to [`FEW_ROWS`], both betas; AVX2's
    /// and AVX-512's blocks to the bit.
    #[test]
    fn few_rows_products_match_the_general_routine() {
        let value = |i: usize| ((i * 37 % 101) as f32 - 50.0) / 40.0;
        for (m, k, n) in [
            (1, 128, 512),
            (2, 64, 256),
            (5, 37, 19),
            (16, 130, 96),
            (8, 512, 128),
        ] {
            let a: Vec<f32> = (0..m * k).map(value).collect();
            let b: Vec<f32> = (0..k * n).map(|i| value(i + 7)).collect();
            for beta in [0.0, 1.0] {
                let start: Vec<f32> = (0..m * n).map(|i| value(i + 11)).collect();
                let mut want = start.clone();
                let (av, bv) = (View::rows(&a, k), View::rows(&b, n));
                gemm_on(Isa::Scalar, m, k, n, av, bv, beta, &mut want);
                let mut blocks: Option<Vec<f32>> = None;
                for isa in crate::kernels::paths_to_test("few_rows_products") {
                    let mut got = start.clone();
                    rows_by_on(isa, (m, k, n), &a, &b, beta, &mut got);
                    for (x, y) in got.iter().zip(&want) {
                        assert!(
                            (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                            "{isa:?} {m}x{k}x{n}: {x} vs {y}"
                        );
                    }
                    if isa != Isa::Scalar {
                        match &blocks {
                            Some(first) => assert_eq!(&got, first, "{isa:?} {m}x{k}x{n}"),
                            None => blocks = Some(got),
                        }
                    }
                }
            }
        }
    }
}
