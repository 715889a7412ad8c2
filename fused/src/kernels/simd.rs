//! What our register-blocked kernels need from an instruction set: a vector
//! of f32 lanes, loads and stores (whole, or of a register's first lanes),
//! a fused multiply-add. The block products (`small_gemm`) and the direct
//! convolution (`direct_conv`) are written once over this trait; each set
//! implements it in its own folder (`x86_64/avx2.rs`, `x86_64/avx512.rs`;
//! an aarch64 NEON one would sit in `aarch64/neon.rs`), so the arithmetic,
//! and with it the order of every sum, is the same on every set: a block
//! sums each element of the result over the inner dimension in order, one
//! fused multiply-add per term, whatever its width.
//!
//! Code generic over the trait runs inside [`Simd::enabled`], which turns
//! the set on for everything inlined into it: the kernels' helpers are
//! `#[inline(always)]` for that reason.

use super::View;

/// An instruction set's f32 vectors.
///
/// # Safety
/// An implementation's methods other than [`Simd::available`] use the
/// set's instructions: they may only run where `available()` is true,
/// inside [`Simd::enabled`].
pub(crate) unsafe trait Simd: Copy {
    /// A register of [`Simd::LANES`] floats.
    type V: Copy;
    /// Which of a register's lanes a partial load or store touches.
    type Mask: Copy;
    /// Floats per register.
    const LANES: usize;
    /// Rows of a result block two registers wide: two accumulators a row,
    /// with room left for the right operand's two registers and a
    /// broadcast (AVX2's 16 registers hold 6 rows, AVX-512's 32 hold 12).
    const ROWS: usize;

    /// Whether this CPU has the set.
    fn available() -> bool;

    /// Runs `f` with the set's instructions enabled (`f` and what it calls
    /// must inline to be compiled with them).
    ///
    /// # Safety
    /// The CPU has the set.
    unsafe fn enabled<R>(f: impl FnOnce() -> R) -> R;

    /// The mask of a register's first `w` lanes (all of them from
    /// [`Simd::LANES`] on).
    ///
    /// # Safety
    /// Inside [`Simd::enabled`] (as every method below).
    unsafe fn first(w: usize) -> Self::Mask;
    unsafe fn zero() -> Self::V;
    unsafe fn splat(x: f32) -> Self::V;
    /// A register's worth of floats from `p`.
    unsafe fn load(p: *const f32) -> Self::V;
    /// The lanes in `m` from `p`, zeros elsewhere; memory past them is not
    /// read.
    unsafe fn load_first(m: Self::Mask, p: *const f32) -> Self::V;
    unsafe fn store(p: *mut f32, v: Self::V);
    /// The lanes in `m` to `p`; memory past them is not written.
    unsafe fn store_first(m: Self::Mask, p: *mut f32, v: Self::V);
    /// `a * b + c`, rounded once.
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;

    /// `out` (`[k, n]` row-major) = `b`, element by element (a set with a
    /// gather does it a register at a time).
    ///
    /// # Safety
    /// Inside [`Simd::enabled`]; `b` covers `[k, n]`, `out` holds `k * n`
    /// floats, and `(LANES - 1) * b.cs` fits an i32.
    #[inline(always)]
    unsafe fn copy_rows(k: usize, n: usize, b: View<'_>, out: &mut [f32]) {
        for (p, row) in out[..k * n].chunks_exact_mut(n).enumerate() {
            for (j, o) in row.iter_mut().enumerate() {
                *o = b.data[p * b.rs + j * b.cs];
            }
        }
    }
}

/// Work generic over the set, run on the one a path names
/// ([`super::with_simd`]): pulp's way of choosing a set once per call
/// rather than per instruction.
pub(crate) trait WithSimd {
    type Output;
    /// The work on the set `S`.
    ///
    /// # Safety
    /// The CPU has the set `S`.
    unsafe fn run<S: Simd>(self) -> Self::Output;
}

/// A register from `p`: whole when `FULL`, else the lanes in `m`.
///
/// # Safety
/// Inside [`Simd::enabled`]; `p` holds the floats read.
#[inline(always)]
pub(crate) unsafe fn load_reg<S: Simd, const FULL: bool>(m: S::Mask, p: *const f32) -> S::V {
    unsafe {
        if FULL {
            S::load(p)
        } else {
            S::load_first(m, p)
        }
    }
}

/// [`load_reg`]'s store.
///
/// # Safety
/// Inside [`Simd::enabled`]; `p` holds the floats written.
#[inline(always)]
pub(crate) unsafe fn store_reg<S: Simd, const FULL: bool>(m: S::Mask, p: *mut f32, v: S::V) {
    unsafe {
        if FULL {
            S::store(p, v)
        } else {
            S::store_first(m, p, v)
        }
    }
}
