use super::*;
use crate::data::UpdateData;
use crate::engine::EngineChoice;
use crate::engine::burn::state_of_model;
use crate::trajectory::GameRows;
use crate::trajectory::TrajectoryBuilder;
use burn::module::Param;
use burn::tensor::{Tensor, TensorData};
use sebulba_core::CpuAutodiff;
use sebulba_core::config::LagCorrection;
use sebulba_core::model::{ActorCritic, ModelSpec};

#[test]
fn explained_variance_of_perfect_and_constant_critics() {
    assert!((explained_variance(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]) - 1.0).abs() < 1e-12);
    // values 0: ev = 0
    assert!(explained_variance(&[0.0, 0.0, 0.0], &[1.0, 2.0, 3.0]).abs() < 1e-12);
}

fn batch(seed: u32) -> Trajectory {
    let (t, e, d) = (8usize, 3usize, 4usize);
    let f = |k: usize, m: u32| -> Vec<f32> {
        (0..k)
            .map(|i| (((i as u32 * 31 + seed * 17 + m) % 23) as f32 - 11.0) / 7.0)
            .collect()
    };
    TrajectoryBuilder::new(t, e, d)
        .observations(f((t + 1) * e * d, 1))
        .discrete((0..t * e).map(|i| (i % 2) as i32).collect())
        .log_probs(vec![-0.69; t * e])
        .rewards(f(t * e, 2))
        .truncate(5, f(d, 3))
        .terminate(13)
        .build()
}

/// A CartPole model whose value is `tanh(obs[0])`: one-unit critic
/// torso reading the first feature, value head 1 x that, no biases.
fn tanh_critic(spec: &ModelSpec) -> ActorCritic<CpuAutodiff> {
    let dev = Default::default();
    let mut m = spec.init::<CpuAutodiff>(&dev);
    let critic = m.critic.as_mut().expect("separate critic");
    let t = |v: Vec<f32>, shape: [usize; 2]| {
        Param::from_tensor(Tensor::from_data(TensorData::new(v, shape), &dev))
    };
    let zero = |p: &Param<Tensor<CpuAutodiff, 1>>| Param::from_tensor(p.val().zeros_like());
    critic.layers[0].weight = t(vec![1.0, 0.0, 0.0, 0.0], [4, 1]);
    critic.layers[0].bias = critic.layers[0].bias.as_ref().map(zero);
    m.value_head.weight = t(vec![1.0], [1, 1]);
    m.value_head.bias = m.value_head.bias.as_ref().map(zero);
    m
}

/// The critic of [`tanh_critic`] on batch `b`: V of an observation row, and
/// V of each step's true final observation where it was truncated.
fn tanh_values(b: &Trajectory) -> (impl Fn(usize) -> f64 + '_, Vec<Option<f64>>) {
    let v = |row: usize| (b.observations.to_f32(row * 4..row * 4 + 1)[0] as f64).tanh();
    let mut finals = b.final_observations.as_f32().unwrap().chunks(4);
    let final_value = b
        .truncated
        .iter()
        .map(|&tr| (tr == 1).then(|| (finals.next().unwrap()[0] as f64).tanh()))
        .collect();
    (v, final_value)
}

/// PPO over [`tanh_critic`], on the fused engine when `fused`.
fn tanh_ppo(spec: &ModelSpec, cfg: &RunConfig, fused: bool) -> Trainer {
    let state = state_of_model(spec, &tanh_critic(spec)).unwrap();
    let choice = match fused {
        true => EngineChoice::Fused { threads: 1 },
        false => EngineChoice::cpu(),
    };
    Trainer::new(spec, &state, &choice, cfg.ppo.adam_eps, 5).unwrap()
}

