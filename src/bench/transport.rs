//! `sebulba bench transport`: trajectory batches encoded, streamed over
//! loopback gRPC and decoded + validated by a sink server that acks each one,
//! the path every batch takes from actor to learner.

use anyhow::Context;
use futures::StreamExt;
use prost::Message;
use sebulba_envs::env_spec_with;
use sebulba_learner::validate::{Expect, decode_batch};
use sebulba_proto::learner_client::LearnerClient;
use sebulba_proto::learner_server::{Learner, LearnerServer};
use sebulba_proto::{Ack, JoinRequest, JoinResponse, TrajectoryBatch};
use sebulba_testkit::valid_batch;
use sebulba_transport::grpc::{MAX_MESSAGE_BYTES, channel};
use serde::Serialize;
use std::pin::Pin;
use std::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

#[derive(Debug, Clone, Serialize)]
pub struct TransportBench {
    pub env_id: String,
    pub envs_per_actor: usize,
    pub rollout_length: usize,
    pub batches: usize,
    pub bytes_per_batch: usize,
    pub seconds: f64,
    pub batches_per_second: f64,
    pub megabytes_per_second: f64,
    pub env_steps_per_second: f64,
}

/// Decodes and validates every batch like the learner's ingest, then acks it.
struct Sink {
    env: sebulba_envs::EnvSpec,
    rollout_length: usize,
    envs_per_actor: usize,
}

type AckStream = Pin<Box<dyn futures::Stream<Item = Result<Ack, Status>> + Send>>;

#[tonic::async_trait]
impl Learner for Sink {
    async fn join(&self, _: Request<JoinRequest>) -> Result<Response<JoinResponse>, Status> {
        Err(Status::unimplemented("the transport benchmark has no run"))
    }

    type StreamTrajectoriesStream = AckStream;

    async fn stream_trajectories(
        &self,
        request: Request<Streaming<TrajectoryBatch>>,
    ) -> Result<Response<AckStream>, Status> {
        let mut inbound = request.into_inner();
        let (env, t, e) = (self.env.clone(), self.rollout_length, self.envs_per_actor);
        let out = async_stream_acks(move |tx| async move {
            while let Some(b) = inbound.next().await {
                let b = b?;
                let expect = Expect {
                    env: &env,
                    rollout_length: t,
                    envs_per_actor: e,
                    current_version: u64::MAX,
                    restarting: false,
                    scaled_rewards: false,
                    past_selves: false,
                    state_width: 0,
                };
                let decoded =
                    decode_batch(&b, &expect).map_err(|r| Status::new(r.code, r.message))?;
                let ack = Ack {
                    sequence: decoded.sequence,
                    accepted: true,
                    ..Default::default()
                };
                if tx.send(Ok(ack)).await.is_err() {
                    break;
                }
            }
            Ok(())
        });
        Ok(Response::new(out))
    }
}

/// Runs `body` on a task feeding an ack channel; its error ends the stream.
fn async_stream_acks<F, Fut>(body: F) -> AckStream
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<Ack, Status>>) -> Fut,
    Fut: std::future::Future<Output = Result<(), Status>> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let fut = body(tx.clone());
    tokio::spawn(async move {
        if let Err(s) = fut.await {
            let _ = tx.send(Err(s)).await;
        }
    });
    Box::pin(ReceiverStream::new(rx))
}

/// A loopback server that decodes, validates and acks every batch.
async fn start_sink(
    env: &sebulba_envs::EnvSpec,
    rollout_length: usize,
    envs_per_actor: usize,
) -> anyhow::Result<(
    std::net::SocketAddr,
    tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding 127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let sink = Sink {
        env: env.clone(),
        rollout_length,
        envs_per_actor,
    };
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .trace_fn(sebulba_transport::trace::server_span)
            .add_service(
                LearnerServer::new(sink)
                    .max_decoding_message_size(MAX_MESSAGE_BYTES)
                    .max_encoding_message_size(MAX_MESSAGE_BYTES),
            )
            .serve_with_incoming(sebulba_transport::grpc::incoming(listener)),
    );
    Ok((addr, server))
}

/// Encodes `batches` batches of E envs x T steps, streams them to a loopback
/// sink that decodes and validates each, and waits for every ack.
pub async fn bench_transport(
    env_id: &str,
    envs_per_actor: usize,
    rollout_length: usize,
    batches: usize,
) -> anyhow::Result<TransportBench> {
    let env = env_spec_with(env_id, "")?;
    let (addr, server) = start_sink(&env, rollout_length, envs_per_actor).await?;
    let mut client = LearnerClient::new(channel(
        &format!("http://{addr}"),
        &sebulba_transport::security::Security::insecure(),
        None,
    )?)
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let bytes_per_batch =
        valid_batch(&env, rollout_length, envs_per_actor, "bench", 0, 0).encoded_len();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let t0 = Instant::now();
    let producer = {
        let env = env.clone();
        tokio::spawn(async move {
            for i in 0..batches {
                // Encoding is part of the measured path.
                if tx
                    .send(valid_batch(
                        &env,
                        rollout_length,
                        envs_per_actor,
                        "bench",
                        i as u64,
                        0,
                    ))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        })
    };
    let mut acks = client
        .stream_trajectories(ReceiverStream::new(rx))
        .await?
        .into_inner();
    let mut acked = 0usize;
    while acked < batches {
        match acks.message().await {
            Ok(Some(_)) => acked += 1,
            Ok(None) => break,
            Err(s) => return Err(s.into()),
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let _ = producer.await;
    server.abort();
    if acked < batches {
        anyhow::bail!("only {acked} of {batches} batches were acknowledged");
    }
    Ok(TransportBench {
        env_id: env_id.to_string(),
        envs_per_actor,
        rollout_length,
        batches,
        bytes_per_batch,
        seconds,
        batches_per_second: batches as f64 / seconds,
        megabytes_per_second: (batches * bytes_per_batch) as f64 / seconds / 1e6,
        env_steps_per_second: (batches * envs_per_actor * rollout_length) as f64 / seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_batch_crosses_and_is_acknowledged() {
        let r = bench_transport("Pendulum-v1", 4, 8, 20).await.unwrap();
        assert_eq!(r.batches, 20);
        // 9x4x3 obs + 8x4x1 actions + 3 x 8x4 floats/bytes, plus framing.
        assert!(r.bytes_per_batch > (9 * 4 * 3 + 8 * 4 * 3) * 4, "{r:?}");
    }
}
