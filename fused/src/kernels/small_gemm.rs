//! A matrix product for the fused engine's operands, which are small enough to
//! stay in the first-level cache (a minibatch of ~128 rows through layers ~64
//! wide). A general routine (matrixmultiply) copies both operands into packed
//! panels at every call and works in 8-lane AVX2 registers; here each 12 x 32
//! block of the result is summed in 24 AVX-512 registers straight from the
//! operands where they lie: the left one through its strides (a broadcast per
//! element), the right one by rows, which must then be contiguous, so a
//! transposed right operand is first gathered into a copy (one pass over
//! `k x n` elements, against `m x k x n` multiply-adds). Its measured speed
//! against matrixmultiply is in `docs/performance.md`.
//!
//! Used only on the AVX-512 path ([`super::Isa::Avx512`]) and where the right
//! operand is small; [`super::gemm`] falls back to matrixmultiply everywhere else.

use super::View;

/// The largest right operand (`k * n` elements) taken here: 64 KiB, so one
/// 32-column panel of it (at most 32 KiB for k <= 256) stays in L1 while every
/// row block of the left operand passes over it.
const MAX_RIGHT: usize = 16 * 1024;
/// The longest inner dimension taken here (see [`MAX_RIGHT`]).
const MAX_K: usize = 256;

/// `c = a · b + beta · c` (`c` row-major `[m, n]`) when this routine applies
/// (AVX-512F present, `beta` 0 or 1, a small right operand); `false`,
/// with `c` untouched, otherwise. The caller has checked every operand's extent.
pub(super) fn try_gemm(
    m: usize,
    k: usize,
    n: usize,
    a: View<'_>,
    b: View<'_>,
    beta: f32,
    c: &mut [f32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // A transposed right operand is gathered with 32-bit lane offsets.
        let gatherable = b.cs == 1 || b.cs <= i32::MAX as usize / 16;
        let beta_fits = beta == 0.0 || beta == 1.0;
        let fits = k <= MAX_K && k * n <= MAX_RIGHT && beta_fits && gatherable;
        if fits && avx::available() {
            avx::gemm(m, k, n, a, b, beta == 1.0, c);
            return true;
        }
    }
    let _ = (m, k, n, a, b, beta, c);
    false
}

/// `c = a · b + beta · c` for a few rows of `a` (`few_rows` calls it with
/// at most 16) and a row-major `b` of any size, when
/// AVX-512F is present and `beta` is 0 or 1: with one block of rows, each
/// 32-column panel of `b` is read once, so its size does not matter (what
/// [`MAX_RIGHT`] guards against is re-reading panels that left L1).
pub(super) fn try_few_rows(
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    b: &[f32],
    beta: f32,
    c: &mut [f32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let fits = beta == 0.0 || beta == 1.0;
        if fits && avx::available() {
            let (a, b) = (View::rows(&a[..m * k], k), View::rows(&b[..k * n], n));
            avx::gemm(m, k, n, a, b, beta == 1.0, c);
            return true;
        }
    }
    let _ = (m, k, n, a, b, beta, c);
    false
}