/// GAE written out independently: per env, backwards in time.
fn reference_gae(b: &Trajectory, gamma: f64, lambda: f64) -> (Vec<f64>, Vec<f64>) {
    let (t_len, e_len) = (b.rollout_length, b.envs_per_actor);
    let (v, final_value) = tanh_values(b);
    let (mut adv, mut values) = (vec![0.0; t_len * e_len], vec![0.0; t_len * e_len]);
    for e in 0..e_len {
        let mut next = 0.0;
        for t in (0..t_len).rev() {
            let i = t * e_len + e;
            let (boot, carry) = match (b.terminated[i], final_value[i]) {
                (1, _) => (0.0, 0.0),
                (_, Some(fv)) => (fv, 0.0),
                _ => (v(i + e_len), next),
            };
            next = b.rewards[i] as f64 + gamma * boot - v(i) + gamma * lambda * carry;
            adv[i] = next;
            values[i] = v(i);
        }
    }
    let ret = adv.iter().zip(&values).map(|(a, v)| a + v).collect();
    (adv, ret)
}

#[test]
fn values_gae_and_normalisation_follow_an_independent_computation_in_both_engines() {
    let mut cfg = RunConfig::preset("CartPole-v1").unwrap();
    cfg.network.hidden = vec![1];
    cfg.ppo.adv_norm = AdvantageNorm::Off;
    let spec = ModelSpec::new(
        &sebulba_envs::env_spec("CartPole-v1").unwrap(),
        &cfg.network,
    )
    .unwrap();
    let batches = [batch(1), batch(2)];
    let (gamma, lambda) = (cfg.ppo.gamma, cfg.ppo.gae_lambda);
    let mut want_adv = Vec::new();
    let mut want_ret = Vec::new();
    for b in &batches {
        let (a, r) = reference_gae(b, gamma, lambda);
        want_adv.extend(a);
        want_ret.extend(r);
    }
    for fused in [false, true] {
        let mut ppo = tanh_ppo(&spec, &cfg, fused);
        let engine = ppo.engine();
        let mut norms = Normalizers::new(&cfg, 4);
        let out = prepare(&batches, 0, &mut ppo, &mut norms, &cfg, 4);
        let close = |got: &[f32], want: &[f64]| {
            got.len() == want.len()
                && got
                    .iter()
                    .zip(want)
                    .all(|(g, w)| (*g as f64 - w).abs() < 1e-5)
        };
        assert!(
            close(&out.data.advantages, &want_adv),
            "{engine}: {:?}",
            out.data.advantages
        );
        assert!(close(&out.data.returns, &want_ret), "{engine}");
        // Normalised once over all 48 samples of the update: mean 0, std 1.
        cfg.ppo.adv_norm = AdvantageNorm::Update;
        let mut norms = Normalizers::new(&cfg, 4);
        let normed = prepare(&batches, 0, &mut ppo, &mut norms, &cfg, 4)
            .data
            .advantages;
        cfg.ppo.adv_norm = AdvantageNorm::Off;
        let n = want_adv.len() as f64;
        let mean = want_adv.iter().sum::<f64>() / n;
        let std = (want_adv.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / n).sqrt();
        let want: Vec<f64> = want_adv.iter().map(|a| (a - mean) / std).collect();
        assert_eq!(normed.len(), 48);
        assert!(close(&normed, &want), "{engine}: {normed:?}");
    }
}

