//! The fused engine against burn's autodiff on the same model and minibatch:
//! every parameter's gradient, the loss statistics, whole updates, and
//! checkpoints that cross between the engines.

use super::*;
use crate::data::{Loss, Minibatch, UpdateData};
use crate::engine::burn::adam::{read_adam, write_adam};
use crate::engine::burn::{Replica, Shard, ppo_losses, state_of_model};
use crate::engine::{EngineChoice, Steps};
use crate::trainer::Trainer;
use burn::tensor::backend::Backend;
use burn::tensor::{ElementConversion, Tensor, TensorData};
use burn_optim::GradientsParams;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_core::CpuAutodiff;
use sebulba_core::config::PpoConfig;
use sebulba_core::config::{Activation, AdvantageNorm, ConvLayer, NetworkConfig, RunConfig, Stack};
use sebulba_core::distribution::ActionDist;
use sebulba_core::distribution::{log_softmax_row, tanh_normal_log_prob};
use sebulba_core::model::ModelSpec;
use sebulba_core::model::flat::{Slot, obs_norm, param_slots, read_params, write_params};
use sebulba_core::model::{ActorCritic, RunningMeanStd};
use sebulba_envs::{ActionSpace, env_spec};
use sebulba_fused::net::Layout;

mod sequences;

type B = CpuAutodiff;
/// What burn's gradients come out on.
type Inner = sebulba_core::CpuBackend;

fn ppo_cfg() -> PpoConfig {
    let mut c = RunConfig::preset("CartPole-v1").unwrap().ppo;
    c.ent_coef = 0.01;
    c.vf_coef = 0.5;
    c
}

#[derive(Clone)]
struct Case {
    name: &'static str,
    spec: ModelSpec,
    masks: bool,
    /// Whether the observations are a game's flags: 0 or 1, mostly 0.
    flags: bool,
    cfg: PpoConfig,
}

fn cases() -> Vec<Case> {
    let discrete = |network: NetworkConfig| ModelSpec {
        input_scale: 1.0,
        obs_dim: 4,
        image: None,
        action_space: ActionSpace::Discrete { n: 3 },
        network,
    };
    let pendulum = |network: NetworkConfig| {
        let mut env = env_spec("MountainCarContinuous-v0").unwrap();
        env.obs_dim = 3;
        ModelSpec::new(&env, &network).unwrap()
    };
    let net = |hidden: Vec<usize>| NetworkConfig {
        hidden,
        ..Default::default()
    };
    let mut clipped_value = ppo_cfg();
    clipped_value.clip_value_loss = true;
    clipped_value.value_clip_coef = 0.05;
    let mut gaussian = ppo_cfg();
    gaussian.gaussian_entropy = true;
    vec![
        Case {
            name: "discrete, separate tanh torsos",
            spec: discrete(net(vec![16, 8])),
            masks: false,
            flags: false,
            cfg: ppo_cfg(),
        },
        Case {
            name: "discrete, masks, clipped value loss",
            spec: discrete(net(vec![8])),
            masks: true,
            flags: false,
            cfg: clipped_value,
        },
        Case {
            name: "discrete, shared relu torso, obs norm",
            spec: discrete(NetworkConfig {
                hidden: vec![16, 16],
                activation: Activation::Relu,
                shared_torso: true,
                obs_norm: true,
                obs_clip: 1.5,
                ..Default::default()
            }),
            masks: false,
            flags: false,
            cfg: ppo_cfg(),
        },
        Case {
            name: "continuous, sampled entropy, obs norm",
            spec: pendulum(NetworkConfig {
                obs_norm: true,
                ..net(vec![16, 8])
            }),
            masks: false,
            flags: false,
            cfg: ppo_cfg(),
        },
        Case {
            name: "continuous, gaussian entropy, no hidden layer",
            spec: pendulum(net(vec![])),
            masks: false,
            flags: false,
            cfg: gaussian,
        },
    ]
    .into_iter()
    .chain([game_case()])
    .chain(conv_cases())
    .chain(impala_cases())
    .collect()
}

/// A game's network: flags observed (mostly 0), a wide head mostly masked.
fn game_case() -> Case {
    Case {
        name: "a game: flags observed (the sparse input), a wide head mostly masked (the sparse head), shared relu torso",
        spec: ModelSpec {
            input_scale: 1.0,
            obs_dim: 48,
            image: None,
            action_space: ActionSpace::Discrete { n: WIDE_HEAD },
            network: NetworkConfig {
                hidden: vec![70],
                activation: Activation::Relu,
                shared_torso: true,
                ..Default::default()
            },
        },
        masks: true,
        flags: true,
        cfg: ppo_cfg(),
    }
}

