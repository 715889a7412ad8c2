//! A batch assembled from known rows carries exactly those rows on the wire.

use super::*;
use crate::actions::Actions;
use crate::testing::{FakeEnv, decode, discrete_actions, ln_normal};
use rand::SeedableRng;
use rand::rngs::StdRng;
use sebulba_core::distribution::Squash;
use sebulba_envs::{ActionSpace, EpisodeStats as Finished, ObsDtype};
use sebulba_proto::{decode_f32, decode_u8};

/// One step's output for E envs of `d`-dimensional observations.
fn step(e_len: usize, d: usize) -> VecStepOut {
    VecStepOut::sized(e_len, d)
}

fn finished(env_index: usize, episode_return: f64, length: u32) -> Finished {
    Finished {
        env_index,
        episode_return,
        length,
    }
}

fn wire_episode(episode_return: f64, length: u32) -> EpisodeStats {
    EpisodeStats {
        episode_return,
        length,
    }
}

/// The step outputs of the scripted rollout below (T = 3, E = 2, d = 2).
/// Observation row t of env e is `[100t + 10e, 100t + 10e + 1]`; the true
/// last observation of a finished step is the negated next row; the reward
/// of step t in env e is `t + 1 + e / 2`. Env 0 terminates at step 1, env 1
/// is truncated at step 1 and both terminated and truncated at step 2 (its
/// episode ends on the rollout's last step).
fn scripted(t: usize) -> VecStepOut {
    let mut out = step(2, 2);
    for e in 0..2 {
        let base = (100 * (t + 1) + 10 * e) as f32;
        out.obs[2 * e..2 * e + 2].copy_from_slice(&[base, base + 1.0]);
        out.final_obs[2 * e..2 * e + 2].copy_from_slice(&[-base, -base - 1.0]);
        out.reward[e] = t as f32 + 1.0 + 0.5 * e as f32;
    }
    match t {
        1 => {
            out.terminated[0] = true;
            out.truncated[1] = true;
            out.episodes = vec![finished(0, 7.5, 12), finished(1, -3.25, 200)];
        }
        2 => {
            out.terminated[1] = true;
            out.truncated[1] = true;
            out.episodes = vec![finished(1, 1.0, 1)];
        }
        _ => {}
    }
    out
}

/// Acts the scripted rollout (T = 3, E = 2, n = 3 actions): a mask leaves
/// one action per env and step, (t + e) mod 3; the log-probability of step
/// t in env e is -0.1 (2t + e + 1); returns kept with gamma 0.5. The batch
/// as the rollout assembles it: sequence 4, version 11.
fn scripted_batch() -> TrajectoryBatch {
    let (t_len, e_len, d, n) = (3, 2, 2, 3);
    let mut buf = Buffers::new(t_len, t_len, e_len, d, ObsDtype::F32);
    buf.obs.copy_from_slice(&[0.0, 1.0, 10.0, 11.0]);
    let mut venv = FakeEnv::new(e_len, ActionSpace::Discrete { n }, Some(vec![0; e_len * n]));
    let dist = sebulba_core::distribution::ActionDist::Categorical { n };
    let mut actions = Actions::new(&dist, &venv, t_len);
    let mut returns = DiscountedReturn::new(0.5, e_len);
    let mut rng = StdRng::seed_from_u64(1);
    assert_eq!(buf.start(&[]), 0);
    for t in 0..t_len {
        let mut mask = vec![0u8; e_len * n];
        for e in 0..e_len {
            mask[e * n + (t + e) % n] = 1;
        }
        venv.masks = Some(mask);
        let mut sampled = [0.0f32; 2];
        let head = [0.3, -0.2, 0.1, 0.0, 0.5, -1.0];
        actions
            .sample(t, &head, &venv, &mut sampled, None, &mut rng)
            .unwrap();
        buf.log_probs_at(t)
            .copy_from_slice(&[-0.1 * (2 * t + 1) as f32, -0.1 * (2 * t + 2) as f32]);
        buf.record(t, &scripted(t), Some(&mut returns));
    }
    assert!(buf.batch("a", 0, 0, false).discounted_returns.is_none());
    let mut b = buf.batch("actor-7", 4, 11, true);
    let (a, masks) = actions.encode(t_len, e_len);
    b.actions = Some(a);
    b.action_masks = masks;
    b
}

