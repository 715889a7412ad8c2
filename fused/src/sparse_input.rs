//! The first dense layer over each row's nonzero inputs only. A game's
//! observation is flags, mostly 0 (Big Two's 602 hold 75 ones on average),
//! and a zero input adds nothing to the layer's output and gets no weight
//! gradient, so summing the weight rows of the nonzero inputs gives the same
//! product for a fraction of the work. The weight is `[d_in, d_out]`, so an
//! input's weights are a contiguous row, read in place.
//!
//! Only a torso's first layer reads the observation itself (later layers
//! read activations, and a convolution stem's output is dense), and nothing
//! needs the gradient at the observation, so the way back is the weight's
//! gradient alone.

use crate::kernels::wide;

/// Worth it when at most one input in this many is nonzero: a dense product
/// runs a few times more multiply-adds per second than adding rows one at a
/// time (Big Two's observation has about one in eight, at most 131 of 602).
pub const SPARSE_RATIO: usize = 4;

/// A minibatch's inputs as each row's nonzero entries, row after row.
#[derive(Default, Debug)]
pub struct SparseRows {
    /// Where each row's entries start in `index`, then the end; empty when
    /// the inputs were not worth indexing.
    starts: Vec<usize>,
    index: Vec<u32>,
    value: Vec<f32>,
}

impl SparseRows {
    /// Indexes the `m` rows of `x` (`[m, d]`) when at most one entry in
    /// [`SPARSE_RATIO`] is nonzero, and says whether it did; otherwise it
    /// holds nothing ([`SparseRows::is_on`] is false).
    pub fn index(&mut self, x: &[f32], m: usize, d: usize) -> bool {
        self.clear();
        if m == 0 || d == 0 {
            return false;
        }
        let most = m * d / SPARSE_RATIO;
        self.starts.push(0);
        for row in x[..m * d].chunks_exact(d) {
            // Every entry written, the end moved past the nonzero ones: no
            // branch to mispredict on a game's scattered flags.
            let start = self.index.len();
            self.index.resize(start + d, 0);
            self.value.resize(start + d, 0.0);
            let (index, value) = (&mut self.index[start..], &mut self.value[start..]);
            let mut k = 0;
            for (j, &v) in row.iter().enumerate() {
                (index[k], value[k]) = (j as u32, v);
                k += usize::from(v != 0.0);
            }
            self.index.truncate(start + k);
            self.value.truncate(start + k);
            if self.index.len() > most {
                self.clear();
                return false;
            }
            self.starts.push(self.index.len());
        }
        true
    }

    /// Nothing indexed.
    pub fn clear(&mut self) {
        self.starts.clear();
        self.index.clear();
        self.value.clear();
    }

    /// Whether the last [`SparseRows::index`] indexed its rows.
    pub fn is_on(&self) -> bool {
        !self.starts.is_empty()
    }

    pub fn rows(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Row `r`'s nonzero inputs: their indices (ascending) and values.
    pub fn row(&self, r: usize) -> (&[u32], &[f32]) {
        let span = self.starts[r]..self.starts[r + 1];
        (&self.index[span.clone()], &self.value[span])
    }

    /// Bytes its buffers hold.
    pub fn bytes(&self) -> usize {
        self.starts.capacity() * 8 + (self.index.capacity() + self.value.capacity()) * 4
    }

    /// `out = x W` (`[rows, d_out]`, no bias) for the indexed rows `x` and
    /// a layer's weight `w` (`[d_in, d_out]`).
    pub fn product(&self, w: &[f32], d_out: usize, out: &mut [f32]) {
        wide(
            #[inline(always)]
            || {
                for (r, o) in out.chunks_exact_mut(d_out).take(self.rows()).enumerate() {
                    o.fill(0.0);
                    let (index, value) = self.row(r);
                    for (&j, &v) in index.iter().zip(value) {
                        let wj = &w[j as usize * d_out..][..d_out];
                        o.iter_mut().zip(wj).for_each(|(o, &w)| *o += v * w);
                    }
                }
            },
        );
    }

    /// `dW = xᵀ dy` (`[d_in, d_out]`, written) for the indexed rows `x` and
    /// the gradient `dy` (`[rows, d_out]`) at the layer's output.
    pub fn weight_grad(&self, dy: &[f32], d_out: usize, dw: &mut [f32]) {
        wide(
            #[inline(always)]
            || {
                dw.fill(0.0);
                for (r, dyr) in dy.chunks_exact(d_out).take(self.rows()).enumerate() {
                    let (index, value) = self.row(r);
                    for (&j, &v) in index.iter().zip(value) {
                        let dwj = &mut dw[j as usize * d_out..][..d_out];
                        dwj.iter_mut().zip(dyr).for_each(|(g, &y)| *g += v * y);
                    }
                }
            },
        );
    }
}

#[cfg(test)]
mod tests;
