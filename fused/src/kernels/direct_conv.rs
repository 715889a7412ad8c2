//! A stride-1 convolution on NHWC buffers summed where its input lies, with
//! no windows laid out: each block of output pixels by two registers of
//! channels (12 x 32 on AVX-512, 6 x 16 on AVX2) is summed in registers tap
//! by tap, each tap reading its pixels'
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
//! Taken on the AVX2 and AVX-512 paths, for the shapes that [`fits`]
//! describes ([`Direct::new`]); the caller lays the windows out otherwise.
//! The two sets give the same bits (the same sums in the same order).

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
    isa: super::Isa,
}

impl Direct {
    /// The kernel for `t` on the active path; `None` where it does not
    /// apply (the caller lays the windows out).
    pub fn new(t: Taps) -> Option<Self> {
        Self::on(super::active(), t)
    }

    /// [`Direct::new`] on the path `isa`; tests call it whatever the
    /// active path: on a path with our blocks that this CPU has, for a
    /// shape that [`fits`].
    pub fn on(isa: super::Isa, t: Taps) -> Option<Self> {
        (super::has_blocks(isa) && fits(&t)).then(|| Self {
            table: offsets(&t),
            t,
            isa,
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
        let call = Call {
            t,
            table: &self.table,
            x: (x, m),
            w,
            out,
        };
        // The path's set is present: checked when made.
        super::with_simd(self.isa, call).expect("the direct kernel's set, checked when made");
    }
}

use super::simd::{Simd, WithSimd, load_reg, store_reg};

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

/// One convolution's operands: `x` holds `m` inputs, `w` the weights and
/// `out` `m` outputs of `t` (checked by [`Direct::conv`]); `table` is
/// [`offsets`]`(t)`.
struct Call<'a> {
    t: &'a Taps,
    table: &'a [u32],
    x: (&'a [f32], usize),
    w: &'a [f32],
    out: &'a mut [f32],
}

impl WithSimd for Call<'_> {
    type Output = ();

    /// Every block of the output, a panel of two registers' channels at a
    /// time.
    unsafe fn run<S: Simd>(self) {
        let Call {
            t,
            table,
            x,
            w,
            out,
        } = self;
        // SAFETY: the CPU has the set (the caller's guarantee); the operands
        // cover their shapes and every offset in the table lies inside a
        // sample's input, as [`Direct::conv`] checked.
        unsafe {
            S::enabled(
                #[inline(always)]
                || conv_blocks::<S>(t, table, x, w, out),
            )
        }
    }
}

/// [`Call`]'s convolution inside [`Simd::enabled`].
///
/// # Safety
/// Inside [`Simd::enabled`], with [`Call`]'s operands.
#[inline(always)]
unsafe fn conv_blocks<S: Simd>(
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
        let cols = (2 * S::LANES).min(t.c_out - j);
        let mut i = 0;
        while i < rows {
            let valid = S::ROWS.min(rows - i);
            // SAFETY: inside `enabled`.
            let (m0, m1) = unsafe { (S::first(cols), S::first(cols.saturating_sub(S::LANES))) };
            let mut block = Block::<S> {
                base: [x.as_ptr(); MAX_ROWS],
                tab: [past_end; MAX_ROWS],
                valid,
                taps,
                c_in: t.c_in,
                w: w.as_ptr().wrapping_add(j),
                ldw: t.c_out,
                c: out.as_mut_ptr().wrapping_add(i * t.c_out + j),
                m0,
                m1,
            };
            for r in 0..valid {
                let (s, p) = ((i + r) / pixels, (i + r) % pixels);
                block.base[r] = x[s * in_len..].as_ptr();
                block.tab[r] = table[p * taps..].as_ptr();
            }
            // SAFETY: the block's rows and its columns lie inside `out`,
            // its taps inside `table` and their offsets inside a sample of
            // `x`, as the caller guarantees.
            unsafe {
                match (cols > S::LANES, cols % S::LANES == 0) {
                    (true, true) => block.rows::<true, true>(),
                    (true, false) => block.rows::<true, false>(),
                    (false, true) => block.rows::<false, true>(),
                    (false, false) => block.rows::<false, false>(),
                }
            }
            i += valid;
        }
        j += cols;
    }
}

