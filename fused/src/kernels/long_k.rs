//! Row-major products with a long inner dimension (`k` of 512 and more: a
//! forward pass through a wide convolution's windows or a dense layer after
//! the stem) on the `gemm` crate's AVX-512 kernels. Measured on the Nature
//! CNN's shapes on one core, these run 1.1-2.2x matrixmultiply's (its
//! packing dominates when `n` is small); on the backward pass's shapes
//! (a transposed operand, or `k` of 64) matrixmultiply is as fast or faster,
//! so they stay there. Figures in `docs/performance.md`.

use super::View;

/// The shortest inner dimension taken here.
const MIN_K: usize = 512;

/// `c = a · b + beta · c` (`c` row-major `[m, n]`) when this routine applies
/// (both operands row-major, `k >= MIN_K`); `false`, with `c` untouched,
/// otherwise. Only on the AVX-512 path: the crate picks its kernel from the
/// CPU, so the forced narrower paths keep matrixmultiply's sums. The caller
/// has checked every operand's extent.
pub(super) fn try_gemm(
    m: usize,
    k: usize,
    n: usize,
    a: View<'_>,
    b: View<'_>,
    beta: f32,
    c: &mut [f32],
) -> bool {
    if k < MIN_K || a.cs != 1 || b.cs != 1 {
        return false;
    }
    // SAFETY: the caller's check keeps `(i, p)` at `i * a.rs + p` inside `a`,
    // `(p, j)` at `p * b.rs + j` inside `b` and `(i, j)` at `i * n + j` inside
    // `c` for the given shapes; `c` is a unique borrow, so it aliases neither
    // input. The crate computes `dst = alpha dst + beta lhs rhs` and reads
    // `dst` only when `read_dst` is set, so a `c` of NaNs is ignored at beta 0.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            beta != 0.0,
            a.data.as_ptr(),
            1,
            a.rs as isize,
            b.data.as_ptr(),
            1,
            b.rs as isize,
            beta,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
    true
}
