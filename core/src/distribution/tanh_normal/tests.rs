//! Pinned against float64 references computed from the definitions, not from
//! the formulas under test: `ln(1 - tanh^2)` directly (or `-2 ln cosh u` far
//! out), and the entropy by numerical integration of `-ln p(a)`.

use super::*;
use crate::CpuBackend;
use burn::tensor::TensorData;
use rand::SeedableRng;

fn t2(v: Vec<f32>, shape: [usize; 2]) -> Tensor<CpuBackend, 2> {
    Tensor::from_data(TensorData::new(v, shape), &Default::default())
}

/// ln p(a(u)) in float64 from the definition: the Gaussian density of u over
/// |da/du| = s * (1 - tanh(u)^2).
fn ref_log_prob(mean: f64, std: f64, u: f64, half_width: f64) -> f64 {
    let log_n =
        -0.5 * ((u - mean) / std).powi(2) - (std * (2.0 * std::f64::consts::PI).sqrt()).ln();
    let log_jac = if u.abs() < 5.0 {
        let y = u.tanh();
        (1.0 - y * y).ln()
    } else {
        -2.0 * u.cosh().ln()
    };
    log_n - half_width.ln() - log_jac
}

fn softplus_direct(x: f64) -> f64 {
    (1.0 + x.exp()).ln()
}

#[test]
fn log_prob_matches_float64_reference() {
    let min_std = 1e-3f32;
    // (mean, raw, u, low, high)
    let cases = [
        (0.0f32, 0.0f32, 0.3f32, -1.0f32, 1.0f32),
        (0.5, -1.0, -0.7, -2.0, 2.0),
        (-1.2, 1.5, 2.5, -1.0, 1.0),
        (2.0, -3.0, 9.0, -2.0, 2.0), // tanh(9) rounds to 1 in f32
        (-3.0, 0.2, -15.0, 0.0, 4.0),
        (0.0, 0.0, 40.0, -1.0, 1.0),
    ];
    let mut heads = Vec::new();
    let mut us = Vec::new();
    for &(mean, raw, u, low, high) in &cases {
        let squash = Squash::new(&[low], &[high]);
        let std = softplus_direct(raw as f64) + min_std as f64;
        let want = ref_log_prob(mean as f64, std, u as f64, ((high - low) / 2.0) as f64);
        let got = tanh_normal_log_prob(&[mean, raw], &[u], min_std, &squash) as f64;
        assert!(
            (got - want).abs() < 1e-4 * want.abs().max(1.0),
            "cpu {got} vs {want} for {mean} {raw} {u}"
        );
        // The tensor side, one row at a time (bounds differ per case).
        let (lp, _) = tanh_normal_logp_entropy(
            t2(vec![mean, raw], [1, 2]),
            t2(vec![u], [1, 1]),
            t2(vec![0.0], [1, 1]),
            min_std,
            &squash,
            false,
        );
        let lp: Vec<f32> = lp.into_data().to_vec().unwrap();
        assert!(
            (lp[0] as f64 - want).abs() < 1e-4 * want.abs().max(1.0),
            "tensor {} vs {want} for {mean} {raw} {u}",
            lp[0]
        );
        heads.extend([mean, raw]);
        us.push(u);
    }
}

#[test]
fn log_prob_sums_over_dimensions() {
    let squash = Squash::new(&[-1.0, -2.0], &[1.0, 2.0]);
    let head = [0.1f32, -0.4, 0.3, -0.2];
    let u = [0.5f32, -1.0];
    let s = |raw: f32| softplus_direct(raw as f64) + 1e-3;
    let want = ref_log_prob(0.1, s(0.3), 0.5, 1.0) + ref_log_prob(-0.4, s(-0.2), -1.0, 2.0);
    let got = tanh_normal_log_prob(&head, &u, 1e-3, &squash) as f64;
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
}

