//! The two numeric kernels the fused engine is built on: a strided f32 matrix
//! product (on the AVX-512 path our own for small operands, see `small_gemm`,
//! and the `gemm` crate's for forward products with a long inner dimension,
//! see `long_k`; otherwise matrixmultiply, the same routine burn's ndarray
//! backend ends in) and
//! an f32 tanh without a libm call per element, so loops over it vectorise
//! (compiled for the chosen instruction set by [`wide`]; see [`isa`] for how
//! the set is chosen). burn-ndarray evaluates tanh in f64 through libm, which
//! does not vectorise.

pub mod direct_conv;
pub mod few_rows;
mod isa;
mod long_k;
mod small_gemm;

pub use isa::{Isa, KernelsError, active, select_from_env};

/// A read-only matrix operand: element `(i, j)` is `data[i * rs + j * cs]`, so a
/// transpose is the same slice with the strides swapped.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub data: &'a [f32],
    pub rs: usize,
    pub cs: usize,
}

impl<'a> View<'a> {
    /// A row-major `[rows, cols]` matrix.
    pub fn rows(data: &'a [f32], cols: usize) -> Self {
        Self {
            data,
            rs: cols,
            cs: 1,
        }
    }

    /// The transpose of a row-major matrix with `cols` columns.
    pub fn transposed(data: &'a [f32], cols: usize) -> Self {
        Self {
            data,
            rs: 1,
            cs: cols,
        }
    }

