//! Log-probability and entropy of one sample under the policy head, with their
//! gradients with respect to the head's outputs, worked out by hand (each
//! formula is checked against burn's autodiff in the tests):
//!
//! - categorical, `p = softmax(z)` over the allowed actions:
//!   `d ln p_a / d z_j = [j = a] - p_j`, `d H / d z_j = -p_j (ln p_j + H)`;
//!   a masked logit gets neither (it is a constant before the softmax);
//! - tanh-squashed Gaussian, `σ = softplus(ρ) + min_std`, `z = (u - μ) / σ`:
//!   `d ln p / d μ = z / σ`, `d ln p / d σ = (z² - 1) / σ`, `d σ / d ρ = sigmoid(ρ)`;
//!   Gaussian entropy `d H / d σ = 1 / σ`; the sampled squash term at
//!   `s = μ + σ ε` adds `d/ds ln(1 - tanh² s) = -2 tanh s` to `μ` and `ε` times it to `σ`;
//! - DQN's Huber loss of `Q(s, a) - y` and its derivative ([`huber`]).

use sebulba_core::distribution::{MASKED_LOGIT, Squash, log1m_tanh_sq, softplus};

const HALF_LN_2PI: f64 = 0.918_938_533_204_672_8;

/// One sample's log-probability and entropy; `d_logp` and `d_ent` (the row's
/// width) receive their gradients with respect to the head row.
pub struct Eval {
    pub logp: f64,
    pub entropy: f64,
}