/// V-trace from the paper's sum form, with the critic V(s) = tanh(s0) and
/// rho-bar = c-bar = 1: `v_s = V(x_s) + sum_{t>=s} gamma^(t-s) (prod_{s<=i<t} c_i)
/// rho_t delta_t` over the rest of the episode inside the batch, and
/// `A_s = r_s + gamma (lambda v_{s+1} + (1 - lambda) V(x_{s+1})) - V(x_s)`
/// (the next value 0 after a termination, V(final) after a truncation) with
/// the weight `rho_s`.
fn reference_vtrace(
    b: &Trajectory,
    log_pi: &[f32],
    gamma: f64,
    lambda: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (t_len, e_len) = (b.rollout_length, b.envs_per_actor);
    let (v, final_value) = tanh_values(b);
    let ratio = |i: usize| ((log_pi[i] - b.log_probs[i]) as f64).exp();
    // The next state's value, and whether the episode goes on in the batch.
    let next = |i: usize, t: usize| match (b.terminated[i], final_value[i]) {
        (1, _) => (0.0, false),
        (_, Some(fv)) => (fv, false),
        _ => (v(i + e_len), t + 1 < t_len),
    };
    let delta = |i: usize, t: usize| b.rewards[i] as f64 + gamma * next(i, t).0 - v(i);
    let n = t_len * e_len;
    let mut targets = vec![0.0; n];
    for e in 0..e_len {
        for s in 0..t_len {
            let (mut sum, mut weight) = (0.0, 1.0);
            for t in s..t_len {
                let i = t * e_len + e;
                sum += gamma.powi((t - s) as i32) * weight * ratio(i).min(1.0) * delta(i, t);
                weight *= lambda * ratio(i).min(1.0);
                if !next(i, t).1 {
                    break;
                }
            }
            targets[s * e_len + e] = v(s * e_len + e) + sum;
        }
    }
    let adv = (0..n)
        .map(|i| {
            let t = i / e_len;
            let (boot, goes_on) = next(i, t);
            let next_value = if goes_on {
                lambda * targets[i + e_len] + (1.0 - lambda) * boot
            } else {
                boot
            };
            b.rewards[i] as f64 + gamma * next_value - v(i)
        })
        .collect();
    let rho = (0..n).map(|i| ratio(i).min(1.0)).collect();
    (adv, targets, rho)
}

/// With `ppo.lag_correction = vtrace`, batches one version behind get
/// V-trace targets and advantages (against the sum form above, with the
/// current policy's log-probabilities through the actor's own code path) and
/// the current policy's log-probabilities as the ratio's reference; batches
/// of the current version get plain GAE and keep the actor's. Both engines.
#[test]
fn lagged_batches_get_vtrace_against_an_independent_computation_in_both_engines() {
    let mut cfg = RunConfig::preset("CartPole-v1").unwrap();
    cfg.network.hidden = vec![1];
    cfg.ppo.adv_norm = AdvantageNorm::Off;
    cfg.ppo.lag_correction = LagCorrection::Vtrace;
    let spec = ModelSpec::new(
        &sebulba_envs::env_spec("CartPole-v1").unwrap(),
        &cfg.network,
    )
    .unwrap();
    let mut batches = [batch(1), batch(2)];
    for b in &mut batches {
        // Behaviour log-probabilities around ln 0.5, off by up to +-0.6: the
        // ratios straddle the truncation at 1.
        for (i, lp) in b.log_probs.iter_mut().enumerate() {
            *lp = -0.69 + ((i % 5) as f32 - 2.0) * 0.3;
        }
    }
    let (gamma, lambda) = (cfg.ppo.gamma, cfg.ppo.gae_lambda);
    let close = |got: &[f32], want: &[f64]| {
        got.len() == want.len()
            && got
                .iter()
                .zip(want)
                .all(|(g, w)| (*g as f64 - w).abs() < 1e-5)
    };
    for fused in [false, true] {
        let mut ppo = tanh_ppo(&spec, &cfg, fused);
        let engine = ppo.engine();
        let (mut want_adv, mut want_ret, mut want_logp) = (vec![], vec![], vec![]);
        let mut want_w = vec![];
        let mut clipped = 0;
        for b in &batches {
            let rows = UpdateData {
                obs_dim: 4,
                observations: b.observations.to_f32(0..b.log_probs.len() * 4).into(),
                actions: b.actions.clone(),
                masks: None,
                old_log_probs: b.log_probs.clone(),
                advantages: vec![0.0; b.log_probs.len()],
                returns: vec![0.0; b.log_probs.len()],
                old_values: vec![0.0; b.log_probs.len()],
                weights: None,
                sequences: None,
            };
            let log_pi = crate::ppo::tests::actor_log_probs(&ppo, "CartPole-v1", &spec, &rows);
            clipped += log_pi
                .iter()
                .zip(&b.log_probs)
                .filter(|(p, m)| p > m)
                .count();
            let (a, r, w) = reference_vtrace(b, &log_pi, gamma, lambda);
            want_adv.extend(a);
            want_ret.extend(r);
            want_w.extend(w);
            want_logp.extend(log_pi.iter().map(|&x| x as f64));
        }
        assert!(
            clipped > 0 && clipped < 48,
            "{clipped} of 48 ratios above 1"
        );
        let mut norms = Normalizers::new(&cfg, 4);
        let out = prepare(&batches, 1, &mut ppo, &mut norms, &cfg, 4);
        assert_eq!(out.lag_corrected, 2, "{engine}");
        let d = &out.data;
        assert!(
            close(&d.advantages, &want_adv),
            "{engine}: {:?}",
            d.advantages
        );
        assert!(close(&d.returns, &want_ret), "{engine}: {:?}", d.returns);
        assert!(close(&d.old_log_probs, &want_logp), "{engine}");
        let weights = d.weights.as_deref().expect("weights");
        assert!(close(weights, &want_w), "{engine}: {weights:?}");
        // Lag 0: GAE, and the actor's log-probabilities.
        let out = prepare(&batches, 0, &mut ppo, &mut norms, &cfg, 4);
        assert_eq!(out.lag_corrected, 0);
        assert!(out.data.weights.is_none(), "{engine}: all weights 1");
        let (a, _) = reference_gae(&batches[0], gamma, lambda);
        assert!(close(&out.data.advantages[..24], &a), "{engine}");
        assert_eq!(out.data.old_log_probs[..24], batches[0].log_probs[..]);
    }
}

