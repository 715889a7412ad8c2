//! A matrix product for the fused engine's operands, which are small enough to
//! stay in the first-level cache (a minibatch of ~128 rows through layers ~64
//! wide). A general routine (matrixmultiply) copies both operands into packed
//! panels at every call; here each block of the result, [`Simd::ROWS`] rows
//! by two registers (12 x 32 on AVX-512, 6 x 16 on AVX2), is summed in
//! registers straight from the operands where they lie: the left one through
//! its strides (a broadcast per element), the right one by rows, which must
//! then be contiguous, so a transposed right operand is first copied to rows
//! (one pass over `k x n` elements, against `m x k x n` multiply-adds). Each
//! element is summed over the inner dimension in order, one fused
//! multiply-add per term, from zero, then added to what `c` held: the order
//! matrixmultiply's FMA kernels sum in within one of their slices, and the
//! same on every set. Its measured speed against matrixmultiply is in
//! `docs/performance.md`.
//!
//! Used on the AVX2 and AVX-512 paths where the right operand is small;
//! on AVX2 [`super::tiled`] packs the larger ones for the same blocks.

use super::View;
use super::simd::{Simd, load_reg, store_reg};
use std::cell::RefCell;

/// The largest right operand (`k * n` elements) taken here: 64 KiB, so one
/// panel of it two registers wide (at most 32 KiB for k <= 256 on AVX-512)
/// stays in L1 while every row block of the left operand passes over it.
const MAX_RIGHT: usize = 16 * 1024;
/// The longest inner dimension taken here (see [`MAX_RIGHT`]).
pub(super) const MAX_K: usize = 256;

/// `c = a · b + beta · c` (`c` row-major `[m, n]`) when this routine applies
/// (the set present, `beta` 0 or 1, a small right operand); `false`, with
/// `c` untouched, otherwise. The caller has checked every operand's extent.
pub(super) fn try_gemm<S: Simd>(
    m: usize,
    k: usize,
    n: usize,
    a: View<'_>,
    b: View<'_>,
    beta: f32,
    c: &mut [f32],
) -> bool {
    // A transposed right operand may be gathered with 32-bit lane offsets.
    let gatherable = b.cs == 1 || b.cs <= i32::MAX as usize / S::LANES;
    let beta_fits = beta == 0.0 || beta == 1.0;
    let fits = k <= MAX_K && k * n <= MAX_RIGHT && beta_fits && gatherable;
    if fits && S::available() {
        gemm::<S>(m, k, n, a, b, beta == 1.0, c);
        return true;
    }
    false
}

/// `c = a · b + beta · c` for a few rows of `a` (`few_rows` calls it with
/// at most 16) and a row-major `b` of any size, when the set is present and
/// `beta` is 0 or 1: with one block of rows, each panel of `b` is read once
/// per block, so its size does not matter (what [`MAX_RIGHT`] guards
/// against is re-reading panels that left L1).
pub(super) fn try_few_rows<S: Simd>(
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    b: &[f32],
    beta: f32,
    c: &mut [f32],
) -> bool {
    let fits = beta == 0.0 || beta == 1.0;
    if fits && S::available() {
        let (a, b) = (View::rows(&a[..m * k], k), View::rows(&b[..k * n], n));
        gemm::<S>(m, k, n, a, b, beta == 1.0, c);
        return true;
    }
    false
}

