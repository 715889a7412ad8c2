//! A hostile or unlucky peer against the real binary, from a client written to
//! the `.proto` alone (raw bytes where a well-behaved client could not send
//! them): streams that fail end with a non-OK status at once, servers stop on
//! SIGTERM whatever their connections do, versions cannot be hijacked, a new
//! run starts on a parameter server that served an old one, an actor started
//! after the run learns that it finished, bad config values and corrupt
//! checkpoints are refused by name.

// Each test is one scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;

use bytes::BufMut;
use common::{
    Proc, actor, assert_accounted, bin, exits_ok, learner, param_server, read_json, run_dir,
};
use prost::Message;
use sebulba_proto::learner_client::LearnerClient;
use sebulba_proto::parameter_server_client::ParameterServerClient;
use sebulba_proto::{Ack, JoinRequest, PROTOCOL_VERSION, Role, TrajectoryBatch, Weights};
use sebulba_testkit::valid_batch;
use sebulba_transport::grpc::{SecureChannel, channel};
use sebulba_transport::security::Security;
use std::io::Write;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::codec::{Codec, EncodeBuf, Encoder};

/// Sends each message's bytes as they are (no protobuf encoding); decodes acks.
#[derive(Clone, Copy)]
struct RawCodec;

struct RawEncoder;

impl Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Ack;
    type Encoder = RawEncoder;
    type Decoder = tonic_prost::ProstDecoder<Ack>;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstDecoder::default()
    }
}

/// Opens `StreamTrajectories` sending raw messages from the returned sender.
async fn raw_stream(ch: SecureChannel) -> (mpsc::Sender<Vec<u8>>, tonic::Streaming<Ack>) {
    let (tx, rx) = mpsc::channel(4);
    let mut grpc = tonic::client::Grpc::new(ch).max_decoding_message_size(1 << 20);
    grpc.ready().await.expect("ready");
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/sebulba.v1.Learner/StreamTrajectories",
    );
    let acks = grpc
        .streaming(tonic::Request::new(ReceiverStream::new(rx)), path, RawCodec)
        .await
        .expect("stream opens")
        .into_inner();
    (tx, acks)
}

/// The status the stream ends with, waiting at most `within`, and how long it took.
async fn end_of(acks: &mut tonic::Streaming<Ack>, within: Duration) -> (tonic::Status, Duration) {
    let t0 = Instant::now();
    match tokio::time::timeout(within, acks.message()).await {
        Err(_) => panic!("nothing within {within:?}: the stream hangs"),
        Ok(Ok(Some(ack))) => panic!("an ack where the stream should end: {ack:?}"),
        Ok(Ok(None)) => panic!("the stream ended with status OK"),
        Ok(Err(status)) => (status, t0.elapsed()),
    }
}

fn cartpole(actor: &str, sequence: u64, version: u64, t: usize, e: usize) -> TrajectoryBatch {
    let env = sebulba_envs::env_spec("CartPole-v1").expect("CartPole");
    valid_batch(&env, t, e, actor, sequence, version)
}

async fn join(client: &mut LearnerClient<SecureChannel>, name: &str) -> (String, usize, usize) {
    let joined = client
        .join(JoinRequest {
            protocol_version: PROTOCOL_VERSION,
            name: name.into(),
            role: Role::Actor as i32,
        })
        .await
        .expect("join")
        .into_inner();
    let spec = joined.spec.expect("spec");
    (
        joined.actor_id,
        spec.rollout_length as usize,
        spec.envs_per_actor as usize,
    )
}

