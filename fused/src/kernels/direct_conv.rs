//! A stride-1 convolution on NHWC buffers summed where its input lies, with
//! no windows laid out: each block of 12 output pixels by up to 32 channels
//! is summed in AVX-512 registers tap by tap, each tap reading its pixels'
//! `c_in` contiguous floats (a table of zeros where a tap falls in the
//! padding). A convolution through `im2col` copies every input float `kh x
//! kw` times first and, on the way back, adds every window's gradient back
//! (`col2im`); the IMPALA ResNet's 3x3 convolutions with 16 and 32 channels
//! spent a fifth of their update there.
//!
//! The sums are those of our blocks over the laid-out windows
//! (`small_gemm`): the same fused multiply-adds in the same order over the
//! window `[ky, kx, c_in]`, in the same slices of 256 (matrixmultiply's
//! blocking, which the windowed product keeps for a patch over 256), a
//! padding tap multiplying zeros as the laid-out zeros do. So a forward pass
//! gives the windowed product's bits (the tests compare the two). The input
//! gradient of a stride-1 convolution is the same sum over the output's
//! gradient with the kernel flipped and transposed ([`flip`]), in another
//! order than `col2im`'s, so there the numbers change in the last bits.
//!
//! Taken on the AVX-512 path only, for the shapes that [`fits`] describes
//! ([`Direct::new`]); the caller lays the windows out otherwise.

/// A stride-1 convolution's shape as the kernel reads it: a `[h, w, c_in]`
/// input per sample, `kh x kw` taps, `pad` zeros on every side, `c_out`
/// outputs per pixel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taps {
    pub h: usize,
    pub w: usize,
    pub c_in: usize,
    pub kh: usize,
    pub kw: usize,
    pub pad: usize,
    pub c_out: usize,
}

/// The window sums are cut into slices of this many floats, as the windowed
/// product cuts its inner dimension.
const SLICE: usize = 256;

impl Taps {
    pub fn out_h(&self) -> usize {
        self.h + 2 * self.pad + 1 - self.kh
    }

    pub fn out_w(&self) -> usize {
        self.w + 2 * self.pad + 1 - self.kw
    }

    /// The window's floats (`kh * kw * c_in`).
    fn patch(&self) -> usize {
        self.kh * self.kw * self.c_in
    }

    /// The transposed convolution that carries an output's gradient back to
    /// the input: over `[out_h, out_w, c_out]`, the same taps, `kh - 1 -
    /// pad` of padding, `c_in` outputs, with [`flip`]'s weights; `None`
    /// for a kernel that is not square or is not longer than its padding.
    pub fn backward(&self) -> Option<Taps> {
        (self.kh == self.kw && self.pad < self.kh).then(|| Taps {
            h: self.out_h(),
            w: self.out_w(),
            c_in: self.c_out,
            kh: self.kh,
            kw: self.kw,
            pad: self.kh - 1 - self.pad,
            c_out: self.c_in,
        })
    }
}

/// The kernel for one shape: its taps' offsets, worked out once per pass
/// rather than per chunk of samples.
pub struct Direct {
    t: Taps,
    table: Vec<u32>,
}

impl Direct {
    /// The kernel for `t` on the active path; `None` where it does not
    /// apply (the caller lays the windows out).
    pub fn new(t: Taps) -> Option<Self> {
        Self::on(super::active(), t)
    }

    /// [`Direct::new`] on the path `isa`; tests call it whatever the
    /// active path: on AVX-512, for a shape that [`fits`].
    pub fn on(isa: super::Isa, t: Taps) -> Option<Self> {
        (isa == super::Isa::Avx512 && avx::available() && fits(&t)).then(|| Self {
            table: offsets(&t),
            t,
        })
    }

    /// `out` (`[m, out_h, out_w, c_out]`, overwritten) = the convolution of
    /// `x` (`[m, h, w, c_in]`) with `w` (`[kh, kw, c_in, c_out]`), no bias.
    /// Panics when an operand is smaller than its shape (a bug, never
    /// input).
    pub fn conv(&self, x: &[f32], m: usize, w: &[f32], out: &mut [f32]) {
        let t = &self.t;
        assert!(
            x.len() >= m * t.h * t.w * t.c_in
                && w.len() >= t.patch() * t.c_out
                && out.len() >= m * t.out_h() * t.out_w() * t.c_out,
            "direct convolution operands smaller than {t:?} for {m} samples"
        );
        // SAFETY: AVX-512F is present (checked when made), the operands
        // cover their shapes (asserted above), and every offset in the table
        // lies inside a sample's input.
        unsafe { avx::conv(t, &self.table, (x, m), w, out) };
    }
}