/// `c = a · b + beta · c` over a long inner dimension (`k > MAX_K`) with a
/// narrow row-major right operand, in slices of [`MAX_K`] rows of `b`, when
/// the set is present and `beta` is 0 or 1; `false`, with `c` untouched,
/// otherwise. These are the products matrixmultiply would take otherwise
/// (a weight gradient `xᵀ dy`, a convolution's windows `[rows, patch]`
/// against its weights with a patch of 257 to 511), and it packs both
/// operands of each anew at every call, a sixth of the IMPALA ResNet's
/// update. Its own blocking of the inner dimension (its `kc`) is [`MAX_K`]
/// for f32, with the same fused multiply-adds in the same order per slice
/// and each slice's sums added into the result as it adds them: so this
/// gives its numbers to the bit (the kernel tests compare the two). The
/// caller has checked every operand's extent.
pub(super) fn try_sliced<S: Simd>(
    m: usize,
    k: usize,
    n: usize,
    a: View<'_>,
    b: View<'_>,
    beta: f32,
    c: &mut [f32],
) -> bool {
    let beta_fits = beta == 0.0 || beta == 1.0;
    let sliceable = k > MAX_K && b.cs == 1 && n * MAX_K <= MAX_RIGHT;
    if sliceable && beta_fits && S::available() {
        for (s, k0) in (0..k).step_by(MAX_K).enumerate() {
            let a = View {
                data: &a.data[k0 * a.cs..],
                ..a
            };
            let b = View::rows(&b.data[k0 * b.rs..], b.rs);
            let add = s > 0 || beta == 1.0;
            gemm::<S>(m, MAX_K.min(k - k0), n, a, b, add, c);
        }
        return true;
    }
    false
}

