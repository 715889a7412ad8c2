//! A learner's memory against what its peers send, from a client written to
//! the `.proto` alone: one large batch leaves nothing behind on a stream that
//! stays open (each batch is read into an allocation of its own), and actors
//! that come and go fold into one `departed` entry past
//! `learner.departed_actors_kept`, the accounting exact throughout.

// Each test is one scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;

use common::{actor, assert_accounted, exits_ok, learner, param_server, read_json, run_dir};
use sebulba_proto::learner_client::LearnerClient;
use sebulba_proto::{Ack, JoinRequest, PROTOCOL_VERSION, Role, TrajectoryBatch};
use sebulba_testkit::valid_batch;
use sebulba_transport::grpc::{MAX_MESSAGE_BYTES, SecureChannel, channel};
use sebulba_transport::security::Security;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Resident size of `pid` in MiB (`VmRSS`, and the peak `VmHWM`).
fn rss_mib(pid: u32) -> (f64, f64) {
    let (rss, peak) = sebulba_core::memory::rss_of(pid).expect("/proc/PID/status");
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    (mib(rss), mib(peak))
}

fn cartpole(actor: &str, sequence: u64, t: usize, e: usize) -> TrajectoryBatch {
    let env = sebulba_envs::env_spec("CartPole-v1").expect("CartPole");
    valid_batch(&env, t, e, actor, sequence, 0)
}

async fn client(url: &str) -> LearnerClient<SecureChannel> {
    let ch = channel(url, &Security::insecure(), None).expect("channel");
    LearnerClient::new(ch)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

async fn join(client: &mut LearnerClient<SecureChannel>, name: &str) -> String {
    client
        .join(JoinRequest {
            protocol_version: PROTOCOL_VERSION,
            name: name.into(),
            role: Role::Actor as i32,
        })
        .await
        .expect("join")
        .into_inner()
        .actor_id
}

/// A stream's sender and its acks.
struct Stream {
    tx: mpsc::Sender<TrajectoryBatch>,
    acks: tonic::Streaming<Ack>,
}

impl Stream {
    async fn open(client: &mut LearnerClient<SecureChannel>) -> Self {
        let (tx, rx) = mpsc::channel(2);
        let acks = client
            .stream_trajectories(ReceiverStream::new(rx))
            .await
            .expect("stream")
            .into_inner();
        Self { tx, acks }
    }

    /// `n` small batches of the wrong size for the run: each read whole and
    /// refused.
    async fn small(&mut self, id: &str, sequence: &mut u64, n: usize) {
        for _ in 0..n {
            *sequence += 1;
            let ack = self.send(cartpole(id, *sequence, 1, 1)).await;
            assert!(!ack.accepted, "{ack:?}");
        }
    }

    async fn send(&mut self, batch: TrajectoryBatch) -> Ack {
        self.tx.send(batch).await.expect("send");
        tokio::time::timeout(Duration::from_secs(60), self.acks.message())
            .await
            .expect("an ack within 60 s")
            .expect("the stream stays open")
            .expect("an ack")
    }
}

#[test]
fn a_large_batch_leaves_no_memory_behind_on_its_open_stream() {
    let dir = run_dir("memory-large-batch");
    let run = dir.join("run");
    let (_ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    // 512 x 1024 steps a batch: a message limit of 68 MiB.
    let args = [
        "--set",
        "env.envs_per_actor=512",
        "--set",
        "env.rollout_length=1024",
        "--set",
        "learner.final_eval_timeout_secs=0",
    ];
    let (mut learner, port) = learner(&dir, "learner", "127.0.0.1:0", &ps_url, &run, &args, |_| {});
    let pid = learner.child.id();
    let url = format!("http://127.0.0.1:{port}");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (before, after, during_peak) = rt.block_on(async {
        let mut c = client(&url).await;
        let id = join(&mut c, "large").await;
        let mut stream = Stream::open(&mut c).await;
        let mut sequence = 0;
        stream.small(&id, &mut sequence, 20).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = rss_mib(pid).0;
        // 60 MiB of observations: read whole, decoded, refused.
        sequence += 1;
        let mut big = cartpole(&id, sequence, 1, 1);
        if let Some(obs) = big.observations.as_mut() {
            obs.data = vec![0u8; 60 << 20].into();
        }
        let ack = stream.send(big).await;
        assert!(!ack.accepted, "{ack:?}");
        let during_peak = rss_mib(pid).1;
        stream.small(&id, &mut sequence, 20).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = rss_mib(pid).0;
        // The stream is still open: its buffers are what is measured.
        stream.small(&id, &mut sequence, 1).await;
        (before, after, during_peak)
    });
    eprintln!(
        "learner RSS: {before:.1} MiB before a 60 MiB batch, {after:.1} MiB after it on the same open stream (peak {during_peak:.1} MiB)"
    );
    assert!(
        during_peak >= before + 50.0,
        "the batch was held whole while read: peak {during_peak:.1}, before {before:.1}"
    );
    assert!(
        after < before + 16.0,
        "the batch's memory stays behind: {before:.1} MiB before, {after:.1} MiB after"
    );
    let _ = learner.terminate(Duration::from_secs(30));
}

#[test]
fn departed_actors_fold_into_one_entry_and_the_accounting_stays_exact() {
    let dir = run_dir("memory-departed");
    let run = dir.join("run");
    let (_ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
    let ps_url = format!("http://127.0.0.1:{ps_port}");
    let args = [
        "--set",
        "learner.departed_actors_kept=2",
        "--set",
        "learner.final_eval_timeout_secs=0",
        "--total-steps",
        "20000",
    ];
    let (mut learner, port) = learner(&dir, "learner", "127.0.0.1:0", &ps_url, &run, &args, |_| {});
    let url = format!("http://127.0.0.1:{port}");
    let cfg = sebulba_core::config::RunConfig::preset("CartPole-v1").expect("preset");
    let (t, e) = (cfg.env.rollout_length, cfg.env.envs_per_actor);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    // Ten actors come, each sends a batch of version 0 and leaves.
    rt.block_on(async {
        for i in 0..10 {
            let mut c = client(&url).await;
            let id = join(&mut c, &format!("visitor-{i}")).await;
            let mut stream = Stream::open(&mut c).await;
            let ack = stream.send(cartpole(&id, 1, t, e)).await;
            assert_eq!(ack.code, 0, "{ack:?}");
            drop(stream);
        }
    });
    // An honest actor trains the run to its end.
    let mut honest = actor(&dir, "honest", &url, &ps_url, |_| {});
    exits_ok(&mut learner, Duration::from_secs(300));
    exits_ok(&mut honest, Duration::from_secs(60));
    let summary = read_json(&run.join("summary.json"));
    assert_accounted(&summary);
    let folded = summary["actors_folded"].as_u64().expect("actors_folded");
    assert!(
        folded >= 8,
        "10 visitors, 2 kept: {folded} folded\n{summary}"
    );
    let per = summary["batches_per_actor"].as_object().expect("per actor");
    let visitors = per.keys().filter(|k| k.starts_with("visitor-")).count();
    assert!(visitors <= 2, "{visitors} visitors kept apart: {per:?}");
    let departed = &summary["batches_departed"];
    assert!(
        departed["received"].as_u64().unwrap_or(0) >= 8,
        "the folded visitors' batches: {departed}"
    );
}
