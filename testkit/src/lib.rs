//! What tests and benchmarks send to a learner: [`valid_batch`] builds a
//! well-formed `TrajectoryBatch` of any environment's shape, [`set_flags`]
//! places episode ends in it (with the final observations they need), and
//! [`malformations`] lists one broken batch per validation rule with the field,
//! counter reason and status code the learner must answer. Written once here so
//! the unit tests, the fuzz tests, the process tests and the transport benchmark
//! agree on what "valid" means.

use sebulba_envs::{ActionSpace, EnvSpec};
use sebulba_proto::{EpisodeStats, TrajectoryBatch, encode_f32, encode_i32, encode_u8};
use tonic::Code;

/// A batch's dimensions: T steps, E envs, of an environment.
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    pub t: usize,
    pub e: usize,
    pub obs_dim: usize,
    /// Discrete: the action count; continuous: the action dimension.
    pub actions: usize,
    pub discrete: bool,
}

impl Dims {
    pub fn of(env: &EnvSpec, t: usize, e: usize) -> Self {
        let (actions, discrete) = match &env.action_space {
            ActionSpace::Discrete { n } => (*n, true),
            ActionSpace::Box { low, .. } => (low.len(), false),
        };
        Self {
            t,
            e,
            obs_dim: env.obs_dim,
            actions,
            discrete,
        }
    }
}

/// A well-formed batch of `env` for actor `actor_id`: T+1 observation rows of
/// 0.01, action 1 everywhere (discrete; 0.1 in every dimension for continuous),
/// log-probability -0.7, reward 1, no episode end. Accepted by a learner whose
/// run has this env, T and E, at any version >= `policy_version`.
pub fn valid_batch(
    env: &EnvSpec,
    t: usize,
    e: usize,
    actor_id: &str,
    sequence: u64,
    policy_version: u64,
) -> TrajectoryBatch {
    let d = Dims::of(env, t, e);
    let actions = if d.discrete {
        encode_i32(&[t, e], &vec![1.min(d.actions as i32 - 1); t * e])
    } else {
        encode_f32(&[t, e, d.actions], &vec![0.1; t * e * d.actions])
    };
    TrajectoryBatch {
        actor_id: actor_id.into(),
        sequence,
        policy_version,
        rollout_length: t as u32,
        envs_per_actor: e as u32,
        observations: Some(encode_f32(
            &[t + 1, e, d.obs_dim],
            &vec![0.01; (t + 1) * e * d.obs_dim],
        )),
        actions: Some(actions),
        log_probs: Some(encode_f32(&[t, e], &vec![-0.7; t * e])),
        rewards: Some(encode_f32(&[t, e], &vec![1.0; t * e])),
        terminated: Some(encode_u8(&[t, e], &vec![0; t * e])),
        truncated: Some(encode_u8(&[t, e], &vec![0; t * e])),
        final_observations: Some(encode_f32(&[0, d.obs_dim], &[])),
        ..Default::default()
    }
}

/// Sets the episode-end flags (`[T * E]` each) and one final observation
/// (0.2 everywhere) per truncated step, as an actor would.
pub fn set_flags(b: &mut TrajectoryBatch, obs_dim: usize, terminated: &[u8], truncated: &[u8]) {
    let (t, e) = (b.rollout_length as usize, b.envs_per_actor as usize);
    let k = truncated.iter().filter(|&&x| x == 1).count();
    b.terminated = Some(encode_u8(&[t, e], terminated));
    b.truncated = Some(encode_u8(&[t, e], truncated));
    b.final_observations = Some(encode_f32(&[k, obs_dim], &vec![0.2; k * obs_dim]));
}

/// One validation rule broken on purpose.
pub struct Malformation {
    /// The field the refusal must name, in backticks as the learner writes it.
    pub field: &'static str,
    /// The counter reason the refusal is counted under.
    pub reason: &'static str,
    pub code: Code,
    /// Breaks a [`valid_batch`] of these dimensions.
    pub apply: Mutation,
}