thread_local! {
    /// A transposed right operand, copied to contiguous rows.
    static RIGHT: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The product through blocks; `b` is copied to contiguous rows first
/// unless it already has them. The set is present (the caller asked).
fn gemm<S: Simd>(m: usize, k: usize, n: usize, a: View<'_>, b: View<'_>, add: bool, c: &mut [f32]) {
    if b.cs == 1 {
        // SAFETY: the set is present (the caller asked `available`); the
        // caller checked that `a` covers [m, k], `b` [k, n] and `c` [m, n].
        unsafe {
            S::enabled(
                #[inline(always)]
                || blocks::<S>((m, k, n), a, b.data, b.rs, (c, n), add),
            )
        };
        return;
    }
    RIGHT.with_borrow_mut(|right| {
        right.resize(k * n, 0.0);
        // SAFETY: as above; `right` holds exactly [k, n] row-major once
        // copied, and the caller checked that `b.cs` may be gathered.
        unsafe {
            S::enabled(
                #[inline(always)]
                || {
                    S::copy_rows(k, n, b, right);
                    blocks::<S>((m, k, n), a, right, n, (c, n), add)
                },
            )
        };
    });
}

/// Every block of `c`, a panel two registers wide at a time (the panel of
/// `b` stays in L1 while all row blocks pass over it).
///
/// # Safety
/// Inside [`Simd::enabled`]; `a` covers `[m, k]` through its strides, `b`
/// holds `[k, n]` with rows `rs` apart and contiguous columns, `c` holds
/// `[m, n]` with rows `ldc` apart.
#[inline(always)]
unsafe fn blocks<S: Simd>(
    (m, k, n): (usize, usize, usize),
    a: View<'_>,
    b: &[f32],
    rs: usize,
    (c, ldc): (&mut [f32], usize),
    add: bool,
) {
    let mut j = 0;
    while j < n {
        let w = (2 * S::LANES).min(n - j);
        let mut i = 0;
        while i < m {
            let rows = S::ROWS.min(m - i);
            // SAFETY: inside `enabled`, as the caller guarantees.
            let block = unsafe {
                Block::<S> {
                    k,
                    a: a.data.as_ptr().wrapping_add(i * a.rs),
                    ars: a.rs,
                    acs: a.cs,
                    b: b.as_ptr().wrapping_add(j),
                    brs: rs,
                    c: c.as_mut_ptr().wrapping_add(i * ldc + j),
                    ldc,
                    m0: S::first(w),
                    m1: S::first(w.saturating_sub(S::LANES)),
                    add,
                }
            };
            // SAFETY: rows i..i + rows and columns j..j + w lie inside
            // every operand, as the caller guarantees for the whole
            // product, and the block reads and writes exactly those.
            unsafe { block.run(w, rows) };
            i += rows;
        }
        j += w;
    }
}

/// One block of the result: `R` rows by one register (the first's lanes in
/// `m0`) or two (all of the first, the second's lanes in `m1`).
pub(super) struct Block<S: Simd> {
    pub k: usize,
    /// The block's first row of the left operand.
    pub a: *const f32,
    pub ars: usize,
    pub acs: usize,
    /// The block's first column of the right operand's first row.
    pub b: *const f32,
    pub brs: usize,
    /// The block's first element of the result.
    pub c: *mut f32,
    pub ldc: usize,
    pub m0: S::Mask,
    pub m1: S::Mask,
    pub add: bool,
}

impl<S: Simd> Block<S> {
    /// The block for `rows` rows and `w` columns (`m0` and `m1` made for `w`).
    ///
    /// # Safety
    /// As [`Block::sum`]'s.
    #[inline(always)]
    pub(super) unsafe fn run(&self, w: usize, rows: usize) {
        unsafe {
            match (w > S::LANES, w.is_multiple_of(S::LANES)) {
                (true, true) => self.rows::<true, true>(rows),
                (true, false) => self.rows::<true, false>(rows),
                (false, true) => self.rows::<false, true>(rows),
                (false, false) => self.rows::<false, false>(rows),
            }
        }
    }

    /// [`Block::sum`] for `rows` rows (at most [`Simd::ROWS`]).
    ///
    /// # Safety
    /// As [`Block::sum`]'s.
    #[inline(always)]
    unsafe fn rows<const TWO: bool, const FULL: bool>(&self, rows: usize) {
        unsafe {
            match rows {
                12 => self.sum::<12, TWO, FULL>(),
                11 => self.sum::<11, TWO, FULL>(),
                10 => self.sum::<10, TWO, FULL>(),
                9 => self.sum::<9, TWO, FULL>(),
                8 => self.sum::<8, TWO, FULL>(),
                7 => self.sum::<7, TWO, FULL>(),
                6 => self.sum::<6, TWO, FULL>(),
                5 => self.sum::<5, TWO, FULL>(),
                4 => self.sum::<4, TWO, FULL>(),
                3 => self.sum::<3, TWO, FULL>(),
                2 => self.sum::<2, TWO, FULL>(),
                _ => self.sum::<1, TWO, FULL>(),
            }
        }
    }

    /// The block's sums over `k` in registers, then one store per register
    /// (`FULL`: the last register is whole, no mask).
    ///
    /// # Safety
    /// Inside [`Simd::enabled`]; the block's `R` rows and its columns lie
    /// inside every operand.
    #[inline(always)]
    unsafe fn sum<const R: usize, const TWO: bool, const FULL: bool>(&self) {
        unsafe {
            let mut acc = [[S::zero(); 2]; R];
            let rows: [*const f32; R] = std::array::from_fn(|r| self.a.add(r * self.ars));
            for p in 0..self.k {
                let bp = self.b.add(p * self.brs);
                let (b0, b1) = if TWO {
                    (S::load(bp), load_reg::<S, FULL>(self.m1, bp.add(S::LANES)))
                } else {
                    (load_reg::<S, FULL>(self.m0, bp), S::zero())
                };
                let off = p * self.acs;
                for (acc, row) in acc.iter_mut().zip(&rows) {
                    let av = S::splat(*row.add(off));
                    acc[0] = S::fmadd(av, b0, acc[0]);
                    if TWO {
                        acc[1] = S::fmadd(av, b1, acc[1]);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                let cp = self.c.add(r * self.ldc);
                let (mut c0, mut c1) = (acc[0], acc[1]);
                if TWO {
                    let cp1 = cp.add(S::LANES);
                    if self.add {
                        c0 = S::add(c0, S::load(cp));
                        c1 = S::add(c1, load_reg::<S, FULL>(self.m1, cp1));
                    }
                    S::store(cp, c0);
                    store_reg::<S, FULL>(self.m1, cp1, c1);
                } else {
                    if self.add {
                        c0 = S::add(c0, load_reg::<S, FULL>(self.m0, cp));
                    }
                    store_reg::<S, FULL>(self.m0, cp, c0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic spread of values, exact in f32 and not all alike.
    fn fill(len: usize, seed: usize) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 7 + seed * 13) % 19) as f32 * 0.25 - 2.0)
            .collect()
    }

    /// Every block shape (full and partial rows and columns), both layouts
    /// of either operand, with and without accumulation, against a naive
    /// triple loop in f64, on every set this CPU has. The inputs are
    /// quarter-integers and the sums short, so every partial sum is exact
    /// in f32 and the results must be equal.
    #[test]
    fn blocks_match_a_naive_product_for_every_shape_and_layout() {
        let paths = crate::kernels::paths_to_test("blocks_match_a_naive_product");
        #[cfg(target_arch = "x86_64")]
        {
            use crate::kernels::Isa;
            use crate::kernels::x86_64::{avx2::Avx2, avx512::Avx512};
            if paths.contains(&Isa::Avx2) {
                match_naive::<Avx2>();
            }
            if paths.contains(&Isa::Avx512) {
                match_naive::<Avx512>();
            }
        }
        let _ = paths;
    }

    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn match_naive<S: Simd>() {
        for (m, k, n) in [
            (1, 1, 1),
            (6, 4, 16),
            (7, 3, 17),
            (13, 64, 2),
            (128, 4, 64),
            (4, 64, 1),
            (12, 0, 9),
            (5, 33, 40),
            (64, 128, 64),
            (9, 5, 8),
            (3, 7, 24),
            (25, 9, 48),
            (6, 19, 21),
        ] {
            for (a_t, b_t, beta) in [
                (false, false, 0.0),
                (true, false, 1.0),
                (false, true, 0.0),
                (true, true, 1.0),
            ] {
                let (a, b, c0) = (fill(m * k, 1), fill(k * n, 2), fill(m * n, 3));
                let av = if a_t {
                    View::transposed(&a, m)
                } else {
                    View::rows(&a, k)
                };
                let bv = if b_t {
                    View::transposed(&b, k)
                } else {
                    View::rows(&b, n)
                };
                // The result sits in a longer buffer, so a store past its
                // end would show.
                let mut c = c0.clone();
                c.extend([7.5; 40]);
                assert!(try_gemm::<S>(m, k, n, av, bv, beta, &mut c), "not taken");
                assert!(
                    c[m * n..].iter().all(|&v| v == 7.5),
                    "[{m},{k},{n}]: wrote past the end"
                );
                for i in 0..m {
                    for j in 0..n {
                        let dot: f64 = (0..k)
                            .map(|p| {
                                let x = av.data[i * av.rs + p * av.cs] as f64;
                                x * bv.data[p * bv.rs + j * bv.cs] as f64
                            })
                            .sum();
                        let want = dot + beta as f64 * c0[i * n + j] as f64;
                        let got = c[i * n + j] as f64;
                        let lanes = S::LANES;
                        assert_eq!(
                            got, want,
                            "{lanes} lanes [{m},{k},{n}] a_t {a_t} b_t {b_t} at ({i},{j})"
                        );
                    }
                }
            }
        }
    }

    /// Sizes past the L1-resident range and other betas are left to the
    /// general routine, untouched.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn large_or_scaled_products_are_declined() {
        use crate::kernels::x86_64::avx2::Avx2 as S;
        let (a, b) = (vec![1.0; 300 * 2], vec![1.0; 300 * 2]);
        let mut c = vec![5.0; 4];
        let (av, bv) = (View::rows(&a, 300), View::rows(&b, 2));
        assert!(!try_gemm::<S>(2, 300, 2, av, bv, 0.0, &mut c));
        let bv = View::rows(&b[..4], 2);
        let av = View::rows(&a[..4], 2);
        assert!(!try_gemm::<S>(2, 2, 2, av, bv, 0.5, &mut c));
        assert_eq!(c, [5.0; 4]);
    }
}