#[test]
fn a_discrete_batch_carries_exactly_the_rows_put_in() {
    let b = scripted_batch();
    assert_eq!(
        (b.actor_id.as_str(), b.sequence, b.policy_version),
        ("actor-7", 4, 11)
    );
    assert_eq!((b.rollout_length, b.envs_per_actor), (3, 2));
    let w = decode(&b, 3, 2, 2);
    #[rustfmt::skip]
    let obs = [
        0.0, 1.0, 10.0, 11.0,
        100.0, 101.0, 110.0, 111.0,
        200.0, 201.0, 210.0, 211.0,
        300.0, 301.0, 310.0, 311.0,
    ];
    assert_eq!(w.observations, obs);
    assert_eq!(w.log_probs, [-0.1, -0.2, -0.3, -0.4, -0.5, -0.6]);
    assert_eq!(w.rewards, [1.0, 1.5, 2.0, 2.5, 3.0, 3.5]);
    // Terminations and truncations apart, both set where both happened.
    assert_eq!(w.terminated, [0, 0, 1, 0, 0, 1]);
    assert_eq!(w.truncated, [0, 0, 0, 1, 0, 1]);
    // Only the truncated steps' true last observations, in (t, e) order;
    // env 0's termination at step 1 has none.
    assert_eq!(w.final_observations, [-210.0, -211.0, -310.0, -311.0]);
    assert_eq!(
        b.episodes,
        [
            wire_episode(7.5, 12),
            wire_episode(-3.25, 200),
            wire_episode(1.0, 1)
        ]
    );
    // G = 0.5 G (1 - terminated) + r: env 0 1, 2 (restarted), 0.5 * 2 + 3;
    // env 1 1.5, 0.75 + 2.5 (a truncation does not restart it), 3.5.
    let g = decode_f32(b.discounted_returns.as_ref(), "returns", &[3, 2]).unwrap();
    assert_eq!(g, [1.0, 1.5, 2.0, 3.25, 4.0, 3.5]);
    assert_eq!(discrete_actions(&b, 3, 2), [0, 1, 1, 2, 2, 0]);
    let m = decode_u8(b.action_masks.as_ref(), "action_masks", &[3, 2, 3]).unwrap();
    #[rustfmt::skip]
    let want_masks = [
        1, 0, 0,  0, 1, 0,
        0, 1, 0,  0, 0, 1,
        0, 0, 1,  1, 0, 0,
    ];
    assert_eq!(m, want_masks);
}

/// A continuous env of one env with a 1-dimensional box [-2, 2].
fn continuous() -> (FakeEnv, Actions) {
    let space = ActionSpace::Box {
        low: vec![-2.0],
        high: vec![2.0],
    };
    let venv = FakeEnv::new(1, space, None);
    let actions = Actions::Continuous {
        dim: 1,
        squash: Squash::new(&[-2.0], &[2.0]),
        min_std: 0.1,
        pre_tanh: vec![0.0; 1],
        step: vec![0.0; 1],
    };
    (venv, actions)
}

/// One rollout of T = 1 step of E = 1 env: samples, then records `out`.
/// Returns the batch and the env action the env got.
fn one_step(
    buf: &mut Buffers,
    (venv, actions): &mut (FakeEnv, Actions),
    out: &VecStepOut,
    (sequence, version): (u64, u64),
    rng: &mut StdRng,
) -> (TrajectoryBatch, f32) {
    assert_eq!(buf.start(&[]), 0);
    let head = [0.3, -0.5];
    let a = match actions
        .sample(0, &head, venv, buf.log_probs_at(0), None, rng)
        .unwrap()
    {
        sebulba_envs::ActionBatch::Continuous(a) => a[0],
        other => panic!("{other:?}"),
    };
    buf.record(0, out, None);
    let mut b = buf.batch("solo", sequence, version, false);
    b.actions = Some(actions.encode(1, 1).0);
    (b, a)
}

