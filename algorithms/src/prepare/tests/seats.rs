//! A game's seats read back by the learner exactly as an actor acted them.
//! Two batches of Nim are acted here move by move with an LSTM policy, as
//! the actor does: each seat on its own state (zeroed for every seat when
//! a game ends), the batches' K = P - 1 overlap moves carried into the
//! next batch, whose initial states are the states before them. The
//! trainer then reads each batch as the learner does (its sequence, the
//! overlap continuing it, each row on its mover's state) and must give the
//! acted log-probabilities; reading the rows on one state per env instead
//! (no seats) must not.

use crate::engine::{EngineChoice, Steps};
use crate::trainer::Trainer;
use crate::trajectory::{BatchActions, GameRows, Trajectory};
use rand::SeedableRng;
use rand::rngs::StdRng;
use sebulba_core::config::{CoreKind, Init, NetworkConfig};
use sebulba_core::distribution::sample_categorical;
use sebulba_core::model::ModelSpec;
use sebulba_envs::{ActionBatch, Observations, Purpose, make_vector_env};
use sebulba_fused::{FusedPolicy, PolicyState};

const T: usize = 10;
const E: usize = 3;

/// Every row acted: observations and movers one row longer than the moves.
struct Acted {
    obs: Vec<f32>,
    movers: Vec<u8>,
    actions: Vec<i32>,
    masks: Vec<u8>,
    log_probs: Vec<f32>,
    terminated: Vec<u8>,
    /// Every seat's state before each row, `[E * P * width]` each.
    before: Vec<Vec<f32>>,
}

/// `rows` moves of `E` Nim games with `policy`, a state per seat.
fn act(policy: &FusedPolicy, rows: usize, width: usize) -> (Acted, usize, usize) {
    let mut venv = make_vector_env("Nim-v0", "", E, 5, Purpose::Train).unwrap();
    let spec = venv.spec();
    let (d, n, p) = (spec.obs_dim, actions_of(spec), spec.players);
    let mut obs = vec![0.0f32; E * d];
    venv.reset(&mut obs).unwrap();
    let mut states = PolicyState::zeros(width, E * p);
    let mut out = venv.new_step_out();
    let (mut rng, mut scratch) = (StdRng::seed_from_u64(9), vec![0.0f32; n]);
    let mut a = Acted {
        obs: obs.clone(),
        movers: Vec::new(),
        actions: Vec::new(),
        masks: Vec::new(),
        log_probs: Vec::new(),
        terminated: Vec::new(),
        before: Vec::new(),
    };
    let mut ids = vec![0u8; E];
    for _ in 0..rows {
        assert!(venv.to_move(&mut ids));
        a.movers.extend_from_slice(&ids);
        let mut mask = vec![0u8; E * n];
        assert!(venv.action_masks(&mut mask));
        a.before.push(states.values().to_vec());
        let lanes: Vec<usize> = (0..E).map(|e| e * p + ids[e] as usize).collect();
        let mut part = states.select(lanes.iter().copied());
        let head = policy.step(&obs, &mut part, None);
        states.put_back(&part, lanes.iter().copied());
        let mut chosen = vec![0u32; E];
        for e in 0..E {
            let valid = Some(&mask[e * n..(e + 1) * n]);
            let row = &head[e * n..(e + 1) * n];
            let (action, lp) = sample_categorical(row, valid, &mut scratch, &mut rng).unwrap();
            chosen[e] = action as u32;
            a.actions.push(action as i32);
            a.log_probs.push(lp);
        }
        a.masks.extend_from_slice(&mask);
        venv.step(ActionBatch::Discrete(&chosen), &mut out).unwrap();
        for e in 0..E {
            a.terminated.push(u8::from(out.terminated[e]));
            if out.terminated[e] {
                (0..p).for_each(|s| states.reset(e * p + s));
            }
        }
        obs.copy_from_slice(&out.obs);
        a.obs.extend_from_slice(&obs);
    }
    assert!(venv.to_move(&mut ids));
    a.movers.extend_from_slice(&ids);
    (a, d, p)
}

fn actions_of(spec: &sebulba_envs::EnvSpec) -> usize {
    match spec.action_space {
        sebulba_envs::ActionSpace::Discrete { n } => n,
        _ => unreachable!("a game's moves are discrete"),
    }
}

