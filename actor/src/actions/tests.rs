//! Sampling against values worked out independently: probabilities by hand,
//! log-probabilities in f64.

use super::*;
use crate::testing::{FakeEnv, ln_normal, ln_softmax_at};
use rand::SeedableRng;
use rand::rngs::StdRng;
use sebulba_envs::ActionSpace;
use sebulba_proto::{decode_f32, decode_i32, decode_u8};

const DRAWS: usize = 20_000;

fn discrete(e_len: usize, n: usize, masks: Option<Vec<u8>>) -> (FakeEnv, Actions) {
    let venv = FakeEnv::new(e_len, ActionSpace::Discrete { n }, masks);
    let actions = Actions::new(&ActionDist::Categorical { n }, &venv, 1);
    (venv, actions)
}

/// Draws `DRAWS` discrete actions per env from `head`; checks each one's
/// log-probability against `want(e, a)`, and that the batch's action row
/// is what the env got. Returns the counts per env and action.
fn draw(
    (venv, actions): &mut (FakeEnv, Actions),
    head: &[f32],
    epsilon: Option<f32>,
    want: impl Fn(usize, usize) -> f64,
) -> Vec<Vec<usize>> {
    let e_len = venv.e_len;
    let n = head.len() / e_len;
    let mut rng = StdRng::seed_from_u64(17);
    let mut counts = vec![vec![0; n]; e_len];
    let mut lps = vec![0.0f32; e_len];
    for _ in 0..DRAWS {
        let got = match actions.sample(0, head, venv, &mut lps, epsilon, &mut rng) {
            Ok(ActionBatch::Discrete(a)) => a.to_vec(),
            other => panic!("{other:?}"),
        };
        let wire = decode_i32(
            Some(&actions.encode(1, e_len).0),
            "actions",
            &[1, e_len as u32],
        );
        assert_eq!(
            wire.unwrap(),
            got.iter().map(|&a| a as i32).collect::<Vec<_>>()
        );
        for (e, &a) in got.iter().enumerate() {
            counts[e][a as usize] += 1;
            let w = want(e, a as usize);
            let lp = f64::from(lps[e]);
            assert!(
                (lp - w).abs() < 1e-5 * w.abs().max(1.0),
                "env {e} action {a}: {lp} vs {w}"
            );
        }
    }
    counts
}

/// Each frequency within 5 binomial standard deviations of `p`; exactly 0
/// where `p` is 0.
fn assert_frequencies(counts: &[usize], p: &[f64]) {
    let total = counts.iter().sum::<usize>() as f64;
    for (a, (&c, &p)) in counts.iter().zip(p).enumerate() {
        let f = c as f64 / total;
        let sd = (p * (1.0 - p) / total).sqrt();
        assert!(
            (f - p).abs() <= 5.0 * sd,
            "action {a}: {f} vs {p} (sd {sd}); {counts:?}"
        );
    }
}

#[test]
fn categorical_draws_follow_the_softmax_with_its_log_probability() {
    // Env 0: logits ln 1..ln 4, p = [1, 2, 3, 4] / 10. Env 1: logits
    // 5 + [ln 6, 0, 0, ln 2], p = [6, 1, 1, 2] / 10 (a shift changes nothing).
    let (l2, l3, l4, l6) = (2f32.ln(), 3f32.ln(), 4f32.ln(), 6f32.ln());
    let head = [0.0, l2, l3, l4, 5.0 + l6, 5.0, 5.0, 5.0 + l2];
    let p = [[0.1, 0.2, 0.3, 0.4], [0.6, 0.1, 0.1, 0.2]];
    let counts = draw(&mut discrete(2, 4, None), &head, None, |e, a| {
        let by_hand = f64::ln(p[e][a]);
        let in_f64 = ln_softmax_at(&head[e * 4..(e + 1) * 4], None, a);
        assert!(
            (by_hand - in_f64).abs() < 1e-6,
            "the test's own two ways agree"
        );
        by_hand
    });
    assert_frequencies(&counts[0], &p[0]);
    assert_frequencies(&counts[1], &p[1]);
}

#[test]
fn masked_actions_are_never_drawn_and_the_masks_go_on_the_wire() {
    // Env 0: action 1 masked (its logit the largest), logits of the rest
    // [0, ln 3, 0]: p = [1, 0, 3, 1] / 5. Env 1: only action 2 allowed, the
    // smallest logit: p = 1, log-probability 0.
    let masks = vec![1, 0, 1, 1, 0, 0, 1, 0];
    let head = [0.0, 50.0, 3f32.ln(), 0.0, 50.0, 50.0, -3.0, 50.0];
    let p: [[f64; 4]; 2] = [[0.2, 0.0, 0.6, 0.2], [0.0, 0.0, 1.0, 0.0]];
    let mut env = discrete(2, 4, Some(masks.clone()));
    let counts = draw(&mut env, &head, None, |e, a| {
        let in_f64 = ln_softmax_at(&head[e * 4..(e + 1) * 4], Some(&masks[e * 4..]), a);
        assert!((in_f64 - p[e][a].ln()).abs() < 1e-6);
        in_f64
    });
    assert_frequencies(&counts[0], &p[0]);
    assert_eq!(counts[1], [0, 0, DRAWS, 0]);
    let (_, m) = env.1.encode(1, 2);
    assert_eq!(
        decode_u8(m.as_ref(), "action_masks", &[1, 2, 4]).unwrap(),
        masks
    );
    // Every action of env 1 masked: an error naming env 1.
    env.0.masks = Some(vec![1, 1, 1, 1, 0, 0, 0, 0]);
    let mut lps = [0.0; 2];
    let mut rng = StdRng::seed_from_u64(1);
    let r = env.1.sample(0, &head, &env.0, &mut lps, None, &mut rng);
    assert_eq!(r.err(), Some(DistError::AllMasked { env: 1 }));
}

