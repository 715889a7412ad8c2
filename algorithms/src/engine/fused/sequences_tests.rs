//! A network with memory's passes over an update's rows: the rows of env
//! sequences read in time order from each env's state (in chunks of whole
//! sequences), and a cut episode's final observation read from the state
//! after its env's last step; against acting step by step and against
//! burn's model.

use super::cpu::{Fused, Output};
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
