//! A network with memory's passes over an update's rows: the rows of env
//! sequences read in time order from each env's state (in chunks of whole
//! sequences), and a cut episode's final observation read from the state
//! after its env's last step; against acting step by step and against
//! burn's model.

use super::super::cpu::{Fused, Output};
use crate::engine::burn::initial_state;
use burn::tensor::{Tensor, TensorData};
use sebulba_core::CpuBackend;
use sebulba_core::config::{CoreKind, NetworkConfig};
use sebulba_core::model::flat::write_params;
use sebulba_core::model::{ModelSpec, Sequence as BurnSequence};
use sebulba_envs::env_spec;
use sebulba_fused::net::Layout;
use sebulba_fused::{FusedPolicy, PolicyState, Sequence};

#[test]
// One sequence read four ways (chunked, acting, burn's model, burn's
// engine), compared: it reads best whole.
#[allow(clippy::too_many_lines)]
fn sequences_are_read_from_each_envs_state_and_cut_episodes_continue_them() {
    for (core, shared) in [(CoreKind::Lstm, false), (CoreKind::Gru, true)] {
        let net = NetworkConfig {
            hidden: vec![8],
            core,
            core_size: 6,
            shared_torso: shared,
            ..Default::default()
        };
        let spec = ModelSpec::new(&env_spec("CartPole-v1").unwrap(), &net).unwrap();
        let state = initial_state(&spec, 3);
        let mut fused = Fused::new(&spec, 1, 1e-5);
        fused.load(&state).unwrap();
        let (steps, envs, d, hd) = (7, 5, spec.obs_dim, spec.head_dim());
        let w = spec.arch().state_width();
        let in_seq = steps * envs;
        // The sequence's rows, then four final observations: three
        // continuing rows of the sequence, one continuing none.
        let continues = [3 * envs + 1, 2, (steps - 1) * envs + 4, usize::MAX];
        let rows = in_seq + continues.len();
        let obs: Vec<f32> = (0..rows * d)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.2)
            .collect();
        let starts: Vec<u8> = (0..in_seq).map(|r| u8::from(r % 6 == 5)).collect();
        let init: Vec<f32> = (0..envs * w)
            .map(|i| ((i * 13 % 11) as f32 - 5.0) * 0.15)
            .collect();
        let ps = PolicyState::from_values(w, envs, init.clone()).unwrap();
        let seq = Sequence {
            steps,
            envs,
            starts: &starts,
            state: &ps,
            continues: &continues,
            seats: None,
        };
        let heads = fused.heads_in(&obs, &seq);
        let values = fused.values_in(&obs, &seq);
        // Chunks of two envs' sequences (and the later rows two at a time)
        // give the same numbers.
        let chunked = fused.sequence_pass(&obs, &seq, Output::Heads, 2 * steps);
        assert_eq!(chunked, heads, "{core:?}");
        let chunked = fused.sequence_pass(&obs, &seq, Output::Values, 2 * steps);
        assert_eq!(chunked, values, "{core:?}");

        // Acting step by step with each env's state, zeroed where its
        // episode starts; a final observation from a copy of its env's state
        // after that step (a zero state when it continues none).
        let policy = FusedPolicy::new(&spec.arch(), fused.params().to_vec(), None).unwrap();
        let mut st = ps.clone();
        let mut after_step = Vec::new();
        for t in 0..steps {
            let r = t * envs..(t + 1) * envs;
            st.reset_ended(starts[r.clone()].iter().map(|&s| s == 1));
            let head = policy.step(&obs[r.start * d..r.end * d], &mut st, None);
            let want = &heads[r.start * hd..r.end * hd];
            for (a, b) in head.iter().zip(want) {
                assert!((a - b).abs() < 1e-6, "{core:?} step {t}: {a} vs {b}");
            }
            after_step.push(st.clone());
        }
        for (k, &c) in continues.iter().enumerate() {
            let mut from = match c {
                usize::MAX => policy.state(1),
                c => after_step[c / envs].select(std::iter::once(c % envs)),
            };
            let row = in_seq + k;
            let head = policy.step(&obs[row * d..(row + 1) * d], &mut from, None);
            for (a, b) in head.iter().zip(&heads[row * hd..(row + 1) * hd]) {
                assert!((a - b).abs() < 1e-6, "{core:?} final {k}: {a} vs {b}");
            }
        }

        // The sequence's values as burn's model reads it.
        let dev = Default::default();
        let mut m = spec.init::<CpuBackend>(&dev);
        write_params(&Layout::new(&spec.arch()), fused.params(), &mut m).unwrap();
        let keep: Vec<f32> = starts.iter().map(|&s| f32::from(1 - s)).collect();
        let burn_seq = BurnSequence {
            envs,
            keep: Tensor::from_data(TensorData::new(keep, [in_seq, 1]), &dev),
            state: Tensor::from_data(TensorData::new(init, [envs, w]), &dev),
            seats: None,
        };
        let x = Tensor::from_data(
            TensorData::new(obs[..in_seq * d].to_vec(), [in_seq, d]),
            &dev,
        );
        let want: Vec<f32> = m.value_in(x, Some(&burn_seq)).into_data().to_vec().unwrap();
        for (a, b) in values.iter().zip(&want) {
            assert!(
                (a - b).abs() < 1e-5 * (1.0 + b.abs()),
                "{core:?} value: {a} vs {b}"
            );
        }
    }
}

