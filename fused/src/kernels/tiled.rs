//! The products [`super::small_gemm`] leaves (a wide right operand, a
//! weight gradient over many rows into many outputs) on the AVX2 path's own
//! set. matrixmultiply, which took them, picks its kernel from the CPU, its
//! AVX-512 ones on an AVX-512 CPU: with these, `SEBULBA_KERNELS=avx2` there
//! runs no wider instruction than an AVX2 machine would, and so stands in
//! for one. The AVX-512 path leaves them to matrixmultiply's AVX-512
//! kernels, which measured 6-9% faster over whole Nature CNN and MinAtar
//! updates.
//!
//! The same register blocks, with the right operand packed the way
//! matrixmultiply and BLIS pack it: a slab ([`SLAB_COLS`] columns of one
//! slice of the inner dimension) panel by panel, each panel two registers
//! wide and contiguous. Read in place, a panel's rows lie a row of the
//! operand apart, in a few L1 sets that evict each other; packed, a panel
//! (16 KiB on AVX2, 32 on AVX-512) stays in L1 while the row blocks of a
//! chunk of [`CHUNK_BLOCKS`] pass from L2. The left operand is read in
//! place where its rows are contiguous, each row a stream, and packed where
//! it is a transpose whose terms lie more than [`NEAR`] floats apart (a
//! dense layer's weight gradient, `xᵀ`): measured on the presets' shapes,
//! each choice was the faster one.
//!
//! The inner dimension goes in slices of [`MAX_K`], matrixmultiply's own
//! blocking of it for f32 (its `kc`): each slice summed in order, one fused
//! multiply-add a term from zero, and added into the result as it adds
//! them. So these products give its numbers to the bit (the kernel tests
//! compare the two); the slabs and chunks change no sum.

use super::View;
use super::simd::Simd;
use super::small_gemm::{Block, MAX_K};
use std::cell::RefCell;

/// Row blocks of the left operand in one chunk: 48 x 256 floats (48 KiB, in
/// L2) on AVX2, 96 x 256 on AVX-512.
const CHUNK_BLOCKS: usize = 8;
/// Columns of the right operand in one packed slab: 256 x 256 floats, 256
/// KiB, within every L2 of the machines here (Zen 3 has 512 KiB a core).
const SLAB_COLS: usize = 256;

/// The widest spacing of a transposed left operand's terms read in place: a
/// convolution's weight gradient, `xᵀ` over its windows (up to 576 floats in
/// the presets), where packing cost more than it saved. Past it (a dense
/// layer after a stem, 1,024 inputs and more) each term lies on a page of
/// its own, and packed the products ran 10-25% faster.
const NEAR: usize = 640;

thread_local! {
    /// The packed slab of the right operand and chunk of the left one.
    static PACKED: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `c = a · b + beta · c` (`c` row-major `[m, n]`) for any shape and layout
/// when the set is present and `beta` is 0 or 1; `false`, with `c`
/// untouched, otherwise. The caller has checked every operand's extent.
pub(super) fn try_tiled<S: Simd>(
    m: usize,
    k: usize,
    n: usize,
    a: View<'_>,
    b: View<'_>,
    beta: f32,
    c: &mut [f32],
) -> bool {
    if !((beta == 0.0 || beta == 1.0) && S::available()) {
        return false;
    }
    if k == 0 {
        if beta == 0.0 {
            c[..m * n].fill(0.0);
        }
        return true;
    }
    let chunk = CHUNK_BLOCKS * S::ROWS;
    PACKED.with_borrow_mut(|(right, left)| {
        for (s, k0) in (0..k).step_by(MAX_K).enumerate() {
            let kc = MAX_K.min(k - k0);
            let add = s > 0 || beta == 1.0;
            for j0 in (0..n).step_by(SLAB_COLS) {
                let nc = SLAB_COLS.min(n - j0);
                pack_right(b, (k0, kc), (j0, nc), 2 * S::LANES, right);
                for i0 in (0..m).step_by(chunk) {
                    let mc = chunk.min(m - i0);
                    let tile = Tile {
                        shape: (mc, kc, nc),
                        left: Left::of(a, (i0, mc), (k0, kc), S::ROWS, left),
                        right,
                        c: &mut c[i0 * n + j0..],
                        ldc: n,
                        add,
                    };
                    // SAFETY: the set is present (checked above).
                    unsafe {
                        S::enabled(
                            #[inline(always)]
                            || tile.sum::<S>(),
                        )
                    };
                }
            }
        }
    });
    true
}

/// Rows `k0..k0 + kc` and columns `j0..j0 + nc` of `b` into `out`, a panel
/// of `w` columns after another, each `[kc, w]` row-major (the last one's
/// columns past `nc` left as they were: the blocks never read them).
fn pack_right(
    b: View<'_>,
    (k0, kc): (usize, usize),
    (j0, nc): (usize, usize),
    w: usize,
    out: &mut Vec<f32>,
) {
    let len = nc.div_ceil(w) * kc * w;
    if out.len() < len {
        out.resize(len, 0.0);
    }
    for (q, panel) in out[..len].chunks_exact_mut(kc * w).enumerate() {
        let cols = w.min(nc - q * w);
        for (p, row) in panel.chunks_exact_mut(w).enumerate() {
            let at = (k0 + p) * b.rs + (j0 + q * w) * b.cs;
            if b.cs == 1 {
                row[..cols].copy_from_slice(&b.data[at..at + cols]);
            } else {
                for (jj, o) in row[..cols].iter_mut().enumerate() {
                    *o = b.data[at + jj * b.cs];
                }
            }
        }
    }
}

/// The left operand's rows of one tile, as the blocks read them.
struct Left<'a> {
    /// Its first element: `(i, p)` of a block is at `i * rs + p * cs` from
    /// the block's start, and block `b` starts `b * stride` from here.
    data: &'a [f32],
    rs: usize,
    cs: usize,
    stride: usize,
}

