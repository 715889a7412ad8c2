//! Property tests (fuzzing) of the trajectory decoder and validator, the code
//! every byte from an actor goes through: whatever arrives, decoding never
//! panics; whatever is refused is refused with a field named and a known code;
//! whatever is accepted is well-formed; and every well-formed batch is accepted
//! with its values intact. `PROPTEST_CASES` scales every property (CI runs the
//! defaults below).

use proptest::prelude::*;
use prost::Message;
use sebulba_envs::{ActionSpace, EnvSpec, ObsDtype, Observations, env_spec};
use sebulba_learner::batch::{BatchActions, DecodedBatch};
use sebulba_learner::validate::{
    Expect, MAX_EPISODE_LENGTH, MAX_LOG_PROB, MAX_MAGNITUDE, decode_batch,
};
use sebulba_proto::{EpisodeStats, Tensor, TrajectoryBatch, encode_f32, encode_i32, encode_u8};
use tonic::Code;

const T: usize = 4;
const E: usize = 3;
const VERSION: u64 = 5;

fn expect(env: &EnvSpec) -> Expect<'_> {
    Expect {
        env,
        rollout_length: T,
        envs_per_actor: E,
        current_version: VERSION,
        restarting: false,
        scaled_rewards: false,
        past_selves: false,
        state_width: 0,
    }
}

fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Mostly ordinary numbers, sometimes any bit pattern (NaN, inf, subnormal).
fn float() -> impl Strategy<Value = f32> {
    prop_oneof![9 => -10.0f32..10.0, 1 => any::<f32>()]
}

fn f32s(shape: Vec<usize>) -> impl Strategy<Value = Tensor> {
    let n = shape.iter().product::<usize>();
    prop::collection::vec(float(), n).prop_map(move |v| encode_f32(&shape, &v))
}

/// A tensor of any shape, dtype (including unknown ones) and byte length.
fn junk_tensor() -> impl Strategy<Value = Tensor> {
    (
        prop::collection::vec(0u32..7, 0..4),
        0i32..4,
        prop::collection::vec(any::<u8>(), 0..160),
    )
        .prop_map(|(shape, dtype, data)| Tensor {
            shape,
            dtype,
            data: data.into(),
        })
}

/// `good` most of the time, junk or absent otherwise.
fn field(good: impl Strategy<Value = Tensor> + 'static) -> BoxedStrategy<Option<Tensor>> {
    prop_oneof![
        8 => good.prop_map(Some),
        1 => junk_tensor().prop_map(Some),
        1 => Just(None),
    ]
    .boxed()
}

fn flags(shape: Vec<usize>, ones: u8) -> impl Strategy<Value = Tensor> {
    let n = shape.iter().product::<usize>();
    // Values above 1 are rare but present: flags must be 0 or 1.
    prop::collection::vec(prop_oneof![20 => 0u8..=ones, 1 => any::<u8>()], n)
        .prop_map(move |v| encode_u8(&shape, &v))
}

/// Observation rows of `shape` in the env's dtype; for a byte env sometimes
/// `f32` ones of the right shape (refused: the dtype is the run's).
fn obs_rows(env: &EnvSpec, shape: Vec<usize>) -> BoxedStrategy<Tensor> {
    match env.obs_dtype {
        ObsDtype::F32 => f32s(shape).boxed(),
        ObsDtype::U8 => {
            let n = shape.iter().product::<usize>();
            let bytes = {
                let shape = shape.clone();
                prop::collection::vec(any::<u8>(), n).prop_map(move |v| encode_u8(&shape, &v))
            };
            prop_oneof![9 => bytes, 1 => f32s(shape)].boxed()
        }
    }
}