/// Which actions of a categorical row are allowed.
#[derive(Clone, Copy)]
pub enum Support<'a> {
    /// Every action (no mask).
    All,
    /// A mask row (0 = masked): the gradients at masked entries are written 0.
    Mask(&'a [u8]),
    /// The allowed actions, ascending: the sparse policy head's rows, whose
    /// masked entries are neither read nor written.
    List(&'a [u32]),
}

/// Categorical head row `z` (logits), action `a`, its allowed actions.
pub fn categorical(
    z: &[f32],
    a: usize,
    support: Support<'_>,
    d_logp: &mut [f64],
    d_ent: &mut [f64],
) -> Eval {
    let n = z.len();
    match support {
        Support::All => over(z, a, 0..n, d_logp, d_ent),
        Support::Mask(m) => {
            d_logp[..n].fill(0.0);
            d_ent[..n].fill(0.0);
            over(z, a, (0..n).filter(|&j| m[j] != 0), d_logp, d_ent)
        }
        Support::List(l) => over(z, a, l.iter().map(|&j| j as usize), d_logp, d_ent),
    }
}

/// [`categorical`] over the allowed actions `allowed`: one exponential per
/// allowed action (a game's head is mostly masked), every masked logit
/// adding the same term, zero unless all are masked.
fn over(
    z: &[f32],
    a: usize,
    allowed: impl Iterator<Item = usize> + Clone,
    d_logp: &mut [f64],
    d_ent: &mut [f64],
) -> Eval {
    let masked = z.len() - allowed.clone().count();
    let mut max = allowed
        .clone()
        .map(|j| z[j] as f64)
        .fold(f64::NEG_INFINITY, f64::max);
    let mut sum = 0.0;
    // Without masked actions the masked term is zero: its exponential is
    // skipped (one in three of a two-action row's).
    if masked > 0 {
        max = max.max(MASKED_LOGIT as f64);
        sum = masked as f64 * (MASKED_LOGIT as f64 - max).exp();
    }
    for j in allowed.clone() {
        // e^(logit - max), for now.
        d_logp[j] = (z[j] as f64 - max).exp();
        sum += d_logp[j];
    }
    let ln_sum = sum.ln();
    let logp_j = |j: usize| z[j] as f64 - max - ln_sum;
    let mut entropy = 0.0;
    for j in allowed.clone() {
        entropy -= d_logp[j] / sum * logp_j(j);
    }
    let mut logp = MASKED_LOGIT as f64 - max - ln_sum;
    for j in allowed {
        let p = d_logp[j] / sum;
        d_logp[j] = if j == a { 1.0 - p } else { -p };
        d_ent[j] = -p * (logp_j(j) + entropy);
        if j == a {
            logp = logp_j(j);
        }
    }
    Eval { logp, entropy }
}

fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// Tanh-normal head row `[means, raw stds]`, pre-tanh action `u`, noise `eps`
/// for the sampled entropy (ignored with `gaussian_entropy`).
#[allow(clippy::too_many_arguments)]
pub fn tanh_normal(
    head: &[f32],
    u: &[f32],
    eps: &[f32],
    min_std: f64,
    squash: &Squash,
    gaussian_entropy: bool,
    d_logp: &mut [f64],
    d_ent: &mut [f64],
) -> Eval {
    let dim = u.len();
    let mut logp = -squash.log_scale_sum;
    let mut entropy = 0.0;
    if !gaussian_entropy {
        entropy += squash.log_scale_sum;
    }
    for j in 0..dim {
        let (mu, rho, uj) = (head[j] as f64, head[dim + j] as f64, u[j] as f64);
        let sigma = softplus(rho) + min_std;
        let dsigma = sigmoid(rho);
        let z = (uj - mu) / sigma;
        logp += -0.5 * z * z - sigma.ln() - HALF_LN_2PI - log1m_tanh_sq(uj);
        d_logp[j] = z / sigma;
        d_logp[dim + j] = (z * z - 1.0) / sigma * dsigma;
        entropy += sigma.ln() + 0.5 + HALF_LN_2PI;
        let (mut de_mu, mut de_sigma) = (0.0, 1.0 / sigma);
        if !gaussian_entropy {
            let e = eps[j] as f64;
            let s = mu + sigma * e;
            entropy += log1m_tanh_sq(s);
            let ds = -2.0 * s.tanh();
            de_mu += ds;
            de_sigma += ds * e;
        }
        d_ent[j] = de_mu;
        d_ent[dim + j] = de_sigma * dsigma;
    }
    Eval { logp, entropy }
}

/// One sample's terms of the PPO loss and the loss's gradients with respect to
/// its log-probability and value (before the `1 / minibatch` mean).
pub struct Terms {
    pub policy: f64,
    pub value: f64,
    pub approx_kl: f64,
    pub clipped: bool,
    /// `d policy / d logp`.
    pub d_logp: f64,
    /// `d value / d v` (value is `0.5 * error²`).
    pub d_value: f64,
}

/// The clipped surrogate `max(-A r, -A clip(r, 1 ± c))` with `r = e^(logp - old)`,
/// and the value error (optionally clipped around `old_v` by `value_clip`).
#[allow(clippy::too_many_arguments)]
pub fn ppo_terms(
    logp: f64,
    old_logp: f64,
    adv: f64,
    v: f64,
    ret: f64,
    old_v: f64,
    clip: f64,
    value_clip: Option<f64>,
) -> Terms {
    let log_ratio = logp - old_logp;
    let r = log_ratio.exp();
    let pg1 = -adv * r;
    let pg2 = -adv * r.clamp(1.0 - clip, 1.0 + clip);
    // Where the clipped term is larger, r is outside the clip range and the
    // clipped term is constant: no gradient. Inside the range both are equal.
    let (policy, d_logp) = if pg1 >= pg2 { (pg1, pg1) } else { (pg2, 0.0) };
    let err = v - ret;
    let (sq, d_value) = match value_clip {
        None => (err * err, err),
        Some(eps) => {
            let clipped = old_v + (v - old_v).clamp(-eps, eps) - ret;
            if err * err >= clipped * clipped {
                (err * err, err)
            } else {
                (clipped * clipped, 0.0)
            }
        }
    };
    Terms {
        policy,
        value: 0.5 * sq,
        approx_kl: (r - 1.0) - log_ratio,
        clipped: (r - 1.0).abs() > clip,
        d_logp,
        d_value,
    }
}

/// The Huber loss of error `e = q - y` with threshold `delta`, and its
/// derivative in `q`: `0.5 e²` and `e` inside `|e| <= delta`, else
/// `delta (|e| - delta / 2)` and `delta sign(e)`.
pub fn huber(e: f64, delta: f64) -> (f64, f64) {
    if e.abs() <= delta {
        (0.5 * e * e, e)
    } else {
        (delta * (e.abs() - 0.5 * delta), delta * e.signum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huber_is_quadratic_then_linear() {
        assert_eq!(huber(0.5, 1.0), (0.125, 0.5));
        assert_eq!(huber(-0.5, 1.0), (0.125, -0.5));
        assert_eq!(huber(3.0, 1.0), (2.5, 1.0));
        assert_eq!(huber(-3.0, 1.0), (2.5, -1.0));
        // Continuous at the threshold.
        assert_eq!(huber(1.0, 1.0), (0.5, 1.0));
        assert_eq!(huber(4.0, 2.0), (6.0, 2.0));
        // The derivative against a central difference.
        for e in [-2.5, -0.3, 0.7, 1.9] {
            let h = 1e-6;
            let fd = (huber(e + h, 1.0).0 - huber(e - h, 1.0).0) / (2.0 * h);
            assert!((fd - huber(e, 1.0).1).abs() < 1e-6, "{e}");
        }
    }
}