#[test]
fn failed_streams_end_with_a_named_status_at_once_and_streams_are_bound_to_their_actor() {
    let dir = run_dir("hostile-streams");
    let run = dir.join("run");
    let (_ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    // Four batches per update: a lone probe batch waits in the queue.
    let args = [
        "--set",
        "run.total_steps=20000",
        "--set",
        "learner.batches_per_update=4",
        "--set",
        "learner.final_eval_timeout_secs=0",
    ];
    let (mut learner, port) = learner(&dir, "learner", "127.0.0.1:0", &ps_url, &run, &args, |_| {});
    let url = format!("http://127.0.0.1:{port}");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (probe, other) = rt.block_on(async {
        let ch = channel(&url, &Security::insecure(), None).expect("channel");
        let mut client = LearnerClient::new(ch.clone());
        let (probe, t, e) = join(&mut client, "probe").await;
        let (other, _, _) = join(&mut client, "other").await;

        // 1. A valid batch (taken, and waiting in the update loop for its
        //    three partners: its ack channel is held there), then four bytes
        //    that are no protobuf: the stream ends at once, non-OK.
        let (tx, mut acks) = raw_stream(ch.clone()).await;
        tx.send(cartpole(&probe, 0, 0, t, e).encode_to_vec())
            .await
            .expect("send");
        let taken = tokio::time::timeout(Duration::from_secs(10), acks.message())
            .await
            .expect("an ack in time")
            .expect("the stream is open")
            .expect("an ack");
        assert!(taken.accepted, "{taken:?}");
        tx.send(vec![0xff, 0xff, 0xff, 0xff]).await.expect("send");
        let (status, took) = end_of(&mut acks, Duration::from_secs(5)).await;
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("`message`"), "{status:?}");
        eprintln!(
            "undecodable message: stream ended {:?} in {took:?}",
            status.code()
        );

        // 2. A message over the run's limit: refused from its length prefix.
        let (tx, mut acks) = raw_stream(ch.clone()).await;
        tx.send(vec![0u8; 4 << 20]).await.expect("send");
        let (status, took) = end_of(&mut acks, Duration::from_secs(5)).await;
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert!(status.message().contains("`message`"), "{status:?}");
        eprintln!(
            "4 MiB message: stream ended {:?} in {took:?}",
            status.code()
        );

        // 3. A stream belongs to the actor of its first batch; a sequence is taken once.
        let (tx, rx) = mpsc::channel(4);
        let mut acks = client
            .stream_trajectories(ReceiverStream::new(rx))
            .await
            .expect("stream")
            .into_inner();
        let mut next = async || {
            tokio::time::timeout(Duration::from_secs(30), acks.message())
                .await
                .expect("an ack in time")
                .expect("the stream stays open")
                .expect("an ack")
        };
        // Sequence 0 of the probe was taken on the first stream.
        tx.send(cartpole(&probe, 0, 0, t, e)).await.expect("send");
        let a = next().await;
        assert_eq!(a.code, Code::AlreadyExists as i32, "{a:?}");
        assert!(a.message.contains("`sequence`"), "{a:?}");
        tx.send(cartpole(&other, 0, 0, t, e)).await.expect("send");
        let a = next().await;
        assert_eq!(a.code, Code::PermissionDenied as i32, "{a:?}");
        assert!(a.message.contains("`actor_id`"), "{a:?}");
        // Another client sending under the probe's id (with a far sequence,
        // to lock it out) while the probe's stream is open: refused.
        let (tx2, rx2) = mpsc::channel(4);
        let mut acks2 = LearnerClient::new(ch.clone())
            .stream_trajectories(ReceiverStream::new(rx2))
            .await
            .expect("stream")
            .into_inner();
        tx2.send(cartpole(&probe, 1 << 40, 0, t, e))
            .await
            .expect("send");
        let a = tokio::time::timeout(Duration::from_secs(30), acks2.message())
            .await
            .expect("an ack in time")
            .expect("open")
            .expect("an ack");
        assert_eq!(a.code, Code::PermissionDenied as i32, "{a:?}");
        // The probe's own next batch is still taken.
        tx.send(cartpole(&probe, 1, 0, t, e)).await.expect("send");
        let a = next().await;
        assert!(a.code == 0, "{a:?}");
        (probe, other)
    });

    // An honest actor finishes the run, the probe's waiting batch included.
    let mut honest = actor(&dir, "honest", &url, &ps_url, |_| {});
    exits_ok(&mut learner, Duration::from_secs(300));
    exits_ok(&mut honest, Duration::from_secs(60));
    let summary = read_json(&run.join("summary.json"));
    assert_accounted(&summary);
    let p = &summary["batches_per_actor"][&probe];
    assert_eq!(p["used"].as_u64(), Some(2), "{p}");
    assert_eq!(p["rejected_by_reason"]["sequence"].as_u64(), Some(1), "{p}");
    assert_eq!(
        p["rejected_by_reason"]["actor_mismatch"].as_u64(),
        Some(1),
        "{p}"
    );
    assert_eq!(
        p["streams_broken_by_reason"]["undecodable"].as_u64(),
        Some(1),
        "{p}"
    );
    let unbound = &summary["batches_per_actor"]["<no batch yet>"];
    assert_eq!(
        unbound["streams_broken_by_reason"]["oversize"].as_u64(),
        Some(1),
        "{summary}"
    );
    assert!(
        summary["batches_per_actor"][&other]["received"]
            .as_u64()
            .unwrap_or(0)
            == 0,
        "the other actor was not charged for the probe's batch: {summary}"
    );
}

