//! AVX-512F: 16 lanes, 32 registers; a partial register is read and written
//! under a mask register, and a strided operand is copied to rows by a
//! gather.

use crate::kernels::View;
use crate::kernels::simd::Simd;
use std::arch::x86_64::*;

/// The AVX-512F set.
#[derive(Clone, Copy)]
pub struct Avx512;

#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn enabled<R>(f: impl FnOnce() -> R) -> R {
    f()
}

// SAFETY: every method but `available` uses AVX-512F instructions and is
// only called inside `enabled`, on a CPU where `available` is true.
unsafe impl Simd for Avx512 {
    type V = __m512;
    type Mask = __mmask16;
    const LANES: usize = 16;
    const ROWS: usize = 12;

    fn available() -> bool {
        std::is_x86_feature_detected!("avx512f")
    }

    #[inline(always)]
    unsafe fn enabled<R>(f: impl FnOnce() -> R) -> R {
        // SAFETY: the caller checked that the CPU has AVX-512F (and with it
        // AVX2 and FMA).
        unsafe { enabled(f) }
    }

    #[inline(always)]
    unsafe fn first(w: usize) -> __mmask16 {
        if w >= Self::LANES {
            0xffff
        } else {
            ((1u32 << w) - 1) as __mmask16
        }
    }

    #[inline(always)]
    unsafe fn zero() -> __m512 {
        unsafe { _mm512_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        unsafe { _mm512_set1_ps(x) }
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        unsafe { _mm512_loadu_ps(p) }
    }

    #[inline(always)]
    unsafe fn load_first(m: __mmask16, p: *const f32) -> __m512 {
        unsafe { _mm512_maskz_loadu_ps(m, p) }
    }

    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        unsafe { _mm512_storeu_ps(p, v) }
    }

    #[inline(always)]
    unsafe fn store_first(m: __mmask16, p: *mut f32, v: __m512) {
        unsafe { _mm512_mask_storeu_ps(p, m, v) }
    }

    #[inline(always)]
    unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }

    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_add_ps(a, b) }
    }

    /// Sixteen strided elements at a time by a gather.
    #[inline(always)]
    unsafe fn copy_rows(k: usize, n: usize, b: View<'_>, out: &mut [f32]) {
        unsafe {
            let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            let offsets = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(b.cs as i32));
            for p in 0..k {
                let mut j = 0;
                while j < n {
                    let m = Self::first(n - j);
                    // Lanes j..j + 16 under the mask are columns of row p,
                    // inside `b` and `out`.
                    let src = b.data.as_ptr().add(p * b.rs + j * b.cs);
                    let v =
                        _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), m, offsets, src.cast());
                    _mm512_mask_storeu_ps(out.as_mut_ptr().add(p * n + j), m, v);
                    j += Self::LANES;
                }
            }
        }
    }
}