/// Entropy of the squashed distribution by Simpson integration over u of
/// `-ln p(a(u)) * p_u(u)` (p(a) da = p(u) du).
fn ref_entropy(mean: f64, std: f64, half_width: f64) -> f64 {
    let (lo, hi, n) = (mean - 12.0 * std, mean + 12.0 * std, 200_000usize);
    let h = (hi - lo) / n as f64;
    let f = |u: f64| {
        let pu =
            (-0.5 * ((u - mean) / std).powi(2)).exp() / (std * (2.0 * std::f64::consts::PI).sqrt());
        -ref_log_prob(mean, std, u, half_width) * pu
    };
    let mut s = f(lo) + f(hi);
    for i in 1..n {
        s += f(lo + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0
}

#[test]
fn entropy_estimate_matches_numerical_integration() {
    let n = 100_000usize;
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let noise: Vec<f32> = (0..n)
        .map(|_| rng.sample::<f32, _>(StandardNormal))
        .collect();
    // (mean, raw, half-width): narrow, wide (mass piles at the bounds), off-centre.
    for &(mean, raw, w) in &[
        (0.0f32, 0.5413f32, 2.0f32),
        (-0.5, 2.4, 1.0),
        (1.5, -1.0, 1.0),
    ] {
        let squash = Squash::new(&[-w], &[w]);
        let std = softplus_direct(raw as f64) + 1e-3;
        let want = ref_entropy(mean as f64, std, w as f64);
        let head = t2([mean, raw].repeat(n), [n, 2]);
        let u = t2(vec![0.0; n], [n, 1]);
        let (_, h) = tanh_normal_logp_entropy(
            head.clone(),
            u.clone(),
            t2(noise.clone(), [n, 1]),
            1e-3,
            &squash,
            false,
        );
        let got = h.mean().into_scalar() as f64;
        // Monte Carlo error: sd(ln|J|) <= ~3 here, / sqrt(1e5) ~ 0.01.
        assert!(
            (got - want).abs() < 0.05,
            "squashed entropy {got} vs {want} ({mean}, {std})"
        );
        // The plain Gaussian entropy option: 0.5 ln(2 pi e std^2), no sampling.
        let (_, hg) =
            tanh_normal_logp_entropy(head, u, t2(noise.clone(), [n, 1]), 1e-3, &squash, true);
        let hg: Vec<f32> = hg.into_data().to_vec().unwrap();
        let want_g = 0.5 * (2.0 * std::f64::consts::PI * std::f64::consts::E * std * std).ln();
        assert!(
            (hg[0] as f64 - want_g).abs() < 1e-5,
            "{} vs {want_g}",
            hg[0]
        );
    }
}

#[test]
fn samples_stay_in_bounds_and_report_their_log_prob() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let squash = Squash::new(&[-2.0], &[2.0]);
    // A large std: many samples saturate tanh in f32.
    let head = [0.3f32, 8.0];
    let (mut u, mut a) = ([0.0f32], [0.0f32]);
    let mut sum_u = 0.0f64;
    let n = 50_000;
    for _ in 0..n {
        let lp = sample_tanh_normal(&head, 1e-3, &squash, &mut rng, &mut u, &mut a);
        assert!((-2.0..=2.0).contains(&a[0]), "{a:?}");
        assert!((a[0] - 2.0 * u[0].tanh()).abs() < 1e-6);
        assert!(lp.is_finite() && lp == tanh_normal_log_prob(&head, &u, 1e-3, &squash));
        sum_u += u[0] as f64;
    }
    // u ~ N(0.3, ~8): the sample mean is within 5 standard errors.
    let std = softplus_direct(8.0) + 1e-3;
    assert!((sum_u / n as f64 - 0.3).abs() < 5.0 * std / (n as f64).sqrt());
    let mut mode = [0.0f32];
    tanh_normal_mode(&head, &squash, &mut mode);
    assert!((mode[0] - 2.0 * 0.3f32.tanh()).abs() < 1e-6);
}

#[test]
fn min_std_bounds_the_std_below() {
    // raw = -100: softplus underflows to ~0, the std is min_std, the log-prob finite.
    let squash = Squash::new(&[-1.0], &[1.0]);
    let lp = tanh_normal_log_prob(&[0.0, -100.0], &[0.0], 1e-3, &squash) as f64;
    let want = -(1e-3f64 * (2.0 * std::f64::consts::PI).sqrt()).ln();
    assert!((lp - want).abs() < 1e-4, "{lp} vs {want}");
}