/// SIGTERM, then how long the process took to exit (at most `limit`).
fn sigterm_exit(p: &mut Proc, limit: Duration) -> Duration {
    let t0 = Instant::now();
    let status = p.terminate(limit).unwrap_or_else(|| {
        panic!(
            "{} still running {limit:?} after SIGTERM:\n{}",
            p.name,
            p.log_text()
        )
    });
    assert!(status.success(), "{}: {status}\n{}", p.name, p.log_text());
    t0.elapsed()
}

#[test]
fn servers_stop_on_sigterm_within_the_grace_whatever_their_connections_do() {
    let dir = run_dir("hostile-sigterm");
    let (mut ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let run = dir.join("run");
    let (mut learner, port) = learner(
        &dir,
        "learner",
        "127.0.0.1:0",
        &ps_url,
        &run,
        &["--set", "learner.final_eval_timeout_secs=0"],
        |_| {},
    );
    // Silent connections, and one that sent half an HTTP/2 preface.
    let mut held = Vec::new();
    for p in [ps_port, port] {
        held.push(std::net::TcpStream::connect(("127.0.0.1", p)).expect("connect"));
        let mut half = std::net::TcpStream::connect(("127.0.0.1", p)).expect("connect");
        half.write_all(b"PRI * HTTP/2.0\r\n").expect("write");
        held.push(half);
    }
    std::thread::sleep(Duration::from_millis(500));
    let limit = Duration::from_secs(15);
    let learner_took = sigterm_exit(&mut learner, limit);
    let ps_took = sigterm_exit(&mut ps, limit);
    eprintln!(
        "SIGTERM to exit with idle connections: learner {learner_took:?}, param-server {ps_took:?}"
    );
    drop(held);
}

#[test]
fn a_learner_stops_promptly_on_sigterm_while_its_publish_retries() {
    let dir = run_dir("hostile-sigterm-publish");
    let (mut ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let run = dir.join("run");
    let args = ["--set", "run.total_steps=100000000"];
    let (mut learner, port) = learner(&dir, "learner", "127.0.0.1:0", &ps_url, &run, &args, |_| {});
    let _actor = actor(
        &dir,
        "actor",
        &format!("http://127.0.0.1:{port}"),
        &ps_url,
        |_| {},
    );
    common::wait_for_updates(&run, 3, &learner);
    // The parameter server dies: the learner's next publish retries (60 s).
    let _ = ps.child.kill();
    let _ = ps.child.wait();
    let retrying = Instant::now();
    while !learner.log_text().contains("publish failed") {
        assert!(
            retrying.elapsed() < Duration::from_secs(30),
            "{}",
            learner.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = sigterm_exit(&mut learner, Duration::from_secs(10));
    eprintln!("SIGTERM to exit while publishing to a dead param-server: {took:?}");
    let summary = read_json(&run.join("summary.json"));
    assert_eq!(summary["completed"], false, "{summary}");
}

#[test]
fn versions_cannot_be_hijacked_and_runs_follow_one_another_on_one_param_server() {
    let dir = run_dir("hostile-versions");
    let (_ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let ch = channel(&ps_url, &Security::insecure(), None).expect("channel");
        let mut client = ParameterServerClient::new(ch);
        let w = |version: u64, run_id: &str| Weights {
            version,
            run_id: run_id.into(),
            safetensors: one_tensor(&[0.5, 1.5]).into(),
            ..Default::default()
        };
        let mut garbage = w(1, "intruder");
        garbage.safetensors = vec![1, 2, 3].into();
        let e = client.publish(garbage).await.expect_err("garbage refused");
        assert!(e.message().contains("`safetensors`"), "{}", e.message());
        let mut nan = w(1, "intruder");
        nan.safetensors = one_tensor(&[f32::NAN]).into();
        let e = client.publish(nan).await.expect_err("NaN refused");
        assert!(e.message().contains("non-finite"), "{}", e.message());
        let e = client
            .publish(w(u64::MAX, "intruder"))
            .await
            .expect_err("u64::MAX refused");
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("`version`"), "{}", e.message());
        client
            .publish(w(7, "intruder"))
            .await
            .expect("a run of its own");
        let e = client
            .publish(w(7 + 1_001, "intruder"))
            .await
            .expect_err("a jump far ahead refused");
        assert_eq!(e.code(), Code::FailedPrecondition);
        let e = client.publish(w(8, "")).await.expect_err("no run id");
        assert!(e.message().contains("`run_id`"), "{}", e.message());
    });
    // Two runs, one after the other, on the server the intruder wrote to; in
    // the second, the intruder publishes ahead of the learner in its own run.
    let mut learner_url = String::new();
    for (n, steps) in [(1, "6000"), (2, "60000")] {
        let run = dir.join(format!("run-{n}"));
        let args = [
            "--total-steps",
            steps,
            "--set",
            "learner.final_eval_timeout_secs=0",
        ];
        let name = format!("learner-{n}");
        let (mut l, port) = learner(&dir, &name, "127.0.0.1:0", &ps_url, &run, &args, |_| {});
        learner_url = format!("http://127.0.0.1:{port}");
        let mut a = actor(&dir, &format!("actor-{n}"), &learner_url, &ps_url, |_| {});
        if n == 2 {
            common::wait_for_updates(&run, 2, &l);
            rt.block_on(async {
                let ch = channel(&ps_url, &Security::insecure(), None).expect("channel");
                let mut client = ParameterServerClient::new(ch);
                let latest = client
                    .latest(sebulba_proto::LatestRequest::default())
                    .await
                    .expect("latest")
                    .into_inner();
                let ahead = Weights {
                    version: latest.version + 500,
                    run_id: latest.run_id.clone(),
                    safetensors: one_tensor(&[0.0]).into(),
                    ..Default::default()
                };
                client.publish(ahead).await.expect("within the jump limit");
            });
        }
        exits_ok(&mut l, Duration::from_secs(300));
        exits_ok(&mut a, Duration::from_secs(60));
        let summary = read_json(&run.join("summary.json"));
        assert_accounted(&summary);
        assert!(
            summary["env_steps"].as_u64().unwrap_or(0) >= 6000,
            "{summary}"
        );
        if n == 2 {
            let log = l.log_text();
            assert!(log.contains("going on above it"), "{log}");
        }
    }
    // An actor started after the run: the learner is gone, the parameter
    // server holds the final version, and the actor concludes the run is over
    // once a next run's learner had time to come up (15 s).
    let t0 = Instant::now();
    let mut late = actor(&dir, "late-actor", &learner_url, &ps_url, |_| {});
    exits_ok(&mut late, Duration::from_secs(60));
    eprintln!(
        "an actor started after the run exited in {:?}",
        t0.elapsed()
    );
    assert!(
        late.log_text().contains("run finished"),
        "{}",
        late.log_text()
    );
}

#[test]
fn out_of_range_config_values_are_refused_by_name_without_a_panic() {
    let dir = run_dir("hostile-config");
    for (key, value) in [
        ("learner.queue_capacity", "4611686018427387904"),
        ("actor.send_queue", "4611686018427387904"),
        ("env.rollout_length", "4294967297"),
        ("learner.batches_per_update", "1000000000"),
        ("network.hidden", "[100000,100000]"),
        ("learner.final_eval_timeout_secs", "9223372036854775807"),
        ("ppo.learning_rate", "1e30"),
    ] {
        let mut c = bin();
        c.args(["local", "--env", "CartPole-v1", "--set"])
            .arg(format!("{key}={value}"))
            .arg("--run-dir")
            .arg(dir.join("run"));
        let out = c.output().expect("run sebulba");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{key}={value}: {stderr}");
        assert!(stderr.contains(key), "{key}={value}: {stderr}");
        assert!(!stderr.contains("panicked"), "{key}={value}: {stderr}");
    }
    // Flags that set a key hold the same range.
    for (args, key) in [
        (
            [
                "actor",
                "--send-queue",
                "4611686018427387904",
                "--learner",
                "x",
            ],
            "actor.send_queue",
        ),
        (
            ["evaluator", "--episodes", "0", "--run-dir", "r"],
            "eval.episodes",
        ),
        (
            ["evaluator", "--earlier-versions", "1", "--run-dir", "r"],
            "eval.earlier_versions",
        ),
    ] {
        let out = bin()
            .args(args)
            .args(["--param-server", "y"])
            .output()
            .expect("run sebulba");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(key), "{args:?}: {stderr}");
    }
}

#[test]
fn a_corrupt_checkpoint_is_refused_naming_the_part() {
    let dir = run_dir("hostile-checkpoint");
    let run = dir.join("run");
    let mut c = bin();
    c.args([
        "local",
        "--env",
        "CartPole-v1",
        "--set",
        "run.total_steps=2048",
    ])
    .args(["--set", "learner.checkpoint_interval=1", "--run-dir"])
    .arg(&run);
    let mut p = Proc::spawn("local", c, &dir);
    exits_ok(&mut p, Duration::from_secs(300));
    let path = run.join("checkpoint.bin");
    let good = std::fs::read(&path).expect("checkpoint");
    // A bit in the middle of the parameters: the format is the magic, then
    // per part `len (u64 LE) | sha256 | bytes`, meta first and parameters second.
    let len_at =
        |at: usize| u64::from_le_bytes(good[at..at + 8].try_into().expect("8 bytes")) as usize;
    let params_header = 8 + 8 + 32 + len_at(8);
    let at = params_header + 8 + 32 + len_at(params_header) / 2;
    let mut flipped = good.clone();
    flipped[at] ^= 0x01;
    std::fs::write(&path, &flipped).expect("write");
    let mut c = bin();
    c.args([
        "local",
        "--env",
        "CartPole-v1",
        "--set",
        "run.total_steps=4096",
    ])
    .args(["--resume", "--run-dir"])
    .arg(&run);
    let out = c.output().expect("run sebulba");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("part `params` is corrupt"),
        "a flipped bit at byte {at} of {}: {stderr}",
        good.len()
    );
}

