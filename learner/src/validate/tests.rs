use super::*;
use sebulba_proto::{encode_f32, encode_i32, encode_u8};
use sebulba_testkit::{Dims, image_malformations, malformations, set_flags, valid_batch};

fn spec() -> EnvSpec {
    sebulba_envs::env_spec("CartPole-v1").unwrap()
}

/// A 2x2 CartPole batch at version 3 with one termination and one
/// truncation (and its final observation).
fn good() -> TrajectoryBatch {
    let mut b = valid_batch(&spec(), 2, 2, "a-0", 0, 3);
    set_flags(&mut b, 4, &[0, 0, 1, 0], &[0, 1, 0, 0]);
    b
}

fn expect(s: &EnvSpec) -> Expect<'_> {
    Expect {
        env: s,
        rollout_length: 2,
        envs_per_actor: 2,
        current_version: 3,
        restarting: false,
        scaled_rewards: false,
        past_selves: false,
        state_width: 0,
    }
}

#[test]
fn a_good_batch_decodes() {
    let s = spec();
    let d = decode_batch(&good(), &expect(&s)).unwrap();
    assert_eq!(d.trajectory.final_observations.len(), 4);
    assert_eq!(d.env_steps(), 4);
    assert_eq!(d.trajectory.terminated, [0, 0, 1, 0]);
    assert_eq!(
        d.actor_time,
        ActorTime::default(),
        "none said: none counted"
    );
    // The actor's time comes through as said; parts may fill the whole.
    let mut b = good();
    let said = sebulba_proto::ActorTime {
        wall_seconds: 2.0,
        env_seconds: 1.25,
        inference_seconds: 0.5,
        waiting_seconds: 0.25,
    };
    b.actor_time = Some(said);
    let d = decode_batch(&b, &expect(&s)).unwrap();
    let want = (2.0, 1.25, 0.5, 0.25);
    let t = d.actor_time;
    let got = (
        t.wall_seconds,
        t.env_seconds,
        t.inference_seconds,
        t.waiting_seconds,
    );
    assert_eq!(got, want);
}

/// A version beyond the learner's is a client's error, except from a resumed
/// learner that has not published yet: its predecessor's lost work.
#[test]
fn a_version_from_the_future_is_refused_under_its_own_reason() {
    let s = spec();
    let mut b = good();
    b.policy_version = 3;
    assert!(decode_batch(&b, &expect(&s)).is_ok());
    b.policy_version = 4;
    let e = decode_batch(&b, &expect(&s)).unwrap_err();
    assert_eq!(e.reason, "version");
    assert!(e.message.contains("`policy_version`"), "{}", e.message);
    let restarting = Expect {
        restarting: true,
        ..expect(&s)
    };
    let e = decode_batch(&b, &restarting).unwrap_err();
    assert_eq!(e.reason, "restart");
    assert!(e.message.contains("resumed"), "{}", e.message);
}

#[test]
fn each_rule_names_its_field() {
    let s = spec();
    let dims = Dims::of(&s, 2, 2);
    for m in malformations() {
        let mut b = valid_batch(&s, 2, 2, "a-0", 0, 3);
        (m.apply)(&mut b, dims);
        let r = decode_batch(&b, &expect(&s)).unwrap_err();
        assert!(r.message.contains(m.field), "{}: {}", m.field, r.message);
        assert_eq!(
            (r.reason, r.code),
            (m.reason, m.code),
            "{}: {}",
            m.field,
            r.message
        );
    }
    // The same for an image of bytes.
    let image = sebulba_envs::env_spec("MinAtar/Breakout-v1").unwrap();
    let dims = Dims::of(&image, 2, 2);
    let mut b = valid_batch(&image, 2, 2, "a-0", 0, 3);
    set_flags(&mut b, 400, &[0, 0, 0, 0], &[0, 1, 0, 0]);
    let d = decode_batch(&b, &expect(&image)).unwrap().trajectory;
    assert_eq!(d.observations, Observations::U8(vec![1; 3 * 2 * 400]));
    assert_eq!(d.final_observations, Observations::U8(vec![2; 400]));
    for m in image_malformations() {
        let mut b = valid_batch(&image, 2, 2, "a-0", 0, 3);
        (m.apply)(&mut b, dims);
        let r = decode_batch(&b, &expect(&image)).unwrap_err();
        assert!(r.message.contains(m.field), "{}: {}", m.field, r.message);
        assert_eq!((r.reason, r.code), (m.reason, m.code), "{}", r.message);
    }
    // Masks that allow nothing at a step.
    let mut b = good();
    b.action_masks = Some(encode_u8(&[2, 2, 2], &[1, 1, 0, 0, 1, 1, 1, 1]));
    let r = decode_batch(&b, &expect(&s)).unwrap_err();
    assert!(
        r.message.contains("allows no action") && r.reason == "mask",
        "{}",
        r.message
    );
}