mod against_burn {
    //! A network with memory's minibatch of whole sequences on both
    //! engines: every gradient and loss term against burn's autodiff
    //! through time, whole updates, and a checkpoint that crosses.

    use super::super::{
        Case, Inner, data, fused_from, max_diff, model, on_threads, params, ppo_cfg, scalar,
        tensors_of,
    };
    use crate::data::{Loss, Minibatch, SeatRows, Sequences, UpdateData};
    use crate::engine::Steps;
    use crate::engine::burn::{Replica, Shard, ppo_losses};
    use crate::minibatches::Minibatches;
    use burn_optim::GradientsParams;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use sebulba_core::config::{AdvantageNorm, CoreKind, NetworkConfig};
    use sebulba_core::model::ModelSpec;
    use sebulba_core::model::flat::{Slot, param_slots, read_params};
    use sebulba_envs::ActionSpace;
    use sebulba_fused::{PolicyState, Sequence};

    const STEPS: usize = 12;
    const ENVS: usize = 4;

    fn cases() -> Vec<Case> {
        let spec = |core, shared, hidden: Vec<usize>| ModelSpec {
            input_scale: 1.0,
            obs_dim: 4,
            image: None,
            action_space: ActionSpace::Discrete { n: 3 },
            network: NetworkConfig {
                hidden,
                core,
                core_size: 6,
                shared_torso: shared,
                ..Default::default()
            },
        };
        vec![
            Case {
                name: "LSTM, separate torsos",
                spec: spec(CoreKind::Lstm, false, vec![8]),
                masks: false,
                flags: false,
                cfg: ppo_cfg(),
            },
            Case {
                name: "GRU, shared torso, masks",
                spec: spec(CoreKind::Gru, true, vec![8, 8]),
                masks: true,
                flags: false,
                cfg: ppo_cfg(),
            },
        ]
    }

    /// `n` samples as batches of `STEPS` steps of `ENVS` envs: episodes
    /// starting inside, and a state per sequence; for a game of `players`
    /// seats (more than 1), each row's mover drawn at random (some moves by
    /// others) and a state per seat of each sequence.
    fn game_data(case: &Case, n: usize, seed: u64, players: usize) -> UpdateData {
        let mut d = data(case, n, seed);
        let mut rng = StdRng::seed_from_u64(seed + 1);
        let width = case.spec.arch().state_width() * players;
        let count = n / STEPS;
        let initial = (0..count * width)
            .map(|_| rng.random_range(-0.8..0.8))
            .collect();
        d.sequences = Some(Sequences {
            steps: STEPS,
            envs: ENVS,
            starts: (0..n).map(|_| u8::from(rng.random_bool(0.1))).collect(),
            initial: PolicyState::from_values(width, count, initial).unwrap(),
            seats: (players > 1).then(|| SeatRows {
                players,
                movers: (0..n).map(|_| rng.random_range(0..players) as u8).collect(),
                // Some moves by past versions: in the sequences, out of the loss.
                others: (0..n).map(|_| u8::from(rng.random_bool(0.2))).collect(),
            }),
        });
        d
    }

