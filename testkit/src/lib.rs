//! What tests and benchmarks send to a learner: [`valid_batch`] builds a
//! well-formed `TrajectoryBatch` of any environment's shape, [`set_flags`]
//! places episode ends in it (with the final observations they need), and
//! [`malformations`] lists one broken batch per validation rule with the field,
//! counter reason and status code the learner must answer. Written once here so
//! the unit tests, the fuzz tests, the process tests and the transport benchmark
//! agree on what "valid" means.

use sebulba_envs::{ActionSpace, EnvSpec, ObsDtype};
use sebulba_proto::{
    ActorTime, DType, EpisodeStats, Tensor, TrajectoryBatch, encode_f32, encode_i32, encode_u8,
};
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
    /// The observations' element type: bytes for an image env.
    pub obs_dtype: ObsDtype,
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
            obs_dtype: env.obs_dtype,
        }
    }

    /// `rows` observation rows in the env's dtype, every value `value`
    /// (a byte env gets `value` as a byte).
    pub fn obs_rows(&self, rows: usize, value: f32) -> Tensor {
        let n = rows * self.obs_dim;
        let shape = [rows, self.obs_dim];
        match self.obs_dtype {
            ObsDtype::F32 => encode_f32(&shape, &vec![value; n]),
            ObsDtype::U8 => encode_u8(&shape, &vec![value as u8; n]),
        }
    }
}

/// A well-formed batch of `env` for actor `actor_id`: T+1 observation rows of
/// 0.01 (bytes of 1 for a byte env), action 1 everywhere (discrete; 0.1 in every dimension for continuous),
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
        observations: Some(reshaped(
            d.obs_rows(
                (t + 1) * e,
                if d.obs_dtype == ObsDtype::U8 {
                    1.0
                } else {
                    0.01
                },
            ),
            &[t + 1, e, d.obs_dim],
        )),
        actions: Some(actions),
        log_probs: Some(encode_f32(&[t, e], &vec![-0.7; t * e])),
        rewards: Some(encode_f32(&[t, e], &vec![1.0; t * e])),
        terminated: Some(encode_u8(&[t, e], &vec![0; t * e])),
        truncated: Some(encode_u8(&[t, e], &vec![0; t * e])),
        final_observations: Some(d.obs_rows(0, 0.0)),
        ..Default::default()
    }
}

/// Sets the episode-end flags (`[T * E]` each) and one final observation
/// (0.2 everywhere; bytes of 2 when the batch's observations are bytes) per
/// truncated step, as an actor would.
pub fn set_flags(b: &mut TrajectoryBatch, obs_dim: usize, terminated: &[u8], truncated: &[u8]) {
    let (t, e) = (b.rollout_length as usize, b.envs_per_actor as usize);
    let k = truncated.iter().filter(|&&x| x == 1).count();
    b.terminated = Some(encode_u8(&[t, e], terminated));
    b.truncated = Some(encode_u8(&[t, e], truncated));
    let bytes = b.observations.as_ref().map(|o| o.dtype) == Some(DType::DtypeU8 as i32);
    b.final_observations = Some(if bytes {
        encode_u8(&[k, obs_dim], &vec![2; k * obs_dim])
    } else {
        encode_f32(&[k, obs_dim], &vec![0.2; k * obs_dim])
    });
}

