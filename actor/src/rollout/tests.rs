//! The rollout loop with a real CartPole and a real policy, and a stand-in
//! for the stream: the batches it sends, and its credit-based flow control.

use super::*;
use crate::Flow;
use crate::testing::{decode, discrete_actions, ln_softmax_at};
use sebulba_core::model::ModelSpec;
use std::time::{Duration, Instant};

const RUN: &str = "run-a";
const SOON: Duration = Duration::from_secs(10);
const NOT_YET: Duration = Duration::from_millis(400);

fn network() -> NetworkConfig {
    NetworkConfig {
        hidden: vec![8],
        ..Default::default()
    }
}

fn cartpole() -> EnvSpec {
    sebulba_envs::env_spec("CartPole-v1").unwrap()
}

/// Safetensors of a freshly initialised CartPole network.
fn bytes() -> Vec<u8> {
    bytes_of(&network())
}

/// Safetensors of a freshly initialised CartPole network `network`.
fn bytes_of(network: &NetworkConfig) -> Vec<u8> {
    let spec = ModelSpec::new(&cartpole(), network).unwrap();
    let model = spec.init::<sebulba_core::CpuBackend>(&Default::default());
    sebulba_core::weights::to_safetensors(&model, &spec).unwrap()
}

fn weights(run: &str, version: u64, bytes: &[u8]) -> Option<Arc<Weights>> {
    Some(Arc::new(Weights {
        run_id: run.into(),
        version,
        safetensors: bytes.to_vec().into(),
        ..Default::default()
    }))
}

struct Harness {
    weights: watch::Sender<Option<Arc<Weights>>>,
    batches: mpsc::Receiver<TrajectoryBatch>,
    flow: Flow,
    stop: CancellationToken,
    thread: tokio::task::JoinHandle<Result<u64, EnvError>>,
}

/// A rollout of E CartPoles and T steps under `flow`, with `first` weights
/// published. Its stream holds any number of batches, so only the credits
/// hold it back.
fn start((e_len, t_len): (usize, usize), flow: Flow, first: Option<Arc<Weights>>) -> Harness {
    start_with(network(), (e_len, t_len), flow, first)
}

/// [`start`] with the network `network`.
fn start_with(
    network: NetworkConfig,
    (e_len, t_len): (usize, usize),
    flow: Flow,
    first: Option<Arc<Weights>>,
) -> Harness {
    let env = cartpole();
    let setup = RolloutSetup {
        actor_id: "actor-1".into(),
        dist: ActionDist::new(&env.action_space, &network),
        env,
        env_kwargs: String::new(),
        network,
        envs_per_actor: e_len,
        rollout_length: t_len,
        seed: 9,
        device: DeviceKind::Cpu,
        run_id: RUN.into(),
        reward_gamma: None,
        lane: None,
        metrics: crate::metrics::ActorMetrics::new("test"),
        others: None,
    };
    let (weights, weights_rx) = watch::channel(first);
    let (tx, batches) = mpsc::channel(64);
    let stop = CancellationToken::new();
    let (credits, floor) = (flow.credits.clone(), flow.min_version.clone());
    let handle = tokio::runtime::Handle::current();
    let rollout = Rollout::new(setup, weights_rx, tx, credits, floor, stop.clone(), handle);
    let rollout = rollout.unwrap();
    Harness {
        weights,
        batches,
        flow,
        stop,
        thread: tokio::task::spawn_blocking(move || rollout.run()),
    }
}

impl Harness {
    async fn next(&mut self, within: Duration) -> Option<TrajectoryBatch> {
        tokio::time::timeout(within, self.batches.recv())
            .await
            .ok()
            .flatten()
    }

    /// Stops the rollout; the env steps it reports.
    async fn finish(mut self) -> u64 {
        self.stop.cancel();
        (&mut self.thread).await.unwrap().unwrap()
    }
}

