//! Malformed input over real gRPC: while a real actor trains, a second client
//! joins as an actor and streams one bad batch per validation rule. Each is
//! refused with the gRPC status and the field the rule names, the stream stays
//! open, a good batch after them is used, training finishes, and the summary
//! counts every refusal by reason with the accounting identity intact.

mod common;

use common::{actor, assert_accounted, exits_ok, learner, param_server, read_json, run_dir};
use sebulba_proto::learner_client::LearnerClient;
use sebulba_proto::{
    Ack, EpisodeStats, JoinRequest, PROTOCOL_VERSION, Role, TrajectoryBatch, encode_f32,
    encode_i32, encode_u8,
};
use sebulba_transport::grpc::{MAX_MESSAGE_BYTES, channel};
use sebulba_transport::security::Security;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

/// A well-formed CartPole batch of T steps x E envs for `actor`.
fn good(actor: &str, sequence: u64, version: u64, t: usize, e: usize) -> TrajectoryBatch {
    TrajectoryBatch {
        actor_id: actor.into(),
        sequence,
        policy_version: version,
        num_steps: t as u32,
        num_envs: e as u32,
        observations: Some(encode_f32(&[t + 1, e, 4], &vec![0.01; (t + 1) * e * 4])),
        actions: Some(encode_i32(&[t, e], &vec![1; t * e])),
        log_probs: Some(encode_f32(&[t, e], &vec![-0.69; t * e])),
        rewards: Some(encode_f32(&[t, e], &vec![1.0; t * e])),
        terminated: Some(encode_u8(&[t, e], &vec![0; t * e])),
        truncated: Some(encode_u8(&[t, e], &vec![0; t * e])),
        final_observations: Some(encode_f32(&[0, 4], &[])),
        ..Default::default()
    }
}

type Rule = (
    &'static str,
    &'static str,
    Code,
    Box<dyn Fn(&mut TrajectoryBatch, usize, usize)>,
);