impl<'a> Left<'a> {
    /// Rows `i0..i0 + mc` and terms `k0..k0 + kc` of `a` in blocks of `r`
    /// rows: in place when its rows are contiguous (each row a stream the
    /// prefetcher follows) or its terms lie at most [`NEAR`] floats apart
    /// (a block's terms then one stream too), else packed into `buf` (a
    /// transposed operand whose terms lie a wide row of the matrix apart, in
    /// a few L1 sets that evict each other; packed, a copy of contiguous
    /// runs).
    fn of(
        a: View<'a>,
        (i0, mc): (usize, usize),
        (k0, kc): (usize, usize),
        r: usize,
        buf: &'a mut Vec<f32>,
    ) -> Self {
        if a.cs == 1 || (a.rs == 1 && a.cs <= NEAR) {
            return Left {
                data: &a.data[i0 * a.rs + k0 * a.cs..],
                rs: a.rs,
                cs: a.cs,
                stride: r * a.rs,
            };
        }
        pack_left(a, (i0, mc), (k0, kc), r, buf);
        Left {
            data: buf,
            rs: 1,
            cs: r,
            stride: kc * r,
        }
    }
}

/// Rows `i0..i0 + mc` and columns `k0..k0 + kc` of `a` into `out`, a block
/// of `r` rows after another, each `[kc, r]` (for every term, the block's
/// rows side by side; a last, shorter block's missing rows left as they
/// were: the blocks never read them).
fn pack_left(
    a: View<'_>,
    (i0, mc): (usize, usize),
    (k0, kc): (usize, usize),
    r: usize,
    out: &mut Vec<f32>,
) {
    let len = mc.div_ceil(r) * kc * r;
    if out.len() < len {
        out.resize(len, 0.0);
    }
    for (blk, block) in out[..len].chunks_exact_mut(kc * r).enumerate() {
        let rows = r.min(mc - blk * r);
        let base = (i0 + blk * r) * a.rs + k0 * a.cs;
        if a.rs == 1 {
            // A transposed operand: the block's rows lie side by side.
            for (p, term) in block.chunks_exact_mut(r).enumerate() {
                let at = base + p * a.cs;
                term[..rows].copy_from_slice(&a.data[at..at + rows]);
            }
        } else {
            for i in 0..rows {
                let row = base + i * a.rs;
                for p in 0..kc {
                    block[p * r + i] = a.data[row + p * a.cs];
                }
            }
        }
    }
}

/// One chunk of rows against one slab, both packed, summed into `c`
/// (rows `ldc` apart).
struct Tile<'a> {
    shape: (usize, usize, usize),
    left: Left<'a>,
    right: &'a [f32],
    c: &'a mut [f32],
    ldc: usize,
    add: bool,
}

impl Tile<'_> {
    /// Every block of the tile, a panel at a time (the panel stays in L1
    /// while the chunk's blocks pass over it).
    ///
    /// # Safety
    /// Inside [`Simd::enabled`]; `left` and `right` hold the chunk and the
    /// slab packed for `S`, and `c` the tile's rows.
    #[inline(always)]
    unsafe fn sum<S: Simd>(self) {
        let Tile {
            shape: (m, k, n),
            left,
            right,
            c,
            ldc,
            add,
        } = self;
        let w2 = 2 * S::LANES;
        for (q, j) in (0..n).step_by(w2).enumerate() {
            let w = w2.min(n - j);
            for (blk, i) in (0..m).step_by(S::ROWS).enumerate() {
                // SAFETY: inside `enabled`, as the caller guarantees.
                let block = unsafe {
                    Block::<S> {
                        k,
                        a: left.data.as_ptr().wrapping_add(blk * left.stride),
                        ars: left.rs,
                        acs: left.cs,
                        b: right.as_ptr().wrapping_add(q * k * w2),
                        brs: w2,
                        c: c.as_mut_ptr().wrapping_add(i * ldc + j),
                        ldc,
                        m0: S::first(w),
                        m1: S::first(w.saturating_sub(S::LANES)),
                        add,
                    }
                };
                // SAFETY: the block's rows of the packed chunk, its panel
                // of the packed slab and its rows and columns of `c` lie
                // inside them, and it reads and writes exactly those.
                unsafe { block.run(w, S::ROWS.min(m - i)) };
            }
        }
    }
}