/// A batch whose every field is usually right and sometimes wrong in any way.
fn batch(env: &EnvSpec) -> BoxedStrategy<TrajectoryBatch> {
    let d = env.obs_dim;
    let actions: BoxedStrategy<Tensor> = match &env.action_space {
        ActionSpace::Discrete { n } => {
            let n = *n as i32;
            prop::collection::vec(prop_oneof![20 => 0..n, 1 => any::<i32>()], T * E)
                .prop_map(|v| encode_i32(&[T, E], &v))
                .boxed()
        }
        ActionSpace::Box { low, .. } => f32s(vec![T, E, low.len()]).boxed(),
    };
    let log_probs =
        prop::collection::vec(prop_oneof![20 => -5.0f32..0.0, 1 => any::<f32>()], T * E)
            .prop_map(|v| encode_f32(&[T, E], &v));
    let k = 0usize..3;
    let finals_env = env.clone();
    (
        prop_oneof![10 => Just((T as u32, E as u32)), 1 => (0u32..6, 0u32..6)],
        prop_oneof![10 => 0..=VERSION, 1 => any::<u64>()],
        field(obs_rows(env, vec![T + 1, E, d])),
        field(actions),
        field(log_probs),
        field(f32s(vec![T, E])),
        field(flags(vec![T, E], 1)),
        (
            field(flags(vec![T, E], 1)),
            k.prop_flat_map(move |k| obs_rows(&finals_env, vec![k, d])),
        ),
        prop::collection::vec(
            (
                float().prop_map(f64::from),
                prop_oneof![9 => 0u32..600, 1 => any::<u32>()],
            ),
            0..16,
        ),
    )
        .prop_map(
            |(
                (t, e),
                version,
                observations,
                actions,
                log_probs,
                rewards,
                terminated,
                (truncated, finals),
                eps,
            )| {
                TrajectoryBatch {
                    actor_id: "a".into(),
                    sequence: 1,
                    policy_version: version,
                    rollout_length: t,
                    envs_per_actor: e,
                    observations,
                    actions,
                    log_probs,
                    rewards,
                    terminated,
                    truncated,
                    final_observations: Some(finals),
                    episodes: eps
                        .into_iter()
                        .map(|(episode_return, length)| EpisodeStats {
                            episode_return,
                            length,
                        })
                        .collect(),
                    ..Default::default()
                }
            },
        )
        .boxed()
}

/// What "accepted" promises the update loop.
fn assert_well_formed(env: &EnvSpec, b: &DecodedBatch) {
    let b = &b.trajectory;
    let (t, e, d) = (T, E, env.obs_dim);
    assert_eq!((b.rollout_length, b.envs_per_actor), (t, e));
    assert!(b.policy_version <= VERSION);
    // Finite and bounded: nothing accepted can overflow f32 arithmetic.
    let bounded = |v: &[f32], bound: f32| v.iter().all(|x| x.is_finite() && x.abs() <= bound);
    assert_eq!(b.observations.len(), (t + 1) * e * d);
    assert_eq!(b.observations.dtype(), env.obs_dtype);
    assert!(bounded(
        &b.observations.to_f32(0..b.observations.len()),
        MAX_MAGNITUDE
    ));
    assert_eq!(b.rewards.len(), t * e);
    assert!(bounded(&b.rewards, MAX_MAGNITUDE));
    assert_eq!(b.log_probs.len(), t * e);
    assert!(bounded(&b.log_probs, MAX_LOG_PROB));
    for f in [&b.terminated, &b.truncated] {
        assert_eq!(f.len(), t * e);
        assert!(f.iter().all(|&x| x <= 1));
    }
    let k = b.truncated.iter().filter(|&&x| x == 1).count();
    assert_eq!(b.final_observations.len(), k * d);
    assert_eq!(b.final_observations.dtype(), env.obs_dtype);
    let finals = &b.final_observations;
    assert!(bounded(&finals.to_f32(0..finals.len()), MAX_MAGNITUDE));
    match (&b.actions, &env.action_space) {
        (BatchActions::Discrete(a), ActionSpace::Discrete { n }) => {
            assert_eq!(a.len(), t * e);
            assert!(a.iter().all(|&x| x >= 0 && (x as usize) < *n));
            assert!(b.log_probs.iter().all(|&lp| lp <= 1e-4));
        }
        (BatchActions::Continuous(a), ActionSpace::Box { low, .. }) => {
            assert_eq!(a.len(), t * e * low.len());
            assert!(bounded(a, MAX_LOG_PROB));
        }
        _ => panic!("action kind does not match the env"),
    }
    assert!(b.episode_returns.len() <= t * e);
    for (&r, &l) in b.episode_returns.iter().zip(&b.episode_lengths) {
        assert!(l > 0 && l <= MAX_EPISODE_LENGTH, "length {l}");
        assert!(r.is_finite() && r.abs() <= f64::from(MAX_MAGNITUDE) * f64::from(l));
    }
}

