//! The observation normaliser as the network applies it: the statistics it
//! was published with (f32, what the file's `obs_norm.mean`/`obs_norm.var`
//! hold) and the clip. The learner keeps the running f64 statistics they are
//! made from (`RunningMeanStd`); burn's model has the same layer as a module.

/// Added to the variance before the square root.
pub const OBS_NORM_EPS: f64 = 1e-8;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObsNorm {
    mean: Vec<f32>,
    var: Vec<f32>,
    /// `sqrt(var + eps)`, computed in f32 as burn does.
    std: Vec<f32>,
    clip: f32,
}

impl ObsNorm {
    /// `mean` and `var` must have the same length (the observation's).
    pub fn new(mean: Vec<f32>, var: Vec<f32>, clip: f64) -> Self {
        let std = var
            .iter()
            .map(|&v| (v + OBS_NORM_EPS as f32).sqrt())
            .collect();
        Self {
            mean,
            var,
            std,
            clip: clip as f32,
        }
    }

    pub fn mean(&self) -> &[f32] {
        &self.mean
    }

    pub fn var(&self) -> &[f32] {
        &self.var
    }

    /// `clip((x - mean) / std, +-clip)` over one row, in place.
    pub fn apply(&self, row: &mut [f32]) {
        for ((x, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
            *x = ((*x - m) / s).clamp(-self.clip, self.clip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_then_clips_each_feature() {
        let n = ObsNorm::new(vec![1.0, -2.0, 0.0], vec![4.0, 0.25, 0.0], 3.0);
        let mut row = [3.0, -2.5, 1.0];
        n.apply(&mut row);
        // (3-1)/2 = 1; (-2.5+2)/0.5 = -1; 1/sqrt(1e-8) = 1e4, clipped to 3.
        assert!((row[0] - 1.0).abs() < 1e-6, "{row:?}");
        assert!((row[1] + 1.0).abs() < 1e-5, "{row:?}");
        assert_eq!(row[2], 3.0);
    }
}