    #[test]
    // One minibatch on both engines and one comparison: it reads best whole.
    #[allow(clippy::too_many_lines)]
    fn every_gradient_through_time_matches_burn_autodiff() {
        // One player, then a game's four seats, each remembering its own moves.
        let runs = |c: Case| [(c.clone(), 1, 1), (c.clone(), 3, 1), (c, 2, 4)];
        for (case, threads, players) in cases().into_iter().flat_map(runs) {
            let data = game_data(&case, STEPS * ENVS * 5, 3, players);
            let m = model(&case, &data);
            let seqs = data.sequences.as_ref().unwrap();
            let chosen = [7usize, 0, 13, 4, 19, 2];
            let idx: Vec<usize> = (0..STEPS)
                .flat_map(|t| chosen.iter().map(move |&q| (q, t)))
                .map(|(q, t)| seqs.row(q, t))
                .collect();
            let adv: Vec<f32> = idx.iter().map(|&i| data.advantages[i]).collect();
            let mut cfg = case.cfg.clone();
            cfg.max_grad_norm = 1e9;
            cfg.target_kl = 0.0;
            let shard = Shard {
                data: &data,
                idx: &idx,
                adv: &adv,
                noise: &[],
                minibatch: data.trained_in(&idx),
                sequences: &chosen,
                states: &seqs.initial,
            };
            let dist = case.spec.dist();
            let replica = Replica::new(m.clone(), cfg.adam_eps, Default::default(), None);
            let losses = ppo_losses(&m, replica.minibatch(&shard, &dist), &dist, &cfg, 0.2);
            let want = [
                scalar(losses.policy),
                scalar(losses.value),
                scalar(losses.entropy),
                scalar(losses.approx_kl),
                scalar(losses.clip_fraction),
            ];
            let grads = GradientsParams::from_grads(losses.total.backward(), &m);

            let mut f = fused_from(&case, &m, threads);
            let s = f.step(&Minibatch {
                data: &data,
                sequences: &chosen,
                states: &seqs.initial,
                idx: &idx,
                adv: &adv,
                noise: &[],
                lr: 0.0,
                max_grad_norm: cfg.max_grad_norm,
                loss: Loss::Ppo {
                    cfg: &cfg,
                    clip: 0.2,
                },
            });
            let got = [
                s.terms.policy_loss,
                s.terms.value_loss,
                s.terms.entropy,
                s.terms.approx_kl,
                s.terms.clip_fraction,
            ];
            for (what, (g, w)) in ["policy", "value", "entropy", "kl", "clip fraction"]
                .iter()
                .zip(got.iter().zip(&want))
            {
                assert!(
                    (g - w).abs() <= 2e-5 * (1.0 + w.abs()),
                    "{} ({threads} threads, {players} players): {what} {g} vs burn {w}",
                    case.name
                );
            }
            let mut core_seen = false;
            for Slot { id, tensor } in param_slots(f.layout(), &m).unwrap() {
                let shape = &tensor.shape;
                let burn: Vec<f32> = match shape.len() {
                    2 => grads
                        .get::<Inner, 2>(id)
                        .map(|g| g.into_data().to_vec().unwrap()),
                    _ => grads
                        .get::<Inner, 1>(id)
                        .map(|g| g.into_data().to_vec().unwrap()),
                }
                .unwrap_or_else(|| vec![0.0; tensor.len()]);
                let ours = &tensor.gather(f.grads());
                let scale = burn.iter().fold(1e-6f32, |a, &b| a.max(b.abs()));
                core_seen |= tensor.name.contains("weight_hh") && scale > 1e-4;
                for (k, (o, b)) in ours.iter().zip(&burn).enumerate() {
                    assert!(
                        (o - b).abs() <= 1e-4 * scale,
                        "{} ({threads} threads, {players} players): gradient of {} at {k}: fused {o} vs burn {b}",
                        case.name,
                        tensor.name
                    );
                }
            }
            assert!(
                core_seen,
                "{}: the core's recurrent weights learn",
                case.name
            );
            assert_eq!(f.params(), read_params(f.layout(), &m).unwrap());
        }
    }