fn check(env: &EnvSpec, b: &TrajectoryBatch) {
    match decode_batch(b, &expect(env)) {
        Ok(d) => assert_well_formed(env, &d),
        Err(r) => {
            assert!(r.message.contains('`'), "no field named: {}", r.message);
            assert!(
                matches!(
                    r.code,
                    Code::InvalidArgument | Code::FailedPrecondition | Code::ResourceExhausted
                ),
                "{:?}: {}",
                r.code,
                r.message
            );
        }
    }
}

proptest! {
    #![proptest_config(config(3000))]

    /// Raw bytes off the wire: protobuf decoding then validation never panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let env = env_spec("CartPole-v1").expect("env");
        if let Ok(b) = TrajectoryBatch::decode(bytes.as_slice()) {
            check(&env, &b);
        }
    }

    /// Every field right or wrong in any way, discrete actions.
    #[test]
    fn discrete_batches_are_accepted_well_formed_or_refused_naming_a_field(
        b in batch(&env_spec("CartPole-v1").expect("env"))
    ) {
        check(&env_spec("CartPole-v1").expect("env"), &b);
    }

    /// The same for continuous actions.
    #[test]
    fn continuous_batches_are_accepted_well_formed_or_refused_naming_a_field(
        b in batch(&env_spec("Pendulum-v1").expect("env"))
    ) {
        check(&env_spec("Pendulum-v1").expect("env"), &b);
    }

    /// The same for an image of bytes (MinAtar): `u8` observation rows,
    /// sometimes `f32` ones of the right shape.
    #[test]
    fn image_batches_are_accepted_well_formed_or_refused_naming_a_field(
        b in batch(&env_spec("MinAtar/Breakout-v1").expect("env"))
    ) {
        check(&env_spec("MinAtar/Breakout-v1").expect("env"), &b);
    }

    /// Re-encoding a batch with random bit flips: still no panic.
    #[test]
    fn bit_flipped_batches_never_panic(
        b in batch(&env_spec("Acrobot-v1").expect("env")),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..8)
    ) {
        let env = env_spec("Acrobot-v1").expect("env");
        let mut bytes = b.encode_to_vec();
        if !bytes.is_empty() {
            for (i, bit) in flips {
                let at = i.index(bytes.len());
                bytes[at] ^= 1 << bit;
            }
        }
        if let Ok(b) = TrajectoryBatch::decode(bytes.as_slice()) {
            check(&env, &b);
        }
    }
}

proptest! {
    #![proptest_config(config(500))]

    /// A well-formed batch is accepted with exactly the values sent.
    #[test]
    fn well_formed_batches_are_accepted_unchanged(
        obs in prop::collection::vec(-10.0f32..10.0, (T + 1) * E * 4),
        actions in prop::collection::vec(0i32..2, T * E),
        log_probs in prop::collection::vec(-5.0f32..0.0, T * E),
        rewards in prop::collection::vec(-1.0f32..1.0, T * E),
        terminated in prop::collection::vec(0u8..=1, T * E),
        truncated in prop::collection::vec(0u8..=1, T * E),
        version in 0..=VERSION,
    ) {
        let env = env_spec("CartPole-v1").expect("env");
        let k = truncated.iter().filter(|&&x| x == 1).count();
        let mut b = sebulba_testkit::valid_batch(&env, T, E, "a", 0, version);
        sebulba_testkit::set_flags(&mut b, 4, &terminated, &truncated);
        b.observations = Some(encode_f32(&[T + 1, E, 4], &obs));
        b.actions = Some(encode_i32(&[T, E], &actions));
        b.log_probs = Some(encode_f32(&[T, E], &log_probs));
        b.rewards = Some(encode_f32(&[T, E], &rewards));
        let finals = vec![0.2; k * 4];
        let bytes = b.encode_to_vec();
        let back = TrajectoryBatch::decode(bytes.as_slice()).expect("protobuf");
        let d = decode_batch(&back, &expect(&env)).expect("well-formed batch accepted");
        let d = d.trajectory;
        prop_assert_eq!(&d.observations, &Observations::F32(obs));
        prop_assert_eq!(&d.log_probs, &log_probs);
        prop_assert_eq!(&d.rewards, &rewards);
        prop_assert_eq!(&d.terminated, &terminated);
        prop_assert_eq!(&d.truncated, &truncated);
        prop_assert_eq!(&d.final_observations, &Observations::F32(finals));
        match &d.actions {
            BatchActions::Discrete(a) => prop_assert_eq!(a, &actions),
            BatchActions::Continuous(_) => prop_assert!(false, "CartPole is discrete"),
        }
    }
}