/// The shapes whose windows our blocks would sum (so the bits are theirs):
/// at most 64 outputs and a window under 512 floats (`small_gemm`'s
/// operands; from 512 the `gemm` crate takes the windows); a channel count
/// that whole slices hold and that fills a register's 16 lanes; a kernel
/// that fits the padded input; an input whose offsets fit the table's u32.
fn fits(t: &Taps) -> bool {
    let channels = t.c_in.is_multiple_of(16) && SLICE.is_multiple_of(t.c_in);
    let shape = t.h + 2 * t.pad >= t.kh && t.w + 2 * t.pad >= t.kw;
    let offsets = t.h * t.w * t.c_in < NONE as usize;
    channels && shape && offsets && (1..=64).contains(&t.c_out) && t.patch() < 512
}

/// `w` (`[kh, kw, c_in, c_out]`) flipped in both axes and transposed to
/// `[kh, kw, c_out, c_in]` into `out`: the weights of [`Taps::backward`].
pub fn flip(t: &Taps, w: &[f32], out: &mut Vec<f32>) {
    let (k, ci, co) = (t.kh * t.kw, t.c_in, t.c_out);
    out.resize(k * ci * co, 0.0);
    for tap in 0..k {
        let (src, dst) = (
            &w[tap * ci * co..][..ci * co],
            &mut out[(k - 1 - tap) * ci * co..],
        );
        for i in 0..ci {
            for o in 0..co {
                dst[o * ci + i] = src[i * co + o];
            }
        }
    }
}

/// A tap in the padding.
const NONE: u32 = u32::MAX;