    /// A game's moves by others (past versions, rule players) are read for
    /// their seats' sequences but are out of the loss: what the loss reads
    /// of them (advantage, return, old value, behaviour log-probability,
    /// action) changes nothing, while the same rows in the loss change the
    /// step.
    #[test]
    fn moves_by_others_are_read_in_their_seats_but_out_of_the_loss() {
        let case = cases().remove(0);
        let data = game_data(&case, STEPS * ENVS * 3, 5, 4);
        let m = model(&case, &data);
        let seqs = data.sequences.as_ref().unwrap();
        let chosen: Vec<usize> = (0..seqs.len()).collect();
        let idx: Vec<usize> = (0..STEPS)
            .flat_map(|t| chosen.iter().map(move |&q| (q, t)))
            .map(|(q, t)| seqs.row(q, t))
            .collect();
        let mut cfg = case.cfg.clone();
        cfg.target_kl = 0.0;
        let step = |data: &UpdateData| {
            let adv: Vec<f32> = idx.iter().map(|&i| data.advantages[i]).collect();
            let mut f = fused_from(&case, &m, 1);
            let s = f.step(&Minibatch {
                data,
                sequences: &chosen,
                states: &data.sequences.as_ref().unwrap().initial,
                idx: &idx,
                adv: &adv,
                noise: &[],
                lr: 0.0,
                max_grad_norm: 1e9,
                loss: Loss::Ppo {
                    cfg: &cfg,
                    clip: 0.2,
                },
            });
            (s.terms, f.grads().to_vec())
        };
        let (terms, grads) = step(&data);
        let others: Vec<usize> = (0..data.len()).filter(|&i| !data.trains(i)).collect();
        assert!(others.len() > 10, "{} moves by others", others.len());
        let mut changed = data.clone();
        let crate::trajectory::BatchActions::Discrete(actions) = &mut changed.actions else {
            unreachable!("discrete cases")
        };
        for &i in &others {
            changed.advantages[i] = 50.0;
            changed.returns[i] = -9.0;
            changed.old_values[i] = 3.0;
            changed.old_log_probs[i] = -0.01;
            actions[i] = (actions[i] + 1) % 3;
        }
        assert_eq!(step(&changed), (terms, grads.clone()), "out of the loss");
        // The same rows in the loss: another step, and other means.
        let mut all_in = changed.clone();
        if let Some(g) = all_in.sequences.as_mut().and_then(|s| s.seats.as_mut()) {
            g.others.fill(0);
        }
        let (terms_in, grads_in) = step(&all_in);
        assert_ne!(grads_in, grads);
        assert!(
            (terms_in.value_loss - terms.value_loss).abs() > 1e-3,
            "{terms_in:?}"
        );
    }

    /// `ppo.bptt` chunks: each starts from the state the whole sequence
    /// reaches before it, so that reading a chunk from its starting state
    /// gives the whole sequence's values, on both engines.
    #[test]
    fn chunks_start_from_the_state_the_whole_sequence_reaches() {
        const LEN: usize = 4;
        let chunks = STEPS / LEN;
        let runs = cases().into_iter().flat_map(|c| [(c.clone(), 1), (c, 4)]);
        for (case, players) in runs {
            // A game's chunks start from every seat's state.
            let data = game_data(&case, STEPS * ENVS * 2, 7, players);
            let m = model(&case, &data);
            let seqs = data.sequences.as_ref().unwrap();
            let movers = |r: std::ops::Range<usize>| match &seqs.seats {
                Some(g) => &g.movers[r],
                None => &[][..],
            };
            let d = data.obs_dim;
            let mut found = Vec::new();
            for threads in [0, 1] {
                let mut t = on_threads(&case.spec, &m, &case.cfg, 11, threads);
                let cut = Minibatches::new(t.batching, &data, 2, LEN).unwrap();
                assert!(cut.chunked(&data));
                assert_eq!(cut.units(), 2 * ENVS * chunks);
                let states = cut.starting_states(&mut t, &data).unwrap();
                assert_eq!(states.envs(), cut.units());
                for b in 0..2 {
                    let rows = b * STEPS * ENVS..(b + 1) * STEPS * ENVS;
                    let obs = data.observations.to_f32(rows.start * d..rows.end * d);
                    let initial = seqs.initial.select(b * ENVS..(b + 1) * ENVS);
                    let whole = Sequence {
                        steps: STEPS,
                        envs: ENVS,
                        starts: &seqs.starts[rows.clone()],
                        state: &initial,
                        continues: &[],
                        seats: seqs.seats_of(movers(rows.clone())),
                    };
                    let want = t.values(&Steps::sequence(&obs, whole));
                    for c in 0..chunks {
                        // Chunk c's rows are a contiguous block, time-major.
                        let block = c * LEN * ENVS..(c + 1) * LEN * ENVS;
                        let first = (b * chunks + c) * ENVS;
                        let state = states.select(first..first + ENVS);
                        let at = rows.start + block.start..rows.start + block.end;
                        let chunk = Sequence {
                            steps: LEN,
                            envs: ENVS,
                            starts: &seqs.starts[at.clone()],
                            state: &state,
                            continues: &[],
                            seats: seqs.seats_of(movers(at)),
                        };
                        let got = t.values(&Steps::sequence(
                            &obs[block.start * d..block.end * d],
                            chunk,
                        ));
                        let gap = max_diff(&got, &want[block]);
                        assert!(
                            gap < 1e-5,
                            "{}, {players} players, threads {threads}: chunk {c} {gap}",
                            case.name
                        );
                    }
                }
                found.push(states);
            }
            let gap = max_diff(found[0].values(), found[1].values());
            assert!(
                gap < 1e-5,
                "{} ({players} players): burn's and fused states {gap}",
                case.name
            );
        }
    }

