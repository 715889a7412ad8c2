//! The tanh-squashed Gaussian for box action spaces.
//!
//! `u ~ N(mean, std)` with `std = softplus(raw) + min_std` (bounded below, never
//! an unbounded `exp(log_std)`), and the env gets `a = c + s * tanh(u)` with
//! `c, s` the box's centre and half-width. The density of `a` is
//! `N(u) / prod(s * (1 - tanh(u)^2))`; `ln(1 - tanh(u)^2)` is computed as
//! `2 * (ln 2 - u - softplus(-2u))`, which stays finite where `tanh(u)` rounds
//! to 1. Actors store `u` (pre-tanh) so the learner evaluates the same point;
//! the Jacobian then cancels in the PPO ratio. The entropy of the squashed
//! distribution has no closed form: it is the Gaussian entropy plus
//! `E[ln |det J|]`, estimated from one reparameterised sample per row.

use burn::tensor::{Tensor, backend::Backend};
use rand::Rng;
use rand_distr::StandardNormal;

const HALF_LN_2PI: f64 = 0.918_938_533_204_672_8;

/// The affine map from tanh's (-1, 1) onto the box `[low, high]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Squash {
    pub center: Vec<f32>,
    pub half_width: Vec<f32>,
    /// `sum(ln half_width)`: the affine part of `ln |det J|`.
    pub log_scale_sum: f64,
}

impl Squash {
    /// Bounds must be finite (every classic-control box is).
    pub fn new(low: &[f32], high: &[f32]) -> Self {
        let center: Vec<f32> = low.iter().zip(high).map(|(l, h)| (l + h) / 2.0).collect();
        let half_width: Vec<f32> = low.iter().zip(high).map(|(l, h)| (h - l) / 2.0).collect();
        let log_scale_sum = half_width.iter().map(|&w| (w as f64).ln()).sum();
        Self {
            center,
            half_width,
            log_scale_sum,
        }
    }

    /// `a = c + s * tanh(u)`, element-wise over one action.
    pub fn apply(&self, u: &[f32], out: &mut [f32]) {
        for (i, (o, &x)) in out.iter_mut().zip(u).enumerate() {
            *o = self.center[i] + self.half_width[i] * x.tanh();
        }
    }
}

/// `ln(1 - tanh(u)^2)` in the stable form `2 * (ln 2 - u - softplus(-2u))`.
pub fn log1m_tanh_sq(u: f64) -> f64 {
    2.0 * (std::f64::consts::LN_2 - u - super::softplus(-2.0 * u))
}

/// Element-wise stable softplus for tensors: `max(x, 0) + ln(1 + e^-|x|)`
/// (burn's `ln(1 + e^x)` overflows for large x).
pub fn softplus_tensor<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    x.clone().clamp_min(0.0) + x.abs().neg().exp().log1p()
}

/// Tensor form of [`log1m_tanh_sq`].
pub fn log1m_tanh_sq_tensor<B: Backend, const D: usize>(u: Tensor<B, D>) -> Tensor<B, D> {
    (u.clone().neg() - softplus_tensor(u * (-2.0)) + std::f64::consts::LN_2) * 2.0
}

/// Log-probabilities of the squashed actions whose pre-tanh values are `u`
/// `[N, dim]`, and entropies, both `[N]`, for heads `[N, 2 * dim]`. `noise`
/// `[N, dim]` is a standard-normal draw for the entropy's sample estimate
/// (unused when `gaussian_entropy` asks for the plain Gaussian entropy).
pub fn tanh_normal_logp_entropy<B: Backend>(
    head: Tensor<B, 2>,
    u: Tensor<B, 2>,
    noise: Tensor<B, 2>,
    min_std: f32,
    squash: &Squash,
    gaussian_entropy: bool,
) -> (Tensor<B, 1>, Tensor<B, 1>) {
    let [n, width] = head.dims();
    let dim = width / 2;
    let mean = head.clone().narrow(1, 0, dim);
    let std = softplus_tensor(head.narrow(1, dim, dim)) + min_std;
    let log_std = std.clone().log();
    let z = (u.clone() - mean.clone()) / std.clone();
    let log_n = (z.powi_scalar(2) * (-0.5) - log_std.clone() - HALF_LN_2PI).sum_dim(1);
    let log_det = log1m_tanh_sq_tensor(u).sum_dim(1) + squash.log_scale_sum;
    let logp = (log_n - log_det).reshape([n]);
    let h_gauss = (log_std + 0.5 + HALF_LN_2PI).sum_dim(1);
    let entropy = if gaussian_entropy {
        h_gauss
    } else {
        let sample = mean + std * noise;
        h_gauss + log1m_tanh_sq_tensor(sample).sum_dim(1) + squash.log_scale_sum
    };
    (logp, entropy.reshape([n]))
}

/// Log-probability of the squashed action with pre-tanh value `u` under one head row.
pub fn tanh_normal_log_prob(head: &[f32], u: &[f32], min_std: f32, squash: &Squash) -> f32 {
    let dim = u.len();
    let mut lp = -squash.log_scale_sum;
    for i in 0..dim {
        let std = super::softplus(head[dim + i] as f64) + min_std as f64;
        let z = (u[i] as f64 - head[i] as f64) / std;
        lp += -0.5 * z * z - std.ln() - HALF_LN_2PI - log1m_tanh_sq(u[i] as f64);
    }
    lp as f32
}

/// Samples one action from a head row: writes the pre-tanh `u` and the env
/// action `a`, returns `ln p(a)`.
pub fn sample_tanh_normal<R: Rng + ?Sized>(
    head: &[f32],
    min_std: f32,
    squash: &Squash,
    rng: &mut R,
    u: &mut [f32],
    a: &mut [f32],
) -> f32 {
    let dim = u.len();
    for i in 0..dim {
        let std = super::softplus(head[dim + i] as f64) + min_std as f64;
        let eps: f64 = rng.sample(StandardNormal);
        u[i] = (head[i] as f64 + std * eps) as f32;
    }
    squash.apply(u, a);
    tanh_normal_log_prob(head, u, min_std, squash)
}

/// The deterministic action for evaluation: `c + s * tanh(mean)`.
pub fn tanh_normal_mode(head: &[f32], squash: &Squash, a: &mut [f32]) {
    let dim = a.len();
    squash.apply(&head[..dim], a);
}

#[cfg(test)]
mod tests;