/// A safetensors file with one f32 tensor.
fn one_tensor(values: &[f32]) -> Vec<u8> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let view =
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![values.len()], &bytes)
            .expect("view");
    safetensors::serialize([("w", view)], None).expect("serialize")
}

/// A small tmpfs, unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(at: &std::path::Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(at).expect("mount point");
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self(at.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_stops_the_run_cleanly_without_torn_lines_or_temporary_files() {
    let dir = run_dir("hostile-disk");
    let Some(disk) = SmallDisk::mount(&dir.join("disk"), "512k") else {
        // Loud: this machine cannot mount a tmpfs (not root, or no
        // CAP_SYS_ADMIN); with `SEBULBA_REQUIRE_TMPFS` set (`.ci/run`) or
        // `CI` set, that is a failure.
        for var in ["SEBULBA_REQUIRE_TMPFS", "CI"] {
            assert!(
                std::env::var_os(var).is_none(),
                "{var} is set but a tmpfs cannot be mounted here: the full-disk test would not run"
            );
        }
        eprintln!("SKIPPED a_full_disk_stops_the_run_cleanly: cannot mount a tmpfs here");
        return;
    };
    let run = disk.0.join("run");
    let mut c = bin();
    c.args([
        "local",
        "--env",
        "CartPole-v1",
        "--set",
        "run.total_steps=2000000",
    ])
    .args(["--set", "learner.checkpoint_interval=1", "--run-dir"])
    .arg(&run);
    let mut p = Proc::spawn("local", c, &dir);
    let status = p
        .wait(Duration::from_secs(300))
        .unwrap_or_else(|| panic!("still running on a full disk:\n{}", p.log_text()));
    let log = p.log_text();
    assert!(
        !status.success(),
        "the run cannot finish on 512 KiB:\n{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        log.contains("metrics.jsonl"),
        "the error names the file:\n{log}"
    );
    let names: Vec<String> = std::fs::read_dir(&run)
        .expect("run dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".tmp")),
        "temporary files left: {names:?}"
    );
    for file in ["metrics.jsonl", "eval.jsonl"] {
        let text = std::fs::read_to_string(run.join(file)).unwrap_or_default();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "{file} ends in a torn line"
        );
        for line in text.lines() {
            serde_json::from_str::<serde_json::Value>(line)
                .unwrap_or_else(|e| panic!("{file}: torn line {line:?}: {e}"));
        }
    }
    eprintln!(
        "full disk: {} metrics lines kept, files {names:?}",
        std::fs::read_to_string(run.join("metrics.jsonl"))
            .unwrap_or_default()
            .lines()
            .count()
    );
}