#[test]
fn one_step_of_one_env_ending_on_its_last_step_then_the_next_rollout() {
    let mut buf = Buffers::new(1, 1, 1, 3, ObsDtype::F32);
    buf.obs.copy_from_slice(&[1.0, 2.0, 3.0]);
    let mut env = continuous();
    let mut rng = StdRng::seed_from_u64(2);

    // Rollout 1: the episode is truncated at the only step.
    let mut out = step(1, 3);
    out.obs.copy_from_slice(&[4.0, 5.0, 6.0]);
    out.final_obs.copy_from_slice(&[7.0, 8.0, 9.0]);
    out.reward[0] = 1.25;
    out.truncated[0] = true;
    out.episodes = vec![finished(0, 9.5, 200)];
    let (b, a) = one_step(&mut buf, &mut env, &out, (0, 3), &mut rng);
    assert_eq!(
        (
            b.rollout_length,
            b.envs_per_actor,
            b.sequence,
            b.policy_version
        ),
        (1, 1, 0, 3)
    );
    let w = decode(&b, 1, 1, 3);
    assert_eq!(w.observations, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(w.rewards, [1.25]);
    assert_eq!((w.terminated, w.truncated), (vec![0], vec![1]));
    assert_eq!(w.final_observations, [7.0, 8.0, 9.0]);
    assert_eq!(b.episodes, [wire_episode(9.5, 200)]);
    assert!(b.action_masks.is_none() && b.discounted_returns.is_none());
    // The wire carries the pre-tanh u: the env got 2 tanh(u), and the
    // log-probability is that of the squashed action,
    // ln N(u; 0.3, softplus(-0.5) + 0.1) - ln(2 (1 - tanh(u)^2)).
    let u = decode_f32(b.actions.as_ref(), "actions", &[1, 1, 1]).unwrap()[0];
    let uf = f64::from(u);
    assert!(
        (f64::from(a) - 2.0 * uf.tanh()).abs() < 1e-6,
        "{a} vs u = {u}"
    );
    let std = (1.0 + (-0.5f64).exp()).ln() + 0.1;
    let want = ln_normal(uf, 0.3, std) - (2.0 * (1.0 - uf.tanh().powi(2))).ln();
    assert!(
        (f64::from(w.log_probs[0]) - want).abs() < 1e-5,
        "{} vs {want}",
        w.log_probs[0]
    );

    // Rollout 2 starts from the reset observation; the episode terminates
    // at its only step: no final observation, and only its own episode.
    let mut out = step(1, 3);
    out.obs.copy_from_slice(&[10.0, 11.0, 12.0]);
    out.final_obs.copy_from_slice(&[13.0, 14.0, 15.0]);
    out.reward[0] = -1.0;
    out.terminated[0] = true;
    out.episodes = vec![finished(0, 0.25, 3)];
    let (b, _) = one_step(&mut buf, &mut env, &out, (1, 4), &mut rng);
    assert_eq!((b.sequence, b.policy_version), (1, 4));
    let w = decode(&b, 1, 1, 3);
    assert_eq!(w.observations, [4.0, 5.0, 6.0, 10.0, 11.0, 12.0]);
    assert_eq!(w.rewards, [-1.0]);
    assert_eq!((w.terminated, w.truncated), (vec![1], vec![0]));
    assert!(w.final_observations.is_empty());
    assert_eq!(
        b.final_observations.as_ref().unwrap().shape,
        [0, 3],
        "no truncated step"
    );
    assert_eq!(b.episodes, [wire_episode(0.25, 3)]);
}

#[test]
fn a_games_overlap_rows_are_the_next_batchs_first_rows() {
    // T = 2 trained rows and K = 1 overlap row, E = 1, d = 1.
    let mut buf = Buffers::new(2, 3, 1, 1, ObsDtype::F32);
    buf.obs[0] = 0.5;
    assert_eq!(buf.start(&[]), 0);
    for t in 0..3 {
        buf.log_probs_at(t)[0] = -(t as f32) - 1.0;
        let mut out = step(1, 1);
        out.obs[0] = t as f32 + 1.5;
        out.reward[0] = 10.0 * t as f32;
        out.terminated[0] = t == 1;
        buf.record(t, &out, None);
    }
    let b = buf.batch("g", 0, 1, false);
    assert_eq!(b.rollout_length, 2, "T, not the rows");
    let w = decode(&b, 3, 1, 1);
    assert_eq!(w.observations, [0.5, 1.5, 2.5, 3.5]);
    assert_eq!(w.terminated, [0, 1, 0]);
    buf.shift(2);
    assert_eq!(buf.carried, 1);
    // The next rollout acts only row 1 on: row 0 is the carried overlap.
    assert_eq!(buf.start(&[]), 1);
    let mut out = step(1, 1);
    out.obs[0] = 9.0;
    out.reward[0] = 7.0;
    buf.log_probs_at(1)[0] = -9.0;
    buf.record(1, &out, None);
    let mut out = step(1, 1);
    out.obs[0] = 10.0;
    buf.log_probs_at(2)[0] = -10.0;
    buf.record(2, &out, None);
    let w = decode(&buf.batch("g", 1, 2, false), 3, 1, 1);
    assert_eq!(w.observations, [2.5, 3.5, 9.0, 10.0]);
    assert_eq!(w.log_probs, [-3.0, -9.0, -10.0]);
    assert_eq!(w.rewards, [20.0, 7.0, 0.0]);
    assert_eq!(w.terminated, [0, 0, 0]);
}

/// A byte env's rows (MinAtar's grids) are kept and sent as bytes, final
/// observations too, and shift to the front as `f32` rows do.
#[test]
fn a_byte_envs_rows_go_on_the_wire_as_bytes() {
    let mut buf = Buffers::new(1, 2, 1, 2, ObsDtype::U8);
    buf.obs.copy_from_slice(&[1.0, 0.0]);
    let first = buf.start(&[]);
    assert_eq!(first, 0);
    let mut out = step(1, 2);
    out.obs.copy_from_slice(&[0.0, 255.0]);
    out.final_obs.copy_from_slice(&[7.0, 1.0]);
    out.truncated[0] = true;
    buf.record(0, &out, None);
    out.obs.copy_from_slice(&[3.0, 4.0]);
    out.truncated[0] = false;
    buf.record(1, &out, None);
    let b = buf.batch("bytes", 0, 0, false);
    let rows = decode_u8(b.observations.as_ref(), "observations", &[3, 1, 2]).unwrap();
    assert_eq!(rows, [1, 0, 0, 255, 3, 4]);
    let finals = decode_u8(b.final_observations.as_ref(), "final_observations", &[1, 2]);
    assert_eq!(finals.unwrap(), [7, 1]);
    // f32 rows would be refused: the batch's dtype is the env's.
    assert!(decode_f32(b.observations.as_ref(), "observations", &[3, 1, 2]).is_err());
    buf.shift(1);
    let b = buf.batch("bytes", 1, 0, false);
    let rows = decode_u8(b.observations.as_ref(), "observations", &[3, 1, 2]).unwrap();
    assert_eq!(rows[..4], [0, 255, 3, 4]);
}

/// A game's batch starts with the previous batch's overlap rows, so its
/// initial states are the states before the first overlap row (row T), not
/// the states when the next rollout starts acting (after the overlap).
#[test]
fn a_games_initial_states_are_those_before_its_first_carried_row() {
    // T = 2, K = 1: rows 0-2 acted, row 2 carried to the next batch.
    let (t_len, rows, e_len, d) = (2, 3, 1, 1);
    let mut buf = Buffers::new(t_len, rows, e_len, d, ObsDtype::F32);
    let state = |v: f32| [v, -v];
    assert_eq!(
        buf.start(&state(1.0)),
        0,
        "the first rollout acts every row"
    );
    for t in 0..rows {
        buf.before_row(t, &state(10.0 + t as f32));
        buf.record(t, &step(e_len, d), None);
    }
    let initial = |b: TrajectoryBatch| decode_f32(b.initial_state.as_ref(), "s", &[1, 2]).unwrap();
    let first = initial(buf.batch("a", 0, 0, false));
    assert_eq!(first, state(1.0));
    buf.shift(t_len);
    assert_eq!(buf.start(&state(99.0)), 1, "one carried row");
    let second = initial(buf.batch("a", 1, 0, false));
    assert_eq!(second, state(12.0), "the state before row T = 2, now row 0");
}