    #[test]
    fn whole_updates_of_sequences_follow_the_burn_engine_and_cross_checkpoints() {
        // (bptt, refresh_states, players): the last a game's four seats,
        // with moves by others among them.
        let settings = [(0, false, 1), (4, false, 1), (3, true, 1), (4, true, 4)];
        for (case, (bptt, refresh_states, players)) in cases().into_iter().cycle().zip(settings) {
            let data = game_data(&case, STEPS * ENVS * 5, 5, players);
            let m = model(&case, &data);
            let mut cfg = case.cfg.clone();
            (cfg.bptt, cfg.refresh_states) = (bptt, refresh_states);
            cfg.epochs = 3;
            cfg.minibatches = 4;
            cfg.adv_norm = AdvantageNorm::Minibatch;
            let mut burn = on_threads(&case.spec, &m, &cfg, 11, 0);
            let mut fused = on_threads(&case.spec, &m, &cfg, 11, 1);
            let mut sharded = on_threads(&case.spec, &m, &cfg, 11, 2);
            let start = params(&burn);
            for _ in 0..2 {
                let a = crate::ppo::update(&mut burn, &data, &cfg, 3e-3, 0.2).unwrap();
                let b = crate::ppo::update(&mut fused, &data, &cfg, 3e-3, 0.2).unwrap();
                let c = crate::ppo::update(&mut sharded, &data, &cfg, 3e-3, 0.2).unwrap();
                assert_eq!(a.minibatch_steps, b.minibatch_steps);
                for (what, x, y, z) in [
                    (
                        "policy",
                        a.terms.policy_loss,
                        b.terms.policy_loss,
                        c.terms.policy_loss,
                    ),
                    (
                        "value",
                        a.terms.value_loss,
                        b.terms.value_loss,
                        c.terms.value_loss,
                    ),
                    ("grad norm", a.grad_norm, b.grad_norm, c.grad_norm),
                ] {
                    assert!(
                        (x - y).abs() <= 1e-3 * (1.0 + x.abs()),
                        "{}: {what} {x} vs {y}",
                        case.name
                    );
                    assert!(
                        (y - z).abs() <= 1e-5 * (1.0 + y.abs()),
                        "{}: {what} {y} vs {z}",
                        case.name
                    );
                }
            }
            let (pa, pb, pc) = (params(&burn), params(&fused), params(&sharded));
            let moved = max_diff(&pa, &start);
            assert!(moved > 1e-3, "{}: the update moved nothing", case.name);
            assert!(
                max_diff(&pa, &pb) < 0.02 * moved,
                "{}: fused apart from burn",
                case.name
            );
            assert!(
                max_diff(&pb, &pc) < 1e-4 * moved,
                "{}: threads apart",
                case.name
            );
            // The fused engine's checkpoint resumes on burn, and back.
            let saved = fused.checkpoint_state().unwrap();
            burn.load_state(&saved).unwrap();
            assert_eq!(params(&burn), pb);
            let back = burn.checkpoint_state().unwrap();
            fused.load_state(&back).unwrap();
            assert_eq!(params(&fused), pb);
            // What the fused engine publishes is the file burn writes of
            // the same parameters, with PyTorch's names for the core.
            let ours = fused.safetensors().unwrap();
            let burns = burn.safetensors().unwrap();
            assert_eq!(tensors_of(&ours), tensors_of(&burns), "{}", case.name);
            let names: Vec<String> = tensors_of(&ours).into_iter().map(|t| t.0).collect();
            for n in ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"] {
                assert!(names.contains(&format!("actor.core.0.{n}")), "{names:?}");
            }
        }
    }
}