/// Convolution stems, one shape class each: padding and a stride that leaves
/// input over; the Nature CNN's 8x8/4 into 3x3/1 on scaled input; MinAtar's VALID 3x3 on a
/// 10x10 grid; a stem straight into the heads.
fn conv_cases() -> Vec<Case> {
    let mut conv_clipped_value = ppo_cfg();
    conv_clipped_value.clip_value_loss = true;
    conv_clipped_value.value_clip_coef = 0.05;
    vec![
        Case {
            name: "image, padded and strided stem, separate relu torsos",
            spec: image(
                [7, 6, 2],
                3,
                stem(&[(4, 3, 1, 1), (3, 2, 2, 0)], vec![8], false),
            ),
            masks: false,
            flags: false,
            cfg: ppo_cfg(),
        },
        Case {
            name: "image, Nature-shaped stem, shared torso, clipped value loss, input scaled",
            spec: ModelSpec {
                // Atari's bytes: what a 0..255 frame is multiplied by.
                input_scale: 1.0 / 255.0,
                ..image(
                    [20, 20, 2],
                    4,
                    stem(&[(4, 8, 4, 0), (3, 3, 1, 0)], vec![16], true),
                )
            },
            masks: false,
            flags: false,
            cfg: conv_clipped_value,
        },
        Case {
            name: "image, MinAtar-shaped stem, masks",
            spec: image([10, 10, 4], 6, stem(&[(8, 3, 1, 0)], vec![16], true)),
            masks: true,
            flags: false,
            cfg: ppo_cfg(),
        },
        Case {
            name: "image, tanh stem straight into the heads, obs norm",
            spec: image(
                [5, 5, 3],
                3,
                NetworkConfig {
                    activation: Activation::Tanh,
                    obs_norm: true,
                    ..stem(&[(4, 3, 1, 0)], vec![], false)
                },
            ),
            masks: false,
            flags: false,
            cfg: ppo_cfg(),
        },
    ]
}

/// The IMPALA ResNet's blocks (convolution, max-pool, residual blocks,
/// the activation after the stacks): whole stacks into a dense layer, a
/// stem and a stack straight into the heads, and stacks as wide as the
/// network's.
fn impala_cases() -> Vec<Case> {
    vec![
        Case {
            name: "image, IMPALA stacks (convolution, max-pool, residual blocks), separate relu torsos",
            spec: image(
                [9, 8, 3],
                4,
                NetworkConfig {
                    stacks: vec![stack(4, 1), stack(3, 2)],
                    ..stem(&[], vec![8], false)
                },
            ),
            masks: false,
            flags: false,
            cfg: ppo_cfg(),
        },
        Case {
            name: "image, a stem then an IMPALA stack straight into the heads, tanh, shared, masks",
            spec: image(
                [6, 7, 2],
                3,
                NetworkConfig {
                    activation: Activation::Tanh,
                    stacks: vec![stack(3, 1)],
                    ..stem(&[(4, 2, 1, 0)], vec![], true)
                },
            ),
            masks: true,
            flags: false,
            cfg: ppo_cfg(),
        },
        Case {
            // On AVX-512 the direct kernel takes both stacks' convolutions
            // after the first, forward and back (a window of two slices in
            // the second stack's residual block).
            name: "image, IMPALA stacks of 16 and 32 channels, shared relu torso",
            spec: image(
                [6, 5, 3],
                3,
                NetworkConfig {
                    stacks: vec![stack(16, 1), stack(32, 1)],
                    ..stem(&[], vec![8], true)
                },
            ),
            masks: false,
            flags: false,
            cfg: ppo_cfg(),
        },
    ]
}

/// The first case with a convolution stem.
const FIRST_CONV: usize = 6;

/// A head this wide gets a game's masks: a few actions allowed per row
/// ([`masks_of`]).
const WIDE_HEAD: usize = 40;

/// Row `i`'s mask over `k` actions: one action masked on three rows in
/// four; on a [`WIDE_HEAD`], the actions `a` with `(a + i) % 8 == 0` alone
/// (5 of 40, as a game's mostly masked head).
fn masks_of(n: usize, k: usize) -> Vec<u8> {
    let allowed = move |i: usize, j: usize| {
        if k >= WIDE_HEAD {
            (i + j).is_multiple_of(8)
        } else {
            j != (i % 4) || i % 4 == 3
        }
    };
    (0..n)
        .flat_map(|i| (0..k).map(move |j| u8::from(allowed(i, j))))
        .collect()
}

/// A discrete-action network on `[h, w, c]` images.
fn image([h, w, c]: [usize; 3], actions: usize, network: NetworkConfig) -> ModelSpec {
    ModelSpec {
        input_scale: 1.0,
        obs_dim: h * w * c,
        image: Some([h, w, c]),
        action_space: ActionSpace::Discrete { n: actions },
        network,
    }
}