/// The most output pixels of a block on any set ([`Simd::ROWS`]).
const MAX_ROWS: usize = 12;
/// What a tap in the padding reads: zeros, `c_in <= SLICE` of them.
static ZEROS: [f32; SLICE] = [0.0; SLICE];

/// One block of the output: `valid` pixels (the set's rows, of which the
/// ones past the output read zeros and are not stored) by one register of
/// channels (the lanes in `m0`) or two (all of the first, `m1` of the
/// second).
struct Block<S: Simd> {
    /// Each pixel's sample input.
    base: [*const f32; MAX_ROWS],
    /// Each pixel's row of tap offsets.
    tab: [*const u32; MAX_ROWS],
    valid: usize,
    taps: usize,
    c_in: usize,
    /// The block's first column of the weights' first row.
    w: *const f32,
    ldw: usize,
    /// The block's first element of the output.
    c: *mut f32,
    m0: S::Mask,
    m1: S::Mask,
}

impl<S: Simd> Block<S> {
    /// [`Block::sum`] over the set's rows.
    ///
    /// # Safety
    /// As [`Block::sum`]'s.
    #[inline(always)]
    unsafe fn rows<const TWO: bool, const FULL: bool>(&self) {
        unsafe {
            match S::ROWS {
                12 => self.sum::<12, TWO, FULL>(),
                6 => self.sum::<6, TWO, FULL>(),
                rows => unreachable!("no direct convolution blocks of {rows} rows"),
            }
        }
    }

    /// The block's sums tap by tap, stored (then added to) at each
    /// slice's end.
    ///
    /// # Safety
    /// Inside [`Simd::enabled`]; as [`conv`]'s, for this block.
    #[inline(always)]
    unsafe fn sum<const R: usize, const TWO: bool, const FULL: bool>(&self) {
        unsafe {
            let mut acc = [[S::zero(); 2]; R];
            let mut add = false;
            for tap in 0..self.taps {
                if tap > 0 && (tap * self.c_in).is_multiple_of(SLICE) {
                    self.store::<R, TWO, FULL>(&mut acc, add);
                    add = true;
                }
                let src: [*const f32; R] = std::array::from_fn(|r| {
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
                    let (b0, b1) = if TWO {
                        (S::load(bp), load_reg::<S, FULL>(self.m1, bp.add(S::LANES)))
                    } else {
                        (load_reg::<S, FULL>(self.m0, bp), S::zero())
                    };
                    for (acc, src) in acc.iter_mut().zip(&src) {
                        let av = S::splat(*src.add(ci));
                        acc[0] = S::fmadd(av, b0, acc[0]);
                        if TWO {
                            acc[1] = S::fmadd(av, b1, acc[1]);
                        }
                    }
                }
            }
            self.store::<R, TWO, FULL>(&mut acc, add);
        }
    }

    /// The valid rows' sums stored, or added to what is stored, and the
    /// sums zeroed for the next slice.
    ///
    /// # Safety
    /// As [`Block::sum`]'s.
    #[inline(always)]
    unsafe fn store<const R: usize, const TWO: bool, const FULL: bool>(
        &self,
        acc: &mut [[S::V; 2]; R],
        add: bool,
    ) {
        unsafe {
            for (r, acc) in acc.iter_mut().enumerate().take(self.valid) {
                let cp = self.c.add(r * self.ldw);
                let (mut c0, mut c1) = (acc[0], acc[1]);
                if TWO {
                    let cp1 = cp.add(S::LANES);
                    if add {
                        c0 = S::add(c0, S::load(cp));
                        c1 = S::add(c1, load_reg::<S, FULL>(self.m1, cp1));
                    }
                    S::store(cp, c0);
                    store_reg::<S, FULL>(self.m1, cp1, c1);
                } else {
                    if add {
                        c0 = S::add(c0, load_reg::<S, FULL>(self.m0, cp));
                    }
                    store_reg::<S, FULL>(self.m0, cp, c0);
                }
            }
            *acc = [[S::zero(); 2]; R];
        }
    }
}