/// (field named in the message, counter reason, status, mutation).
fn rules() -> Vec<Rule> {
    let set_u8 = |v: u8, at: usize| {
        move |b: &mut TrajectoryBatch, t: usize, e: usize| {
            let mut f = vec![0u8; t * e];
            f[at] = v;
            b.terminated = Some(encode_u8(&[t, e], &f));
        }
    };
    vec![
        (
            "`message`",
            "oversize",
            Code::ResourceExhausted,
            Box::new(|b, _, _| {
                b.trace_context
                    .insert("padding".into(), "x".repeat(2 << 20));
            }),
        ),
        (
            "`num_steps`/`num_envs`",
            "spec",
            Code::FailedPrecondition,
            Box::new(|b, _, _| b.num_envs += 1),
        ),
        (
            "`policy_version`",
            "version",
            Code::InvalidArgument,
            Box::new(|b, _, _| b.policy_version += 1_000_000),
        ),
        (
            "`observations`",
            "shape",
            Code::InvalidArgument,
            Box::new(|b, t, e| {
                b.observations = Some(encode_f32(&[t, e, 4], &vec![0.0; t * e * 4]))
            }),
        ),
        (
            "`observations`",
            "non_finite",
            Code::InvalidArgument,
            Box::new(|b, t, e| {
                let mut o = vec![0.0; (t + 1) * e * 4];
                o[5] = f32::NAN;
                b.observations = Some(encode_f32(&[t + 1, e, 4], &o));
            }),
        ),
        (
            "`actions`",
            "out_of_range",
            Code::InvalidArgument,
            Box::new(|b, t, e| b.actions = Some(encode_i32(&[t, e], &vec![2; t * e]))),
        ),
        (
            "`actions`",
            "shape",
            Code::InvalidArgument,
            Box::new(|b, t, e| b.actions = Some(encode_f32(&[t, e], &vec![0.0; t * e]))),
        ),
        (
            "`log_probs`",
            "out_of_range",
            Code::InvalidArgument,
            Box::new(|b, t, e| b.log_probs = Some(encode_f32(&[t, e], &vec![0.5; t * e]))),
        ),
        (
            "`rewards`",
            "non_finite",
            Code::InvalidArgument,
            Box::new(|b, t, e| b.rewards = Some(encode_f32(&[t, e], &vec![f32::INFINITY; t * e]))),
        ),
        (
            "`rewards`",
            "shape",
            Code::InvalidArgument,
            Box::new(|b, _, _| b.rewards = None),
        ),
        (
            "`terminated`",
            "out_of_range",
            Code::InvalidArgument,
            Box::new(set_u8(2, 3)),
        ),
        (
            "`truncated`",
            "out_of_range",
            Code::InvalidArgument,
            Box::new(|b, t, e| b.truncated = Some(encode_u8(&[t, e], &vec![7; t * e]))),
        ),
        (
            "`final_observations`",
            "shape",
            Code::InvalidArgument,
            // One truncated step needs one final observation; none is sent.
            Box::new(|b, t, e| {
                let mut f = vec![0u8; t * e];
                f[0] = 1;
                b.truncated = Some(encode_u8(&[t, e], &f));
            }),
        ),
        (
            "`final_observations`",
            "non_finite",
            Code::InvalidArgument,
            Box::new(|b, t, e| {
                let mut f = vec![0u8; t * e];
                f[0] = 1;
                b.truncated = Some(encode_u8(&[t, e], &f));
                b.final_observations = Some(encode_f32(&[1, 4], &[0.0, f32::NAN, 0.0, 0.0]));
            }),
        ),
        (
            "`action_masks`",
            "shape",
            Code::InvalidArgument,
            Box::new(|b, t, e| b.action_masks = Some(encode_u8(&[t, e, 3], &vec![1; t * e * 3]))),
        ),
        (
            "`action_masks`",
            "mask",
            Code::InvalidArgument,
            // Every step took action 1; forbid it.
            Box::new(|b, t, e| {
                let m: Vec<u8> = (0..t * e * 2).map(|i| u8::from(i % 2 == 0)).collect();
                b.action_masks = Some(encode_u8(&[t, e, 2], &m));
            }),
        ),
        (
            "`action_masks`",
            "out_of_range",
            Code::InvalidArgument,
            Box::new(|b, t, e| b.action_masks = Some(encode_u8(&[t, e, 2], &vec![3; t * e * 2]))),
        ),
        (
            "`player_ids`",
            "spec",
            Code::FailedPrecondition,
            Box::new(|b, t, e| b.player_ids = Some(encode_i32(&[t, e], &vec![0; t * e]))),
        ),
        (
            "`episodes[0]`",
            "non_finite",
            Code::InvalidArgument,
            Box::new(|b, _, _| {
                b.episodes = vec![EpisodeStats {
                    episode_return: f64::NAN,
                    length: 10,
                }]
            }),
        ),
        (
            "`observations`",
            "shape",
            Code::InvalidArgument,
            // An unknown dtype.
            Box::new(|b, _, _| {
                if let Some(o) = b.observations.as_mut() {
                    o.dtype = 9;
                }
            }),
        ),
    ]
}