/// A change made to a batch of the given dimensions.
pub type Mutation = Box<dyn Fn(&mut TrajectoryBatch, Dims)>;

fn rule(
    field: &'static str,
    reason: &'static str,
    code: Code,
    apply: impl Fn(&mut TrajectoryBatch, Dims) + 'static,
) -> Malformation {
    Malformation {
        field,
        reason,
        code,
        apply: Box::new(apply),
    }
}

/// One broken batch per validation rule of a discrete env with at least two
/// actions (what the learner's `validate` checks), each to apply to a
/// [`valid_batch`] whose version the learner has reached.
pub fn malformations() -> Vec<Malformation> {
    let mut rules = envelope_and_tensor_rules();
    rules.extend(flag_and_mask_rules());
    rules
}

/// The size, T x E and version; observations, actions, log-probs and rewards.
fn envelope_and_tensor_rules() -> Vec<Malformation> {
    use Code::{FailedPrecondition as Pre, InvalidArgument as Arg};
    vec![
        rule("`message`", "oversize", Code::ResourceExhausted, |b, _| {
            b.trace_context
                .insert("padding".into(), "x".repeat(2 << 20));
        }),
        rule("`rollout_length`/`envs_per_actor`", "spec", Pre, |b, _| {
            b.envs_per_actor += 1
        }),
        rule("`policy_version`", "version", Arg, |b, _| {
            b.policy_version += 1_000_000
        }),
        rule("`observations`", "shape", Arg, |b, d| {
            b.observations = Some(encode_f32(
                &[d.t, d.e, d.obs_dim],
                &vec![0.0; d.t * d.e * d.obs_dim],
            ))
        }),
        rule("`observations`", "shape", Arg, |b, _| {
            // An unknown dtype.
            if let Some(o) = b.observations.as_mut() {
                o.dtype = 9;
            }
        }),
        rule("`observations`", "non_finite", Arg, |b, d| {
            let mut o = vec![0.0; (d.t + 1) * d.e * d.obs_dim];
            o[d.obs_dim + 1] = f32::NAN;
            b.observations = Some(encode_f32(&[d.t + 1, d.e, d.obs_dim], &o));
        }),
        rule("`actions`", "out_of_range", Arg, |b, d| {
            b.actions = Some(encode_i32(&[d.t, d.e], &vec![d.actions as i32; d.t * d.e]))
        }),
        rule("`actions`", "out_of_range", Arg, |b, d| {
            b.actions = Some(encode_i32(&[d.t, d.e], &vec![-1; d.t * d.e]))
        }),
        rule("`actions`", "shape", Arg, |b, d| {
            b.actions = Some(encode_f32(&[d.t, d.e], &vec![0.0; d.t * d.e]))
        }),
        rule("`log_probs`", "out_of_range", Arg, |b, d| {
            b.log_probs = Some(encode_f32(&[d.t, d.e], &vec![0.5; d.t * d.e]))
        }),
        rule("`rewards`", "non_finite", Arg, |b, d| {
            let mut r = vec![1.0; d.t * d.e];
            r[d.t * d.e - 1] = f32::INFINITY;
            b.rewards = Some(encode_f32(&[d.t, d.e], &r))
        }),
        rule("`rewards`", "shape", Arg, |b, _| b.rewards = None),
        // Finite, but far past what f32 losses survive.
        rule("`rewards`", "out_of_range", Arg, |b, d| {
            b.rewards = Some(encode_f32(&[d.t, d.e], &vec![3.0e38; d.t * d.e]))
        }),
        rule("`observations`", "out_of_range", Arg, |b, d| {
            let mut o = vec![0.0; (d.t + 1) * d.e * d.obs_dim];
            o[0] = -3.0e38;
            b.observations = Some(encode_f32(&[d.t + 1, d.e, d.obs_dim], &o));
        }),
        rule("`log_probs`", "out_of_range", Arg, |b, d| {
            b.log_probs = Some(encode_f32(&[d.t, d.e], &vec![-1.0e30; d.t * d.e]))
        }),
    ]
}

