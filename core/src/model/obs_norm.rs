//! Observation normalisation inside the policy: running mean and variance kept
//! as non-trainable parameters, so they travel with the weights and every role
//! (actor, evaluator, learner) normalises every observation, post-reset ones
//! included, identically. The learner sets them from [`RunningMeanStd`] after
//! each update's SGD, so they go out with the new weights. (The fused engine's
//! copy of the layer is `sebulba_fused::ObsNorm`.)

use burn::module::{Module, Param, ParamId};
use burn::tensor::{Tensor, TensorData, backend::Backend};

use sebulba_fused::OBS_NORM_EPS;

#[derive(Module, Debug)]
pub struct ObsNorm<B: Backend> {
    pub mean: Param<Tensor<B, 1>>,
    pub var: Param<Tensor<B, 1>>,
    #[module(skip)]
    pub clip: f64,
}

impl<B: Backend> ObsNorm<B> {
    /// Identity statistics (mean 0, var 1) until the learner sets them.
    pub fn new(dim: usize, clip: f64, device: &B::Device) -> Self {
        // `initialized` (not `from_tensor`): no gradient, so no optimizer touches them.
        Self {
            mean: Param::initialized(ParamId::new(), Tensor::zeros([dim], device)),
            var: Param::initialized(ParamId::new(), Tensor::ones([dim], device)),
            clip,
        }
    }

    /// `clip((x - mean) / sqrt(var + eps), +-clip)` for `x` `[N, dim]`.
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let mean = self.mean.val().unsqueeze_dim(0);
        let std = (self.var.val() + OBS_NORM_EPS).sqrt().unsqueeze_dim(0);
        ((x - mean) / std).clamp(-self.clip, self.clip)
    }

    /// Replaces the statistics (keeping the parameter ids).
    pub fn set(&mut self, mean: &[f32], var: &[f32]) {
        let device = self.mean.val().device();
        let t =
            |v: &[f32]| Tensor::<B, 1>::from_data(TensorData::new(v.to_vec(), [v.len()]), &device);
        self.mean = Param::initialized(self.mean.id, t(mean));
        self.var = Param::initialized(self.var.id, t(var));
    }
}

/// Running mean and (population) variance over every row seen, merged batch by
/// batch with Chan et al.'s parallel update, in f64 so long runs do not drift.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunningMeanStd {
    pub count: f64,
    pub mean: Vec<f64>,
    pub var: Vec<f64>,
}

impl RunningMeanStd {
    pub fn new(dim: usize) -> Self {
        Self {
            count: 0.0,
            mean: vec![0.0; dim],
            var: vec![1.0; dim],
        }
    }

    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// Folds in `rows` rows of `dim` values (`data.len() == rows * dim`).
    pub fn update(&mut self, data: &[f32]) {
        let d = self.dim();
        if d == 0 || data.is_empty() {
            return;
        }
        let n = (data.len() / d) as f64;
        let mut bm = vec![0.0f64; d];
        for row in data.chunks_exact(d) {
            for (m, &x) in bm.iter_mut().zip(row) {
                *m += x as f64;
            }
        }
        bm.iter_mut().for_each(|m| *m /= n);
        let mut bv = vec![0.0f64; d];
        for row in data.chunks_exact(d) {
            for ((v, &x), m) in bv.iter_mut().zip(row).zip(&bm) {
                *v += (x as f64 - m).powi(2);
            }
        }
        bv.iter_mut().for_each(|v| *v /= n);
        self.merge(n, &bm, &bv);
    }

    /// Merges a batch of `n` values with mean `bm` and population variance `bv`.
    pub fn merge(&mut self, n: f64, bm: &[f64], bv: &[f64]) {
        if self.count == 0.0 {
            self.count = n;
            self.mean = bm.to_vec();
            self.var = bv.to_vec();
            return;
        }
        let total = self.count + n;
        for i in 0..self.dim() {
            let delta = bm[i] - self.mean[i];
            let m2 = self.var[i] * self.count + bv[i] * n + delta * delta * self.count * n / total;
            self.mean[i] += delta * n / total;
            self.var[i] = m2 / total;
        }
        self.count = total;
    }

    pub fn mean_f32(&self) -> Vec<f32> {
        self.mean.iter().map(|&m| m as f32).collect()
    }

    pub fn var_f32(&self) -> Vec<f32> {
        self.var.iter().map(|&v| v as f32).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;

    #[test]
    fn merged_batches_equal_the_whole() {
        // Column 0: 1, 2, 3, 4, 10 -> mean 4, population var (9+4+1+0+36)/5 = 10.
        // Column 1: 0, 0, 0, 0, 5 -> mean 1, var (1+1+1+1+16)/5 = 4.
        let mut r = RunningMeanStd::new(2);
        r.update(&[1.0, 0.0, 2.0, 0.0]);
        r.update(&[3.0, 0.0, 4.0, 0.0, 10.0, 5.0]);
        assert_eq!(r.count, 5.0);
        assert!((r.mean[0] - 4.0).abs() < 1e-12 && (r.var[0] - 10.0).abs() < 1e-12);
        assert!((r.mean[1] - 1.0).abs() < 1e-12 && (r.var[1] - 4.0).abs() < 1e-12);
    }

    #[test]
    fn normalises_and_clips() {
        let dev = Default::default();
        let mut n = ObsNorm::<CpuBackend>::new(2, 3.0, &dev);
        n.set(&[1.0, -2.0], &[4.0, 0.25]);
        let x = Tensor::<CpuBackend, 2>::from_data(
            TensorData::new(vec![5.0f32, -2.5, 100.0, -2.0], [2, 2]),
            &dev,
        );
        let y: Vec<f32> = n.forward(x).into_data().to_vec().unwrap();
        // (5-1)/2 = 2; (-2.5+2)/0.5 = -1; (100-1)/2 clipped to 3; 0.
        let want = [2.0, -1.0, 3.0, 0.0];
        for (a, b) in y.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{y:?}");
        }
    }
}
