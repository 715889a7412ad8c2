//! The x86-64 instruction sets of the kernels: the [`super::simd::Simd`]
//! vectors of AVX2 with FMA and of AVX-512F, and the clock measurement
//! behind the peak ([`super::peak`]).

pub mod avx2;
pub mod avx512;
pub mod clock;