/// For each output pixel of a sample, then each tap `[ky, kx]`: the offset
/// of its input pixel's first channel, or [`NONE`] in the padding; then
/// one row of [`NONE`]s for rows past the end.
fn offsets(t: &Taps) -> Vec<u32> {
    let mut table = Vec::with_capacity((t.out_h() * t.out_w() + 1) * t.kh * t.kw);
    for oy in 0..t.out_h() {
        for ox in 0..t.out_w() {
            for ky in 0..t.kh {
                for kx in 0..t.kw {
                    let iy = (oy + ky).checked_sub(t.pad).filter(|&y| y < t.h);
                    let ix = (ox + kx).checked_sub(t.pad).filter(|&x| x < t.w);
                    table.push(match (iy, ix) {
                        (Some(y), Some(x)) => ((y * t.w + x) * t.c_in) as u32,
                        _ => NONE,
                    });
                }
            }
        }
    }
    table.extend(std::iter::repeat_n(NONE, t.kh * t.kw));
    table
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use super::{NONE, SLICE, Taps};
    use crate::kernels::small_gemm::avx::{LANES, mask};
    use std::arch::x86_64::*;

    /// Output pixels of a block (a block is one or two registers wide).
    const MR: usize = 12;
    /// What a tap in the padding reads: zeros, `c_in <= SLICE` of them.
    static ZEROS: [f32; SLICE] = [0.0; SLICE];

    pub fn available() -> bool {
        std::is_x86_feature_detected!("avx512f")
    }

    /// Every block of the output, a 32-channel panel at a time.
    ///
    /// # Safety
    /// AVX-512F present; `x` holds `m` inputs, `w` the weights and `out` `m`
    /// outputs of `t`; `table` is [`super::offsets`]`(t)`.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn conv(
        t: &Taps,
        table: &[u32],
        (x, m): (&[f32], usize),
        w: &[f32],
        out: &mut [f32],
    ) {
        let (taps, pixels) = (t.kh * t.kw, t.out_h() * t.out_w());
        let in_len = t.h * t.w * t.c_in;
        let rows = m * pixels;
        let past_end = table[pixels * taps..].as_ptr();
        let mut j = 0;
        while j < t.c_out {
            let cols = (2 * LANES).min(t.c_out - j);
            let mut i = 0;
            while i < rows {
                let valid = MR.min(rows - i);
                let mut block = Block {
                    base: [x.as_ptr(); MR],
                    tab: [past_end; MR],
                    valid,
                    taps,
                    c_in: t.c_in,
                    w: w.as_ptr().wrapping_add(j),
                    ldw: t.c_out,
                    c: out.as_mut_ptr().wrapping_add(i * t.c_out + j),
                    m0: mask(cols),
                    m1: mask(cols.saturating_sub(LANES)),
                };
                for r in 0..valid {
                    let (s, p) = ((i + r) / pixels, (i + r) % pixels);
                    block.base[r] = x[s * in_len..].as_ptr();
                    block.tab[r] = table[p * taps..].as_ptr();
                }
                // SAFETY: the block's rows and masked columns lie inside
                // `out`, its taps inside `table` and their offsets inside a
                // sample of `x`, as the caller guarantees.
                unsafe {
                    if cols > LANES {
                        block.sum::<true>()
                    } else {
                        block.sum::<false>()
                    }
                }
                i += valid;
            }
            j += cols;
        }
    }

    /// One block of the output: `valid` pixels (the rest read zeros and
    /// are not stored) by the columns in the masks.
    struct Block {
        /// Each pixel's sample input.
        base: [*const f32; MR],
        /// Each pixel's row of tap offsets.
        tab: [*const u32; MR],
        valid: usize,
        taps: usize,
        c_in: usize,
        /// The block's first column of the weights' first row.
        w: *const f32,
        ldw: usize,
        /// The block's first element of the output.
        c: *mut f32,
        m0: __mmask16,
        m1: __mmask16,
    }

    impl Block {
        /// The block's sums tap by tap, stored (then added to) at each
        /// slice's end.
        ///
        /// # Safety
        /// As [`conv`]'s, for this block.
        #[inline(always)]
        unsafe fn sum<const TWO: bool>(&self) {
            unsafe {
                let mut acc = [[_mm512_setzero_ps(); 2]; MR];
                let mut add = false;
                for tap in 0..self.taps {
                    if tap > 0 && (tap * self.c_in).is_multiple_of(SLICE) {
                        self.store::<TWO>(&mut acc, add);
                        add = true;
                    }
                    let src: [*const f32; MR] = std::array::from_fn(|r| {
                        let off = *self.tab[r].add(tap);
                        if off == NONE {
                            ZEROS.as_ptr()
                        } else {
                            self.base[r].add(off as usize)
                        }
                    });
                    let wt = self.w.add(tap * self.c_in * self.ldw);
                    for ci in 0..self.c_in {
                        let bp = wt.add(ci * self.ldw);
                        let b0 = _mm512_maskz_loadu_ps(self.m0, bp);
                        let b1 = if TWO {
                            _mm512_maskz_loadu_ps(self.m1, bp.add(LANES))
                        } else {
                            _mm512_setzero_ps()
                        };
                        for (acc, src) in acc.iter_mut().zip(&src) {
                            let av = _mm512_set1_ps(*src.add(ci));
                            acc[0] = _mm512_fmadd_ps(av, b0, acc[0]);
                            if TWO {
                                acc[1] = _mm512_fmadd_ps(av, b1, acc[1]);
                            }
                        }
                    }
                }
                self.store::<TWO>(&mut acc, add);
            }
        }

        /// The valid rows' sums stored, or added to what is stored, and
        /// the sums zeroed for the next slice.
        ///
        /// # Safety
        /// As [`conv`]'s, for this block.
        #[inline(always)]
        unsafe fn store<const TWO: bool>(&self, acc: &mut [[__m512; 2]; MR], add: bool) {
            unsafe {
                for (r, acc) in acc.iter_mut().enumerate().take(self.valid) {
                    let cp = self.c.add(r * self.ldw);
                    let (mut c0, mut c1) = (acc[0], acc[1]);
                    if add {
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
                *acc = [[_mm512_setzero_ps(); 2]; MR];
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod avx {
    use super::Taps;

    pub fn available() -> bool {
        false
    }

    /// Never called: [`available`] is false.
    pub unsafe fn conv(_: &Taps, _: &[u32], _: (&[f32], usize), _: &[f32], _: &mut [f32]) {
        unreachable!("AVX-512 off x86-64")
    }
}