/// The update data keep each batch's `[T, E]` shape: the env sequences
/// with their episode starts (the row after a termination or a cut) and
/// their initial states, batch after batch; a game batch whose moves by
/// past versions were left out has no whole sequences.
#[test]
fn update_data_keep_the_env_sequences_with_their_starts() {
    let cfg = RunConfig::preset("CartPole-v1").unwrap();
    let spec = ModelSpec::new(
        &sebulba_envs::env_spec("CartPole-v1").unwrap(),
        &cfg.network,
    )
    .unwrap();
    let mut ppo = Trainer::fresh(&spec, 1e-5, 1, &EngineChoice::Fused { threads: 1 }).unwrap();
    let batches = [batch(1), batch(2)];
    let mut norms = Normalizers::new(&cfg, 4);
    let data = prepare(&batches, 0, &mut ppo, &mut norms, &cfg, 4).data;
    let s = data.sequences.as_ref().expect("whole sequences");
    assert_eq!((s.steps, s.envs, s.len(), s.starts.len()), (8, 3, 6, 48));
    // batch() cuts step 5 (t 1, env 2) and ends step 13 (t 4, env 1): the
    // next rows of those envs start episodes, in each batch.
    let mut want = vec![0u8; 48];
    for b in [0, 24] {
        want[b + 5 + 3] = 1;
        want[b + 13 + 3] = 1;
    }
    assert_eq!(s.starts, want);
    assert_eq!(s.row(4, 2), 24 + 2 * 3 + 1, "batch 1's env 1 at step 2");
    // Row r of the data is row r of the batches' observations, in order.
    let obs = data.observations.as_f32().unwrap();
    assert_eq!(
        obs[s.row(4, 2) * 4],
        batches[1].observations.to_f32(7 * 4..7 * 4 + 1)[0]
    );
    // A game batch with a move left out: the data are no longer whole
    // sequences (a network with memory cannot train on them).
    let mut game = batch(3);
    let mut past_moves = vec![0u8; 24];
    past_moves[7] = 1;
    game.game = Some(GameRows {
        player_ids: vec![0; 9 * 3],
        overlap_observations: Observations::default(),
        overlap_terminated: Vec::new(),
        past_moves,
    });
    let mut cfg = cfg;
    cfg.ppo.lag_correction = LagCorrection::Off;
    let out = prepare(&[batch(1), game], 0, &mut ppo, &mut norms, &cfg, 4);
    assert_eq!(out.data.len(), 47);
    assert!(out.data.sequences.is_none());
}

mod seats;
