//! One update's arithmetic, in the order that keeps learner and actors in
//! agreement: the preparation (reward scale, values, GAE) and SGD use the
//! observation statistics the actors acted with, the ones published with the
//! weights; only then are the update's observations folded into the
//! statistics, which go out with the new weights. Folded in first, they made
//! the first step's ratio differ from 1 at zero lag: the clip was centred in
//! the wrong place, and approximate KL and clip fraction read high.

use super::{PpoStats, update};
use crate::engine::EngineError;
use crate::prepare::{Normalizers, Prepared, fold_obs_stats, prepare};
use crate::trainer::Trainer;
use crate::trajectory::Trajectory;
use sebulba_core::config::RunConfig;
use tracing::info_span;

/// The learning rate and clip range of one update (after annealing).
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub lr: f64,
    pub clip: f64,
}

/// Prepares `batches` (taken at policy `version`), runs SGD on them, then
/// updates the observation statistics for the next version.
pub fn train(
    batches: &[Trajectory],
    version: u64,
    trainer: &mut Trainer,
    norms: &mut Normalizers,
    cfg: &RunConfig,
    obs_dim: usize,
    schedule: Schedule,
) -> Result<(Prepared, PpoStats), EngineError> {
    let prepared =
        info_span!("prepare").in_scope(|| prepare(batches, version, trainer, norms, cfg, obs_dim));
    let (lr, clip) = (schedule.lr, schedule.clip);
    let stats = info_span!("sgd", epochs = cfg.ppo.epochs)
        .in_scope(|| update(trainer, &prepared.data, &cfg.ppo, lr, clip))?;
    fold_obs_stats(batches, trainer, norms, obs_dim);
    Ok((prepared, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::UpdateData;
    use crate::engine::EngineChoice;
    use crate::trajectory::{BatchActions, TrajectoryBuilder};
    use sebulba_core::model::ModelSpec;
    use sebulba_envs::ActionSpace;

    /// A batch of `env_id` whose observations are far from mean 0, std 1 (so
    /// normalisation matters; `shift` moves them further), with the
    /// behaviour log-probabilities the actor
    /// computes with the weights `ppo` publishes now.
    fn zero_lag_batch(
        env_id: &str,
        ppo: &Trainer,
        spec: &ModelSpec,
        seed: usize,
        shift: f32,
    ) -> Trajectory {
        let (t, e, d) = (16usize, 4usize, spec.obs_dim);
        let obs: Vec<f32> = (0..(t + 1) * e * d)
            .map(|i| 3.0 + shift + 2.5 * ((((i + seed) * 37) % 23) as f32 - 11.0) / 11.0)
            .collect();
        let n = t * e;
        let discrete = matches!(spec.action_space, ActionSpace::Discrete { .. });
        let actions = if discrete {
            BatchActions::Discrete((0..n).map(|i| ((i + seed) % 2) as i32).collect())
        } else {
            BatchActions::Continuous((0..n).map(|i| ((i * 7 % 5) as f32 - 2.0) / 2.5).collect())
        };
        let rows = UpdateData {
            obs_dim: d,
            observations: obs[..n * d].to_vec().into(),
            actions: actions.clone(),
            masks: None,
            old_log_probs: vec![0.0; n],
            advantages: vec![0.0; n],
            returns: vec![0.0; n],
            old_values: vec![0.0; n],
            weights: None,
            sequences: None,
        };
        let log_probs = crate::ppo::tests::actor_log_probs(ppo, env_id, spec, &rows);
        let built = TrajectoryBuilder::new(t, e, d)
            .observations(obs)
            .log_probs(log_probs)
            .rewards((0..n).map(|i| (i % 3) as f32).collect());
        match actions {
            BatchActions::Discrete(a) => built.discrete(a),
            BatchActions::Continuous(a) => built.continuous(a),
        }
        .build()
    }

    /// With observation normalisation on, learning rate 0 and batches made by
    /// the current weights, every step's ratio is 1 (approximate KL ~ 0,
    /// nothing clipped), in both engines, version after version; the
    /// statistics still move on between versions.
    #[test]
    fn at_zero_lag_with_obs_norm_the_ratio_is_one_in_both_engines() {
        for env_id in ["CartPole-v1", "Pendulum-v1"] {
            for fused in [false, true] {
                let mut cfg = RunConfig::preset(env_id).unwrap();
                cfg.network.obs_norm = true;
                cfg.ppo.scale_rewards = false;
                (cfg.ppo.epochs, cfg.ppo.minibatches) = (2, 2);
                let env = sebulba_envs::env_spec(env_id).unwrap();
                let spec = ModelSpec::new(&env, &cfg.network).unwrap();
                let choice = match fused {
                    true => EngineChoice::Fused { threads: 1 },
                    false => EngineChoice::cpu(),
                };
                let mut ppo = Trainer::fresh(&spec, cfg.ppo.adam_eps, 3, &choice).unwrap();
                let engine = ppo.engine();
                let mut norms = Normalizers::new(&cfg, spec.obs_dim);
                let train = |ppo: &mut Trainer,
                             norms: &mut Normalizers,
                             batches: &[Trajectory],
                             version,
                             lr| {
                    let schedule = Schedule { lr, clip: 0.2 };
                    let o = spec.obs_dim;
                    train(batches, version, ppo, norms, &cfg, o, schedule)
                        .unwrap()
                        .1
                };
                // A trained policy, far from the initial near-uniform one, so
                // that statistics the actors did not use would show.
                for version in 0..6 {
                    let batches = [
                        zero_lag_batch(env_id, &ppo, &spec, version, 0.0),
                        zero_lag_batch(env_id, &ppo, &spec, version + 100, 0.0),
                    ];
                    train(&mut ppo, &mut norms, &batches, version as u64, 0.005);
                }
                for version in 6..9 {
                    let batches = [
                        zero_lag_batch(env_id, &ppo, &spec, version, 0.0),
                        zero_lag_batch(env_id, &ppo, &spec, version + 100, 0.0),
                    ];
                    let stats = train(&mut ppo, &mut norms, &batches, version as u64, 0.0);
                    assert!(
                        stats.terms.approx_kl.abs() < 1e-6 && stats.terms.clip_fraction == 0.0,
                        "{env_id} on {engine}, version {version}: {stats:?}"
                    );
                }
                // Folded in before SGD (the old order), the statistics the
                // learner uses are not the ones the actor used: the check can fail.
                let shifted = [zero_lag_batch(env_id, &ppo, &spec, 9, 1.0)];
                let before = norms.obs.clone();
                fold_obs_stats(&shifted, &mut ppo, &mut norms, spec.obs_dim);
                assert_ne!(norms.obs, before, "the statistics moved");
                let stats = train(&mut ppo, &mut norms, &shifted, 9, 0.0);
                eprintln!(
                    "{env_id} on {engine}, old order: approx_kl {}",
                    stats.terms.approx_kl
                );
                assert!(
                    stats.terms.approx_kl > 1e-6,
                    "{env_id} on {engine}: stale statistics went unnoticed: {stats:?}"
                );
            }
        }
    }
}