#[test]
fn masks_and_continuous_actions_decode() {
    let s = spec();
    let mut b = good();
    // Every step took action 1 (see `good`).
    b.action_masks = Some(encode_u8(&[2, 2, 2], &[0, 1, 1, 1, 1, 1, 0, 1]));
    let d = decode_batch(&b, &expect(&s)).unwrap();
    assert_eq!(
        d.trajectory.action_masks.as_deref(),
        Some(&[0, 1, 1, 1, 1, 1, 0, 1][..])
    );

    let p = sebulba_envs::env_spec("Pendulum-v1").unwrap();
    let mut b = good();
    b.observations = Some(encode_f32(&[3, 2, 3], &[0.1; 18]));
    b.final_observations = Some(encode_f32(&[1, 3], &[0.2; 3]));
    b.actions = Some(encode_f32(&[2, 2, 1], &[0.5, -3.0, 9.0, 0.0]));
    // A density can exceed 1: positive log-probabilities are fine here.
    b.log_probs = Some(encode_f32(&[2, 2], &[1.5, -0.2, 0.3, 2.0]));
    let d = decode_batch(&b, &expect(&p)).unwrap();
    assert_eq!(
        d.trajectory.actions,
        BatchActions::Continuous(vec![0.5, -3.0, 9.0, 0.0])
    );
    b.actions = Some(encode_f32(&[2, 2, 1], &[0.5, f32::NAN, 9.0, 0.0]));
    let r = decode_batch(&b, &expect(&p)).unwrap_err();
    assert!(
        r.message.contains("`actions`") && r.reason == "non_finite",
        "{}",
        r.message
    );
    b.actions = Some(encode_i32(&[2, 2], &[0; 4]));
    assert_eq!(decode_batch(&b, &expect(&p)).unwrap_err().reason, "shape");
}

#[test]
fn a_run_that_scales_rewards_needs_every_steps_discounted_return() {
    let s = spec();
    let scaled = Expect {
        scaled_rewards: true,
        ..expect(&s)
    };
    let mut b = good();
    let r = decode_batch(&b, &scaled).unwrap_err();
    assert!(r.message.contains("`discounted_returns`"), "{}", r.message);
    b.discounted_returns = Some(encode_f32(&[2, 2], &[1.0, 2.0, 1.5, 3.0]));
    let d = decode_batch(&b, &scaled).unwrap();
    assert_eq!(d.trajectory.discounted_returns, [1.0, 2.0, 1.5, 3.0]);
    for (bad, reason) in [
        (encode_f32(&[2, 1], &[1.0, 2.0]), "shape"),
        (
            encode_f32(&[2, 2], &[1.0, f32::NAN, 1.5, 3.0]),
            "non_finite",
        ),
        (encode_f32(&[2, 2], &[1.0, 2e9, 1.5, 3.0]), "out_of_range"),
    ] {
        b.discounted_returns = Some(bad);
        let r = decode_batch(&b, &scaled).unwrap_err();
        assert!(
            r.message.contains("`discounted_returns`") && r.reason == reason,
            "{reason}: {} ({})",
            r.message,
            r.reason
        );
    }
}