#[test]
fn every_validation_rule_is_refused_over_grpc_and_training_continues() {
    let dir = run_dir("malformed");
    let run = dir.join("run");
    let (_ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    // No evaluator here: do not wait for a final score.
    let args = [
        "--set",
        "run.total_steps=30000",
        "--set",
        "learner.final_eval_timeout_secs=0",
    ];
    let (mut learner, port) = learner(&dir, "learner", "127.0.0.1:0", &ps_url, &run, &args, |_| {});
    let learner_url = format!("http://127.0.0.1:{port}");
    let mut actor = actor(&dir, "honest", &learner_url, &ps_url, |_| {});

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let probe_id = rt.block_on(async {
        let ch = channel(&learner_url, &Security::insecure(), None).expect("channel");
        let mut client = LearnerClient::new(ch)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        // Join's own rules.
        let join = |version: u32, role: i32| JoinRequest {
            protocol_version: version,
            name: "probe".into(),
            role,
        };
        let e = client
            .join(join(PROTOCOL_VERSION + 1, Role::Actor as i32))
            .await
            .expect_err("wrong protocol");
        assert_eq!(e.code(), Code::FailedPrecondition);
        assert!(
            e.message().contains("`protocol_version`"),
            "{}",
            e.message()
        );
        let e = client
            .join(join(PROTOCOL_VERSION, 42))
            .await
            .expect_err("unknown role");
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("`role`"), "{}", e.message());
        let joined = client
            .join(join(PROTOCOL_VERSION, Role::Actor as i32))
            .await
            .expect("join")
            .into_inner();
        let spec = joined.spec.expect("spec");
        let (t, e) = (spec.rollout_length as usize, spec.envs_per_actor as usize);
        let id = joined.actor_id;

        let (tx, rx) = mpsc::channel(4);
        let mut acks = client
            .stream_trajectories(ReceiverStream::new(rx))
            .await
            .expect("stream")
            .into_inner();
        let mut next_ack = async || -> Ack {
            tokio::time::timeout(Duration::from_secs(30), acks.message())
                .await
                .expect("an ack within 30 s")
                .expect("the stream stays open")
                .expect("an ack")
        };
        // An id that never joined.
        tx.send(good("nobody", 0, 0, t, e)).await.expect("send");
        let a = next_ack().await;
        assert_eq!(a.code, Code::FailedPrecondition as i32, "{a:?}");
        assert!(a.message.contains("`actor_id`"), "{a:?}");
        let mut version = a.learner_version;
        for (seq, (field, reason, code, mutate)) in rules().into_iter().enumerate() {
            let mut b = good(&id, seq as u64 + 1, version, t, e);
            mutate(&mut b, t, e);
            tx.send(b).await.expect("send");
            let a = next_ack().await;
            assert_eq!(a.sequence, seq as u64 + 1);
            assert!(!a.accepted, "{field} ({reason}) accepted");
            assert_eq!(a.code, code as i32, "{field} ({reason}): {a:?}");
            assert!(
                a.message.contains(field),
                "{field} ({reason}): {}",
                a.message
            );
            version = a.learner_version;
        }
        // The stream is still open and the learner still takes good batches.
        tx.send(good(&id, 1000, version, t, e)).await.expect("send");
        let a = next_ack().await;
        assert_eq!((a.sequence, a.code), (1000, 0), "{a:?}");
        assert!(
            a.accepted,
            "the good batch after the bad ones was used: {a:?}"
        );
        id
    });

    exits_ok(&mut learner, Duration::from_secs(300));
    exits_ok(&mut actor, Duration::from_secs(60));

    let summary = read_json(&run.join("summary.json"));
    assert_accounted(&summary);
    assert!(
        summary["env_steps"].as_u64().unwrap_or(0) >= 30_000,
        "{summary}"
    );
    let probe = &summary["batches_per_actor"][&probe_id];
    let mut want = std::collections::BTreeMap::<&str, u64>::new();
    for (_, reason, _, _) in rules() {
        *want.entry(reason).or_default() += 1;
    }
    for (reason, n) in &want {
        assert_eq!(
            probe["rejected_by_reason"][reason].as_u64(),
            Some(*n),
            "{reason} in {probe}"
        );
    }
    assert_eq!(
        probe["rejected"].as_u64(),
        Some(rules().len() as u64),
        "{probe}"
    );
    assert_eq!(probe["used"].as_u64(), Some(1), "{probe}");
    assert_eq!(
        summary["batches_per_actor"]["<unknown>"]["rejected_by_reason"]["unknown_actor"].as_u64(),
        Some(1),
        "{summary}"
    );
}
