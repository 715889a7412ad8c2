use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A head of `d_in` inputs and `d_out` actions at offset 3 of a parameter
/// vector (its weight an action per row), random weights, and `m` random
/// rows of input.
fn setup(m: usize, d_in: usize, d_out: usize) -> (Head, Vec<f32>, Vec<f32>) {
    let mut rng = StdRng::seed_from_u64(5);
    let d = Head {
        w: 3,
        b: 3 + d_in * d_out,
        d_in,
        d_out,
    };
    let p = (0..d.b + d_out + 2)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let h = (0..m * d_in).map(|_| rng.random_range(-1.0..1.0)).collect();
    (d, p, h)
}

/// Row r allows the actions a with (a + r).is_multiple_of(5), but row 2 allows none.
fn masks(m: usize, d_out: usize) -> Vec<u8> {
    (0..m)
        .flat_map(|r| (0..d_out).map(move |a| u8::from(r != 2 && (a + r).is_multiple_of(5))))
        .collect()
}

fn allowed_of(masks: &[u8], d_out: usize) -> Allowed {
    let mut allowed = Allowed::default();
    masks.chunks_exact(d_out).for_each(|m| allowed.push_row(m));
    allowed
}

#[test]
fn rows_hold_the_allowed_actions_and_the_ratio_decides() {
    let allowed = allowed_of(&[0, 1, 1, 0, 0, 0, 0, 1], 4);
    assert_eq!(allowed.rows(), 2);
    assert_eq!(allowed.row(0), &[1, 2]);
    assert_eq!(allowed.row(1), &[3]);
    // 3 of 8 allowed: more than one in four.
    assert!(!allowed.worth_it(4));
    let sparse = allowed_of(&[0, 1, 0, 0, 0, 0, 0, 0], 4);
    assert!(sparse.worth_it(4));
    assert!(!Allowed::default().worth_it(4), "no rows");
}

/// Against sums worked out in f64 straight from the definitions, for a width
/// with a partial last chunk of lanes (150 = 2 x 64 + 22) and one below a
/// chunk (7): the logits at the allowed entries (the others untouched), and
/// `dW = hᵀ dy`, `db = Σ dy`, `dx = dy Wᵀ` with `dy` zero where masked.
#[test]
fn logits_and_gradients_match_the_definitions_at_the_allowed_entries() {
    for (m, d_in, d_out) in [(6, 150, 23), (4, 7, 11)] {
        let (d, p, h) = setup(m, d_in, d_out);
        let mask = masks(m, d_out);
        let head = SparseHead {
            allowed: allowed_of(&mask, d_out),
        };
        let mut z = vec![9.0f32; m * d_out];
        head.forward(&d, &p, &h, &mut z);
        let w = |i: usize, a: usize| f64::from(p[d.w + a * d_in + i]);
        for r in 0..m {
            for a in 0..d_out {
                let got = z[r * d_out + a];
                if mask[r * d_out + a] == 0 {
                    assert_eq!(got, 9.0, "masked entry ({r}, {a}) written");
                    continue;
                }
                let want = (0..d_in)
                    .map(|i| f64::from(h[r * d_in + i]) * w(i, a))
                    .sum::<f64>()
                    + f64::from(p[d.b + a]);
                assert!(
                    (f64::from(got) - want).abs() < 1e-4,
                    "logit ({r}, {a}): {got} vs {want}"
                );
            }
        }
        let mut rng = StdRng::seed_from_u64(8);
        // Garbage at the masked entries: the sparse head must not read it.
        let dy: Vec<f32> = (0..m * d_out)
            .map(|k| match mask[k] {
                0 => f32::NAN,
                _ => rng.random_range(-1.0..1.0),
            })
            .collect();
        let dy_at = |r: usize, a: usize| match mask[r * d_out + a] {
            0 => 0.0,
            _ => f64::from(dy[r * d_out + a]),
        };
        let mut g = vec![7.0f32; p.len()];
        let mut dx = vec![7.0f32; m * d_in];
        head.backward(&d, &p, &mut g, &h, &dy, &mut dx);
        for i in 0..d_in {
            for a in 0..d_out {
                let want: f64 = (0..m)
                    .map(|r| f64::from(h[r * d_in + i]) * dy_at(r, a))
                    .sum();
                let got = g[d.w + a * d_in + i];
                assert!(
                    (f64::from(got) - want).abs() < 1e-4,
                    "dW ({i}, {a}): {got} vs {want}"
                );
            }
        }
        for a in 0..d_out {
            let want: f64 = (0..m).map(|r| dy_at(r, a)).sum();
            assert!((f64::from(g[d.b + a]) - want).abs() < 1e-5, "db {a}");
        }
        for r in 0..m {
            for i in 0..d_in {
                let want: f64 = (0..d_out).map(|a| dy_at(r, a) * w(i, a)).sum();
                let got = dx[r * d_in + i];
                assert!(
                    (f64::from(got) - want).abs() < 1e-4,
                    "dx ({r}, {i}): {got} vs {want}"
                );
            }
        }
        // The rest of the parameter vector is another layer's: untouched.
        assert_eq!(&g[..d.w], &[7.0; 3]);
        assert_eq!(&g[d.b + d_out..], &[7.0; 2]);
    }
}

/// An actor's policy: `head_masked` gives `head`'s outputs at every allowed
/// entry and 0 at the masked ones when few are allowed, and `head`'s
/// outputs whole when many are.
#[test]
fn a_policy_computes_the_allowed_outputs_alone_and_the_same() {
    use crate::{Activation, Arch, FusedPolicy};
    let (n, obs_dim, head_dim) = (5, 9, 40);
    let arch = Arch {
        obs_dim,
        head_dim,
        image: None,
        torso: crate::torso_blocks(&[], &[], &[70, 16], None),
        shared_torso: false,
        activation: Activation::Tanh,
        obs_norm: false,
        obs_clip: 10.0,
        input_scale: 1.0,
    };
    let len = crate::net::Layout::new(&arch).len;
    let mut rng = StdRng::seed_from_u64(3);
    let params = (0..len).map(|_| rng.random_range(-0.5..0.5)).collect();
    let policy = FusedPolicy::new(&arch, params, None).expect("a policy");
    let obs: Vec<f32> = (0..n * obs_dim)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let dense = policy.head(&obs, n);
    let few = masks(n, head_dim);
    assert!(allowed_of(&few, head_dim).worth_it(head_dim));
    let sparse = policy.head_masked(&obs, n, &few);
    for (k, (&s, &d)) in sparse.iter().zip(&dense).enumerate() {
        match few[k] {
            0 => assert_eq!(s, 0.0, "masked entry {k}"),
            _ => assert!((s - d).abs() < 1e-5, "entry {k}: {s} vs {d}"),
        }
    }
    let many = vec![1u8; n * head_dim];
    assert_eq!(policy.head_masked(&obs, n, &many), dense);
}
