//! The two numeric kernels the fused engine is built on: a strided f32 matrix
//! product (on the AVX2 and AVX-512 paths our own register blocks, see
//! `small_gemm`, written once over [`simd`] with each set in its own folder,
//! `x86_64/`: every product on AVX2, the larger ones packed, see `tiled`;
//! on AVX-512 the small ones, the `gemm` crate's for forward products with
//! a long inner dimension, see `long_k`, and matrixmultiply's AVX-512
//! kernels for the rest, the faster choice there; on the portable path
//! matrixmultiply, the same routine burn's ndarray backend ends in) and
//! an f32 tanh without a libm call per element, so loops over it vectorise
//! (compiled for the chosen instruction set by [`wide`]; see [`isa`] for how
//! the set is chosen). burn-ndarray evaluates tanh in f64 through libm, which
//! does not vectorise.

pub mod direct_conv;
pub mod few_rows;
mod isa;
mod long_k;
pub mod peak;
mod simd;
mod small_gemm;
mod tiled;
#[cfg(target_arch = "x86_64")]
mod x86_64;

use simd::{Simd, WithSimd};

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
    // The `gemm` crate and matrixmultiply pick their kernels from the CPU,
    // AVX-512 ones on an AVX-512 CPU: the AVX-512 path takes them where they
    // are the faster choice, and the AVX2 path keeps every product in its
    // own blocks, so that forced on an AVX-512 CPU it runs what an AVX2 one
    // would.
    let ours = Product {
        shape: (m, k, n),
        a,
        b,
        beta,
        c: &mut *c,
        long_k: isa == Isa::Avx512,
        tiled: isa == Isa::Avx2,
    };
    if with_simd(isa, ours) == Some(true) {
        return;
    }
    general(m, k, n, a, b, beta, c);
}

/// A product on the set a path names: small ones in our blocks, on
/// AVX-512 row-major ones with a long inner dimension in the `gemm` crate's
/// kernels, long ones with a narrow right operand in our blocks in
/// matrixmultiply's slices, and on AVX2 the rest in our blocks tiled for
/// the caches; `false`, with `c` untouched, for the rest (matrixmultiply's,
/// and on AVX2 only a `beta` other than 0 and 1, which no caller passes).
struct Product<'a> {
    shape: (usize, usize, usize),
    a: View<'a>,
    b: View<'a>,
    beta: f32,
    c: &'a mut [f32],
    long_k: bool,
    tiled: bool,
}

impl WithSimd for Product<'_> {
    type Output = bool;

    unsafe fn run<S: Simd>(self) -> bool {
        let Product {
            shape: (m, k, n),
            a,
            b,
            beta,
            c,
            long_k,
            tiled,
        } = self;
        small_gemm::try_gemm::<S>(m, k, n, a, b, beta, c)
            || (long_k && long_k::try_gemm(m, k, n, a, b, beta, c))
            || small_gemm::try_sliced::<S>(m, k, n, a, b, beta, c)
            || (tiled && tiled::try_tiled::<S>(m, k, n, a, b, beta, c))
    }
}

/// Whether the path `isa` has our blocks (and with them the direct
/// convolution) on this CPU.
fn has_blocks(isa: Isa) -> bool {
    struct Probe;
    impl WithSimd for Probe {
        type Output = ();
        unsafe fn run<S: Simd>(self) {}
    }
    with_simd(isa, Probe).is_some()
}

/// `w` on the set of the path `isa`; `None` on the portable path or where
/// the CPU lacks the set. The one place a path becomes a set.
fn with_simd<W: WithSimd>(isa: Isa, w: W) -> Option<W::Output> {
    #[cfg(target_arch = "x86_64")]
    {
        use x86_64::{avx2::Avx2, avx512::Avx512};
        match isa {
            // SAFETY: the CPU has the set, checked on the same line.
            Isa::Avx2 if Avx2::available() => return Some(unsafe { w.run::<Avx2>() }),
            Isa::Avx512 if Avx512::available() => return Some(unsafe { w.run::<Avx512>() }),
            _ => {}
        }
    }
    let _ = (isa, w);
    None
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

/// Beyond `|x| = 8`, tanh is within 2.3e-7 of ±1, and is ±1.
const TANH_LIMIT: f32 = 8.0;
/// `tanh(x) ~ x P(x²) / Q(x²)` on `[0, 8]`, the coefficients from the highest
/// power of `x²` down: our own minimax fit in f64 (`scripts/fit-tanh.py`:
/// iteratively reweighted least squares on the linearised error, `P(0) =
/// Q(0) = 1` so small inputs keep their size), 7.5e-9 from tanh before f32
/// rounding, 2.9e-7 after it.
const TANH_P: [f32; 5] = [
    1.523_013_4e-8,
    2.189_768_7e-5,
    3.571_882_4e-3,
    0.134_447_65,
    1.0,
];
const TANH_Q: [f32; 5] = [
    8.523_369_4e-7,
    3.411_692_2e-4,
    2.616_561e-2,
    0.467_780_92,
    1.0,
];

/// A polynomial in `u` from its highest coefficient down, a fused
/// multiply-add a term (`mul_add`, rounded once on every path, so every
/// path gives the same bits).
#[inline(always)]
fn horner(coefficients: [f32; 5], u: f32) -> f32 {
    coefficients[1..]
        .iter()
        .fold(coefficients[0], |p, &c| p.mul_add(u, c))
}

/// `tanh(x)` in f32 to within 3e-7 absolute: a rational function of degree
/// 9 over 8 on `|x| < 8` ([`TANH_P`], [`TANH_Q`]), ±1 beyond: eight fused
/// multiply-adds, two products and a division, where the form through
/// `e^(-2|x|)` it replaced took about a third more instructions. NaN stays NaN.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let u = a * a;
    // Past the limit the polynomials overflow to inf / inf: the blend
    // takes 1 there, and NaN fails the comparison and stays.
    let r = if a >= TANH_LIMIT {
        1.0
    } else {
        a * horner(TANH_P, u) / horner(TANH_Q, u)
    };
    r.copysign(x)
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
/// never contracts `a * b + c` into a fused multiply-add, and an explicit
/// `mul_add` rounds once everywhere (one instruction with FMA, libm's `fmaf`
/// in the portable build), so every path gives the same bits.
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
            return unsafe { x86_64::avx512::Avx512::enabled(f) };
        }
        if isa == Isa::Avx2 && isa.supported() {
            // SAFETY: the CPU has AVX2 and FMA, checked just above.
            return unsafe { x86_64::avx2::Avx2::enabled(f) };
        }
    }
    let _ = isa;
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
mod tests;