#[test]
fn epsilon_greedy_is_argmax_at_0_uniform_at_1_with_the_mixtures_log_probability() {
    // Q-values with argmax 1 (and 3 a close second).
    let q = [0.2, 1.5, -0.3, 1.4];
    let at_0 = draw(&mut discrete(1, 4, None), &q, Some(0.0), |_, a| {
        if a == 1 { 0.0 } else { f64::NEG_INFINITY }
    });
    assert_eq!(at_0[0], [0, DRAWS, 0, 0]);
    let at_1 = draw(&mut discrete(1, 4, None), &q, Some(1.0), |_, _| {
        0.25f64.ln()
    });
    assert_frequencies(&at_1[0], &[0.25; 4]);
    // eps 0.3: the greedy action 0.7 + 0.3 / 4, the others 0.3 / 4.
    let at_03 = draw(&mut discrete(1, 4, None), &q, Some(0.3), |_, a| {
        if a == 1 { 0.775f64.ln() } else { 0.075f64.ln() }
    });
    assert_frequencies(&at_03[0], &[0.075, 0.775, 0.075, 0.075]);
    // The argmax masked: 3 is greedy among 3 allowed actions,
    // 0.7 + 0.1 against 0.1, and 1 is never taken.
    let masked = draw(
        &mut discrete(1, 4, Some(vec![1, 0, 1, 1])),
        &q,
        Some(0.3),
        |_, a| {
            if a == 3 { 0.8f64.ln() } else { 0.1f64.ln() }
        },
    );
    assert_frequencies(&masked[0], &[0.1, 0.0, 0.1, 0.8]);
}

#[test]
fn tanh_normal_actions_and_log_probabilities_match_an_independent_density() {
    // Box [-2, 2] x [0, 1]: centre (0, 0.5), half-width (2, 0.5).
    let (low, high) = ([-2.0f32, 0.0], [2.0f32, 1.0]);
    let (c, s) = ([0.0f64, 0.5], [2.0f64, 0.5]);
    let venv = FakeEnv::new(
        2,
        ActionSpace::Box {
            low: low.to_vec(),
            high: high.to_vec(),
        },
        None,
    );
    let dist = ActionDist::TanhNormal {
        dim: 2,
        squash: Squash::new(&low, &high),
        min_std: 0.01,
    };
    let mut actions = Actions::new(&dist, &venv, 1);
    // Heads [mean (2), raw (2)] per env; std = ln(1 + e^raw) + 0.01.
    let head = [0.3, -1.0, 0.0, 1.0, 1.5, 0.2, -2.0, 0.5];
    let mean = |e: usize, i: usize| f64::from(head[e * 4 + i]);
    let std = |e: usize, i: usize| f64::from(head[e * 4 + 2 + i]).exp().ln_1p() + 0.01;
    let mut rng = StdRng::seed_from_u64(5);
    let mut lps = [0.0f32; 2];
    let mut sums = [[0.0f64; 2]; 4];
    for _ in 0..DRAWS {
        let a = match actions.sample(0, &head, &venv, &mut lps, None, &mut rng) {
            Ok(ActionBatch::Continuous(a)) => a.to_vec(),
            other => panic!("{other:?}"),
        };
        let u = decode_f32(Some(&actions.encode(1, 2).0), "actions", &[1, 2, 2]).unwrap();
        let mut want = 0.0;
        for (k, (&u, &a)) in u.iter().zip(&a).enumerate() {
            let (e, i, u) = (k / 2, k % 2, f64::from(u));
            let squashed = c[i] + s[i] * u.tanh();
            assert!((f64::from(a) - squashed).abs() < 1e-5, "{a} vs {squashed}");
            want += ln_normal(u, mean(e, i), std(e, i)) - (s[i] * (1.0 - u.tanh().powi(2))).ln();
            if i == 1 {
                let lp = f64::from(lps[e]);
                assert!(
                    (lp - want).abs() < 1e-4 * want.abs().max(1.0),
                    "{lp} vs {want}"
                );
                want = 0.0;
            }
            sums[k][0] += u;
            sums[k][1] += u * u;
        }
    }
    // The pre-tanh samples are N(mean, std): 5 standard errors.
    let n = DRAWS as f64;
    for (k, [s1, s2]) in sums.iter().enumerate() {
        let (m, sd) = (mean(k / 2, k % 2), std(k / 2, k % 2));
        let (got_m, got_sd) = (s1 / n, (s2 / n - (s1 / n).powi(2)).sqrt());
        assert!(
            (got_m - m).abs() < 5.0 * sd / n.sqrt(),
            "{k}: mean {got_m} vs {m}"
        );
        assert!(
            (got_sd - sd).abs() < 5.0 * sd / (2.0 * n).sqrt(),
            "{k}: std {got_sd} vs {sd}"
        );
    }
}