/// Episode-end flags, final observations, masks, player ids and episode stats.
fn flag_and_mask_rules() -> Vec<Malformation> {
    use Code::{FailedPrecondition as Pre, InvalidArgument as Arg};
    let one_truncated = |b: &mut TrajectoryBatch, d: Dims| {
        let mut f = vec![0u8; d.t * d.e];
        f[0] = 1;
        b.truncated = Some(encode_u8(&[d.t, d.e], &f));
    };
    let mut rules = vec![
        rule("`terminated`", "out_of_range", Arg, |b, d| {
            let mut f = vec![0u8; d.t * d.e];
            f[d.t * d.e - 1] = 2;
            b.terminated = Some(encode_u8(&[d.t, d.e], &f));
        }),
        rule("`truncated`", "out_of_range", Arg, |b, d| {
            b.truncated = Some(encode_u8(&[d.t, d.e], &vec![7; d.t * d.e]))
        }),
        // One truncated step needs one final observation; none is sent.
        rule("`final_observations`", "shape", Arg, one_truncated),
        rule("`final_observations`", "shape", Arg, |b, d| {
            b.final_observations = Some(encode_f32(&[2, d.obs_dim], &vec![0.0; 2 * d.obs_dim]))
        }),
        rule("`final_observations`", "non_finite", Arg, move |b, d| {
            one_truncated(b, d);
            let mut f = vec![0.0; d.obs_dim];
            f[d.obs_dim - 1] = f32::NAN;
            b.final_observations = Some(encode_f32(&[1, d.obs_dim], &f));
        }),
        rule("`action_masks`", "shape", Arg, |b, d| {
            let n = d.actions + 1;
            b.action_masks = Some(encode_u8(&[d.t, d.e, n], &vec![1; d.t * d.e * n]))
        }),
        // Every step took action 1 (see `valid_batch`); forbid it.
        rule("`action_masks`", "mask", Arg, |b, d| {
            let n = d.actions;
            let m: Vec<u8> = (0..d.t * d.e * n).map(|i| u8::from(i % n != 1)).collect();
            b.action_masks = Some(encode_u8(&[d.t, d.e, n], &m));
        }),
        rule("`action_masks`", "out_of_range", Arg, |b, d| {
            let n = d.actions;
            b.action_masks = Some(encode_u8(&[d.t, d.e, n], &vec![3; d.t * d.e * n]))
        }),
        rule("`player_ids`", "spec", Pre, |b, d| {
            b.player_ids = Some(encode_i32(&[d.t, d.e], &vec![0; d.t * d.e]))
        }),
        // The malformations target runs that do not scale rewards.
        rule("`discounted_returns`", "spec", Pre, |b, d| {
            b.discounted_returns = Some(encode_f32(&[d.t, d.e], &vec![1.0; d.t * d.e]))
        }),
    ];
    let episode = |episode_return: f64, length: u32| {
        move |b: &mut TrajectoryBatch, _: Dims| {
            b.episodes = vec![EpisodeStats {
                episode_return,
                length,
            }]
        }
    };
    rules.push(rule(
        "`episodes[0]`",
        "non_finite",
        Arg,
        episode(f64::NAN, 10),
    ));
    rules.push(rule("`episodes[0]`", "out_of_range", Arg, episode(1.0, 0)));
    rules.push(rule("`episodes[0]`", "out_of_range", Arg, episode(3e38, 1)));
    rules.push(rule(
        "`episodes[0]`",
        "out_of_range",
        Arg,
        episode(1.0, u32::MAX),
    ));
    rules.push(rule("`episodes`", "shape", Arg, |b, d| {
        b.episodes = vec![
            EpisodeStats {
                episode_return: 1.0,
                length: 1,
            };
            d.t * d.e + 1
        ]
    }));
    rules
}