/// `c = a · b + beta · c` over a long inner dimension (`k > MAX_K`) with a
/// narrow row-major right operand, in slices of [`MAX_K`] rows of `b`, when
/// AVX-512F is present and `beta` is 0 or 1; `false`, with `c` untouched,
/// otherwise. These are the products matrixmultiply would take otherwise
/// (a weight gradient `xᵀ dy`, a convolution's windows `[rows, patch]`
/// against its weights with a patch of 257 to 511), and it packs both
/// operands of each anew at every call, a sixth of the IMPALA ResNet's
/// update. Its own blocking of the inner dimension (its `kc`) is [`MAX_K`]
/// for f32, with the same fused multiply-adds in the same order per slice
/// and each slice's sums added into the result as it adds them: so this
/// gives its numbers to the bit (the kernel tests compare the two). The
/// caller has checked every operand's extent.
pub(super) fn try_sliced(
    m: usize,
    k: usize,
    n: usize,
    a: View<'_>,
    b: View<'_>,
    beta: f32,
    c: &mut [f32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let beta_fits = beta == 0.0 || beta == 1.0;
        let sliceable = k > MAX_K && b.cs == 1 && n * MAX_K <= MAX_RIGHT;
        if sliceable && beta_fits && avx::available() {
            for (s, k0) in (0..k).step_by(MAX_K).enumerate() {
                let a = View {
                    data: &a.data[k0 * a.cs..],
                    ..a
                };
                let b = View::rows(&b.data[k0 * b.rs..], b.rs);
                let add = s > 0 || beta == 1.0;
                avx::gemm(m, MAX_K.min(k - k0), n, a, b, add, c);
            }
            return true;
        }
    }
    let _ = (m, k, n, a, b, beta, c);
    false
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx {
    use super::View;
    use std::arch::x86_64::*;
    use std::cell::RefCell;

    /// Rows of a result block.
    const MR: usize = 12;
    /// Lanes of a register; a block is one or two registers wide.
    pub(in crate::kernels) const LANES: usize = 16;

    thread_local! {
        /// A transposed right operand, copied to contiguous rows.
        static RIGHT: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    }

    pub fn available() -> bool {
        std::is_x86_feature_detected!("avx512f")
    }

    /// The product through 12 x 32 blocks; `b` is copied to contiguous rows
    /// first unless it already has them.
    pub fn gemm(m: usize, k: usize, n: usize, a: View<'_>, b: View<'_>, add: bool, c: &mut [f32]) {
        if b.cs == 1 {
            // SAFETY: AVX-512F is present (the caller asked `available`); the
            // caller checked that `a` covers [m, k], `b` [k, n] and `c` [m, n].
            unsafe { blocks(m, k, n, a, b.data, b.rs, add, c) };
            return;
        }
        RIGHT.with_borrow_mut(|right| {
            right.resize(k * n, 0.0);
            // SAFETY: AVX-512F is present; `b` covers [k, n] (checked by the
            // caller) and `right` holds k * n elements.
            unsafe { transpose(k, n, b, right) };
            // SAFETY: as above; `right` holds exactly [k, n] row-major.
            unsafe { blocks(m, k, n, a, right, n, add, c) };
        });
    }

    /// `out` (`[k, n]` row-major) = `b`, sixteen strided elements at a time
    /// by a gather.
    ///
    /// # Safety
    /// AVX-512F present; `b` covers `[k, n]`, `out` holds `k * n` elements,
    /// and `15 * b.cs` fits an i32 (`try_gemm` checks).
    #[target_feature(enable = "avx512f")]
    unsafe fn transpose(k: usize, n: usize, b: View<'_>, out: &mut [f32]) {
        let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let offsets = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(b.cs as i32));
        for p in 0..k {
            let mut j = 0;
            while j < n {
                let m = mask(n - j);
                // SAFETY: lanes j..j + 16 under the mask are columns of row
                // p, inside `b` and `out`.
                unsafe {
                    let src = b.data.as_ptr().add(p * b.rs + j * b.cs);
                    let v =
                        _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), m, offsets, src.cast());
                    _mm512_mask_storeu_ps(out.as_mut_ptr().add(p * n + j), m, v);
                }
                j += LANES;
            }
        }
    }

    /// Every block of `c`, a 32-column panel at a time (the panel of `b` stays
    /// in L1 while all row blocks pass over it).
    ///
    /// # Safety
    /// AVX-512F present; `a` covers `[m, k]` through its strides, `b` holds
    /// `[k, n]` with rows `rs` apart and contiguous columns, `c` holds `[m, n]`
    /// row-major.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    unsafe fn blocks(
        m: usize,
        k: usize,
        n: usize,
        a: View<'_>,
        b: &[f32],
        rs: usize,
        add: bool,
        c: &mut [f32],
    ) {
        let mut j = 0;
        while j < n {
            let w = (2 * LANES).min(n - j);
            let mut i = 0;
            while i < m {
                let rows = MR.min(m - i);
                let block = Block {
                    k,
                    a: a.data.as_ptr().wrapping_add(i * a.rs),
                    ars: a.rs,
                    acs: a.cs,
                    b: b.as_ptr().wrapping_add(j),
                    brs: rs,
                    c: c.as_mut_ptr().wrapping_add(i * n + j),
                    ldc: n,
                    m0: mask(w),
                    m1: mask(w.saturating_sub(LANES)),
                    add,
                };
                // SAFETY: rows i..i + rows and columns j..j + w lie inside
                // every operand, as the caller guarantees for the whole
                // product, and the masks cover exactly those columns.
                unsafe {
                    match (rows, w > LANES) {
                        (12, true) => block.sum::<12, true>(),
                        (12, false) => block.sum::<12, false>(),
                        (11, true) => block.sum::<11, true>(),
                        (11, false) => block.sum::<11, false>(),
                        (10, true) => block.sum::<10, true>(),
                        (10, false) => block.sum::<10, false>(),
                        (9, true) => block.sum::<9, true>(),
                        (9, false) => block.sum::<9, false>(),
                        (8, true) => block.sum::<8, true>(),
                        (8, false) => block.sum::<8, false>(),
                        (7, true) => block.sum::<7, true>(),
                        (7, false) => block.sum::<7, false>(),
                        (6, true) => block.sum::<6, true>(),
                        (6, false) => block.sum::<6, false>(),
                        (5, true) => block.sum::<5, true>(),
                        (5, false) => block.sum::<5, false>(),
                        (4, true) => block.sum::<4, true>(),
                        (4, false) => block.sum::<4, false>(),
                        (3, true) => block.sum::<3, true>(),
                        (3, false) => block.sum::<3, false>(),
                        (2, true) => block.sum::<2, true>(),
                        (2, false) => block.sum::<2, false>(),
                        (_, true) => block.sum::<1, true>(),
                        (_, false) => block.sum::<1, false>(),
                    }
                }
                i += rows;
            }
            j += w;
        }
    }

    /// The first `w` (at most 16) lanes.
    pub(in crate::kernels) fn mask(w: usize) -> __mmask16 {
        if w >= LANES {
            0xffff
        } else {
            ((1u32 << w) - 1) as __mmask16
        }
    }

    /// One block of the result: `R` rows by the columns in the masks (the
    /// second register's only when `TWO`).
    struct Block {
        k: usize,
        /// The block's first row of the left operand.
        a: *const f32,
        ars: usize,
        acs: usize,
        /// The block's first column of the right operand's first row.
        b: *const f32,
        brs: usize,
        /// The block's first element of the result.
        c: *mut f32,
        ldc: usize,
        m0: __mmask16,
        m1: __mmask16,
        add: bool,
    }

    impl Block {
        /// The block's sums over `k` in registers, then one (masked) store.
        ///
        /// # Safety
        /// AVX-512F present; the block's `R` rows and masked columns lie
        /// inside every operand.
        #[inline(always)]
        unsafe fn sum<const R: usize, const TWO: bool>(&self) {
            unsafe {
                let mut acc = [[_mm512_setzero_ps(); 2]; R];
                let rows: [*const f32; R] = std::array::from_fn(|r| self.a.add(r * self.ars));
                for p in 0..self.k {
                    let bp = self.b.add(p * self.brs);
                    let b0 = _mm512_maskz_loadu_ps(self.m0, bp);
                    let b1 = if TWO {
                        _mm512_maskz_loadu_ps(self.m1, bp.add(LANES))
                    } else {
                        _mm512_setzero_ps()
                    };
                    let off = p * self.acs;
                    for (acc, row) in acc.iter_mut().zip(&rows) {
                        let av = _mm512_set1_ps(*row.add(off));
                        acc[0] = _mm512_fmadd_ps(av, b0, acc[0]);
                        if TWO {
                            acc[1] = _mm512_fmadd_ps(av, b1, acc[1]);
                        }
                    }
                }
                for (r, acc) in acc.iter().enumerate() {
                    let cp = self.c.add(r * self.ldc);
                    let (mut c0, mut c1) = (acc[0], acc[1]);
                    if self.add {
                        c0 = _mm512_add_ps(c0, _mm512_maskz_loadu_ps(self.m0, cp));
                        if TWO {
                            c1 = _mm512_add_ps(c1, _mm512_maskz_loadu_ps(self.m1, cp.add(LANES)));
                        }
                    }
                    _mm512_mask_storeu_ps(cp, self.m0, c0);
                    if TWO {
                        _mm512_mask_storeu_ps(cp.add(LANES), self.m1, c1);
                    }
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
    /// triple loop in f64. The inputs are quarter-integers and the sums short,
    /// so every partial sum is exact in f32 and the results must be equal.
    #[test]
    fn blocks_match_a_naive_product_for_every_shape_and_layout() {
        let paths = super::super::paths_to_test("blocks_match_a_naive_product");
        if !paths.contains(&super::super::Isa::Avx512) {
            return;
        }
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
                let mut c = c0.clone();
                #[cfg(target_arch = "x86_64")]
                assert!(try_gemm(m, k, n, av, bv, beta, &mut c), "not taken");
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
                        assert_eq!(got, want, "[{m},{k},{n}] a_t {a_t} b_t {b_t} at ({i},{j})");
                    }
                }
            }
        }
    }

    /// Sizes past the L1-resident range and other betas are left to the
    /// general routine, untouched.
    #[test]
    fn large_or_scaled_products_are_declined() {
        let (a, b) = (vec![1.0; 300 * 2], vec![1.0; 300 * 2]);
        let mut c = vec![5.0; 4];
        let (av, bv) = (View::rows(&a, 300), View::rows(&b, 2));
        assert!(!try_gemm(2, 300, 2, av, bv, 0.0, &mut c));
        let bv = View::rows(&b[..4], 2);
        let av = View::rows(&a[..4], 2);
        assert!(!try_gemm(2, 2, 2, av, bv, 0.5, &mut c));
        assert_eq!(c, [5.0; 4]);
    }
}