/// A Nim batch (2 seats: K = 1 overlap row) of T = 2 moves in E = 2 envs:
/// R = 3 step rows, 4 observation rows; env 1's game ends at row 1 and its
/// next game starts with seat 0 again.
fn game_batch() -> TrajectoryBatch {
    let s = sebulba_envs::env_spec("Nim-v0").unwrap();
    let (r, e, d, n) = (3, 2, s.obs_dim, s.action_space.dim());
    let mut b = valid_batch(&s, 2, 2, "a-0", 0, 3);
    b.observations = Some(encode_f32(&[r + 1, e, d], &vec![0.0; (r + 1) * e * d]));
    b.actions = Some(encode_i32(&[r, e], &vec![0; r * e]));
    b.action_masks = Some(encode_u8(&[r, e, n], &vec![1; r * e * n]));
    b.log_probs = Some(encode_f32(&[r, e], &vec![-1.0; r * e]));
    b.rewards = Some(encode_f32(&[r, e], &[0.0, 0.0, 0.0, 1.0, 0.0, 0.0]));
    b.terminated = Some(encode_u8(&[r, e], &[0, 0, 0, 1, 0, 0]));
    b.truncated = Some(encode_u8(&[r, e], &[0; 6]));
    // Row-major [row, env]: env 0 seats 0,1,0,1; env 1 seats 1,0 | 0,1.
    b.player_ids = Some(encode_i32(&[r + 1, e], &[0, 1, 1, 0, 0, 0, 1, 1]));
    b
}

#[test]
fn a_game_batch_is_split_into_trained_rows_and_overlap() {
    let s = sebulba_envs::env_spec("Nim-v0").unwrap();
    let d = decode_batch(&game_batch(), &expect(&s)).expect("valid");
    let (t, e, od) = (2, 2, s.obs_dim);
    assert_eq!(d.trajectory.observations.len(), (t + 1) * e * od);
    assert_eq!(d.trajectory.rewards, [0.0, 0.0, 0.0, 1.0]);
    assert_eq!(d.trajectory.log_probs.len(), t * e);
    assert_eq!(
        d.trajectory.action_masks.as_ref().map(Vec::len),
        Some(t * e * 28)
    );
    let g = d.trajectory.game.as_ref().expect("game rows");
    assert_eq!(g.player_ids, [0, 1, 1, 0, 0, 0, 1, 1]);
    assert_eq!(g.overlap_observations.len(), e * od);
    assert_eq!(g.overlap_terminated, [0, 0]);
    assert_eq!(
        g.all_terminated(&d.trajectory.terminated),
        [0, 0, 0, 1, 0, 0, 0, 0]
    );
}

#[test]
fn a_game_batch_breaking_the_turn_order_or_the_seats_is_refused() {
    let s = sebulba_envs::env_spec("Nim-v0").unwrap();
    let refused = |b: TrajectoryBatch, field: &str| {
        let err = decode_batch(&b, &expect(&s)).expect_err(field);
        assert!(err.message.contains(field), "{field}: {}", err.message);
    };
    let mut b = game_batch();
    b.player_ids = None;
    refused(b, "`player_ids` is missing");
    let mut b = game_batch();
    // Env 0 moves twice in a row at rows 1-2 within one game.
    b.player_ids = Some(encode_i32(&[4, 2], &[0, 1, 1, 0, 1, 0, 0, 1]));
    refused(b, "seats move in turn");
    let mut b = game_batch();
    b.player_ids = Some(encode_i32(&[4, 2], &[0, 1, 1, 0, 0, 0, 1, 2]));
    refused(b, "not a seat");
    let mut b = game_batch();
    b.player_ids = Some(encode_i32(&[3, 2], &[0; 6]));
    refused(b, "player_ids");
    let mut b = game_batch();
    b.truncated = Some(encode_u8(&[3, 2], &[0, 0, 0, 0, 1, 0]));
    b.final_observations = Some(encode_f32(&[1, 32], &[0.0; 32]));
    refused(b, "never truncated");
    let mut b = game_batch();
    b.action_masks = None;
    refused(b, "`action_masks` is missing");
    // T rows only, as a one-player batch would have them.
    refused(valid_batch(&s, 2, 2, "a-0", 0, 3), "observations");
}

