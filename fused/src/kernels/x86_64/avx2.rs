//! AVX2 with FMA: 8 lanes, 16 registers; a partial register is read and
//! written through a lane mask of 32-bit integers (`vmaskmovps`, which
//! neither reads nor writes the lanes outside it); a transposed operand is
//! copied to rows eight by eight through registers.

use crate::kernels::View;
use crate::kernels::simd::Simd;
use std::arch::x86_64::*;

/// The AVX2 + FMA set.
#[derive(Clone, Copy)]
pub struct Avx2;

#[target_feature(enable = "avx2,fma")]
unsafe fn enabled<R>(f: impl FnOnce() -> R) -> R {
    f()
}

// SAFETY: every method but `available` uses AVX2 or FMA instructions and is
// only called inside `enabled`, on a CPU where `available` is true.
unsafe impl Simd for Avx2 {
    type V = __m256;
    type Mask = __m256i;
    const LANES: usize = 8;
    const ROWS: usize = 6;

    fn available() -> bool {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }

    #[inline(always)]
    unsafe fn enabled<R>(f: impl FnOnce() -> R) -> R {
        // SAFETY: the caller checked that the CPU has AVX2 and FMA.
        unsafe { enabled(f) }
    }

    #[inline(always)]
    unsafe fn first(w: usize) -> __m256i {
        let w = w.min(Self::LANES) as i32;
        unsafe {
            _mm256_cmpgt_epi32(
                _mm256_set1_epi32(w),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            )
        }
    }

    #[inline(always)]
    unsafe fn zero() -> __m256 {
        unsafe { _mm256_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        unsafe { _mm256_set1_ps(x) }
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        unsafe { _mm256_loadu_ps(p) }
    }

    #[inline(always)]
    unsafe fn load_first(m: __m256i, p: *const f32) -> __m256 {
        unsafe { _mm256_maskload_ps(p, m) }
    }

    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        unsafe { _mm256_storeu_ps(p, v) }
    }

    #[inline(always)]
    unsafe fn store_first(m: __m256i, p: *mut f32, v: __m256) {
        unsafe { _mm256_maskstore_ps(p, m, v) }
    }

    #[inline(always)]
    unsafe fn fmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }

    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_add_ps(a, b) }
    }

    /// A transpose (`b.rs == 1`: a weight read as `bT`, each step) eight
    /// rows by eight columns at a time through registers; the edges and
    /// any other strides element by element. In CartPole's update on AVX2
    /// the copies took 2.3% of the samples element by element, 0.6% so.
    #[inline(always)]
    unsafe fn copy_rows(k: usize, n: usize, b: View<'_>, out: &mut [f32]) {
        let (k8, n8) = if b.rs == 1 {
            (k / 8 * 8, n / 8 * 8)
        } else {
            (0, 0)
        };
        for p0 in (0..k8).step_by(8) {
            for j0 in (0..n8).step_by(8) {
                // SAFETY: inside `enabled` (the caller's contract); rows
                // j0..j0 + 8 of the transpose hold columns p0..p0 + 8 of
                // `b`, inside it as `b` covers [k, n], and `out` holds
                // rows p0..p0 + 8 of n floats.
                unsafe {
                    let src = |j: usize| b.data.as_ptr().add((j0 + j) * b.cs + p0);
                    let dst = out.as_mut_ptr().add(p0 * n + j0);
                    transpose8(src, |p, v| _mm256_storeu_ps(dst.add(p * n), v));
                }
            }
        }
        for p in 0..k {
            let from = if p < k8 { n8 } else { 0 };
            for (j, o) in out[p * n..(p + 1) * n].iter_mut().enumerate().skip(from) {
                *o = b.data[p * b.rs + j * b.cs];
            }
        }
    }
}

/// The 8 x 8 transpose of the rows at `src(0)` .. `src(7)`: `store(p, v)`
/// receives its row `p` (element `j` of the input's row `j`, column `p`).
///
/// # Safety
/// Inside [`Avx2::enabled`]; each `src(j)` holds 8 floats.
#[inline(always)]
unsafe fn transpose8(src: impl Fn(usize) -> *const f32, mut store: impl FnMut(usize, __m256)) {
    unsafe {
        let r: [__m256; 8] = std::array::from_fn(|j| _mm256_loadu_ps(src(j)));
        // Pairs of rows interleaved, then pairs of pairs, then halves.
        let t = [
            _mm256_unpacklo_ps(r[0], r[1]),
            _mm256_unpackhi_ps(r[0], r[1]),
            _mm256_unpacklo_ps(r[2], r[3]),
            _mm256_unpackhi_ps(r[2], r[3]),
            _mm256_unpacklo_ps(r[4], r[5]),
            _mm256_unpackhi_ps(r[4], r[5]),
            _mm256_unpacklo_ps(r[6], r[7]),
            _mm256_unpackhi_ps(r[6], r[7]),
        ];
        let u = [
            _mm256_shuffle_ps::<0x44>(t[0], t[2]),
            _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
            _mm256_shuffle_ps::<0x44>(t[1], t[3]),
            _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
            _mm256_shuffle_ps::<0x44>(t[4], t[6]),
            _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
            _mm256_shuffle_ps::<0x44>(t[5], t[7]),
            _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
        ];
        for p in 0..4 {
            store(p, _mm256_permute2f128_ps::<0x20>(u[p], u[p + 4]));
            store(p + 4, _mm256_permute2f128_ps::<0x31>(u[p], u[p + 4]));
        }
    }
}