/// `t` with another shape of the same element count.
fn reshaped(mut t: Tensor, shape: &[usize]) -> Tensor {
    t.shape = shape.iter().map(|&d| d as u32).collect();
    t
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

/// One broken batch per validation rule of an env whose observations are
/// bytes (an image: MinAtar, Atari), each to apply to a [`valid_batch`] of
/// it: the rules of [`malformations`] but those on observation values, and
/// an image's own: `f32` rows for a byte run, rows of another
/// shape, fewer bytes than the shape needs, and the same for the final
/// observations. (Any byte is a valid pixel: there is no range to break.)
pub fn image_malformations() -> Vec<Malformation> {
    use Code::InvalidArgument as Arg;
    let truncated_first = |b: &mut TrajectoryBatch, d: Dims| {
        let mut f = vec![0u8; d.t * d.e];
        f[0] = 1;
        set_flags(b, d.obs_dim, &vec![0; d.t * d.e], &f);
    };
    let mut rules: Vec<Malformation> = malformations()
        .into_iter()
        .filter(|m| !m.field.contains("observations") || m.reason == "shape")
        .collect();
    rules.extend([
        rule("`observations`", "shape", Arg, |b, d| {
            let n = (d.t + 1) * d.e * d.obs_dim;
            b.observations = Some(encode_f32(&[d.t + 1, d.e, d.obs_dim], &vec![1.0; n]));
        }),
        rule("`observations`", "shape", Arg, |b, d| {
            // The image's rows cut in half: the right bytes, the wrong shape.
            let n = (d.t + 1) * d.e * d.obs_dim;
            let shape = [2 * (d.t + 1), d.e, d.obs_dim / 2];
            b.observations = Some(encode_u8(&shape, &vec![1; n]));
        }),
        rule("`observations`", "shape", Arg, |b, d| {
            let n = (d.t + 1) * d.e * d.obs_dim;
            let mut o = encode_u8(&[d.t + 1, d.e, d.obs_dim], &vec![1; n]);
            o.data = o.data.slice(..n - 1);
            b.observations = Some(o);
        }),
        rule("`final_observations`", "shape", Arg, move |b, d| {
            truncated_first(b, d);
            b.final_observations = Some(encode_f32(&[1, d.obs_dim], &vec![2.0; d.obs_dim]));
        }),
        rule("`final_observations`", "shape", Arg, move |b, d| {
            truncated_first(b, d);
            b.final_observations = Some(d.obs_rows(2, 2.0));
        }),
    ]);
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
        // W3C Trace Context's limits, each well under the message's size.
        rule("`trace_context`", "trace_context", Arg, |b, _| {
            b.trace_context.insert("padding".into(), "x".repeat(1024));
        }),
        rule("`trace_context`", "trace_context", Arg, |b, _| {
            let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
            b.trace_context
                .insert("traceparent".into(), parent.repeat(2));
        }),
        rule("`trace_context`", "trace_context", Arg, |b, _| {
            b.trace_context
                .insert("tracestate".into(), format!("k={}", "v".repeat(600)));
        }),
        rule("`trace_context`", "trace_context", Arg, |b, _| {
            let members: Vec<String> = (0..40).map(|i| format!("m{i}=1")).collect();
            b.trace_context
                .insert("tracestate".into(), members.join(","));
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
        // The malformations target runs whose network has no memory.
        rule("`initial_state`", "spec", Pre, |b, d| {
            set_initial_state(b, d.e, 4)
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
    rules.extend(actor_time_rules());
    rules
}

/// Sets each of the batch's `e` envs' policy state before its first row to
/// `width` floats of 0.1, as an actor of a network with memory sends it.
pub fn set_initial_state(b: &mut TrajectoryBatch, e: usize, width: usize) {
    b.initial_state = Some(encode_f32(&[e, width], &vec![0.1; e * width]));
}

/// One broken batch per rule on the policy state of a run whose network has
/// memory (`width` floats per env), each to apply to a [`valid_batch`] that
/// [`set_initial_state`] gave a valid one: missing, the wrong width, the
/// wrong dtype, a NaN, a value far out of range.
pub fn state_malformations(width: usize) -> Vec<Malformation> {
    use Code::InvalidArgument as Arg;
    vec![
        rule("`initial_state`", "shape", Arg, |b, _| {
            b.initial_state = None
        }),
        rule("`initial_state`", "shape", Arg, move |b, d| {
            set_initial_state(b, d.e, width + 1)
        }),
        rule("`initial_state`", "shape", Arg, move |b, d| {
            b.initial_state = Some(encode_u8(&[d.e, width], &vec![0; d.e * width]))
        }),
        rule("`initial_state`", "non_finite", Arg, move |b, d| {
            let mut v = vec![0.0; d.e * width];
            v[d.e * width - 1] = f32::NAN;
            b.initial_state = Some(encode_f32(&[d.e, width], &v));
        }),
        rule("`initial_state`", "out_of_range", Arg, move |b, d| {
            let mut v = vec![0.0; d.e * width];
            v[0] = -3.0e38;
            b.initial_state = Some(encode_f32(&[d.e, width], &v));
        }),
    ]
}

/// An actor's account of its time that cannot be true: NaN, negative,
/// beyond a year, and parts longer than the whole.
fn actor_time_rules() -> Vec<Malformation> {
    use Code::InvalidArgument as Arg;
    let time = |wall: f64, env: f64, waiting: f64| {
        move |b: &mut TrajectoryBatch, _: Dims| {
            b.actor_time = Some(ActorTime {
                wall_seconds: wall,
                env_seconds: env,
                inference_seconds: 0.0,
                waiting_seconds: waiting,
            })
        }
    };
    vec![
        rule(
            "`actor_time.env_seconds`",
            "non_finite",
            Arg,
            time(1.0, f64::NAN, 0.0),
        ),
        rule(
            "`actor_time.wall_seconds`",
            "non_finite",
            Arg,
            time(f64::INFINITY, 0.0, 0.0),
        ),
        rule(
            "`actor_time.waiting_seconds`",
            "out_of_range",
            Arg,
            time(1.0, 0.0, -0.5),
        ),
        rule(
            "`actor_time.wall_seconds`",
            "out_of_range",
            Arg,
            time(1e12, 0.0, 0.0),
        ),
        rule(
            "`actor_time.wall_seconds`",
            "out_of_range",
            Arg,
            time(1.0, 0.75, 0.5),
        ),
    ]
}