/// A relu network of `(channels, kernel, stride, padding)` layers then `hidden`.
fn stem(
    layers: &[(usize, usize, usize, usize)],
    hidden: Vec<usize>,
    shared: bool,
) -> NetworkConfig {
    NetworkConfig {
        conv: layers
            .iter()
            .map(|&(channels, kernel, stride, padding)| ConvLayer {
                channels,
                kernel,
                stride,
                padding,
            })
            .collect(),
        hidden,
        activation: Activation::Relu,
        shared_torso: shared,
        ..Default::default()
    }
}

/// An IMPALA stack of `channels` with `blocks` residual blocks.
fn stack(channels: usize, blocks: usize) -> Stack {
    Stack { channels, blocks }
}

/// A model with obs-norm statistics set (when on) from the case's observations.
fn model(case: &Case, data: &UpdateData) -> ActorCritic<B> {
    let dev = Default::default();
    B::seed(&dev, 7);
    let mut m = case.spec.init::<B>(&dev);
    let mut stats = RunningMeanStd::new(data.obs_dim);
    stats.update(&data.observations.to_f32(0..data.obs_dim * 8));
    m.set_obs_stats(&stats);
    m
}

/// `n` samples whose behaviour log-probabilities are the model's own, jittered
/// so that ratios land on both sides of the clip range.
fn data(case: &Case, n: usize, seed: u64) -> UpdateData {
    let mut rng = StdRng::seed_from_u64(seed);
    let d = case.spec.obs_dim;
    let observations: Vec<f32> = (0..n * d)
        .map(|_| match case.flags {
            true => f32::from(u8::from(rng.random_ratio(1, 8))),
            false => rng.random_range(-2.0..2.0),
        })
        .collect();
    let (actions, masks) = match &case.spec.action_space {
        ActionSpace::Discrete { n: k } => {
            let masks = masks_of(n, *k);
            let actions = (0..n)
                .map(|i| {
                    let mut a = rng.random_range(0..*k);
                    while case.masks && masks[i * k + a] == 0 {
                        a = rng.random_range(0..*k);
                    }
                    a as i32
                })
                .collect();
            (
                crate::trajectory::BatchActions::Discrete(actions),
                case.masks.then_some(masks),
            )
        }
        ActionSpace::Box { low, .. } => (
            crate::trajectory::BatchActions::Continuous(
                (0..n * low.len())
                    .map(|_| rng.random_range(-1.5..1.5))
                    .collect(),
            ),
            None,
        ),
    };
    let mut data = UpdateData {
        obs_dim: d,
        observations: observations.into(),
        actions,
        masks,
        old_log_probs: vec![0.0; n],
        advantages: (0..n).map(|_| rng.random_range(-2.0..2.0)).collect(),
        returns: (0..n).map(|_| rng.random_range(-1.0..1.0)).collect(),
        old_values: (0..n).map(|_| rng.random_range(-0.2..0.2)).collect(),
        weights: None,
        sequences: None,
    };
    let m = model(case, &data);
    let obs = Tensor::<B, 2>::from_data(
        TensorData::new(data.observations.to_f32(0..n * d), [n, d]),
        &Default::default(),
    );
    let heads: Vec<f32> = m.policy(obs).into_data().to_vec().unwrap();
    let hd = case.spec.head_dim();
    let dist = case.spec.dist();
    for i in 0..n {
        let head = &heads[i * hd..(i + 1) * hd];
        let lp = match (&dist, &data.actions) {
            (ActionDist::Categorical { .. }, crate::trajectory::BatchActions::Discrete(a)) => {
                let mut out = vec![0.0; hd];
                let mask = data.masks.as_ref().map(|mk| &mk[i * hd..(i + 1) * hd]);
                log_softmax_row(head, mask, &mut out);
                out[a[i] as usize]
            }
            (
                ActionDist::TanhNormal {
                    squash, min_std, ..
                },
                crate::trajectory::BatchActions::Continuous(u),
            ) => {
                let w = hd / 2;
                tanh_normal_log_prob(head, &u[i * w..(i + 1) * w], *min_std, squash)
            }
            _ => unreachable!(),
        };
        data.old_log_probs[i] = lp + rng.random_range(-0.4..0.4);
    }
    data
}

fn fused_from(case: &Case, m: &ActorCritic<B>, threads: usize) -> Fused {
    let mut f = Fused::new(&case.spec, threads, case.cfg.adam_eps);
    f.load(&state_of_model(&case.spec, m).unwrap()).unwrap();
    f.set_norm(obs_norm(m).unwrap());
    f
}

/// PPO on one CPU device from `m`'s parameters and normaliser, on the fused
/// engine when `fused`.
fn on_cpu(
    spec: &ModelSpec,
    m: &ActorCritic<B>,
    cfg: &PpoConfig,
    seed: u64,
    fused: bool,
) -> Trainer {
    on_threads(spec, m, cfg, seed, if fused { 1 } else { 0 })
}