#[test]
fn an_actor_that_joined_before_a_learner_restart_joins_again() {
    let dir = run_dir("hostile-rejoin");
    let run = dir.join("run");
    let ps_listen = format!("127.0.0.1:{}", common::free_port());
    let ps_url = format!("http://{ps_listen}");
    let (mut ps, _) = param_server(&dir, "param-server", &ps_listen, |_| {});
    let args = [
        "--set",
        "run.total_steps=40000",
        "--set",
        "learner.checkpoint_interval=2",
        "--set",
        "learner.final_eval_timeout_secs=0",
    ];
    let (mut first, port) = learner(&dir, "learner", "127.0.0.1:0", &ps_url, &run, &args, |_| {});
    let learner_url = format!("http://127.0.0.1:{port}");
    let mut trained = actor(&dir, "trained", &learner_url, &ps_url, |_| {});
    common::wait_for_updates(&run, 4, &first);
    // With the parameter server away, a new actor joins and waits for weights.
    let _ = ps.child.kill();
    let _ = ps.child.wait();
    let mut waiting = actor(&dir, "waiting", &learner_url, &ps_url, |_| {});
    let joined = Instant::now();
    while !waiting.log_text().contains("joined") {
        assert!(
            joined.elapsed() < Duration::from_secs(30),
            "{}",
            waiting.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The learner restarts (same run, from its checkpoint), then the
    // parameter server comes back: the waiting actor's id is unknown now.
    let _ = first.child.kill();
    let _ = first.child.wait();
    let listen = format!("127.0.0.1:{port}");
    let (mut second, _) = learner(&dir, "learner-2", &listen, &ps_url, &run, &args, |c| {
        c.arg("--resume");
    });
    let (_ps2, _) = param_server(&dir, "param-server-2", &ps_listen, |_| {});
    exits_ok(&mut second, Duration::from_secs(300));
    exits_ok(&mut waiting, Duration::from_secs(60));
    exits_ok(&mut trained, Duration::from_secs(60));
    let log = waiting.log_text();
    assert!(log.contains("joining again"), "{log}");
    let summary = read_json(&run.join("summary.json"));
    assert_accounted(&summary);
    let rejoined = summary["batches_per_actor"]
        .as_object()
        .expect("per actor")
        .iter()
        .any(|(id, c)| id.starts_with("waiting#") && c["used"].as_u64().unwrap_or(0) > 0);
    assert!(
        rejoined,
        "the waiting actor trained after re-joining: {summary}"
    );
}