/// A failed assertion stops the rollout too: the runtime's shutdown waits
/// for its blocking thread.
impl Drop for Harness {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_carry_their_sequence_the_version_acted_with_and_its_log_probs() {
    let (e_len, t_len) = (2, 5);
    let bytes = bytes();
    let mut h = start((e_len, t_len), Flow::new(3), weights(RUN, 1, &bytes));
    let mut policy = InferencePolicy::new(&cartpole(), &network(), DeviceKind::Cpu).unwrap();
    policy.load(1, bytes).unwrap();
    let mut last_row: Option<Vec<f32>> = None;
    for k in 0..3u64 {
        let b = h.next(SOON).await.expect("a batch");
        assert_eq!(
            (b.actor_id.as_str(), b.sequence, b.policy_version),
            ("actor-1", k, 1)
        );
        assert_eq!((b.rollout_length, b.envs_per_actor), (5, 2));
        let w = decode(&b, 5, 2, 4);
        let actions = discrete_actions(&b, 5, 2);
        // Each batch starts where the last one ended.
        if let Some(row) = last_row {
            assert_eq!(w.observations[..8], row[..]);
        }
        last_row = Some(w.observations[40..].to_vec());
        assert!(
            w.rewards.iter().all(|&r| r == 1.0),
            "CartPole pays 1 a step"
        );
        for t in 0..t_len {
            let head = policy.step(
                &w.observations[t * 8..(t + 1) * 8],
                &mut policy.state(e_len),
                None,
            );
            for e in 0..e_len {
                let a = actions[t * 2 + e];
                assert!(a == 0 || a == 1, "{a}");
                let want = ln_softmax_at(&head[e * 2..e * 2 + 2], None, a as usize);
                let got = f64::from(w.log_probs[t * 2 + e]);
                assert!((got - want).abs() < 1e-5, "t {t} e {e}: {got} vs {want}");
            }
        }
    }
    assert_eq!(h.finish().await, 30, "3 batches of 5 steps of 2 envs");
}

/// With a recurrent core, each env acts from its own state, zeroed where
/// its episode ends, carried across rollouts; each batch carries every
/// env's state before its first row. Replayed here step by step: the
/// states each batch says and the log-probabilities it sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurrent_policy_acts_from_each_envs_state_and_batches_carry_it() {
    let net = NetworkConfig {
        core: sebulba_core::config::CoreKind::Lstm,
        core_size: 4,
        ..network()
    };
    let (e_len, t_len) = (3, 20);
    let bytes = bytes_of(&net);
    let mut h = start_with(
        net.clone(),
        (e_len, t_len),
        Flow::new(4),
        weights(RUN, 1, &bytes),
    );
    let mut policy = InferencePolicy::new(&cartpole(), &net, DeviceKind::Cpu).unwrap();
    policy.load(1, bytes).unwrap();
    let mut state = policy.state(e_len);
    let width = state.width() as u32;
    assert_eq!(width, 2 * 2 * 4, "h and c of each torso's core");
    let mut ends = 0;
    for _ in 0..3 {
        let b = h.next(SOON).await.expect("a batch");
        let init =
            sebulba_proto::decode_f32(b.initial_state.as_ref(), "initial_state", &[3, width]);
        assert_eq!(
            init.unwrap(),
            state.values(),
            "the state before the batch's first row"
        );
        let w = decode(&b, 20, 3, 4);
        let actions = discrete_actions(&b, 20, 3);
        for t in 0..t_len {
            let head = policy.step(&w.observations[t * 12..(t + 1) * 12], &mut state, None);
            for e in 0..e_len {
                let a = actions[t * 3 + e] as usize;
                let want = ln_softmax_at(&head[e * 2..e * 2 + 2], None, a);
                let got = f64::from(w.log_probs[t * 3 + e]);
                assert!((got - want).abs() < 1e-5, "t {t} e {e}: {got} vs {want}");
            }
            let ended =
                (0..e_len).map(|e| w.terminated[t * 3 + e] == 1 || w.truncated[t * 3 + e] == 1);
            ends += ended.clone().filter(|&x| x).count();
            state.reset_ended(ended);
        }
    }
    assert!(ends > 0, "episodes ended inside the batches");
    assert!(state.values().iter().any(|&v| v != 0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_send_queue_batches_are_outstanding_and_an_ack_returns_one() {
    let mut h = start((2, 3), Flow::new(2), weights(RUN, 1, &bytes()));
    let mut sequences = Vec::new();
    for _ in 0..2 {
        sequences.push(h.next(SOON).await.expect("within the credit").sequence);
    }
    assert!(h.next(NOT_YET).await.is_none(), "a third before any ack");
    h.flow.ack(1);
    sequences.push(h.next(SOON).await.expect("after an ack").sequence);
    assert!(h.next(NOT_YET).await.is_none(), "one ack, one batch");
    h.flow.ack(1);
    h.flow.ack(1);
    for _ in 0..2 {
        sequences.push(h.next(SOON).await.expect("after two acks").sequence);
    }
    assert!(h.next(NOT_YET).await.is_none(), "two acks, two batches");
    assert_eq!(sequences, [0, 1, 2, 3, 4]);
    assert_eq!(h.finish().await, 5 * 6);

    // A send queue of 0 still lets one batch out at a time.
    let mut h = start((1, 2), Flow::new(0), weights(RUN, 1, &bytes()));
    assert!(h.next(SOON).await.is_some());
    assert!(h.next(NOT_YET).await.is_none(), "a second before any ack");
    h.flow.ack(1);
    assert!(h.next(SOON).await.is_some());
    assert_eq!(h.finish().await, 2 * 2);
}

/// The floor of a rollout's weights is the learner's version at the latest
/// ack heard before it waits for its credit: with the newest weights older,
/// it waits for newer ones (of its own run), and acts with what it has after
/// 2 s without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_waits_for_weights_as_new_as_the_learner_at_the_ack() {
    let bytes = bytes();
    let flow = Flow::new(1);
    // An ack heard before the rollout starts: the learner is at version 5,
    // and a second credit.
    flow.ack(5);
    let mut h = start((1, 2), flow, weights(RUN, 1, &bytes));
    assert!(h.next(NOT_YET).await.is_none(), "acting with version 1 < 5");
    h.weights.send_replace(weights(RUN, 5, &bytes));
    let b = h.next(SOON).await.expect("version 5 published");
    assert_eq!((b.sequence, b.policy_version), (0, 5));
    let b = h.next(SOON).await.expect("the second credit");
    assert_eq!((b.sequence, b.policy_version), (1, 5));
    // The learner moves to 9 and 9 is never published (another run's 12
    // does not count): each rollout then acts with 5, the last one only
    // after its 2 s of patience, counted from the ack that lets it start.
    h.flow.ack(9);
    let b = h.next(SOON).await.expect("a batch after the ack");
    assert_eq!((b.sequence, b.policy_version), (2, 5));
    tokio::time::sleep(Duration::from_millis(200)).await;
    h.weights.send_replace(weights("run-b", 12, &bytes));
    let acked = Instant::now();
    h.flow.ack(9);
    let b = h.next(SOON).await.expect("a batch after the patience");
    assert!(
        acked.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        acked.elapsed()
    );
    assert_eq!((b.sequence, b.policy_version), (3, 5));
    h.finish().await;
}

/// A rollout starts "with weights at least as new as the learner's version
/// when it took the previous one", i.e. at the ack that gave the credit,
/// even when the rollout was already waiting for that credit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ack_that_gives_the_credit_sets_the_floor() {
    let bytes = bytes();
    let mut h = start((1, 2), Flow::new(1), weights(RUN, 1, &bytes));
    assert_eq!(h.next(SOON).await.expect("a first batch").policy_version, 1);
    // The rollout is waiting for its credit by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.flow.ack(5);
    assert!(h.next(NOT_YET).await.is_none(), "acting with version 1 < 5");
    h.weights.send_replace(weights(RUN, 5, &bytes));
    let b = h.next(SOON).await.expect("version 5 published");
    assert_eq!((b.sequence, b.policy_version), (1, 5));
    h.finish().await;
}
