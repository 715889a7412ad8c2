//! AVX2 with FMA: 8 lanes, 16 registers; a partial register is read and
//! written through a lane mask of 32-bit integers (`vmaskmovps`, which
//! neither reads nor writes the lanes outside it).

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
}