/// `past_moves` is cut to the trained rows; refused where the run seats
/// no past versions, for one player, with a wrong shape or a value not 0/1.
#[test]
fn past_moves_are_kept_for_the_trained_rows_and_checked() {
    let s = sebulba_envs::env_spec("Nim-v0").unwrap();
    let past = Expect {
        past_selves: true,
        ..expect(&s)
    };
    let mut b = game_batch();
    b.past_moves = Some(encode_u8(&[3, 2], &[0, 1, 1, 0, 1, 1]));
    let d = decode_batch(&b, &past).expect("valid");
    assert_eq!(d.trajectory.game.as_ref().unwrap().past_moves, [0, 1, 1, 0]);
    // All 0 reads as none.
    b.past_moves = Some(encode_u8(&[3, 2], &[0; 6]));
    let d = decode_batch(&b, &past).expect("valid");
    assert!(d.trajectory.game.as_ref().unwrap().past_moves.is_empty());
    let refused = |b: &TrajectoryBatch, e: &Expect<'_>, why: &str| {
        let err = decode_batch(b, e).expect_err(why);
        assert!(
            err.message.contains("`past_moves`") && err.message.contains(why),
            "{why}: {}",
            err.message
        );
    };
    b.past_moves = Some(encode_u8(&[3, 2], &[0, 2, 0, 0, 0, 0]));
    refused(&b, &past, "not 0 or 1");
    b.past_moves = Some(encode_u8(&[2, 2], &[0; 4]));
    refused(&b, &past, "shape");
    b.past_moves = Some(encode_u8(&[3, 2], &[0; 6]));
    refused(&b, &expect(&s), "seats no past versions");
    let one = spec();
    let mut b = good();
    b.past_moves = Some(encode_u8(&[2, 2], &[0; 4]));
    refused(&b, &expect(&one), "one player");
}

/// A run whose network has memory: each batch's initial states come
/// through as sent, and every malformation of them is refused naming the
/// field, under its reason.
#[test]
fn a_recurrent_runs_batches_carry_each_envs_state() {
    let s = spec();
    let width = 6;
    let recurrent = Expect {
        state_width: width,
        ..expect(&s)
    };
    let mut b = good();
    sebulba_testkit::set_initial_state(&mut b, 2, width);
    let d = decode_batch(&b, &recurrent).unwrap();
    assert_eq!(d.trajectory.initial_state.width(), width);
    assert_eq!(d.trajectory.initial_state.values(), &[0.1; 12]);
    // The same batch to a run without memory: refused.
    let e = decode_batch(&b, &expect(&s)).unwrap_err();
    assert!(e.message.contains("`initial_state`"), "{}", e.message);
    let dims = Dims::of(&s, 2, 2);
    for m in sebulba_testkit::state_malformations(width) {
        let mut bad = b.clone();
        (m.apply)(&mut bad, dims);
        let e = decode_batch(&bad, &recurrent).unwrap_err();
        assert!(e.message.contains(m.field), "{}: {}", m.field, e.message);
        assert_eq!((e.reason, e.code), (m.reason, m.code), "{}", e.message);
    }
}

/// A game's batch with a network with memory carries every seat's state:
/// Nim's two seats, so twice the network's width per env; one seat's width
/// (what a run of one player sends) is refused naming the field.
#[test]
fn a_recurrent_games_batches_carry_every_seats_state() {
    let s = sebulba_envs::env_spec("Nim-v0").unwrap();
    let width = 6;
    let recurrent = Expect {
        state_width: width,
        ..expect(&s)
    };
    let mut b = game_batch();
    sebulba_testkit::set_initial_state(&mut b, 2, 2 * width);
    let d = decode_batch(&b, &recurrent).expect("every seat's state");
    assert_eq!(d.trajectory.initial_state.width(), 2 * width);
    assert_eq!(d.trajectory.initial_state.envs(), 2);
    sebulba_testkit::set_initial_state(&mut b, 2, width);
    let e = decode_batch(&b, &recurrent).unwrap_err();
    assert!(e.message.contains("`initial_state`"), "{}", e.message);
    assert_eq!(e.reason, "shape", "{}", e.message);
}