/// Batch `b` of the acted rows: its T trained moves from row `b * T`, the
/// overlap after them, and the states before its first row.
fn batch(a: &Acted, b: usize, (d, n, p, width): (usize, usize, usize, usize)) -> Trajectory {
    let (k, first) = (p - 1, b * T);
    let rows = |from: usize, to: usize| from * E..to * E;
    let obs = |r: std::ops::Range<usize>| a.obs[r.start * d..r.end * d].to_vec();
    Trajectory {
        policy_version: 0,
        rollout_length: T,
        envs_per_actor: E,
        observations: Observations::F32(obs(rows(first, first + T + 1))),
        actions: BatchActions::Discrete(a.actions[rows(first, first + T)].to_vec()),
        action_masks: Some(a.masks[first * E * n..(first + T) * E * n].to_vec()),
        log_probs: a.log_probs[rows(first, first + T)].to_vec(),
        rewards: vec![0.0; T * E],
        terminated: a.terminated[rows(first, first + T)].to_vec(),
        truncated: vec![0; T * E],
        final_observations: Observations::default(),
        discounted_returns: Vec::new(),
        episode_returns: Vec::new(),
        episode_lengths: Vec::new(),
        game: Some(GameRows {
            player_ids: a.movers[rows(first, first + T + k + 1)].to_vec(),
            overlap_observations: Observations::F32(obs(rows(first + T + 1, first + T + k + 1))),
            overlap_terminated: a.terminated[rows(first + T, first + T + k)].to_vec(),
            past_moves: Vec::new(),
        }),
        initial_state: PolicyState::from_values(width * p, E, a.before[first].clone()).unwrap(),
    }
}

#[test]
fn each_seat_is_read_back_on_the_state_it_acted_with() {
    let spec = sebulba_envs::env_spec("Nim-v0").unwrap();
    let net = NetworkConfig {
        hidden: vec![16],
        core: CoreKind::Lstm,
        core_size: 8,
        // Weights of unit scale throughout, so that every move's
        // probabilities depend on what its seat remembers.
        init: Init::LecunUniform,
        ..Default::default()
    };
    let model = ModelSpec::new(&spec, &net).unwrap();
    let width = model.arch().state_width();
    let mut trainer = Trainer::fresh(&model, 1e-5, 3, &EngineChoice::Fused { threads: 1 }).unwrap();
    let params = trainer.state().unwrap().params;
    let policy = FusedPolicy::new(&model.arch(), params, None).unwrap();
    let (a, d, p) = act(&policy, 2 * T + 1, width);
    assert!(
        a.terminated.iter().filter(|&&x| x == 1).count() >= 2,
        "games end inside"
    );
    let n = actions_of(&spec);
    let mut worst_without_seats = 0.0f32;
    for b in 0..2 {
        let batch = batch(&a, b, (d, n, p, width));
        // The trained moves and the overlap's, read as the learner reads
        // them: one sequence of T + K steps, each row on its mover's state.
        let steps = T + p - 1;
        let game = batch.game.as_ref().unwrap();
        let mut obs = [
            batch.observations.to_f32(0..(T + 1) * E * d),
            game.overlap_observations.to_f32(0..(p - 1) * E * d),
        ]
        .concat();
        obs.truncate(steps * E * d);
        let starts = batch.starts();
        let first = b * T * E;
        let acted = &a.log_probs[first..first + steps * E];
        let actions = BatchActions::Discrete(a.actions[first..first + steps * E].to_vec());
        let masks = &a.masks[first * n..(first + steps * E) * n];
        let seq = batch.sequence(steps, &starts, &[]);
        let got = trainer.log_probs(&Steps::sequence(&obs, seq), &actions, Some(masks));
        for (i, (g, w)) in got.iter().zip(acted).enumerate() {
            assert!(
                (g - w).abs() < 2e-5,
                "batch {b} row {i}: read back {g}, acted {w}"
            );
        }
        // The same rows on one state per env (every seat's moves through
        // one memory): not what was acted.
        let one =
            PolicyState::from_values(width, E, a.before[b * T][..E * width].to_vec()).unwrap();
        let mixed = sebulba_fused::Sequence {
            seats: None,
            state: &one,
            ..seq
        };
        let got = trainer.log_probs(&Steps::sequence(&obs, mixed), &actions, Some(masks));
        for (g, w) in got.iter().zip(acted) {
            worst_without_seats = worst_without_seats.max((g - w).abs());
        }
    }
    assert!(
        worst_without_seats > 1e-2,
        "without seats: {worst_without_seats}"
    );
}