    fn fits(&self, rows: usize, cols: usize) -> bool {
        rows == 0 || cols == 0 || (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// `c = a · b + beta · c` with `a` `[m, k]`, `b` `[k, n]` and `c` row-major `[m, n]`,
/// on the [`active`] instruction set.
/// Panics when an operand is smaller than its shape (a bug, never input).
#[inline]
pub fn gemm(m: usize, k: usize, n: usize, a: View<'_>, b: View<'_>, beta: f32, c: &mut [f32]) {
    gemm_on(active(), m, k, n, a, b, beta, c);
}

/// [`gemm`] on the instruction set `isa`, which the CPU must have
/// ([`Isa::supported`]); tests call it for every path.
#[allow(clippy::too_many_arguments)]
pub fn gemm_on(
    isa: Isa,
    m: usize,
    k: usize,
    n: usize,
    a: View<'_>,
    b: View<'_>,
    beta: f32,
    c: &mut [f32],
) {
    assert!(
        a.fits(m, k) && b.fits(k, n) && c.len() >= m * n,
        "gemm operands smaller than [{m}, {k}] x [{k}, {n}]"
    );
    if m == 0 || n == 0 {
        return;
    }
    if isa == Isa::Avx512
        && (small_gemm::try_gemm(m, k, n, a, b, beta, c)
            || long_k::try_gemm(m, k, n, a, b, beta, c)
            || small_gemm::try_sliced(m, k, n, a, b, beta, c))
    {
        return;
    }
    general(m, k, n, a, b, beta, c);
}

/// matrixmultiply's product, for any operands; the caller has checked their
/// extents.
fn general(m: usize, k: usize, n: usize, a: View<'_>, b: View<'_>, beta: f32, c: &mut [f32]) {
    // SAFETY: the caller's check keeps every index the routine reads or
    // writes (`i * rs + j * cs` over the given shapes) inside its slice; `c`
    // is a unique borrow, so it aliases neither input.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.data.as_ptr(),
            a.rs as isize,
            a.cs as isize,
            b.data.as_ptr(),
            b.rs as isize,
            b.cs as isize,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// Adds each row of the row-major `[rows, cols]` matrix `x` into `out` (`[cols]`).
pub fn add_column_sums(x: &[f32], cols: usize, out: &mut [f32]) {
    wide(
        #[inline(always)]
        || {
            for row in x.chunks_exact(cols) {
                for (o, &v) in out.iter_mut().zip(row) {
                    *o += v;
                }
            }
        },
    );
}

/// `f(y + bias)` for every row `y` of `out`, compiled wide (see [`wide`]).
#[inline(always)]
pub fn add_bias_then(out: &mut [f32], bias: &[f32], f: impl Fn(f32) -> f32) {
    wide(
        #[inline(always)]
        || {
            for row in out.chunks_exact_mut(bias.len()) {
                row.iter_mut().zip(bias).for_each(|(o, &b)| *o = f(*o + b));
            }
        },
    );
}

const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split in two (Cody and Waite) so `x - n ln 2` is exact for small `n`.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 * 2^23: adding and subtracting it rounds an f32 of magnitude < 2^22 to an integer.
const ROUND: f32 = 12_582_912.0;

/// `e^x` for `x` in `[-87, 0]`: `x = n ln 2 + r` with `|r| <= ln 2 / 2`, the
/// Taylor series of `e^r` to degree 7 (remainder < 6e-9), times `2^n` built
/// from its exponent bits.
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    let shifted = x * LOG2_E + ROUND;
    let n = shifted - ROUND;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (1.0 / 2.0
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // `shifted`'s low mantissa bits hold n itself: integer arithmetic on the
    // bits (unlike a saturating `as i32`) vectorises.
    let n_bits = shifted.to_bits().wrapping_sub(ROUND.to_bits());
    let scale = f32::from_bits(n_bits.wrapping_add(127) << 23);
    p * scale
}

/// `tanh(x)` in f32 to within 3e-7 absolute: `sign(x) (1 - e) / (1 + e)` with
/// `e = e^(-2|x|)`; beyond |x| = 9 tanh is 1 to f32 precision. NaN stays NaN.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let a = if a > 9.0 { 9.0 } else { a };
    let e = exp_nonpositive(-2.0 * a);
    ((1.0 - e) / (1.0 + e)).copysign(x)
}

/// The logistic function `1 / (1 + e^-x)` in f32 as `(1 + tanh(x / 2)) / 2`,
/// to within 2e-7 absolute, through [`tanh`] so loops over it vectorise.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    0.5 + 0.5 * tanh(0.5 * x)
}

/// Runs `f` compiled for the [`active`] instruction set: AVX-512, or AVX2
/// with FMA, or the portable build's SSE2 (4 lanes). For the element-wise
/// loops of an update (tanh, its derivative, bias sums, Adam), which the
/// compiler vectorises to whatever it may use. `f` must inline (mark it
/// `#[inline(always)]`) to be compiled with the wider instructions. Rust
/// never contracts `a * b + c` into a fused multiply-add, so every path
/// gives the same bits.
#[inline(always)]
pub fn wide<R>(f: impl FnOnce() -> R) -> R {
    wide_on(active(), f)
}

/// [`wide`] on the instruction set `isa`; one the CPU lacks runs the
/// portable build (tests call this for every path the CPU has).
#[inline(always)]
pub fn wide_on<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if isa == Isa::Avx512 && isa.supported() {
            // SAFETY: the CPU has AVX-512F (and so AVX2 and FMA), checked just above.
            return unsafe { with_avx512(f) };
        }
        if isa == Isa::Avx2 && isa.supported() {
            // SAFETY: the CPU has AVX2 and FMA, checked just above.
            return unsafe { with_avx2(f) };
        }
    }
    let _ = isa;
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// The paths this CPU has, for tests that run every path. A path it lacks
/// cannot run here, and no run on this CPU takes it either (`Isa::select`
/// refuses it): its tests are left out, loudly. Under CI (`CI` set) only
/// AVX-512 may be missing (CI machines come with and without it); a CPU
/// without AVX2 there is a failure, so the element-wise paths every x86-64
/// CI machine runs are always tested.
#[cfg(test)]
pub(crate) fn paths_to_test(test: &str) -> Vec<Isa> {
    let (have, lack): (Vec<Isa>, Vec<Isa>) = Isa::ALL.into_iter().partition(|isa| isa.supported());
    for isa in lack {
        assert!(
            std::env::var_os("CI").is_none() || isa == Isa::Avx512,
            "CI is set but this CPU lacks {}: {test} cannot run that path",
            isa.name()
        );
        eprintln!(
            "NOT RUN {test} on {}: this CPU lacks it (and no run here takes that path)",
            isa.name()
        );
    }
    have
}

#[cfg(test)]
mod tests {
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

    /// A weight gradient's product (`xᵀ dy` over a long inner dimension) and
    /// a forward product through windows of 257 to 511 floats give
    /// matrixmultiply's numbers to the bit on every path: on AVX-512 our
    /// blocks sum them in matrixmultiply's slices of the inner dimension, so
    /// runs keep their numbers.
    #[test]
    fn long_products_keep_matrixmultiplys_numbers() {
        let gradients = [(36, 600, 16), (144, 513, 32), (7, 257, 45), (20, 1024, 1)];
        let forwards = [(441, 288, 32), (13, 300, 64), (5, 511, 7)];
        let shapes = gradients.map(|s| (s, true)).into_iter();
        for ((m, k, n), transposed) in shapes.chain(forwards.map(|s| (s, false))) {
            let (x, dy) = operands(k * m, k * n);
            let a = if transposed {
                View::transposed(&x, m)
            } else {
                View::rows(&x, k)
            };
            let b = View::rows(&dy, n);
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
                        "{isa:?} [{m}, {k}] x [{k}, {n}] beta {beta}"
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
}
