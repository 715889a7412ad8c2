//! Malformed input over real gRPC: while a real actor trains, a second client
//! joins as an actor and streams one bad batch per validation rule. Each is
//! refused with the gRPC status and the field the rule names, the stream stays
//! open, a good batch after them is used, training finishes, and the summary
//! counts every refusal by reason with the accounting identity intact. (A
//! message over the run's size limit ends its stream instead: see
//! `hostile.rs`.)

// Each test is one scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;

use common::{actor, assert_accounted, exits_ok, learner, param_server, read_json, run_dir};
use sebulba_proto::learner_client::LearnerClient;
use sebulba_proto::{Ack, JoinRequest, PROTOCOL_VERSION, Role};
use sebulba_testkit::{
    Dims, Malformation, image_malformations, malformations, set_initial_state, state_malformations,
    valid_batch,
};
use sebulba_transport::grpc::{MAX_MESSAGE_BYTES, channel};
use sebulba_transport::security::Security;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

/// The rules a batch can break and still be read: an oversize message is
/// refused by the transport before it is decoded, and ends its stream.
fn streamable(catalogue: fn() -> Vec<Malformation>) -> Vec<Malformation> {
    catalogue()
        .into_iter()
        .filter(|m| m.reason != "oversize")
        .collect()
}

#[test]
fn every_validation_rule_is_refused_over_grpc_and_training_continues() {
    refused_over_grpc("malformed", "CartPole-v1", malformations);
}

/// The same for a run on images of bytes (MinAtar Breakout at its preset,
/// a convolutional network): `f32` rows, other shapes and short data are
/// refused naming the field.
#[test]
fn every_image_rule_is_refused_over_grpc_and_training_continues() {
    refused_over_grpc(
        "malformed-image",
        "MinAtar/Breakout-v1",
        image_malformations,
    );
}

/// The same for a run whose network has memory (CartPoleNoVel-v1 at its
/// preset, an LSTM): good batches carry each env's state, and the state's
/// own malformations are refused too.
#[test]
fn every_rule_of_a_recurrent_run_is_refused_over_grpc_and_training_continues() {
    refused_over_grpc("malformed-recurrent", "CartPoleNoVel-v1", recurrent_rules);
}

/// Floats of each env's state in CartPoleNoVel-v1's preset.
fn recurrent_width() -> usize {
    let cfg = sebulba_core::config::RunConfig::preset("CartPoleNoVel-v1").expect("preset");
    cfg.network.state_width()
}

/// Every rule of a run without memory but the one refusing a state (and,
/// since the preset scales rewards, the one refusing discounted returns),
/// and the state's own.
fn recurrent_rules() -> Vec<Malformation> {
    let mut rules: Vec<Malformation> = malformations()
        .into_iter()
        .filter(|m| m.field != "`initial_state`" && m.field != "`discounted_returns`")
        .collect();
    rules.extend(state_malformations(recurrent_width()));
    rules
}

/// A run on `env_id` (learner, honest actor, param-server) while a probe
/// streams one batch per rule of `catalogue`, then a good one.
fn refused_over_grpc(name: &str, env_id: &str, catalogue: fn() -> Vec<Malformation>) {
    let dir = run_dir(name);
    let run = dir.join("run");
    let (_ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let env = sebulba_envs::env_spec(env_id).expect("env");
    let cfg = sebulba_core::config::RunConfig::preset(env_id).expect("preset");
    let width = cfg.network.state_width();
    let good = |actor: &str, sequence: u64, version: u64, t: usize, e: usize| {
        let mut b = valid_batch(&env, t, e, actor, sequence, version);
        if width > 0 {
            set_initial_state(&mut b, e, width);
        }
        if cfg.ppo.scale_rewards {
            let returns = vec![1.0; t * e];
            b.discounted_returns = Some(sebulba_proto::encode_f32(&[t, e], &returns));
        }
        b
    };
    // No evaluator here: do not wait for a final score.
    let args = [
        "--env",
        env_id,
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
        assert_eq!(a.code, Code::NotFound as i32, "{a:?}");
        assert!(a.message.contains("`actor_id`"), "{a:?}");
        let mut version = a.learner_version;
        let dims = Dims::of(&env, t, e);
        for (seq, rule) in streamable(catalogue).into_iter().enumerate() {
            let Malformation {
                field,
                reason,
                code,
                apply,
            } = rule;
            let mut b = good(&id, seq as u64 + 1, version, t, e);
            apply(&mut b, dims);
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
    for m in streamable(catalogue) {
        *want.entry(m.reason).or_default() += 1;
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
        Some(streamable(catalogue).len() as u64),
        "{probe}"
    );
    assert_eq!(probe["used"].as_u64(), Some(1), "{probe}");
    assert_eq!(
        summary["batches_per_actor"]["<unknown>"]["rejected_by_reason"]["unknown_actor"].as_u64(),
        Some(1),
        "{summary}"
    );
}