/// PPO from `m`'s parameters and normaliser on burn (`threads` 0) or on the
/// fused engine with up to `threads` threads a step.
fn on_threads(
    spec: &ModelSpec,
    m: &ActorCritic<B>,
    cfg: &PpoConfig,
    seed: u64,
    threads: usize,
) -> Trainer {
    let choice = match threads {
        0 => EngineChoice::cpu(),
        threads => EngineChoice::Fused { threads },
    };
    let state = state_of_model(spec, m).unwrap();
    let mut ppo = Trainer::new(spec, &state, &choice, cfg.adam_eps, seed).unwrap();
    if let Some(n) = obs_norm(m).unwrap() {
        let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect();
        ppo.set_obs_stats(&RunningMeanStd {
            count: 1.0,
            mean: wide(n.mean()),
            var: wide(n.var()),
        });
    }
    ppo
}

fn params(t: &Trainer) -> Vec<f32> {
    t.state().unwrap().params
}

fn scalar(t: Tensor<Inner, 1>) -> f64 {
    t.into_scalar().elem::<f64>()
}

#[test]
// One case table and one comparison: it reads best whole.
#[allow(clippy::too_many_lines)]
fn every_gradient_and_loss_term_matches_burn_autodiff() {
    // One thread, and three taking 43, 43 and 42 of the 128 rows.
    for (case, threads) in cases().into_iter().flat_map(|c| [(c.clone(), 1), (c, 3)]) {
        let n = 256;
        let data = data(&case, n, 3);
        let m = model(&case, &data);
        let idx: Vec<usize> = (0..n).rev().step_by(2).collect();
        let adv: Vec<f32> = idx.iter().map(|&i| data.advantages[i]).collect();
        let width = case.spec.dist().action_width();
        let noise: Vec<f32> = if case.spec.action_space.is_discrete() {
            vec![]
        } else {
            let mut rng = StdRng::seed_from_u64(9);
            (0..idx.len() * width)
                .map(|_| rng.random_range(-2.0..2.0))
                .collect()
        };
        let mut cfg = case.cfg.clone();
        cfg.max_grad_norm = 1e9;
        cfg.target_kl = 0.0;
        let shard = Shard {
            data: &data,
            idx: &idx,
            adv: &adv,
            noise: &noise,
            minibatch: idx.len(),
            sequences: &[],
            states: &sebulba_fused::PolicyState::default(),
        };
        let dist = case.spec.dist();
        let replica = Replica::new(m.clone(), cfg.adam_eps, Default::default(), None);
        let losses = ppo_losses(&m, replica.minibatch(&shard, &dist), &dist, &cfg, 0.2);
        let want = [
            scalar(losses.policy),
            scalar(losses.value),
            scalar(losses.entropy),
            scalar(losses.approx_kl),
            scalar(losses.clip_fraction),
        ];
        let grads = GradientsParams::from_grads(losses.total.backward(), &m);

        let mut f = fused_from(&case, &m, threads);
        assert_eq!(f.threads(), threads);
        let s = f.step(&Minibatch {
            data: &data,
            sequences: &[],
            states: &sebulba_fused::PolicyState::default(),
            idx: &idx,
            adv: &adv,
            noise: &noise,
            lr: 0.0,
            max_grad_norm: cfg.max_grad_norm,
            loss: Loss::Ppo {
                cfg: &cfg,
                clip: 0.2,
            },
        });
        let got = [
            s.terms.policy_loss,
            s.terms.value_loss,
            s.terms.entropy,
            s.terms.approx_kl,
            s.terms.clip_fraction,
        ];
        for (what, (g, w)) in ["policy", "value", "entropy", "kl", "clip fraction"]
            .iter()
            .zip(got.iter().zip(&want))
        {
            assert!(
                (g - w).abs() <= 2e-5 * (1.0 + w.abs()),
                "{} ({threads} threads): {what} {g} vs burn {w}",
                case.name
            );
        }
        assert!(
            want[4] > 0.1 && want[4] < 0.9,
            "{}: ratios should fall on both sides of the clip range",
            case.name
        );
        for Slot { id, tensor } in param_slots(f.layout(), &m).unwrap() {
            let shape = &tensor.shape;
            let burn: Vec<f32> = match shape.len() {
                4 => grads
                    .get::<Inner, 4>(id)
                    .map(|g| g.into_data().to_vec().unwrap()),
                2 => grads
                    .get::<Inner, 2>(id)
                    .map(|g| g.into_data().to_vec().unwrap()),
                _ => grads
                    .get::<Inner, 1>(id)
                    .map(|g| g.into_data().to_vec().unwrap()),
            }
            .unwrap_or_else(|| vec![0.0; tensor.len()]);
            let ours = &tensor.gather(f.grads());
            let scale = burn.iter().fold(1e-6f32, |a, &b| a.max(b.abs()));
            for (k, (o, b)) in ours.iter().zip(&burn).enumerate() {
                assert!(
                    (o - b).abs() <= 1e-4 * scale,
                    "{} ({threads} threads): gradient of {shape:?} at {k}: fused {o} vs burn {b}",
                    case.name
                );
            }
        }
        // The learning rate was zero: the parameters did not move.
        assert_eq!(f.params(), read_params(f.layout(), &m).unwrap());
    }
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn whole_updates_follow_the_burn_engine() {
    for case in cases() {
        let data = data(&case, 256, 5);
        let m = model(&case, &data);
        let mut cfg = case.cfg.clone();
        cfg.epochs = 3;
        cfg.minibatches = 4;
        cfg.adv_norm = AdvantageNorm::Minibatch;
        let mut burn = on_cpu(&case.spec, &m, &cfg, 11, false);
        let mut fused = on_cpu(&case.spec, &m, &cfg, 11, true);
        // Two threads, each taking 32 of a minibatch's 64 rows.
        let mut sharded = on_threads(&case.spec, &m, &cfg, 11, 2);
        assert_eq!((burn.engine(), fused.engine()), ("burn", "fused"));
        let start = params(&burn);
        for _ in 0..2 {
            let a = crate::ppo::update(&mut burn, &data, &cfg, 3e-3, 0.2).unwrap();
            let b = crate::ppo::update(&mut fused, &data, &cfg, 3e-3, 0.2).unwrap();
            let c = crate::ppo::update(&mut sharded, &data, &cfg, 3e-3, 0.2).unwrap();
            assert_eq!(a.minibatch_steps, b.minibatch_steps);
            assert_eq!(b.minibatch_steps, c.minibatch_steps);
            for (what, x, y, z) in [
                (
                    "policy",
                    a.terms.policy_loss,
                    b.terms.policy_loss,
                    c.terms.policy_loss,
                ),
                (
                    "value",
                    a.terms.value_loss,
                    b.terms.value_loss,
                    c.terms.value_loss,
                ),
                ("entropy", a.terms.entropy, b.terms.entropy, c.terms.entropy),
                ("grad norm", a.grad_norm, b.grad_norm, c.grad_norm),
            ] {
                assert!(
                    (x - y).abs() <= 1e-3 * (1.0 + x.abs()),
                    "{}: {what} {x} vs {y}",
                    case.name
                );
                // Threads change only the order of the additions.
                assert!(
                    (y - z).abs() <= 1e-5 * (1.0 + y.abs()),
                    "{}: {what} {y} on one thread vs {z} on two",
                    case.name
                );
            }
        }
        let (pa, pb, pc) = (params(&burn), params(&fused), params(&sharded));
        let moved = max_diff(&pa, &start);
        assert!(moved > 1e-3, "{}: the update moved nothing", case.name);
        for (what, p) in [("one thread", &pb), ("two threads", &pc)] {
            assert!(
                max_diff(&pa, p) < 0.02 * moved,
                "{}: fused on {what} apart from burn by {} after moving {moved}",
                case.name,
                max_diff(&pa, p)
            );
        }
        assert!(
            max_diff(&pb, &pc) < 1e-4 * moved,
            "{}: one and two threads apart by {}",
            case.name,
            max_diff(&pb, &pc)
        );
        // What is published is the fused engine's parameters.
        let file = fused.safetensors().unwrap();
        let (published, _) = sebulba_fused::file::read(&case.spec.arch(), &file).unwrap();
        assert_eq!(published, pb);
    }
}

#[test]
fn target_kl_stops_the_fused_engine_like_burn() {
    let case = &cases()[0];
    let data = data(case, 128, 2);
    let m = model(case, &data);
    let mut cfg = case.cfg.clone();
    cfg.epochs = 50;
    cfg.minibatches = 2;
    cfg.target_kl = 0.02;
    let mut burn = on_cpu(&case.spec, &m, &cfg, 1, false);
    let mut fused = on_cpu(&case.spec, &m, &cfg, 1, true);
    let a = crate::ppo::update(&mut burn, &data, &cfg, 2e-2, 0.2).unwrap();
    let b = crate::ppo::update(&mut fused, &data, &cfg, 2e-2, 0.2).unwrap();
    assert!(a.early_stopped && b.early_stopped);
    assert_eq!(a.minibatch_steps, b.minibatch_steps);
}

#[test]
fn adam_state_converts_to_burn_records_and_back() {
    for case in [&cases()[3], &cases()[FIRST_CONV]] {
        adam_state_round_trip(case);
    }
}

fn adam_state_round_trip(case: &Case) {
    let data = data(case, 128, 4);
    let m = model(case, &data);
    let state = state_of_model(&case.spec, &m).unwrap();
    let mut engine = FusedEngine::new(&case.spec, &state, 1, case.cfg.adam_eps).unwrap();
    let idx: Vec<usize> = (0..data.len()).collect();
    let noise = vec![0.1; data.len() * case.spec.dist().action_width()];
    let mb = Minibatch {
        data: &data,
        sequences: &[],
        states: &sebulba_fused::PolicyState::default(),
        idx: &idx,
        adv: &data.advantages,
        noise: &noise,
        lr: 1e-3,
        max_grad_norm: case.cfg.max_grad_norm,
        loss: Loss::Ppo {
            cfg: &case.cfg,
            clip: 0.2,
        },
    };
    engine.step(&mb).unwrap();
    engine.step(&mb).unwrap();
    let s = engine.save().unwrap();
    assert!(s.time == 2 && s.m1.iter().any(|&x| x != 0.0));
    let layout = engine.cpu().layout();
    let record = write_adam(layout, &m, &s.m1, &s.m2, s.time).unwrap();
    let (a, b, t) = read_adam(layout, &m, record).unwrap();
    assert_eq!((a, b, t), (s.m1, s.m2, s.time));
}

#[test]
fn checkpoints_cross_between_the_engines() {
    for case in [
        &cases()[1],
        &cases()[3],
        &cases()[5],
        &cases()[FIRST_CONV + 1],
    ] {
        let data = data(case, 128, 6);
        let m = model(case, &data);
        let cfg = &case.cfg;
        let mut fused = on_cpu(&case.spec, &m, cfg, 5, true);
        crate::ppo::update(&mut fused, &data, cfg, 3e-3, 0.2).unwrap();
        let state = fused.checkpoint_state().unwrap();
        // Resumed on burn, and on a fresh fused engine: both continue as the
        // original does.
        let mut on_burn = on_cpu(&case.spec, &m, cfg, 5, false);
        on_burn.load_state(&state).unwrap();
        let mut on_fused = on_cpu(&case.spec, &m, cfg, 5, true);
        on_fused.load_state(&state).unwrap();
        // burn holds the state exactly: parameters and Adam's moments (a
        // resume without them would take a first, larger Adam step).
        assert_eq!(on_burn.state().unwrap(), state.state, "{}", case.name);
        assert_eq!(on_fused.state().unwrap(), state.state, "{}", case.name);
        let before = params(&fused);
        for p in [&mut fused, &mut on_burn, &mut on_fused] {
            crate::ppo::update(p, &data, cfg, 3e-3, 0.2).unwrap();
        }
        let (a, b, c) = (params(&fused), params(&on_burn), params(&on_fused));
        assert_eq!(a, c, "{}: a fused resume continues exactly", case.name);
        let moved = max_diff(&a, &before);
        assert!(
            max_diff(&a, &b) < 0.02 * moved,
            "{}: burn resumed from a fused checkpoint is {} apart after moving {moved}",
            case.name,
            max_diff(&a, &b)
        );
    }
}

#[test]
fn unsupported_networks_are_refused_by_name() {
    let mut spec = cases()[0].spec.clone();
    spec.network.layer_norm = sebulba_core::config::LayerNormPlacement::Pre;
    let e = FusedEngine::check(&spec, 1).unwrap_err().to_string();
    assert!(e.contains("network.layer_norm"), "{e}");
    let e = FusedEngine::check(&cases()[0].spec, 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 devices"), "{e}");
    let fused = EngineChoice::Fused { threads: 1 };
    let e = Trainer::fresh(&spec, ppo_cfg().adam_eps, 1, &fused)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("network.layer_norm"), "{e}");
    let ppo = Trainer::fresh(&spec, ppo_cfg().adam_eps, 1, &EngineChoice::cpu()).unwrap();
    assert_eq!(ppo.engine(), "burn");
}

#[test]
fn bootstrap_values_match_burn() {
    for case in cases() {
        let data = data(&case, 32, 8);
        let m = model(&case, &data);
        let mut burn = on_cpu(&case.spec, &m, &case.cfg, 1, false);
        let mut fused = on_cpu(&case.spec, &m, &case.cfg, 1, true);
        let (a, b) = (
            burn.values(&Steps::rows(data.observations.as_f32().unwrap())),
            fused.values(&Steps::rows(data.observations.as_f32().unwrap())),
        );
        assert_eq!(a.len(), 32);
        assert!(max_diff(&a, &b) < 1e-5, "{}: {a:?} vs {b:?}", case.name);
    }
}

/// A pass over more rows than fit at once goes in chunks, with the values of
/// one pass over them all (a deep image network's bootstrap pass).
#[test]
fn values_in_chunks_are_the_values_of_one_pass() {
    for case in impala_cases() {
        let data = data(&case, 20, 8);
        let m = model(&case, &data);
        let mut fused = fused_from(&case, &m, 1);
        let obs = data.observations.as_f32().unwrap();
        let whole = fused.values_in_chunks(obs, 20);
        let chunked = fused.values_in_chunks(obs, 3);
        assert_eq!(whole.len(), 20);
        assert!(
            max_diff(&whole, &chunked) < 1e-6,
            "{}: {whole:?} vs {chunked:?}",
            case.name
        );
        assert_eq!(
            fused.values(obs),
            whole,
            "{}: 20 rows fit one pass",
            case.name
        );
    }
}

/// The wide case's rows allow few enough actions for the sparse policy head,
/// so the comparisons with burn above go through it; the other masked
/// cases' rows do not.
#[test]
fn the_mostly_masked_case_takes_the_sparse_head() {
    let worth_it = |k: usize| {
        let mut allowed = sebulba_fused::sparse_head::Allowed::default();
        let masks = masks_of(256, k);
        masks.chunks_exact(k).for_each(|m| allowed.push_row(m));
        allowed.worth_it(k)
    };
    let wide = &cases()[5];
    assert_eq!(wide.spec.head_dim(), WIDE_HEAD, "{}", wide.name);
    assert!(wide.masks && worth_it(WIDE_HEAD));
    assert!(!worth_it(3) && !worth_it(6));
}

/// The game case's flags are sparse enough for the first layer to read
/// their nonzero entries alone, so the comparisons with burn above go
/// through it; the other cases' observations are not.
#[test]
fn the_flags_case_takes_the_sparse_input() {
    for case in cases() {
        let (n, d) = (256, case.spec.obs_dim);
        let data = data(&case, n, 3);
        let x = data.observations.to_f32(0..n * d);
        let mut rows = sebulba_fused::sparse_input::SparseRows::default();
        assert_eq!(rows.index(&x, n, d), case.flags, "{}", case.name);
    }
    assert!(cases()[5].flags);
}

/// An action masked in every sample (a game's illegal move) has zero
/// probability and gets exactly zero gradient, in burn's engine and in the
/// fused one: its logit's bias and weights do not move.
#[test]
fn a_masked_action_gets_zero_probability_and_zero_gradient_in_both_engines() {
    let case = cases()
        .into_iter()
        .find(|c| c.masks)
        .expect("a masked case");
    let n = 32;
    let mut data = data(&case, n, 5);
    // Action 2 of 3 is illegal everywhere; the taken actions are legal.
    data.masks = Some((0..n).flat_map(|_| [1u8, 1, 0]).collect());
    if let crate::trajectory::BatchActions::Discrete(a) = &mut data.actions {
        for (i, x) in a.iter_mut().enumerate() {
            *x = (i % 2) as i32;
        }
    }
    let m = model(&case, &data);
    let idx: Vec<usize> = (0..n).collect();
    let adv = data.advantages.clone();
    let mut cfg = case.cfg.clone();
    cfg.max_grad_norm = 1e9;
    cfg.target_kl = 0.0;
    let dist = case.spec.dist();
    let shard = Shard {
        data: &data,
        idx: &idx,
        adv: &adv,
        noise: &[],
        minibatch: n,
        sequences: &[],
        states: &sebulba_fused::PolicyState::default(),
    };
    let replica = Replica::new(m.clone(), cfg.adam_eps, Default::default(), None);
    let losses = ppo_losses(&m, replica.minibatch(&shard, &dist), &dist, &cfg, 0.2);
    let grads = GradientsParams::from_grads(losses.total.backward(), &m);
    let head = &m.policy_head;
    let bias_id = head.bias.as_ref().expect("a bias").id;
    let burn_bias: Vec<f32> = grads
        .get::<Inner, 1>(bias_id)
        .expect("the head's bias gradient")
        .into_data()
        .to_vec()
        .unwrap();
    let burn_weight: Vec<f32> = grads
        .get::<Inner, 2>(head.weight.id)
        .expect("the head's weight gradient")
        .into_data()
        .to_vec()
        .unwrap();
    let mut f = fused_from(&case, &m, 1);
    f.step(&Minibatch {
        data: &data,
        sequences: &[],
        states: &sebulba_fused::PolicyState::default(),
        idx: &idx,
        adv: &adv,
        noise: &[],
        lr: 0.0,
        max_grad_norm: cfg.max_grad_norm,
        loss: Loss::Ppo {
            cfg: &cfg,
            clip: 0.2,
        },
    });
    let slots = param_slots(f.layout(), &m).unwrap();
    // In burn's order (the fused layout holds the head an action per row).
    let gathered = |id| {
        let slot = slots.iter().find(|s| s.id == id).expect("a slot");
        slot.tensor.gather(f.grads())
    };
    let (fused_bias, fused_weight) = (gathered(bias_id), gathered(head.weight.id));
    for (engine, bias, weight) in [
        ("burn", &burn_bias[..], &burn_weight[..]),
        ("fused", &fused_bias[..], &fused_weight[..]),
    ] {
        assert_eq!(bias[2], 0.0, "{engine}: bias gradient of the masked action");
        assert!(bias[0] != 0.0 && bias[1] != 0.0, "{engine}: {bias:?}");
        // Weights are [d_in, 3]: column 2 belongs to the masked action.
        let column: Vec<f32> = weight.iter().skip(2).step_by(3).copied().collect();
        assert!(column.iter().all(|&g| g == 0.0), "{engine}: {column:?}");
    }
    // Its probability is zero.
    let mut out = [0.0f32; 3];
    log_softmax_row(&[0.3, -0.2, 9.0], Some(&[1, 1, 0]), &mut out);
    assert_eq!(out[2].exp(), 0.0);
    assert!((out[0].exp() + out[1].exp() - 1.0).abs() < 1e-6);
}

/// The tensors of a safetensors file by name: dtype, shape and bytes.
fn tensors_of(bytes: &[u8]) -> Vec<(String, String, Vec<usize>, Vec<u8>)> {
    let file = safetensors::SafeTensors::deserialize(bytes).unwrap();
    let mut out: Vec<_> = file
        .tensors()
        .into_iter()
        .map(|(n, t)| {
            (
                n,
                format!("{:?}", t.dtype()),
                t.shape().to_vec(),
                t.data().to_vec(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// What the fused engine publishes straight from its flat buffers is the file
/// burn writes of the same model: parameters after an update, and the
/// normaliser's statistics set for it.
#[test]
fn published_weights_are_the_file_burn_writes_of_the_same_model() {
    for case in cases() {
        let data = data(&case, 64, 5);
        let m = model(&case, &data);
        let mut cfg = case.cfg.clone();
        (cfg.epochs, cfg.minibatches) = (1, 2);
        let mut fused = on_cpu(&case.spec, &m, &cfg, 3, true);
        let mut stats = RunningMeanStd::new(data.obs_dim);
        stats.update(data.observations.as_f32().unwrap());
        fused.set_obs_stats(&stats);
        crate::ppo::update(&mut fused, &data, &cfg, 3e-3, 0.2).unwrap();
        let ours = fused.safetensors().unwrap();
        // burn's model of the same parameters and statistics.
        let mut same = case.spec.init::<B>(&Default::default());
        let layout = Layout::new(&case.spec.arch());
        write_params(&layout, &params(&fused), &mut same).unwrap();
        same.set_obs_stats(&stats);
        let burns = sebulba_core::weights::to_safetensors(&same, &case.spec).unwrap();
        assert_eq!(tensors_of(&ours), tensors_of(&burns), "{}", case.name);
        let names: Vec<String> = tensors_of(&ours).into_iter().map(|t| t.0).collect();
        assert_eq!(
            names.iter().any(|n| n == "obs_norm.var"),
            case.spec.network.obs_norm,
            "{}: {names:?}",
            case.name
        );
    }
}

/// Byte observations (an image env's rows as the learner keeps them) train
/// exactly as the same values held as `f32`, on both engines: the rows are
/// widened where a minibatch is gathered, and nothing else differs.
#[test]
fn byte_observations_update_as_their_floats() {
    let case = &conv_cases()[2];
    let mut floats = data(case, 32, 11);
    let n = floats.observations.len();
    let pixels: Vec<u8> = floats
        .observations
        .to_f32(0..n)
        .iter()
        .map(|&x| u8::from(x > 0.0))
        .collect();
    floats.observations = pixels
        .iter()
        .map(|&p| f32::from(p))
        .collect::<Vec<_>>()
        .into();
    let mut bytes = floats.clone();
    bytes.observations = pixels.into();
    let m = model(case, &floats);
    let mut cfg = case.cfg.clone();
    (cfg.epochs, cfg.minibatches) = (2, 2);
    for fused in [false, true] {
        let mut a = on_cpu(&case.spec, &m, &cfg, 3, fused);
        let mut b = on_cpu(&case.spec, &m, &cfg, 3, fused);
        crate::ppo::update(&mut a, &floats, &cfg, 3e-3, 0.2).unwrap();
        crate::ppo::update(&mut b, &bytes, &cfg, 3e-3, 0.2).unwrap();
        assert_ne!(params(&a), params(&on_cpu(&case.spec, &m, &cfg, 3, fused)));
        assert_eq!(params(&a), params(&b), "fused: {fused}");
    }
}
